"""A call of ``solve_ivp`` as a value: `Call`, checked once, whatever the front.

Every front (`hapsira_core.fronts`: numpy, JAX, Dask; ``hapsira_cowell``'s through
its orbit adapter) does the same four things:

1. ``call, y0, rows = Call.check(front, ...)``: its arrays converted by the front's
   `Arrays` (numpy's, or a twin that checks JAX or Dask arrays without reading
   them), every other argument checked here once, with one set of messages, and
   what the front does not take refused from one table (`FEATURES`), naming the
   front and the argument;
2. ``y0, rows = call.inputs(y0, rows)``: scipy's ``args`` and a constant ``jac``
   appended to the params rows, the identity after each state for ``stm=True``
   (on numpy, JAX or a Dask chunk's arrays alike);
3. the run where the arrays live: ``call.run`` on numpy arrays, the JAX front's
   `run` of ``call.problem()`` on XLA's buffers, ``call.run`` on each Dask chunk;
4. ``call.result(raw, rows)``: the kernel's outputs as the result type.

A `Call` is frozen and picklable (``hjit`` functions by reference,
`hapsira_core.fronts.dask.pack`): the Dask front sends it to its workers as it is.
"""

import dataclasses
import functools
import math
from typing import Any, Optional

import numpy as np

from . import checks
from .api import Event, Problem, _diagnose_state, diagnosis
from .layout import RECORD_DENSE, RECORD_STATES
from .results import EVENTS, TIMES, IVPResult

__all__ = ["Call", "Arrays", "Feature", "FEATURES", "FRONTS", "refuse", "feature_table"]

#: The fronts, by the name their errors and the feature table give them.
FRONTS = ("numpy", "JAX", "Dask", "cowell", "cowell JAX", "cowell Dask")

_DASK_LATER = ("not for Dask arrays, which are computed later (use distributed.progress "
               "on the result's arrays)")


@dataclasses.dataclass(frozen=True)
class Feature:
    """One feature of a call: the ``argument`` that asks for it, ``what`` it does
    (the table's row), and per front: absent (not an argument there: cowell has no
    ``jac``), taken, or refused: ``refused[front] = (exception type, message)``, the
    message starting with the argument and naming the front."""

    argument: str
    what: str
    fronts: tuple = FRONTS
    refused: dict = dataclasses.field(default_factory=dict)

    def on(self, front):
        """``"yes"``, ``"refused"`` or ``"-"`` (not an argument of ``front``)."""
        if front not in self.fronts:
            return "-"
        return "refused" if front in self.refused else "yes"


_CORE = ("numpy", "JAX", "Dask")

