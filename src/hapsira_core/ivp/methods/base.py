"""The contract a method fulfils, in the spirit of ``scipy.integrate._ivp.base``.

A method is an explicit embedded Runge-Kutta pair described by its
`ButcherTableau`. For a state dimension n
and a right-hand side ``f(t, y, p)`` it builds (`Method.build()`) these
``hjit`` functions, which the method-neutral step-size control
(`..control`) and solve loop (`..loop`) call. ``f`` is a
compile-time constant of each of them, never an argument: a function value
passed at run time would keep numba from caching the kernel.

The state shape (``ops.shape``, see `..state`) decides what a state is: a
tuple of n floats or a row of ``work``; every function that makes a state
writes it to a row of ``work`` (`..layout.WorkRows`, ``Method.rows``) named
with ``ops.row``, which the tuple shape ignores. ``fun`` is the user's
function as written (``fun(t, y, p)`` or ``fun(t, y, p, dydt)``).

``attempt(t, y, f0, h, p, tol, start, work) -> (y_new, f_new, err)``
    One step of size ``h`` from ``(t, y)`` with ``f0 = f(t, y, p)``: the new
    state, the derivative there and the error norm (below 1: accept).
    ``tol[start:start+n]`` is rtol, the next n atol. With ``keep``, the
    stages are also written to the rows of ``work``.
``coefficients(t_old, y_old, f_old, y_new, f_new, h, p, work) -> coeffs``
    The interpolant over an accepted step (from ``work`` with ``keep``).
``placeholder(y) -> coeffs``
    A value of the interpolant's type, for code paths that need none.
``evaluate(coeffs, t_old, h, y_old, t, dst) -> y``
    The dense output at ``t`` within the step (written to the row ``dst``).
``end_value(y_old, y_new, dst) -> y`` (optional, with ``end_value_nfev``)
    ``evaluate`` at the step's end without the coefficients, where the interpolant's
    form gives it exactly (DOP853); ``end_value_nfev``: what scipy counts for the
    interpolant it builds there.

and the numbers ``step_nfev`` (evaluations of ``f`` per attempted step),
``dense_nfev`` (what scipy counts per interpolant built: DOP853's 3 extra stages,
none for the others) and ``error_exponent``. ``nfev`` is scipy's count on every
target: the stages an interpolant evaluates again without ``keep`` (below) are the
step's own, already counted with the step; counting them again made an object's
``nfev`` depend on the target. ``work`` has
a row per stage and one for the step's end (``n_stages + 1``).

For ``dense_output=True`` (`..dense`) a method also says how many rows of n numbers
its coefficients take (`Method.coefficient_states`; a tuple of states, or one 2-D
block where `Method.interpolant_block`) and gives ``evaluate`` alone
(`Method.interpolant`), which the step records' kernel calls.

``keep``: whether ``attempt`` keeps its stages for the interpolant (host
targets: an output time then costs what it costs in scipy) or the
interpolant evaluates them again (GPU: fewer live registers and no memory
traffic through the step, paid only on steps that hold an output time or an
event). The array shape always keeps them (its states are in memory anyway).
"""

import types

from ..layout import WorkRows


class Method:
    """A method: its tableau and a builder of its ``hjit`` functions per n."""

    def __init__(self, tableau, builder, stage_rows, sums, coeffs):
        self.tableau = tableau
        #: the rows of ``work`` the method's functions use (``sums``: rows its
        #: generated sums write; ``coeffs``: its dense output's coefficient states)
        self.rows = WorkRows(stage_rows, sums, coeffs)
        self.name = tableau.name
        self._builder = builder
        self._built = {}

    #: the state shape the method needs (None: the form of the user's function decides)
    state_shape = None

    def rows_for(self, n):
        """The rows of ``work`` at n components (`rows` for a method whose rows do not
        depend on n; an implicit method keeps n x n matrices there)."""
        return self.rows

    #: whether the interpolant's coefficients are one 2-D block of rows (BDF: its
    #: differences and scalars) rather than a tuple of coefficient states
    interpolant_block = False

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

    @property
    def error_estimator_order(self):
        """The order the starting step size assumes (`..control.make_initial_step`)."""
        return self.tableau.error_estimator_order

    @property
    def error_exponent(self):
        return -1.0 / (self.tableau.error_estimator_order + 1)

    def build(self, ops, keep, fun):
        """The method's functions for states of ``ops.n`` components and the
        right-hand side ``fun`` (built once)."""
        key = (ops.n, ops.n_err, ops.shape, keep, fun)
        if key not in self._built:
            parts = self._builder(self.tableau, ops, keep, fun, self.rows)
            parts.setdefault("error_exponent", self.error_exponent)
            self._built[key] = types.SimpleNamespace(**parts)
        return self._built[key]

    def __repr__(self):
        return f"Method({self.name!r})"
