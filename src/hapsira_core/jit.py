"""The one place that knows how code is compiled for the active target.

Algorithms are written once as :func:`hjit` functions (plain Python on
tuples and ``math``). This module turns them into

* ``cpu``: ``numba.njit`` functions and an ``njit`` loop over objects,
* ``parallel``: ``numba.njit`` functions inside ``guvectorize(target="parallel")``,
* ``cuda``: ``numba.cuda.jit(device=True)`` functions inside a ``cuda.jit``
  kernel, one thread per object, launched by :class:`ObjectKernel`.

Everything CUDA-specific lives here, so that a change of GPU backend touches
one module.
"""

import importlib.util
import math
import os
import warnings

import numba
import numpy as np

from . import settings
from .fingerprint import fingerprint

__all__ = ["hjit", "vjit", "gjit", "switch", "rsqrt", "Arg", "ObjectKernel", "TARGET"]

TARGET = settings.TARGET

if TARGET == "cuda":
    from numba import cuda
else:
    cuda = None


def hjit(func=None, **options):
    """Compile a helper (device) function for the active target.

    ``cpu``/``parallel``: ``numba.njit``; ``cuda``: ``numba.cuda.jit(device=True)``.
    Floating-point errors follow IEEE semantics on every target (a division by
    zero gives inf or NaN, never a Python exception), so that one object's bad
    arithmetic becomes its own failure status instead of aborting the batch.
    Use as ``@hjit`` or ``@hjit(option=value)``; options go to numba.
    """
    if func is None:
        return lambda f: hjit(f, **options)
    if TARGET == "cuda":
        return cuda.jit(device=True, **options)(func)
    options.setdefault("cache", settings.CACHE)
    options.setdefault("error_model", "numpy")
    if settings.DEBUG:
        options.setdefault("boundscheck", True)
        options.setdefault("debug", True)
    return numba.njit(**options)(func)


def _rsqrt(x):
    return 1.0 / math.sqrt(x)


if TARGET == "cuda" and not settings.cuda_simulator_enabled():
    from numba.cuda import libdevice

    def _rsqrt(x):  # noqa: F811
        return libdevice.rsqrt(x)
elif TARGET == "cuda":
    def _rsqrt(x):  # noqa: F811
        # The simulator runs plain Python, where 1.0 / 0.0 raises; numpy's
        # float64 gives inf as the GPU does (an object at the centre fails alone).
        with np.errstate(divide="ignore"):
            return np.float64(1.0) / np.float64(math.sqrt(x))


#: ``rsqrt(x) = 1 / sqrt(x)``, within 1 ulp. On the GPU one reciprocal square
#: root (libdevice) instead of a square root and a division, which halves the
#: latency of a gravity term; elsewhere the two operations.
rsqrt = hjit(_rsqrt)


def vjit(signatures, **options):
    """``numba.vectorize`` for the active target (element-wise ufuncs)."""
    target = "cuda" if TARGET == "cuda" else TARGET
    return numba.vectorize(signatures, target=target, **options)


def gjit(signatures, layout, **options):
    """``numba.guvectorize`` for the active target (generalised ufuncs).

    Note: numba-cuda 0.30 cannot run cuda gufuncs under its simulator; prefer
    :class:`ObjectKernel` for per-object work.
    """
    target = "cuda" if TARGET == "cuda" else TARGET
    return numba.guvectorize(signatures, layout, target=target, **options)


def switch(functions, nargs):
    """One :func:`hjit` function ``call(i, a1..an)`` that calls ``functions[i]``.

    Device functions cannot be stored in an array or indexed from a tuple at
    run time on the GPU, so the dispatch is an ``if`` chain generated here,
    with the functions as compile-time constants. Each function takes the
    same ``nargs`` arguments and returns a float; an index out of range gives
    NaN.
    """
    names = ", ".join(f"a{j}" for j in range(nargs))
    lines = [f"def call(i, {names}):"]
    for index in range(len(functions)):
        lines.append(f"    if i == {index}:")
        lines.append(f"        return fn{index}({names})")
    lines.append("    return math.nan")
    namespace = {f"fn{index}": fn for index, fn in enumerate(functions)}
    namespace["math"] = __import__("math")
    exec(compile("\n".join(lines), f"<hapsira switch of {len(functions)}>", "exec"), namespace)
    return hjit(namespace["call"], cache=False) if TARGET != "cuda" else hjit(namespace["call"])


