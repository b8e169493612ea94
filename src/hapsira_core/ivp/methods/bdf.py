"""BDF: scipy's variable-order NDF/BDF method (``scipy.integrate.BDF``), one object per thread.

Orders 1 to 5 of the backward differentiation formulas in their numerical
differentiation form (NDF, Shampine & Reichelt, "The MATLAB ODE suite", SIAM
J. Sci. Comput. 18(1), 1997: the ``kappa`` corrections below, Table 1 there),
on a quasi-constant step size: the history is the array ``D`` of backward
differences of the interpolating polynomial (Byrne & Hindmarsh, ACM TOMS 1(1),
1975), rescaled by ``R U`` whenever the step size changes. Each step solves its
implicit equation by a simplified Newton iteration with the LU of
``I - h / alpha_k J`` kept from step to step and the Jacobian ``J`` evaluated again
only when Newton fails to converge with an old one; the local error is
``error_const_k d`` (Hairer & Wanner I, Sec. III.2), and after ``k + 1`` steps of
one size the order moves by one where that promises the longer step.

The arithmetic follows scipy's ``bdf.py`` operation by operation (scipy 1.17),
so that on cpu the accepted steps, ``nfev``, ``njev`` and ``nlu`` are scipy's
with the same Jacobian (the automatic one here; hand scipy the exact one). A
constant matrix (``jac=`` an array) is never evaluated again, as scipy's constant
``jac``; a function, even one whose source shows it constant
(`..sensitivities.constant_jacobian`), is evaluated again where scipy evaluates a
callable ``jac`` again, so that the steps are those of scipy given that function. A
Jacobian with an entry that is not finite stops its object with status
`..layout.JACOBIAN_NOT_FINITE` (`..sensitivities.jacobian_guard`, as Radau).

Everything the method remembers between steps lives in the object's ``work``
(`BDFMethod.rows_for`): ``D`` (8 rows), ``J`` and its LU (n rows each), the
pivots, and a flat area of scalars (order, steps of equal size, whether the LU
is current, njev, nlu, the interpolant's step and end) and of change_D's
matrices R, U and R U (at most 6 x 6 each). Nothing is allocated in the loop.
The interpolant of a step (for output times, events and ``dense_output=True``'s
records) is a copy of D's first rows with its order, step and end (`BLOCK`).
"""

import copy
import math

import numpy as np

from ...jit import hjit
from ..control import MAX_FACTOR, MIN_FACTOR, ulp_toward
from ..layout import WorkRows
from ..linalg import lu_factor, lu_solve
from ..sensitivities import GIVEN, constant_jacobian, jacobian_guard, method_jacobian
from ..state import returns_a_view, rhs
from .base import Method

MAX_ORDER = 5
NEWTON_MAXITER = 4
EPS = float(np.finfo(float).eps)

# Shampine & Reichelt (1997), Table 1: the NDF's kappa per order (0 at order 5: plain BDF5).
_KAPPA = np.array([0, -0.1850, -1 / 9, -0.0823, -0.0415, 0])
_GAMMA = np.hstack((0, np.cumsum(1 / np.arange(1, MAX_ORDER + 1))))
_ALPHA = (1 - _KAPPA) * _GAMMA
_ERROR_CONST = _KAPPA * _GAMMA + 1 / np.arange(1, MAX_ORDER + 2)

#: The rows of ``work`` below ``rows.total``: D (MAX_ORDER + 3 differences), the loop's
#: named states, then the step's own: the predictor, psi, Newton's sum of increments d,
#: its increment dy, f at Newton's iterate, and the error scale.
D_ROWS = MAX_ORDER + 3
#: The interpolant's block (scipy's ``BdfDenseOutput``), copied from D after a step: rows
#: 0..MAX_ORDER the differences D[0..MAX_ORDER] (those above the order unused), then the
#: order, the step it was made for and its end (column 0 of a row each, so that n = 1 fits)
B_ORDER, B_H, B_T = MAX_ORDER + 1, MAX_ORDER + 2, MAX_ORDER + 3
BLOCK = MAX_ORDER + 4
ROWS = WorkRows(stage_rows=D_ROWS, sums=6, coeffs=BLOCK)
YP, PSI, DD, DY, FN, SCALE = range(ROWS.sums, ROWS.sums + 6)
Q0 = ROWS.coeffs

