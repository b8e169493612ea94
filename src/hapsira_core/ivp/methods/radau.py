"""Radau: the implicit Radau IIA method of order 5, as ``scipy.integrate.Radau``.

E. Hairer, G. Wanner, *Solving Ordinary Differential Equations II: Stiff and
Differential-Algebraic Problems*, 2nd ed., Sec. IV.8 (the code RADAU5): a
three-stage collocation method at the nodes ``C``, its collocation system
solved by simplified Newton iterations after the transformation ``T`` that
diagonalises the Runge-Kutta matrix (one real eigenvalue, one complex pair:
one real and one complex n x n linear system per iteration, eq. IV.8.16-18),
an embedded error estimate filtered through the real system (eq. IV.8.19-20),
Gustafsson's predictive step-size controller (eq. IV.8.25) and the
collocation polynomial as dense output, which also starts the next step's
Newton iteration.

Every decision follows scipy's ``Radau._step_impl`` (scipy 1.17), so that
accepted steps, ``nfev``, ``njev`` and ``nlu`` equal scipy's when scipy is
given the exact Jacobian: the Newton start, the convergence test with its
rate, the step halving when Newton fails on a current Jacobian, the extra
solve of the error estimate on a step that was already rejected, the
safety factor from the iteration count, the reuse of the LU decompositions
while the step size changes by less than 20% and of the Jacobian while
Newton converges fast. Where scipy's LAPACK would go on with an exactly
singular matrix (and its Newton iterations then fail on infinities), a zero
pivot here counts as a failed Newton iteration without evaluating ``fun``.

The state is a row of ``work`` (``state_shape = "array"``; a tuple-form
``fun`` is adapted), and so is all the method's memory, per object: the
stage vectors, a few scalars (one row each, in column 0, so that n = 1
fits), the Jacobian and the two LU decompositions (n rows each, the complex
one in two parts: `Radau.rows_for`), and the previous step's interpolant
(the loop's coefficient rows). The Jacobian is the user's ``jac=`` or the
automatic derivative of a tuple-form ``fun``
(`..sensitivities.method_jacobian`, the choice every implicit method makes);
a constant matrix (``jac=`` an array) is evaluated once and kept, as scipy keeps a
constant ``jac``; a function is evaluated where scipy evaluates a callable ``jac``, even
one whose source shows it constant, so that the steps are scipy's. A Jacobian with an
entry that is not finite stops its object there with status
`..layout.JACOBIAN_NOT_FINITE` (scipy's Newton iterations would fail on it until the
step size fell below 10 ulp); the other objects never read it.
"""

import math

from ...jit import hjit
from ..control import ulp_toward
from ..layout import WorkRows
from ..linalg import lu_factor, lu_factor_complex, lu_solve, lu_solve_complex
from ..state import returns_a_view, rhs
from .base import Functions, Method

S6 = 6 ** 0.5

# The constants below are scipy's (scipy/integrate/_ivp/radau.py), from Hairer &
# Wanner II, Sec. IV.8 and the code RADAU5.
#: collocation nodes (fractions of the step)
C = ((4 - S6) / 10, (4 + S6) / 10, 1.0)
#: error estimate weights on Z (eq. IV.8.19 with gamma_0 = MU_REAL)
E = ((-13 - 7 * S6) / 3, (-13 + 7 * S6) / 3, -1 / 3)
#: eigenvalues of the inverse of the Runge-Kutta matrix: one real, a complex pair
MU_REAL = 3 + 3 ** (2 / 3) - 3 ** (1 / 3)
MU_COMPLEX_RE = 3 + 0.5 * (3 ** (1 / 3) - 3 ** (2 / 3))
MU_COMPLEX_IM = -0.5 * (3 ** (5 / 6) + 3 ** (7 / 6))
#: the transformation A^-1 = T diag(MU) T^-1 and its inverse
T = ((0.09443876248897524, -0.14125529502095421, 0.03002919410514742),
     (0.25021312296533332, 0.20412935229379994, -0.38294211275726192),
     (1.0, 1.0, 0.0))
TI = ((4.17871859155190428, 0.32768282076106237, 0.52337644549944951),
      (-4.17871859155190428, -0.32768282076106237, 0.47662355450055044),
      (0.50287263494578682, -2.57192694985560522, 0.59603920482822492))
