"""XLA's typed FFI from the C side: its structures, their offsets, and the pieces
of a handler that read a call frame (custom-call API version 4).

They follow ``xla/ffi/api/c_api.h`` (shipped in ``jax.ffi.include_dir()``).
A handler is a numba ``cfunc`` (the host targets: no Python, no GIL) or a
ctypes callback (cuda: numba-cuda launches from Python); both read the same
layout from here. This module imports nothing of hapsira and nothing of JAX:
the targets build their handlers from it (`hapsira_core.targets`), the JAX
front registers them (`hapsira_core.fronts.jax.xla`).
"""

import ctypes
import os

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


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

# --------------------------------------------------------------------------
# The same ABI for handlers written in Python (ctypes callbacks).
# --------------------------------------------------------------------------

_HANDLER_TYPE = _c.CFUNCTYPE(_c.c_void_p, _c.POINTER(_CallFrame))
_ERROR_CREATE_TYPE = _c.CFUNCTYPE(_c.c_void_p, _c.POINTER(_ErrorCreateArgs))
_STREAM_GET_TYPE = _c.CFUNCTYPE(_c.c_void_p, _c.POINTER(_StreamGetArgs))
_ORDINAL_GET_TYPE = _c.CFUNCTYPE(_c.c_void_p, _c.POINTER(_DeviceOrdinalGetArgs))
_DTYPES = {code: dtype for dtype, code in _DTYPE_CODES.items()}


def raised_text(what):
    """What a handler says when the kernel raised (a bounds check): the same words
    from the host handlers and the simulator's launcher."""
    return (f"hapsira: the {what} raised inside the kernel: params: a read past the "
            "end of a params row, at an index computed at run time (bounds check), or "
            "HAPSIRA_DEBUG's bounds checks; no result is returned (call it from numpy "
            "to see which function)")


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

def _host_view(data, shape, dtype):
    count = int(np.prod(shape))
    if count == 0:
        return np.empty(shape, dtype)
    raw = (_c.c_char * (count * dtype.itemsize)).from_address(data)
    return np.frombuffer(raw, dtype=dtype).reshape(shape)


def _refusal_handler(message):
    """A handler that answers the metadata query and otherwise returns ``message``.

    A ctypes callback, not a cfunc: it runs once when the target is registered
    and then only to report an error, and a cfunc took seconds of numba in
    every process (its helpers compiled on a warm cache). ``.address``: what
    ``jax.ffi.pycapsule`` takes.
    """
    def refuse(frame_pointer):
        frame = frame_pointer.contents
        api = _Api.from_address(frame.api)
        try:
            if frame.extension_start:
                base = _ExtensionBase.from_address(frame.extension_start)
                if base.type == _EXTENSION_METADATA:
                    return _answer_metadata(api, frame.extension_start)
        except BaseException as exc:  # an exception must not cross into XLA
            return _python_error(api, f"hapsira: {type(exc).__name__}: {exc}")
        return _ERROR_CREATE_TYPE(api.Error_Create)(_c.byref(message.args))

    callback = _HANDLER_TYPE(refuse)
    callback.address = _c.cast(callback, _c.c_void_p).value
    return callback
