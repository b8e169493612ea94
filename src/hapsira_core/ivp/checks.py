"""Checks of the arguments of `solve_ivp()` (and of ``cowell()``).

Each check names the argument, what was expected and what was received, and
returns the value in the form the kernel takes (float64, C-ordered, no
stride-0 views, which make the cuda kernel much slower).
"""

import collections
import functools
import math
import warnings

import numpy as np

from ..jit import hjit
from ..kernels import reciprocals
from ..kernels.cache import factory
from .state import check_fun_form

EPS = np.finfo(np.float64).eps


class ArgumentTypeError(TypeError, ValueError):
    """An argument of the wrong kind (text, complex, bool, a masked array, a
    Quantity where plain numbers belong): a ``TypeError``, and a ``ValueError``
    as bad arguments were before these checks told them apart."""


def shown(value):
    """``value`` as an error message shows it: a numpy scalar or 0-d array as the number it
    holds (``-398600.4418``, not ``array(-398600.4418)`` or ``np.float64(-398600.4418)``),
    anything else by its repr."""
    if isinstance(value, (np.generic, np.ndarray)) and np.ndim(value) == 0 \
            and value.dtype.kind in "biufc":
        return repr(value.item())
    return repr(value)


def real_array(value, name, what="real numbers"):
    """``value`` as a float64 array; complex, bool, text, object and masked input refused."""
    if isinstance(value, np.ma.MaskedArray):
        raise ArgumentTypeError(f"{name}: expected {what}, got a masked array (fill or drop the "
                        "masked values first)")
    try:
        array = np.asarray(value)
    except (ValueError, TypeError) as error:  # ragged nested sequences
        raise ValueError(f"{name}: expected {what} in a regular array, got {error}") from None
    if array.dtype.kind not in "iuf":
        kind = {"b": "booleans", "c": "complex numbers", "U": "text", "S": "bytes",
                "O": "objects (ragged rows or mixed types?)", "M": "datetimes",
                "m": "timedeltas"}.get(array.dtype.kind, f"dtype {array.dtype}")
        raise ArgumentTypeError(f"{name}: expected {what}, got {kind}")
    # a copy only where one is needed (kernels take writable C-ordered float64):
    # copying many states anyway would add a pass over them to every call
    array = np.asarray(array, dtype=np.float64, order="C")
    return array if array.flags.writeable else array.copy()


def states(y0, name="y0"):
    """``(N, n)`` initial states and whether one object (``(n,)``) was given."""
    array = real_array(y0, name)
    if array.ndim not in (1, 2) or array.shape[-1] == 0:
        raise ValueError(f"{name}: expected shape (n,) or (N, n) with n >= 1, got {array.shape}")
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
        raise ValueError(f"{name}: expected finite non-negative tolerances, "
                         f"got {shown(value)}")
    return array


def relative_tolerance(value, n, stacklevel=3):
    """rtol as scipy takes it: below 100 eps it is raised to that, with a warning."""
    rtol = tolerance(value, "rtol", n)
    if np.any(rtol < 100 * EPS):
        warnings.warn(f"rtol below 100 * eps; using rtol = max(rtol, {100 * EPS})",
                      stacklevel=stacklevel)
        rtol = np.maximum(rtol, 100 * EPS)
    return rtol


def _has_unit(value):
    if hasattr(value, "unit") and hasattr(value, "to_value"):
        return True
    if isinstance(value, (list, tuple)):
        return any(_has_unit(item) for item in value)
    return False


def params(value, n_objects, stacklevel=5):
    """``(1, P)`` shared or ``(N, P)`` per-object params rows (at least one column).

    Quantities are refused: a params row is plain numbers in the units the
    functions reading it expect, and dropping a unit silently (m^2/kg read as
    km^2/kg) gives wrong answers with a success status.
    """
    if value is None:
        return np.zeros((1, 1))
    if _has_unit(value):
        unit = getattr(value, "unit", None)
        raise ArgumentTypeError(f"params: expected plain numbers in the units the functions reading "
                        f"them use (km, s, kg for the built-ins), got a Quantity"
                        f"{f' in {unit}' if unit is not None else ''}: convert it first, "
                        "e.g. area_to_mass.to_value(u.km**2 / u.kg)")
    return params_shape(real_array(value, "params"), n_objects, np.zeros, stacklevel)


def params_shape(array, n_objects, zeros, stacklevel=5):
    """Params rows of any array kind (numpy, JAX) as ``(1 or N, P >= 1)``;
    ``zeros`` makes that kind's zero array."""
    if array.ndim == 1:
        if n_objects > 1 and array.shape[0] == n_objects:
            # scipy users pass one number per object this way; here it is one shared
            # row of N numbers, every object reading the same p
            warnings.warn(f"params: shape ({n_objects},) with {n_objects} objects is one row "
                          f"shared by all objects (each reads p[0] to p[{n_objects - 1}]); "
                          f"for one value per object pass shape ({n_objects}, 1), e.g. "
                          "params[:, None]", UserWarning, stacklevel=stacklevel)
        array = array[None, :]
    if array.ndim != 2 or array.shape[0] not in (1, n_objects):
        raise ValueError(f"params: expected shape (P,) or ({n_objects}, P), "
                         f"got {tuple(array.shape)}")
    if array.shape[1] == 0:
        array = zeros((array.shape[0], 1))
    return array


