"""The per-object integration loop: ``solve_ivp`` for one object, any method.

Integrates from ``t0`` to ``tf`` (forward or backward), writes the state at
each output time from the dense output, detects and locates events after
every accepted step, and stops at a terminal event, on failure, or after
``max_steps`` accepted steps (so that no GPU thread loops forever).
"""

import math

from ..kernels.cache import factory
from ..jit import hjit
from . import methods
from .control import make_initial_step, make_step
from .events import is_triggered, make_roots
from .layout import (BAD_INITIAL_STATE, ICONF, INFO, MAX_STEPS, RECORD_DENSE, RECORD_STATES,
                     SCRATCH, SUCCESS, TERMINATED, config_row)
from .state import fun_form, rhs
from .state import ops as state_ops


@hjit
def interpolant_needed(t_out, t_new, direction, end_free):
    """Whether the next output time ``t_out`` of an accepted step ending at ``t_new``
    needs the step's interpolant: it lies inside the step, or at its end where no end
    value serves (``end_free``: scipy's end states, or the method's `end_value`). The
    per-object loop and the lanes (`.lanes`) both decide by it."""
    return direction * (t_out - t_new) < 0.0 or (t_out == t_new and not end_free)


@hjit
def _no_end_value(y_old, y_new, dst):
    return y_new  # never called: a method without ``end_value`` builds its interpolant


def _placeholder_with_work(parts):
    """``placeholder(y, work)``: a method that keeps its interpolant in ``work`` (an
    implicit method's history, `.methods.base.Functions.interpolant_in_work`) hands
    ``work`` itself out as its coefficients, so its placeholder needs it; the others
    ignore it."""
    if parts.interpolant_in_work:
        return parts.placeholder
    own = parts.placeholder

    @hjit
    def placeholder(y, work):
        return own(y)
    return placeholder


def make_records(ops, n_coeffs):
    """``(record_reset, record_step)``: the step records of `make_solve` (``records``),
    one source for the per-object loop and the lanes (`.lanes`); ``n_coeffs``: the
    coefficient states an interpolant keeps after ``y_old``."""
    store_row, fill_row = ops.store_row, ops.fill_row

    @hjit
    def record_reset(steps, dense, mode):
        for s in range(steps.shape[0]):
            steps[s, 0] = math.nan
            steps[s, 1] = math.nan
        if mode & RECORD_DENSE:
            for s in range(dense.shape[0]):
                for r in range(dense.shape[1]):
                    fill_row(dense[s], r, math.nan)

    @hjit
    def record_step(steps, dense, mode, s, t_stop, h, y, coeffs, out_y, state):
        """Step s (0-based) ended at ``t_stop`` with ``state``: write what ``mode`` asks."""
        if s + 1 < steps.shape[0]:
            steps[s + 1, 0] = t_stop
            steps[s, 1] = h
            if mode & RECORD_STATES:
                store_row(out_y, s + 1, state)
        if mode & RECORD_DENSE and s < dense.shape[0]:
            store_row(dense[s], 0, y)
            for r in range(n_coeffs):
                store_row(dense[s], r + 1, coeffs[r])

    return record_reset, record_step


def end_values(parts):
    """``(by_difference, end_value, end_value_nfev)``: whether a method gives an output
    time at a step's end from its `end_value` (the same bits as its interpolant there,
    which is then not built: DOP853), that function (a placeholder otherwise) and what
    scipy counts for it (scipy builds the interpolant there)."""
    by_difference = parts.end_value is not None
    return (by_difference, parts.end_value if by_difference else _no_end_value,
            parts.end_value_nfev)


