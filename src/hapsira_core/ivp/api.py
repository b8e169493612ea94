"""The core every front of ``solve_ivp`` calls: `Event`, `Problem` (a batch without its
data: kernel, shared rows, output shapes) and `integrate` (a `Problem` run on numpy arrays).

The fronts (`hapsira_core.fronts`: numpy, JAX, Dask) check their arguments with
`.checks`, hand them here, and shape what comes back as the result types of
`.results`; nothing here knows which front called.
"""

import functools
import math

import numpy as np

from ..kernels.cache import factory
from ..kernels.errors import check_returns, is_real, is_state
from .. import memory
from ..jit import hjit
from ..kernels.kernel import Columns
from . import build
from . import dense as dense_output_module
from .checks import shown
from .layout import ICONF, INFO, RECORD_DENSE, RECORD_STATES, config_row
from .state import fun_form

#: Status set before a host kernel runs; never written by the loop (see `Problem.run`).
ABORTED = np.iinfo(np.int64).min

#: With ``progress=True``: the bar advances once per chunk of objects, about this many
#: chunks in all, none smaller than `PROGRESS_MIN_CHUNK` (on cuda, than a launch's
#: ``HAPSIRA_CUDA_CHUNK``): each chunk is one kernel call.
PROGRESS_UPDATES = 100
PROGRESS_MIN_CHUNK = 1024


