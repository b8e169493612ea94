"""`compact_rows` on the GPU: bounded rows of a kernel's entries gathered into one dense
array there, so that only the entries (and a few numbers per tile of rows) cross to the
host, never the rows themselves.

Two kernels over tiles of `TILE` consecutive rows, one block each, each thread a run of
`RUN` consecutive rows of its tile: `_tile_totals` counts each tile's entries,
overflowing rows and column sums; the host turns those (one short row per tile) into
each tile's first entry and first overflow slot (a prefix sum); then `_tile_gather`
places each thread's run after the runs before it (a scan across the block) and writes
its entries in row order. The result is the host targets' numpy compaction, in the same
order.
"""

import numpy as np
from numba import cuda, int64

from .launch import _small_grids_allowed
from .surface import SIMULATOR

#: Threads per block, and rows per thread: a tile is their product. Consecutive rows per
#: thread, so that one scan per tile places every thread's run (rows `BLOCK` apart, a
#: warp's reads consecutive, would need a scan per round of them). `BLOCK`: a power of
#: two (`_block_sum`). The simulator starts a Python thread per GPU thread of each block:
#: few threads there, and tiles of a few hundred rows, which tests cross.
BLOCK, RUN = (4, 64) if SIMULATOR else (256, 8)
TILE = BLOCK * RUN


@cuda.jit(device=True)
def _block_sum(shared, value):
    """The sum of ``value`` over the block's threads (each thread gets it); ``shared``
    is a `BLOCK` int64 working array, free again on return."""
    t = cuda.threadIdx.x
    shared[t] = value
    cuda.syncthreads()
    step = BLOCK // 2
    while step > 0:
        if t < step:
            shared[t] += shared[t + step]
        cuda.syncthreads()
        step //= 2
    total = shared[0]
    cuda.syncthreads()
    return total


@cuda.jit(device=True)
def _block_scan(shared, value):
    """The sum of ``value`` over the block's threads before this one (a Hillis-Steele
    scan); ``shared`` as for `_block_sum`."""
    t = cuda.threadIdx.x
    shared[t] = value
    cuda.syncthreads()
    step = 1
    while step < BLOCK:
        before = shared[t - step] if t >= step else 0
        cuda.syncthreads()
        shared[t] += before
        cuda.syncthreads()
        step *= 2
    inclusive = shared[t]
    cuda.syncthreads()
    return inclusive - value


@cuda.jit(device=True)
def _run_totals(counts, cap, first, stop):
    """``(entries, overflowing rows)`` of rows ``first`` to ``stop`` (stop excluded)."""
    kept = int64(0)
    over = int64(0)
    for row in range(first, stop):
        found = counts[row, 0]
        if found <= cap:
            kept += found
        else:
            over += 1
    return kept, over


def block_scratch(blocks, dtype):
    """Global memory that stands in for each block's shared array under the simulator
    (the kernels take row ``blockIdx.x``): the simulator's ``cuda.shared.array`` gives a
    block's threads one array per source line, but threads that reach the line at once
    can each make their own (it holds no lock), and a scan then reads another's garbage
    (seen in one of three runs of the screen's tests at the tests' thread switch
    interval). On a GPU a (1, 1) placeholder: the kernels use shared memory there."""
    return cuda.device_array((blocks, BLOCK) if SIMULATOR else (1, 1), dtype)


@cuda.jit
def _tile_totals(counts, cap, totals, scratch):
    """Row ``b`` of ``totals`` for tile ``b`` (block ``b``): its entries in rows that fit
    (``counts[r, 0] <= cap``), its rows that overflow, then each column's sum of
    ``counts``."""
    if SIMULATOR:
        shared = scratch[cuda.blockIdx.x]  # (`block_scratch`)
    else:
        shared = cuda.shared.array(BLOCK, int64)
    tile = cuda.blockIdx.x
    first = min(tile * TILE + cuda.threadIdx.x * RUN, counts.shape[0])
    stop = min(first + RUN, counts.shape[0])
    kept, over = _run_totals(counts, cap, first, stop)
    kept = _block_sum(shared, kept)
    over = _block_sum(shared, over)
    if cuda.threadIdx.x == 0:
        totals[tile, 0] = kept
        totals[tile, 1] = over
    for c in range(counts.shape[1]):
        column = int64(0)
        for row in range(first, stop):
            column += counts[row, c]
        column = _block_sum(shared, column)
        if cuda.threadIdx.x == 0:
            totals[tile, 2 + c] = column


