"""The Rosenbrock family: stiffly accurate Rosenbrock (Rodas-type) methods, one object per
thread, each `Rosenbrock` method a `RosenbrockTableau` (Rodas5P: `.rodas`).

Hairer & Wanner's transformed form (*Solving ODEs II*, Sec. IV.7, eqs. 7.4'-7.5:
increments ``k_i`` instead of stage slopes, so that one LU of ``W`` per step serves
every stage), with the names of OrdinaryDiffEq.jl's tableaux (``a``, ``C``, ``c``,
``d``, ``H``):

    (I / (h gamma) - J) k_i = f(t + c_i h, y + sum_j a_ij k_j)
                              + sum_j (C_ij / h) k_j + d_i h df/dt

S stages, S - 1 new evaluations of ``f`` per attempt and one LU, no Newton iteration:
nothing can fail to converge, the work per step is fixed, which suits one GPU thread
per object. Stiffly accurate: the last stage's argument plus ``k_S`` is the solution
(the last stage at ``t + h``), ``k_S`` itself the embedded error estimate.

Dense output: the stiffly accurate interpolant of the ``H`` rows (3 of them, as
Rodas5 and Rodas5P have): ``y(t_old + x h) = (1 - x) y_old + x (y_new + (1 - x)
(q_1 + x (q_2 + x q_3)))`` with ``q_r = sum_j H_rj k_j``, no extra evaluation.

Step-size control: scipy's rule (as `..control.make_step` for the explicit pairs):
error in scipy's RMS norm with scale ``atol + max(|y|, |y_new|) rtol``, factor
``0.9 err^(-1/(q+1))`` (q the error estimate's order), within 0.2 .. 10, never growing
right after a rejection.

``df/dt``: for a tuple-form ``fun`` without ``jac=`` the automatic derivative
(`..sensitivities`) gives ``df/dt`` exactly with ``df/dy`` in one call, and an
autonomous ``fun`` (every ``df/dt`` entry known to be zero) carries no time term at
all. With a user's ``jac=`` (which gives ``df/dy`` only) ``df/dt`` is a forward
difference in ``t`` (Hairer's RODAS: ``delta = sqrt(eps max(1e-5, |t|))``), one more
evaluation per step. A constant Jacobian (``jac=`` a matrix, or one whose source reads
neither t nor y: `..sensitivities.constant_jacobian`) is evaluated once, at t0, and so
is df/dt without ``jac=``.

Memory per object: rows of ``work`` (`Rosenbrock.rows_for`): W (its LU) and J (n rows
each), the pivots, the S increments, ``df/dt``, a stage's argument and derivative, the
new derivative, the counts (njev, nlu), the flag of a J not finite
(`..sensitivities.jacobian_guard`) and the interpolant's 3 rows.
"""

import dataclasses
import math

from ...jit import hjit
from .. import sensitivities
from ..control import MAX_FACTOR, MIN_FACTOR, SAFETY, ulp_toward
from ..layout import WorkRows
from ..linalg import lu_factor, lu_solve
from ..state import fun_form, returns_a_view, rhs
from .base import Functions, Method

#: the interpolant rows this family's dense output takes (`make_evaluate`)
INTERPOLANT_ROWS = 3


