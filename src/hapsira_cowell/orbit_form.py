"""The orbit's call forms on top of the core's: ``f(t, rr, vv, k, p)`` as ``fun(t, y, p)``.

The core integrates ``y = (rr, vv)`` with one params row ``p``; ``cowell()``
puts GM first in that row, so that ``k`` is data like every other number
(a new GM never recompiles) and the user's row follows it.
"""

from hapsira_core.jit import factory
from hapsira_core.jit import hjit


@factory
def orbit_rhs(f):
    """``f(t, rr, vv, k, p) -> (drr, dvv)`` as the core's ``fun(t, y, p)``."""
    @hjit
    def fun(t, y, p):
        drr, dvv = f(t, (y[0], y[1], y[2]), (y[3], y[4], y[5]), p[0], p[1:])
        return (drr[0], drr[1], drr[2], dvv[0], dvv[1], dvv[2])
    return fun


@factory
def orbit_event(g):
    """``g(t, rr, vv, k, p, c) -> float`` as the core's ``g(t, y, p, c)``."""
    @hjit
    def event(t, y, p, c):
        return g(t, (y[0], y[1], y[2]), (y[3], y[4], y[5]), p[0], p[1:], c)
    return event
