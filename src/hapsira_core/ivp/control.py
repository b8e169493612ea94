"""Step-size control, the same for every method: scipy's ``RungeKutta._step_impl``.

Hairer, Norsett & Wanner, *Solving ODEs I*, Sec. II.4: the starting step
size (`make_initial_step()`) and the control of the step size from the
error norm (`make_step()`), with scipy's constants so that accepted
steps match scipy's.
"""

import math

from ..jit import hjit

SAFETY = 0.9
MIN_FACTOR = 0.2  # smallest factor by which a step shrinks after a rejection
MAX_FACTOR = 10.0  # largest factor by which a step grows


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


def _step_factor(exponent):
    """``SAFETY * err ** exponent``, the factor by which the step size changes,
    as an hjit function. DOP853's 8th root as three square roots: on the GPU
    a tenth of a ``pow``."""
    if exponent == -1.0 / 8.0:
        @hjit
        def factor(err):
            return SAFETY / math.sqrt(math.sqrt(math.sqrt(err)))
    else:
        @hjit
        def factor(err):
            return SAFETY * err ** exponent
    return factor


def make_initial_step(ops, rows, error_estimator_order, f):
    """``initial_step(t0, y0, f0, t_bound, direction, max_step, tol, start, p, work) -> |h|``
    for ``f(t, y, p, dst)`` (`..state.rhs`).

    scipy's ``select_initial_step`` (Hairer II.4, "starting step size"), capped
    by ``max_step`` as scipy (1.17) caps it; costs one evaluation of ``f``. ``rows``: where
    the array shape keeps its states in ``work`` (`..layout.WorkRows`).
    """
    axpy, sub, error_scale, inverse, weighted_sum_squares, row = (
        ops.axpy, ops.sub, ops.error_scale, ops.inverse, ops.weighted_sum_squares, ops.row)
    W, Y1, F1 = rows.weight, rows.tmp, rows.tmp2
    sqrt_n = math.sqrt(ops.n_err)  # the norm's components (all but an STM's)
    exponent = 1.0 / (error_estimator_order + 1)

    @hjit
    def initial_step(t0, y0, f0, t_bound, direction, max_step, tol, start, p, work):
        interval = abs(t_bound - t0)
        if interval == 0.0:
            return 0.0
        # one reciprocal per component for the three norms, not three divisions
        # (on the GPU a division is about ten instructions)
        weight = inverse(error_scale(y0, y0, tol, start, row(work, W)), row(work, W))
        d0 = math.sqrt(weighted_sum_squares(y0, weight)) / sqrt_n
        d1 = math.sqrt(weighted_sum_squares(f0, weight)) / sqrt_n
        if d0 < 1e-5 or d1 < 1e-5:
            h0 = 1e-6
        else:
            h0 = 0.01 * d0 / d1
        h0 = min(h0, interval)
        if not h0 > 0.0:
            # d1 = inf: a component with a zero error scale (atol = 0 where y is 0) and a
            # non-zero derivative. Compiled code went on to 0/0 and ended at 0 below; the
            # CUDA simulator (plain Python floats) raised ZeroDivisionError there and lost
            # the whole batch. 0 either way: `step` raises it to its minimum.
            return 0.0
        y1 = axpy(h0 * direction, f0, y0, row(work, Y1))
        f1 = f(t0 + h0 * direction, y1, p, row(work, F1))
        d2 = math.sqrt(weighted_sum_squares(sub(f1, f0, row(work, F1)), weight)) / sqrt_n / h0
        if d1 <= 1e-15 and d2 <= 1e-15:
            h1 = max(1e-6, h0 * 1e-3)
        else:
            h1 = (0.01 / max(d1, d2)) ** exponent
        # (nested two-argument mins: the same comparisons in the same order as
        # min(a, b, c, d), which numba-cuda-mlir 0.6 does not lower)
        h = min(min(min(100.0 * h0, h1), interval), max_step)
        # A component with a zero error scale (atol = 0 where y is 0) gives d1 = inf,
        # then 0/0: scipy's rules end at 0 there, and `step` raises 0 to its minimum.
        return h if h >= 0.0 else 0.0

    return initial_step


def make_step(parts):
    """``step(t, y, f0, h_abs, t_bound, direction, max_step, tol, start, p, work)``:
    try steps of the method's ``attempt`` until one is accepted.

    As scipy's ``_step_impl``, the proposed ``h_abs`` is first capped by
    ``max_step`` (else raised to 10 ulp of ``t``). Returns ``(ok, t_new,
    y_new, f_new, h, h_abs_next, nfev)``; ``ok`` is False when the step size
    fell below 10 ulp of ``t`` (then only ``nfev`` is meaningful): a
    singularity, a state that is no longer finite, or a ``max_step`` below
    that spacing (then before any evaluation, as in scipy).
    """
    attempt = parts.attempt
    step_factor = _step_factor(parts.error_exponent)
    step_nfev = parts.step_nfev

    @hjit
    def step(t, y, f0, h_abs, t_bound, direction, max_step, tol, start, p, work):
        min_step = 10.0 * ulp_toward(t, direction)
        if h_abs > max_step:
            h_abs = max_step
            if h_abs < min_step:
                return False, t, y, f0, 0.0, h_abs, 0
        elif h_abs < min_step:
            h_abs = min_step
        nfev = 0
        rejected = False
        while True:
            t_new = t + h_abs * direction
            if direction * (t_new - t_bound) > 0.0:
                t_new = t_bound
            h = t_new - t
            h_abs = abs(h)
            y_new, f_new, err = attempt(t, y, f0, h, p, tol, start, work)
            nfev += step_nfev
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

    return step
