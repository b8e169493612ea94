"""The host's floating-point mode: every object integrates with IEEE subnormals,
whatever thread runs it.

x86's MXCSR register, one per thread, can flush subnormal results to zero
(FTZ) and read subnormal inputs as zero (DAZ). XLA's CPU threads run with both
set, and a thread inherits its creator's mode: numba's worker threads started
from a JAX call kept them for the life of the process. Seen in CI (parallel,
2 cores): an orbit whose z velocity was 8.6e-308 km/s ended at
z = 7.28e-307 km in one call and 8.58e-307 km (scipy's number) in another,
depending on which thread drew the object, and the JAX front gave 7.28e-307
on every host target. Each host kernel therefore clears FTZ and DAZ around
each object and puts the caller's mode back afterwards.

Elsewhere than x86-64 the functions do nothing (the mode is ``0``).
"""

import contextlib
import platform

import numba
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

#: MXCSR's flush-to-zero (bit 15) and denormals-are-zero (bit 6) flags
_FTZ_DAZ = (1 << 15) | (1 << 6)
_X86 = platform.machine().lower() in ("x86_64", "amd64")


def _mxcsr(builder, name, slot):
    function = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(ir.VoidType(), [ir.IntType(8).as_pointer()]),
        f"llvm.x86.sse.{name}")
    builder.call(function, [builder.bitcast(slot, ir.IntType(8).as_pointer())])


@intrinsic
def ieee_floats(typingctx):
    """Clear FTZ and DAZ on this thread; returns the mode it had (for `restore_floats`)."""
    def codegen(context, builder, signature, args):
        if not _X86:
            return ir.Constant(ir.IntType(32), 0)
        slot = cgutils.alloca_once(builder, ir.IntType(32))
        _mxcsr(builder, "stmxcsr", slot)
        saved = builder.load(slot)
        builder.store(builder.and_(saved, ir.Constant(ir.IntType(32), ~_FTZ_DAZ & 0xFFFFFFFF)),
                      slot)
        _mxcsr(builder, "ldmxcsr", slot)
        return saved
    return types.uint32(), codegen


@intrinsic
def restore_floats(typingctx, saved):
    """Put back the mode that `ieee_floats` returned."""
    if not isinstance(saved, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        if _X86:
            slot = cgutils.alloca_once(builder, ir.IntType(32))
            builder.store(context.cast(builder, args[0], saved, types.uint32), slot)
            _mxcsr(builder, "ldmxcsr", slot)
        return context.get_dummy_value()
    return types.void(saved), codegen


@numba.njit(cache=False)
def _enter():
    return ieee_floats()


@numba.njit(cache=False)
def restore_mode(saved):
    """`restore_floats` for Python code."""
    restore_floats(saved)


@contextlib.contextmanager
def ieee_python():
    """IEEE subnormals for Python code on this thread and the threads it starts
    (the CUDA simulator runs a kernel's Python on threads of its own, and the
    JAX front's handler on an XLA thread)."""
    saved = _enter()
    try:
        yield
    finally:
        restore_mode(saved)


@numba.njit(cache=False)
def flush_subnormals():
    """Set FTZ and DAZ on this thread, as XLA's threads have them (for tests);
    returns the previous mode."""
    saved = ieee_floats()
    restore_floats(saved | _FTZ_DAZ)
    return saved
