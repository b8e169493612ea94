"""Run an :class:`~hapsira_core.jit.ObjectKernel` inside ``jax.jit`` on XLA's own buffers.

The kernel becomes a target of XLA's typed FFI (custom-call API version 4,
``jax.ffi.ffi_call``). XLA hands the handler a call frame with its argument
and result buffers; the handler runs our per-object loop on those buffers
in place, so a jitted program calls the solver with no host round trip and
no copy of inputs or outputs.

* ``cpu``/``parallel``: the handler is a numba ``cfunc`` (C ABI, no Python,
  no GIL) that wraps the buffers as arrays and runs the per-object loop
  (``prange`` on ``parallel``) on JAX's CPU platform.
* ``cuda``: the handler takes XLA's CUDA stream and launches the cuda kernel
  on it, on JAX's GPU platform (a Python callback: numba-cuda launches from
  Python).

The other platform gets a handler that only returns an error saying that
``HAPSIRA_TARGET`` does not match it. Derivatives are not defined (a clear
error under ``jax.grad``/``jax.jvp``); ``jax.vmap`` folds its batch axis into
the object axis.

Only this module knows XLA's C structures; they follow
``xla/ffi/api/c_api.h`` (shipped in ``jax.ffi.include_dir()``).
"""

import ctypes
import itertools
import os
import threading

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

try:
    import jax
    import jax.numpy as jnp
    from jax.custom_batching import custom_vmap
except ImportError as _error:  # pragma: no cover - depends on the install
    raise ImportError("hapsira's JAX layer needs JAX: pip install 'hapsira-cowell[jax]'") \
        from _error

from . import settings
from .jit import TARGET

__all__ = ["XlaKernel", "xla_kernel", "PLATFORM", "DerivativeError"]

#: The JAX platform the active target runs on (``device.platform``); None
#: under the CUDA simulator, which has no XLA platform of its own.
PLATFORM = "gpu" if TARGET == "cuda" else "cpu"
if TARGET == "cuda" and settings.cuda_simulator_enabled():
    PLATFORM = None


class DerivativeError(NotImplementedError):
    """``jax.grad``/``jax.jvp`` through a hapsira kernel: not supported."""


# --------------------------------------------------------------------------
# XLA's C structures (c_api.h). ctypes gives their layout; the numba handler
# reads them through the offsets taken from here, so there is one source.
# --------------------------------------------------------------------------

_c = ctypes


class _ApiVersion(_c.Structure):
    _fields_ = [("struct_size", _c.c_size_t), ("extension_start", _c.c_void_p),
                ("major_version", _c.c_int), ("minor_version", _c.c_int)]


class _ExtensionBase(_c.Structure):
    _fields_ = [("struct_size", _c.c_size_t), ("type", _c.c_int), ("next", _c.c_void_p)]


class _Buffer(_c.Structure):
    _fields_ = [("struct_size", _c.c_size_t), ("extension_start", _c.c_void_p),
                ("dtype", _c.c_int), ("data", _c.c_void_p), ("rank", _c.c_int64),
                ("dims", _c.POINTER(_c.c_int64))]


class _Args(_c.Structure):
    _fields_ = [("struct_size", _c.c_size_t), ("extension_start", _c.c_void_p),
                ("size", _c.c_int64), ("types", _c.c_void_p), ("args", _c.POINTER(_c.c_void_p))]


class _Rets(_c.Structure):
    _fields_ = [("struct_size", _c.c_size_t), ("extension_start", _c.c_void_p),
                ("size", _c.c_int64), ("types", _c.c_void_p), ("rets", _c.POINTER(_c.c_void_p))]


class _Attrs(_c.Structure):
    _fields_ = [("struct_size", _c.c_size_t), ("extension_start", _c.c_void_p),
                ("size", _c.c_int64), ("types", _c.c_void_p), ("names", _c.c_void_p),
                ("attrs", _c.c_void_p)]


class _CallFrame(_c.Structure):
    _fields_ = [("struct_size", _c.c_size_t), ("extension_start", _c.c_void_p),
                ("api", _c.c_void_p), ("ctx", _c.c_void_p), ("stage", _c.c_int),
                ("args", _Args), ("rets", _Rets), ("attrs", _Attrs), ("future", _c.c_void_p)]


class _Metadata(_c.Structure):
    _fields_ = [("struct_size", _c.c_size_t), ("api_version", _ApiVersion),
                ("traits", _c.c_uint32), ("state_type_id", _c.c_int64)]


class _MetadataExtension(_c.Structure):
    _fields_ = [("extension_base", _ExtensionBase), ("metadata", _c.POINTER(_Metadata))]


