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
def combine(weights, ks):
    """``sum_j weights[j] * ks[j]`` for a tuple of states ``ks``."""
    s0 = s1 = s2 = s3 = s4 = s5 = 0.0
    for j in range(len(ks)):
        w = weights[j]
        kj = ks[j]
        s0 += w * kj[0]
        s1 += w * kj[1]
        s2 += w * kj[2]
        s3 += w * kj[3]
        s4 += w * kj[4]
        s5 += w * kj[5]
    return (s0, s1, s2, s3, s4, s5)


@hjit
def is_finite(y):
    return (math.isfinite(y[0]) and math.isfinite(y[1]) and math.isfinite(y[2])
            and math.isfinite(y[3]) and math.isfinite(y[4]) and math.isfinite(y[5]))


@hjit
def scaled_sum_squares(x, scale):
    """``sum((x / scale) ** 2)``."""
    s = 0.0
    for i in range(6):
        q = x[i] / scale[i]
        s += q * q
    return s
