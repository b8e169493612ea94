"""Arithmetic on the 6-component state ``(x, y, z, vx, vy, vz)`` held as a tuple.

Tuples, not arrays: on the GPU they live in registers. The right-hand side
is called in the Cowell form ``f(t, rr, vv, k, p) -> (drr, dvv)``.
"""

import math

from ..jit import hjit


@hjit
def join(rr, vv):
    return (rr[0], rr[1], rr[2], vv[0], vv[1], vv[2])


@hjit
def rhs(f, t, y, k, p):
    """Derivative of the state ``y`` at ``t`` from the user's ``f``."""
    drr, dvv = f(t, (y[0], y[1], y[2]), (y[3], y[4], y[5]), k, p)
    return (drr[0], drr[1], drr[2], dvv[0], dvv[1], dvv[2])


@hjit
def event_value(g, index, t, y, k, p, c):
    """Value of event ``index`` of the dispatcher ``g`` at the state ``y``."""
    return g(index, t, (y[0], y[1], y[2]), (y[3], y[4], y[5]), k, p, c)


@hjit
def axpy(a, x, y):
    """``y + a * x``."""
    return (y[0] + a * x[0], y[1] + a * x[1], y[2] + a * x[2],
            y[3] + a * x[3], y[4] + a * x[4], y[5] + a * x[5])


@hjit
def sub(x, y):
    return (x[0] - y[0], x[1] - y[1], x[2] - y[2],
            x[3] - y[3], x[4] - y[4], x[5] - y[5])


@hjit
def is_finite(y):
    return (math.isfinite(y[0]) and math.isfinite(y[1]) and math.isfinite(y[2])
            and math.isfinite(y[3]) and math.isfinite(y[4]) and math.isfinite(y[5]))


@hjit
def scaled_sum_squares(x, scale):
    """``sum((x / scale) ** 2)``."""
    return weighted_sum_squares(x, (1.0 / scale[0], 1.0 / scale[1], 1.0 / scale[2],
                                    1.0 / scale[3], 1.0 / scale[4], 1.0 / scale[5]))


@hjit
def weighted_sum_squares(x, weight):
    """``sum((x * weight) ** 2)``."""
    q0 = x[0] * weight[0]
    q1 = x[1] * weight[1]
    q2 = x[2] * weight[2]
    q3 = x[3] * weight[3]
    q4 = x[4] * weight[4]
    q5 = x[5] * weight[5]
    return q0 * q0 + q1 * q1 + q2 * q2 + q3 * q3 + q4 * q4 + q5 * q5
