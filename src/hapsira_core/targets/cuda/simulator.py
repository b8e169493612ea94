"""What differs under numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``) from a
real GPU: kernels run as Python threads on the host, so arithmetic needs numpy's
IEEE floats, C is called through ctypes, and nothing is linked or timed.

It proves semantics, never speed, and it rejects some options the GPU
compiler accepts (``max_registers``, ``link``), which are left out here.
"""

import ctypes

import numpy as np

from ...ctools.prototype import F64, I64, PTR
from ...ctools.toolchain import _host_library
from .._foreign import _type_message
# ``1 / x``: the division itself, as on the host (the GPU's branch-free form gives its bits)
from .._host import reciprocal  # noqa: F401

#: Whether kernels run simulated.
SIMULATED = True
NRT_LIBRARY = None


def is_simulated_array(value):
    """A device array of the simulator: numpy inside, without ``__cuda_array_interface__``
    (so `is_device_array` says no), but the target's own memory all the same."""
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
    return isinstance(value, FakeCUDAArray)


def rsqrt(x):
    # The simulator runs plain Python, where 1.0 / 0.0 and sqrt(-1.0) raise; numpy's
    # float64 gives inf and NaN as the GPU does (an object at the centre, or with a
    # non-finite state, fails alone).
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.float64(1.0) / np.sqrt(np.float64(x))


def declare_foreign(decl):
    """The CUDA simulator: the host library through ctypes, from the simulated Python."""
    library = _host_library(decl)
    function = getattr(ctypes.CDLL(library), decl.symbol)
    c_types = {F64: ctypes.c_double, I64: ctypes.c_int64, PTR: ctypes.POINTER(ctypes.c_double)}
    function.restype = ctypes.c_double
    function.argtypes = [c_types[p.kind] for p in decl.params]

    def call(*args):
        # numpy's float64 keeps IEEE semantics in the simulated code that follows
        return np.float64(function(*args))

    def scalar(position, kind):
        if kind == I64:
            def accepted(value):  # as numba: integers only, no bool
                return isinstance(value, (int, np.integer)) and not isinstance(value, bool)
        else:
            def accepted(value):
                return isinstance(value, (int, float, np.integer, np.floating, np.bool_))

        def convert(value):
            if not accepted(value):
                raise TypeError(_type_message(decl, position, type(value).__name__))
            return float(value) if kind == F64 else int(value)
        return convert

    def pointer(position):
        def convert(value):
            array = getattr(value, "_ary", value)  # the simulator's device arrays wrap numpy
            if not (isinstance(array, np.ndarray) and array.dtype == np.float64):
                raise TypeError(_type_message(decl, position, type(value).__name__))
            if not array.flags.c_contiguous:
                return None, False
            return array.ctypes.data_as(c_types[PTR]), True
        return convert

    converters = [pointer(i) if p.kind == PTR else scalar(i, p.kind)
                  for i, p in enumerate(decl.params)]
    return call, converters, library