def columns_read(function, position):
    """``(largest constant index + 1, line)`` with which ``function`` reads its
    argument at ``position`` (``p[5]`` -> 6), or ``(0, None)``.

    Read from the bytecode of the Python function behind an hjit dispatcher:
    constant subscripts only (``p[i]`` with a computed ``i`` is not seen).
    """
    py = getattr(function, "py_func", function)
    code = getattr(py, "__code__", None)
    if code is None or position >= code.co_argcount:
        return 0, None
    name = code.co_varnames[position]
    instructions = _instructions(code)
    found, line = 0, None
    current = None
    for a, b, c in zip(instructions, instructions[1:], instructions[2:]):
        if a.starts_line:
            current = a.starts_line
        if (a.opname.startswith("LOAD_FAST") and a.argval == name and b.opname == "LOAD_CONST"
                and isinstance(b.argval, int) and not isinstance(b.argval, bool)
                and c.opname == "BINARY_SUBSCR" and b.argval + 1 > found):
            found, line = b.argval + 1, current
    return found, line


def columns_given(value):
    """Columns of the params rows the user gave (0 for none); call after `params()`.

    Read from the shape alone where the value has one (JAX tracers, Dask arrays)."""
    if value is None:
        return 0
    shape = getattr(value, "shape", None)
    if shape is None:
        shape = np.shape(np.asarray(value, dtype=np.float64))
    return shape[-1] if len(shape) else 1


def params_width(value_width, functions, position, offset=0):
    """Refuse params rows narrower than what ``functions`` read at ``position``.

    ``value_width``: columns the user gave (0 for none); ``offset``: columns the
    front puts before the user's (cowell: GM).
    """
    for function in functions:
        needed, line = columns_read(function, position)
        if needed > value_width:
            py = getattr(function, "py_func", function)
            where = f"{py.__code__.co_filename}:{line}" if line else py.__code__.co_filename
            raise ValueError(f"params: {getattr(py, '__qualname__', py)} ({where}) reads "
                             f"p[{needed - 1}], but the params rows have {value_width} "
                             f"column{'s' if value_width != 1 else ''}; expected at least "
                             f"{needed}")


#: Largest count the kernels take (their integer rows are int64).
MAX_INT = int(np.iinfo(np.int64).max)