#: Front x feature: the one table of what each front takes (`refuse` applies it;
#: docs/architecture.md shows it, `feature_table`; tests/core/fronts/test_features.py
#: calls every front with every feature).
FEATURES = (
    Feature("params", "per-object params rows (N, P)"),
    Feature("events", "events, terminal or not, their times recorded"),
    Feature("t_eval", "output times (M,)", _CORE),
    Feature("t_eval", "per-object output times (N, M)", _CORE),
    Feature("tofs", "per-object times of flight (N, M)", FRONTS[3:]),
    Feature("t_span", "per-object spans (N,) t0 and tf", _CORE),
    Feature("t_eval=\"steps\"", "every accepted step, as scipy's t_eval=None", _CORE, {
        "JAX": (NotImplementedError, "t_eval=\"steps\": not on the JAX front "
                "(hapsira_core.jax.solve_ivp: a jitted program's output shapes are fixed "
                "before it runs); use the numpy front"),
        "Dask": (NotImplementedError, "t_eval=\"steps\": not on the Dask front yet (each "
                 "chunk's number of steps differs); use dense_output=True and evaluate "
                 "res.sol(t), or compute the arrays first (numpy)")}),
    Feature("dense_output", "res.sol(t), scipy's OdeSolution per object", _CORE, {
        "JAX": (NotImplementedError, "dense_output: not on the JAX front "
                "(hapsira_core.jax.solve_ivp: the step records' size is known only after "
                "the run); ask for the times you need in t_eval, or use the numpy front")}),
    Feature("stm", "the state transition matrix, d y(t) / d y0"),
    Feature("jac", "a Jacobian for the implicit methods (function or matrix)", _CORE, {
        "JAX": (NotImplementedError, "jac: not on the JAX front "
                "(hapsira_core.jax.solve_ivp) yet; the implicit methods take the automatic "
                "Jacobian there, or use the numpy front to pass jac="),
        "Dask": (NotImplementedError, "jac: not on the Dask front yet; compute the arrays "
                 "first (numpy) to pass jac=")}),
    Feature("args", "scipy's args, appended to each params row", _CORE),
    Feature("max_step", "scipy's max_step"),
    Feature("first_step", "scipy's first_step"),
    Feature("progress", "a progress bar", FRONTS, {
        "JAX": (ValueError, "progress: not on the JAX front (hapsira_core.jax.solve_ivp "
                "runs inside jax.jit, as one XLA call)"),
        "Dask": (ValueError, f"progress: {_DASK_LATER}"),
        "cowell JAX": (ValueError, "progress: not on the JAX front "
                       "(hapsira_cowell.jax.cowell runs inside jax.jit, as one XLA call)"),
        "cowell Dask": (ValueError, f"progress: {_DASK_LATER}")}),
)


def _given(feature, options):
    """Whether ``options`` (the call's arguments by name) ask for ``feature``."""
    value = options.get(feature.argument.split("=")[0])
    if feature.argument == "t_eval=\"steps\"":
        return isinstance(value, str)
    if feature.argument == "progress":
        from ..progress import check
        return bool(check(value))
    if feature.argument == "dense_output":
        return value is not None and value is not False
    return value is not None


def refuse(front, **options):
    """Raise what `FEATURES` says ``front`` raises for the first refused feature that
    ``options`` ask for (nothing where it takes them all)."""
    for feature in FEATURES:
        if front in feature.refused and _given(feature, options):
            kind, message = feature.refused[front]
            raise kind(message)


def feature_table():
    """`FEATURES` as a Markdown table (docs/architecture.md holds it; a test compares)."""
    lines = ["| argument | what | " + " | ".join(FRONTS) + " |",
             "|---|---|" + "---|" * len(FRONTS)]
    for feature in FEATURES:
        lines.append(f"| `{feature.argument}` | {feature.what} | "
                     + " | ".join(feature.on(front) for front in FRONTS) + " |")
    return "\n".join(lines)


class Arrays:
    """How a front converts its arrays: numpy's (`checks.states`, `checks.times`,
    `checks.params`). The JAX and Dask fronts subclass it with checks that do not read
    their arrays. ``xp``: the array module of the converted arrays."""

    xp = np

    def states(self, y0):
        """``((N, n) states, single)``."""
        return checks.states(y0)

    def times(self, t_span, t_eval, n_objects):
        """``(t0, tf, times, known)``: the converted span and output times, and
        ``known``: ``(t0, tf, times)`` as numbers where they are known (None where
        traced), which the options' checks read (``first_step`` against the span)."""
        t0, tf, times = checks.times(t_span, t_eval, n_objects)
        return t0, tf, times, (t0, tf, times)

    def params(self, params, n_objects, stacklevel):
        """``(1 or N, P)`` params rows."""
        return checks.params(params, n_objects, stacklevel=stacklevel + 2)

    def option(self, value, name):
        """A number that fixes the program (rtol, max_step...), as given."""
        return value


NUMPY = Arrays()


