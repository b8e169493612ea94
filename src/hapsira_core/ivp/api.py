"""``solve_ivp``: scipy's explicit Runge-Kutta methods for N objects at once."""

import functools
import math

import numpy as np

from ..kernels.cache import factory
from ..kernels.errors import check_returns, is_real, is_state
from .. import memory
from ..jit import hjit
from ..kernels.kernel import Columns
from ..progress import check as check_progress
from . import build, checks, methods
from . import dense as dense_output_module
from .layout import ICONF, INFO, RECORD_DENSE, RECORD_STATES, STATUS_MESSAGES, config_row
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

__all__ = ["solve_ivp", "Event", "EventBase", "IVPResult", "ObjectResult", "Problem", "integrate"]


def _terminal_count(terminal):
    if terminal is None:  # scipy 1.17 takes None as 0: not terminal (test_event_terminal_iv)
        return 0
    if isinstance(terminal, (bool, np.bool_)):
        return int(terminal)
    if isinstance(terminal, (int, np.integer)) and terminal >= 0:
        return int(terminal)
    raise ValueError(f"terminal: expected True, False or a non-negative int, got {terminal!r}")


def _direction(direction):
    try:
        value = float(direction)
    except (TypeError, ValueError):
        value = math.nan
    if value not in (-1.0, 0.0, 1.0):
        raise ValueError(f"direction: expected -1, 0 or +1, got {direction!r}")
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
            k1 = dense_output_module.coefficient_states(self.method) + 1
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

    def run(self, y0, params, t0, tf, rtol, atol, progress=False):
        """Run the kernel on numpy arrays (or, on cuda, device arrays for ``y0``;
        ``y0`` may also be `hapsira_core.kernels.kernel.Columns`).

        Outputs that would not fit in memory are refused before anything is
        allocated (`hapsira_core.memory.check()`). ``progress``: call the kernel
        on chunks of objects (`progress_chunk`) and advance a tqdm bar after each;
        every object's numbers are the same as in one call (objects are independent).
        """
        if not self.step_records:
            return self.trim(self._run(y0, params, t0, tf, rtol, atol, progress))
        # How many steps to record: a first pass that only counts them (`.dense`)
        counted = self._run(y0, params, t0, tf, rtol, atol, progress, 0, 0)
        steps = int(counted["info"][:, INFO.nsteps].max(initial=0))
        outputs = self._run(y0, params, t0, tf, rtol, atol, progress, steps, self.step_records)
        trimmed = self.trim(outputs)
        trimmed["steps"], trimmed["dense"] = outputs["steps"], outputs["dense"]
        return trimmed

    def _run(self, y0, params, t0, tf, rtol, atol, progress, steps=0, records=None):
        """One run of the kernel: its outputs (untrimmed); with step records, room for
        ``steps`` steps per object and the records ``records`` (`layout.ICONF`)."""
        shapes = self.output_shapes(y0.shape[0], steps)
        if records:
            k1 = shapes["dense"][0][2]
            what = (f"{y0.shape[0]} objects x {steps} steps ("
                    + (f"an interpolant of {k1} x {self.n} numbers"
                       if records & RECORD_DENSE else f"a state of {self.n} numbers")
                    + " per step)")
            memory.check(shapes, y0.shape[0], self.t_eval.shape[-1], what=what)
        else:
            memory.check(shapes, y0.shape[0], self.t_eval.shape[-1])
        outputs = {name: np.empty(shape, dtype) for name, (shape, dtype) in shapes.items()}
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
        # gufunc dropped the exception, as it does outside a thread's first object.
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
        aborted = outputs["info"][:, INFO.status] == ABORTED
        if aborted.any():
            build.explain(IndexError(f"index is out of bounds ({int(aborted.sum())} "
                                     "objects stopped by a bounds check)"), self.user_functions,
                          sample=sample)
            raise RuntimeError(f"{int(aborted.sum())} objects' kernels raised")  # not reached
        return outputs


