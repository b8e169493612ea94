"""The contract a method fulfils, in the spirit of ``scipy.integrate._ivp.base.OdeSolver``.

`Method` states it on the class, every hook with its default; `Functions` is what a
method builds per state size and right-hand side, the ``hjit`` functions the
method-neutral step-size control (`..control`) and solve loop (`..loop`) call.
`ExplicitMethod` is an explicit embedded Runge-Kutta pair described by its
`ButcherTableau` (DOP853, RK45, RK23); the implicit methods (Radau, BDF, the Rosenbrock
family of `.rosenbrock`) subclass `Method` themselves. ``solve_ivp(method=...)`` takes
a registered method's name (`hapsira_core.ivp.methods.METHODS`) or a `Method`.
"""

import dataclasses
import math

from ...jit import hjit
from ..butcher import ButcherTableau
from ..layout import STEP_TOO_SMALL, WorkRows


@hjit
def no_begin(t, y, fy, h_abs, direction, conf, tol, p, work):
    """`Functions.begin`'s default: no memory to set up, no evaluation of ``f``."""
    return 0


@hjit
def no_counts(work):
    """`Functions.counts`'s default: scipy's ``njev`` and ``nlu`` of an explicit method."""
    return 0, 0


@hjit
def step_too_small(work):
    """`Functions.failure`'s default: a step fails only where its size fell below 10 ulp."""
    return STEP_TOO_SMALL


@dataclasses.dataclass(frozen=True, eq=False)
class Functions:
    """What `Method.build` returns: a method's ``hjit`` functions for states of n
    components and one right-hand side ``fun``, which is a compile-time constant of each
    of them, never an argument (a function value passed at run time would keep numba
    from caching the kernel).

    The state shape (``ops.shape``, see `..state`) decides what a state is: a tuple of n
    floats or a row of ``work``; every function that makes a state writes it to a row of
    ``work`` (`..layout.WorkRows`, `Method.rows_for`) named with ``ops.row``, which the
    tuple shape ignores.

    Every method gives the dense output and the counts:

    ``coefficients(t_old, y_old, f_old, y_new, f_new, h, p, work) -> coeffs``
        The interpolant over an accepted step (from ``work`` where the step kept its
        stages there).
    ``placeholder(y) -> coeffs``
        A value of the interpolant's type, for code paths that need none.
    ``evaluate(coeffs, t_old, h, y_old, t, dst) -> y``
        The dense output at ``t`` within the step (written to the row ``dst``).
    ``step_nfev``, ``dense_nfev``, ``error_exponent``
        Evaluations of ``f`` per attempted step (explicit: the stages), what scipy counts
        per interpolant built (DOP853's 3 extra stages, none for the others: ``nfev`` is
        scipy's count on every target, the stages an interpolant evaluates again without
        ``keep`` being the step's own, counted with the step), and the step-size rule's
        exponent (``-1 / (q + 1)``, q the error estimate's order; `Method.error_exponent`
        where the builder leaves it out).

    **Explicit** (`ExplicitMethod`): ``attempt``, and the shared step control
    (`..control.make_step`: scipy's ``RungeKutta._step_impl``) does the rest:

    ``attempt(t, y, f0, h, p, tol, start, work) -> (y_new, f_new, err)``
        One step of size ``h`` from ``(t, y)`` with ``f0 = f(t, y, p)``: the new state,
        the derivative there and the error norm (below 1: accept);
        ``tol[start:start+n]`` is rtol, the next n atol. With ``keep`` the
        stages are also written to rows of ``work`` (a row per stage and one for the
        step's end).

    **Implicit** (``state_shape = "array"``): its own ``step`` (Newton iterations or
    linear solves, its own step-size rule), usually with ``begin``, ``counts`` and
    ``failure`` over the memory it keeps in rows of ``work`` from step to step:

    ``step(t, y, fy, h_abs, t_bound, direction, max_step, conf, tol, p, work)``
        ``-> (ok, t_new, y_new, f_new, h, h_abs_next, nfev)``: steps attempted until
        one is accepted (``ok``) or the step size fell below 10 ulp of ``t`` (then only
        ``nfev`` is meaningful); ``conf[tol:tol+n]`` is rtol, the next n atol.
    ``begin(t, y, fy, h_abs, direction, conf, tol, p, work) -> nfev``
        Sets up the method's memory once per object, before the first step; default
        `no_begin`.
    ``counts(work) -> (njev, nlu)``
        scipy's counts, read at the end; default `no_counts` (0, 0).
    ``failure(work) -> status``
        Why a step failed (`..layout.STEP_TOO_SMALL` unless the method knows better);
        default `step_too_small`.
    ``interpolant_in_work``
        Whether the coefficients are ``work`` itself (BDF's history): ``placeholder``
        is then ``placeholder(y, work)``. Default False.
    ``derived``
        ``((role, function), ...)``: the functions made from ``fun`` and the user's
        ``jac=`` that the method calls (its Jacobian, `..sensitivities.method_jacobian`,
        role ``"jac"``; a Rosenbrock method's J and df/dt at once,
        `..sensitivities.jacobian_with_time`, role ``"jac_t"``). The host targets
        compile the loop once with stand-ins for them and each function alone
        (`hapsira_core.targets._join`). Default ().

    **Optional**, either kind:

    ``end_value(y_old, y_new, dst) -> y``, ``end_value_nfev``
        ``evaluate`` at the step's end without the coefficients, where the interpolant's
        form gives it exactly (DOP853); ``end_value_nfev``: what scipy counts for the
        interpolant it builds there. Default None (the interpolant is built), 0.
    """

    coefficients: object
    placeholder: object
    evaluate: object
    step_nfev: int
    dense_nfev: int
    error_exponent: float
    attempt: object = None
    step: object = None
    begin: object = no_begin
    counts: object = no_counts
    failure: object = step_too_small
    interpolant_in_work: bool = False
    derived: tuple = ()
    end_value: object = None
    end_value_nfev: int = 0

    def __post_init__(self):
        if (self.attempt is None) == (self.step is None):
            raise ValueError("a method's functions: expected either attempt (an explicit "
                             "pair: the shared step control) or step (its own), not "
                             f"{'both' if self.attempt is not None else 'neither'}")


