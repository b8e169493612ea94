"""Checks of the arguments of `solve_ivp()` (and of ``cowell()``).

Each check names the argument, what was expected and what was received, and
returns the value in the form the kernel takes (float64, C-ordered, no
stride-0 views, which made the cuda kernel 8x slower on an H100).
"""

import warnings

import numpy as np

from .state import MAX_N

EPS = np.finfo(np.float64).eps


def real_array(value, name, what="real numbers"):
    """``value`` as a float64 array; complex, bool, text, object and masked input refused."""
    if isinstance(value, np.ma.MaskedArray):
        raise TypeError(f"{name}: expected {what}, got a masked array (fill or drop the "
                        "masked values first)")
    try:
        array = np.asarray(value)
    except (ValueError, TypeError) as error:  # ragged nested sequences
        raise ValueError(f"{name}: expected {what} in a regular array, got {error}") from None
    if array.dtype.kind not in "iuf":
        kind = {"b": "booleans", "c": "complex numbers", "U": "text", "S": "bytes",
                "O": "objects (ragged rows or mixed types?)", "M": "datetimes",
                "m": "timedeltas"}.get(array.dtype.kind, f"dtype {array.dtype}")
        raise TypeError(f"{name}: expected {what}, got {kind}")
    return np.array(array, dtype=np.float64, order="C")


def states(y0, name="y0"):
    """``(N, n)`` initial states and whether one object (``(n,)``) was given."""
    array = real_array(y0, name)
    if array.ndim not in (1, 2) or array.shape[-1] == 0:
        raise ValueError(f"{name}: expected shape (n,) or (N, n) with n >= 1, got {array.shape}")
    if array.shape[-1] > MAX_N:
        raise ValueError(f"{name}: states of {array.shape[-1]} components are not supported "
                         f"(at most {MAX_N}: the solver is generated as straight-line code "
                         "per component, and compile time grows too fast beyond that)")
    single = array.ndim == 1
    return (array[None, :] if single else array), single


def tolerance(value, name, n):
    """rtol or atol as n values: a scalar or one per component, finite and >= 0."""
    array = real_array(value, name, "a real number or one per state component")
    if array.ndim == 0:
        array = np.full(n, float(array))
    if array.shape != (n,):
        raise ValueError(f"{name}: expected a scalar or {n} values (one per state "
                         f"component), got shape {array.shape}")
    if not np.all(np.isfinite(array)) or np.any(array < 0):
        raise ValueError(f"{name}: expected finite non-negative tolerances, got {value!r}")
    return array


def relative_tolerance(value, n, stacklevel=3):
    """rtol as scipy takes it: below 100 eps it is raised to that, with a warning."""
    rtol = tolerance(value, "rtol", n)
    if np.any(rtol < 100 * EPS):
        warnings.warn(f"rtol below 100 * eps; using rtol = max(rtol, {100 * EPS})",
                      stacklevel=stacklevel)
        rtol = np.maximum(rtol, 100 * EPS)
    return rtol


def params(value, n_objects):
    """``(1, P)`` shared or ``(N, P)`` per-object params rows (at least one column)."""
    if value is None:
        return np.zeros((1, 1))
    array = real_array(value, "params")
    if array.ndim == 1:
        array = array[None, :]
    if array.ndim != 2 or array.shape[0] not in (1, n_objects):
        raise ValueError(f"params: expected shape (P,) or ({n_objects}, P), "
                         f"got {np.shape(value)}")
    if array.shape[1] == 0:
        array = np.zeros((array.shape[0], 1))
    return array


def integer(value, name, minimum):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) \
            or value < minimum:
        raise ValueError(f"{name}: expected an integer >= {minimum}, got {value!r}")
    return int(value)


def event_list(events, kind):
    """``events`` as a tuple: a single event is taken as a list of one."""
    if events is None:
        return ()
    if isinstance(events, kind):
        return (events,)
    try:
        events = tuple(events)
    except TypeError:
        raise TypeError(f"events: expected a sequence of {kind.__module__}.{kind.__name__}, "
                        f"got {type(events).__name__}") from None
    for index, event in enumerate(events):
        if not isinstance(event, kind):
            raise ValueError(f"events[{index}]: expected an {kind.__module__}.{kind.__name__}, "
                             f"got {type(event).__name__}")
    return events
