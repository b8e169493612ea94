"""``item_column``, ``row_max``, ``row_offsets`` and ``bucket_sort`` (`hapsira_core.targets`): per-row work
where the rows are (on cuda a block per row, the simulator's too), against numpy on the
same rows."""

import numpy as np
import pytest

from hapsira_core import settings
from hapsira_core.targets import active

SIMULATED = settings.cuda_simulator_enabled()


@pytest.mark.parametrize("count", [0, 1, 255, 256, 257, 3000 if SIMULATED else 1_000_003])
def test_item_column_counts_from_zero(count):
    column = active.item_column(count)
    assert column.shape == (count, 1) and column.dtype == np.int32
    np.testing.assert_array_equal(active.to_host(column)[:, 0], np.arange(count))


@pytest.mark.parametrize("rows, columns", [(3, 1000), (1, 1), (40, 7), (0, 5), (5, 0)])
def test_row_max_is_numpys(rows, columns):
    values = np.random.default_rng(rows + columns).normal(0.0, 1e3, (rows, columns))
    got = active.to_host(active.row_max(active.to_device(values)))
    expected = values.max(axis=1, initial=-np.inf)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("rows, columns, size, spread", [
    (6, 300 if SIMULATED else 3000, 64, 64),  # every bucket some entries
    (4, 500, 1024, 1024),                     # most buckets empty
    (3, 200, 16, 1),                          # all in bucket 0
    (2, 50, 8, 8), (1, 1, 2, 2), (0, 10, 4, 4), (3, 0, 4, 4)])
def test_bucket_sort_groups_each_row_by_bucket(rows, columns, size, spread):
    rng = np.random.default_rng(size + rows)
    buckets = rng.integers(0, spread, (rows, columns)).astype(np.int32)
    order, starts = active.bucket_sort(active.to_device(buckets), size)
    order, starts = active.to_host(order), active.to_host(starts)
    assert order.shape == (rows, columns) and order.dtype == np.int32
    assert starts.shape == (rows, size + 1) and starts.dtype == np.int32
    for r in range(rows):
        counts = np.bincount(buckets[r], minlength=size)
        np.testing.assert_array_equal(starts[r], np.concatenate(([0], np.cumsum(counts))))
        # a permutation of the row's entries, grouped by bucket in bucket order (within a
        # bucket in the target's own order)
        np.testing.assert_array_equal(np.sort(order[r]), np.arange(columns))
        for b in np.flatnonzero(counts):
            members = order[r, starts[r, b]:starts[r, b + 1]]
            assert (buckets[r, members] == b).all()


@pytest.mark.parametrize("rows, columns, most", [
    (5, 300 if SIMULATED else 3000, 16),  # a row longer than a block's threads
    (3, 7, 1), (1, 1, 5), (4, 50, 0), (0, 6, 3), (2, 0, 3)])
def test_row_offsets_are_numpys_running_sums(rows, columns, most):
    counts = np.random.default_rng(rows + columns).integers(0, most + 1, (rows, columns))
    offsets, largest = active.row_offsets(active.to_device(counts.astype(np.int32)))
    offsets = active.to_host(offsets)
    assert offsets.shape == (rows, columns + 1) and offsets.dtype == np.int32
    expected = np.concatenate((np.zeros((rows, 1), np.int64), np.cumsum(counts, axis=1)), 1)
    np.testing.assert_array_equal(offsets, expected)
    assert isinstance(largest, int)
    assert largest == (int(expected[:, -1].max()) if rows else 0)