@dataclasses.dataclass(frozen=True, eq=False)
class Call:
    """A checked call of ``solve_ivp`` (or ``cowell``, through its adapter): all but
    the per-object arrays. Make it with `check`; `inputs`, `problem`, `run`,
    `shapes` and `result` are what a front does with it."""

    front: str
    method: str
    fun: Any                 # bounds-checked: what the kernel calls (the state's part)
    user_fun: Any            # as given (differentiated with stm=True)
    n: int                   # the state's components
    n_objects: int
    single: bool
    t0: Any
    tf: Any
    times: Any               # (M,) or (N, M); with t_eval="steps" a NaN placeholder
    rtol: Any
    atol: Any
    events: tuple
    max_steps: int
    records: int
    max_step: float
    first_step: Optional[float]
    args: tuple = ()
    params_columns: int = 0
    jac: Any = None
    jac_rows: Any = None
    stm: bool = False
    dense_output: bool = False
    all_steps: bool = False
    end_states: bool = False
    progress: bool = False
    event_states: bool = True
    kernel_fun: Any = None   # fun, or with stm=True the state and its matrix as one system
    user_functions: tuple = ()
    diagnose: Any = None

    @classmethod
    def check(cls, front, fun, t_span, y0, method="DOP853", t_eval=None, rtol=1e-3,
              atol=1e-6, *, params=None, events=(), max_steps=100_000,
              max_event_records=64, progress=False, max_step=math.inf, first_step=None,
              args=None, stm=False, jac=None, dense_output=False, arrays=NUMPY,
              stacklevel=4):
        """``(call, y0, rows)``: ``solve_ivp``'s arguments checked, in one order with one
        set of messages on every front: what ``front`` does not take (`refuse`), the
        flags, the arrays (``arrays``: the front's `Arrays`), then `checks.call_options`,
        ``jac`` (`checks.jacobian_option`) and with ``stm`` the events' derivatives and
        the augmented system. ``y0`` ``(N, n)`` and ``rows`` ``(1 or N, P)`` come back
        as ``arrays`` made them (`inputs` completes them). ``stacklevel``: the user's
        frame counted from this one (warnings name the user's line)."""
        from ..progress import check as check_progress
        refuse(front, t_eval=t_eval, jac=jac, progress=progress, dense_output=dense_output)
        progress = check_progress(progress)
        checks.flag(dense_output, "dense_output")
        all_steps = isinstance(t_eval, str)
        if all_steps and t_eval != "steps":
            raise ValueError(f"t_eval: expected an array of times, None or \"steps\", "
                             f"got {t_eval!r}")
        checks.flag(stm, "stm")
        if stm and (dense_output or all_steps):
            raise NotImplementedError("stm: not with dense_output=True or t_eval=\"steps\" "
                                      "yet; ask for the times you need in t_eval")
        y0, single = arrays.states(y0)
        n_objects, n = y0.shape
        t0, tf, times, known = arrays.times(t_span, None if all_steps else t_eval, n_objects)
        if all_steps:
            times = np.full(1, np.nan)  # no output time: the loop writes a state per step
        rows = arrays.params(params, n_objects, stacklevel + 1)
        option = arrays.option
        (method, checked, user_fun, rtol, atol, events, max_steps, records, max_step,
         first_step, args) = checks.call_options(
            fun, n, method, option(rtol, "rtol"), option(atol, "atol"), events, Event,
            max_steps, max_event_records, params, option(max_step, "max_step"),
            None if first_step is None else option(first_step, "first_step"), known[0],
            known[1], args, stacklevel=stacklevel + 3, times=None if all_steps else known[2])
        jac, jac_rows = checks.jacobian_option(jac, method, n, stm, stacklevel + 1, n_objects)
        if stm:
            from . import event_derivatives
            event_derivatives.check_events(events, n)
        call = cls.make(front, method, checked, user_fun, n, n_objects, single, t0, tf, times,
                        rtol, atol, events, max_steps, records, max_step, first_step,
                        diagnosis(checked, events), args=args,
                        params_columns=checks.columns_given(params), jac=jac,
                        jac_rows=jac_rows, stm=bool(stm), dense_output=bool(dense_output),
                        all_steps=all_steps, end_states=t_eval is None, progress=progress)
        return call, y0, rows

    @classmethod
    def make(cls, front, method, fun, user_fun, n, n_objects, single, t0, tf, times, rtol,
             atol, events, max_steps, records, max_step, first_step, diagnose, *,
             stm=False, user_functions=None, **options):
        """The `Call` of checked values (`check`'s, or an adapter's: ``cowell``'s orbit
        adapter checks its own arguments, `hapsira_cowell.propagation.forms.orbit_call`).
        With ``stm`` the kernel's right-hand side is the state and its matrix as one
        system (`sensitivities.augmented`: refused by name where ``user_fun`` cannot be
        differentiated) and ``diagnose`` reads the state's n columns. ``user_functions``
        (named first in compile errors): by default ``fun`` (``user_fun`` with ``stm``)
        and the events' ``g``."""
        kernel_fun = fun
        if stm:
            from . import sensitivities
            kernel_fun, rtol, atol = sensitivities.augmented(fun, user_fun, n, rtol, atol)
            diagnose = functools.partial(_diagnose_state, diagnose, n)
        if user_functions is None:
            user_functions = [user_fun if stm else fun] + [e.g for e in events]
        return cls(front, method, fun, user_fun, n, n_objects, single, t0, tf, times, rtol,
                   atol, tuple(events), max_steps, records, max_step, first_step, stm=stm,
                   kernel_fun=kernel_fun, user_functions=tuple(user_functions),
                   diagnose=diagnose, **options)

    # -- what a front does with it ------------------------------------------------

    @property
    def width(self):
        """Components of the kernel's state: n, or n + n * n with ``stm``."""
        return self.n + self.n * self.n if self.stm else self.n

    @property
    def step_records(self):
        """The step records the kernel keeps (`layout.RECORD_STATES`, `RECORD_DENSE`)."""
        return ((RECORD_STATES if self.all_steps else 0)
                + (RECORD_DENSE if self.dense_output else 0))

    def inputs(self, y0, rows, xp=np, columns=None):
        """``(y0, rows)`` as the kernel takes them: scipy's ``args`` and a constant
        ``jac``'s numbers appended to the params rows, with ``stm`` the identity after
        each state (``xp``: the arrays' module; ``columns``: the user's params columns
        where the rows are a chunk's, Dask)."""
        rows = checks.with_args(rows, self.params_columns if columns is None else columns,
                                self.args, xp)
        rows = checks.with_jacobian(rows, self.jac_rows)
        if self.stm:
            from .sensitivities import augmented_states
            y0 = augmented_states(y0, self.n, None if xp is np else xp)
        return y0, rows

    def problem(self, times=None):
        """The core's `Problem` of this call (``times``: a chunk's own output times)."""
        records = self.records
        return Problem(self.method, self.kernel_fun, self.width, self.events,
                       self.times if times is None else times, self.max_steps, records,
                       records if self.event_states else 0, list(self.user_functions),
                       self.diagnose, max_step=self.max_step, first_step=self.first_step,
                       end_states=self.end_states, jac=self.jac,
                       step_records=self.step_records)

    def run(self, y0, rows, t0=None, tf=None, times=None, on_device=(), into=None):
        """The kernel's trimmed outputs on numpy arrays (`Problem.run`, ``on_device`` and
        ``into`` as there); ``t0``, ``tf``, ``times``: a chunk's own (Dask), else the
        call's."""
        return self.problem(times).run(
            y0, rows, self.t0 if t0 is None else t0, self.tf if tf is None else tf,
            self.rtol, self.atol, self.progress, on_device, into)

    def result(self, raw, rows, cls=IVPResult, launch=None, sequence=list, times=None):
        """``cls`` from the kernel's trimmed outputs: with ``stm`` the matrices
        (`sensitivities.matrices`) and the events' total derivatives
        (`event_derivatives.totals`, its kernel run by ``launch`` where the arrays live,
        each event's arrays as a ``sequence``); with ``t_eval="steps"`` the steps' times;
        with ``dense_output`` the interpolants (`IVPResult.set_dense`)."""
        matrices = {}
        if self.stm:  # the event derivatives first: they read the augmented event states
            from . import event_derivatives, sensitivities
            extra = () if launch is None else (launch,)
            totals, gradients = event_derivatives.totals(raw, self.user_fun, self.events,
                                                         rows, self.n, False, *extra)
            matrices = dict(sensitivities.matrices(raw, self.n),
                            stm_events_total=sequence(totals), dt_events_dy0=sequence(gradients))
        times = self.times if times is None else times
        if self.all_steps:
            times = raw["steps"][:, :, 0]
        result = cls.from_kernel(times, raw, self.single, **matrices)
        if self.dense_output:
            result.set_dense(self.records_of(raw))
        return result

    def records_of(self, raw):
        """The dense output's step records of a run (`hapsira_core.ivp.dense`)."""
        return (self.method, self.n, self.fun, raw["steps"], raw["dense"], raw["info"])

    def shapes(self, cls=IVPResult, **trailing):
        """``{name: (trailing shape, dtype)}`` of a result's per-object arrays, named and
        ordered as ``cls.arrays()`` names them (``t_events_0``...; the output times,
        shared or the caller's, left out): what a Dask chunk returns. ``trailing``: the
        float64 shapes of fields of an adapter's own (``cowell``'s ``rr``, ``vv``)."""
        n, m, e = self.n, self.times.shape[-1], len(self.events)
        records = self.records
        y_records = records if e and self.event_states else 0
        per_event = {"t_events": ((records,), np.float64),
                     "y_events": ((y_records, n), np.float64),
                     "stm_events": ((y_records, n, n), np.float64),
                     "stm_events_total": ((y_records, n, n), np.float64),
                     "dt_events_dy0": ((y_records, n), np.float64)}
        whole = {"y": ((n, m), np.float64), "n_events": ((e,), np.int64),
                 "stm": ((n, n, m), np.float64)}
        whole.update({name: (shape, np.float64) for name, shape in trailing.items()})
        stm_fields = ("stm", "stm_events", "stm_events_total", "dt_events_dy0")
        shapes = {}
        for field in cls.FIELDS:
            if field.role == TIMES or (field.name in stm_fields and not self.stm):
                continue
            if field.role == EVENTS:
                shapes.update({f"{field.name}_{k}": per_event[field.name] for k in range(e)})
            else:
                shapes[field.name] = whole.get(field.name, ((), np.int64))
        return shapes

    def of_flat(self, cls, arrays, single, **fields):
        """``cls`` from `shapes`' arrays by name (per-event ones regrouped), ``fields``
        beside them (the output times)."""
        stm_fields = ("stm", "stm_events", "stm_events_total", "dt_events_dy0")
        for field in cls.FIELDS:
            if field.name in stm_fields and not self.stm:
                continue
            if field.role == EVENTS:
                fields[field.name] = [arrays[f"{field.name}_{k}"]
                                      for k in range(len(self.events))]
            elif field.name in arrays:
                fields[field.name] = arrays[field.name]
        return cls.of_objects(single, **fields)

    def without_objects(self):
        """This call without its per-object numbers (spans, output times, a constant
        ``jac``'s rows: each Dask chunk brings its own), for sending to workers: a
        chunk's result keeps its objects' axis, even for a call of one object."""
        return dataclasses.replace(
            self, single=False, t0=None if np.ndim(self.t0) else self.t0,
            tf=None if np.ndim(self.tf) else self.tf,
            times=self.times if np.ndim(self.times) == 1 else self.times[:0])
