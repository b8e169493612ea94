"""What differs on a real GPU from the simulator: libdevice, numba-cuda's runtime
library, and C functions declared as device functions with the code to link."""

from numba.cuda import libdevice
from numba.cuda.memory_management.nrt import NRT_LIBRARY  # noqa: F401  (launch.py)

from ...ctools.sources import _compile_error
from .._foreign import _numba_converters, _numba_signature

#: Whether kernels run simulated (never here).
SIMULATED = False


def is_simulated_array(value):
    """A device array of the simulator: never, on a GPU."""
    return False


def rsqrt(x):
    """One reciprocal square root (libdevice, within 1 ulp) instead of a
    square root and a division: half the latency of a gravity term."""
    return libdevice.rsqrt(x)


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
