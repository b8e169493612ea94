"""3-vector helpers on tuples, usable from any `hjit()` code."""

import math

from .jit import hjit, rsqrt


@hjit
def add(a, b):
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


@hjit
def sub(a, b):
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2])


@hjit
def scale(s, a):
    return (s * a[0], s * a[1], s * a[2])


@hjit
def dot(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


@hjit
def cross(a, b):
    return (a[1] * b[2] - a[2] * b[1],
            a[2] * b[0] - a[0] * b[2],
            a[0] * b[1] - a[1] * b[0])


@hjit
def norm(a):
    return math.sqrt(a[0] * a[0] + a[1] * a[1] + a[2] * a[2])


@hjit
def norm_and_inverse_cube(a):
    """``(|a|, 1 / |a|^3)``.

    Gravity terms written with these share one reciprocal square root per
    evaluation of ``f`` (the compiler merges identical expressions after
    inlining): FP64 divisions and roots are the long-latency part of a
    right-hand side on the GPU.
    """
    r2 = a[0] * a[0] + a[1] * a[1] + a[2] * a[2]
    inverse_r = rsqrt(r2)
    return r2 * inverse_r, inverse_r * inverse_r * inverse_r
