"""The cuda kernel inside JAX: XLA's handler launches it on XLA's own stream.

The handler is a ctypes callback (numba-cuda launches from Python): it reads
the call frame (`hapsira_core.xla_ffi`), wraps XLA's buffers as device arrays
in place and queues the kernel on the stream XLA gives, so that XLA orders it
with the rest of the program. Under the simulator, whose device memory is host
memory, the buffers are numpy views.
"""

import ctypes

import numpy as np
from numba import cuda

from ... import settings, xla_ffi as ffi
from .._floats import ieee_python
from .launch import interleaved_shape
from .surface import SIMULATOR


def xla_handler(xla):
    """A ctypes callback that launches the cuda kernel on XLA's stream.

    The kernel is compiled (or loaded) here, so that a function that does not
    compile raises in Python, as on the host targets, instead of inside XLA's
    callback when the program runs (there the JAX front's error for a ``y0``
    wider than ``fun`` returns comes only when a result is read)."""
    compiled = xla.kernel.compile()
    if not SIMULATOR:  # numba-cuda compiles at the first launch otherwise
        compiled.compile(xla.kernel._signature())
    launcher = _CudaLauncher(xla)
    callback = ffi._HANDLER_TYPE(launcher)
    callback.address = ctypes.cast(callback, ctypes.c_void_p).value
    callback.launcher = launcher
    return callback


class _CudaLauncher:
    """The CUDA handler's body (called by XLA on its thread, with the GIL taken)."""

    def __init__(self, xla):
        self.xla = xla
        self.simulated = SIMULATOR
        self._counters = {}

    def counter(self, ordinal=0):
        """A fetching kernel's counter (`launch.FETCH_COUNTER`) on GPU ``ordinal`` (made
        at its first call there, zeroed, current device); ``[]`` for a plain kernel."""
        if not self.xla.kernel.fetch:
            return []
        if ordinal not in self._counters:
            self._counters[ordinal] = cuda.to_device(np.zeros(1, np.int64))
        return [self._counters[ordinal]]

    def __call__(self, frame_pointer):
        frame = frame_pointer.contents
        api = ffi._Api.from_address(frame.api)
        try:
            if frame.extension_start:
                base = ffi._ExtensionBase.from_address(frame.extension_start)
                if base.type == ffi._EXTENSION_METADATA:
                    return ffi._answer_metadata(api, frame.extension_start)
            return self.launch(frame, api)
        except IndexError as exc:  # the simulator checks every index
            return ffi._python_error(api, ffi.raised_text(self.xla.what) + f" ({exc})")
        except BaseException as exc:  # an exception must not cross into XLA
            return ffi._python_error(api, f"hapsira: launching the {self.xla.what} failed: "
                                      f"{type(exc).__name__}: {exc}")

    def buffers(self, frame):
        xla = self.xla
        if frame.stage != ffi._STAGE_EXECUTE or frame.args.size != xla.n_inputs \
                or frame.rets.size != len(xla.outputs):
            raise RuntimeError(f"unexpected call frame (stage {frame.stage}, "
                               f"{frame.args.size} arguments, {frame.rets.size} results)")
        pointers = [frame.args.args[i] for i in range(frame.args.size)] + \
                   [frame.rets.rets[i] for i in range(frame.rets.size)]
        found = []
        for arg, pointer in zip(xla.args, pointers):
            buffer = ffi._Buffer.from_address(pointer)
            rank = len(arg.core) + (1 if arg.per_object else 0)
            if ffi._DTYPES.get(buffer.dtype) != arg.dtype or buffer.rank != rank:
                raise RuntimeError(f"{arg.name}: buffer of XLA dtype {buffer.dtype}, rank "
                                   f"{buffer.rank}; expected {arg.dtype}, rank {rank}")
            found.append((buffer.data or 0, tuple(buffer.dims[i] for i in range(rank)),
                          arg.dtype))
        same, n_or_one = xla._shape_rules()
        shapes = [shape for _, shape, _ in found]
        n = shapes[xla.n_inputs][0]
        if any(shapes[i][d] != shapes[j][e] for (i, d), (j, e) in same) or \
                any(shapes[i][0] not in (n, 1) for i in n_or_one):
            raise RuntimeError(f"buffer shapes {shapes} do not agree with the arguments "
                               f"{[(a.name, a.core) for a in xla.args]}")
        return found

    def launch(self, frame, api):
        found = self.buffers(frame)
        for index, (data, _, _) in enumerate(found):
            self.xla.pointers[index] = data
        n = found[self.xla.n_inputs][1][0]
        # interleaved scratch: XLA's (N,) + core buffer as core + (N,), as the kernel reads it
        found = [(data, interleaved_shape(arg, shape), dtype)
                 for arg, (data, shape, dtype) in zip(self.xla.args, found)]
        if n == 0:
            return None
        kernel = self.xla.kernel.compile()
        block = settings.CUDA_BLOCK
        grid = (n + block - 1) // block
        # A fetching kernel (HAPSIRA_CUDA_FETCH) gets a counter and the same grid of one
        # thread per object: each thread solves its own, and its one fetch lands past n
        # whatever the counter holds (so one counter, never zeroed, serves every call).
        if self.simulated:
            # Simulated "device memory" is host memory: the buffers as numpy arrays.
            # The kernel's Python runs on this XLA thread and threads it starts,
            # which inherit its flush-to-zero: IEEE subnormals, as on a GPU.
            arrays = [ffi._host_view(*item) for item in found]
            with ieee_python():
                kernel[grid, block](*arrays, *self.counter())
            return None
        stream_args = ffi._StreamGetArgs(ffi._struct_size(ffi._StreamGetArgs, "stream"), None, frame.ctx,
                                     None)
        error = ffi._STREAM_GET_TYPE(api.Stream_Get)(ctypes.byref(stream_args))
        if error:
            return error
        ordinal = 0
        if api.struct_size >= ffi._struct_size(ffi._Api, "DeviceOrdinal_Get") and api.DeviceOrdinal_Get:
            ordinal_args = ffi._DeviceOrdinalGetArgs(
                ffi._struct_size(ffi._DeviceOrdinalGetArgs, "device_ordinal"), None, frame.ctx, 0)
            error = ffi._ORDINAL_GET_TYPE(api.DeviceOrdinal_Get)(ctypes.byref(ordinal_args))
            if error:
                return error
            ordinal = ordinal_args.device_ordinal
        with cuda.gpus[ordinal]:
            stream = cuda.external_stream(stream_args.stream)
            arrays = [cuda.from_cuda_array_interface(
                {"shape": shape, "typestr": dtype.str, "data": (data, False),
                 "version": 3, "strides": None, "stream": None}, owner=None, sync=False)
                for data, shape, dtype in found]
            # Queued on XLA's stream: XLA orders it with the rest of the program.
            kernel[grid, block, stream](*arrays, *self.counter(ordinal))
        return None
