"""The per-object integration loop: ``solve_ivp(method="DOP853")`` for one object.

Integrates from ``t = 0`` to ``tofs[-1]`` (forward or backward), writes the
state at each ``tofs[j]`` from the dense output, detects and locates events
after every accepted step, and stops at a terminal event, on failure, or
after ``max_steps`` accepted steps (so that no GPU thread loops forever).
"""

import math

from ..jit import hjit
from . import dense
from .events import is_triggered, locate
from .rk import initial_step, step
from .state import event_value, is_finite, rhs

#: Status codes written to ``info[0]``.
SUCCESS = 0  # reached the last output time
TERMINATED = 1  # stopped by a terminal event
STEP_TOO_SMALL = -1  # step size fell below 10 ulp of t: a singularity
MAX_STEPS = -2  # max_steps accepted steps were not enough
BAD_INITIAL_STATE = -3  # initial state or its derivative not finite (NaN, r = 0)

#: Layout of the float configuration row ``fconf``.
FCONF_K = 0
FCONF_RTOL = 1  # 6 values
FCONF_ATOL = 7  # 6 values
FCONF_SIZE = 13
#: Layout of the integer configuration row ``iconf``.
ICONF_MAX_STEPS = 0
ICONF_N_EVENTS = 1
ICONF_SIZE = 2
#: ``scratch[e, :]`` per event: value of g at the last step end, root this step.
SCRATCH_G = 0
SCRATCH_ROOT = 1


@hjit
def write_state(out_rr, out_vv, j, y):
    out_rr[j, 0] = y[0]
    out_rr[j, 1] = y[1]
    out_rr[j, 2] = y[2]
    out_vv[j, 0] = y[3]
    out_vv[j, 1] = y[4]
    out_vv[j, 2] = y[5]


@hjit
def reset_outputs(out_rr, out_vv, t_events, n_events):
    for j in range(out_rr.shape[0]):
        for i in range(3):
            out_rr[j, i] = math.nan
            out_vv[j, i] = math.nan
    for e in range(t_events.shape[0]):
        n_events[e] = 0
        for c in range(t_events.shape[1]):
            t_events[e, c] = math.nan


@hjit
def row6(a, start):
    return (a[start], a[start + 1], a[start + 2],
            a[start + 3], a[start + 4], a[start + 5])


@hjit
def solve(f, g, r0, v0, tofs, p, fconf, iconf, ev_direction, ev_max, ev_consts,
          out_rr, out_vv, info, t_events, n_events, scratch):
    """Integrate one object; see the module docstring.

    ``f(t, rr, vv, k, p)``: the right-hand side; ``g(i, t, rr, vv, k, p, c)``:
    the value of event ``i``. ``tofs``: output times, monotonic, all of one
    sign. ``ev_max[e]``: the occurrence of event ``e`` that terminates
    (0: never). Writes ``info = (status, nfev, nsteps)``; output rows not
    reached stay NaN; ``t_events[e]`` records the first occurrences of ``e``
    and ``n_events[e]`` counts all of them.
    """
    reset_outputs(out_rr, out_vv, t_events, n_events)
    k = fconf[FCONF_K]
    rtol = row6(fconf, FCONF_RTOL)
    atol = row6(fconf, FCONF_ATOL)
    max_steps = iconf[ICONF_MAX_STEPS]
    n_ev = iconf[ICONF_N_EVENTS]
    n_out = tofs.shape[0]
    records = t_events.shape[1]

    t = 0.0
    t_end = tofs[n_out - 1]
    direction = 1.0 if t_end >= 0.0 else -1.0
    y = (r0[0], r0[1], r0[2], v0[0], v0[1], v0[2])
    info[1] = 0
    info[2] = 0
    if not is_finite(y):
        info[0] = BAD_INITIAL_STATE
        return
    fy = rhs(f, t, y, k, p)
    nfev = 1
    if not is_finite(fy):
        info[0] = BAD_INITIAL_STATE
        info[1] = nfev
        return

    j = 0
    while j < n_out and tofs[j] == t:
        write_state(out_rr, out_vv, j, y)
        j += 1
    if j == n_out:
        info[0] = SUCCESS
        info[1] = nfev
        return

    for e in range(n_ev):
        scratch[e, SCRATCH_G] = event_value(g, e, t, y, k, p, ev_consts[e])

    h_abs = initial_step(f, t, y, fy, t_end, direction, rtol, atol, k, p)
    nfev += 1
    nsteps = 0
    status = SUCCESS
    while True:
        if nsteps >= max_steps:
            status = MAX_STEPS
            break
        ok, t_new, y_new, f_new, h, h_abs, step_nfev = step(
            f, t, y, fy, h_abs, t_end, direction, fconf[FCONF_RTOL:FCONF_SIZE], k, p)
        nfev += step_nfev
        if not ok:
            status = STEP_TOO_SMALL
            break
        nsteps += 1

        # Which events changed sign, and is an interpolant needed at all?
        need_dense = j < n_out and direction * (tofs[j] - t_new) <= 0.0
        for e in range(n_ev):
            g_old = scratch[e, SCRATCH_G]
            g_new = event_value(g, e, t_new, y_new, k, p, ev_consts[e])
            scratch[e, SCRATCH_G] = g_new
            if is_triggered(g_old, g_new, ev_direction[e]):
                scratch[e, SCRATCH_ROOT] = t_new  # located below
                need_dense = True
            else:
                scratch[e, SCRATCH_ROOT] = math.nan

        # Placeholder of the interpolant's type; built only when needed.
        coeffs = (y, y, y, y, y, y, y)
        if need_dense:
            coeffs = dense.coefficients(f, t, y, fy, y_new, f_new, h, k, p)
            nfev += 14

        # Locate the roots; the earliest terminal one (in time order) stops the object.
        t_stop = t_new
        terminate = False
        for e in range(n_ev):
            if scratch[e, SCRATCH_ROOT] == scratch[e, SCRATCH_ROOT]:
                root = locate(g, e, t, t_new, coeffs, t, h, y, k, p, ev_consts[e])
                scratch[e, SCRATCH_ROOT] = root
                if ev_max[e] > 0 and n_events[e] + 1 >= ev_max[e]:
                    if not terminate or direction * (root - t_stop) < 0.0:
                        t_stop = root
                    terminate = True
        for e in range(n_ev):
            root = scratch[e, SCRATCH_ROOT]
            if root == root and direction * (root - t_stop) <= 0.0:
                if n_events[e] < records:
                    t_events[e, n_events[e]] = root
                n_events[e] += 1

        while j < n_out and direction * (tofs[j] - t_stop) <= 0.0:
            write_state(out_rr, out_vv, j, dense.evaluate(coeffs, t, h, y, tofs[j]))
            j += 1

        if terminate:
            status = TERMINATED
            break
        t = t_new
        y = y_new
        fy = f_new
        if direction * (t - t_end) >= 0.0:
            break
    info[0] = status
    info[1] = nfev
    info[2] = nsteps