def integrate(method, fun, y0, t0, tf, t_eval, rtol, atol, params, events, max_steps,
              records, y_records, user_functions, diagnose=None, progress=False, *,
              max_step=math.inf, first_step=None, end_states=False, jac=None,
              step_records=0):
    """Run the kernel on checked arrays; the arrays it wrote, as a dict.

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
    return problem.run(y0, params, t0, tf, rtol, atol, progress)


def _times(t_span, t_eval, n_objects=None):
    """``(t0, tf, t_eval)`` checked (`checks.time_spans`, `checks.output_times`): numbers
    and ``(M,)``, or with ``n_objects`` per-object ``(N,)`` spans and ``(N, M)`` rows.
    Without ``n_objects`` (the JAX and Dask fronts) per-object times are refused."""
    if n_objects is None:
        checks.refuse_per_object_times(t_span, t_eval, "JAX or Dask")
        n_objects = 1
    t0, tf = checks.time_spans(t_span, n_objects)
    return t0, tf, checks.output_times(t_eval, t0, tf, n_objects)


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


def solve_ivp(fun, t_span, y0, method="DOP853", t_eval=None, rtol=1e-3, atol=1e-6, *,
              params=None, events=(), max_steps=100_000, max_event_records=64,
              progress=False, max_step=math.inf, first_step=None, args=None, stm=False,
              jac=None, dense_output=False):
    """Integrate ``dy/dt = fun(t, y, p)`` for one object or N, as ``scipy.integrate.solve_ivp``.

    Parameters
    ----------
    fun : hjit function
        ``fun(t, y, p) -> tuple of n floats`` (``y`` a tuple of n floats; n up
        to `hapsira_core.ivp.state.TUPLE_MAX_N`) or ``fun(t, y, p, dydt)``,
        which fills the 1-D array ``dydt`` and returns nothing (``y`` a 1-D
        array; any n, compiled in the same time whatever n is); ``p`` the
        object's params row. The form chooses the state's shape (`.state`).
    t_span : (t0, tf)
        Shared by all objects; ``tf < t0`` integrates backward. Or per object:
        ``t0`` and ``tf`` arrays of shape ``(N,)`` (a number beside an array is
        shared), each object integrated over its own span, in its own direction;
        ``t0 == tf`` gives that object its initial state. NaN and infinite
        times are refused up front (naming the object). Data: new spans never
        recompile.
    y0 : array_like, (n,) or (N, n)
        Initial states (any n >= 1; above ``TUPLE_MAX_N`` with the array form of ``fun``).
    method : "DOP853", "RK45" or "RK23"
        scipy's explicit methods, with scipy's error estimate, step-size
        control, first step and dense output.
    t_eval : array_like, (M,) or (N, M), or "steps", optional
        Output times within ``t_span``, sorted in the direction of
        integration; default ``[tf]`` (with per-object spans, each object's
        own ``tf``: ``t`` of shape ``(N, 1)``). ``"steps"``: every accepted
        step, as scipy's ``t_eval=None`` gives them (``res[i].t``, ``res[i].y``
        the object's t0, each step's end and a terminal event's time last;
        ``res.t`` ``(N, S + 1)`` and ``res.y`` NaN-padded to the most steps S
        of any object). Not the default: a million objects' steps rarely fit in
        memory. The kernel runs twice (a first pass counts the steps, then the
        size is checked against the memory limit: `hapsira_core.ivp.dense`). ``(N, M)``: one row per object,
        within its own span and sorted in its own direction; a row shorter
        than M is padded with trailing NaN (its states there are NaN, and
        ``res[i]`` leaves them out). Then ``res.t`` is ``(N, M)``.
    rtol, atol : float or (n,)
        Tolerances as in scipy (rtol below 100 eps is raised to it, with a
        warning).
    params : array_like, (P,) or (N, P), optional
        Numbers handed to ``fun`` and events as ``p`` (shared or one row per
        object); new values never recompile.
    events : Event or sequence of Event
        Zeros of ``g(t, y, p)``, as scipy's events (``y`` as ``fun`` gets it).
    max_steps : int
        Accepted steps allowed per object (status -2 beyond).
    max_event_records : int
        Occurrences of each event whose time and state are kept (C).
    progress : bool
        Show a tqdm progress bar on stderr (``pip install 'hapsira-cowell[progress]'``),
        for runs of minutes: the objects are solved in chunks (about 100, of at least
        `PROGRESS_MIN_CHUNK` objects), the bar advancing after each. The results are
        the same, bit for bit, as without it.
    max_step : float
        scipy's: the largest step size (default inf, no cap); it caps the
        automatic first step too. One number shared by all objects.
    first_step : float, optional
        scipy's: the first step size, at most ``|tf - t0|``, instead of the
        automatic choice (which costs one evaluation of ``fun``). Shared by all objects.
    args : tuple of numbers, optional
        scipy's ``args``: numbers shared by all objects, appended to each object's
        params row (``p[P:]`` after ``P`` params columns; ``p[0:]`` without params),
        so ``fun(t, y, p)`` and the events read them there. New values never recompile.
    stm : bool
        Also integrate the state transition matrix ``Phi = d y(t) / d y0``
        (the variational equations ``dPhi/dt = J(t, y) Phi``, ``Phi(t0) = I``,
        with J the automatic Jacobian of ``fun``: `hapsira_core.ivp.jacobian`;
        tuple form only): ``res.stm`` ``(N, n, n, M)``, ``res.stm[i, :, :, j]``
        the matrix of object i at ``t[j]``. The error control takes the state
        alone, so that the accepted steps and the states are those of the same
        call without ``stm``. Events get ``y`` with the matrix after the state
        (n + n * n numbers, an array); ``res.stm_events`` holds the matrix at each
        recorded event, one ``(N, C, n, n)`` per event (Phi at t_event, that time
        held fixed: `hapsira_core.ivp.sensitivities.event_matrices`).
    dense_output : bool
        scipy's: keep every step's interpolant (the same as scipy's: RK45's 4
        coefficient states, RK23's 3, DOP853's 7 and ``y_old``) so that
        ``res[i].sol(t)`` is object i's continuous solution, as scipy's
        ``OdeSolution``, and ``res.sol(t)`` all objects' (``(N, n, len(t))``).
        Every step then builds its interpolant, as in scipy (``nfev`` as
        scipy's: DOP853 3 more per step). The kernel runs twice (a first pass
        counts the steps; the records' size, steps x coefficients x objects,
        is checked against the memory limit before the second: `hapsira_core.ivp.dense`).

    Returns
    -------
    IVPResult
        (This is the numpy front; the public ``hapsira_core.ivp.solve_ivp``
        routes Dask arrays to the Dask front first: `hapsira_core.fronts`.)
    """
    progress = check_progress(progress)
    y0, single = checks.states(y0)
    n_objects, n = y0.shape
    if not isinstance(dense_output, (bool, np.bool_)):
        raise TypeError(f"dense_output: expected True or False, got {dense_output!r}")
    all_steps = isinstance(t_eval, str)
    if all_steps and t_eval != "steps":
        raise ValueError(f"t_eval: expected an array of times, None or \"steps\", "
                         f"got {t_eval!r}")
    if dense_output and methods.get(method).state_shape == "array":
        raise NotImplementedError(f"dense_output: not yet for the implicit method {method!r} "
                                  "(its interpolant lives in its own memory); use t_eval or "
                                  "t_eval=\"steps\"")
    if stm and (dense_output or all_steps):
        raise NotImplementedError("stm: not with dense_output=True or t_eval=\"steps\" yet; "
                                  "ask for the times you need in t_eval")
    t0, tf, times = _times(t_span, None if all_steps else t_eval, n_objects)
    step_records = (RECORD_STATES if all_steps else 0) + (RECORD_DENSE if dense_output else 0)
    if all_steps:
        times = np.full(1, np.nan)  # no output time: the loop writes a state per step
    params_given = params
    params = checks.params(params, n_objects)
    if not isinstance(stm, (bool, np.bool_)):
        raise TypeError(f"stm: expected True or False, got {stm!r}")
    max_step, first_step = checks.step_sizes(max_step, first_step, t0, tf)
    args = checks.extra_args(args)
    params = checks.with_args(params, checks.columns_given(params_given), args)
    user_fun = fun
    method, fun, rtol, atol, events, max_steps, records = checks.solver_options(
        fun, n, method, rtol, atol, events, Event, max_steps, max_event_records, params_given,
        extra_columns=len(args))
    diagnose = diagnosis(fun, events)
    jac = checks.jacobian_option(jac, method, n, stm)
    if stm:
        from . import sensitivities
        fun, rtol, atol = sensitivities.augmented(fun, user_fun, n, rtol, atol)
        y0 = sensitivities.augmented_states(y0, n)
        diagnose = functools.partial(_diagnose_state, diagnose, n)
    raw = integrate(method, fun, y0, t0, tf, times, rtol, atol, params, events,
                    max_steps, records, records, [user_fun if stm else fun]
                    + [e.g for e in events], diagnose, progress, max_step=max_step,
                    first_step=first_step, end_states=t_eval is None, jac=jac,
                    step_records=step_records)
    if stm:
        at_events = sensitivities.event_matrices(raw, n, single)
        matrices = sensitivities.split(raw, n, single)
    if all_steps:
        times = raw["steps"][:, :, 0]
    result = IVPResult(times, raw, single)
    if dense_output:
        result.set_dense((method, y0.shape[1], fun, raw["steps"], raw["dense"], raw["info"]))
    if stm:
        result.stm, result.stm_events = matrices, at_events
    return result


def _diagnose_state(diagnose, n, y0, params, t0):
    """`diagnosis` of an augmented run (``stm=True``) on the state's n columns."""
    diagnose(y0[:, :n], params, t0)


