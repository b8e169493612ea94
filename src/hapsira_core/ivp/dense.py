"""DOP853 dense output: the 7th order interpolant over one accepted step.

Hairer, Norsett & Wanner, *Solving ODEs I*, Sec. II.6 and the DOP853 code,
in the form ``scipy.integrate.DOP853`` uses. Building the interpolant costs 3
extra evaluations of ``f``, so the solver builds it only for steps that hold
an output time or an event.
"""

from ..jit import hjit
from .rk import stage
from .state import axpy, combine13, combine14, combine15, combine16, sub
from .tableau import A, C, D


@hjit
def scale(a, x):
    return (a * x[0], a * x[1], a * x[2], a * x[3], a * x[4], a * x[5])


@hjit
def coefficients(f, t_old, y_old, y_new, ks, h, k, p):
    """The 7 interpolation coefficient states of a step.

    ``ks``: the 13 derivatives returned by the step (``ks[0]`` at ``y_old``,
    ``ks[12]`` at ``y_new``).
    """
    ks = ks + (stage(f, t_old, y_old, h, combine13(A[13], ks), C[13], k, p),)
    ks = ks + (stage(f, t_old, y_old, h, combine14(A[14], ks), C[14], k, p),)
    ks = ks + (stage(f, t_old, y_old, h, combine15(A[15], ks), C[15], k, p),)
    dy = sub(y_new, y_old)
    f_old = ks[0]
    f_new = ks[12]
    return (
        dy,
        axpy(-1.0, dy, scale(h, f_old)),
        axpy(-h, axpy(1.0, f_old, f_new), scale(2.0, dy)),
        scale(h, combine16(D[0], ks)),
        scale(h, combine16(D[1], ks)),
        scale(h, combine16(D[2], ks)),
        scale(h, combine16(D[3], ks)),
    )


@hjit
def evaluate(coeffs, t_old, h, y_old, t):
    """State at ``t`` (within the step) from the interpolant ``coeffs``."""
    x = (t - t_old) / h
    y = scale(x, coeffs[6])
    y = scale(1.0 - x, axpy(1.0, coeffs[5], y))
    y = scale(x, axpy(1.0, coeffs[4], y))
    y = scale(1.0 - x, axpy(1.0, coeffs[3], y))
    y = scale(x, axpy(1.0, coeffs[2], y))
    y = scale(1.0 - x, axpy(1.0, coeffs[1], y))
    y = scale(x, axpy(1.0, coeffs[0], y))
    return axpy(1.0, y_old, y)
