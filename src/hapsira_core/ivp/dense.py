"""Dense output after the run: scipy's ``OdeSolution`` over the recorded steps.

With ``dense_output=True`` the solve loop writes, per object and accepted step,
the step's breakpoints and ``h`` (``steps``) and its interpolant (``dense``:
``y_old`` and the method's coefficient states, `.loop.make_solve`). Evaluating
them is a kernel of the active target built from the method's own ``evaluate``
(the function the loop uses for output times and events: one source of each
interpolant), so ``res.sol(t)`` runs where the solve ran.

How many steps to record is not known before the run. The numpy front first
runs the kernel without records (it counts each object's accepted steps), then
allocates ``max(nsteps)`` steps for every object, checks that size against the
memory limit (`hapsira_core.memory.check`: the error names the number) and runs
again: twice the time of one run, but memory for the steps actually taken. A
bound from ``max_steps`` (100,000 by default) would need a hundred times more
memory than typical runs use, and a million objects' steps rarely fit anyway.
A lower bound is checked before the counting pass, though: with ``max_step``
every object reaching ``tf`` takes at least ``|tf - t0| / max_step`` steps
(`hapsira_core.ivp.Problem.fewest_steps`; not with terminal events), so records
that cannot fit are refused before any object is integrated.
Both runs are the same compiled code on the same data, so they take the same
steps.
"""

import math

import numpy as np

from ..jit import Arg, ObjectKernel, hjit
from ..kernels.cache import factory
from . import methods
from .layout import INFO, SUCCESS
from .state import fun_form, returns_a_view
from .state import ops as state_ops

__all__ = ["make_sol", "evaluate", "DenseSolution", "BatchSolution"]

STATUS, NSTEPS = INFO.status, INFO.nsteps


def coefficient_states(method_name, n):
    """How many coefficient states (rows of n numbers) the method's interpolant has
    besides ``y_old`` (RK23 3, RK45 4, DOP853 7, Radau 3, Rodas5P 4, BDF 9: its
    differences and scalars, `.methods.base.Method.coefficient_states`)."""
    return methods.get(method_name).coefficient_states(n)


@factory
def make_sol(method_name, n, keep, f):
    """``sol(t, steps, dense, info, out)``: one object's dense output at the times
    ``t`` into ``out`` ``(M, n)``, choosing the step as scipy's ``OdeSolution``
    does (a time at a breakpoint takes the earlier step; outside the steps the
    first or last step's interpolant extrapolates). No step: a successful object
    (``t0 == tf``) is constant, as scipy's; a failed one is NaN."""
    method = methods.get(method_name)
    # an implicit method keeps its states in rows whatever the form of f, as its loop did
    shape = method.state_shape or fun_form(f) or "tuple"
    ops = state_ops(n, shape, getattr(f, "hapsira_error_components", None))
    evaluate_step = method.interpolant(ops, keep, f)
    load, store_row, fill_row = ops.load, ops.store_row, ops.fill_row
    k = coefficient_states(method_name, n)
    # the coefficient states as the method's evaluate takes them: a tuple of k states
    # (in the array shape each is its own row of ``dense``, loaded in place), or the
    # block of rows itself (BDF)
    if method.interpolant_block:
        @hjit(**returns_a_view())
        def coefficients(d):
            return d[1:]
    elif k == 3:
        @hjit
        def coefficients(d):
            return (load(d[1], 0, d[1]), load(d[2], 0, d[2]), load(d[3], 0, d[3]))
    elif k == 4:
        @hjit
        def coefficients(d):
            return (load(d[1], 0, d[1]), load(d[2], 0, d[2]), load(d[3], 0, d[3]),
                    load(d[4], 0, d[4]))
    elif k == 7:
        @hjit
        def coefficients(d):
            return (load(d[1], 0, d[1]), load(d[2], 0, d[2]), load(d[3], 0, d[3]),
                    load(d[4], 0, d[4]), load(d[5], 0, d[5]), load(d[6], 0, d[6]),
                    load(d[7], 0, d[7]))
    else:  # pragma: no cover - a new method with another interpolant size
        raise NotImplementedError(f"dense output with {k} coefficient states")

    @hjit
    def segment(ts, n_seg, direction, t):
        """scipy's choice: how many breakpoints after the first lie before ``t`` (in the
        direction of integration), at most ``n_seg - 1``; a binary search."""
        low = 0  # breakpoints 1..low lie before t
        high = n_seg - 1
        while low < high:
            middle = (low + high + 1) // 2
            if direction * (t - ts[middle, 0]) > 0.0:
                low = middle
            else:
                high = middle - 1
        return low

    @hjit
    def sol(t, steps, dense, info, out):
        n_seg = info[NSTEPS]
        for j in range(t.shape[0]):
            if n_seg == 0:
                if info[STATUS] == SUCCESS:
                    store_row(out, j, load(dense[0, 0], 0, dense[0, 0]))
                else:
                    fill_row(out, j, math.nan)
                continue
            direction = 1.0 if steps[n_seg, 0] >= steps[0, 0] else -1.0
            s = segment(steps, n_seg, direction, t[j])
            d = dense[s]
            y = evaluate_step(coefficients(d), steps[s, 0], steps[s, 1],
                              load(d[0], 0, d[0]), t[j], out[j])
            store_row(out, j, y)

    return sol


