"""Rodas5P: a stiffly accurate Rosenbrock method of order 5(4), one object per thread.

G. Steinebach, "Construction of Rosenbrock-Wanner method Rodas5P and numerical
benchmarks within the Julia Differential Equations package", BIT Numerical
Mathematics 63:27 (2023). Coefficients as published with OrdinaryDiffEq.jl's
tableau (``Rodas5PTableau``), in Hairer & Wanner's transformed form (*Solving
ODEs II*, Sec. IV.7, eqs. 7.4'-7.5: increments ``k_i`` instead of stage slopes,
so that one LU of ``W`` per step serves every stage):

    (I / (h gamma) - J) k_i = f(t + c_i h, y + sum_j a_ij k_j)
                              + sum_j (C_ij / h) k_j + d_i h df/dt

8 stages, 7 new evaluations of ``f`` per attempt and one LU, no Newton
iteration: nothing can fail to converge, the work per step is fixed, which
suits one GPU thread per object (the reason for Rosenbrock over Radau there;
Rodas5P over Rodas4 for its order 5 at tight tolerances and Steinebach's
improved accuracy on the stiff test set, and because its dense output is of
order 4 rather than 3). Stiffly accurate: the last stage's argument plus
``k_8`` is the solution, ``k_8`` itself the embedded (order 4) error estimate.

Dense output: Rodas' own stiffly accurate interpolant (Steinebach 2023, the
``H`` rows of the tableau): ``y(t_old + x h) = (1 - x) y_old + x (y_new + (1 - x)
(q_1 + x (q_2 + x q_3)))`` with ``q_r = sum_j H_rj k_j``, no extra evaluation.

Step-size control: scipy's rule (as `..control.make_step` for the explicit
pairs): error in scipy's RMS norm with scale ``atol + max(|y|, |y_new|) rtol``,
factor ``0.9 err^(-1/5)`` (the error estimate is of order 4: exponent
``-1/(q+1)``), within 0.2 .. 10, never growing right after a rejection.

``df/dt``: for a tuple-form ``fun`` without ``jac=`` the automatic derivative
(`..sensitivities`) gives ``df/dt`` exactly with ``df/dy`` in one call, and an
autonomous ``fun`` (every ``df/dt`` entry known to be zero) carries no time term
at all. With a user's ``jac=`` (which gives ``df/dy`` only) ``df/dt`` is a forward
difference in ``t`` (Hairer's RODAS: ``delta = sqrt(eps max(1e-5, |t|))``), one
more evaluation per step. A constant Jacobian (``jac=`` a matrix, or one whose
source reads neither t nor y: `..sensitivities.constant_jacobian`) is evaluated
once, at t0, and so is df/dt without ``jac=``. A Jacobian with an entry that is not
finite stops its object with status `..layout.JACOBIAN_NOT_FINITE`
(`..sensitivities.jacobian_guard`, as Radau and BDF).

Memory per object: rows of ``work`` (`rows_for`): W (its LU) and J (n rows each),
the pivots, the 8 increments, ``df/dt``, a stage's argument and derivative, the
new derivative, the counts (njev, nlu), the flag of a J not finite and the
interpolant's 3 rows.
"""

import math

from ...jit import hjit
from .. import sensitivities
from ..control import MAX_FACTOR, MIN_FACTOR, SAFETY, ulp_toward
from ..layout import WorkRows
from ..linalg import lu_factor, lu_solve
from ..state import fun_form, returns_a_view, rhs
from .base import Method

GAMMA = 0.21193756319429014

#: ``a_ij`` of stages 2-6 (stage 6 at ``t + h``); stages 7 and 8 take stage 6's argument
#: plus ``k_6`` (plus ``k_7``): `_stage_a` writes the full rows.
A = (
    (3.0,),
    (2.849394379747939, 0.45842242204463923),
    (-6.954028509809101, 2.489845061869568, -10.358996098473584),
    (2.8029986275628964, 0.5072464736228206, -0.3988312541770524, -0.04721187230404641),
    (-7.502846399306121, 2.561846144803919, -11.627539656261098, -0.18268767659942256,
     0.030198172008377946),
)

C = (
    (-14.155112264123755,),
    (-17.97296035885952, -2.859693295451294),
    (147.12150275711716, -1.41221402718213, 71.68940251302358),
    (165.43517024871676, -0.4592823456491126, 42.90938336958603, -5.961986721573306),
    (24.854864614690072, -3.0009227002832186, 47.4931110020768, 5.5814197821558125,
     -0.6610691825249471),
    (30.91273214028599, -3.1208243349937974, 77.79954646070892, 34.28646028294783,
     -19.097331116725623, -28.087943162872662),
    (37.80277123390563, -3.2571969029072276, 112.26918849496327, 66.9347231244047,
     -40.06618937091002, -54.66780262877968, -9.48861652309627),
)

#: stage times; stages 6-8 at the step's end
STAGE_C = (0.0, 0.6358126895828704, 0.4095798393397535, 0.9769306725060716,
           0.4288403609558664, 1.0, 1.0, 1.0)
#: ``d_i = gamma_i``, the coefficients of ``h df/dt`` (0 for stages 6-8)
STAGE_D = (0.21193756319429014, -0.42387512638858027, -0.3384627126235924,
           1.8046452872882734, 2.325825639765069, 0.0, 0.0, 0.0)

