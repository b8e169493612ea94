"""``compact_rows`` (`hapsira_core.targets`): bounded rows of a kernel's entries gathered
where they are (on cuda on the GPU, the simulator's too), equal to the host compaction
the conjunction screen ran before (`hapsira_cowell.propagation.conjunctions._candidates`)."""

import numpy as np
import pytest

from hapsira_core import settings
from hapsira_core.targets import active

#: rows enough to span several tiles of the cuda compaction (2,048 rows; the simulator's
#: 256)
ROWS = 700 if settings.cuda_simulator_enabled() else 5000


def host_compaction(pairs, counts):
    """The screen's compaction on the host as it was (numpy on the copied rows): ``i``,
    ``j``, ``row`` of the entries of rows that fit, the rows that overflow and their
    counts, and the column sums."""
    cap = pairs.shape[1]
    found = counts[:, 0]
    hit = np.flatnonzero(found)
    fits = hit[found[hit] <= cap]
    kept = np.arange(cap)[None, :] < found[fits][:, None]
    over = hit[found[hit] > cap]
    return (pairs[fits, :, 0][kept], pairs[fits, :, 1][kept],
            np.broadcast_to(fits[:, None], kept.shape)[kept], over, found[over],
            counts.sum(axis=0, dtype=np.int64))


def kernel_rows(rows, cap, dtype, seed, busy=0.3):
    """``(pairs, counts)`` as a kernel leaves them: a fraction ``busy`` of the rows find
    1 to 4 entries (beyond ``cap``: counted, not written, the row past them garbage)."""
    rng = np.random.default_rng(seed)
    found = np.where(rng.random(rows) < busy, rng.integers(1, 5, rows), 0)
    counts = np.stack((found, rng.integers(0, 200, rows), rng.integers(0, 50, rows)),
                      axis=1).astype(dtype)
    pairs = rng.integers(-2 ** 31, 2 ** 31 - 1, (rows, cap, 2)).astype(np.int32)
    return pairs, counts


def check(pairs, counts):
    got = active.compact_rows(active.to_device(pairs), active.to_device(counts))
    assert all(isinstance(a, np.ndarray) and a.dtype == np.int64 for a in got)
    entries, overflow, sums = got
    assert entries.shape[1:] == (3,) and overflow.shape[1:] == (2,)
    i, j, row, over, found, total = host_compaction(pairs, counts)
    for column, expected in zip((*entries.T, *overflow.T, sums), (i, j, row, over, found,
                                                                  total)):
        np.testing.assert_array_equal(column, expected)
    return entries, overflow


@pytest.mark.parametrize("cap", [1, 2, 3])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_the_rows_compacted_where_they_are_equal_the_host_compaction(cap, dtype):
    """Rows of one to three entries' room, most rows empty, many overflowing (several
    entries with room for one): the same entries in the same order, the same rows to
    run again and the same sums, on every target."""
    pairs, counts = kernel_rows(ROWS, cap, dtype, seed=cap)
    entries, overflow = check(pairs, counts)
    assert len(entries) > 20 and len(overflow) > 10  # not vacuous


def test_rows_past_a_tile_and_edge_cases():
    """Rows that end inside a tile, rows without any entry, no rows at all."""
    check(*kernel_rows(ROWS // 2 + 1, 1, np.int32, seed=7, busy=0.9))
    entries, overflow = check(*kernel_rows(ROWS // 3, 2, np.int32, seed=8, busy=0.0))
    assert len(entries) == len(overflow) == 0
    entries, overflow, sums = active.compact_rows(
        active.to_device(np.empty((0, 1, 2), np.int32)), active.device_empty((0, 3), np.int32))
    assert entries.shape == (0, 3) and overflow.shape == (0, 2)
    np.testing.assert_array_equal(sums, [0, 0, 0])