def integer(value, name, minimum, maximum=MAX_INT):
    """A count from ``minimum`` to ``maximum`` (the kernel's rows hold int64:
    2**70 used to fail there with an OverflowError naming nothing)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) \
            or not minimum <= value <= maximum:
        raise ValueError(f"{name}: expected an integer from {minimum} to {maximum}, "
                         f"got {shown(value)}")
    return int(value)


def _real_scalar(value, name, what):
    if isinstance(value, (bool, np.bool_, str, bytes)) or _has_unit(value):
        raise ArgumentTypeError(f"{name}: expected {what}, got {shown(value)}")
    array = real_array(value, name, what)
    if array.ndim != 0:
        raise ValueError(f"{name}: expected {what} (one value shared by all objects), got "
                         f"shape {array.shape}")
    return float(array)


def step_sizes(max_step, first_step, t0=None, tf=None):
    """scipy's ``max_step`` and ``first_step``, checked as scipy checks them
    (``validate_max_step``, ``validate_first_step``): ``(max_step, first_step or None)``.

    ``max_step``: positive (inf: no cap); ``first_step``: None (scipy's choice) or
    positive and at most ``|tf - t0|`` (not checked where the span is not known,
    ``t0``/``tf`` None: a traced JAX span). NaN is refused, where scipy lets it
    through to steps that never end. One number shared by all objects each.
    """
    max_step = _real_scalar(max_step, "max_step", "a positive number (inf: no cap)")
    if not max_step > 0.0:
        raise ValueError(f"max_step: must be positive (as in scipy), got {max_step!r}")
    if first_step is None:
        return max_step, None
    first = _real_scalar(first_step, "first_step", "a positive number or None")
    if not (first > 0.0 and math.isfinite(first)):
        raise ValueError(f"first_step: must be positive (as in scipy), got {first!r}")
    if t0 is not None and tf is not None and first > np.min(np.abs(np.subtract(tf, t0))):
        # per-object spans: the shortest, as scipy refuses it for that object
        raise ValueError(f"first_step: exceeds the time span: {first!r} > |tf - t0| = "
                         f"{float(np.min(np.abs(np.subtract(tf, t0))))!r} (scipy: `first_step` "
                         "exceeds bounds)")
    return max_step, first


def extra_args(args):
    """scipy's ``args`` as a tuple of floats: numbers shared by all objects, which
    ``fun`` and the events read after the params columns (`with_args`).

    A hjit ``fun(t, y, p)`` cannot take scipy's ``fun(t, y, *args)``: the numbers
    travel in the params row instead. Anything but numbers (arrays, strings,
    callables) is refused with a TypeError that says to use ``params``.
    """
    if args is None:
        return ()
    hint = ("solve_ivp's fun(t, y, p) reads scipy's args=(a, b) as p[0], p[1] (after the "
            "params columns, if any); per-object values go in params=(N, P) rows")
    if isinstance(args, (str, bytes)) or not hasattr(args, "__iter__"):
        raise ArgumentTypeError(f"args: expected a tuple of numbers, e.g. args=({args!r},); "
                                f"{hint}")
    values = []
    for index, value in enumerate(args):
        if isinstance(value, (bool, np.bool_, str, bytes)) or _has_unit(value) or \
                np.ndim(value) != 0 or not isinstance(np.asarray(value).item(),
                                                      (int, float)):
            raise ArgumentTypeError(f"args[{index}]: expected a number shared by all objects, "
                                    f"got {type(value).__name__} {shown(value)}; {hint}")
        values.append(float(value))
    return tuple(values)


def with_args(rows, given_columns, args, xp=np):
    """The params ``rows`` (``(1 or N, P)``, of array module ``xp``) with the numbers of
    `extra_args` appended as columns shared by all objects: the user's ``P`` columns
    first (``given_columns``; 0 where no params were given, the rows then a placeholder
    that ``args`` replaces)."""
    if not args:
        return rows
    extra = xp.asarray(np.array(args, dtype=np.float64)[None, :])
    if not given_columns:
        return extra
    extra = xp.broadcast_to(extra, (rows.shape[0], len(args)))
    return xp.concatenate([rows, extra], axis=1)


def time_span(t_span):
    """``(t0, tf)`` as two floats: ``t0`` finite, ``tf`` finite or +-inf.

    Text is refused: scipy reads ``"10"`` character by character, as
    ``(1, 0)``, and integrates backward. An infinite ``t0`` and NaN are refused
    (scipy never returns from ``t0 = inf``: its steps are ``inf - inf``). An
    infinite ``tf`` is scipy's "until a terminal event" (`unbounded_end` checks
    that one can stop the objects). ``t0 == tf`` is allowed, as in scipy (the
    initial state is the answer).
    """
    if isinstance(t_span, (str, bytes)):
        raise ArgumentTypeError(f"t_span: expected two real numbers (t0, tf), got text "
                                f"{t_span!r}")
    try:
        items = list(t_span)
    except TypeError:
        raise ValueError(f"t_span: expected two real numbers (t0, tf), got "
                         f"{type(t_span).__name__} {t_span!r}") from None
    if len(items) != 2:
        raise ValueError(f"t_span: expected two real numbers (t0, tf), got {len(items)} "
                         f"values: {t_span!r}")
    times = []
    for item in items:
        array = real_array(item, "t_span", "two real numbers (t0, tf)")
        if array.ndim != 0:
            raise ValueError(f"t_span: expected two real numbers (t0, tf), got an element of "
                             f"shape {array.shape}: {t_span!r}")
        times.append(float(array))
    if not (math.isfinite(times[0]) and not math.isnan(times[1])):
        # The floats, not repr(t_span): JAX hands the front 0-d arrays, and the
        # message must read the same from every front.
        raise ValueError(f"t_span: expected a finite t0 and a finite or infinite tf (no NaN), "
                         f"got ({times[0]!r}, {times[1]!r})")
    return times[0], times[1]


def per_object_times(t_span, t_eval):
    """Whether ``t_span`` holds an array (per-object spans) or ``t_eval`` is 2-D:
    read from shapes only (traced JAX values too)."""
    if t_eval is not None and np.ndim(t_eval) == 2:
        return True
    if isinstance(t_span, (str, bytes)):
        return False
    try:
        items = list(t_span)
    except TypeError:
        return False
    return len(items) == 2 and any(np.ndim(item) >= 1 for item in items)


def time_spans(t_span, n_objects):
    """``(t0, tf)``: two floats (`time_span`) or, where either is an array, two
    ``(N,)`` float arrays, one start and end per object (a number with an
    array: shared by all objects). NaN and an infinite t0 are refused (with
    the first such object's index), an infinite tf allowed as in `time_span`;
    ``t0 == tf`` is allowed per object (its
    initial state is the answer), and directions may differ between objects
    (the loop reads each object's own)."""
    if not per_object_times(t_span, None):
        return time_span(t_span)
    what = f"two real numbers (t0, tf) or two arrays of shape ({n_objects},)"
    items = [real_array(item, "t_span", what) for item in list(t_span)]
    for item in items:
        if item.ndim > 1 or (item.ndim == 1 and item.shape[0] != n_objects):
            raise ValueError(f"t_span: expected {what} (one t0 and one tf per object), got "
                             f"shapes {items[0].shape} and {items[1].shape}")
    t0, tf = (np.ascontiguousarray(np.broadcast_to(item, (n_objects,))) for item in items)
    bad = ~(np.isfinite(t0) & ~np.isnan(tf))
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"t_span: expected a finite t0 and a finite or infinite tf (no NaN), "
                         f"got t0 = {shown(t0[i])}, tf = {shown(tf[i])} for object {i} "
                         f"({int(bad.sum())} objects with NaN or an infinite t0)")
    return t0, tf


def unbounded_end(tf, events, times=None):
    """Refuse an infinite ``tf`` (any object's) that no terminal event can end, and the
    default output time ``[tf]`` where it is infinite.

    scipy integrates to ``tf = inf`` until a terminal event stops it; without one it
    never returns. Here ``max_steps`` would end every such object with status -2, a
    run spent for nothing, so it is refused up front naming ``t_span``. An object
    whose terminal events never occur still ends at ``max_steps`` (status -2).
    ``times``: the checked output times (`output_times`), which hold an infinite time
    only where ``t_eval`` was left to its default ``[tf]``: never reached, so refused
    naming ``t_eval`` (None: no output times to check, ``t_eval="steps"``). ``tf``
    None (a traced JAX span) is not checked: the kernel's ``max_steps`` guards."""
    if tf is None or not np.isinf(tf).any():
        return
    if not any(getattr(event, "max_occurrences", 0) > 0 for event in events):
        raise ValueError("t_span: an infinite tf needs a terminal event to stop the objects "
                         "(events=Event(g, terminal=True)); without one every object would "
                         "run to max_steps (status -2). Give a finite tf")
    if times is not None and np.isinf(times).any():
        raise ValueError("t_eval: the default output time, tf, is never reached where tf is "
                         "infinite; give finite output times, or t_eval=\"steps\" (every "
                         "accepted step, as scipy's t_eval=None) where the front offers it "
                         "(numpy arrays); the stopping state is also in res.y_events")


def output_times(t_eval, t0, tf, n_objects):
    """``t_eval`` checked against the spans (`time_spans`): ``(M,)`` for all objects,
    or ``(N, M)``, one row per object: each row's times inside its object's span,
    sorted in its direction with no time repeated (scipy refuses a repeated time too),
    trailing NaN padding allowed (no output there). Errors name the argument and the
    first object at fault. None: the end of each span, ``[tf]`` or ``(N, 1)`` (an
    infinite tf is refused there later, by `unbounded_end`, once the events are known)."""
    per_object_span = np.ndim(t0) == 1
    if t_eval is None:
        return tf[:, None].copy() if per_object_span else np.array([tf])
    times = np.atleast_1d(real_array(t_eval, "t_eval"))
    if times.ndim == 1:
        if times.size == 0:
            raise ValueError(f"t_eval: expected a non-empty 1-D array, got shape {times.shape}")
        if not per_object_span:
            low, high = min(t0, tf), max(t0, tf)
            if not np.all(np.isfinite(times)) or times.min() < low or times.max() > high:
                raise ValueError(f"t_eval: expected times within t_span [{t0}, {tf}]")
            # scipy's test: t0 == tf has no direction (every time is t0 there)
            if tf != t0 and np.any(np.sign(tf - t0) * np.diff(times) <= 0):
                raise ValueError("t_eval: expected times sorted in the direction of "
                                 "integration, none repeated (as scipy's solve_ivp)")
            return times
        if not np.all(np.isfinite(times)):
            raise ValueError("t_eval: expected finite times (NaN padding is for (N, M) rows)")
        rows = np.broadcast_to(times, (n_objects, times.size))
    elif times.ndim == 2:
        if times.shape[0] != n_objects or times.shape[1] == 0:
            raise ValueError(f"t_eval: expected shape (M,) or ({n_objects}, M) with M >= 1 "
                             f"(one row per object), got {times.shape}")
        rows = times
    else:
        raise ValueError(f"t_eval: expected shape (M,) or ({n_objects}, M), got {times.shape}")
    t0s = np.broadcast_to(t0, (n_objects,))
    tfs = np.broadcast_to(tf, (n_objects,))

    def refuse(mask, what):
        if mask.any():
            i = int(np.argmax(mask))
            raise ValueError(f"t_eval: {what} (object {i}: t_span [{shown(t0s[i])}, "
                             f"{shown(tfs[i])}], "
                             f"times {rows[i]!r}; {int(mask.sum())} objects in all)")

    nan = np.isnan(rows)
    refuse(np.isinf(rows).any(axis=1), "expected finite times or trailing NaN padding")
    refuse((nan[:, :-1] & ~nan[:, 1:]).any(axis=1),
           "expected NaN only as trailing padding of a row")
    low, high = np.minimum(t0s, tfs)[:, None], np.maximum(t0s, tfs)[:, None]
    with np.errstate(invalid="ignore"):
        refuse(((rows < low) | (rows > high)).any(axis=1),
               "expected each object's times within its own t_span")
        direction = np.sign(tfs - t0s)[:, None]
        refuse(((direction * np.diff(rows, axis=1) <= 0) & (direction != 0)).any(axis=1),
               "expected each row sorted in its object's direction of integration, "
               "none repeated (as scipy's solve_ivp)")
    return times


def times(t_span, t_eval, n_objects):
    """``(t0, tf, t_eval)`` checked (`time_spans`, `output_times`): numbers and
    ``(M,)``, or per-object ``(N,)`` spans and ``(N, M)`` rows; every front's."""
    t0, tf = time_spans(t_span, n_objects)
    return t0, tf, output_times(t_eval, t0, tf, n_objects)


def flag(value, name):
    """``value`` if it is True or False (numpy's bools too); a TypeError naming ``name``
    otherwise (``stm``, ``dense_output``: a truthy array or string is a mistake)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name}: expected True or False, got {shown(value)}")
    return value


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


def solver_options(fun, n, method, rtol, atol, events, event_kind, max_steps,
                   max_event_records, params_given, stacklevel=4, extra_columns=0):
    """What every front of ``solve_ivp`` (numpy, JAX, Dask) checks the same way, once.

    Call after the states (``n`` components) and the params rows are checked;
    ``params_given``: the params as the user gave them (their width, plus
    ``extra_columns``, scipy's ``args`` appended, is checked against what ``fun``
    and the events read). Returns ``(method name, fun,
    rtol, atol, events, max_steps, records)``, with the numpy front's messages on
    every front. ``fun`` and the events' ``g`` come back bounds-checked where
    they index the params row at run time (`bounds_checked`).
    """
    from . import methods
    solver = methods.get(method)
    rtol = relative_tolerance(rtol, n, stacklevel)
    atol = tolerance(atol, "atol", n)
    events = event_list(events, event_kind)
    max_steps = integer(max_steps, "max_steps", 1)
    records = integer(max_event_records, "max_event_records", 0)
    if not callable(fun):
        raise TypeError(f"fun: expected an hjit function, got {type(fun).__name__}")
    check_fun_form(fun, n)
    params_width(columns_given(params_given) + extra_columns, [fun] + [e.g for e in events], position=2)
    fun, events = kernel_functions(fun, n, events)
    return solver.name, fun, rtol, atol, events, max_steps, records


def kernel_functions(fun, n, events):
    """``(fun, events)`` as the solver kernel calls them (`solver_options`; the kernels
    a call names before it runs, `hapsira_core.ivp.prepare.solver`): ``fun`` and the
    events' ``g`` bounds-checked where they index the params row at run time
    (`bounds_checked`)."""
    array_form = check_fun_form(fun, n) == "array"
    # the array form writes dydt at indices computed at run time: checked on the host,
    # guarded on a GPU (a store past the end makes dydt NaN: the object fails alone)
    fun = bounds_checked(shared_reciprocals(fun), 2, output=3 if array_form else None)
    return fun, bounds_checked_events(events, 2)


#: What `call_options` returns: the options of a ``solve_ivp`` call as the core takes them.
CallOptions = collections.namedtuple("CallOptions", (
    "method", "fun", "user_fun", "rtol", "atol", "events", "max_steps", "records",
    "max_step", "first_step", "args"))


def call_options(fun, n, method, rtol, atol, events, event_kind, max_steps,
                 max_event_records, params_given, max_step, first_step, t0, tf, args,
                 stacklevel=5, times=None):
    """The one checker of every front of ``solve_ivp`` (numpy, JAX, Dask): all but the
    arrays, which each front converts first (``n`` states' components, the spans
    ``t0``/``tf``, None where a JAX span is traced). In one order, with one set of
    messages: `step_sizes`, `extra_args`, then `solver_options`. ``user_fun``: ``fun``
    as given (``fun`` comes back bounds-checked); ``args``: scipy's, as the tuple the
    front appends to its params rows (`with_args`). ``times``: the checked output times
    where known (an infinite tf's default ``[tf]`` is refused: `unbounded_end`)."""
    max_step, first_step = step_sizes(max_step, first_step, t0, tf)
    args = extra_args(args)
    method, checked, rtol, atol, events, max_steps, records = solver_options(
        fun, n, method, rtol, atol, events, event_kind, max_steps, max_event_records,
        params_given, stacklevel=stacklevel, extra_columns=len(args))
    unbounded_end(tf, events, times)
    return CallOptions(method, checked, fun, rtol, atol, events, max_steps, records,
                       max_step, first_step, args)


class FunctionIndexError(IndexError, ValueError):
    """A user function indexed an array past its end at an index computed at run
    time (which array: the subclasses, where it could be told)."""


class ParamsIndexError(FunctionIndexError):
    """A user function read past the end of its params row with a computed index."""


class DydtIndexError(FunctionIndexError):
    """An array-form ``fun(t, y, p, dydt)`` wrote (or read) past the end of ``dydt``."""


class _Reproduced(Exception):
    def __init__(self, label, detail):
        super().__init__(label, detail)
        self.label, self.detail = label, detail


class _Labelled(np.ndarray):
    """A numpy array that says which argument it is when indexed past its end."""

    def _checked(self, method, *args):
        try:
            return method(*args)
        except IndexError as error:
            raise _Reproduced(getattr(self, "label", "?"), str(error)) from None

    def __getitem__(self, index):
        return self._checked(super().__getitem__, index)

    def __setitem__(self, index, value):
        return self._checked(super().__setitem__, index, value)


def _labelled(array, label):
    view = np.array(array, dtype=np.float64).view(_Labelled)
    view.label = label
    return view


def _positional(function):
    import inspect
    try:
        parameters = inspect.signature(getattr(function, "py_func", function)).parameters
    except (TypeError, ValueError):
        return None
    return len([q for q in parameters.values()
                if q.kind in (q.POSITIONAL_ONLY, q.POSITIONAL_OR_KEYWORD)])


def _name(function):
    return getattr(getattr(function, "py_func", function), "__qualname__", repr(function))


def index_error(user_functions, sample=None):
    """The error for an index past an array's end in one of ``user_functions``.

    With a ``sample`` ``(t0, y0 row, params row)`` each ``solve_ivp`` function
    (``fun(t, y, p)``, ``fun(t, y, p, dydt)``, ``g(t, y, p)``) runs once more in
    Python on it, with ``p`` and ``dydt`` as numpy arrays that name themselves
    when indexed past their end: a `DydtIndexError` or a `ParamsIndexError`
    naming the function and numpy's message (index and size). Where nothing
    reproduces (the bad index is reached later in the run, or the functions are
    not ``solve_ivp``'s), a `ParamsIndexError` if no function has a ``dydt``, else
    a `FunctionIndexError` naming both possibilities.
    """
    functions = [f for f in user_functions if f is not None]
    names = ", ".join(repr(_name(f)) for f in functions)
    counts = [_positional(f) for f in functions]
    array_form = 4 in counts
    if sample is not None and all(c in (3, 4) for c in counts):
        t0, y, p = sample
        n = len(y)
        for function, count in zip(functions, counts):
            py = getattr(function, "py_func", function)
            state = _labelled(y, "y") if array_form else tuple(float(v) for v in y)
            arguments = [float(t0), state, _labelled(p, "params")]
            if count == 4:
                arguments.append(_labelled(np.zeros(n), "dydt"))
            try:
                py(*arguments)
            except _Reproduced as found:
                if found.label == "dydt":
                    return DydtIndexError(
                        f"dydt: {_name(function)!r} indexes dydt past its end ({found.detail}); "
                        f"dydt has one element per state component, n = {n} (dydt[0] to "
                        f"dydt[{n - 1}]); no result is returned")
                if found.label == "params":
                    return ParamsIndexError(
                        f"params: a read past the end of a params row, at an index computed "
                        f"at run time, in {_name(function)!r} ({found.detail}); the rows have "
                        f"{len(p)} column{'s' if len(p) != 1 else ''}; no result is returned. "
                        "Give the rows enough columns for every index the functions compute")
                if found.label == "y":
                    return FunctionIndexError(
                        f"y: {_name(function)} reads y past its end ({found.detail}); the "
                        f"state has n = {n} components; no result is returned")
            except Exception:  # noqa: BLE001 - not reproduced in Python; told below
                pass
    if array_form:
        return FunctionIndexError(
            f"an index past the end of an array, computed at run time, in {names}: a write "
            "past dydt (n elements, one per state component) or a read past a params row "
            "(the columns given); not reproduced on the first object's initial state, so "
            "not told apart; no result is returned")
    return ParamsIndexError(
        f"params: a read past the end of a params row, at an index computed at run "
        f"time (such as p[int(p[0])]), in {names}; no result is returned. Give the "
        "rows enough columns for every index the functions compute")


_SIMPLE_LOADS = ("LOAD_FAST", "LOAD_CONST", "LOAD_GLOBAL", "LOAD_DEREF", "LOAD_CLOSURE")


@functools.lru_cache(maxsize=512)
def _instructions(code):
    """A code object's instructions (immutable, so read once: the checks of every call
    read the user's functions again)."""
    import dis
    return tuple(i for i in dis.get_instructions(code) if i.opname not in ("CACHE", "NOP"))


def _resolve(py, name):
    """The object ``name`` means in ``py`` (a global or a closure cell), or None."""
    code = py.__code__
    if name in code.co_freevars and py.__closure__:
        try:
            return py.__closure__[code.co_freevars.index(name)].cell_contents
        except ValueError:
            return None
    return py.__globals__.get(name)


def _passed_to(instructions, k):
    """``(callee name, argument position)`` when instruction ``k`` loads an argument
    of a call whose arguments are all plain loads (``g(t, y, p)``), else None."""
    j = k + 1
    while j < len(instructions) and instructions[j].opname.startswith(_SIMPLE_LOADS) \
            and not (instructions[j].opname == "LOAD_GLOBAL" and instructions[j].arg & 1):
        j += 1
    if j >= len(instructions) or instructions[j].opname not in ("PRECALL", "CALL"):
        return None
    n_args = instructions[j].arg
    position = n_args - 1 - (j - k - 1)
    first = k - position
    if position < 0 or first < 1:
        return None
    if not all(i.opname.startswith(_SIMPLE_LOADS) for i in instructions[first:k]):
        return None
    callee = instructions[first - 1]
    if not callee.opname.startswith(("LOAD_GLOBAL", "LOAD_DEREF")):
        return None
    return callee.argval, position


def computed_subscripts(function, position, _depth=0):
    """Whether ``function`` may read its argument at ``position`` (a params row) at an
    index that is not a constant: ``p[i]``, ``p[int(p[0])]``, a loop over ``p``, or
    ``p`` handed to a function that does (followed through hjit calls whose
    arguments are plain names; anything else counts as computed).

    Such functions are compiled with bounds checks (`bounds_checked`): the
    width check of `params_width` sees constant subscripts only.
    """
    py = getattr(function, "py_func", function)
    code = getattr(py, "__code__", None)
    if code is None or position >= code.co_argcount:
        return False
    name = code.co_varnames[position]
    instructions = _instructions(code)
    for k, a in enumerate(instructions):
        if not (a.opname.startswith("LOAD_FAST") and a.argval == name):
            continue
        b, c = instructions[k + 1:k + 3] if k + 2 < len(instructions) else (None, None)
        if (b is not None and b.opname == "LOAD_CONST" and isinstance(b.argval, int)
                and not isinstance(b.argval, bool) and c.opname == "BINARY_SUBSCR"):
            continue  # p[5]: seen by params_width
        call = _passed_to(instructions, k)
        if call is None or _depth >= 8:
            return True
        callee = _resolve(py, call[0])
        if callee is None or computed_subscripts(callee, call[1], _depth + 1):
            return True
    return False


def reciprocals_wanted(function):
    """Whether ``function`` gets shared reciprocals: ``HAPSIRA_FASTMATH`` (``auto``:
    where the target asks for them, ``SHARED_RECIPROCALS``), unless marked
    `hapsira_core.jit.as_written` or a twin already."""
    from .. import settings
    from ..targets import active
    if getattr(function, "hapsira_as_written", False) \
            or getattr(function, "hapsira_checked_twin", False):
        return False
    if settings.FASTMATH == "auto":
        return bool(getattr(active, "SHARED_RECIPROCALS", False))
    return settings.FASTMATH == "on"


def shared_reciprocals(function):
    """``function``, or its twin whose divisions share reciprocals
    (`hapsira_core.kernels.reciprocals`) where that is wanted and changes
    something; a function whose source cannot be read is used as it is."""
    if not reciprocals_wanted(function):
        return function
    py = getattr(function, "py_func", function)
    try:
        if not reciprocals.rewritten_source(py)[1]:
            return function
    except (reciprocals.SourceUnavailable, SyntaxError):
        return function
    return shared_reciprocals_twin(function)


@factory
def shared_reciprocals_twin(function):
    """The compiled twin of `hjit` function ``function`` with shared reciprocals
    (the target's ``rsqrt``); a factory, so that the disk cache and Dask workers
    can make it again."""
    from ..jit import rsqrt
    made = hjit(reciprocals.twin(getattr(function, "py_func", function), rsqrt))
    made.hapsira_as_written = True  # never rewritten twice
    return made


def bounds_checked(function, position, output=None):
    """``function``, or where its params subscripts are not all constants
    (`computed_subscripts`) a twin compiled with numba's bounds checks on the
    host targets (cpu, parallel).

    A read past the row then raises an IndexError inside the kernel, which
    `hapsira_core.ivp.build.explain` tells as a `ParamsIndexError` naming the
    function; without the check it read neighbouring memory and returned
    garbage with status 0 (different garbage on cpu and parallel). The CUDA
    simulator checks every index anyway (numpy) and raises the same error; on
    a GPU (``GUARDED_READS``) such reads give NaN instead (`guarded_reads_twin`),
    so the object fails alone. Helpers it hands ``p`` to by name
    (``helper(t, p)``) that read it at a computed index get twins of their own
    (`checked_helpers`), recursively; ``p`` reaching a helper another way
    (inside a tuple, through a slice ``p[2:]``) is followed by neither.

    The checks cost no more than a run's noise (docs/benchmarks.md, "Checked
    reads of params"; docs/api.md, "Params reads are checked").
    """
    from ..kernels import guard
    from ..targets import active
    if getattr(function, "hapsira_checked_twin", False) \
            or not (output is not None or computed_subscripts(function, position)):
        return function
    if active.BOUNDS_CHECKS:
        return _mark(bounds_checked_twin(function, position))
    if getattr(active, "GUARDED_READS", False):
        py = getattr(function, "py_func", function)
        try:
            guard.guarded_source(py, position, output)
        except guard.SourceUnavailable as error:
            warnings.warn(f"params reads of {py.__qualname__} are not guarded on this "
                          f"target: {error}", stacklevel=6)
            return function
        return _mark(guarded_reads_twin(function, position, output))
    return function


def _mark(twin):
    """A twin is checked already: `bounds_checked` of it is itself (its reads
    would otherwise be found computed again, and a factory must never return
    its own argument: that recipe would name itself)."""
    twin.hapsira_checked_twin = True
    return twin


def checked_helpers(py, position):
    """``{name: twin}``: the functions that ``py`` hands its argument at
    ``position`` to (``helper(t, p)``, by a global or closure name) and that
    read it at a computed index, each through `bounds_checked` at the position
    it receives it. A helper's own compilation has no bounds checks: without
    its twin a read past the row there went unnoticed."""
    code = py.__code__
    name = code.co_varnames[position]
    instructions = _instructions(code)
    helpers = {}
    for k, a in enumerate(instructions):
        if not (a.opname.startswith("LOAD_FAST") and a.argval == name):
            continue
        call = _passed_to(instructions, k)
        if call is None or call[0] in helpers:
            continue
        callee = _resolve(py, call[0])
        if callable(callee) and computed_subscripts(callee, call[1]):
            twin = bounds_checked(callee, call[1])
            if twin is not callee:
                helpers[call[0]] = twin
    return helpers


def _with_names(py, values):
    """``py`` with some of its global or closure names bound to other objects."""
    import types
    if not values:
        return py
    code = py.__code__
    namespace = dict(py.__globals__)
    cells = list(py.__closure__ or ())
    for name, value in values.items():
        if name in code.co_freevars:
            cells[code.co_freevars.index(name)] = types.CellType(value)
        else:
            namespace[name] = value
    twin = types.FunctionType(code, namespace, py.__name__, py.__defaults__,
                              tuple(cells) if cells else None)
    twin.__kwdefaults__ = py.__kwdefaults__
    twin.__qualname__, twin.__module__ = py.__qualname__, py.__module__
    return twin


@factory
def bounds_checked_twin(function, position=None):
    """``function`` compiled again with ``boundscheck=True``, calling the checked
    twins of the helpers it hands its params row (argument ``position``) to
    (`checked_helpers`); once per function, and a factory, so that Dask
    workers and the disk cache can make it again."""
    py = getattr(function, "py_func", function)
    if position is not None:
        py = _with_names(py, checked_helpers(py, position))
    return hjit(boundscheck=True)(py)


@hjit
def read_or_nan(row, index):
    """``row[index]`` (negative counts from the end), or NaN past either end."""
    n = row.shape[0]
    i = index + n if index < 0 else index
    if i < 0 or i >= n:
        return math.nan
    return row[i]


@hjit
def store_or_refuse(row, index, value):
    """``row[index] = value`` (negative counts from the end); True, and nothing
    written, past either end."""
    n = row.shape[0]
    i = index + n if index < 0 else index
    if i < 0 or i >= n:
        return True
    row[i] = value
    return False


@hjit
def poison(row, flag):
    """NaN into every element of ``row`` where ``flag`` is set."""
    if flag:
        for i in range(row.shape[0]):
            row[i] = math.nan


@factory
def guarded_reads_twin(function, position, output=None):
    """``function`` made again with its computed reads of argument ``position``
    guarded (`hapsira_core.kernels.guard`): for targets that cannot raise in a
    kernel, which set ``GUARDED_READS`` (a GPU); its source must be readable
    (`bounds_checked` checks that first)."""
    from ..kernels import guard
    py = getattr(function, "py_func", function)
    return hjit(guard.guarded_function(py, position, read_or_nan,
                                       names=checked_helpers(py, position), output=output,
                                       store=store_or_refuse, poison=poison))


def bounds_checked_events(events, position):
    """``events`` with each user ``g`` through `bounds_checked` (copies; built-in
    events that bring their own device function are left as they are)."""
    import copy
    out = []
    for event in events:
        if getattr(event, "_device_function", None) is None:
            checked = bounds_checked(event.g, position)
            if checked is not event.g:
                event = copy.copy(event)
                event.g = checked
        out.append(event)
    return tuple(out)


def jacobian_option(jac, method, n, stm=False, stacklevel=4, n_objects=1):
    """``(jac, rows)``: ``jac=`` of `solve_ivp` for ``method`` (a name) at n components.

    None; the user's hjit function, checked (`hapsira_core.ivp.sensitivities.check_jac`:
    a TypeError naming ``jac`` for a wrong form); or, as scipy takes it, a constant
    matrix: an (n, n) array (a scipy sparse matrix is made dense), or one per object,
    (N, n, n) (``n_objects`` N). A matrix becomes `sensitivities.params_jacobian`, which
    reads it from the params rows, and ``rows`` the ``(1 or N, n * n)`` numbers
    `with_jacobian` appends there (None otherwise). The explicit methods do not use
    ``jac`` and, as scipy's (1.17: "The following arguments have no effect for a chosen
    solver: `jac`."), say so with a UserWarning; then ``(None, None)``."""
    if jac is None:
        return None, None
    from . import methods, sensitivities
    rows = None
    if callable(jac):
        sensitivities.check_jac(jac, n)
    else:
        rows = constant_jacobian_rows(jac, n, n_objects)
        jac = sensitivities.params_jacobian
    if methods.get(method).state_shape != "array":
        warnings.warn("The following arguments have no effect for a chosen solver: `jac`.",
                      UserWarning, stacklevel=stacklevel)
        return None, None
    if stm:
        raise ValueError("jac: not with stm=True in this version (the transition matrix "
                         "uses the automatic Jacobian of fun)")
    return jac, rows


def constant_jacobian_rows(jac, n, n_objects):
    """A constant ``jac=`` matrix, (n, n) or (N, n, n), as ``(1 or N, n * n)`` rows
    (row-major): real and finite, or a ValueError naming ``jac``."""
    if hasattr(jac, "toarray"):  # scipy.sparse, as scipy's Radau and BDF take it
        jac = jac.toarray()
    matrix = real_array(jac, "jac", "an hjit function or a constant matrix of real numbers")
    shapes = f"(n, n) = ({n}, {n})" + (f" or (N, n, n) = ({n_objects}, {n}, {n})"
                                       if n_objects > 1 else "")
    if matrix.shape == (n, n):
        matrix = matrix[None]
    elif matrix.ndim != 3 or matrix.shape != (n_objects, n, n):
        raise ValueError(f"jac: expected a constant matrix of shape {shapes}, got shape "
                         f"{matrix.shape}")
    bad = np.flatnonzero(~np.isfinite(matrix).all(axis=(1, 2)))
    if len(bad):
        which = "" if len(matrix) == 1 else f" of object {bad[0]}"
        raise ValueError(f"jac: the constant matrix{which} holds NaN or infinite entries")
    return matrix.reshape(len(matrix), n * n)


def with_jacobian(rows, matrices):
    """The params ``rows`` (``(1 or N, P)``) with a constant Jacobian's ``(1 or N, n * n)``
    numbers (`constant_jacobian_rows`) appended as their last columns, where
    `hapsira_core.ivp.sensitivities.params_jacobian` reads them (None: ``rows``)."""
    if matrices is None:
        return rows
    count = max(rows.shape[0], matrices.shape[0])
    return np.concatenate([np.broadcast_to(rows, (count, rows.shape[1])),
                           np.broadcast_to(matrices, (count, matrices.shape[1]))], axis=1)
