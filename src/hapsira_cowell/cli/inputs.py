"""Inputs typed by people: durations such as ``1.5d`` and the output times they give.

`UsageError` is the error for bad input of this kind (a bad duration, catalog
or output path): a `ValueError` whose message is one line naming the option or
file, as the command line prints it. This module imports nothing of the
solver, so reading inputs never fixes the compilation target.
"""

import argparse
import math
import re

import numpy as np

__all__ = ["UsageError", "parse_duration", "format_duration", "make_tofs", "output_count",
           "positive_int",
           "positive_float", "non_negative_float"]

_UNITS = {"s": 1.0, "sec": 1.0, "min": 60.0, "h": 3600.0, "hr": 3600.0, "d": 86400.0,
          "day": 86400.0, "days": 86400.0}
_DURATION = re.compile(r"^\s*([+-]?)\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)"
                       r"\s*([A-Za-z]*)\s*$")


class UsageError(ValueError):
    """Bad input from the user: one line naming the option or file, what was expected
    and what was received (the command line prints it and exits with status 2)."""


def parse_duration(text, name="duration", *, allow_negative=False):
    """Seconds in ``text``: a number and a unit, ``30s``, ``90min``, ``6h``, ``1.5d``.

    Units: ``s``, ``min``, ``h``, ``d`` (also ``sec``, ``hr``, ``day``,
    ``days``). The result must be positive and finite (with
    ``allow_negative``, non-zero and finite: ``-1d`` gives -86400, a backward
    time of flight); anything else raises `UsageError` naming ``name`` and
    saying what is wrong (no unit, not positive, ...).
    """
    text = str(text)
    if allow_negative:
        hint = ("expected a number and a unit (s, min, h or d), e.g. 1d, or -1d to propagate "
                "backward")
    else:
        hint = ("expected a positive number and a unit (s, min, h or d), e.g. 30s, 90min, 6h, "
                "1.5d")
    match = _DURATION.match(text)
    if not match:
        raise UsageError(f"{name}: cannot read {text!r} as a duration; {hint}")
    number, unit = float(match.group(1) + match.group(2)), match.group(3).lower()
    if unit == "m":
        raise UsageError(f"{name}: {text!r} is ambiguous; write minutes as 'min'")
    if unit not in _UNITS:
        what = "has no unit" if not unit else f"has the unknown unit {unit!r}"
        raise UsageError(f"{name}: {text!r} {what}; {hint}")
    seconds = number * _UNITS[unit]
    if not math.isfinite(seconds):
        raise UsageError(f"{name}: {text!r} is not a finite duration; {hint}")
    if seconds == 0 or (seconds < 0 and not allow_negative):
        what = "must be positive" if not allow_negative else "must not be zero"
        raise UsageError(f"{name}: {text!r} {what}; {hint}")
    return seconds


def format_duration(seconds):
    """``86400.0`` -> ``'1 d'``; the largest unit that gives a number >= 1 (sign kept)."""
    sign, seconds = ("-" if seconds < 0 else ""), abs(seconds)
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= size:
            return f"{sign}{seconds / size:.4g} {unit}"
    return f"{sign}{seconds:.4g} s"


def make_tofs(tof, every):
    """Output times: 0, every, 2 every, ..., and ``tof`` itself (s).

    A negative ``tof`` gives 0, -every, ..., ``tof`` (backward propagation);
    ``every`` is the positive interval.
    """
    if tof < 0:
        return -make_tofs(-tof, every)
    count = int(math.floor(tof / every + 1e-9))
    tofs = every * np.arange(count + 1, dtype=np.float64)
    tofs = tofs[tofs < tof * (1 - 1e-12)]
    return np.append(tofs, tof)


def output_count(tof, every):
    """How many output times `make_tofs` gives (at most one more), computed without
    making them: a size can be checked before ``--every 1e-9s`` allocates petabytes."""
    return math.floor(abs(tof) / every + 1e-9) + 2


# argparse types: a bad value gives "argument --x: expected ..., got '...'"

def positive_int(text):
    """An integer >= 1 (an argparse type)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _finite_float(allow_zero):
    """An argparse type: a finite number > 0 (or >= 0 with ``allow_zero``)."""
    expected = "a number >= 0" if allow_zero else "a positive number"

    def parse(text):
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and (value > 0 or (allow_zero and value == 0))):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value
    parse.__name__ = "non_negative_float" if allow_zero else "positive_float"
    parse.__doc__ = f"A finite number {'>= 0' if allow_zero else '> 0'} (an argparse type)."
    return parse


positive_float = _finite_float(allow_zero=False)
non_negative_float = _finite_float(allow_zero=True)
