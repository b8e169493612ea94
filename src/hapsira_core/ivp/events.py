"""Event detection and location, with the semantics of ``solve_ivp``.

An event is a zero of ``g(t, y)``. After each accepted step the solver checks
each event for a sign change (`is_triggered()`, honouring the direction
filter), then locates the zero on the step's dense output with Brent's method
(`make_locate()`) to scipy's tolerances (``xtol = rtol = 4 * eps``).
"""

import math

from ..jit import hjit
from .layout import SCRATCH

EPS = 2.220446049250313e-16
ROOT_XTOL = 4.0 * EPS
ROOT_RTOL = 4.0 * EPS
ROOT_MAXITER = 100


@hjit
def is_triggered(g_old, g_new, direction):
    """Did ``g`` cross zero from ``g_old`` to ``g_new`` in ``direction``?

    ``direction > 0``: only upward crossings, ``< 0`` only downward, ``0``
    both. Touching zero counts, as in ``solve_ivp``.
    """
    up = g_old <= 0.0 and g_new >= 0.0
    down = g_old >= 0.0 and g_new <= 0.0
    if direction > 0.0:
        return up
    if direction < 0.0:
        return down
    return up or down


def make_locate(evaluate, g):
    """``locate(index, t_a, t_b, coeffs, t_old, h, y_old, p, c, dst) -> t``: the zero
    of event ``index`` of ``g(i, t, y, p, c)`` between ``t_a`` and ``t_b`` on
    the dense output ``evaluate`` of a method (``dst``: where it writes an
array-shaped state, `.state`).

    Brent's method (R. P. Brent, *Algorithms for Minimization without
    Derivatives*, 1973, ch. 4): inverse quadratic interpolation or secant
    steps, with bisection whenever they would not shrink the bracket fast
    enough. Converges when the bracket is below ``ROOT_XTOL + ROOT_RTOL*|t|``.
    """

    @hjit
    def value_on_step(index, t, coeffs, t_old, h, y_old, p, c, dst):
        return g(index, t, evaluate(coeffs, t_old, h, y_old, t, dst), p, c)

    @hjit
    def locate(index, t_a, t_b, coeffs, t_old, h, y_old, p, c, dst):
        a = t_a
        b = t_b
        fa = value_on_step(index, a, coeffs, t_old, h, y_old, p, c, dst)
        fb = value_on_step(index, b, coeffs, t_old, h, y_old, p, c, dst)
        if fa == 0.0:
            return a
        if fb == 0.0:
            return b
        # c_ is the previous iterate on the other side of the root than b.
        c_ = a
        fc = fa
        d = b - a
        e = d
        for _ in range(ROOT_MAXITER):
            if (fb > 0.0) == (fc > 0.0):
                c_ = a
                fc = fa
                d = b - a
                e = d
            if abs(fc) < abs(fb):
                a = b
                b = c_
                c_ = a
                fa = fb
                fb = fc
                fc = fa
            tol = 0.5 * (ROOT_XTOL + ROOT_RTOL * abs(b))
            m = 0.5 * (c_ - b)
            if fb == 0.0 or abs(m) <= tol:
                return b
            if abs(e) >= tol and abs(fa) > abs(fb):
                s = fb / fa
                if a == c_:
                    p_ = 2.0 * m * s
                    q = 1.0 - s
                else:
                    q = fa / fc
                    r = fb / fc
                    p_ = s * (2.0 * m * q * (q - r) - (b - a) * (r - 1.0))
                    q = (q - 1.0) * (r - 1.0) * (s - 1.0)
                if p_ > 0.0:
                    q = -q
                else:
                    p_ = -p_
                if 2.0 * p_ < min(3.0 * m * q - abs(tol * q), abs(e * q)):
                    e = d
                    d = p_ / q
                else:
                    d = m
                    e = m
            else:
                d = m
                e = m
            a = b
            fa = fb
            if abs(d) > tol:
                b += d
            else:
                b += math.copysign(tol, m)
            fb = value_on_step(index, b, coeffs, t_old, h, y_old, p, c, dst)
        return b

    return locate


def make_roots(evaluate, g, store_row, event_states):
    """``roots(t, t_new, y, y_new, h, coeffs, p, ev_direction, ev_max, ev_consts, n_ev,
    y_records, direction, t_events, y_events, n_events, scratch, dst) -> (t_stop,
    e_stop)``: what the solve loops do with the events after an accepted step from
    ``t`` to ``t_new`` (one source for the per-object loop, `.loop`, and the lanes'
    lane-by-lane code, `.lanes`).

    Each event's new value becomes its ``scratch[e, SCRATCH.g]``; a triggered one is
    located on the step's interpolant ``coeffs`` (built by the caller where any event
    triggers), and, as in scipy, the events are recorded in time order (ties by index)
    up to and including the first terminal one (``ev_max``: the occurrence that
    terminates), at ``t_events``, ``y_events`` (with ``event_states``) and
    ``n_events``. ``t_stop``: the terminal root, else ``t_new``; ``e_stop``: the
    terminal event, else ``n_ev``. Inlined where called: the loops' code as it was.
    """
    locate = make_locate(evaluate, g)
    G, ROOT = SCRATCH.g, SCRATCH.root

    @hjit(inline="always")
    def roots(t, t_new, y, y_new, h, coeffs, p, ev_direction, ev_max, ev_consts, n_ev,
              y_records, direction, t_events, y_events, n_events, scratch, dst):
        for e in range(n_ev):
            g_old = scratch[e, G]
            g_new = g(e, t_new, y_new, p, ev_consts[e])
            scratch[e, G] = g_new
            if is_triggered(g_old, g_new, ev_direction[e]):
                scratch[e, ROOT] = t_new  # located below
            else:
                scratch[e, ROOT] = math.nan

        # Locate the roots. As in scipy, events are taken in time order (ties
        # by index) up to and including the first terminal one.
        t_stop = t_new
        e_stop = n_ev
        for e in range(n_ev):
            if scratch[e, ROOT] == scratch[e, ROOT]:
                root = locate(e, t, t_new, coeffs, t, h, y, p, ev_consts[e], dst)
                scratch[e, ROOT] = root
                if ev_max[e] > 0 and n_events[e] + 1 >= ev_max[e]:
                    earlier = direction * (root - t_stop)
                    if e_stop == n_ev or earlier < 0.0:
                        t_stop = root
                        e_stop = e
        for e in range(n_ev):
            root = scratch[e, ROOT]
            if root == root:
                before = direction * (root - t_stop)
                if before < 0.0 or (before == 0.0 and e <= e_stop):
                    count = n_events[e]
                    if count < t_events.shape[1]:
                        t_events[e, count] = root
                    if event_states and count < y_records:
                        store_row(y_events[e], count, evaluate(coeffs, t, h, y, root, dst))
                    n_events[e] = count + 1
        return t_stop, e_stop

    return roots
