"""The public face of compilation: `hjit` and the kernel pieces of the active target.

Algorithms are written once as `hjit()` functions (plain Python on
tuples and ``math``). The active target (`hapsira_core.targets.active`, one
module or folder per target) turns them into

* ``cpu``: ``numba.njit`` functions and an ``njit`` loop over objects,
* ``parallel``: ``numba.njit`` functions inside ``guvectorize(target="parallel")``,
* ``cuda``: ``numba.cuda.jit(device=True)`` functions inside a ``cuda.jit``
  kernel, one thread per object.
"""

import math

from . import settings
from .kernels.cache import factory, remember  # noqa: F401  (public: Dask workers rebuild what they made)
from .kernels import reciprocals
from .kernels.kernel import Arg  # noqa: F401
from .targets import _host, active

__all__ = ["hjit", "as_written", "switch", "rsqrt", "Arg", "ObjectKernel", "TARGET",
           "is_device_array", "factory", "remember"]

TARGET = settings.TARGET

#: Compile a helper (device) function for the active target: ``numba.njit`` on
#: cpu/parallel, ``numba.cuda.jit(device=True)`` on cuda. Floating-point errors
#: follow IEEE semantics on every target (a division by zero gives inf or NaN,
#: never a Python exception), so that one object's bad arithmetic becomes its
#: own failure status instead of aborting the batch. Use as ``@hjit`` or
#: ``@hjit(option=value)``; options go to numba.
hjit = active.hjit

#: Mark a user's function to be compiled as written, its divisions never shared
#: as reciprocals (``HAPSIRA_FASTMATH``; `hapsira_core.kernels.reciprocals`).
as_written = reciprocals.as_written

#: `ObjectKernel` of the active target.
ObjectKernel = active.ObjectKernel

#: ``rsqrt(x) = 1 / sqrt(x)``, within 1 ulp. On the GPU one reciprocal square
#: root (libdevice's bits, without its branch to a slow path) instead of a square
#: root and a division, which halves the latency of a gravity term; elsewhere the
#: two operations.
rsqrt = hjit(active.rsqrt)


#: ``1 / x``, correctly rounded: the target's form (on the GPU without a branch to a
#: slow path, `hapsira_core.targets.cuda.gpu.reciprocal`; the division itself where a
#: target has none), for the solver's error weights; not part of the public surface.
reciprocal = hjit(getattr(active, "reciprocal", _host.reciprocal))

#: True for an array in the target's own memory (a GPU array on cuda: used in
#: place, never copied); always False on the host targets.
is_device_array = active.is_device_array


@factory
def switch(functions, nargs):
    """One `hjit()` function ``call(i, a1..an)`` that calls ``functions[i]``.

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
    namespace["math"] = math
    namespace["__name__"] = __name__  # numba imports it to reload a cached kernel
    exec(compile("\n".join(lines), f"<hapsira switch of {len(functions)}>", "exec"), namespace)
    return hjit(namespace["call"], cache=False)