def progress_chunk(n_objects):
    """Objects per kernel call when a progress bar is shown."""
    from ..targets import active as target

    smallest = PROGRESS_MIN_CHUNK
    if hasattr(target, "progress_min_chunk"):  # cuda: a launch's worth
        smallest = max(smallest, target.progress_min_chunk())
    return max(1, smallest, -(-n_objects // PROGRESS_UPDATES))


def _rows(array, start, stop):
    """Rows ``start:stop`` of a per-object input (`Columns` stay `Columns`: on cuda their
    blocks may be device arrays); a shared row (one row for N objects) whole."""
    if isinstance(array, Columns):
        return Columns(*(block[start:stop] for block in array.blocks))
    return array if array.shape[0] == 1 else array[start:stop]

__all__ = ["Event", "EventBase", "Problem", "integrate", "diagnosis", "with_sensitivities"]


def _terminal_count(terminal):
    if terminal is None:  # scipy 1.17 takes None as 0: not terminal (test_event_terminal_iv)
        return 0
    if isinstance(terminal, (bool, np.bool_)):
        return int(terminal)
    if isinstance(terminal, (int, np.integer)) and terminal >= 0:
        return int(terminal)
    raise ValueError(f"terminal: expected True, False or a non-negative int, "
                     f"got {shown(terminal)}")


def _direction(direction):
    try:
        value = float(direction)
    except (TypeError, ValueError):
        value = math.nan
    if value not in (-1.0, 0.0, 1.0):
        raise ValueError(f"direction: expected -1, 0 or +1, got {shown(direction)}")
    return value


@factory
def with_constants(g):
    """``g(t, y, p)`` in the loop's call form ``g(t, y, p, c)``."""
    @hjit
    def event(t, y, p, c):
        return g(t, y, p)
    return event


class EventBase:
    """What every event has: ``g``, ``terminal`` and ``direction``, checked.

    As in ``scipy.integrate.solve_ivp``: ``direction`` +1 counts only upward
    crossings, -1 only downward, 0 both; ``terminal`` True stops the object
    at the first occurrence, an int n at the n-th, False never. Subclasses
    say how the loop calls ``g`` (`device_function`, ``g(t, y, p, c)``) and
    which numbers it gets as ``c`` (`constants`).
    """

    def __init__(self, g, terminal=False, direction=0):
        if not callable(g):
            raise TypeError(f"g: expected an hjit function, got {type(g).__name__}")
        self.g = g
        self.terminal = terminal
        self.max_occurrences = _terminal_count(terminal)
        self.direction = _direction(direction)


class Event(EventBase):
    """An event of `solve_ivp()`: a zero of ``g(t, y, p) -> float``, an ``hjit``
    function; see `EventBase` for ``terminal`` and ``direction``."""

    @property
    def device_function(self):
        """The compiled ``g(t, y, p, c)`` the solve loop calls."""
        return with_constants(self.g)

    @property
    def constants(self):
        """Numbers handed to `device_function` as ``c``."""
        return ()

    def __repr__(self):
        return (f"{type(self).__name__}({getattr(self.g, '__name__', self.g)!r}, "
                f"terminal={self.terminal!r}, direction={int(self.direction)})")


class Problem:
    """Everything about a batch but the per-object data: kernel, shared rows, output shapes.

    The numpy front (`integrate()`), the JAX front and the Dask front
    share it: they differ only in where the arrays live. ``method``: a name
    in `METHODS`; ``fun``: ``fun(t, y, p)`` or ``fun(t, y, p, dydt)``;
    ``events``: objects with ``device_function``, ``constants``,
    ``direction`` and ``max_occurrences``; ``records``/``y_records``:
    occurrences of each event whose time/state are kept; ``user_functions``:
    named first in compile errors; ``max_step``, ``first_step`` (None: scipy's
    choice): scipy's, checked (`checks.step_sizes`); ``end_states``: an output time
    at a step's end takes the step's end state (the default ``t_eval``; see
    `layout.ICONF`). These three are data: new values never recompile.
    ``t_eval``: ``(M,)`` shared by all objects or ``(N, M)``, one row per object
    (trailing NaN: no output there); kept as ``(1 or N, M)``. With `run`'s ``t0``
    and ``tf`` (numbers or ``(N,)`` arrays) these are data too: the kernel takes
    them as per-object rows, a shared one broadcast. ``records``: the step records
    to keep (``step_records``: `layout.RECORD_STATES`, `layout.RECORD_DENSE` or their sum; 0: none),
    which `run` sizes with a first pass that counts steps (`.dense`).
    """

    def __init__(self, method, fun, n, events, t_eval, max_steps, records, y_records,
                 user_functions, diagnose=None, *, max_step=math.inf, first_step=None,
                 end_states=False, jac=None, step_records=0):
        self.method, self.fun, self.n = method, fun, n
        self.events = tuple(events)
        self.n_events = len(self.events)
        self.slots = max(self.n_events, 1)  # at least one slot: zero-size rows upset gufuncs
        self.t_eval = t_eval if t_eval.ndim == 2 else t_eval[None, :]
        self.records = records
        self.y_records = y_records if self.n_events else 0
        self.max_steps = max_steps
        self.max_step = float(max_step)
        self.first_step = 0.0 if first_step is None else float(first_step)
        self.end_states = bool(end_states)
        self.step_records = int(step_records)
        self.user_functions = user_functions
        #: ``diagnose(y0, params, t0)``: run when the kernel fails, raises a clearer error
        self.diagnose = diagnose
        self.kernel = build.kernel(method, n, fun, tuple(e.device_function for e in events),
                                   self.y_records > 0, jac=jac,
                                   records=bool(self.step_records))

    def shared_inputs(self, t0, tf, rtol, atol, records=None):
        """``(t_eval, conf, iconf, ev_direction, ev_max, ev_consts)`` as numpy arrays;
        ``t_eval`` ``(1 or N, M)``, ``conf`` ``(1, nc)``, or ``(N, nc)`` where ``t0`` or
        ``tf`` is an ``(N,)`` array (per-object spans)."""
        width = max([len(e.constants) for e in self.events] + [1])
        ev_direction = np.zeros(self.slots)
        ev_max = np.zeros(self.slots, dtype=np.int64)
        ev_consts = np.zeros((self.slots, width))
        for index, event in enumerate(self.events):
            ev_direction[index] = event.direction
            ev_max[index] = event.max_occurrences
            ev_consts[index, : len(event.constants)] = event.constants
        layout = config_row(self.n)
        conf = layout.pack(t0=0.0, tf=0.0, rtol=rtol, atol=atol, max_step=self.max_step,
                           first_step=self.first_step)
        objects = max(np.size(t0), np.size(tf))
        conf = np.repeat(conf[None, :], objects, axis=0)
        conf[:, layout.t0] = t0
        conf[:, layout.tf] = tf
        iconf = ICONF.pack(max_steps=self.max_steps, n_events=self.n_events,
                           y_event_records=self.y_records, end_states=int(self.end_states),
                           records=self.step_records if records is None else records)
        return self.t_eval, conf, iconf, ev_direction, ev_max, ev_consts

    def output_shapes(self, n_objects, steps=0):
        """``{name: (shape, dtype)}`` of the kernel's outputs, in argument order;
        with step records, room for ``steps`` steps per object."""
        n, slots = self.n, self.slots
        # without events the kernel still gets one slot; keep it one number wide
        records = max(self.records, 1) if self.n_events else 1
        outputs = self.t_eval.shape[-1]
        if self.step_records & RECORD_STATES:  # t_eval="steps": a state per breakpoint
            outputs = steps + 1
        shapes = {
            "y": ((n_objects, outputs, n), np.float64),
            "info": ((n_objects, INFO.size), np.int64),
            "t_events": ((n_objects, slots, records), np.float64),
            "y_events": ((n_objects, slots, max(self.y_records, 1), n), np.float64),
            "n_events": ((n_objects, slots), np.int64),
        }
        if self.step_records:
            k1 = dense_output_module.coefficient_states(self.method, n) + 1
            shapes["steps"] = ((n_objects, steps + 1, 2), np.float64)
            shapes["dense"] = ((n_objects, max(steps, 1) if self.step_records & RECORD_DENSE else 1,
                                k1 if self.step_records & RECORD_DENSE else 1, n), np.float64)
        shapes["scratch"] = ((n_objects, slots, 2), np.float64)
        shapes["work"] = ((n_objects, build.work_rows(self.method, n, self.fun), n), np.float64)
        return shapes

    def _run_chunks(self, y0, params, t_eval, rows, outputs, diagnose, sample):
        """The kernel on chunks of objects (`progress_chunk`), a tqdm bar advanced after
        each (`hapsira_core.progress`): outputs are row slices of the whole ones."""
        from ..progress import bar as progress_bar

        n_objects = y0.shape[0]
        chunk = progress_chunk(n_objects)
        bar = progress_bar(n_objects, f"solve ({self.method})")
        try:
            for start in range(0, max(n_objects, 1), chunk):
                stop = min(start + chunk, n_objects)
                build.run(self.kernel, (_rows(y0, start, stop), _rows(t_eval, start, stop),
                                        _rows(params, start, stop),
                                        _rows(rows[0], start, stop), *rows[1:],
                                        *(out[start:stop] for out in outputs.values())),
                          self.user_functions, diagnose, sample)
                bar.update(stop - start)
        finally:
            bar.close()

    def trim(self, outputs):
        """The outputs without the kernel's padding (event slots, records), as a dict."""
        ev, records, y_records = self.n_events, self.records, self.y_records
        return {"y": outputs["y"], "info": outputs["info"],
                "t_events": outputs["t_events"][:, :ev, :records],
                "y_events": outputs["y_events"][:, :ev, :y_records],
                "n_events": outputs["n_events"][:, :ev]}

    def run(self, y0, params, t0, tf, rtol, atol, progress=False, on_device=(), into=None):
        """Run the kernel on numpy arrays (or, on cuda, device arrays for ``y0``;
        ``y0`` may also be `hapsira_core.kernels.kernel.Columns`).

        Outputs that would not fit in memory are refused before anything is
        allocated (`hapsira_core.memory.check()`). ``progress``: call the kernel
        on chunks of objects (`progress_chunk`) and advance a tqdm bar after each;
        every object's numbers are the same as in one call (objects are independent).
        ``on_device``: names of outputs left in the target's own memory (made by
        ``targets.active.device_empty``: a cuda device array, numpy on the host targets),
        never copied to the host (``"y"`` for a caller whose next kernel reads the states
        there: `hapsira_cowell.conjunctions.screen`); not with step records.
        ``into``: ``{name: array}``, outputs the kernel writes in place of fresh ones
        (`checked_into`; numpy arrays, or for names in ``on_device`` the target's),
        for a caller that runs chunk after chunk into the same memory (the screen's
        samples: fresh arrays are faulted in afresh each time); not with step records.
        """
        if not self.step_records:
            return self.trim(self._run(y0, params, t0, tf, rtol, atol, progress,
                                       on_device=on_device, into=into))
        if on_device:
            raise ValueError("on_device: not with step records")
        if into:
            raise ValueError("into: not with step records")
        fewest = self.fewest_steps(t0, tf)
        if fewest:  # records that cannot fit are refused before the counting pass
            self._check_memory(self.output_shapes(y0.shape[0], fewest), y0.shape[0], fewest,
                               self.step_records, at_least=True)
        # How many steps to record: a first pass that only counts them (`.dense`)
        counted = self._run(y0, params, t0, tf, rtol, atol, progress, 0, 0)
        steps = int(counted["info"][:, INFO.nsteps].max(initial=0))
        outputs = self._run(y0, params, t0, tf, rtol, atol, progress, steps, self.step_records)
        trimmed = self.trim(outputs)
        trimmed["steps"], trimmed["dense"] = outputs["steps"], outputs["dense"]
        return trimmed

    def fewest_steps(self, t0, tf):
        """A lower bound of the most steps an object takes: ``|tf - t0| / max_step``
        (each accepted step is at most ``max_step``), at most ``max_steps``; 0 where
        it is unknown (no ``max_step``, or a terminal event may stop objects early).
        An object that fails before ``tf`` takes fewer; the bound assumes they arrive."""
        if not math.isfinite(self.max_step) or self.max_step <= 0.0 or any(
                e.max_occurrences for e in self.events):
            return 0
        span = np.abs(np.asarray(tf, dtype=np.float64) - np.asarray(t0, dtype=np.float64))
        longest = float(np.max(span, initial=0.0))
        if not math.isfinite(longest):
            return 0
        return int(min(math.floor(longest / self.max_step), self.max_steps))

    def _check_memory(self, host_shapes, n_objects, steps, records, at_least=False):
        """`memory.check` of one run's host outputs; with step records the message
        names ``steps`` (``at least``: `fewest_steps`, checked before the counting pass)."""
        if not records:
            memory.check(host_shapes, n_objects, self.t_eval.shape[-1])
            return
        k1 = host_shapes["dense"][0][2]
        what = (f"{n_objects} objects x " + (f"at least {steps} steps (|tf - t0| / max_step, "
                                             if at_least else f"{steps} steps (")
                + (f"an interpolant of {k1} x {self.n} numbers"
                   if records & RECORD_DENSE else f"a state of {self.n} numbers")
                + " per step)")
        memory.check(host_shapes, n_objects, self.t_eval.shape[-1], what=what)

    def _run(self, y0, params, t0, tf, rtol, atol, progress, steps=0, records=None,
             on_device=(), into=None):
        """One run of the kernel: its outputs (untrimmed); with step records, room for
        ``steps`` steps per object and the records ``records`` (`layout.ICONF`);
        ``on_device``, ``into``: as for `run`."""
        from ..targets import active

        shapes = self.output_shapes(y0.shape[0], steps)
        unknown = set(on_device) - set(shapes)
        if unknown:
            raise ValueError(f"on_device: no output named {sorted(unknown)}")
        into = checked_into(into, shapes, on_device)
        host_shapes = {name: shape for name, shape in shapes.items()
                       if name not in on_device and name not in into}
        self._check_memory(host_shapes, y0.shape[0], steps, records)
        outputs = {name: into[name] if name in into else
                   (np.empty if name in host_shapes else active.device_empty)(shape, dtype)
                   for name, (shape, dtype) in shapes.items()}
        t_eval, *rows = self.shared_inputs(t0, tf, rtol, atol, records)
        if self.step_records & RECORD_STATES:  # no output times: a state per breakpoint
            t_eval = np.full((1, steps + 1), np.nan)
        diagnose = None
        on_host = isinstance(y0, np.ndarray) or (
            isinstance(y0, Columns) and all(isinstance(b, np.ndarray) for b in y0.blocks))
        if self.diagnose is not None and on_host and len(y0):
            first_t0 = float(np.ravel(t0)[0])

            def diagnose():
                self.diagnose(np.asarray(y0[:1]), params, first_t0)
        # Every path of the loop writes a status: one left at ABORTED means the object's
        # body raised (a bounds check, `checks.bounds_checked`) and numba's parallel
        # gufunc dropped the exception, as it does outside a thread's first object. Only
        # there: elsewhere the exception arrives or nothing raises (cuda), and the prefill
        # and check would cost a pass over many objects' `info` (its first touch).
        drops_exceptions = getattr(active, "DROPS_EXCEPTIONS", False)
        if drops_exceptions:
            outputs["info"][:, INFO.status] = ABORTED
        sample = None
        if on_host and len(y0):
            sample = (float(np.ravel(t0)[0]), np.array(np.asarray(y0[:1])[0], dtype=np.float64),
                      np.array(params[0], dtype=np.float64))
        if progress:
            self._run_chunks(y0, params, t_eval, rows, outputs, diagnose, sample)
        else:
            build.run(self.kernel, (y0, t_eval, params, *rows, *outputs.values()),
                      self.user_functions, diagnose, sample)
        if drops_exceptions:
            aborted = outputs["info"][:, INFO.status] == ABORTED
            if aborted.any():
                build.explain(IndexError(f"index is out of bounds ({int(aborted.sum())} objects "
                                         "stopped by a bounds check)"), self.user_functions,
                              sample=sample)
                raise RuntimeError(f"{int(aborted.sum())} objects' kernels raised")  # not reached
        return outputs


def checked_into(into, shapes, on_device=()):
    """``into`` (`Problem.run`) checked against the run's output ``shapes`` (``{name:
    (shape, dtype)}``) by `check_output`: a numpy array unless its name is in
    ``on_device``. Returns it as a dict (empty for None)."""
    into = dict(into or {})
    for name, array in into.items():
        if name not in shapes:
            raise ValueError(f"into: no output named {name!r}; the outputs are "
                             f"{sorted(shapes)}")
        check_output(array, *shapes[name], f"into[{name!r}]", name not in on_device)
    return into


def check_output(array, shape, dtype, what, on_host=True):
    """That ``array``, which a kernel is to write, has ``shape`` and ``dtype``, and
    (``on_host``) is a C-ordered writable numpy array; a ValueError naming ``what``."""
    if tuple(array.shape) != tuple(shape) or np.dtype(array.dtype) != np.dtype(dtype):
        raise ValueError(f"{what}: expected a {np.dtype(dtype)} array of shape "
                         f"{tuple(shape)}, got {np.dtype(array.dtype)} {tuple(array.shape)}")
    if not on_host:
        return
    if not isinstance(array, np.ndarray):
        raise ValueError(f"{what}: expected a numpy array (the output is on the host), got "
                         f"{type(array).__name__}")
    if not (array.flags.c_contiguous and array.flags.writeable):
        raise ValueError(f"{what}: expected a C-ordered writable array")


def integrate(method, fun, y0, t0, tf, t_eval, rtol, atol, params, events, max_steps,
              records, y_records, user_functions, diagnose=None, progress=False, *,
              max_step=math.inf, first_step=None, end_states=False, jac=None,
              step_records=0, on_device=()):
    """Run the kernel on checked arrays; the arrays it wrote, as a dict (those named in
    ``on_device`` left in the target's memory: `Problem.run`).

    ``y0`` ``(N, n)``, ``t0``/``tf`` numbers or ``(N,)``, ``t_eval`` ``(M,)`` or
    ``(N, M)``, ``rtol``/``atol`` ``(n,)``,
    ``params`` ``(1 or N, P)``; see `Problem` for the rest (``max_step``,
    ``first_step``, ``end_states`` too). Returns
    ``y`` ``(N, M, n)``, ``info`` ``(N, 3)``, ``t_events`` ``(N, E, C)``,
    ``y_events`` ``(N, E, C, n)``, ``n_events`` ``(N, E)``; with ``step_records``
    also ``steps`` ``(N, S + 1, 2)`` and ``dense`` (`Problem.run`, `.loop.make_solve`).
    """
    problem = Problem(method, fun, y0.shape[1], events, t_eval, max_steps, records, y_records,
                      user_functions, diagnose, max_step=max_step, first_step=first_step,
                      end_states=end_states, jac=jac, step_records=step_records)
    return problem.run(y0, params, t0, tf, rtol, atol, progress, on_device)


def _diagnose(fun, events, y0, params, t0):
    """After a failed kernel: does each user function return what the loop expects?"""
    n = y0.shape[1]
    sample = (t0, tuple(float(v) for v in y0[0]), params[0])
    if fun_form(fun) == "array":  # the events get y as an array too; fun returns nothing
        sample = (t0, np.array(y0[0], dtype=np.float64), params[0])
    else:
        check_returns(fun, sample, lambda r: is_state(r, n),
                      f"a tuple of {n} floats, one per state component")
    for event in events:
        check_returns(event.g, sample, is_real, "a float (the event function's value)")


def diagnosis(fun, events):
    """``diagnose(y0, params, t0)`` of `Problem` for ``solve_ivp``'s functions, on every
    front: names ``fun`` when what it returns does not fit the state."""
    return functools.partial(_diagnose, fun, events)


def with_sensitivities(fun, user_fun, n, rtol, atol, y0, diagnose, xp=None):
    """``stm=True`` on every front: the state and its matrix as one array-form system
    (`.sensitivities.augmented`), each state followed by the identity (``xp``: the
    array module of ``y0``, numpy by default) and ``diagnose`` on the state's n columns.
    Returns ``(fun, rtol, atol, y0, diagnose)``."""
    from . import sensitivities
    fun, rtol, atol = sensitivities.augmented(fun, user_fun, n, rtol, atol)
    y0 = sensitivities.augmented_states(y0, n, xp)
    return fun, rtol, atol, y0, functools.partial(_diagnose_state, diagnose, n)


def _diagnose_state(diagnose, n, y0, params, t0):
    """`diagnosis` of an augmented run (``stm=True``) on the state's n columns."""
    diagnose(y0[:, :n], params, t0)