class _ErrorCreateArgs(_c.Structure):
    _fields_ = [("struct_size", _c.c_size_t), ("extension_start", _c.c_void_p),
                ("message", _c.c_char_p), ("errc", _c.c_int)]


class _StreamGetArgs(_c.Structure):
    _fields_ = [("struct_size", _c.c_size_t), ("extension_start", _c.c_void_p),
                ("ctx", _c.c_void_p), ("stream", _c.c_void_p)]


class _DeviceOrdinalGetArgs(_c.Structure):
    _fields_ = [("struct_size", _c.c_size_t), ("extension_start", _c.c_void_p),
                ("ctx", _c.c_void_p), ("device_ordinal", _c.c_int32)]


_API_FUNCTIONS = ("Error_Create", "Error_GetMessage", "Error_Destroy", "Handler_Register",
                  "Stream_Get", "Type_Register", "ExecutionContext_Get", "State_Set",
                  "State_Get", "DeviceMemory_Allocate", "DeviceMemory_Free",
                  "ThreadPool_Schedule", "ThreadPool_NumThreads", "Future_Create",
                  "Future_SetAvailable", "Future_SetError", "RunId_Get", "DeviceOrdinal_Get")


class _Api(_c.Structure):
    _fields_ = [("struct_size", _c.c_size_t), ("extension_start", _c.c_void_p),
                ("api_version", _ApiVersion), ("internal_api", _c.c_void_p)] + \
               [(name, _c.c_void_p) for name in _API_FUNCTIONS]


def _struct_size(cls, last_field):
    """``XLA_FFI_STRUCT_SIZE``: the end of ``last_field`` (no tail padding)."""
    field = getattr(cls, last_field)
    return field.offset + field.size


def _offset(cls, *path):
    total, current = 0, cls
    for name in path:
        field = getattr(current, name)
        total += field.offset
        current = dict(current._fields_)[name]
    return total


_EXTENSION_METADATA = 1  # XLA_FFI_Extension_Metadata
_STAGE_EXECUTE = 3  # XLA_FFI_ExecutionStage_EXECUTE
_ERROR_INVALID_ARGUMENT = 3
_ERROR_FAILED_PRECONDITION = 9
_ERROR_INTERNAL = 13
_API_MAJOR = 0  # the ABI this module was written against (c_api.h: XLA_FFI_API_MAJOR)
#: XLA_FFI_DataType codes of the dtypes our kernels use
_DTYPE_CODES = {np.dtype(np.float64): 12, np.dtype(np.int64): 5, np.dtype(np.int32): 4,
                np.dtype(np.float32): 11, np.dtype(np.int8): 2, np.dtype(np.uint8): 6,
                np.dtype(np.bool_): 1}

# Offsets for the numba handler (constants frozen into its code).
F_EXTENSION = _offset(_CallFrame, "extension_start")
F_API = _offset(_CallFrame, "api")
F_STAGE = _offset(_CallFrame, "stage")
F_NARGS = _offset(_CallFrame, "args", "size")
F_ARGS = _offset(_CallFrame, "args", "args")
F_NRETS = _offset(_CallFrame, "rets", "size")
F_RETS = _offset(_CallFrame, "rets", "rets")
E_TYPE = _offset(_ExtensionBase, "type")
M_METADATA = _offset(_MetadataExtension, "metadata")
M_VERSION = _offset(_Metadata, "api_version")
M_TRAITS = _offset(_Metadata, "traits")
V_SIZE = _offset(_ApiVersion, "struct_size")
V_EXTENSION = _offset(_ApiVersion, "extension_start")
V_MAJOR = _offset(_ApiVersion, "major_version")
V_MINOR = _offset(_ApiVersion, "minor_version")
VERSION_SIZE = _struct_size(_ApiVersion, "minor_version")
A_VERSION = _offset(_Api, "api_version")
A_ERROR_CREATE = _offset(_Api, "Error_Create")
B_DTYPE = _offset(_Buffer, "dtype")
B_DATA = _offset(_Buffer, "data")
B_RANK = _offset(_Buffer, "rank")
B_DIMS = _offset(_Buffer, "dims")


class _Message:
    """A prepared ``XLA_FFI_Error_Create_Args`` whose address a handler passes
    to ``Error_Create`` (XLA copies the message; the struct lives as long as
    this object)."""

    def __init__(self, text, code):
        self.text = text.encode()
        self.args = _ErrorCreateArgs(_struct_size(_ErrorCreateArgs, "errc"), None,
                                     self.text, code)
        self.address = _c.addressof(self.args)


# --------------------------------------------------------------------------
# The numba side: raw memory access inside a cfunc.
# --------------------------------------------------------------------------