class Statuses:
    """Per-object status codes and what they mean: ``success``, ``messages()``
    and a summary ``repr``, for the result classes of every front."""

    #: What each ``status`` code means (a front may word them for its users).
    MESSAGES = STATUS_MESSAGES

    @property
    def success(self):
        """True where the object reached the end or a terminal event."""
        return np.asarray(self.status) >= 0

    def messages(self):
        """The meaning of each object's status (a list, or a str for one object)."""
        status = np.asarray(self.status)
        if status.ndim == 0:
            return self.MESSAGES[int(status)]
        return [self.MESSAGES[int(s)] for s in status]

    def __repr__(self):
        status = np.atleast_1d(self.status)
        counts = {int(s): int((status == s).sum()) for s in np.unique(status)}
        return f"{type(self).__name__}(objects={status.size}, status counts={counts})"


class IVPResult(Statuses):
    """What `solve_ivp()` returns, for N objects.

    ``t`` ``(M,)``, or ``(N, M)`` with per-object output times or spans
    (``res.t[i]`` object i's times, trailing NaN as given); ``y`` ``(N, n, M)`` (``res.y[i]`` is laid out as scipy's
    ``sol.y``), NaN after a terminal event or a failure; ``status`` ``(N,)``
    (`STATUS_MESSAGES`); ``t_events`` per event
    ``(N, C)`` and ``y_events`` per event ``(N, C, n)``, NaN-padded;
    ``n_events`` ``(N, E)``; ``nfev``, ``njev``, ``nlu`` (0 for these explicit
    methods, as scipy's), ``nsteps`` ``(N,)``. For one object
    (``y0`` of shape ``(n,)``) the leading N axis is dropped. ``res[i]`` is
    object ``i`` with scipy's attribute names.
    """

    def __init__(self, t, raw, single=False):
        info = raw["info"]
        self.t = t[0] if single and t.ndim == 2 else t
        #: states as written by the kernel, ``(N, M, n)``
        self.y_rows = raw["y"]
        self.y = raw["y"].transpose(0, 2, 1)
        self.status = info[:, INFO.status]
        self.nfev = info[:, INFO.nfev]
        self.nsteps = info[:, INFO.nsteps]
        #: Jacobian evaluations and LU decompositions: 0 for the explicit methods, as scipy's
        self.njev = info[:, INFO.njev]
        self.nlu = info[:, INFO.nlu]
        self.t_events = [raw["t_events"][:, e] for e in range(raw["t_events"].shape[1])]
        self.y_events = [raw["y_events"][:, e] for e in range(raw["y_events"].shape[1])]
        self.n_events = raw["n_events"]
        self.single = single
        #: scipy's ``sol`` with ``dense_output=True`` (`set_dense`); None otherwise
        self.sol = None
        if single:
            self.y, self.status, self.nfev, self.nsteps, self.njev, self.nlu = (
                self.y[0], self.status[0], self.nfev[0], self.nsteps[0], self.njev[0],
                self.nlu[0])
            self.t_events = [t[0] for t in self.t_events]
            self.y_events = [y[0] for y in self.y_events]
            self.n_events = self.n_events[0]

    def set_dense(self, records):
        """Keep the step records of ``dense_output=True`` (``(method, n, fun, steps,
        dense, info)``, `.dense`): ``sol(t)`` gives ``(N, n, len(t))`` (``(N, n)``
        for a number; without the N axis for one object)."""
        self.sol = dense_output_module.BatchSolution(records, self.single)

    def __len__(self):
        return 1 if self.single else len(self.status)

    def __getitem__(self, i):
        if self.single:
            if i not in (0, -1):
                raise IndexError(f"one object, index {i}")
            return ObjectResult(self, None)
        return ObjectResult(self, range(len(self.status))[i])