def make_store_outputs(ops, parts):
    """``store_outputs(out, t_eval, j, t_stop, t, t_new, h, y, y_new, coeffs, need_dense,
    end_states, direction, eval_row) -> (j, nfev)``: the states at the output times
    ``t_eval[j:]`` up to ``t_stop`` of an accepted step from ``t`` to ``t_new`` (``t_stop``
    is ``t_new`` or a terminal event's root), written to ``out``; returns the next output
    time's index and the evaluations scipy counts for them. At the step's end the step's
    own end state (``end_states``, scipy's default output) or the method's `end_value`
    where the interpolant was not built; elsewhere the interpolant ``coeffs``. One source
    for the per-object loop and the lanes (`.lanes`), inlined where it is called."""
    store_row, evaluate = ops.store_row, parts.evaluate
    by_difference, end_value, end_value_nfev = end_values(parts)

    @hjit(inline="always")
    def store_outputs(out, t_eval, j, t_stop, t, t_new, h, y, y_new, coeffs, need_dense,
                      end_states, direction, eval_row):
        at_end = False  # an output time at the step's end from `end_value`
        while j < t_eval.shape[0] and direction * (t_eval[j] - t_stop) <= 0.0:
            if end_states and t_eval[j] == t_new:
                store_row(out, j, y_new)
            elif by_difference and not need_dense and t_eval[j] == t_new:
                store_row(out, j, end_value(y, y_new, eval_row))
                at_end = True
            else:
                store_row(out, j, evaluate(coeffs, t, h, y, t_eval[j], eval_row))
            j += 1
        # scipy's count: it builds the interpolant there
        return j, (end_value_nfev if at_end else 0)

    return store_outputs