class Method:
    """A method of `solve_ivp`: what the loop asks of it, every hook with its default.

    A method has a ``name`` (``solve_ivp(method=NAME)`` looks it up in
    `hapsira_core.ivp.methods.METHODS`; a `Method` itself may be given) and builds its
    `Functions` (`build`) per state size and right-hand side; everything else the loop
    needs is a class attribute or a method below, with the default an explicit pair
    takes. The subclasses: `ExplicitMethod` (a `ButcherTableau` and a builder),
    `.radau.Radau`, `.bdf.BDFMethod`, `.rosenbrock.Rosenbrock` (a family over its
    tableau).

    Explicit methods (``state_shape`` None) keep their states as the user's function
    has them and build ``attempt``; the step control, the first step, events and output
    times are the loop's, and follow scipy's ``RungeKutta`` so that accepted steps
    match scipy's. Implicit methods set ``state_shape = "array"`` (their matrices live
    in ``work``, and so do their states), build their own ``step`` and give their rows
    per n (`rows_for`); they receive the user's ``jac=`` in `build` (`..sensitivities`
    turns it, or the automatic derivative, into the Jacobian they evaluate).

    ``keep`` (`build`): whether ``attempt`` keeps its stages for the interpolant (host
    targets: an output time then costs what it costs in scipy) or the interpolant
    evaluates them again (GPU: fewer live registers and no memory traffic through the
    step, paid only on steps that hold an output time or an event). The array shape
    always keeps them (its states are in memory anyway).

    For ``dense_output=True`` (`..dense`) a method says how many rows of n numbers its
    coefficients take (`coefficient_states`; a tuple of states, or one 2-D block where
    `interpolant_block`) and gives ``evaluate`` alone (`interpolant`), which the step
    records' kernel calls.
    """

    #: the name ``solve_ivp(method=...)`` takes (scipy's spelling where scipy has it)
    name = None
    #: an explicit pair's `ButcherTableau` (the CPU lanes, `..lanes`, generate code from
    #: it); None for a method without one
    tableau = None
    #: the state shape the method needs: None (the form of the user's function
    #: decides: an explicit pair) or ``"array"`` (states in rows of ``work``: an implicit
    #: method, whose matrices live there too)
    state_shape = None
    #: whether the interpolant's coefficients are one 2-D block of rows (BDF: its
    #: differences and scalars) rather than a tuple of coefficient states
    interpolant_block = False
    #: the rows of ``work`` where they do not depend on n (`rows_for`)
    rows = None
    #: the order the starting step size assumes (`..control.make_initial_step`): the
    #: error estimate's
    error_estimator_order = None

    @property
    def error_exponent(self):
        """The step-size rule's exponent, ``-1 / (error_estimator_order + 1)``."""
        return -1.0 / (self.error_estimator_order + 1)

    def rows_for(self, n):
        """The rows of ``work`` at n components (`..layout.WorkRows`): `rows` for a
        method whose rows do not depend on n; an implicit method keeps n x n matrices
        there."""
        return self.rows

    def coefficient_states(self, n):
        """Rows of n numbers a step's interpolant takes besides ``y_old``: what
        ``dense_output=True`` records per step (`..dense`) and the loop copies from
        ``coefficients``; the last rows of `rows_for` unless the method says otherwise."""
        rows = self.rows_for(n)
        return rows.total - rows.coeffs

    def interpolant(self, ops, keep, fun):
        """``evaluate`` alone, for the records' evaluation kernel (`..dense`): an implicit
        method builds it without its Jacobian (which ``jac=`` may have given)."""
        return self.build(ops, keep, fun).evaluate

    def build(self, ops, keep, fun, jac=None):
        """The method's `Functions` for states of ``ops.n`` components and the
        right-hand side ``fun`` (built once per method and arguments); ``jac``: the
        user's ``jac=`` (an hjit function, `..sensitivities.method_jacobian`), given to
        the implicit methods only."""
        built = self.__dict__.setdefault("_built", {})
        key = (ops.n, ops.n_err, ops.shape, keep, fun, jac)
        if key not in built:
            made = self.functions(ops, keep, fun, jac)
            if not isinstance(made, Functions):
                made = Functions(**{"error_exponent": self.error_exponent, **made})
            built[key] = made
        return built[key]

    def functions(self, ops, keep, fun, jac):
        """Build the `Functions` (or a dict of their fields: ``error_exponent`` defaults
        to the method's) for `build`, which keeps them; what a subclass writes."""
        raise NotImplementedError(f"{type(self).__name__}: a Method builds its functions")

    def __repr__(self):
        return f"{type(self).__name__}({self.name!r})"