# Slots of the flat area (index k at row FLAT + k // n, column k % n).
ORDER, N_EQUAL, LU_OK, NJEV, NLU, DENSE_H, T_NEW, JAC_BAD = range(8)
R0 = 8
U0 = R0 + (MAX_ORDER + 1) ** 2
RU0 = U0 + (MAX_ORDER + 1) ** 2
COL0 = RU0 + (MAX_ORDER + 1) ** 2
FLAT_SIZE = COL0 + MAX_ORDER + 1


@hjit
def _pick(k, v0, v1, v2, v3, v4, v5):
    # a table read at a run-time index as an if chain: portable to every target
    if k == 0:
        return v0
    if k == 1:
        return v1
    if k == 2:
        return v2
    if k == 3:
        return v3
    if k == 4:
        return v4
    return v5


G0, G1, G2, G3, G4, G5 = (float(v) for v in _GAMMA)
A0, A1, A2, A3, A4, A5 = (float(v) for v in _ALPHA)
E0, E1, E2, E3, E4, E5 = (float(v) for v in _ERROR_CONST)


@hjit
def gamma(k):
    return _pick(k, G0, G1, G2, G3, G4, G5)


@hjit
def alpha(k):
    return _pick(k, A0, A1, A2, A3, A4, A5)


@hjit
def error_const(k):
    return _pick(k, E0, E1, E2, E3, E4, E5)


