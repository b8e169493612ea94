"""One adaptive DOP853 step: stages, error estimate, step-size control.

Follows Hairer, Norsett & Wanner, *Solving ODEs I*, Sec. II.4 (initial step,
step-size control) and II.10 (DOP853), with the constants and error norm that
``scipy.integrate.DOP853`` uses, so that accepted steps match scipy's.
"""

import math

from ..jit import hjit
from .stages import compile_stages, weights
from .state import axpy, rhs, scaled_sum_squares, weighted_sum_squares
from .tableau import A, B, C, E3, E5, ERROR_ESTIMATOR_ORDER, N_STAGES

SAFETY = 0.9
MIN_FACTOR = 0.2  # smallest factor by which a step shrinks after a rejection
MAX_FACTOR = 10.0  # largest factor by which a step grows
assert ERROR_ESTIMATOR_ORDER == 7  # step_factor takes the 8th root


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


#: ``step_sums(f, t, y, h, k, p, f0) -> (sum b_i k_i, sum e5_i k_i, sum e3_i k_i)``:
#: the 12 stages of a step, evaluated in as few registers as the tableau allows.
step_sums = compile_stages(
    "dop853_step_sums",
    [(i, C[i], weights(A[i])) for i in range(1, N_STAGES)],
    {"b": weights(B), "e5": weights(E5), "e3": weights(E3)},
    given=(0,))


@hjit
def rk_step(f, t, y, f0, h, k, p):
    """One DOP853 step of size ``h`` from ``(t, y)``, ``f0 = f(t, y)`` (II.10).

    Returns ``(y_new, f_new, err5, err3)``: the new state, its derivative
    (the next step's first stage), and the unscaled 5th and 3rd order error
    vectors (``h`` times them estimate the local error). Costs 12
    evaluations of ``f``.
    """
    b, err5, err3 = step_sums(f, t, y, h, k, p, f0)
    y_new = axpy(h, b, y)
    return y_new, rhs(f, t + h, y_new, k, p), err5, err3


@hjit
def error_norm(err5, err3, h, scale):
    """DOP853's combined 5th/3rd order error estimate (scipy's norm)."""
    inverse = (1.0 / scale[0], 1.0 / scale[1], 1.0 / scale[2],
               1.0 / scale[3], 1.0 / scale[4], 1.0 / scale[5])
    e5 = weighted_sum_squares(err5, inverse)
    e3 = weighted_sum_squares(err3, inverse)
    if e5 == 0.0 and e3 == 0.0:
        return 0.0
    return abs(h) * e5 / math.sqrt((e5 + 0.01 * e3) * 6.0)


@hjit
def step_factor(err):
    """``SAFETY * err ** (-1/8)``: the step-size factor for an error ``err``.

    The 8th root as three square roots: on the GPU a tenth of a ``pow``.
    """
    return SAFETY / math.sqrt(math.sqrt(math.sqrt(err)))


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
def step(f, t, y, f0, h_abs, t_bound, direction, tolerances, k, p):
    """Try steps from ``(t, y)`` until one is accepted (scipy's ``_step_impl``).

    Returns ``(ok, t_new, y_new, f_new, h, h_abs_next, nfev)``; ``ok`` is False
    when the step size fell below 10 ulp of ``t`` (then only ``nfev`` is
    meaningful): a singularity, or a state that is no longer finite.
    ``f_new`` is the derivative at ``y_new``.
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
        y_new, f_new, err5, err3 = rk_step(f, t, y, f0, h, k, p)
        nfev += 12
        # read here, not held in registers through the stages
        rtol = (tolerances[0], tolerances[1], tolerances[2],
                tolerances[3], tolerances[4], tolerances[5])
        atol = (tolerances[6], tolerances[7], tolerances[8],
                tolerances[9], tolerances[10], tolerances[11])
        err = error_norm(err5, err3, h, error_scale(y, y_new, rtol, atol))
        if err < 1.0:
            if err == 0.0:
                factor = MAX_FACTOR
            else:
                factor = min(MAX_FACTOR, step_factor(err))
            if rejected:
                factor = min(1.0, factor)
            return True, t_new, y_new, f_new, h, h_abs * factor, nfev
        h_abs *= max(MIN_FACTOR, step_factor(err))
        rejected = True
        # Written so that a NaN error (a non-finite state) also ends here.
        if not h_abs >= min_step:
            return False, t_new, y_new, f_new, h, h_abs, nfev
