"""DOP853 dense output: the 7th order interpolant over one accepted step.

Hairer, Norsett & Wanner, *Solving ODEs I*, Sec. II.6 and the DOP853 code,
in the form ``scipy.integrate.DOP853`` uses. The interpolant weights all 12
stages of the step and 3 more; the step does not keep its stages (they would
not fit in a GPU thread's registers), so the interpolant evaluates them
again: 14 evaluations of ``f``, spent only on steps that hold an output time
or an event.
"""

from ..jit import hjit
from .stages import compile_stages, weights
from .state import axpy, sub
from .tableau import A, C, D, N_STAGES

#: ``interpolant_sums(f, t, y, h, k, p, f_old, f_new) -> (sum_i D[r][i] k_i for r in 0..3)``.
interpolant_sums = compile_stages(
    "dop853_interpolant_sums",
    [(i, C[i], weights(A[i])) for i in list(range(1, N_STAGES)) + [13, 14, 15]],
    {f"d{r}": weights(D[r]) for r in range(len(D))},
    given=(0, N_STAGES))


@hjit
def scale(a, x):
    return (a * x[0], a * x[1], a * x[2], a * x[3], a * x[4], a * x[5])


@hjit
def coefficients(f, t_old, y_old, f_old, y_new, f_new, h, k, p):
    """The 7 interpolation coefficient states of the step from ``t_old`` by ``h``.

    ``f_old``, ``f_new``: the derivatives at ``y_old`` and ``y_new``. Costs 14
    evaluations of ``f``.
    """
    d0, d1, d2, d3 = interpolant_sums(f, t_old, y_old, h, k, p, f_old, f_new)
    dy = sub(y_new, y_old)
    return (
        dy,
        axpy(-1.0, dy, scale(h, f_old)),
        axpy(-h, axpy(1.0, f_old, f_new), scale(2.0, dy)),
        scale(h, d0),
        scale(h, d1),
        scale(h, d2),
        scale(h, d3),
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