def _layout(n):
    """First rows of J, of its LU, of the pivots and of the flat area, and the total."""
    j0 = ROWS.total
    lu0 = j0 + n
    piv = lu0 + n
    flat = piv + 1
    return j0, lu0, piv, flat, flat + -(-FLAT_SIZE // n)


def build(ops, keep, fun, rows, jac=None):
    """The hjit functions of the implicit-method plug (`..loop`) for BDF; ``jac``: the
    user's ``jac=`` (None: the automatic Jacobian of a tuple-form ``fun``)."""
    n = ops.n
    if not ops.is_array:  # pragma: no cover - BDFMethod.state_shape forces it
        raise ValueError("BDF keeps its states in work: array shape expected")
    f = rhs(fun, "array", n)
    jac_into = method_jacobian(fun, n, jac)  # raises naming jac for an array-form fun
    # a matrix given (jac= an array) is never evaluated again, as scipy's constant jac=;
    # any other Jacobian, even one recognised constant from its source, takes scipy's
    # callable path: evaluated again after Newton fails with an old one (the steps
    # would otherwise differ from scipy's for the same callable)
    fixed_jac = constant_jacobian(jac_into) == GIVEN
    first_njev = 0.0 if fixed_jac else 1.0
    J0, LU0, PIV, FLAT, _ = _layout(n)
    # a Jacobian with NaN or inf stops its object with JACOBIAN_NOT_FINITE (the flag in
    # the flat slot JAC_BAD), as Radau's: the same check and status hook
    guard = jacobian_guard(n, FLAT + JAC_BAD // n, JAC_BAD % n)
    finite, jac_bad, jac_clear = guard.finite, guard.bad, guard.clear
    Y, F, Y_NEW = rows.y, rows.f, rows.y_new
    sqrt_n = math.sqrt(n)
    is_finite = ops.is_finite
    tiny = 2.2250738585072014e-308

    @hjit
    def get(work, k):
        return work[FLAT + k // n, k % n]

    @hjit
    def put(work, k, value):
        work[FLAT + k // n, k % n] = value

    @hjit
    def compute_r(work, base, order, factor):
        # scipy's compute_R: cumulative products down the columns of
        # M[i, j] = (i - 1 - factor j) / i (i, j >= 1), M[0, :] = 1, M[i >= 1, 0] = 0
        size = order + 1
        for j in range(size):
            put(work, base + j, 1.0)
        for i in range(1, size):
            put(work, base + i * size, get(work, base + (i - 1) * size) * 0.0)
            for j in range(1, size):
                m = (float(i - 1) - factor * float(j)) / float(i)
                put(work, base + i * size + j, get(work, base + (i - 1) * size + j) * m)

    @hjit
    def change_d(work, order, factor):
        # D[:order + 1] = (R U)^T D[:order + 1]: the differences of the same polynomial
        # on steps of factor times the size (Shampine & Reichelt 1997, Sec. 2.2)
        size = order + 1
        compute_r(work, R0, order, factor)
        compute_r(work, U0, order, 1.0)
        for i in range(size):
            for k in range(size):
                total = 0.0
                for m in range(size):
                    total += get(work, R0 + i * size + m) * get(work, U0 + m * size + k)
                put(work, RU0 + i * size + k, total)
        for j in range(n):
            for k in range(size):
                total = 0.0
                for i in range(size):
                    total += get(work, RU0 + i * size + k) * work[i, j]
                put(work, COL0 + k, total)
            for k in range(size):
                work[k, j] = get(work, COL0 + k)

    @hjit
    def rms(work, source, c, scale_row):
        # scipy's norm(c * x / scale): |.|_2 / sqrt(n)
        total = 0.0
        for i in range(n):
            q = (c * work[source, i]) / work[scale_row, i]
            total += q * q
        return math.sqrt(total) / sqrt_n

    @hjit
    def set_scale(work, source, conf, tol):
        for i in range(n):
            work[SCALE, i] = max(conf[tol + n + i] + conf[tol + i] * abs(work[source, i]), tiny)

    @hjit
    def newton(t_new, c, newton_tol, p, work):
        """scipy's solve_bdf_system: ``(converged, evaluations of f)``; the iterate
        in the row Y_NEW, the sum of its increments in DD."""
        lu = work[LU0:LU0 + n]
        piv = work[PIV]
        for i in range(n):
            work[Y_NEW, i] = work[YP, i]
            work[DD, i] = 0.0
        dy_norm_old = 0.0
        has_old = False
        converged = False
        evaluations = 0
        for k in range(NEWTON_MAXITER):
            fy = f(t_new, work[Y_NEW], p, work[FN])
            evaluations += 1
            if not is_finite(fy):
                break
            for i in range(n):
                work[DY, i] = c * work[FN, i] - work[PSI, i] - work[DD, i]
            lu_solve(lu, piv, work[DY], n)
            dy_norm = rms(work, DY, 1.0, SCALE)
            rate = 0.0
            if has_old:
                rate = dy_norm / dy_norm_old
                if rate >= 1.0 or (rate ** float(NEWTON_MAXITER - k) / (1.0 - rate) * dy_norm
                                   > newton_tol):
                    break
            for i in range(n):
                work[Y_NEW, i] += work[DY, i]
                work[DD, i] += work[DY, i]
            if dy_norm == 0.0 or (has_old and rate / (1.0 - rate) * dy_norm < newton_tol):
                converged = True
                break
            dy_norm_old = dy_norm
            has_old = True
        return converged, evaluations

    @hjit
    def factorise(c, work):
        """LU of I - c J into the LU rows; False for an exactly singular matrix."""
        for i in range(n):
            for j in range(n):
                work[LU0 + i, j] = (1.0 if i == j else 0.0) - c * work[J0 + i, j]
        return lu_factor(work[LU0:LU0 + n], work[PIV], n)

    @hjit
    def step_core(t, h_abs, t_bound, direction, max_step, conf, tol, p, work):
        """scipy's BDF._step_impl: ``(ok, t_new, h, h_abs_next, nfev)``; y_new in Y_NEW."""
        if jac_bad(work):  # J at t0 not finite: `failure`
            return False, t, 0.0, h_abs, 0
        min_step = 10.0 * ulp_toward(t, direction)
        order = int(get(work, ORDER))
        n_equal = int(get(work, N_EQUAL))
        lu_ok = get(work, LU_OK) != 0.0
        if h_abs > max_step:
            change_d(work, order, max_step / h_abs)
            h_abs = max_step
            n_equal = 0
        elif h_abs < min_step:
            change_d(work, order, min_step / h_abs)
            h_abs = min_step
            n_equal = 0
        rtol = conf[tol]
        # scipy's tolerance of Newton's increments, from the (first) rtol
        newton_tol = max(10.0 * EPS / rtol, min(0.03, rtol ** 0.5))
        a_k = alpha(order)
        nfev = 0
        t_new = t
        h = 0.0
        n_iter = 0
        error_norm = 0.0
        current_jac = fixed_jac  # a matrix given is never evaluated again (scipy's)
        while True:
            if h_abs < min_step:
                put(work, N_EQUAL, float(n_equal))
                put(work, LU_OK, 1.0 if lu_ok else 0.0)
                return False, t_new, h, h_abs, nfev
            h = h_abs * direction
            t_new = t + h
            if direction * (t_new - t_bound) > 0.0:
                t_new = t_bound
                change_d(work, order, abs(t_new - t) / h_abs)
                n_equal = 0
                lu_ok = False
            h = t_new - t
            h_abs = abs(h)
            for j in range(n):
                total = work[0, j]
                for i in range(1, order + 1):
                    total += work[i, j]
                work[YP, j] = total
                dot = 0.0
                for i in range(1, order + 1):
                    dot += work[i, j] * gamma(i)
                work[PSI, j] = dot / a_k
            set_scale(work, YP, conf, tol)
            c = h / a_k
            converged = False
            while not converged:
                if not lu_ok:
                    put(work, NLU, get(work, NLU) + 1.0)
                    lu_ok = True
                    # an exactly singular matrix counts as a failed Newton iteration
                    if not factorise(c, work):
                        n_iter = 0
                        if current_jac:
                            break
                        jac_into(t_new, work[YP], p, work[J0:J0 + n])
                        put(work, NJEV, get(work, NJEV) + 1.0)
                        if not finite(work[J0:J0 + n], work):
                            return False, t_new, h, h_abs, nfev
                        lu_ok = False
                        current_jac = True
                        continue
                converged, n_iter = newton(t_new, c, newton_tol, p, work)
                nfev += n_iter
                if not converged:
                    if current_jac:
                        break
                    jac_into(t_new, work[YP], p, work[J0:J0 + n])
                    put(work, NJEV, get(work, NJEV) + 1.0)
                    if not finite(work[J0:J0 + n], work):
                        return False, t_new, h, h_abs, nfev
                    lu_ok = False
                    current_jac = True
            if not converged:
                h_abs *= 0.5
                change_d(work, order, 0.5)
                n_equal = 0
                lu_ok = False
                continue
            safety = 0.9 * (2 * NEWTON_MAXITER + 1) / (2 * NEWTON_MAXITER + n_iter)
            set_scale(work, Y_NEW, conf, tol)
            error_norm = rms(work, DD, error_const(order), SCALE)
            if error_norm > 1.0:
                factor = max(MIN_FACTOR, safety * error_norm ** (-1.0 / (order + 1)))
                h_abs *= factor
                change_d(work, order, factor)
                n_equal = 0
                # converged: the LU stays (as scipy)
            else:
                break

        n_equal += 1
        # D^{j+1} y_n = D^j y_n - D^j y_{n-1}, with d = D^{k+1} y_n (scipy's update)
        for j in range(n):
            work[order + 2, j] = work[DD, j] - work[order + 1, j]
            work[order + 1, j] = work[DD, j]
        for i in range(order, -1, -1):
            for j in range(n):
                work[i, j] += work[i + 1, j]
        h_abs_next = h_abs
        if n_equal >= order + 1:
            # order k - 1, k, k + 1: the error estimates at each, the factor each allows
            f_minus = 0.0  # error_m_norm = inf at order 1
            if order > 1:
                f_minus = _factor(rms(work, order, error_const(order - 1), SCALE), order)
            f_same = _factor(error_norm, order + 1)
            f_plus = 0.0
            if order < MAX_ORDER:
                f_plus = _factor(rms(work, order + 2, error_const(order + 1), SCALE), order + 2)
            best = f_minus
            delta = -1
            if f_same > best:
                best = f_same
                delta = 0
            if f_plus > best:
                best = f_plus
                delta = 1
            order += delta
            factor = min(MAX_FACTOR, safety * best)
            h_abs_next = h_abs * factor
            change_d(work, order, factor)
            n_equal = 0
            lu_ok = False
        put(work, ORDER, float(order))
        put(work, N_EQUAL, float(n_equal))
        put(work, LU_OK, 1.0 if lu_ok else 0.0)
        # scipy's interpolant is made after the step: from D as it is now, on the next h
        put(work, DENSE_H, h_abs_next * direction)
        put(work, T_NEW, t_new)
        return True, t_new, h, h_abs_next, nfev

    @hjit(**returns_a_view())
    def step(t, y, fy, h_abs, t_bound, direction, max_step, conf, tol, p, work):
        ok, t_new, h, h_abs_next, nfev = step_core(t, h_abs, t_bound, direction, max_step,
                                                   conf, tol, p, work)
        return ok, t_new, work[Y_NEW], work[F], h, h_abs_next, nfev

    @hjit
    def begin(t, y, fy, h_abs, direction, conf, tol, p, work):
        for i in range(D_ROWS):
            for j in range(n):
                work[i, j] = 0.0
        for j in range(n):
            work[0, j] = y[j]
            work[1, j] = fy[j] * h_abs * direction
        jac_clear(work)
        jac_into(t, work[Y], p, work[J0:J0 + n])
        finite(work[J0:J0 + n], work)  # not finite: the first step stops (`failure`)
        put(work, ORDER, 1.0)
        put(work, N_EQUAL, 0.0)
        put(work, LU_OK, 0.0)
        put(work, NJEV, first_njev)
        put(work, NLU, 0.0)
        return 0

    @hjit
    def counts(work):
        return int(get(work, NJEV)), int(get(work, NLU))

    @hjit(**returns_a_view())
    def coefficients(t_old, y_old, f_old, y_new, f_new, h, p, work):
        # the interpolant is D as the step left it (rescaled to the next step size and
        # order): copied to its block, which the step records keep as it is
        order = int(get(work, ORDER))
        for i in range(MAX_ORDER + 1):
            for j in range(n):
                work[Q0 + i, j] = work[i, j] if i <= order else 0.0
        work[Q0 + B_ORDER, 0] = float(order)
        work[Q0 + B_H, 0] = get(work, DENSE_H)
        work[Q0 + B_T, 0] = get(work, T_NEW)
        return work[Q0:Q0 + BLOCK]

    @hjit(**returns_a_view())
    def placeholder(y, work):
        return work[Q0:Q0 + BLOCK]

    return {"step": step, "begin": begin, "counts": counts, "failure": guard.failure,
            "coefficients": coefficients, "placeholder": placeholder,
            "evaluate": make_evaluate(n), "interpolant_in_work": True,
            "step_nfev": 0, "dense_nfev": 0, "error_exponent": -0.5,
            "derived": (("jac", jac_into),)}


_EVALUATE = {}


def make_evaluate(n):
    """``evaluate(block, t_old, h, y_old, t, dst)``: scipy's ``BdfDenseOutput`` from the
    interpolant's block (`BLOCK`: D, order k, step h and end t_new), ``y = D[0] +
    sum_{i=1..k} D[i] prod_{m<i} (t - t_m) / ((m + 1) h)``, ``t_m = t_new - m h``; for
    the loop and the step records alike (built once per n)."""
    if n not in _EVALUATE:
        @hjit
        def evaluate(block, t_old, h, y_old, t, dst):
            order = int(block[B_ORDER, 0])
            hd = block[B_H, 0]
            t_end = block[B_T, 0]
            for j in range(n):
                product = 1.0
                total = 0.0
                for i in range(order):
                    product *= (t - (t_end - hd * float(i))) / (hd * float(1 + i))
                    total += block[i + 1, j] * product
                dst[j] = total + block[0, j]
            return dst
        _EVALUATE[n] = evaluate
    return _EVALUATE[n]


@hjit
def _factor(norm, power):
    # norm ** (-1 / power) with numpy's limits (0 -> inf, inf -> 0), never a Python error
    if norm == 0.0:
        return math.inf
    if norm == math.inf:
        return 0.0
    return norm ** (-1.0 / power)


class BDFMethod(Method):
    """``method="BDF"``: states in ``work`` (its matrices live there), scipy's first step
    for an error estimator of order 1."""

    name = "BDF"
    state_shape = "array"
    rows = ROWS
    error_estimator_order = 1
    error_exponent = -0.5

    def rows_for(self, n):
        # the loop's named rows as ROWS has them; J, its LU and the pivots after them
        rows = copy.copy(ROWS)
        rows.total = _layout(n)[-1]
        return rows

    #: the interpolant is the block of rows `BLOCK` (D and its scalars), not a tuple
    interpolant_block = True

    def coefficient_states(self, n):
        return BLOCK

    def interpolant(self, ops, keep, fun):
        return make_evaluate(ops.n)

    def functions(self, ops, keep, fun, jac):
        return build(ops, keep, fun, self.rows_for(ops.n), jac)


METHOD = BDFMethod()