#: the collocation polynomial: y_old + sum_j Q_j x^(j+1), Q = Z^T P (x the step fraction)
P = ((13 / 3 + 7 * S6 / 3, -23 / 3 - 22 * S6 / 3, 10 / 3 + 5 * S6),
     (13 / 3 - 7 * S6 / 3, -23 / 3 + 22 * S6 / 3, 10 / 3 - 5 * S6),
     (1 / 3, -8 / 3, 10 / 3))

NEWTON_MAXITER = 6  # Newton iterations per attempt
MIN_FACTOR = 0.2  # smallest factor by which a rejected step shrinks
MAX_FACTOR = 10.0  # largest factor by which a step grows
EPS = 2.220446049250313e-16  # machine epsilon, in scipy's Newton tolerance

# Rows of ``work`` (each n floats), before the loop's named rows (`..layout.WorkRows`).
Z_ROW = 0  # Z: 3 rows, the stage increments (y at t + c_i h is y + Z_i)
W_ROW = 3  # W = T^-1 Z: 3 rows
F_ROW = 6  # fun at the stages: 3 rows
DW_ROW = 9  # the Newton correction: 3 rows (real system; complex real, imaginary part)
Y_PREV = 12  # the previous step's start, for its interpolant
SCALE = 13  # atol + |y| rtol (Newton) and atol + max(|y|, |y_new|) rtol (error)
ERROR = 14  # the error estimate
ZE = 15  # Z^T E / h
F_NEW = 16  # fun at the step's end
STAGE_Y = 17  # a stage's state, handed to fun
PIV_REAL = 18  # pivots of the real LU
PIV_COMPLEX = 19  # pivots of the complex LU
# scalars, in column 0 of a row each (None in scipy: a negative number here)
H_ABS_OLD = 20  # the step size proposed before the last accepted step
ERROR_OLD = 21  # the last accepted step's error norm
CURRENT_JAC = 22  # 1: J was evaluated at the last step's start or end
LU_VALID = 23  # 1: the LU decompositions are for the current J and step size
HAVE_SOL = 24  # 1: an interpolant of a previous step exists
NJEV = 25
NLU = 26
T_PREV = 27  # the previous step's start
H_PREV = 28  # the previous step's size (signed)
JAC_BAD = 29  # 1: the last J had an entry that is not finite (the object stops)
J_ROW = 30  # J, then the real LU, then the complex LU's real and imaginary parts (n rows each)


class Radau(Method):
    """scipy's Radau IIA of order 5: array-shaped states, rows per n (`rows_for`)."""

    name = "Radau"
    state_shape = "array"
    #: scipy chooses the first step assuming order 3 (the error estimate's)
    error_estimator_order = 3
    error_exponent = -0.25

    def rows_for(self, n):
        """The method's vectors and scalars, its four n x n matrices, then the loop's
        named rows; the three coefficient rows (last) hold the collocation polynomial."""
        return WorkRows(stage_rows=J_ROW + 4 * n, sums=0, coeffs=3)

    def functions(self, ops, keep, fun, jac):
        return _build(ops, fun, jac, self.rows_for(ops.n))

    def interpolant(self, ops, keep, fun):
        return make_evaluate(ops.n)