@intrinsic
def _pointer(typingctx, address):
    """int64 -> void*"""
    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], cgutils.voidptr_t)
    return types.voidptr(types.int64), codegen


@intrinsic
def _address(typingctx, pointer):
    """void* -> int64"""
    def codegen(context, builder, signature, args):
        return builder.ptrtoint(args[0], ir.IntType(64))
    return types.int64(types.voidptr), codegen


@intrinsic
def _call_error_create(typingctx, function, args):
    """``XLA_FFI_Error* function(XLA_FFI_Error_Create_Args* args)`` by address."""
    def codegen(context, builder, signature, values):
        fnty = ir.FunctionType(cgutils.voidptr_t, [cgutils.voidptr_t])
        fn = builder.inttoptr(values[0], fnty.as_pointer())
        return builder.call(fn, [builder.inttoptr(values[1], cgutils.voidptr_t)])
    return types.voidptr(types.int64, types.int64), codegen


@intrinsic
def _try_lock(typingctx, address):
    """Atomically turn the int64 at ``address`` from 0 to 1; True if this call did."""
    def codegen(context, builder, signature, args):
        word = builder.inttoptr(args[0], ir.IntType(64).as_pointer())
        zero, one = ir.Constant(ir.IntType(64), 0), ir.Constant(ir.IntType(64), 1)
        result = builder.cmpxchg(word, zero, one, "acquire", "monotonic")
        return builder.extract_value(result, 1)
    return types.boolean(types.int64), codegen


@intrinsic
def _unlock(typingctx, address):
    """Atomically set the int64 at ``address`` to 0 (release)."""
    def codegen(context, builder, signature, args):
        word = builder.inttoptr(args[0], ir.IntType(64).as_pointer())
        builder.store_atomic(ir.Constant(ir.IntType(64), 0), word, "release", 8)
        return context.get_dummy_value()
    return types.none(types.int64), codegen


@intrinsic
def _yield_thread(typingctx):
    """Let another thread run while we wait (``sched_yield``; a no-op off POSIX)."""
    def codegen(context, builder, signature, args):
        if os.name == "posix":
            fn = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ir.IntType(32), []), "sched_yield")
            builder.call(fn, [])
        return context.get_dummy_value()
    return types.none(), codegen


@numba.njit(inline="always")
def _i64(address):
    return numba.carray(_pointer(address), (1,), np.int64)[0]


@numba.njit(inline="always")
def _i32(address):
    return numba.carray(_pointer(address), (1,), np.int32)[0]


@numba.njit(inline="always")
def _set_i64(address, value):
    numba.carray(_pointer(address), (1,), np.int64)[0] = value


@numba.njit(inline="always")
def _set_i32(address, value):
    numba.carray(_pointer(address), (1,), np.int32)[0] = value


@numba.njit(inline="always")
def _dim(buffer, axis):
    return _i64(_i64(buffer + B_DIMS) + 8 * axis)


@numba.njit
def _error(frame, message):
    """Hand XLA an error made from a prepared :class:`_Message` (its address)."""
    api = _i64(frame + F_API)
    return _call_error_create(_i64(api + A_ERROR_CREATE), message)


@numba.njit
def _metadata(frame, extension, version_error):
    """Answer XLA's metadata query (made once, when the target is registered).

    We report the runtime's own API version: every field this module reads
    exists since version 0.1, and minor versions only add fields, so any
    0.x runtime is compatible; another major version is refused.
    """
    api = _i64(frame + F_API)
    major = _i32(api + A_VERSION + V_MAJOR)
    if major != _API_MAJOR:
        return _error(frame, version_error)
    metadata = _i64(extension + M_METADATA)
    version = metadata + M_VERSION
    _set_i64(version + V_SIZE, VERSION_SIZE)
    _set_i64(version + V_EXTENSION, 0)
    _set_i32(version + V_MAJOR, major)
    _set_i32(version + V_MINOR, _i32(api + A_VERSION + V_MINOR))
    _set_i32(metadata + M_TRAITS, 0)  # not safe to capture into a CUDA graph
    return _pointer(0)


_VERSION_MESSAGE = _Message(
    f"hapsira: this XLA's FFI has an API major version other than {_API_MAJOR}, which "
    "hapsira's JAX layer was not written for; install a JAX release it supports",
    _ERROR_FAILED_PRECONDITION)


def _frame_namespace():
    """Globals of a generated handler: the helpers and the layout constants."""
    namespace = {name: value for name, value in globals().items()
                 if name.startswith(("F_", "E_", "M_", "V_", "A_", "B_"))}
    namespace.update(numba=numba, np=np, _pointer=_pointer, _address=_address,
                     _i64=_i64, _i32=_i32, _set_i64=_set_i64, _dim=_dim, _error=_error,
                     _metadata=_metadata, VERSION_ERROR=_VERSION_MESSAGE.address,
                     EXTENSION_METADATA=_EXTENSION_METADATA, STAGE_EXECUTE=_STAGE_EXECUTE)
    return namespace


