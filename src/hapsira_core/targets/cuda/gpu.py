"""What differs on a real GPU from the simulator: libdevice, numba-cuda's runtime
library, and C functions declared as device functions with the code to link."""

from llvmlite import ir as llvm_ir
from numba import cuda, types
from numba.cuda.extending import intrinsic
from numba.cuda.memory_management.nrt import NRT_LIBRARY  # noqa: F401  (launch.py)

from ...ctools.sources import _compile_error
from .._foreign import _numba_converters, _numba_signature

#: Whether kernels run simulated (never here).
SIMULATED = False


def is_simulated_array(value):
    """A device array of the simulator: never, on a GPU."""
    return False


#: PTX of the hardware's first approximations (MUFU.RSQ64H, MUFU.RCP64H: the upper word
#: of the result, about 20 bits; subnormal inputs read as 0). The reciprocal's lower word
#: is ptxas's own for ``rcp.rn.f64`` (the upper word of ``x`` plus 0x300402, seen in its
#: SASS): with a lower word of 0, x = 0x1.fffffffffffffp+e (every mantissa bit set)
#: iterated to the power of two below 1/x, the last correction then fell on a midpoint
#: and rounded down, one ulp off the division.
_APPROXIMATIONS = {
    "rsqrt": "rsqrt.approx.ftz.f64 $0, $1;",
    "rcp": "rcp.approx.ftz.f64 $0, $1;",
    "rcp_start": ("{ .reg .f64 y; .reg .b32 xl, xh, yl, yh; rcp.approx.ftz.f64 y, $1; "
                  "mov.b64 {xl, xh}, $1; mov.b64 {yl, yh}, y; add.s32 yl, xh, 3146754; "
                  "mov.b64 $0, {yl, yh}; }"),
}


@intrinsic
def _approx(typingctx, x, operation):
    """The hardware's first approximation of ``operation`` (a literal: ``"rsqrt"``,
    ``"rcp"``, ``"rcp_start"``) at ``x``: `_APPROXIMATIONS`."""
    if not isinstance(operation, types.StringLiteral):
        return None
    text = _APPROXIMATIONS[operation.literal_value]

    def codegen(context, builder, signature, args):
        double = llvm_ir.DoubleType()
        asm = llvm_ir.InlineAsm(llvm_ir.FunctionType(double, [double]), text, "=d,d")
        return builder.call(asm, [args[0]])
    return types.float64(types.float64, operation), codegen


#: PTX of selects on the upper word of ``x`` (``$1``): ``$2`` where ``x``'s exponent is in a
#: range, else ``$3``. Integer instructions (LOP3, IADD, ISETP) and selects instead of
#: comparisons of doubles: a DSETP is an FP64 instruction, issued on the same pipe as the
#: step's arithmetic, and these selects run 23 times per DOP853 step of the reference
#: kernel (one per `rsqrt`, two per `reciprocal`). The ranges, as unsigned differences:
#: ``positive_normal``: 0x00100000 <= hx < 0x7ff00000 (a positive, normal, finite x);
#: ``reciprocal_fast``: 0x00100000 <= (hx & 0x7fffffff) < 0x7fd00000 (2^-1022 <= |x| <
#: 2^1022, where ptxas's ``rcp.rn.f64`` takes its fast path: `reciprocal`).
_SELECTS = {
    "positive_normal": ("{ .reg .b32 xl, xh; .reg .pred p; mov.b64 {xl, xh}, $1; "
                        "sub.s32 xh, xh, 1048576; setp.lt.u32 p, xh, 2145386496; "
                        "selp.f64 $0, $2, $3, p; }"),
    "reciprocal_fast": ("{ .reg .b32 xl, xh; .reg .pred p; mov.b64 {xl, xh}, $1; "
                        "and.b32 xh, xh, 2147483647; sub.s32 xh, xh, 1048576; "
                        "setp.lt.u32 p, xh, 2143289344; selp.f64 $0, $2, $3, p; }"),
}


