"""What the two host backends (cpu, parallel) share: functions compiled by ``numba.njit``."""

import math

import numba

from .. import settings

#: On the host the dense output reuses the step's stages: an output time costs
#: what it costs in scipy (3 evaluations of f for DOP853, none for RK45/RK23).
KEEP_STAGES = True


def hjit(func=None, **options):
    """``numba.njit`` with IEEE floating-point errors (a division by zero gives
    inf or NaN, never a Python exception) and, with ``HAPSIRA_DEBUG``, bounds
    checks and debug info."""
    if func is None:
        return lambda f: hjit(f, **options)
    options.setdefault("cache", False)
    options.setdefault("error_model", "numpy")
    if settings.DEBUG:
        options.setdefault("boundscheck", True)
        options.setdefault("debug", True)
    return numba.njit(**options)(func)


def rsqrt(x):
    """``1 / sqrt(x)``: on the host a square root and a division."""
    return 1.0 / math.sqrt(x)
