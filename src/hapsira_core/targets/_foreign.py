"""What every target's C calls share: the numba signature of a declaration and the
converters that check each argument's type at compile time, and the host's
declaration (a library called by symbol name)."""

from ..ctools.prototype import F64, I64, PTR
from ..ctools.sources import ForeignCompileError
from ..ctools.toolchain import _host_library

def _type_message(decl, position, received):
    param = decl.params[position]
    expected = {F64: "a float (C: double)", I64: "an integer (C: int64_t)",
                PTR: "a float64 array (C: const double *)"}[param.kind]
    return (f"{decl.name}(): argument {position + 1} ({param.name}) must be {expected}, "
            f"got {received}")


def _numba_converters(decl, intrinsic, errors, cgutils):
    """One numba intrinsic per argument: checks its type while compiling and
    converts it for the C call (arrays become their data pointer and a flag
    saying the data is contiguous, as C reads it)."""
    from numba.core import types

    def scalar(position, kind):
        target = types.float64 if kind == F64 else types.int64
        accepted = (types.Float, types.Integer, types.Boolean) if kind == F64 else (types.Integer,)

        @intrinsic
        def convert(typingctx, value):
            if not isinstance(value, accepted):
                raise errors.TypingError(_type_message(decl, position, value))

            def codegen(context, builder, signature, args):
                return context.cast(builder, args[0], signature.args[0], target)
            return target(value), codegen
        return convert

    def pointer(position):
        result = types.Tuple((types.CPointer(types.float64), types.boolean))

        @intrinsic
        def convert(typingctx, value):
            if not (isinstance(value, types.Array) and value.dtype == types.float64):
                raise errors.TypingError(_type_message(decl, position, value))

            def codegen(context, builder, signature, args):
                array = context.make_array(value)(context, builder, args[0])
                ok = cgutils.true_bit
                if value.layout != "C":
                    # contiguous in C order: each dimension longer than 1 has the stride
                    # of the dimensions after it (a view such as p[::2] is not)
                    shape = cgutils.unpack_tuple(builder, array.shape, value.ndim)
                    strides = cgutils.unpack_tuple(builder, array.strides, value.ndim)
                    expected = context.get_constant(types.intp, 8)
                    one = context.get_constant(types.intp, 1)
                    for extent, stride in zip(reversed(shape), reversed(strides)):
                        fits = builder.or_(builder.icmp_signed("<=", extent, one),
                                           builder.icmp_signed("==", stride, expected))
                        ok = builder.and_(ok, fits)
                        expected = builder.mul(expected, extent)
                return context.make_tuple(builder, result, (array.data, ok))
            return result(value), codegen
        return convert

    return [pointer(i) if p.kind == PTR else scalar(i, p.kind)
            for i, p in enumerate(decl.params)]


def _numba_signature(decl):
    from numba.core import types
    kinds = {F64: types.float64, I64: types.int64, PTR: types.CPointer(types.float64)}
    return types.float64(*(kinds[p.kind] for p in decl.params))



def declare_host(decl):
    """cpu / parallel: the host library, called by symbol name (numba ExternalFunction)."""
    import llvmlite.binding as llvm
    from numba.core import cgutils, errors, types
    from numba.extending import intrinsic

    library = _host_library(decl)
    try:
        llvm.load_library_permanently(library)
    except RuntimeError as error:
        raise ForeignCompileError(decl.display, None, f"the compiled library {library} does "
                                  f"not load: {error}") from None
    call = types.ExternalFunction(decl.symbol, _numba_signature(decl))
    return call, _numba_converters(decl, intrinsic, errors, cgutils), library
