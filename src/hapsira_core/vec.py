"""3-vector helpers on tuples, usable from any :func:`~hapsira_core.jit.hjit` code."""

import math

from .jit import hjit


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

    Gravity terms written with these share one square root and one division
    per evaluation of ``f``: the compiler merges identical expressions after
    inlining, and FP64 divisions and roots are the costly part of a
    right-hand side on the GPU.
    """
    r = norm(a)
    return r, 1.0 / (r * r * r)