#: The interpolant's rows: ``q_r = sum_j H[r][j] k_j``.
H = (
    (25.948786856663858, -2.5579724845846235, 10.433815404888879, -2.3679251022685204,
     0.524948541321073, 1.1241088310450404, 0.4272876194431874, -0.17202221070155493),
    (-9.91568850695171, -0.9689944594115154, 3.0438037242978453, -24.495224566215796,
     20.176138334709044, 15.98066361424651, -6.789040303419874, -6.710236069923372),
    (11.419903575922262, 2.8879645146136994, 72.92137995996029, 80.12511834622643,
     -52.072871366152654, -59.78993625266729, -0.15582684282751913, 4.883087185713722),
)

N_STAGES = 8
ORDER = 5
ERROR_ORDER = 4


def _stage_a():
    """``a_ij`` of all 8 stages, lower triangular, as flat row-major 8 x 8 (stage 1: no
    terms; 7 = 6's row and k_6; 8 = 7's row and k_7); the solution is stage 8's
    argument plus k_8."""
    rows = [()] + list(A)
    rows.append(A[-1] + (1.0,))
    rows.append(A[-1] + (1.0, 1.0))
    flat = []
    for i in range(N_STAGES):
        flat += list(rows[i]) + [0.0] * (N_STAGES - len(rows[i]))
    return tuple(flat)


def _stage_c():
    rows = [()] + list(C)
    flat = []
    for i in range(N_STAGES):
        flat += list(rows[i]) + [0.0] * (N_STAGES - len(rows[i]))
    return tuple(flat)


A_FLAT = _stage_a()
C_FLAT = _stage_c()
H_FLAT = tuple(x for row in H for x in row)
#: the solution's weights: stage 8's argument plus k_8
B = A_FLAT[7 * N_STAGES:7 * N_STAGES + 7] + (1.0,)


def check_tableau():
    """What the published numbers must satisfy (Hairer-Wanner IV.7, in the transformed
    form with ``Gamma = (gamma I - ...)``): ``d_1 = gamma``; ``c_2 = 3 gamma`` (as
    ``a_21 = 3``: ``c_i = sum_j alpha_ij`` and ``alpha_21 = a_21 gamma``). Raises on a
    mangled number."""
    assert STAGE_D[0] == GAMMA
    assert abs(STAGE_C[1] - A[0][0] * GAMMA) < 1e-15


check_tableau()


class Rosenbrock(Method):
    """A Rosenbrock method's `Method`: array-shaped states (its matrices live in
    ``work``), rows per n (`rows_for`)."""

    state_shape = "array"

    def __init__(self, name):
        self.name = name
        self.tableau = None
        self.rows = None
        self._built = {}

    @property
    def error_estimator_order(self):
        return ERROR_ORDER

    @property
    def error_exponent(self):
        return -1.0 / (ERROR_ORDER + 1)

    def rows_for(self, n):
        # the loop's named rows, then the method's: its matrices take n rows each
        return WorkRows(stage_rows=2 * n + N_STAGES + 9, sums=0, coeffs=3)

    def build(self, ops, keep, fun, jac=None):
        key = (ops.n, ops.n_err, ops.shape, fun, jac)
        if key not in self._built:
            import types
            self._built[key] = types.SimpleNamespace(**_build(ops, fun, jac,
                                                              self.rows_for(ops.n)))
        return self._built[key]

    def coefficient_states(self, n):
        # y_new (the loop's row, rewritten by the next step) and q_1..q_3
        return 4

    def interpolant(self, ops, keep, fun):
        return make_evaluate(ops.n)


def _build(ops, fun, jac, rows):
    n = ops.n
    if not ops.is_array:  # pragma: no cover - the loop asks for state_shape
        raise ValueError("Rodas5P: states must be rows of work (state_shape 'array')")
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
    FT = K0 + N_STAGES
    U, FU, F_NEW, NJEV, NLU, TMP = FT + 1, FT + 2, FT + 3, FT + 4, FT + 5, FT + 6
    JAC_BAD = FT + 7  # 1: a J had NaN or inf (the object stops: `failure`)
    guard = sensitivities.jacobian_guard(n, JAC_BAD)
    finite, jac_bad, jac_clear = guard.finite, guard.bad, guard.clear
    Y_NEW, WEIGHT = rows.y_new, rows.weight
    Q0 = rows.coeffs
    S = N_STAGES
    exponent = -1.0 / (ERROR_ORDER + 1)
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
        inv_hg = 1.0 / (h * GAMMA)
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
                        acc += A_FLAT[s * S + j] * work[K0 + j, i]
                    u[i] = acc
                fu = f(t + STAGE_C[s] * h, u, p, work[FU])
                nfev += 1
                for i in range(n):
                    acc = fu[i]
                    for j in range(s):
                        acc += C_FLAT[s * S + j] * inv_h * work[K0 + j, i]
                    k[i] = acc
            if not autonomous and STAGE_D[s] != 0.0:
                dh = STAGE_D[s] * h
                for i in range(n):
                    k[i] += dh * work[FT, i]
            lu_solve(work[W0:W0 + n], work[PIV], k, n)
        y_new = work[Y_NEW]
        for i in range(n):
            acc = y[i]
            for j in range(S):
                acc += B[j] * work[K0 + j, i]
            y_new[i] = acc
        # scipy's RMS norm of the embedded estimate k_8 against atol + max(|y|, |y_new|) rtol
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
                    acc += H_FLAT[r * S + j] * work[K0 + j, i]
                q[i] = acc
        return (y_new, work[Q0], work[Q0 + 1], work[Q0 + 2])

    @hjit
    def placeholder(y):
        return (y, y, y, y)

    return {"step": step, "begin": begin, "counts": counts, "failure": guard.failure,
            "coefficients": coefficients,
            "placeholder": placeholder, "evaluate": make_evaluate(n), "step_nfev": S,
            "dense_nfev": 0, "error_exponent": exponent}


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


METHOD = Rosenbrock("Rodas5P")
