"""One adaptive DOP853 step: stages, error estimate, step-size control.

Follows Hairer, Norsett & Wanner, *Solving ODEs I*, Sec. II.4 (initial step,
step-size control) and II.10 (DOP853), with the constants and error norm that
``scipy.integrate.DOP853`` uses, so that accepted steps match scipy's.
"""

import math

from ..jit import hjit
from .state import (
    axpy, combine1, combine2, combine3, combine4, combine5, combine6, combine7, combine8,
    combine9, combine10, combine11, combine12, combine13, rhs, scaled_sum_squares,
)
from .tableau import A, B, C, E3, E5, ERROR_ESTIMATOR_ORDER

SAFETY = 0.9
MIN_FACTOR = 0.2  # smallest factor by which a step shrinks after a rejection
MAX_FACTOR = 10.0  # largest factor by which a step grows
ERROR_EXPONENT = -1.0 / (ERROR_ESTIMATOR_ORDER + 1)


@hjit
def error_scale(y, y_new, rtol, atol):
    """Per-component ``atol + max(|y|, |y_new|) * rtol`` (II.4, eq. 4.10)."""
    return (atol[0] + max(abs(y[0]), abs(y_new[0])) * rtol[0],
            atol[1] + max(abs(y[1]), abs(y_new[1])) * rtol[1],
            atol[2] + max(abs(y[2]), abs(y_new[2])) * rtol[2],
            atol[3] + max(abs(y[3]), abs(y_new[3])) * rtol[3],
            atol[4] + max(abs(y[4]), abs(y_new[4])) * rtol[4],
            atol[5] + max(abs(y[5]), abs(y_new[5])) * rtol[5])


@hjit
def rms_norm(x, scale):
    return math.sqrt(scaled_sum_squares(x, scale) / 6.0)


@hjit
def initial_step(f, t0, y0, f0, t_bound, direction, rtol, atol, k, p):
    """First step size, Hairer II.4 "starting step size" as scipy selects it.

    Returns the step magnitude; it costs one evaluation of ``f``.
    """
    interval = abs(t_bound - t0)
    if interval == 0.0:
        return 0.0
    scale = error_scale(y0, y0, rtol, atol)
    d0 = rms_norm(y0, scale)
    d1 = rms_norm(f0, scale)
    if d0 < 1e-5 or d1 < 1e-5:
        h0 = 1e-6
    else:
        h0 = 0.01 * d0 / d1
    h0 = min(h0, interval)
    y1 = axpy(h0 * direction, f0, y0)
    f1 = rhs(f, t0 + h0 * direction, y1, k, p)
    d2 = rms_norm(axpy(-1.0, f0, f1), scale) / h0
    if d1 <= 1e-15 and d2 <= 1e-15:
        h1 = max(1e-6, h0 * 1e-3)
    else:
        h1 = (0.01 / max(d1, d2)) ** (1.0 / (ERROR_ESTIMATOR_ORDER + 1))
    return min(100.0 * h0, h1, interval)


@hjit
def stage(f, t, y, h, increment, c, k, p):
    """Derivative at ``t + c h``, ``y + h * increment``: one Runge-Kutta stage."""
    return rhs(f, t + c * h, axpy(h, increment, y), k, p)


@hjit
def rk_stages(f, t, y, f0, h, k, p):
    """The 12 stages of one DOP853 step, the new state and its derivative.

    Returns ``(y_new, ks)`` where ``ks`` holds the 12 stage derivatives and,
    last, the derivative at ``y_new`` (13 states: what the error estimate
    and the dense output need). Costs 12 evaluations of ``f``.
    """
    ks = (f0,)
    ks = ks + (stage(f, t, y, h, combine1(A[1], ks), C[1], k, p),)
    ks = ks + (stage(f, t, y, h, combine2(A[2], ks), C[2], k, p),)
    ks = ks + (stage(f, t, y, h, combine3(A[3], ks), C[3], k, p),)
    ks = ks + (stage(f, t, y, h, combine4(A[4], ks), C[4], k, p),)
    ks = ks + (stage(f, t, y, h, combine5(A[5], ks), C[5], k, p),)
    ks = ks + (stage(f, t, y, h, combine6(A[6], ks), C[6], k, p),)
    ks = ks + (stage(f, t, y, h, combine7(A[7], ks), C[7], k, p),)
    ks = ks + (stage(f, t, y, h, combine8(A[8], ks), C[8], k, p),)
    ks = ks + (stage(f, t, y, h, combine9(A[9], ks), C[9], k, p),)
    ks = ks + (stage(f, t, y, h, combine10(A[10], ks), C[10], k, p),)
    ks = ks + (stage(f, t, y, h, combine11(A[11], ks), C[11], k, p),)
    y_new = axpy(h, combine12(B, ks), y)
    return y_new, ks + (rhs(f, t + h, y_new, k, p),)


@hjit
def error_norm(ks, h, scale):
    """DOP853's combined 5th/3rd order error estimate (scipy's norm)."""
    err5 = scaled_sum_squares(combine13(E5, ks), scale)
    err3 = scaled_sum_squares(combine13(E3, ks), scale)
    if err5 == 0.0 and err3 == 0.0:
        return 0.0
    return abs(h) * err5 / math.sqrt((err5 + 0.01 * err3) * 6.0)


@hjit
def ulp_toward(t, direction):
    """Distance from ``t`` to the next float in ``direction`` (``nextafter``)."""
    if t == 0.0:
        return 5e-324
    mantissa, exponent = math.frexp(abs(t))
    spacing = math.ldexp(1.0, exponent - 53)
    if mantissa == 0.5 and (t > 0.0) != (direction > 0.0):
        spacing *= 0.5  # below a power of two, toward zero, floats are denser
    return spacing


@hjit
def step(f, t, y, f0, h_abs, t_bound, direction, rtol, atol, k, p):
    """Try steps from ``(t, y)`` until one is accepted (scipy's ``_step_impl``).

    Returns ``(ok, t_new, y_new, ks, h, h_abs_next, nfev)``; ``ok`` is False
    when the step size fell below 10 ulp of ``t`` (then only ``nfev`` is
    meaningful): a singularity, or a state that is no longer finite. ``ks[0]`` is ``f0`` and ``ks[12]`` the derivative at ``y_new``.
    """
    min_step = 10.0 * ulp_toward(t, direction)
    if h_abs < min_step:
        h_abs = min_step
    nfev = 0
    rejected = False
    while True:
        t_new = t + h_abs * direction
        if direction * (t_new - t_bound) > 0.0:
            t_new = t_bound
        h = t_new - t
        h_abs = abs(h)
        y_new, ks = rk_stages(f, t, y, f0, h, k, p)
        nfev += 12
        err = error_norm(ks, h, error_scale(y, y_new, rtol, atol))
        if err < 1.0:
            if err == 0.0:
                factor = MAX_FACTOR
            else:
                factor = min(MAX_FACTOR, SAFETY * err ** ERROR_EXPONENT)
            if rejected:
                factor = min(1.0, factor)
            return True, t_new, y_new, ks, h, h_abs * factor, nfev
        h_abs *= max(MIN_FACTOR, SAFETY * err ** ERROR_EXPONENT)
        rejected = True
        # Written so that a NaN error (a non-finite state) also ends here.
        if not h_abs >= min_step:
            return False, t_new, y_new, ks, h, h_abs, nfev