@factory
def make_solve(method_name, n, keep, f, g, event_states=True, jac=None, records=False):
    """The loop for ``method_name`` on n-component states (built once).

    ``solve(y0, t_eval, p, conf, iconf, ev_direction, ev_max, ev_consts,
    out_y, info, t_events, y_events, n_events, scratch, work)``:

    ``f(t, y, p)`` (states as tuples) or ``f(t, y, p, dydt)`` (states as rows of
    ``work``: `.state`, chosen by the form of ``f``): the right-hand side;
    ``g(i, t, y, p, c)``: the value of
    event ``i`` (``c``: its row of ``ev_consts``); both are compile-time
    constants of the loop (see `hapsira_core.kernels.cache`). Without ``event_states``
    the loop never writes ``y_events`` (and carries no code for it). ``t_eval``: output times,
    sorted in the direction of integration. ``ev_max[e]``: the occurrence of
    event ``e`` that terminates (0: never). Writes ``out_y[j]`` (the state at
    ``t_eval[j]``, NaN where not reached), ``info`` (status, nfev, nsteps),
    ``t_events[e]``/``y_events[e]`` (first occurrences of ``e``) and
    ``n_events[e]`` (how many occurred). ``scratch`` and ``work`` are working
    memory (``work``: the step's stages where the dense output reuses them).
    ``jac``: the user's ``jac=`` (an hjit function, `..sensitivities.method_jacobian`),
    handed to the method's builder where given (the explicit methods never get it).

    With ``records`` the loop also takes ``steps`` ``(S + 1, 2)`` and ``dense``
    ``(S, k + 1, n)`` (``k``: the interpolant's coefficient states) and, as
    ``iconf[ICONF.records]`` asks (`layout.RECORD_STATES`, `layout.RECORD_DENSE`),
    writes per accepted step what scipy's ``t_eval=None`` and ``dense_output=True``
    keep: ``steps[s, 0]`` the breakpoints of scipy's ``OdeSolution`` (t0, each step's
    end, a terminal event's root last), ``steps[s, 1]`` step s's ``h``; the state at
    each breakpoint in ``out_y[s]``; ``dense[s]`` step s's ``y_old`` and coefficients.
    Steps past ``S`` are counted, not written (a counting pass gives S: `.dense`).
    Unwritten entries are NaN.
    """
    method = methods.get(method_name)
    # a method that keeps matrices in ``work`` (the implicit ones) asks for array states
    shape = method.state_shape or fun_form(f) or "tuple"
    # an augmented right-hand side (stm=True) says how many components its norm takes
    ops = state_ops(n, shape, getattr(f, "hapsira_error_components", None))
    parts = method.build(ops, keep, f, jac)
    # an implicit method's matrices take n rows of work each: its rows depend on n
    rows = method.rows_for(n)
    fun = rhs(f, shape, n)  # fun(t, y, p, dst) -> state, in either shape
    # A method may bring its own step (an implicit method: Newton iterations, its own
    # step-size rule) and memory that lives from step to step in ``work`` (``begin``
    # fills it once per object; ``counts`` reads scipy's njev and nlu from it;
    # ``failure`` reads why a step failed, a status: `layout.STEP_TOO_SMALL` unless
    # it knows better); the explicit pairs share `make_step` and take the defaults
    # (`Functions`, the contract: `.methods.base`).
    step = make_step(parts) if parts.step is None else parts.step
    begin, counts, failure = parts.begin, parts.counts, parts.failure
    initial_step = make_initial_step(ops, rows, method.error_estimator_order, fun)
    roots = make_roots(parts.evaluate, g, ops.store_row, event_states)
    coefficients, evaluate = parts.coefficients, parts.evaluate
    placeholder = _placeholder_with_work(parts)
    dense_nfev = parts.dense_nfev
    by_difference = end_values(parts)[0]
    store_outputs = make_store_outputs(ops, parts)
    load, store_row, fill_row, is_finite = ops.load, ops.store_row, ops.fill_row, ops.is_finite
    row, copy = ops.row, ops.copy
    Y, F, EVAL = rows.y, rows.f, rows.eval
    conf_row = config_row(n)
    T0, TF, TOL = conf_row.t0, conf_row.tf, conf_row.rtol
    MAX_STEP, FIRST_STEP = conf_row.max_step, conf_row.first_step
    MAX, N_EV, Y_RECORDS = ICONF.max_steps, ICONF.n_events, ICONF.y_event_records
    END_STATES = ICONF.end_states
    STATUS, NFEV, NSTEPS, NJEV, NLU = INFO.status, INFO.nfev, INFO.nsteps, INFO.njev, INFO.nlu
    G = SCRATCH.g
    RECORDS = ICONF.records
    n_coeffs = method.coefficient_states(n)  # what a step's record keeps after y_old

    record_reset, record_step = make_records(ops, n_coeffs)

    @hjit
    def reset(out_y, t_events, n_events):
        for j in range(out_y.shape[0]):
            fill_row(out_y, j, math.nan)
        for e in range(t_events.shape[0]):
            n_events[e] = 0
            for c in range(t_events.shape[1]):
                t_events[e, c] = math.nan


    @hjit
    def solve(y0, t_eval, p, conf, iconf, ev_direction, ev_max, ev_consts,
              out_y, info, t_events, y_events, n_events, scratch, work, steps, dense):
        reset(out_y, t_events, n_events)
        mode = iconf[RECORDS] if records else 0
        max_steps = iconf[MAX]
        n_ev = iconf[N_EV]
        y_records = iconf[Y_RECORDS]
        n_out = t_eval.shape[0]
        if event_states:
            for e in range(n_ev):
                for c in range(y_records):
                    fill_row(y_events[e], c, math.nan)

        t = conf[T0]
        t_end = conf[TF]
        direction = 1.0 if t_end >= t else -1.0
        y = load(y0, 0, row(work, Y))
        info[NFEV] = 0
        info[NSTEPS] = 0
        info[NJEV] = 0
        info[NLU] = 0
        if records:
            record_reset(steps, dense, mode)
            steps[0, 0] = t
            if mode & RECORD_STATES:
                store_row(out_y, 0, y)
            if mode & RECORD_DENSE:  # scipy's constant interpolant where t0 == tf
                store_row(dense[0], 0, y)
        if not is_finite(y):
            info[STATUS] = BAD_INITIAL_STATE
            return
        fy = fun(t, y, p, row(work, F))
        nfev = 1
        if not is_finite(fy):
            info[STATUS] = BAD_INITIAL_STATE
            info[NFEV] = nfev
            return

        j = 0
        while j < n_out and t_eval[j] == t:
            store_row(out_y, j, y)
            j += 1
        end_states = iconf[END_STATES] != 0
        # scipy hands output times equal to t0 to the first step's interpolant (which
        # gives the initial state exactly there, as stored above): its nfev counts that
        # interpolant, so ours builds it too.
        dense_first = j > 0 and not end_states
        if t == t_end:
            info[STATUS] = SUCCESS
            info[NFEV] = nfev
            return

        for e in range(n_ev):
            scratch[e, G] = g(e, t, y, p, ev_consts[e])

        max_step = conf[MAX_STEP]
        h_abs = conf[FIRST_STEP]
        if not h_abs > 0.0:  # scipy's choice, at one more evaluation of f
            h_abs = initial_step(t, y, fy, t_end, direction, max_step, conf, TOL, p, work)
            nfev += 1
        nfev += begin(t, y, fy, h_abs, direction, conf, TOL, p, work)
        nsteps = 0
        status = SUCCESS
        while True:
            if nsteps >= max_steps:
                status = MAX_STEPS
                break
            ok, t_new, y_new, f_new, h, h_abs, step_nfev = step(
                t, y, fy, h_abs, t_end, direction, max_step, conf, TOL, p, work)
            nfev += step_nfev
            if not ok:
                status = failure(work)
                break
            nsteps += 1

            # Is an interpolant needed: an output time or an event in this step?
            # Decided before anything is stored, so that the compiler may reuse
            # the step's stages where the interpolant evaluates them again
            # (on the GPU: 2153 instead of 2906 FP64 instructions in the kernel).
            # With ``end_states`` an output time at the step's end takes the step's end
            # state (scipy's default output), and with ``by_difference`` the method's
            # `end_value`: no interpolant for it either way.
            need_dense = dense_first or (j < n_out and interpolant_needed(
                t_eval[j], t_new, direction, end_states or by_difference))
            need_dense = need_dense or mode & RECORD_DENSE != 0  # scipy: every step
            dense_first = False
            for e in range(n_ev):
                if is_triggered(scratch[e, G], g(e, t_new, y_new, p, ev_consts[e]),
                                ev_direction[e]):
                    need_dense = True
            coeffs = placeholder(y, work)
            if need_dense:
                coeffs = coefficients(t, y, fy, y_new, f_new, h, p, work)
                nfev += dense_nfev

            t_stop, e_stop = roots(t, t_new, y, y_new, h, coeffs, p, ev_direction, ev_max,
                                   ev_consts, n_ev, y_records, direction, t_events,
                                   y_events, n_events, scratch, row(work, EVAL))

            j, out_nfev = store_outputs(out_y, t_eval, j, t_stop, t, t_new, h, y, y_new, coeffs,
                                        need_dense, end_states, direction, row(work, EVAL))
            nfev += out_nfev
            if records:
                state = y_new
                if t_stop != t_new:  # scipy's t_eval=None: the terminal root's state
                    state = evaluate(coeffs, t, h, y, t_stop, row(work, EVAL))
                record_step(steps, dense, mode, nsteps - 1, t_stop, h, y, coeffs, out_y, state)

            if e_stop < n_ev:
                status = TERMINATED
                break
            t = t_new
            # the array shape's next attempt writes y_new's and f_new's rows again
            y = copy(y_new, row(work, Y))
            fy = copy(f_new, row(work, F))
            if direction * (t - t_end) >= 0.0:
                break
        info[STATUS] = status
        info[NFEV] = nfev
        info[NSTEPS] = nsteps
        njev, nlu = counts(work)
        info[NJEV] = njev
        info[NLU] = nlu

    return solve
