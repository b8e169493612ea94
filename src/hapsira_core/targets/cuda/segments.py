"""`item_column`, `row_max`, `row_offsets` and `bucket_sort` on the GPU: per-row work that one thread per
row would do serially, spread over a block per row (and a thread per entry), in the
GPU's memory.

`bucket_sort` is a counting sort of each row's entries by bucket: a histogram (atomic
adds), a block scan per row, a scatter (atomic adds on the bucket's next slot) and a
shift of the starts back by one bucket. Within a bucket the order is the atomics',
not the entries' (the host targets' is stable): callers must not depend on it.
`row_offsets` is a copy of each row one place on and the same block scan per row.
Why: one thread per row walking all its entries and buckets would be a large share of
`hapsira_cowell.conjunctions`' broad phase.
"""

import numpy as np
from numba import cuda, float64, int64

from .compact import BLOCK, _block_scan, block_scratch
from .launch import _small_grids_allowed
from .surface import SIMULATOR

#: threads per block of the flat (one thread per entry) kernels
FLAT = 256


@cuda.jit
def _row_max(values, out, scratch):
    """``out[r] = max(values[r])``, block ``r`` (its threads strided over the row)."""
    if SIMULATOR:
        shared = scratch[cuda.blockIdx.x]  # (`block_scratch`)
    else:
        shared = cuda.shared.array(BLOCK, float64)
    row = cuda.blockIdx.x
    t = cuda.threadIdx.x
    best = -np.inf
    for c in range(t, values.shape[1], BLOCK):
        best = max(best, values[row, c])
    shared[t] = best
    cuda.syncthreads()
    step = BLOCK // 2
    while step > 0:
        if t < step:
            shared[t] = max(shared[t], shared[t + step])
        cuda.syncthreads()
        step //= 2
    if t == 0:
        out[row] = shared[0]


@cuda.jit
def _fill_zero(array):
    """Every entry of the 2-D ``array`` 0, a thread each (not through a reshaped view:
    the simulator's ``reshape`` is a copy)."""
    i = cuda.grid(1)
    columns = array.shape[1]
    if i < array.shape[0] * columns:
        row = i // columns
        array[row, i - row * columns] = 0


@cuda.jit
def _histogram(buckets, starts):
    """``starts[r, b + 1]`` += 1 for each entry of row ``r`` in bucket ``b``."""
    i = cuda.grid(1)
    n = buckets.shape[1]
    if i < buckets.shape[0] * n:
        row = i // n
        cuda.atomic.add(starts, (row, buckets[row, i - row * n] + 1), 1)


@cuda.jit(device=True)
def _run(row_length):
    """This thread's consecutive run of a row of ``row_length``: (first, stop)."""
    per = (row_length + BLOCK - 1) // BLOCK
    first = min(cuda.threadIdx.x * per, row_length)
    return first, min(first + per, row_length)


@cuda.jit
def _scan_rows(starts, scratch):
    """Each row of ``starts`` (block ``r``) replaced by its inclusive prefix sum."""
    if SIMULATOR:
        shared = scratch[cuda.blockIdx.x]  # (`block_scratch`)
    else:
        shared = cuda.shared.array(BLOCK, int64)
    row = cuda.blockIdx.x
    first, stop = _run(starts.shape[1])
    total = int64(0)
    for c in range(first, stop):
        total += starts[row, c]
    running = _block_scan(shared, total)
    for c in range(first, stop):
        running += starts[row, c]
        starts[row, c] = running


@cuda.jit
def _scatter(buckets, starts, order):
    """Each entry to the next free slot of its bucket (``starts[r, b]``, advanced)."""
    i = cuda.grid(1)
    n = buckets.shape[1]
    if i < buckets.shape[0] * n:
        row = i // n
        entry = i - row * n
        slot = cuda.atomic.add(starts, (row, buckets[row, entry]), 1)
        order[row, slot] = entry


@cuda.jit
def _shift_rows(starts):
    """Each row of ``starts`` one place on (``starts[r, 0] = 0``): after `_scatter`
    bucket ``b``'s next free slot is bucket ``b + 1``'s start."""
    row = cuda.blockIdx.x
    first, stop = _run(starts.shape[1])
    before = starts[row, first - 1] if 0 < first < stop else 0
    cuda.syncthreads()  # every run's predecessor read before any run moves
    for c in range(stop - 1, first, -1):
        starts[row, c] = starts[row, c - 1]
    if first < stop:
        starts[row, first] = before