#: Built evaluation kernels, by (method, n, fun).
KERNELS = {}


def kernel(method, n, fun):
    """The compiled `make_sol` of the active target (built once per process)."""
    key = (method, n, fun)
    if key not in KERNELS:
        f64, i64 = np.float64, np.int64
        # the method's functions as the host builds them (keep): only evaluate is called
        KERNELS[key] = ObjectKernel(make_sol(method, n, True, fun), (
            Arg("t", f64, ("m",), per_object=False),
            Arg("steps", f64, ("s1", "two")),
            Arg("dense", f64, ("sd", "k1", "n")),
            Arg("info", i64, ("ninfo",)),
            Arg("out", f64, ("m", "n"), output=True),
        ))
    return KERNELS[key]


def evaluate(records, t):
    """All objects' dense output at the times ``t`` (``(M,)``): ``(N, n, M)``."""
    method, n, fun, steps, dense, info = records
    t = np.ascontiguousarray(t, dtype=np.float64)
    out = np.empty((steps.shape[0], t.shape[0], n))
    if steps.shape[0]:
        kernel(method, n, fun)(t, steps, dense, info, out)
    return out.transpose(0, 2, 1)


def times(t):
    """``t`` as a 1-D float array and whether it was a scalar (scipy's two forms)."""
    values = np.asarray(t, dtype=np.float64)
    if values.ndim > 1:
        raise ValueError(f"t: expected a number or a 1-D array of times, got shape "
                         f"{values.shape}")
    return np.atleast_1d(values), values.ndim == 0


class DenseSolution:
    """One object's dense output, as scipy's ``OdeSolution``: ``sol(t)`` is ``(n,)``
    for a number ``t`` and ``(n, len(t))`` for an array; ``ts`` the breakpoints
    (t0, each accepted step's end; a terminal event's time last), ``n_segments``,
    ``t_min``, ``t_max``. Outside ``[t_min, t_max]`` the first or last step's
    interpolant extrapolates, as scipy's does."""

    def __init__(self, records, i):
        method, n, fun, steps, dense, info = records
        self._records = (method, n, fun, steps[i:i + 1], dense[i:i + 1], info[i:i + 1])
        self.n_segments = int(info[i, NSTEPS])
        self.ts = steps[i, :self.n_segments + 1, 0]
        if self.n_segments == 0:  # scipy's zero segment: t0 == tf
            self.ts = self.ts[[0, 0]]
        self.ascending = bool(self.ts[-1] >= self.ts[0])
        self.t_min, self.t_max = (self.ts[0], self.ts[-1])
        if not self.ascending:
            self.t_min, self.t_max = self.t_max, self.t_min

    def __call__(self, t):
        values, scalar = times(t)
        y = evaluate(self._records, values)[0]
        return y[:, 0] if scalar else y

    def __repr__(self):
        return (f"DenseSolution(n_segments={self.n_segments}, t_min={self.t_min!r}, "
                f"t_max={self.t_max!r})")


class BatchSolution:
    """All objects' dense output: ``sol(t)`` is ``(N, n, len(t))`` for an array ``t``
    and ``(N, n)`` for a number (without the N axis for one object, as scipy's);
    ``sol.object(i)`` is object i's `DenseSolution` (``res[i].sol``)."""

    def __init__(self, records, single=False):
        self._records = records
        self.single = single

    def object(self, i):
        return DenseSolution(self._records, i)

    def __call__(self, t):
        values, scalar = times(t)
        y = evaluate(self._records, values)
        if scalar:
            y = y[..., 0]
        return y[0] if self.single else y

    def __repr__(self):
        return f"BatchSolution(objects={self._records[3].shape[0]})"