class Arg:
    """One array argument of an :class:`ObjectKernel`.

    ``core``: the names of the per-object dimensions (``()`` for none).
    ``per_object``: the array has a leading object axis of length N (or 1,
    then broadcast to every object); otherwise it is shared by all objects.
    ``output``: written by the kernel; outputs are per-object, and the body
    must write every element of its rows. ``scratch``: an output that is
    working memory only: on the GPU it is never copied back to the host.
    """

    def __init__(self, name, dtype, core, per_object=True, output=False, scratch=False):
        self.name = name
        self.dtype = np.dtype(dtype)
        self.core = tuple(core)
        self.per_object = per_object or output or scratch
        self.output = output or scratch
        self.scratch = scratch

    def numba_type(self):
        scalar = numba.from_dtype(self.dtype)
        return scalar[(slice(None),) * len(self.core)] if self.core else scalar


class ObjectKernel:
    """Run ``body(row_0, ..., row_n)`` once per object on the active target.

    ``body`` is an :func:`hjit` function taking one argument per :class:`Arg`:
    a per-object argument arrives as that object's row, a shared one whole.
    Inputs come first in ``args``, outputs last. Calling the kernel with
    numpy arrays (or, on cuda, arrays exposing ``__cuda_array_interface__``,
    used in place) fills the numpy output arrays it is given.
    """

    def __init__(self, body, args):
        self.body = body
        self.args = list(args)
        outputs = [a.output for a in self.args]
        if not any(outputs) or outputs != sorted(outputs):
            raise ValueError("ObjectKernel args: inputs first, then at least one output")
        self.n_inputs = outputs.index(True)
        self._compiled = None
        #: cuda: seconds the last call's kernels ran (summed over chunks, from
        #: events on their streams; chunks on two streams may overlap).
        self.last_kernel_seconds = None

    def _row(self, arg, index="i"):
        if not arg.per_object:
            return arg.name
        if arg.output:
            return f"{arg.name}[{index}]"
        return f"{arg.name}[{index} if {arg.name}.shape[0] != 1 else 0]"

    def _source(self):
        names = ", ".join(a.name for a in self.args)
        rows = ", ".join(self._row(a) for a in self.args)
        first_out = self.args[self.n_inputs].name
        if TARGET == "cpu":
            return (f"def kernel({names}):\n"
                    f"    for i in range({first_out}.shape[0]):\n"
                    f"        body({rows})\n")
        if TARGET == "parallel":
            return (f"def kernel({names}, unused):\n"
                    f"    body({names})\n")
        return (f"def kernel({names}):\n"
                f"    i = cuda.grid(1)\n"
                f"    if i < {first_out}.shape[0]:\n"
                f"        body({rows})\n")

    def _layout(self):
        # Every array is a gufunc input (outputs marked writable: numba wants
        # output dimensions defined by inputs); "->()" is a throwaway output.
        return ",".join("(" + ",".join(a.core) + ")" for a in self.args) + "->()"

    def compile(self):
        if self._compiled is not None:
            return self._compiled
        kernel = self._kernel_function()
        cache = settings.CACHE
        if TARGET == "cpu":
            self._compiled = numba.njit(error_model="numpy", cache=cache)(kernel)
        elif TARGET == "parallel":
            signature = numba.void(*(a.numba_type() for a in self.args),
                                   numba.types.int8[:])
            writable = tuple(a.name for a in self.args if a.output)
            self._compiled = numba.guvectorize(
                [signature], self._layout(), target="parallel",
                writable_args=writable, cache=cache)(kernel)
        else:
            options = {"cache": cache}
            if settings.CUDA_MAX_REGISTERS and not settings.cuda_simulator_enabled():
                options["max_registers"] = settings.CUDA_MAX_REGISTERS  # the simulator rejects it
            self._compiled = cuda.jit(kernel, **options)
        return self._compiled

    def _kernel_function(self):
        """The kernel as a Python function; from a file when caching on disk.

        numba's on-disk cache needs a source file and keys entries by that
        file alone, so each kernel is written to a file whose name holds the
        fingerprint of everything it calls (the user's functions included):
        a changed function gets a new file, never a stale cached kernel.
        """
        source = self._source()
        if not settings.CACHE:
            namespace = {"body": self.body, "cuda": cuda}
            exec(compile(source, "<hapsira object kernel>", "exec"), namespace)
            return namespace["kernel"]
        key = fingerprint(self.body, source, TARGET, numba.__version__)
        name = f"hapsira_kernel_{TARGET}_{key}"
        os.makedirs(settings.CACHE_DIR, exist_ok=True)
        path = os.path.join(settings.CACHE_DIR, name + ".py")
        if not os.path.exists(path):
            partial = f"{path}.{os.getpid()}.tmp"
            with open(partial, "w") as out:
                out.write("# generated by hapsira_core.jit.ObjectKernel; safe to delete\n")
                out.write(source)
            os.replace(partial, path)
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        module.body = self.body
        module.cuda = cuda
        spec.loader.exec_module(module)
        return module.kernel

    def __call__(self, *arrays):
        if len(arrays) != len(self.args):
            raise TypeError(f"expected {len(self.args)} arrays, got {len(arrays)}")
        kernel = self.compile()
        if TARGET == "cpu":
            kernel(*arrays)
        elif TARGET == "parallel":
            if arrays[self.n_inputs].shape[0] > 0:
                # A failing object's NaNs are its own status, not a ufunc warning.
                with np.errstate(all="ignore"):
                    kernel(*arrays)
        else:
            self._launch(kernel, arrays)

    def _launch(self, kernel, arrays):
        """Copy in, run and copy out in chunks of objects on two alternating streams.

        Chunks bound the GPU memory in use whatever N is. Each chunk's results
        are copied back only after the next chunk has been queued, so that the
        GPU computes one chunk while the host waits for the other's copies
        (pageable host memory makes each copy block the host). Shared arrays
        are copied once; arrays already on the device are sliced in place.
        """
        n = arrays[self.n_inputs].shape[0]
        if n == 0:
            return
        streams = (cuda.stream(), cuda.stream())
        shared = {}
        for index, (arg, array) in enumerate(zip(self.args, arrays)):
            if not arg.per_object or array.shape[0] == 1:
                shared[index] = self._to_device(array, streams[0])
        streams[0].synchronize()
        chunk = self._chunk_size(arrays, shared)
        block = settings.CUDA_BLOCK
        timing = []  # (start, stop) events around each chunk's kernel
        queued = None  # the chunk whose results are still to be copied back
        for number, start in enumerate(range(0, n, chunk)):
            stop = min(start + chunk, n)
            stream = streams[number % 2]
            device = []
            for index, (arg, array) in enumerate(zip(self.args, arrays)):
                if index in shared:
                    device.append(shared[index])
                elif arg.output:
                    device.append(cuda.device_array((stop - start,) + array.shape[1:],
                                                    array.dtype, stream=stream))
                else:
                    device.append(self._to_device(array, stream, start, stop))
            timing.append((cuda.event(), cuda.event()))
            timing[-1][0].record(stream)
            with warnings.catch_warnings():
                # numba warns about small grids; a small batch is the user's choice
                warnings.filterwarnings("ignore", message=".*Grid size")
                kernel[(stop - start + block - 1) // block, block, stream](*device)
            timing[-1][1].record(stream)
            if queued is not None:
                self._copy_back(arrays, *queued)
            queued = (device, stream, start, stop)
        self._copy_back(arrays, *queued)
        for stream in streams:
            stream.synchronize()
        if not settings.cuda_simulator_enabled():  # the simulator keeps no time
            self.last_kernel_seconds = sum(a.elapsed_time(b) for a, b in timing) / 1e3

    def _chunk_size(self, arrays, shared):
        """Objects per launch: ``HAPSIRA_CUDA_CHUNK``, fewer if two chunks'
        rows (inputs and outputs, one chunk per stream) would take more than
        half of the GPU's free memory (many output times per object)."""
        row_bytes = sum(array.dtype.itemsize * int(np.prod(array.shape[1:]))
                        for index, array in enumerate(arrays) if index not in shared)
        free, _ = cuda.current_context().get_memory_info()
        return max(1, min(settings.CUDA_CHUNK, free // (4 * max(row_bytes, 1))))

    def _copy_back(self, arrays, device, stream, start, stop):
        for arg, array, on_device in zip(self.args, arrays, device):
            if arg.output and not arg.scratch:
                on_device.copy_to_host(array[start:stop], stream=stream)

    @staticmethod
    def _to_device(array, stream, start=None, stop=None):
        if hasattr(array, "__cuda_array_interface__") and not isinstance(array, np.ndarray):
            array = cuda.as_cuda_array(array)
            return array if start is None else array[start:stop]
        if start is not None:
            array = array[start:stop]
        if not array.flags.c_contiguous or 0 in array.strides:
            array = array.copy(order="C")  # stride-0 views are slow in kernels
        return cuda.to_device(array, stream=stream)

    def resources(self):
        """Registers and local memory per thread of the compiled cuda kernel(s)."""
        if TARGET != "cuda" or self._compiled is None:
            return {}
        return {
            str(sig): {
                "registers": k.regs_per_thread,
                "local_bytes": k.local_mem_per_thread,
                "shared_bytes": k.shared_mem_per_block,
            }
            for sig, k in self._compiled.overloads.items()
        }