@cuda.jit
def _tile_gather(pairs, counts, starts, entries, overflow, scratch):
    """Tile ``b``'s entries ``(pairs[r, m, 0], pairs[r, m, 1], r)`` to ``entries`` from
    row ``starts[b, 0]`` on, and its overflowing rows ``(r, counts[r, 0])`` to
    ``overflow`` from row ``starts[b, 1]`` on, both in row order."""
    if SIMULATOR:
        shared = scratch[cuda.blockIdx.x]  # (`block_scratch`)
    else:
        shared = cuda.shared.array(BLOCK, int64)
    tile = cuda.blockIdx.x
    cap = pairs.shape[1]
    # every thread takes part in the scans, those past the last row with nothing
    first = min(tile * TILE + cuda.threadIdx.x * RUN, counts.shape[0])
    stop = min(first + RUN, counts.shape[0])
    kept, over = _run_totals(counts, cap, first, stop)
    entry = starts[tile, 0] + _block_scan(shared, kept)
    slot = starts[tile, 1] + _block_scan(shared, over)
    for row in range(first, stop):
        found = counts[row, 0]
        if found <= cap:
            for m in range(found):
                entries[entry, 0] = pairs[row, m, 0]
                entries[entry, 1] = pairs[row, m, 1]
                entries[entry, 2] = row
                entry += 1
        else:
            overflow[slot, 0] = row
            overflow[slot, 1] = found
            slot += 1


def compact_rows(pairs, counts):
    """The entries of bounded rows, gathered on the GPU (`hapsira_core.targets`).

    ``pairs`` ``(R, cap, 2)`` and ``counts`` ``(R, k)`` integers, in the GPU's memory
    (read there in place; host arrays are copied in): row ``r`` holds
    ``counts[r, 0]`` entries, of which only the first ``cap`` are written. Returns numpy
    int64 arrays: ``entries`` ``(K, 3)``, ``(pairs[r, m, 0], pairs[r, m, 1], r)`` for
    every ``m < counts[r, 0]`` of every row with ``counts[r, 0] <= cap``, in row order;
    ``overflow`` ``(V, 2)``, ``(r, counts[r, 0])`` of every row with more than ``cap``,
    in row order; ``sums`` ``(k,)``, the sums of the columns of ``counts``. Only these,
    and 16 + 8 k bytes per `TILE` rows, cross to the host.
    """
    rows, columns = counts.shape
    cap = pairs.shape[1]
    if rows == 0:
        return (np.empty((0, 3), np.int64), np.empty((0, 2), np.int64),
                np.zeros(columns, np.int64))
    tiles = (rows + TILE - 1) // TILE
    totals = cuda.device_array((tiles, 2 + columns), np.int64)
    with _small_grids_allowed():
        _tile_totals[tiles, BLOCK](counts, cap, totals, block_scratch(tiles, np.int64))
    totals = totals.copy_to_host()
    # each tile's first entry and first overflow slot: the tiles before it
    starts = np.zeros((tiles, 2), np.int64)
    np.cumsum(totals[:-1, :2], axis=0, out=starts[1:])
    kept, over = (int(n) for n in totals[:, :2].sum(axis=0))
    # (i, j, row) in 12 bytes where rows fit int32, as i and j do
    kind = np.int32 if rows <= np.iinfo(np.int32).max else np.int64
    # (a row at least: no allocation of size zero)
    entries = cuda.device_array((max(kept, 1), 3), kind)
    overflow = cuda.device_array((max(over, 1), 2), np.int64)
    if kept or over:
        with _small_grids_allowed():
            _tile_gather[tiles, BLOCK](pairs, counts, cuda.to_device(starts), entries,
                                       overflow, block_scratch(tiles, np.int64))
    return (entries.copy_to_host()[:kept].astype(np.int64),
            overflow.copy_to_host()[:over], totals[:, 2:].sum(axis=0))