_HANDLER_SIGNATURE = types.voidptr(types.voidptr)

_REFUSAL_SOURCE = """
def handler(frame_pointer):
    frame = _address(frame_pointer)
    extension = _i64(frame + F_EXTENSION)
    if extension != 0 and _i32(extension + E_TYPE) == EXTENSION_METADATA:
        return _metadata(frame, extension, VERSION_ERROR)
    return _error(frame, MESSAGE)
"""


def _refusal_handler(message):
    """A handler that answers the metadata query and otherwise returns ``message``."""
    namespace = _frame_namespace()
    namespace["MESSAGE"] = message.address
    exec(compile(_REFUSAL_SOURCE, "<hapsira xla refusal handler>", "exec"), namespace)
    return numba.cfunc(_HANDLER_SIGNATURE)(namespace["handler"])


# --------------------------------------------------------------------------
# The kernel as an XLA FFI target, and as a JAX function.
# --------------------------------------------------------------------------

_NAMES = itertools.count()
_REGISTER_LOCK = threading.Lock()
#: One parallel region at a time: XLA may run two of our calls at once on
#: two of its threads, and numba's workqueue threading layer aborts on
#: concurrent parallel regions (omp and tbb would oversubscribe the cores).
_PARALLEL_LOCK = np.zeros(1, dtype=np.int64)