@intrinsic
def _select(typingctx, x, inside, outside, kind):
    """``inside`` where ``x``'s exponent is in the range ``kind`` names (a literal,
    `_SELECTS`), else ``outside``."""
    if not isinstance(kind, types.StringLiteral):
        return None
    text = _SELECTS[kind.literal_value]

    def codegen(context, builder, signature, args):
        double = llvm_ir.DoubleType()
        asm = llvm_ir.InlineAsm(llvm_ir.FunctionType(double, [double] * 3), text, "=d,d,d,d")
        return builder.call(asm, list(args[:3]))
    return types.float64(types.float64, types.float64, types.float64, kind), codegen


def rsqrt(x):
    """One reciprocal square root instead of a square root and a division: half
    the latency of a gravity term. libdevice's ``rsqrt`` step for step (the
    hardware's approximation, then one third-order correction: within 1 ulp,
    the same bits for normal ``x``) without its branch to a slow path for
    zero, infinity, NaN, negative and subnormal ``x``: each of the reference
    kernel's 11 evaluations per step had one, a branch and a block boundary
    that ptxas schedules around. Here a select keeps the approximation unless ``x``
    is positive, normal and finite, which gives libdevice's answer for 0 (inf), inf
    (0), a negative normal ``x`` and NaN (NaN); a subnormal ``x`` (below 2.2e-308) is
    read as a zero of its sign: inf, or -inf as for -0.0. (The select was ``r if e
    == e else y``, on the correction's NaN: the same choice, as an FP64 comparison.)"""
    y = _approx(x, "rsqrt")
    e = cuda.fma(-x, y * y, 1.0)  # 1 - x y^2, the approximation's relative error
    r = cuda.fma(cuda.fma(e, 0.375, 0.5), y * e, y)  # y (1 + e/2 + 3 e^2/8)
    return _select(x, r, y, "positive_normal")


def reciprocal(x):
    """``1 / x`` correctly rounded, as a division on the GPU rounds it, without its
    branch to a slow path: where ptxas's own sequence for ``rcp.rn.f64`` takes its
    fast path (2^-1022 <= |x| < 2^1022, its test of the starting approximation's lower
    word; `_SELECTS`' ``reciprocal_fast``), that sequence (its starting approximation,
    a third-order and a Newton correction), the same bits (checked on a GPU);
    elsewhere a select takes the hardware's approximation, which gives 0 -> inf,
    inf -> 0, NaN -> NaN, a subnormal x -> inf of its sign and |x| >= 2^1022 -> at
    most 2^-1022 in magnitude (0 where the true reciprocal is subnormal).
    The error norm takes one per component per step, with weights between 2^-1022
    and the states' scale: six branches and block boundaries in the reference kernel's
    step loop before, six chains ptxas may interleave now."""
    y = _approx(x, "rcp_start")
    e = cuda.fma(-x, y, 1.0)
    e = cuda.fma(e, e, e)  # e + e^2
    y1 = cuda.fma(y, e, y)  # y (1 + e + e^2)
    r = cuda.fma(y1, cuda.fma(-x, y1, 1.0), y1)
    return _select(x, r, _approx(x, "rcp"), "reciprocal_fast")  # on x's exponent


def declare_foreign(decl):
    """cuda: numba-cuda's declare_device, carrying the code to link with it."""
    from numba import cuda
    from numba.cuda import cgutils
    from numba.cuda.core import errors
    from numba.cuda.extending import intrinsic

    if decl.device_code is not None:
        link, symbol, abi = decl.device_code, decl.name, decl.device_abi
    else:
        source = decl.cuda_source()
        _check_cuda_source(decl, source)
        link, symbol, abi = cuda.CUSource(source, name=decl.display), decl.symbol, "numba"
    call = cuda.declare_device(symbol, _numba_signature(decl), link=[link], abi=abi)
    return call, _numba_converters(decl, intrinsic, errors, cgutils), None


def _check_cuda_source(decl, source):
    """Compile the CUDA source once now (NVRTC, LTO-IR for this GPU), so that bad C
    raises ForeignCompileError at declaration, not inside some kernel's link."""
    from numba import cuda
    from numba.cuda.cudadrv import nvrtc

    cc = cuda.get_current_device().compute_capability
    try:
        nvrtc.compile(source, decl.display, cc, ltoir=True)
    except Exception as error:  # NVRTC's error type differs between versions
        raise _compile_error(decl, str(error).replace("\x00", "")) from None