def _build(ops, fun, jac, rows):
    from .. import sensitivities

    n = ops.n
    if ops.shape != "array":  # pragma: no cover - state_shape forces the array shape
        raise ValueError("Radau keeps its states in work: the array shape")
    if getattr(fun, "hapsira_error_components", None) is not None:
        raise ValueError("stm: method='Radau' does not integrate the state transition matrix "
                         "yet (its Newton matrices would be n(n+1) wide); use DOP853, RK45 "
                         "or RK23 with stm=True")
    try:
        jac_into = sensitivities.method_jacobian(fun, n, jac)
    except ValueError as error:
        if str(error).startswith("jac"):  # already names jac (an array-form fun without it)
            raise
        # a construct not differentiated, or a source that cannot be read (made by exec,
        # a lambda inside an expression)
        raise ValueError(f"jac: method='Radau' needs the Jacobian of fun, derived "
                         f"automatically from its source, which failed: {error}; or give "
                         "jac=") from error
    # a matrix given (jac= an array) is evaluated at t0 only, as scipy treats a constant
    # jac=: never again; any other Jacobian, even one recognised constant from its
    # source, takes scipy's callable path (evaluated again after a Newton failure or a
    # slow convergence, which also decides the LU reuse and the next step size)
    fixed_jac = sensitivities.constant_jacobian(jac_into) == sensitivities.GIVEN
    first_njev = 0.0 if fixed_jac else 1.0
    f = rhs(fun, "array", n)
    error_scale, row = ops.error_scale, ops.row
    Y_NEW, Q_ROW = rows.y_new, rows.coeffs
    LU_ROW = J_ROW + n
    LUR_ROW = LU_ROW + n  # complex LU, real part
    LUI_ROW = LUR_ROW + n  # and imaginary part
    inv_n = 1.0 / n
    inv_3n = 1.0 / (3 * n)
    c0, c1, c2 = C
    e0, e1, e2 = E
    (t00, t01, t02), (t10, t11, t12), (t20, t21, t22) = T
    (ti00, ti01, ti02), (ti10, ti11, ti12), (ti20, ti21, ti22) = TI
    (p00, p01, p02), (p10, p11, p12), (p20, p21, p22) = P
    view_options = returns_a_view()

    @hjit
    def factor_matrices(h, work):
        """LU of MU_REAL / h I - J and of MU_COMPLEX / h I - J; False if singular."""
        m_real = MU_REAL / h
        m_re = MU_COMPLEX_RE / h
        m_im = MU_COMPLEX_IM / h
        for i in range(n):
            for j in range(n):
                jij = work[J_ROW + i, j]
                if i == j:
                    work[LU_ROW + i, j] = m_real - jij
                    work[LUR_ROW + i, j] = m_re - jij
                    work[LUI_ROW + i, j] = m_im
                else:
                    work[LU_ROW + i, j] = -jij
                    work[LUR_ROW + i, j] = -jij
                    work[LUI_ROW + i, j] = 0.0
        work[NLU, 0] += 2.0
        ok_real = lu_factor(work[LU_ROW:LU_ROW + n], work[PIV_REAL], n)
        ok_complex = lu_factor_complex(work[LUR_ROW:LUR_ROW + n], work[LUI_ROW:LUI_ROW + n],
                                       work[PIV_COMPLEX], n)
        return ok_real and ok_complex

    guard = sensitivities.jacobian_guard(n, JAC_BAD)
    finite, jac_bad, jac_clear, failure = guard.finite, guard.bad, guard.clear, guard.failure

    @hjit
    def jacobian(t, y, p, work):
        """J at (t, y) into its rows; False, and JAC_BAD set, where an entry is not
        finite (`..sensitivities.jacobian_guard`)."""
        jac_into(t, y, p, work[J_ROW:J_ROW + n])
        return finite(work[J_ROW:J_ROW + n], work)

    @hjit
    def solve_real(b, work):
        lu_solve(work[LU_ROW:LU_ROW + n], work[PIV_REAL], b, n)

    @hjit
    def stage(t, y, i, ch, p, work):
        """fun at t + ch, y + Z_i, into the row F_ROW + i."""
        ys = work[STAGE_Y]
        zi = work[Z_ROW + i]
        for k in range(n):
            ys[k] = y[k] + zi[k]
        f(t + ch, ys, p, work[F_ROW + i])

    @hjit
    def all_finite(work):
        for i in range(3):
            for k in range(n):
                if not math.isfinite(work[F_ROW + i, k]):
                    return False
        return True

    @hjit
    def collocation(t, y, h, tol, p, work):
        """scipy's ``solve_collocation_system`` from the Z rows (the start) and the
        scale row: ``(converged, iterations, rate)``; Z holds the last iterate.
        ``rate`` < 0: none measured (scipy's None)."""
        m_real = MU_REAL / h
        m_re = MU_COMPLEX_RE / h
        m_im = MU_COMPLEX_IM / h
        z0, z1, z2 = work[Z_ROW], work[Z_ROW + 1], work[Z_ROW + 2]
        w0, w1, w2 = work[W_ROW], work[W_ROW + 1], work[W_ROW + 2]
        f0, f1, f2 = work[F_ROW], work[F_ROW + 1], work[F_ROW + 2]
        d0, d1, d2 = work[DW_ROW], work[DW_ROW + 1], work[DW_ROW + 2]
        scale = work[SCALE]
        for k in range(n):  # W = T^-1 Z
            w0[k] = ti00 * z0[k] + ti01 * z1[k] + ti02 * z2[k]
            w1[k] = ti10 * z0[k] + ti11 * z1[k] + ti12 * z2[k]
            w2[k] = ti20 * z0[k] + ti21 * z1[k] + ti22 * z2[k]
        dw_norm_old = -1.0
        rate = -1.0
        converged = False
        iterations = 0
        for it in range(NEWTON_MAXITER):
            iterations = it + 1
            stage(t, y, 0, h * c0, p, work)
            stage(t, y, 1, h * c1, p, work)
            stage(t, y, 2, h * c2, p, work)
            if not all_finite(work):
                break
            for k in range(n):
                # real system: F^T TI_0 - MU_REAL / h W_0; complex: F^T (TI_1 + i TI_2)
                # - MU_COMPLEX / h (W_1 + i W_2), its parts in DW_1 and DW_2
                d0[k] = (f0[k] * ti00 + f1[k] * ti01 + f2[k] * ti02) - m_real * w0[k]
                d1[k] = (f0[k] * ti10 + f1[k] * ti11 + f2[k] * ti12) - (
                    m_re * w1[k] - m_im * w2[k])
                d2[k] = (f0[k] * ti20 + f1[k] * ti21 + f2[k] * ti22) - (
                    m_re * w2[k] + m_im * w1[k])
            solve_real(d0, work)
            lu_solve_complex(work[LUR_ROW:LUR_ROW + n], work[LUI_ROW:LUI_ROW + n],
                             work[PIV_COMPLEX], d1, d2, n)
            total = 0.0
            for k in range(n):
                q = d0[k] / scale[k]
                total += q * q
            for k in range(n):
                q = d1[k] / scale[k]
                total += q * q
            for k in range(n):
                q = d2[k] / scale[k]
                total += q * q
            dw_norm = math.sqrt(total * inv_3n)
            if dw_norm_old >= 0.0:
                rate = dw_norm / dw_norm_old
            # diverging, or too slow to converge within the iterations left
            if rate >= 0.0 and (rate >= 1.0 or rate ** (NEWTON_MAXITER - it) / (1.0 - rate)
                                * dw_norm > tol):
                break
            for k in range(n):
                w0[k] += d0[k]
                w1[k] += d1[k]
                w2[k] += d2[k]
                z0[k] = t00 * w0[k] + t01 * w1[k] + t02 * w2[k]
                z1[k] = t10 * w0[k] + t11 * w1[k] + t12 * w2[k]
                z2[k] = t20 * w0[k] + t21 * w1[k] + t22 * w2[k]
            if dw_norm == 0.0 or (rate >= 0.0 and rate / (1.0 - rate) * dw_norm < tol):
                converged = True
                break
            dw_norm_old = dw_norm
        return converged, iterations, rate

    @hjit
    def newton_start(t, y, h, work):
        """Z at the nodes from the previous step's collocation polynomial (zero on the
        first step), as scipy's ``self.sol(t + h * C).T - y``."""
        if work[HAVE_SOL, 0] == 0.0:
            for i in range(3):
                for k in range(n):
                    work[Z_ROW + i, k] = 0.0
            return
        t_prev = work[T_PREV, 0]
        h_prev = work[H_PREV, 0]
        q0, q1, q2 = work[Q_ROW], work[Q_ROW + 1], work[Q_ROW + 2]
        y_prev = work[Y_PREV]
        for i in range(3):
            ci = c0 if i == 0 else (c1 if i == 1 else c2)
            x = (t + h * ci - t_prev) / h_prev
            x2 = x * x
            x3 = x2 * x
            z = work[Z_ROW + i]
            for k in range(n):
                z[k] = (q0[k] * x + q1[k] * x2 + q2[k] * x3 + y_prev[k]) - y[k]

    @hjit
    def error_norm(y, y_new, conf, tol_start, work):
        err = work[ERROR]
        scale = error_scale(y, y_new, conf, tol_start, row(work, SCALE))
        total = 0.0
        for k in range(n):
            q = err[k] / scale[k]
            total += q * q
        return math.sqrt(total * inv_n)

    @hjit
    def predict_factor(h_abs, h_abs_old, error, error_old):
        """Gustafsson's predictive controller (Hairer & Wanner II, eq. IV.8.25), with
        scipy's fallback to the plain one without history (negative: none)."""
        if error_old < 0.0 or h_abs_old < 0.0 or error == 0.0:
            multiplier = 1.0
        else:
            multiplier = h_abs / h_abs_old * (error_old / error) ** 0.25
        if error == 0.0:
            return math.inf
        return min(1.0, multiplier) * error ** -0.25

    @hjit
    def begin(t, y, fy, h_abs, direction, conf, tol_start, p, work):
        jac_clear(work)
        jacobian(t, y, p, work)
        work[NJEV, 0] = first_njev
        work[NLU, 0] = 0.0
        work[CURRENT_JAC, 0] = 1.0
        work[LU_VALID, 0] = 0.0
        work[HAVE_SOL, 0] = 0.0
        work[H_ABS_OLD, 0] = -1.0
        work[ERROR_OLD, 0] = -1.0
        return 0

    @hjit
    def counts(work):
        return int(work[NJEV, 0]), int(work[NLU, 0])

    @hjit(**view_options)
    def step(t, y, fy, h_abs_in, t_end, direction, max_step, conf, tol_start, p, work):
        rtol = conf[tol_start]
        newton_tol = max(10.0 * EPS / rtol, min(0.03, math.sqrt(rtol)))
        min_step = 10.0 * ulp_toward(t, direction)
        if jac_bad(work):  # J at the start or the last step's end: `failure`
            return False, t, y, fy, 0.0, h_abs_in, 0
        h_abs_old = work[H_ABS_OLD, 0]
        error_old = work[ERROR_OLD, 0]
        if h_abs_in > max_step:
            h_abs = max_step
            h_abs_old = -1.0
            error_old = -1.0
        elif h_abs_in < min_step:
            h_abs = min_step
            h_abs_old = -1.0
            error_old = -1.0
        else:
            h_abs = h_abs_in
        current_jac = work[CURRENT_JAC, 0] != 0.0
        lu_valid = work[LU_VALID, 0] != 0.0
        y_new = row(work, Y_NEW)
        err = work[ERROR]
        ze = work[ZE]
        z0, z1, z2 = work[Z_ROW], work[Z_ROW + 1], work[Z_ROW + 2]
        nfev = 0
        rejected = False
        h = 0.0
        t_new = t
        iterations = 0
        rate = -1.0
        error = 0.0
        safety = 0.0
        while True:
            if not h_abs >= min_step:  # (a NaN step size ends here too)
                work[LU_VALID, 0] = 0.0
                return False, t, y, fy, h, h_abs, nfev
            h = h_abs * direction
            t_new = t + h
            if direction * (t_new - t_end) > 0.0:
                t_new = t_end
            h = t_new - t
            h_abs = abs(h)
            newton_start(t, y, h, work)
            error_scale(y, y, conf, tol_start, row(work, SCALE))
            converged = False
            while not converged:
                factored = True
                if not lu_valid:
                    factored = factor_matrices(h, work)
                    lu_valid = True
                if factored:
                    converged, iterations, rate = collocation(t, y, h, newton_tol, p, work)
                    nfev += 3 * iterations
                if not converged:
                    if current_jac:
                        break
                    work[NJEV, 0] += 1.0
                    if not jacobian(t, y, p, work):
                        work[LU_VALID, 0] = 0.0
                        return False, t, y, fy, h, h_abs, nfev
                    current_jac = True
                    lu_valid = False
            if not converged:
                h_abs *= 0.5
                lu_valid = False
                continue
            for k in range(n):
                y_new[k] = y[k] + z2[k]
                ze[k] = (z0[k] * e0 + z1[k] * e1 + z2[k] * e2) / h
                err[k] = fy[k] + ze[k]
            solve_real(err, work)
            error = error_norm(y, y_new, conf, tol_start, work)
            safety = 0.9 * (2 * NEWTON_MAXITER + 1) / (2 * NEWTON_MAXITER + iterations)
            if rejected and error > 1.0:
                # Hairer & Wanner's improved estimate (eq. IV.8.20), scipy on a step
                # already rejected
                ys = work[STAGE_Y]
                for k in range(n):
                    ys[k] = y[k] + err[k]
                fe = f(t, ys, p, work[F_NEW])
                nfev += 1
                for k in range(n):
                    err[k] = fe[k] + ze[k]
                solve_real(err, work)
                error = error_norm(y, y_new, conf, tol_start, work)
            if error > 1.0:
                h_abs *= max(MIN_FACTOR, safety * predict_factor(h_abs, h_abs_old, error,
                                                                  error_old))
                lu_valid = False
                rejected = True
            else:
                break
        # the Jacobian is evaluated again at the step's end when Newton converged slowly
        recompute_jac = not fixed_jac and iterations > 2 and rate > 1e-3
        factor = min(MAX_FACTOR, safety * predict_factor(h_abs, h_abs_old, error, error_old))
        if not recompute_jac and factor < 1.2:
            factor = 1.0  # keep the step size, and with it the LU decompositions
        else:
            lu_valid = False
        f_new = f(t_new, y_new, p, work[F_NEW])
        nfev += 1
        if recompute_jac:
            jacobian(t_new, y_new, p, work)  # not finite: the next step stops (`failure`)
            work[NJEV, 0] += 1.0
            current_jac = True
        else:
            current_jac = fixed_jac  # a matrix given stays current
        work[H_ABS_OLD, 0] = h_abs_in
        work[ERROR_OLD, 0] = error
        work[CURRENT_JAC, 0] = 1.0 if current_jac else 0.0
        work[LU_VALID, 0] = 1.0 if lu_valid else 0.0
        # this step's collocation polynomial: the dense output and the next Newton start
        q0, q1, q2 = work[Q_ROW], work[Q_ROW + 1], work[Q_ROW + 2]
        y_prev = work[Y_PREV]
        for k in range(n):
            q0[k] = z0[k] * p00 + z1[k] * p10 + z2[k] * p20
            q1[k] = z0[k] * p01 + z1[k] * p11 + z2[k] * p21
            q2[k] = z0[k] * p02 + z1[k] * p12 + z2[k] * p22
            y_prev[k] = y[k]
        work[T_PREV, 0] = t
        work[H_PREV, 0] = h
        work[HAVE_SOL, 0] = 1.0
        return True, t_new, y_new, f_new, h, h_abs * factor, nfev

    @hjit(**view_options)
    def coefficients(t_old, y_old, f_old, y_new, f_new, h, p, work):
        return work[Q_ROW], work[Q_ROW + 1], work[Q_ROW + 2]

    @hjit
    def placeholder(y):
        return y, y, y

    return Functions(
        step=step, begin=begin, counts=counts, failure=failure, coefficients=coefficients,
        placeholder=placeholder, evaluate=make_evaluate(n), step_nfev=0, dense_nfev=0,
        error_exponent=-0.25, derived=(("jac", jac_into),))


_EVALUATE = {}


def make_evaluate(n):
    """``evaluate(q, t_old, h, y_old, t, dst)``: the collocation polynomial
    ``y_old + Q_0 x + Q_1 x^2 + Q_2 x^3``, ``x = (t - t_old) / h`` (scipy's
    ``RadauDenseOutput``), for the loop and the step records alike (built once per n)."""
    if n not in _EVALUATE:
        @hjit(**returns_a_view())
        def evaluate(q, t_old, h, y_old, t, dst):
            x = (t - t_old) / h
            x2 = x * x
            x3 = x2 * x
            q0, q1, q2 = q
            for k in range(n):
                dst[k] = q0[k] * x + q1[k] * x2 + q2[k] * x3 + y_old[k]
            return dst
        _EVALUATE[n] = evaluate
    return _EVALUATE[n]


METHOD = Radau()