@dataclasses.dataclass(frozen=True)
class RosenbrockTableau:
    """A stiffly accurate Rosenbrock method's coefficients in the transformed form (the
    module's equation), checked when made (`check`).

    ``a``: S rows, row i the ``a_ij`` of stage i's argument (i entries: stage 1 has
    none); the solution is the last row's argument plus ``k_S`` (weights ``b``).
    ``C``: S rows, row i the ``C_ij`` (i entries). ``c``, ``d``: per stage, its time
    (a fraction of h) and the coefficient of ``h df/dt``. ``H``: the interpolant's 3 rows
    of S weights. ``order``: the solution's; ``error_estimator_order``: ``k_S``'s (the
    step-size rule's exponent is ``-1 / (error_estimator_order + 1)``).
    """

    name: str
    gamma: float
    a: tuple
    C: tuple
    c: tuple
    d: tuple
    H: tuple
    order: int
    error_estimator_order: int

    def __post_init__(self):
        self.check()

    @property
    def n_stages(self):
        return len(self.a)

    @property
    def a_flat(self):
        """``a`` as a flat row-major S x S matrix, zeros above its diagonal."""
        return _flat(self.a, self.n_stages)

    @property
    def c_flat(self):
        """``C`` as a flat row-major S x S matrix, zeros above its diagonal."""
        return _flat(self.C, self.n_stages)

    @property
    def h_flat(self):
        return tuple(float(x) for row in self.H for x in row)

    @property
    def b(self):
        """The solution's weights: the last stage's argument plus ``k_S``."""
        return tuple(self.a[-1]) + (1.0,)

    def check(self):
        """What the published numbers must satisfy, a ValueError naming the tableau where
        they do not: the shapes above; every number finite; ``d_1 = gamma`` and
        ``c_2 = a_21 gamma`` (Hairer-Wanner IV.7 in the transformed form: ``c_i = sum_j
        alpha_ij`` and ``alpha_21 = a_21 gamma``); the last stage at ``t + h``
        (stiffly accurate); an error estimate of lower order than the solution."""
        s = len(self.a)
        where = f"Rosenbrock tableau {self.name!r}"
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"{where}: expected a name (a non-empty str)")
        if s < 2 or len(self.C) != s or len(self.c) != s or len(self.d) != s:
            raise ValueError(f"{where}: expected a, C, c and d of one length S >= 2 (the "
                             f"stages), got {len(self.a)}, {len(self.C)}, {len(self.c)}, "
                             f"{len(self.d)}")
        for name, rows in (("a", self.a), ("C", self.C)):
            lengths = [len(row) for row in rows]
            if lengths != list(range(s)):
                raise ValueError(f"{where}: expected {name}'s rows lower triangular (row i "
                                 f"of i entries: {list(range(s))}), got {lengths}")
        if len(self.H) != INTERPOLANT_ROWS or any(len(row) != s for row in self.H):
            raise ValueError(f"{where}: expected {INTERPOLANT_ROWS} interpolant rows H of "
                             f"{s} weights each")
        numbers = ((self.gamma,) + self.a_flat + self.c_flat + tuple(self.c) + tuple(self.d)
                   + self.h_flat)
        if not all(isinstance(x, float) and math.isfinite(x) for x in numbers):
            raise ValueError(f"{where}: expected finite floats")
        if self.d[0] != self.gamma:
            raise ValueError(f"{where}: d_1 = {self.d[0]!r} is not gamma = {self.gamma!r}")
        if not abs(self.c[1] - self.a[1][0] * self.gamma) < 1e-15:
            raise ValueError(f"{where}: c_2 = {self.c[1]!r} is not a_21 gamma = "
                             f"{self.a[1][0] * self.gamma!r}")
        if self.c[-1] != 1.0:
            raise ValueError(f"{where}: the last stage is at c = {self.c[-1]!r}, expected "
                             "1.0 (stiffly accurate: its argument makes the solution)")
        if not 0 < self.error_estimator_order < self.order:
            raise ValueError(f"{where}: expected 0 < error_estimator_order < order, got "
                             f"{self.error_estimator_order} and {self.order}")


def _flat(rows, s):
    flat = []
    for row in rows:
        flat += [float(x) for x in row] + [0.0] * (s - len(row))
    return tuple(flat)


class Rosenbrock(Method):
    """A Rosenbrock method of this family, as its `RosenbrockTableau` makes it:
    array-shaped states (its matrices live in ``work``), rows per n (`rows_for`)."""

    state_shape = "array"

    def __init__(self, tableau):
        if not isinstance(tableau, RosenbrockTableau):
            raise TypeError(f"tableau: expected a RosenbrockTableau, got "
                            f"{type(tableau).__name__}")
        self.tableau = tableau
        self.name = tableau.name

    @property
    def error_estimator_order(self):
        return self.tableau.error_estimator_order

    def rows_for(self, n):
        # the loop's named rows, then the method's: its matrices take n rows each
        return WorkRows(stage_rows=2 * n + self.tableau.n_stages + 9, sums=0,
                        coeffs=INTERPOLANT_ROWS)

    def functions(self, ops, keep, fun, jac):
        return _build(self.tableau, ops, fun, jac, self.rows_for(ops.n))

    def coefficient_states(self, n):
        # y_new (the loop's row, rewritten by the next step) and q_1..q_3
        return 1 + INTERPOLANT_ROWS

    def interpolant(self, ops, keep, fun):
        return make_evaluate(ops.n)