class ObjectResult:
    """One object of an `IVPResult`, with the attribute names of scipy's
    ``OdeResult``: ``t``, ``y`` ``(n, M)``, ``t_events`` (a list of 1-D arrays
    holding the recorded occurrences), ``y_events`` (a list of ``(k, n)``),
    ``status``, ``message``, ``success``, ``nfev``, ``njev``, ``nlu`` (0: explicit
    methods), ``nsteps``."""

    def __init__(self, result, i):
        pick = (lambda a: a) if i is None else (lambda a: a[i])
        self.t = result.t if result.t.ndim == 1 else pick(result.t)
        self.y = pick(result.y)
        if self.t.ndim == 1 and np.isnan(self.t[-1]):  # an (N, M) row's NaN padding
            kept = int(np.count_nonzero(~np.isnan(self.t)))
            self.t, self.y = self.t[:kept], self.y[..., :kept]
        self.status = int(pick(result.status))
        self.nfev = int(pick(result.nfev))
        self.nsteps = int(pick(result.nsteps))
        self.njev = int(pick(result.njev))
        self.nlu = int(pick(result.nlu))
        counts = np.atleast_1d(pick(result.n_events))
        self.t_events = []
        self.y_events = []
        for e, (times, states) in enumerate(zip(result.t_events, result.y_events)):
            times = pick(times)
            kept = min(int(counts[e]), times.shape[0])
            self.t_events.append(times[:kept])
            self.y_events.append(pick(states)[:min(kept, pick(states).shape[0])])
        self.message = STATUS_MESSAGES[self.status]
        self.success = self.status >= 0
        #: scipy's ``OdeSolution`` of this object (``dense_output=True``), else None
        self.sol = None if result.sol is None else result.sol.object(0 if i is None else i)
        if getattr(result, "stm", None) is not None:  # solve_ivp(..., stm=True)
            self.stm = pick(result.stm)[..., :self.t.shape[-1]]
            self.stm_events = [pick(m)[:len(t)] for m, t in zip(result.stm_events,
                                                                 self.t_events)]

    def __repr__(self):
        return f"ObjectResult(status={self.status}, nfev={self.nfev}, nsteps={self.nsteps})"
