"""What scipy's ``RK23`` and ``RK45`` share: one error row, a polynomial interpolant.

The error estimate is ``h sum_i e_i k_i`` over the stages and the step-end
derivative, measured in scipy's RMS norm (Hairer II.4, eq. 4.11). The dense
output is ``y_old + h sum_j Q_j x^(j+1)`` with ``Q = K^T P`` (``x`` the
fraction of the step): Hairer II.6 for Bogacki-Shampine's cubic Hermite
interpolant, Shampine (1986) for Dormand-Prince's quartic.
"""

import math

from ...jit import hjit
from ..butcher import weights
from ..stages import compile_stages
from ..state import returns_a_view, rhs
from .base import ExplicitMethod


def build(tableau, ops, keep, fun, P, rows):
    """The `.base.Functions` of a tableau and its ``P`` (either
    state shape)."""
    n = ops.n
    s = tableau.n_stages
    e = tableau.error["e"]
    e_last = e[s]
    axpy, scale, error_scale, row = ops.axpy, ops.scale, ops.error_scale, ops.row
    scaled_sum_squares = ops.scaled_sum_squares
    sqrt_n = math.sqrt(ops.n_err)  # the norm's components (all but an STM's)
    name = tableau.name.lower()
    store_row = ops.store_row
    f = rhs(fun, ops.shape)
    is_array = ops.is_array
    array_rows = rows if is_array else None
    keep = keep or is_array
    W, Y_NEW, TMP, ERR = rows.weight, rows.y_new, rows.tmp, rows.sums + 1
    step_sums = compile_stages(
        f"{name}_step_sums", tableau.stage_rows(range(1, s)),
        {"b": weights(tableau.b), "e": weights(e[:s])}, (0,), fun, n, store=keep,
        rows=array_rows, out_row=rows.sums)
    columns = range(len(P[0]))
    q_rows = {f"q{j}": weights([row_[j] for row_ in P]) for j in columns}
    if keep:  # every derivative of the step is in work: no evaluation
        q_sums = compile_stages(f"{name}_dense_sums", [], q_rows, tuple(range(s + 1)), fun, n,
                                load=True, rows=array_rows, out_row=rows.coeffs)

        @hjit
        def coefficients(t_old, y_old, f_old, y_new, f_new, h, p, work):
            return q_sums(t_old, y_old, h, p, work)
    else:
        q_sums = compile_stages(f"{name}_dense_sums", tableau.stage_rows(range(1, s)),
                                q_rows, (0, s), fun, n)

        @hjit
        def coefficients(t_old, y_old, f_old, y_new, f_new, h, p, work):
            return q_sums(t_old, y_old, h, p, f_old, f_new)

    @hjit
    def error_norm(y, y_new, err, h, tol, start, work):
        # scipy: norm(h * (K^T e) / scale), norm(x) = |x|_2 / sqrt(n)
        return math.sqrt(scaled_sum_squares(scale(h, err, row(work, TMP)),
                                            error_scale(y, y_new, tol, start, row(work, W)))) \
            / sqrt_n

    if keep:
        @hjit
        def attempt(t, y, f0, h, p, tol, start, work):
            b, err = step_sums(t, y, h, p, f0, work)
            y_new = axpy(h, b, y, row(work, Y_NEW))
            f_new = f(t + h, y_new, p, row(work, s))
            if not is_array:  # the array shape's f_new is that row already
                store_row(work, s, f_new)
            err = axpy(e_last, f_new, err, row(work, ERR))
            return y_new, f_new, error_norm(y, y_new, err, h, tol, start, work)
    else:
        @hjit
        def attempt(t, y, f0, h, p, tol, start, work):
            b, err = step_sums(t, y, h, p, f0)
            y_new = axpy(h, b, y, row(work, Y_NEW))
            f_new = f(t + h, y_new, p, row(work, s))
            err = axpy(e_last, f_new, err, row(work, ERR))
            return y_new, f_new, error_norm(y, y_new, err, h, tol, start, work)

    n_q = len(P[0])
    view_options = returns_a_view() if is_array else {}
    if n_q == 3:
        @hjit
        def placeholder(y):
            return (y, y, y)

        @hjit(**view_options)
        def evaluate(q, t_old, h, y_old, t, dst):
            x = (t - t_old) / h
            x2 = x * x
            acc = axpy(x2 * x, q[2], axpy(x2, q[1], scale(x, q[0], dst), dst), dst)
            return axpy(h, acc, y_old, dst)
    elif n_q == 4:
        @hjit
        def placeholder(y):
            return (y, y, y, y)

        @hjit(**view_options)
        def evaluate(q, t_old, h, y_old, t, dst):
            x = (t - t_old) / h
            x2 = x * x
            x3 = x2 * x
            acc = axpy(x3 * x, q[3], axpy(x3, q[2], axpy(x2, q[1], scale(x, q[0], dst), dst),
                                          dst), dst)
            return axpy(h, acc, y_old, dst)
    else:  # pragma: no cover - a new method with another interpolant degree
        raise NotImplementedError(f"interpolant with {n_q} coefficients")

    return {"attempt": attempt, "coefficients": coefficients, "placeholder": placeholder,
            "evaluate": evaluate, "step_nfev": s,
            # scipy's count: none (without ``keep`` the stages evaluated again are the
            # step's own, counted once, with the step: `base`)
            "dense_nfev": 0}


def method(tableau, P):
    """The `ExplicitMethod` of an embedded pair with interpolant weights ``P``: work rows
    for its stages and the step's end; sums b and e; one coefficient state per column of
    P."""
    return ExplicitMethod(tableau, lambda tableau, ops, keep, fun, rows: build(
        tableau, ops, keep, fun, P, rows), stage_rows=tableau.n_stages + 1, sums=2,
        coeffs=len(P[0]))