class XlaKernel:
    """An :class:`~hapsira_core.jit.ObjectKernel` as a JAX function over XLA's buffers.

    Call it with the kernel's input arrays (JAX arrays or anything
    ``jnp.asarray`` takes; cast to each argument's dtype), the number of
    objects ``n`` and the ``sizes`` of core dimensions that only outputs
    have; it returns the output arrays (scratch ones included), each
    ``(n,) + core``. Works inside ``jax.jit``; ``jax.vmap`` merges its axis
    into the object axis; derivatives raise :class:`DerivativeError`.

    What it needs from the kernel (the coupling to :mod:`hapsira_core.jit`):
    ``kernel.body`` (the per-object ``hjit`` function), ``kernel.args`` (each
    :class:`~hapsira_core.jit.Arg`'s ``name``, ``dtype``, ``core``,
    ``per_object``, ``output``; inputs first) and, on ``cuda``,
    ``kernel.compile()`` (the ``cuda.jit`` kernel taking every array, one
    thread per object).
    """

    def __init__(self, kernel, what="hapsira kernel", *, simulator_on_cpu=False):
        self.kernel = kernel
        # A testing aid: under the CUDA simulator, register the CUDA launcher
        # on JAX's CPU platform (simulated device memory is host memory), so
        # that the GPU path's frame decoding and launch run without a GPU.
        self.simulator_on_cpu = simulator_on_cpu and TARGET == "cuda" \
            and settings.cuda_simulator_enabled()
        self.args = list(kernel.args)
        self.what = what
        flags = [a.output for a in self.args]
        if not any(flags) or flags != sorted(flags):
            raise ValueError("kernel args: inputs first, then at least one output")
        self.n_inputs = flags.index(True)
        for arg in self.args:
            if not arg.per_object and not arg.core:
                raise NotImplementedError(f"{what}: shared scalar argument {arg.name} "
                                          "(pass it as a 1-element array)")
        self.inputs = self.args[:self.n_inputs]
        self.outputs = self.args[self.n_inputs:]
        self.name = f"hapsira_xla_{next(_NAMES)}"
        #: data pointers of the buffers of the last call on the CPU platform
        #: (inputs then outputs): proof that XLA's own buffers were used
        self.pointers = np.zeros(len(self.args), dtype=np.int64)
        self._messages = []
        self._handlers = []  # keeps compiled handlers (and ctypes callbacks) alive
        self._ops = {}
        self._register()

    # -- registration ------------------------------------------------------

    def _register(self):
        mismatch = _Message(self._mismatch_text(), _ERROR_FAILED_PRECONDITION)
        self._messages.append(mismatch)
        refusal = _refusal_handler(mismatch)
        if TARGET == "cuda":
            own, own_platform = (self._cuda_handler(), "CUDA")
            others = ("cpu",)
        else:
            own, own_platform = (self._cpu_handler(), "cpu")
            others = ("CUDA",)
        if self.simulator_on_cpu:
            own_platform, others = "cpu", ()
        elif TARGET == "cuda" and settings.cuda_simulator_enabled():
            own = None  # no XLA platform runs simulated kernels
        self._handlers += [own, refusal]
        with _REGISTER_LOCK:
            if own is not None:
                jax.ffi.register_ffi_target(self.name, jax.ffi.pycapsule(own.address),
                                            platform=own_platform)
            for platform in others:
                jax.ffi.register_ffi_target(self.name, jax.ffi.pycapsule(refusal.address),
                                            platform=platform)

    def _mismatch_text(self):
        if TARGET == "cuda" and settings.cuda_simulator_enabled():
            return (f"hapsira: the {self.what} cannot run here: HAPSIRA_TARGET=cuda under "
                    "the CUDA simulator (NUMBA_ENABLE_CUDASIM=1) has no XLA platform; "
                    "start Python with HAPSIRA_TARGET=cpu or parallel to call it from JAX "
                    "on the CPU, or use a real GPU with HAPSIRA_TARGET=cuda")
        if TARGET == "cuda":
            return (f"hapsira: the {self.what} was built for HAPSIRA_TARGET=cuda and runs "
                    "on JAX's GPU platform, but this program runs on the CPU; put its "
                    "inputs on a GPU (jax.device_put(x, jax.devices('gpu')[0])) or start "
                    "Python with HAPSIRA_TARGET=cpu or parallel")
        return (f"hapsira: the {self.what} was built for HAPSIRA_TARGET={TARGET} and runs "
                "on JAX's CPU platform, but this program runs on a GPU; put its inputs "
                "on the CPU (jax.device_put(x, jax.devices('cpu')[0])) or start Python "
                "with HAPSIRA_TARGET=cuda")

    def _cpu_handler(self):
        """A cfunc that wraps XLA's buffers as arrays and runs the per-object loop."""
        loop = self._cpu_loop()
        wrong_frame = _Message(
            f"hapsira: the {self.what} was called with a call frame it does not expect "
            f"(expected the execute stage, {self.n_inputs} arguments and "
            f"{len(self.outputs)} results)", _ERROR_INTERNAL)
        wrong_buffer = _Message(
            f"hapsira: the {self.what} got buffers whose dtypes, ranks or shapes do not "
            "agree with its declared arguments", _ERROR_INTERNAL)
        # numba cannot raise out of a cfunc: an exception in the loop (a bounds check
        # of `checks.bounds_checked`) was printed and the outputs left as garbage
        raised = _Message(
            f"hapsira: the {self.what} raised inside the kernel: params: a read past the "
            "end of a params row, at an index computed at run time (bounds check); no "
            "result is returned", _ERROR_INTERNAL)
        self._messages += [wrong_frame, wrong_buffer, raised]
        lines = ["def handler(frame_pointer):",
                 "    frame = _address(frame_pointer)",
                 "    extension = _i64(frame + F_EXTENSION)",
                 "    if extension != 0 and _i32(extension + E_TYPE) == EXTENSION_METADATA:",
                 "        return _metadata(frame, extension, VERSION_ERROR)",
                 "    if (_i32(frame + F_STAGE) != STAGE_EXECUTE",
                 f"            or _i64(frame + F_NARGS) != {self.n_inputs}",
                 f"            or _i64(frame + F_NRETS) != {len(self.outputs)}):",
                 "        return _error(frame, WRONG_FRAME)",
                 "    arguments = _i64(frame + F_ARGS)",
                 "    results = _i64(frame + F_RETS)"]
        names = []
        for index, arg in enumerate(self.args):
            table, slot = ("results", index - self.n_inputs) if arg.output \
                else ("arguments", index)
            rank = len(arg.core) + (1 if arg.per_object else 0)
            code = _DTYPE_CODES[arg.dtype]
            name = f"a{index}"
            shape = ", ".join(f"_dim(b, {axis})" for axis in range(rank)) + ","
            lines += [f"    b = _i64({table} + {8 * slot})",
                      f"    if _i32(b + B_DTYPE) != {code} or _i64(b + B_RANK) != {rank}:",
                      "        return _error(frame, WRONG_BUFFER)",
                      f"    _set_i64(POINTERS + {8 * index}, _i64(b + B_DATA))",
                      f"    {name} = numba.carray(_pointer(_i64(b + B_DATA)), ({shape}), "
                      f"np.{arg.dtype.name})"]
            names.append(name)
        same, n_or_one = self._shape_rules()
        checks = [f"a{i}.shape[{d}] != a{j}.shape[{e}]" for (i, d), (j, e) in same] + \
                 [f"(a{i}.shape[0] != a{self.n_inputs}.shape[0] and a{i}.shape[0] != 1)"
                  for i in n_or_one]
        if checks:
            lines += [f"    if {' or '.join(checks)}:",
                      "        return _error(frame, WRONG_BUFFER)"]
        call = ["        failed = False",
                "        try:",
                f"            loop({', '.join(names)})",
                "        except Exception:",
                "            failed = True"]
        if TARGET == "parallel":
            call = ["        while not _try_lock(LOCK):",
                    "            _yield_thread()"] + call + ["        _unlock(LOCK)"]
        call += ["        if failed:",
                 "            return _error(frame, RAISED)"]
        lines += [f"    if a{self.n_inputs}.shape[0] > 0:"] + call + ["    return _pointer(0)"]
        namespace = _frame_namespace()
        namespace.update(loop=loop, WRONG_FRAME=wrong_frame.address,
                         WRONG_BUFFER=wrong_buffer.address, RAISED=raised.address,
                         POINTERS=self.pointers.ctypes.data,
                         LOCK=_PARALLEL_LOCK.ctypes.data, _try_lock=_try_lock,
                         _unlock=_unlock, _yield_thread=_yield_thread)
        exec(compile("\n".join(lines), f"<hapsira xla handler {self.name}>", "exec"), namespace)
        return numba.cfunc(_HANDLER_SIGNATURE, error_model="numpy")(namespace["handler"])

    def _shape_rules(self):
        """What the buffers' shapes must satisfy, so that no kernel reads or
        writes out of bounds: ``same`` pairs of (arg index, axis) of one named
        dimension (outputs' object axes among them), and the per-object
        inputs whose object axis is n or 1."""
        first, same, n_or_one = {}, [], []
        for index, arg in enumerate(self.args):
            axes = list(enumerate(arg.core, start=1 if arg.per_object else 0))
            if arg.output:
                axes.insert(0, (0, None))  # None: the object axis
            elif arg.per_object:
                n_or_one.append(index)
            for axis, name in axes:
                if name in first:
                    same.append((first[name], (index, axis)))
                else:
                    first[name] = (index, axis)
        return same, n_or_one

    def _cpu_loop(self):
        """``for i in prange(n): body(rows of i)``, compiled for cpu or parallel.

        The same per-object body as the numpy call, so the same numbers; a
        per-object input with one row is shared by every object.
        """
        rows = []
        for arg in self.args:
            if not arg.per_object:
                rows.append(arg.name)
            elif arg.output:
                rows.append(f"{arg.name}[i]")
            else:
                rows.append(f"{arg.name}[i if {arg.name}.shape[0] != 1 else 0]")
        first_out = self.outputs[0].name
        # prange's index is unsigned; as int64 it unifies with the 0 of a
        # shared row (uint64 with int64 would give a float index).
        source = (f"def loop({', '.join(a.name for a in self.args)}):\n"
                  f"    for j in prange({first_out}.shape[0]):\n"
                  f"        i = np.int64(j)\n"
                  f"        body({', '.join(rows)})\n")
        namespace = {"body": self.kernel.body, "prange": numba.prange, "np": np}
        exec(compile(source, f"<hapsira xla loop {self.name}>", "exec"), namespace)
        return numba.njit(error_model="numpy", parallel=TARGET == "parallel")(
            namespace["loop"])

    def _cuda_handler(self):
        """A ctypes callback that launches the cuda kernel on XLA's stream."""
        launcher = _CudaLauncher(self)
        callback = _HANDLER_TYPE(launcher)
        callback.address = _c.cast(callback, _c.c_void_p).value
        callback.launcher = launcher
        return callback

    # -- the JAX function --------------------------------------------------

    def __call__(self, *inputs, n, sizes=None):
        if len(inputs) != self.n_inputs:
            raise TypeError(f"{self.what}: expected {self.n_inputs} input arrays, "
                            f"got {len(inputs)}")
        if not jax.config.jax_enable_x64 and any(
                a.dtype.itemsize == 8 for a in self.args):
            raise RuntimeError(
                f"{self.what} computes in 64-bit floats and integers, which JAX disables "
                "by default: call jax.config.update('jax_enable_x64', True) at start-up "
                "(or set JAX_ENABLE_X64=1)")
        inputs = [jnp.asarray(x, dtype=a.dtype) for x, a in zip(inputs, self.inputs)]
        return self._op(int(n), self._core_sizes(inputs, sizes))(*inputs)

    def output_sizes(self, shapes):
        """``sizes`` for a call, from the outputs' ``(shape, dtype)`` in argument order
        (for instance the values of :meth:`hapsira_core.ivp.Problem.output_shapes`)."""
        shapes = list(shapes)
        if len(shapes) != len(self.outputs):
            raise ValueError(f"{self.what}: {len(shapes)} output shapes for "
                             f"{len(self.outputs)} outputs")
        sizes = {}
        for arg, (shape, dtype) in zip(self.outputs, shapes):
            if np.dtype(dtype) != arg.dtype or len(shape) != len(arg.core) + 1:
                raise ValueError(f"{self.what}: output {arg.name} is {arg.dtype} (n, "
                                 f"{', '.join(arg.core)}), got {np.dtype(dtype)} {shape}")
            for name, size in zip(arg.core, shape[1:]):
                if sizes.setdefault(name, size) != size:
                    raise ValueError(f"{self.what}: outputs disagree on {name} "
                                     f"({sizes[name]} and {size})")
        return sizes

    def _core_sizes(self, inputs, sizes):
        known = dict(sizes or {})
        for arg, array in zip(self.inputs, inputs):
            shape = array.shape[1:] if arg.per_object else array.shape
            if len(shape) != len(arg.core):
                raise ValueError(f"{self.what}: {arg.name} has shape {array.shape}, "
                                 f"expected {'(n or 1, ' if arg.per_object else '('}"
                                 f"{', '.join(arg.core)})")
            for name, size in zip(arg.core, shape):
                if known.setdefault(name, size) != size:
                    raise ValueError(f"{self.what}: {arg.name} gives {name} = {size}, "
                                     f"another argument {known[name]}")
        missing = {name for a in self.outputs for name in a.core} - set(known)
        if missing:
            raise ValueError(f"{self.what}: sizes of {sorted(missing)} are needed")
        return tuple(sorted(known.items()))

    def _op(self, n, sizes):
        """The JAX function for ``n`` objects and these core sizes (built once)."""
        key = (n, sizes)
        if key in self._ops:
            return self._ops[key]
        size = dict(sizes)
        results = [jax.ShapeDtypeStruct((n,) + tuple(size[d] for d in a.core), a.dtype)
                   for a in self.outputs]
        call = jax.ffi.ffi_call(self.name, results)

        @custom_vmap
        def op(*inputs):
            return tuple(call(*inputs))

        @op.def_vmap
        def op_vmap(axis_size, in_batched, *inputs):
            return self._batched(n, sizes, axis_size, in_batched, inputs)

        @jax.custom_jvp
        def differentiable(*inputs):
            return op(*inputs)

        @differentiable.defjvp
        def _jvp(primals, tangents):
            raise DerivativeError(
                f"derivatives of the {self.what} are not supported (jax.grad, jax.jvp, "
                "jax.vjp): it runs as a foreign XLA kernel with no derivative rule. "
                "Wrap its inputs in jax.lax.stop_gradient where no derivative through "
                "it is wanted.")

        self._ops[key] = differentiable
        return differentiable

    def _batched(self, n, sizes, batch, in_batched, inputs):
        """vmap: the batch of B problems of n objects is one problem of B * n.

        A per-object input with one row is shared; a batched shared input
        (another ``tofs`` per problem, say) cannot be merged: then the
        problems run one after another (``lax.map``).
        """
        if any(b and not a.per_object for a, b in zip(self.inputs, in_batched)):
            stacked = [x for x, b in zip(inputs, in_batched) if b]

            def one(xs):
                xs = iter(xs)
                return self._op(n, sizes)(*[next(xs) if b else x
                                           for x, b in zip(inputs, in_batched)])
            return jax.lax.map(one, stacked), (True,) * len(self.outputs)
        merged = []
        for arg, x, b in zip(self.inputs, inputs, in_batched):
            if not b:
                if arg.per_object and x.shape[0] == n and n != 1:  # one row per object
                    x = jnp.broadcast_to(x[None], (batch,) + x.shape)
                    x = x.reshape((batch * n,) + x.shape[2:])
                merged.append(x)
                continue
            if x.shape[1] != n:  # one shared row in each problem
                x = jnp.broadcast_to(x, (batch, n) + x.shape[2:])
            merged.append(x.reshape((batch * n,) + x.shape[2:]))
        outputs = self._op(batch * n, sizes)(*merged)
        return tuple(y.reshape((batch, n) + y.shape[1:]) for y in outputs), \
            (True,) * len(self.outputs)