class ExplicitMethod(Method):
    """An explicit embedded Runge-Kutta pair: its `ButcherTableau` and a builder
    ``builder(tableau, ops, keep, fun, rows) -> dict`` of its `Functions`' fields (with
    ``attempt``); ``stage_rows``, ``sums``, ``coeffs``: its rows of ``work``
    (`..layout.WorkRows`: the stages and the step's end, the rows its generated sums
    write, its dense output's coefficient states)."""

    def __init__(self, tableau, builder, stage_rows, sums, coeffs):
        if not isinstance(tableau, ButcherTableau):
            raise TypeError(f"tableau: expected a ButcherTableau, got {type(tableau).__name__}")
        self.tableau = tableau
        self.name = tableau.name
        self.rows = WorkRows(stage_rows, sums, coeffs)
        self._builder = builder

    @property
    def error_estimator_order(self):
        return self.tableau.error_estimator_order

    def functions(self, ops, keep, fun, jac):
        if jac is not None:
            raise ValueError(f"jac: method={self.name!r} is explicit and takes no Jacobian")
        return self._builder(self.tableau, ops, keep, fun, self.rows)


def check(method):
    """Whether ``method`` states what the loop reads (a ValueError or TypeError naming
    ``method`` where it does not): a `Method` with a name, a known state shape, an error
    order, and rows of ``work`` (where they do not depend on n) or its own `rows_for`."""
    if not isinstance(method, Method):
        raise TypeError(f"method: expected a Method, got {type(method).__name__}")
    if not isinstance(method.name, str) or not method.name:
        raise ValueError(f"method: {type(method).__name__} has no name (a non-empty str)")
    if method.state_shape not in (None, "array"):
        raise ValueError(f"method: {method.name!r} has state_shape {method.state_shape!r}, "
                         "expected None or 'array'")
    order = method.error_estimator_order
    if not isinstance(order, (int, float)) or not order > 0 or not math.isfinite(order):
        raise ValueError(f"method: {method.name!r} has error_estimator_order {order!r}, "
                         "expected a positive number")
    if method.rows is None and type(method).rows_for is Method.rows_for:
        raise ValueError(f"method: {method.name!r} gives neither rows nor rows_for(n)")
    if type(method).functions is Method.functions:
        raise ValueError(f"method: {method.name!r} does not build its functions "
                         "(Method.functions)")
    return method