def _build(tableau, ops, fun, jac, rows):
    n = ops.n
    gamma, stage_c, stage_d = tableau.gamma, tableau.c, tableau.d
    a_flat, c_flat, h_flat, b = tableau.a_flat, tableau.c_flat, tableau.h_flat, tableau.b
    S = tableau.n_stages
    if not ops.is_array:  # pragma: no cover - the loop asks for state_shape
        raise ValueError(f"{tableau.name}: states must be rows of work (state_shape 'array')")
    f = rhs(fun, "array", n)
    # one selection of J for every implicit method (raises naming jac where none can be
    # had); without jac= a tuple-form fun is differentiated in t and y at once
    finite_time = jac is not None or fun_form(fun) != "tuple"
    autonomous = False
    if finite_time:
        jac_into = sensitivities.method_jacobian(fun, n, jac)
        constant = sensitivities.constant_jacobian(jac_into)
    else:
        jac_t = sensitivities.jacobian_with_time(fun, n)
        autonomous = jac_t.hapsira_autonomous
        constant = sensitivities.constant_jacobian(jac_t)
    # a constant J (and, without jac=, df/dt) is evaluated at t0 only, not every step
    fixed_jac = constant is not None
    first_njev = 1.0 if constant == sensitivities.RECOGNISED else 0.0  # at t0, by begin
    sqrt_n = math.sqrt(ops.n_err)
    error_scale, scaled_sum_squares = ops.error_scale, ops.scaled_sum_squares
    W0, J0, PIV = 0, n, 2 * n
    K0 = 2 * n + 1
    FT = K0 + S
    U, FU, F_NEW, NJEV, NLU, TMP = FT + 1, FT + 2, FT + 3, FT + 4, FT + 5, FT + 6
    JAC_BAD = FT + 7  # 1: a J had NaN or inf (the object stops: `failure`)
    guard = sensitivities.jacobian_guard(n, JAC_BAD)
    finite, jac_bad, jac_clear = guard.finite, guard.bad, guard.clear
    Y_NEW, WEIGHT = rows.y_new, rows.weight
    Q0 = rows.coeffs
    exponent = -1.0 / (tableau.error_estimator_order + 1)
    eps = 2.220446049250313e-16
    view = returns_a_view()

    if finite_time:
        @hjit
        def derivatives(t, y, fy, p, work):
            """J (unless constant) and df/dt at (t, y); the evaluations of f it took."""
            if not fixed_jac:
                jac_into(t, y, p, work[J0:J0 + n])
                finite(work[J0:J0 + n], work)
            delta = math.sqrt(eps * max(1e-5, abs(t)))
            fd = f(t + delta, y, p, work[TMP])
            inv = 1.0 / delta
            for i in range(n):
                work[FT, i] = (fd[i] - fy[i]) * inv
            return 1
    else:
        @hjit
        def derivatives(t, y, fy, p, work):
            jac_t(t, y, p, work[J0:J0 + n], work[FT])
            finite(work[J0:J0 + n], work)
            return 0

    # what `begin` evaluates once: a constant J (and df/dt), or nothing (each step does)
    if not fixed_jac:
        @hjit
        def derivatives_at_start(t, y, p, work):
            return 0
    elif finite_time:
        @hjit
        def derivatives_at_start(t, y, p, work):
            jac_into(t, y, p, work[J0:J0 + n])
            finite(work[J0:J0 + n], work)
            return 0
    else:
        @hjit
        def derivatives_at_start(t, y, p, work):
            jac_t(t, y, p, work[J0:J0 + n], work[FT])
            finite(work[J0:J0 + n], work)
            return 0

    @hjit
    def attempt(t, y, fy, h, p, conf, tol, work):
        """One step of size h (J and df/dt in work): (LU ok, error norm, nfev)."""
        inv_hg = 1.0 / (h * gamma)
        for i in range(n):
            for j in range(n):
                work[W0 + i, j] = -work[J0 + i, j]
            work[W0 + i, i] += inv_hg
        work[NLU, 0] += 1.0
        if not lu_factor(work[W0:W0 + n], work[PIV], n):
            return False, math.inf, 0
        inv_h = 1.0 / h
        nfev = 0
        for s in range(S):
            k = work[K0 + s]
            if s == 0:
                for i in range(n):
                    k[i] = fy[i]
            else:
                u = work[U]
                for i in range(n):
                    acc = y[i]
                    for j in range(s):
                        acc += a_flat[s * S + j] * work[K0 + j, i]
                    u[i] = acc
                fu = f(t + stage_c[s] * h, u, p, work[FU])
                nfev += 1
                for i in range(n):
                    acc = fu[i]
                    for j in range(s):
                        acc += c_flat[s * S + j] * inv_h * work[K0 + j, i]
                    k[i] = acc
            if not autonomous and stage_d[s] != 0.0:
                dh = stage_d[s] * h
                for i in range(n):
                    k[i] += dh * work[FT, i]
            lu_solve(work[W0:W0 + n], work[PIV], k, n)
        y_new = work[Y_NEW]
        for i in range(n):
            acc = y[i]
            for j in range(S):
                acc += b[j] * work[K0 + j, i]
            y_new[i] = acc
        # scipy's RMS norm of the embedded estimate k_S against atol + max(|y|, |y_new|) rtol
        scale = error_scale(y, y_new, conf, tol, work[WEIGHT])
        err = math.sqrt(scaled_sum_squares(work[K0 + S - 1], scale)) / sqrt_n
        return True, err, nfev

    @hjit
    def factor(err):
        return SAFETY * err ** exponent

    @hjit(**view)
    def step(t, y, fy, h_abs, t_bound, direction, max_step, conf, tol, p, work):
        min_step = 10.0 * ulp_toward(t, direction)
        if h_abs > max_step:
            h_abs = max_step
            if h_abs < min_step:
                return False, t, y, fy, 0.0, h_abs, 0
        elif h_abs < min_step:
            h_abs = min_step
        if jac_bad(work):  # a constant J not finite at t0: `failure`
            return False, t, y, fy, 0.0, h_abs, 0
        nfev = 0
        if finite_time or not fixed_jac:
            nfev = derivatives(t, y, fy, p, work)
        if not fixed_jac:
            work[NJEV, 0] += 1.0
            if jac_bad(work):  # J here not finite: `failure`
                return False, t, y, fy, 0.0, h_abs, nfev
        rejected = False
        while True:
            t_new = t + h_abs * direction
            if direction * (t_new - t_bound) > 0.0:
                t_new = t_bound
            h = t_new - t
            h_abs = abs(h)
            ok, err, used = attempt(t, y, fy, h, p, conf, tol, work)
            nfev += used
            if ok and err < 1.0:
                scale = MAX_FACTOR if err == 0.0 else min(MAX_FACTOR, factor(err))
                if rejected:
                    scale = min(1.0, scale)
                f_new = f(t_new, work[Y_NEW], p, work[F_NEW])
                nfev += 1
                return True, t_new, work[Y_NEW], f_new, h, h_abs * scale, nfev
            if ok:
                h_abs *= max(MIN_FACTOR, factor(err))  # a NaN error shrinks by 0.2
            else:
                h_abs *= 0.5  # W singular at this h: a smaller step moves 1/(h gamma)
            rejected = True
            if not h_abs >= min_step:
                return False, t_new, work[Y_NEW], fy, h, h_abs, nfev

    @hjit
    def begin(t, y, fy, h_abs, direction, conf, tol, p, work):
        work[NJEV, 0] = first_njev
        work[NLU, 0] = 0.0
        jac_clear(work)
        derivatives_at_start(t, y, p, work)
        return 0

    @hjit
    def counts(work):
        return int(work[NJEV, 0]), int(work[NLU, 0])

    @hjit(**view)
    def coefficients(t_old, y_old, f_old, y_new, f_new, h, p, work):
        for r in range(3):
            q = work[Q0 + r]
            for i in range(n):
                acc = 0.0
                for j in range(S):
                    acc += h_flat[r * S + j] * work[K0 + j, i]
                q[i] = acc
        return (y_new, work[Q0], work[Q0 + 1], work[Q0 + 2])

    @hjit
    def placeholder(y):
        return (y, y, y, y)

    return Functions(step=step, begin=begin, counts=counts, failure=guard.failure,
                     coefficients=coefficients,
                     placeholder=placeholder, evaluate=make_evaluate(n), step_nfev=S,
                     dense_nfev=0, error_exponent=exponent,
                     derived=(("jac", jac_into),) if finite_time else (("jac_t", jac_t),))


_EVALUATE = {}


def make_evaluate(n):
    """``evaluate(q, t_old, h, y_old, t, dst)`` with ``q = (y_new, q_1, q_2, q_3)``:
    ``(1 - x) y_old + x (y_new + (1 - x) (q_1 + x (q_2 + x q_3)))``, ``x = (t - t_old) / h``,
    for the loop and the step records alike (built once per n)."""
    if n not in _EVALUATE:
        @hjit(**returns_a_view())
        def evaluate(q, t_old, h, y_old, t, dst):
            x = (t - t_old) / h
            x1 = 1.0 - x
            y1, q1, q2, q3 = q
            for i in range(n):
                dst[i] = x1 * y_old[i] + x * (y1[i] + x1 * (q1[i] + x * (q2[i] + x * q3[i])))
            return dst
        _EVALUATE[n] = evaluate
    return _EVALUATE[n]
