"""The cuda kernel of an `ObjectKernel` and its launch: chunks of objects on two
streams, with per-stream buffers, and the join of column blocks on the GPU."""

import contextlib
import contextvars
import math
import threading
import warnings

import numba
import numpy as np
from numba import cuda

from ... import memory, settings
from ...kernels import kernel
from .._floats import ieee_python
from .surface import NRT_LIBRARY, SIMULATOR, is_simulated_array

if not SIMULATOR:
    from numba.cuda.cudadrv import driver
    from numba.cuda.cudadrv.devicearray import DeviceNDArray


#: Whether a helper thread touches the host output rows before their copies back
#: (`_Prefault`); read at each launch (benchmarks/investigations/cuda_host_copies.py
#: alternates it in one process).
PREFAULT = True
#: Host outputs smaller than this are left to the copies back: their few pages cost less
#: than starting a thread (calls of a few objects, as the conjunction screen makes many).
PREFAULT_MIN_BYTES = 1 << 20

#: The fetching kernel's last parameter: ``(1,)`` int64, objects taken past the grid.
FETCH_COUNTER = "hapsira_taken"


class FirstKernel:
    """Callbacks run once, when a call has queued its first kernel (`kernels_started`),
    or by `fire` (the end of the block, whatever happened)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._callbacks = []
        self.fired = False

    def then(self, callback):
        """Run ``callback()`` at the first kernel (now, if it was queued already)."""
        with self._lock:
            if not self.fired:
                self._callbacks.append(callback)
                return
        callback()

    def fire(self):
        """Run the callbacks (once; later calls do nothing)."""
        with self._lock:
            if self.fired:
                return
            self.fired = True
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()


#: The `FirstKernel` of the innermost `kernels_started` block of this context, if any.
_KERNELS_STARTED = contextvars.ContextVar("hapsira_kernels_started", default=None)


@contextlib.contextmanager
def kernels_started():
    """A `FirstKernel` that a kernel call inside this block fires once it has queued its
    first kernel (and that the block's end fires, in any case): host work of the
    caller's that waits for it leaves the first chunk's copies to the GPU alone, and
    starts while the GPU computes: host work beside those copies, or a thread started
    before them, delays the first kernel."""
    signal = FirstKernel()
    token = _KERNELS_STARTED.set(signal)
    try:
        yield signal
    finally:
        _KERNELS_STARTED.reset(token)
        signal.fire()


class ObjectKernel(kernel.ObjectKernel):
    TARGET = "cuda"
    JOINS_COLUMNS = True  # on the GPU, a chunk at a time (`_to_device`)

    def _row(self, arg, index="i"):
        if arg.interleaved:  # object i's rows: a strided view of core + (N,), coalesced
            return f"{arg.name}[{', '.join([':'] * len(arg.core))}, {index}]"
        return super()._row(arg, index)

    def __init__(self, body, args, recipe=None):
        super().__init__(body, args, recipe)
        #: whether the kernel fetches objects (``HAPSIRA_CUDA_FETCH``, read here, as the
        #: cache key made with the recipe read it): fixed for this kernel's code
        self.fetch = settings.CUDA_FETCH
        self._resident = {}  # (`resident_blocks`)
        self._events = threading.local()  # (`_timing_events`)

    def _kernel_source(self):
        names, rows, first_out = self._call_parts()
        if not self.fetch:
            return (f"def kernel({names}):\n"
                    f"    i = cuda.grid(1)\n"
                    f"    if i < {first_out}.shape[0]:\n"
                    f"        body({rows})\n")
        # Each thread solves the object of its own index first, then the next one
        # nobody has taken: past the grid, counted by an atomic on the launch's own
        # counter (zeroed). A grid of one thread per object is the plain kernel's work.
        return (f"def kernel({names}, {FETCH_COUNTER}):\n"
                f"    i = cuda.grid(1)\n"
                f"    while i < {first_out}.shape[0]:\n"
                f"        body({rows})\n"
                f"        i = cuda.gridsize(1) + cuda.atomic.add({FETCH_COUNTER}, 0, 1)\n")

    def _signature(self):
        signature = super()._signature()
        if self.fetch:  # the launch's counter of objects taken past the grid
            signature += (numba.types.Array(numba.types.int64, 1, "C"),)
        return signature

    def resident_blocks(self, kernel, arrays, block):
        """Blocks of ``block`` threads of ``kernel`` (launched with ``arrays``) that the
        GPU holds resident at once: its occupancy, blocks per SM times SMs (numba-cuda's
        ``max_cooperative_grid_blocks``, from the compiled kernel's registers and shared
        memory); the simulator says one. A fetching launch starts no more than these.
        Kept for the next call while the kernel has the same overloads (typing the
        arrays and asking the driver each time would delay each call's first kernel)."""
        if SIMULATOR:  # it keeps no overloads: any key gives its one-block answer
            return max(1, kernel.overloads[None].max_cooperative_grid_blocks(block))
        key = (id(kernel), block, len(kernel.overloads))
        known = self._resident.get(key)
        if known is None:  # the overload these arrays launch (compiled now if it is not yet)
            overload = kernel.compile(tuple(kernel.typeof_pyval(a) for a in arrays))
            known = self._resident[key] = max(1, overload.max_cooperative_grid_blocks(block))
        return known

    def _globals(self):
        return {"body": self.body, "cuda": cuda}

    def _source(self):
        return "from numba import cuda\n\n" + self._kernel_source()

    def _compile(self, function, cached):
        options = {"cache": cached}
        if settings.CUDA_MAX_REGISTERS and not SIMULATOR:
            options["max_registers"] = settings.CUDA_MAX_REGISTERS
        dispatcher = cuda.jit(function, **options)
        if cached and not SIMULATOR:  # the simulator has no numba cache to save into
            _save_linked_kernels_with_their_image(dispatcher)
        return dispatcher

    def _eager(self, compiled):
        if not SIMULATOR:  # the simulator compiles nothing: its cache entry is the module alone
            compiled.compile(self._signature())

    def _run(self, compiled, arrays):
        if SIMULATOR:  # the kernel's Python on threads that inherit this one's mode
            with ieee_python():
                self._launch(compiled, arrays)
        else:  # a GPU flushes no subnormal (numba-cuda compiles without ftz)
            self._launch(compiled, arrays)

    def _launch(self, kernel, arrays):
        """Copy in, run and copy out in chunks of objects on two alternating streams.

        Chunks bound the GPU memory in use whatever N is. Each chunk's results
        are copied back only after the next chunk has been queued, so that the
        GPU computes one chunk while the host waits for the other's copies
        (pageable host memory makes each copy block the host). Each stream's
        chunks share one set of buffers (`_Rows`). Shared arrays are copied
        once; arrays already on the device, inputs and outputs, are sliced in
        place (an output on the device is written there and never copied).
        """
        n = arrays[self.n_inputs].shape[0]
        if n == 0:
            return
        streams = _POOL.streams()
        # Freeing device memory (cuMemFree) waits for the whole GPU, and numba
        # frees whenever ten releases are pending: inside the loop that
        # stalled the host on the running chunk once per chunk or so.
        with cuda.defer_cleanup():
            shared, small = {}, {}
            for index, (arg, array) in enumerate(zip(self.args, arrays)):
                if (not arg.per_object or array.shape[0] == 1) and not arg.interleaved:
                    # (whole, in memory of its own: no chunk buffers)
                    if _packable(arg, array):
                        small[index] = array
                    else:
                        shared[index] = self._to_device(array, _Rows(0, streams[0]), index)
            chunk = min(n, self._chunk_size(arrays, {**shared, **small}))
            bounds = [(start, min(start + chunk, n)) for start in range(0, n, chunk)]
            if self.fetch:  # each chunk's counter of fetched objects, zeroed
                small[FETCH_COUNTER] = np.zeros(len(bounds), np.int64)
            packed = _Packed(small, streams[0])
            counters = packed.arrays.pop(FETCH_COUNTER, None)
            shared.update(packed.arrays)
            rows = [_Rows(chunk, stream) for stream in streams]
            block = settings.CUDA_BLOCK
            resident = None  # fetching: the blocks the GPU holds at once
            streams[0].synchronize()
            origin, *pairs = self._timing_events(len(bounds))
            origin.record(streams[0])
            timing = []  # (start, stop) events around each chunk's kernel
            queued = None  # the chunk whose results are still to be copied back
            outputs = self._host_outputs(arrays)
            prefault = (_Prefault(outputs, bounds) if PREFAULT and
                        sum(a.nbytes for a in outputs) >= PREFAULT_MIN_BYTES else None)
            for number, (start, stop) in enumerate(bounds):
                buffers = rows[number % 2]
                stream = buffers.stream
                device = []
                for index, (arg, array) in enumerate(zip(self.args, arrays)):
                    if index in shared:
                        device.append(shared[index])
                    elif arg.interleaved:  # a whole buffer: the kernel reads its columns
                        device.append(buffers.empty_interleaved(index, array.shape[1:],
                                                                array.dtype))
                    elif arg.output and not _on_device(array):
                        device.append(buffers.empty(index, stop - start, array.shape[1:],
                                                    array.dtype))
                    else:
                        device.append(self._to_device(array, buffers, index, start, stop))
                grid = (stop - start + block - 1) // block  # one thread per object
                if self.fetch:
                    device.append(_rows_of(counters, number, number + 1))
                    if resident is None:
                        resident = self.resident_blocks(kernel, device, block)
                    grid = min(grid, resident)  # each thread then fetches objects
                timing.append(pairs[number])
                timing[-1][0].record(stream)
                with _small_grids_allowed():
                    kernel[grid, block, stream](*device)
                timing[-1][1].record(stream)
                if number == 0:
                    if prefault is not None:
                        # Touching pages while the first chunk's inputs are copied in
                        # slows those copies and delays the first kernel. The first
                        # chunk's results are copied back after the second is queued.
                        prefault.start()
                    started = _KERNELS_STARTED.get()
                    if started is not None:
                        started.fire()
                if queued is not None:
                    self._copy_back(arrays, *queued, prefault)
                queued = (device, stream, start, stop, number)
            self._copy_back(arrays, *queued, prefault)
            for stream in streams:
                stream.synchronize()
            _POOL.keep([buffer for r in rows for buffer in r.buffers()] + packed.buffers())
        if not SIMULATOR:  # the simulator keeps no time
            # read when asked (benchmarks): each event's time is a driver call
            self._kernel_events = (origin, timing)

    def _timing_events(self, chunks):
        """``origin`` and a ``(start, stop)`` pair per chunk: CUDA events of this thread's
        calls of this kernel, made once and recorded again by each call (making and
        destroying them at each call's end would add host time to every call)."""
        kept = getattr(self._events, "kept", None)
        if kept is None:
            kept = self._events.kept = [cuda.event()]
        while len(kept) <= chunks:
            kept.append((cuda.event(), cuda.event()))
        return kept[:chunks + 1]

    @property
    def last_kernel_seconds(self):
        """Seconds the GPU spent in the last call's kernels (CUDA events, overlapping
        chunks counted once); None before a call, and in the simulator. Read it before
        the next call of this kernel in the same thread, which records its events again."""
        if getattr(self, "_kernel_events", None) is None:
            return None
        origin, timing = self._kernel_events
        return _busy_seconds([(origin.elapsed_time(a), origin.elapsed_time(b))
                              for a, b in timing])

    @last_kernel_seconds.setter
    def last_kernel_seconds(self, value):
        if value is not None:
            raise AttributeError("last_kernel_seconds is measured, not set")
        self._kernel_events = None

    def _chunk_size(self, arrays, shared):
        """Objects per launch: ``HAPSIRA_CUDA_CHUNK``, fewer if two chunks'
        rows (inputs and outputs, one chunk per stream) would take more than
        half of the GPU's free memory (many output times per object). Arrays
        already on the device take no buffer; all of them there: all objects."""
        row_bytes = sum(array.dtype.itemsize * int(np.prod(array.shape[1:]))
                        for index, array in enumerate(arrays)
                        if index not in shared and not _on_device(array))
        if not row_bytes:
            # every array already in the GPU's memory: no copy to pace, one launch
            # (chunks would cost many launches' host time, more than the kernel's own)
            return arrays[self.n_inputs].shape[0]
        context = cuda.current_context()
        free = memory.recent(_FREE_MEMORY, context, 4 * row_bytes * settings.CUDA_CHUNK,
                             FREE_MEMORY_S, lambda: context.get_memory_info()[0])
        return max(1, min(settings.CUDA_CHUNK, free // (4 * row_bytes)))

    @staticmethod
    def _copied_back(arg, array):
        """Whether ``array`` (of ``arg``) is an output copied back to the host (not
        scratch, not on the device)."""
        return arg.output and not arg.scratch and not _on_device(array)

    def _host_outputs(self, arrays):
        """The output arrays copied back to the host."""
        return [array for arg, array in zip(self.args, arrays) if self._copied_back(arg, array)]

    def _copy_back(self, arrays, device, stream, start, stop, number, prefault=None):
        if prefault is not None:
            prefault.wait(number)
        for arg, array, on_device in zip(self.args, arrays, device):
            if self._copied_back(arg, array):
                _copy_out(on_device, array[start:stop], stream)

    @staticmethod
    def _to_device(array, rows, key, start=None, stop=None):
        """Rows ``start:stop`` of ``array`` (all without ``start``) on the GPU, in
        ``rows``' buffers under ``key``; device arrays are sliced in place."""
        if isinstance(array, kernel.Columns):
            # each block's rows copied as they are and joined on the GPU: joining them
            # on the host is slow, and the host, not the GPU, is what paces the chunks
            # of that call
            blocks = [ObjectKernel._to_device(b, rows, (key, i), start, stop)
                      for i, b in enumerate(array.blocks)]
            out = None if start is None else rows.empty(key, stop - start, array.shape[1:],
                                                        array.dtype)
            return device_join(blocks, rows.stream, out)
        if _on_device(array):
            if not is_simulated_array(array):
                array = cuda.as_cuda_array(array)
            return array if start is None else array[start:stop]
        if start is not None:
            array = array[start:stop]
        array = _fresh_strides(array)  # stride-0 views are slow in kernels
        if start is None:
            return cuda.to_device(array, stream=rows.stream)
        out = rows.empty(key, array.shape[0], array.shape[1:], array.dtype)
        _copy_in(out, array, rows.stream)
        return out

    def resources(self):
        """Registers and local memory per thread of the compiled kernel(s)."""
        if self._compiled is None:
            return {}
        return {
            str(sig): {
                "registers": k.regs_per_thread,
                "local_bytes": k.local_mem_per_thread,
                "shared_bytes": k.shared_mem_per_block,
            }
            for sig, k in self._compiled.overloads.items()
        }


class _Prefault:
    """Touches each chunk's rows of the host output arrays, in chunk order, in a helper
    thread while the GPU computes, so that the copies back do not fault their pages in.

    The outputs are fresh ``np.empty`` arrays: their pages are first touched by the
    copy back of pageable memory, which the host waits for, one 4 KiB page fault at a
    time, and that host time paced the chunks (see docs/gpu.md, "Host copies").
    numpy's fill releases the GIL, so the launching thread is not held up. Values
    written here are overwritten by the copies; a failure here only leaves the faults
    to the copies. ``bounds``: each chunk's ``(start, stop)``; the thread begins at
    `start`."""

    def __init__(self, outputs, bounds):
        self._outputs = [a for a in outputs if a.size and a.flags.writeable]
        self._bounds = list(bounds)
        self._done = [threading.Event() for _ in self._bounds]
        if not self._outputs:
            for event in self._done:
                event.set()

    def start(self):
        if self._outputs:
            threading.Thread(target=self._touch, name="hapsira-prefault", daemon=True).start()

    def _touch(self):
        try:
            for (start, stop), done in zip(self._bounds, self._done):
                for array in self._outputs:
                    array[start:stop].fill(0)
                done.set()
        finally:  # never leave a copy back waiting
            for done in self._done:
                done.set()

    def wait(self, number):
        self._done[number].wait()


#: Seconds for which a reading of the GPU's free memory sizes the chunks of calls whose
#: two chunks take at most a tenth of it (`ObjectKernel._chunk_size`; asking the driver
#: at every call would delay each call's first kernel).
FREE_MEMORY_S = 1.0
_FREE_MEMORY = {}  # (`hapsira_core.memory.recent`) of each context's free memory


#: Shared inputs up to this many bytes go to the GPU together (`_Packed`).
PACKED_MAX_BYTES = 1 << 16


def _packable(arg, array):
    """Whether a shared ``array`` (of ``arg``) is a small host input that `_Packed` takes."""
    return (not arg.output and isinstance(array, np.ndarray) and 0 < array.nbytes
            <= PACKED_MAX_BYTES)


class _Packed:
    """Small host arrays (a call's shared inputs: tolerances, output times, the shared
    parameters, the fetch counters) copied to the GPU in one transfer, into one buffer,
    each array a view of its own part of it, since a copy and an allocation for each
    would delay the first kernel. The buffer comes from and goes back to `_POOL`."""

    #: bytes between the parts' starts are a multiple of this (a kernel's loads are aligned)
    ALIGN = 256

    def __init__(self, arrays, stream):
        self.arrays = {}
        self._buffer = None
        parts, size = [], 0
        for key, array in arrays.items():
            array = _fresh_strides(np.asarray(array))
            parts.append((key, array, size))
            size += -(-array.nbytes // self.ALIGN) * self.ALIGN
        if not parts:
            return
        host = np.empty(size, np.uint8)
        for key, array, start in parts:
            host[start:start + array.nbytes] = array.reshape(-1).view(np.uint8)
        buffer = _POOL.take((size,), np.uint8)
        if buffer is None:
            buffer = cuda.device_array((size,), np.uint8, stream=stream)
        _copy_in(buffer, host, stream)
        self._buffer = buffer
        for key, array, start in parts:
            self.arrays[key] = _part(buffer, start, array, stream)

    def buffers(self):
        """The device buffer (for `_POOL`), if any."""
        return [] if self._buffer is None else [self._buffer]


def _copy_in(device, host, stream):
    """``host`` into ``device`` (the same shape) on ``stream``. Where both are
    C-contiguous, the driver's copy is called directly: numba's ``copy_to_device``
    first slices both arrays to their cores, host time that for the first chunk's
    copies and the call's shared inputs' comes before the first kernel."""
    if SIMULATOR or not _contiguous_pair(device, host):
        device.copy_to_device(host, stream=stream)
    elif host.nbytes:
        driver.host_to_device(device, host, host.nbytes, stream=stream)


def _copy_out(device, host, stream):
    """``device`` into ``host`` (the same shape) on ``stream``, as `_copy_in` (the last
    chunk's copies back come after the last kernel)."""
    if SIMULATOR or not _contiguous_pair(device, host) or not host.flags.writeable:
        device.copy_to_host(host, stream=stream)
    elif host.nbytes:
        driver.device_to_host(host, device, host.nbytes, stream=stream)


def _contiguous_pair(device, host):
    return (isinstance(host, np.ndarray) and host.flags.c_contiguous
            and device.is_c_contiguous() and tuple(device.shape) == host.shape
            and device.dtype == host.dtype)


def _rows_of(array, start, stop):
    """Rows ``start:stop`` of a C-contiguous device ``array``: a view, made directly
    (numba's slicing costs host time, before each call's first kernel too)."""
    if SIMULATOR:
        return array[start:stop]
    step = array.strides[0]
    return DeviceNDArray((stop - start,) + tuple(array.shape[1:]), array.strides, array.dtype,
                         stream=array.stream,
                         gpu_data=array.gpu_data.view(start * step, stop * step))


def _part(buffer, start, like, stream):
    """The bytes of ``buffer`` (uint8, on the device) from ``start`` as an array of
    ``like``'s shape, strides and dtype: a view, no copy."""
    stop = start + like.nbytes
    if SIMULATOR:  # (its arrays are numpy's inside)
        return buffer[start:stop].view(like.dtype).reshape(like.shape)
    # made directly: slicing and viewing a numba device array cost about as much as
    # the copy this saves
    return DeviceNDArray(like.shape, like.strides, like.dtype, stream=stream,
                         gpu_data=buffer.gpu_data.view(start, stop))


#: Bytes of chunk buffers a thread keeps on the GPU from one call for its next (`_Pool`).
POOL_BYTES = 256 << 20


class _Pool(threading.local):
    """The chunk buffers of this thread's last call, kept for its next call when they
    take at most `POOL_BYTES` (the reference workload's, 2^17 objects per chunk on
    each of two streams, take about 50 MB): allocating them at each call delays its
    first kernel, and freeing them lengthens its end. One
    set per thread, so that calls from several threads never share a buffer; a call
    ends with its streams synchronised, so a kept buffer is idle. Buffers of other
    shapes are freed as before, when the next call ends."""

    def __init__(self):
        self._free = {}
        self._streams = {}

    def streams(self):
        """This thread's two streams in the current context, made at its first call
        (making them at each call would delay its first kernel);
        a call ends with both synchronised, so the next one finds them idle."""
        context = cuda.current_context()
        kept = self._streams.get(id(context))
        if kept is None or kept[0] is not context:  # (a context made since, at that id)
            kept = self._streams[id(context)] = (context, (cuda.stream(), cuda.stream()))
        return kept[1]

    @staticmethod
    def _key(device, shape, dtype):
        return id(device), tuple(shape), np.dtype(dtype).str

    def take(self, shape, dtype):
        """A kept buffer of this shape and dtype on the current device, or None."""
        kept = self._free.get(self._key(cuda.get_current_device(), shape, dtype))
        return kept.pop() if kept else None

    def keep(self, buffers):
        """Keep ``buffers`` (one call's, idle) for the next call, instead of what was
        kept before, if they fit in `POOL_BYTES`."""
        self._free = {}
        if sum(b.nbytes for b in buffers) > POOL_BYTES:
            return
        device = cuda.get_current_device()  # (once: asking per buffer costs host time)
        for buffer in buffers:
            self._free.setdefault(self._key(device, buffer.shape, buffer.dtype),
                                  []).append(buffer)


_POOL = _Pool()


class _Rows:
    """One stream's device buffers for a chunk of rows, one per array (and per
    block of `Columns`), allocated at first use and reused by every chunk the
    stream runs: each allocation is a driver call, and each release a
    synchronising one (two per chunk's array before)."""

    def __init__(self, chunk, stream):
        self.chunk = chunk
        self.stream = stream
        self._buffers = {}

    def _buffer(self, key, shape, dtype):
        buffer = self._buffers.get(key)
        if buffer is None:
            buffer = _POOL.take(shape, dtype)
            if buffer is None:
                buffer = cuda.device_array(shape, dtype, stream=self.stream)
            self._buffers[key] = buffer
        return buffer

    def buffers(self):
        """The buffers this stream's chunks used."""
        return list(self._buffers.values())

    def empty(self, key, rows, shape, dtype):
        """The first ``rows`` rows of the buffer ``key``: ``(chunk,) + shape``."""
        buffer = self._buffer(key, (self.chunk,) + tuple(shape), dtype)
        return buffer if rows == self.chunk else _rows_of(buffer, 0, rows)

    def empty_interleaved(self, key, shape, dtype):
        """The buffer ``key`` as ``shape + (chunk,)``: object ``i``'s rows are column
        ``i`` (an interleaved `Arg`), so a chunk with fewer objects reads the first
        columns of the whole buffer (a C-contiguous array, as the kernel is compiled for)."""
        return self._buffer(key, tuple(shape) + (self.chunk,), dtype)


def interleaved_shape(arg, shape):
    """An XLA buffer of ``(N,) + core`` seen as ``core + (N,)`` where ``arg`` is
    interleaved (`hapsira_core.kernels.kernel.Arg`; scratch: the same bytes, only the
    kernel reads them)."""
    return tuple(shape[1:]) + (shape[0],) if arg.interleaved else tuple(shape)


def _busy_seconds(intervals):
    """Seconds covered by (start, stop) intervals in ms, overlaps counted once.

    Chunks on two streams overlap (a chunk's kernel starts while the other's
    ends): summing their event times counts those overlaps twice, and
    makes the kernel look slower than it is.
    """
    busy, end = 0.0, -math.inf
    for start, stop in sorted(intervals):
        if stop > end:
            busy += stop - max(start, end)
            end = stop
    return busy / 1e3


def _save_linked_kernels_with_their_image(dispatcher):
    """Let numba-cuda's disk cache keep kernels that link other code (a C
    function of `hapsira_core.foreign`).

    numba-cuda refuses to pickle a code library with linking files, because a
    rebuilt library would have to link them again. Once the library's image
    (cubin) for this device is linked, it holds the foreign code and needs
    nothing else; the cache's index is keyed by the device's compute
    capability, so that image is only ever loaded where it was made. So the
    image is linked first, and the library is saved as if it linked nothing
    (numba's own runtime library, kept, is one numba-cuda rebuilds itself).
    A new process then loads the linked kernel instead of compiling it again;
    the kernel's cache module already
    changes with the C source (its fingerprint is the declaration's).
    """
    save = dispatcher._cache.save_overload

    def save_overload(sig, kernel):
        library = getattr(kernel, "library", None)
        linked = getattr(library, "_linking_files", None)
        foreign = {f for f in linked or () if f != NRT_LIBRARY}
        if not foreign:
            return save(sig, kernel)
        library.get_cubin()  # linked now, for this device
        library._linking_files = set(linked) - foreign
        try:
            return save(sig, kernel)
        finally:
            library._linking_files = linked

    dispatcher._cache.save_overload = save_overload


def is_device_array(value):
    """An array in GPU memory (``__cuda_array_interface__``), used in place."""
    return hasattr(value, "__cuda_array_interface__") and not isinstance(value, np.ndarray)


def _on_device(value):
    """An array in the target's own memory: a GPU array, or one of the simulator's
    (which `is_device_array` leaves to the host path: it has no interface to read)."""
    return is_device_array(value) or is_simulated_array(value)


def device_empty(shape, dtype=np.float64):
    """An array in the GPU's memory, not initialised (the simulator's: numpy inside).
    A kernel given it as an input reads it in place; as an output, writes it in place."""
    return cuda.device_array(shape, dtype)


def to_device(array):
    """``array`` in the GPU's memory: a copy of a host array (C-ordered, with the strides
    of a fresh array), the array itself if it is there already."""
    if _on_device(array):
        return array
    return cuda.to_device(_fresh_strides(np.asarray(array)))


def _fresh_strides(array):
    """``array``, or a C-ordered copy where its strides are not those of a fresh C array.
    numpy calls ``np.arange(k)[:, None]`` (strides (4, 0)) C-contiguous and hands it on
    as it is; numba's device array calls it non-contiguous, and every slice of it then
    walks its elements in Python, slow for many items; in a kernel, stride-0 views are
    slow too."""
    strides, step = [], array.itemsize
    for extent in reversed(array.shape):
        strides.append(step)
        step *= extent
    if array.strides != tuple(reversed(strides)):
        array = array.copy(order="C")
    return array


def to_host(array):
    """``array`` as a numpy array: a copy of a device array, a host array itself."""
    if _on_device(array):
        if not is_simulated_array(array):
            array = cuda.as_cuda_array(array)
        return array.copy_to_host()
    return np.asarray(array)


def device_memory():
    """``(free, total)`` bytes of the GPU's memory (the simulator: infinite)."""
    free, total = cuda.current_context().get_memory_info()
    return free, total


@cuda.jit
def _copy_columns(source, out, first):
    i = cuda.grid(1)
    if i < out.shape[0]:
        for j in range(source.shape[1]):
            out[i, first + j] = source[i, j]


@cuda.jit
def _copy_two_blocks(left, right, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        for j in range(left.shape[1]):
            out[i, j] = left[i, j]
        for j in range(right.shape[1]):
            out[i, left.shape[1] + j] = right[i, j]


def device_join(blocks, stream=0, out=None):
    """``[b_1 | b_2 | ...]`` for (N, k_i) numba device arrays, into ``out`` or a
    new device array (copies on the GPU, queued on ``stream``). Two blocks (cowell's
    positions and velocities) are joined by one launch, since each launch costs host
    time, before the first kernel too."""
    rows = blocks[0].shape[0]
    if out is None:
        out = cuda.device_array((rows, sum(b.shape[1] for b in blocks)),
                                dtype=blocks[0].dtype, stream=stream)
    if rows:
        grid, block = (rows + settings.CUDA_BLOCK - 1) // settings.CUDA_BLOCK, settings.CUDA_BLOCK
        with _small_grids_allowed():
            if len(blocks) == 2:
                _copy_two_blocks[grid, block, stream](blocks[0], blocks[1], out)
                return out
            first = 0
            for source in blocks:
                _copy_columns[grid, block, stream](source, out, first)
                first += source.shape[1]
    return out


@contextlib.contextmanager
def _small_grids_allowed():
    """numba warns about grids too small to fill the GPU; a small batch is the
    user's choice (and a warning would fail code that runs with warnings as errors)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*Grid size")
        yield