# --------------------------------------------------------------------------
# cuda: the launch on XLA's stream.
# --------------------------------------------------------------------------

_HANDLER_TYPE = _c.CFUNCTYPE(_c.c_void_p, _c.POINTER(_CallFrame))
_ERROR_CREATE_TYPE = _c.CFUNCTYPE(_c.c_void_p, _c.POINTER(_ErrorCreateArgs))
_STREAM_GET_TYPE = _c.CFUNCTYPE(_c.c_void_p, _c.POINTER(_StreamGetArgs))
_ORDINAL_GET_TYPE = _c.CFUNCTYPE(_c.c_void_p, _c.POINTER(_DeviceOrdinalGetArgs))
_DTYPES = {code: dtype for dtype, code in _DTYPE_CODES.items()}


def _python_error(api, text, code=_ERROR_INTERNAL):
    args = _ErrorCreateArgs(_struct_size(_ErrorCreateArgs, "errc"), None, text.encode(), code)
    return _ERROR_CREATE_TYPE(api.Error_Create)(_c.byref(args))


def _answer_metadata(api, extension_address):
    if api.api_version.major_version != _API_MAJOR:
        return _python_error(api, _VERSION_MESSAGE.text.decode(), _ERROR_FAILED_PRECONDITION)
    metadata = _MetadataExtension.from_address(extension_address).metadata.contents
    metadata.api_version = _ApiVersion(_struct_size(_ApiVersion, "minor_version"), None,
                                       api.api_version.major_version,
                                       api.api_version.minor_version)
    metadata.traits = 0
    return None