@cuda.jit
def _shifted(counts, offsets):
    """``offsets[r, c] = counts[r, c - 1]`` (0 for ``c = 0``), a thread each."""
    i = cuda.grid(1)
    columns = offsets.shape[1]
    if i < offsets.shape[0] * columns:
        row = i // columns
        c = i - row * columns
        offsets[row, c] = counts[row, c - 1] if c > 0 else 0


@cuda.jit
def _last_column(offsets, out):
    """``out[r] = offsets[r, -1]``, a thread each."""
    row = cuda.grid(1)
    if row < offsets.shape[0]:
        out[row] = offsets[row, offsets.shape[1] - 1]


@cuda.jit
def _iota(column):
    """``column[i, 0] = i``, a thread each."""
    i = cuda.grid(1)
    if i < column.shape[0]:
        column[i, 0] = i


def item_column(count):
    """``(count, 1)`` int32 ``0, 1, ...`` made in the GPU's memory, left there
    (`hapsira_core.targets`): nothing made on the host or copied across."""
    column = cuda.device_array((count, 1), np.int32)
    if count:
        with _small_grids_allowed():
            _iota[(count + FLAT - 1) // FLAT, FLAT](column)
    return column


def row_max(values):
    """The largest entry of each row of ``values`` ``(R, C)`` float64 in the GPU's
    memory: ``(R,)``, left there (`hapsira_core.targets`)."""
    out = cuda.device_array(values.shape[0], np.float64)
    if values.shape[0]:
        with _small_grids_allowed():
            _row_max[values.shape[0], BLOCK](values, out,
                                             block_scratch(values.shape[0], np.float64))
    return out


def row_offsets(counts):
    """Each row of ``counts`` ``(R, C)`` int32 in the GPU's memory as running sums before
    each entry (`hapsira_core.targets`): ``offsets`` ``(R, C + 1)`` int32, left there (0
    first, the row's total last: a shifted copy, then `_scan_rows`), and the largest row
    total (an int, on the host: the rows' totals cross, ``R`` numbers)."""
    rows, columns = counts.shape
    offsets = cuda.device_array((rows, columns + 1), np.int32)
    if rows == 0:
        return offsets, 0
    totals = cuda.device_array(rows, np.int32)
    with _small_grids_allowed():
        cells = rows * (columns + 1)
        _shifted[(cells + FLAT - 1) // FLAT, FLAT](counts, offsets)
        _scan_rows[rows, BLOCK](offsets, block_scratch(rows, np.int64))
        _last_column[(rows + FLAT - 1) // FLAT, FLAT](offsets, totals)
    return offsets, int(totals.copy_to_host().max())


def bucket_sort(buckets, size):
    """Each row's entries sorted by bucket, in the GPU's memory (`hapsira_core.targets`).

    ``buckets`` ``(R, C)`` int32, each in ``0 .. size - 1``. Returns ``order`` ``(R, C)``
    int32, each row's entry indices grouped by bucket in bucket order (within a bucket
    in no set order), and ``starts`` ``(R, size + 1)`` int32, where each bucket's
    entries begin in ``order`` (the last, the row's length), both left in the GPU's
    memory."""
    rows, columns = buckets.shape
    order = cuda.device_array((rows, columns), np.int32)
    starts = cuda.device_array((rows, size + 1), np.int32)
    entries = rows * columns
    if rows == 0:
        return order, starts
    with _small_grids_allowed():
        _fill_zero[(rows * (size + 1) + FLAT - 1) // FLAT, FLAT](starts)
        if entries:
            _histogram[(entries + FLAT - 1) // FLAT, FLAT](buckets, starts)
        _scan_rows[rows, BLOCK](starts, block_scratch(rows, np.int64))
        if entries:
            _scatter[(entries + FLAT - 1) // FLAT, FLAT](buckets, starts, order)
        _shift_rows[rows, BLOCK](starts)
    return order, starts