class _CudaLauncher:
    """The CUDA handler's body (called by XLA on its thread, with the GIL taken)."""

    def __init__(self, xla):
        self.xla = xla
        self.simulated = settings.cuda_simulator_enabled()

    def __call__(self, frame_pointer):
        frame = frame_pointer.contents
        api = _Api.from_address(frame.api)
        try:
            if frame.extension_start:
                base = _ExtensionBase.from_address(frame.extension_start)
                if base.type == _EXTENSION_METADATA:
                    return _answer_metadata(api, frame.extension_start)
            return self.launch(frame, api)
        except BaseException as exc:  # an exception must not cross into XLA
            return _python_error(api, f"hapsira: launching the {self.xla.what} failed: "
                                      f"{type(exc).__name__}: {exc}")

    def buffers(self, frame):
        xla = self.xla
        if frame.stage != _STAGE_EXECUTE or frame.args.size != xla.n_inputs \
                or frame.rets.size != len(xla.outputs):
            raise RuntimeError(f"unexpected call frame (stage {frame.stage}, "
                               f"{frame.args.size} arguments, {frame.rets.size} results)")
        pointers = [frame.args.args[i] for i in range(frame.args.size)] + \
                   [frame.rets.rets[i] for i in range(frame.rets.size)]
        found = []
        for arg, pointer in zip(xla.args, pointers):
            buffer = _Buffer.from_address(pointer)
            rank = len(arg.core) + (1 if arg.per_object else 0)
            if _DTYPES.get(buffer.dtype) != arg.dtype or buffer.rank != rank:
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
        from numba import cuda

        found = self.buffers(frame)
        for index, (data, _, _) in enumerate(found):
            self.xla.pointers[index] = data
        n = found[self.xla.n_inputs][1][0]
        if n == 0:
            return None
        kernel = self.xla.kernel.compile()
        block = settings.CUDA_BLOCK
        grid = (n + block - 1) // block
        if self.simulated:
            # Simulated "device memory" is host memory: the buffers as numpy arrays.
            arrays = [_host_view(*item) for item in found]
            kernel[grid, block](*arrays)
            return None
        stream_args = _StreamGetArgs(_struct_size(_StreamGetArgs, "stream"), None, frame.ctx,
                                     None)
        error = _STREAM_GET_TYPE(api.Stream_Get)(_c.byref(stream_args))
        if error:
            return error
        ordinal = 0
        if api.struct_size >= _struct_size(_Api, "DeviceOrdinal_Get") and api.DeviceOrdinal_Get:
            ordinal_args = _DeviceOrdinalGetArgs(
                _struct_size(_DeviceOrdinalGetArgs, "device_ordinal"), None, frame.ctx, 0)
            error = _ORDINAL_GET_TYPE(api.DeviceOrdinal_Get)(_c.byref(ordinal_args))
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
            kernel[grid, block, stream](*arrays)
        return None


def _host_view(data, shape, dtype):
    count = int(np.prod(shape))
    if count == 0:
        return np.empty(shape, dtype)
    raw = (_c.c_char * (count * dtype.itemsize)).from_address(data)
    return np.frombuffer(raw, dtype=dtype).reshape(shape)


_KERNELS = {}


def xla_kernel(kernel, what="hapsira kernel"):
    """The :class:`XlaKernel` of ``kernel`` (an ObjectKernel), built once per kernel."""
    key = id(kernel)
    entry = _KERNELS.get(key)
    if entry is None or entry[0] is not kernel:
        entry = (kernel, XlaKernel(kernel, what))
        _KERNELS[key] = entry
    return entry[1]
