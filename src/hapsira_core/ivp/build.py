"""Kernels of the solve loop: one per (target, method, n, right-hand side, events).

A kernel closes over the user's functions (compile-time constants: numba
specialises the loop on them) and takes everything else as data: initial
states, output times, tolerances, event constants and the params rows, so
that new numbers never recompile.
"""

import dataclasses

import numpy as np

from .. import settings
from .. import jit
from ..jit import Arg, ObjectKernel
from ..kernels import cache
from ..kernels.errors import CallbackCompileError, chained, user_function_error
from ..targets import active as target
from . import lanes as lanes_module
from . import methods
from .state import fun_form
from .state import ops as state_ops

#: Built kernels of the active target, by their `KernelSpec`.
KERNELS = {}


def arguments(events=True, event_states=True, records=False, interleave_work=False):
    """The kernel's array arguments, in the order the loop takes them.

    ``t_eval`` and ``conf`` (which holds t0 and tf) are per-object arguments,
    given with one row where all objects share them (broadcast, as ``params``):
    per-object spans and output times are data, never a new kernel.
    What a kernel never fills is working memory, which a GPU never copies
    back: the event rows of a kernel without events (16 MB per 10^6
    objects), ``y_events`` without ``event_states`` (48 MB for 6 components).
    ``records``: the step records of ``dense_output`` and ``t_eval="steps"``
    (`.loop.make_solve`), ``steps`` ``(S + 1, 2)`` and ``dense`` ``(S, k + 1, n)``.
    ``interleave_work``: the ``work`` rows may be laid out with the object axis last
    (`hapsira_core.kernels.kernel.Arg`'s ``interleaved``; `interleaves_work`).
    """
    f64, i64 = np.float64, np.int64
    inputs, outputs, scratch = (
        Arg("y0", f64, ("n",)),
        Arg("t_eval", f64, ("m",)),  # (1, M) shared, (N, M) per object
        Arg("params", f64, ("np",)),
        Arg("conf", f64, ("nc",)),  # (1, nc) shared; (N, nc) with per-object spans
        Arg("iconf", i64, ("ni",), per_object=False),
        Arg("ev_direction", f64, ("e",), per_object=False),
        Arg("ev_max", i64, ("e",), per_object=False),
        Arg("ev_consts", f64, ("e", "q"), per_object=False),
    ), (
        Arg("y", f64, ("m", "n"), output=True),
        Arg("info", i64, ("ninfo",), output=True),
        Arg("t_events", f64, ("e", "c"), output=True, scratch=not events),
        Arg("y_events", f64, ("e", "cy", "n"), output=True, scratch=not event_states),
        Arg("n_events", i64, ("e",), output=True, scratch=not events),
    ), (
        Arg("scratch", f64, ("e", "two"), scratch=True),
        Arg("work", f64, ("s", "n"), scratch=True, interleaved=interleave_work),
    )
    if records:
        outputs = outputs + (Arg("steps", f64, ("s1", "two"), output=True),
                             Arg("dense", f64, ("sd", "k1", "n"), output=True))
    return inputs + outputs + scratch


@dataclasses.dataclass(frozen=True)
class KernelSpec:
    """What fixes a solver kernel, frozen: the one description of it that the
    builder, the fingerprint and the disk cache all read.

    ``event_functions``: ``g(t, y, p, c)`` per event, in order;
    ``event_states``: whether the loop records the state at each event (the
    interpolant evaluated once more per occurrence; ``cowell`` needs none);
    ``keep_stages``: the target's ``KEEP_STAGES``. Everything else a call
    varies (states, times, tolerances, params, event constants) is data.
    """

    method: str
    n: int
    fun: object
    event_functions: tuple = ()
    event_states: bool = False
    keep_stages: bool = dataclasses.field(default_factory=lambda: target.KEEP_STAGES)
    #: the user's ``jac=`` (an hjit function) for the implicit methods; None: automatic
    jac: object = None
    #: whether the kernel takes the step records ``steps`` and ``dense`` (`arguments`)
    records: bool = False
    #: objects stepped at once per core (`.lanes`); 0: the per-object loop
    lanes: int = 0

    def source(self, fun, events, jac="None", g=None):
        """The module that defines the kernel's ``body``, with ``fun``, ``events`` and
        ``jac`` the source of the expressions that give the functions; ``g``: the
        expression of the loop's event function where it is not their `switch`."""
        return body_source(self.records, bool(self.lanes)).format(
            method=self.method, n=self.n, keep=self.keep_stages, fun=fun, events=events,
            g=g or f"switch({events}, 4)", event_states=self.event_states, jac=jac,
            lanes=self.lanes)

    def body(self):
        """The per-object ``body``, made in memory from the same `source` as the
        cache's module, the functions bound by name."""
        namespace = {"_fun": self.fun, "_events": self.event_functions, "_jac": self.jac}
        exec(compile(self.source("_fun", "_events", "_jac"), f"<hapsira kernel {self.method} "
                     f"n={self.n}>", "exec"), namespace)
        return namespace["body"]

    def recipe(self, options=None):
        """``(fingerprint, source defining body by import)`` for the on-disk cache, or
        None where some function cannot be imported in a new process; ``options``: the
        code options in the key (the kernel's target's by default)."""
        if not methods.builtin(self.method):  # a Method given as an object: in memory
            return None
        imports = {}
        fun_source = cache.expression(self.fun, imports)
        events_source = cache.expression(self.event_functions, imports)
        jac_source = "None" if self.jac is None else cache.expression(self.jac, imports)
        if fun_source is None or events_source is None or jac_source is None:
            return None
        prelude = cache.import_lines(imports) + "\n" + self.source(fun_source, events_source,
                                                                    jac_source)
        functions = self.event_functions if self.jac is None else (
            self.event_functions + (self.jac,))
        options = ObjectKernel.code_options() if options is None else options
        if self.lanes:  # compiled for this CPU's vectors
            options = tuple(options) + target.lane_code_options(self.lanes)
        key = cache.key(self.fun, functions, prelude, code_options=options)
        return key, prelude

    def build(self):
        args = arguments(bool(self.event_functions), self.event_states, self.records,
                         interleaves_work(self.method, self.fun))
        if self.lanes:
            scalar = dataclasses.replace(self, lanes=0)
            if self.joins() and hasattr(target, "JoinedLaneKernel"):
                made = self._joined_lanes(args, lambda: _built(scalar))
            else:
                made = target.LaneKernel(self.body(), args, self.recipe(),
                                         lambda: _built(scalar))
        elif self.joins():
            made = self._joined(args)
        else:
            made = ObjectKernel(self.body(), args, self.recipe())
        made.description = self.description()
        return made

    def description(self):
        """What the kernel is, in the user's words (the notice of a long compile)."""
        lanes = f", {self.lanes} objects per core at once" if self.lanes else ""
        return f"the {self.method} solver for {self.n}-component states{lanes}"

    def joins(self):
        """Whether the kernel is a generic loop joined to the user's functions: on a
        target that joins (cpu, parallel) with ``HAPSIRA_JOIN`` on, for the per-object loop
        of a registered method or the lane loop (`_joined_lanes`) of a registered explicit
        method (`.methods.builtin`: the generic loop is cached on disk by the method's name)."""
        return (hasattr(target, "JoinedKernel") and settings.JOIN == "on"
                and (not self.lanes or methods.get(self.method).state_shape is None)
                and methods.builtin(self.method))

    def _joined(self, args):
        """The kernel as a generic loop joined to the user's functions
        (`hapsira_core.targets._join`): the loop compiled once per `generic_key`."""
        functions = {"fun": self.fun}
        if self.event_functions:
            functions["events"] = jit.switch(self.event_functions, 4)
        # first: a Jacobian that cannot be derived fails here, as in a kernel built at once
        body = self.body()
        functions.update(self._derived())

        # the host targets share joined kernels: the same loop, compiled for the same CPU
        options = target.JoinedKernel.code_options()
        return target.JoinedKernel(body, args, self.recipe(options),
                                   self.generic_key(args), self.generic_body, functions)

    def _stubs(self):
        """The stand-ins of `generic_body`: ``fun`` in its form (carrying the stand-ins
        of the functions an implicit method derives from it, `_derived_stubs`), the
        events' switch."""
        components = getattr(self.fun, "hapsira_error_components", None)
        derived = self._derived_stubs()
        marks = (("hapsira_stand_ins", derived),) if derived else ()
        if (fun_form(self.fun) or "tuple") == "tuple":
            fun = target.stub("fun", 3, "state", components, marks)
        else:
            fun = target.stub("fun", 4, "none", components, marks)
        return fun, target.stub("events", 5, "float")

    def generic_body(self):
        """The per-object ``body`` with stubs for the user's functions (`_stubs`)."""
        fun, g = self._stubs()
        # a user's jac=: the method asks for its Jacobian (the stand-in, whose marks say
        # what the loop must know of it) as it would of the user's
        namespace = {"_fun": fun, "_g": g,
                     "_jac": dict(getattr(fun, "hapsira_stand_ins", ())).get("jac")}
        exec(compile(self.source("_fun", "()", "None" if self.jac is None else "_jac",
                                 g="_g" if self.event_functions else "switch((), 4)"),
                     f"<hapsira generic kernel {self.method} n={self.n}>", "exec"), namespace)
        return namespace["body"]

    def generic_key(self, args):
        """What fixes the generic kernel: everything but the user's functions."""
        implicit = ()
        if methods.get(self.method).state_shape is not None:
            # whether jac= was given, and what the loop reads of each derived function
            implicit = (self.jac is not None,
                        tuple((role, _arity(f), _marks(f)) for role, f in self._derived()))
        return cache.key("generic kernel", self.method, self.n, self.keep_stages,
                         fun_form(self.fun) or "tuple",
                         getattr(self.fun, "hapsira_error_components", None),
                         bool(self.event_functions), self.event_states, self.records,
                         repr([(a.name, a.dtype.str, a.core, a.per_object, a.output,
                                a.interleaved) for a in args]), *implicit,
                         code_options=target.JoinedKernel.code_options())

    def _derived(self):
        """``((role, function), ...)``: what an implicit method makes from ``fun`` and
        ``jac=`` and calls (its Jacobian: `.methods.base.Functions.derived`), compiled
        alone and joined as ``fun`` is; () for an explicit method."""
        method = methods.get(self.method)
        if method.state_shape is None:
            return ()
        ops = state_ops(self.n, method.state_shape,
                        getattr(self.fun, "hapsira_error_components", None))
        return method.build(ops, self.keep_stages, self.fun, self.jac).derived

    def _derived_stubs(self):
        """``((role, stub), ...)``: a stand-in for each of `_derived`, which writes into
        arrays (a stub returning none) and carries the function's marks (`_marks`)."""
        return tuple((role, target.stub(role, _arity(f), "none", None, _marks(f)))
                     for role, f in self._derived())

    def _joined_lanes(self, args, scalar):
        """The lane kernel as a generic lane loop joined to the user's functions, the
        join vectorised (`hapsira_core.targets._join.JoinedLaneKernel`): the loop
        compiled once per `generic_lane_key`; ``scalar`` makes the per-object kernel."""
        functions = {"fun": self.fun}
        functions.update({f"event{e}": g for e, g in enumerate(self.event_functions)})
        options = target.JoinedKernel.code_options()
        return target.JoinedLaneKernel(self.body(), args, self.recipe(options),
                                       self.generic_lane_key(args), self.generic_lane_body,
                                       functions, scalar)

    def generic_lane_body(self):
        """The lane ``body`` with stubs for ``fun`` and each event function (the lanes'
        attempt calls each event function by itself)."""
        fun = target.stub("fun", 3, "state", getattr(self.fun, "hapsira_error_components",
                                                    None))
        events = tuple(target.stub(f"event{e}", 4, "float")
                       for e in range(len(self.event_functions)))
        namespace = {"_fun": fun, "_events": events}
        exec(compile(self.source("_fun", "_events"),
                     f"<hapsira generic lane kernel {self.method} n={self.n} "
                     f"W={self.lanes}>", "exec"), namespace)
        return namespace["body"]

    def generic_lane_key(self, args):
        """What fixes the generic lane loop: everything but the user's functions."""
        return cache.key("generic lane kernel", self.method, self.n, self.lanes,
                         len(self.event_functions), self.event_states, self.records,
                         repr([(a.name, a.dtype.str, a.core, a.per_object, a.output,
                                a.interleaved) for a in args]),
                         code_options=target.JoinedKernel.code_options()
                         + target.lane_code_options(self.lanes))


def _arity(function):
    """The positional parameters of an hjit ``function``."""
    import inspect
    return len(inspect.signature(getattr(function, "py_func", function)).parameters)


def _marks(function):
    """``((attribute, value), ...)``: what a method reads of a derived ``function`` (its
    ``hapsira_*`` attributes: `..sensitivities.constant_jacobian`, ``hapsira_autonomous``),
    which its stand-in in a generic loop carries and the generic key holds."""
    return tuple(sorted((name, value) for name, value in vars(function).items()
                        if name.startswith("hapsira_")
                        and isinstance(value, (bool, int, float, str, type(None)))))


def interleaves_work(method, fun=None):
    """Whether the kernel's ``work`` rows may be interleaved across objects (a target
    that can lays them out ``(rows, n, N)``: the cuda target, `HAPSIRA_CUDA_INTERLEAVE`).

    Interleaved rows make the variational equations' loads coalesce on a GPU
    (``hapsira_interleave_work``, straight-line code at constant indices), so they take
    it under ``auto``; a loop-based array-form ``fun`` was slower interleaved, so it
    keeps per-object rows (``on`` interleaves it too). Only the explicit methods:
    interleaved, BDF failed on a GPU where the simulator and the host passed
    (docs/benchmarks.md, "Measurements behind the defaults")."""
    if methods.get(method).state_shape is not None or settings.CUDA_INTERLEAVE == "off":
        return False
    return settings.CUDA_INTERLEAVE == "on" or bool(getattr(fun, "hapsira_interleave_work",
                                                            False))


def _built(spec):
    if spec not in KERNELS:
        KERNELS[spec] = spec.build()
    return KERNELS[spec]


def lanes(method, fun, event_functions=(), records=False, jac=None):
    """The lane width for this kernel on the active target (`.lanes`): 0 where the
    per-object loop runs it (``HAPSIRA_LANES=off``, a target or a solve the lane
    loop does not cover). A width (or ``on``) asked of a target without lanes is
    refused; under ``auto`` the kernel still runs per object where lanes do not pay
    (`hapsira_core.targets._host.LaneKernel.runs_lanes`)."""
    if settings.LANES == 0:
        return 0
    if not hasattr(target, "lane_width"):
        if settings.LANES == "auto":
            return 0
        raise ValueError(f"HAPSIRA_LANES={settings.LANES}: the {target.NAME} target has no "
                         "lane mode (the host targets cpu and parallel have); use "
                         "HAPSIRA_LANES=auto or off with it")
    if not lanes_module.supports(method, fun, event_functions, records, jac):
        return 0
    return target.lane_width()


def kernel(method, n, fun, event_functions, event_states=False, jac=None, records=False):
    """The compiled solver for ``fun`` and these event functions (built once per
    `KernelSpec` and process); ``jac``: the user's ``jac=`` for an implicit method;
    ``records``: a kernel that also takes the step records (`arguments`)."""
    spec = KernelSpec(method, n, fun, tuple(event_functions), event_states, jac=jac,
                      records=records,
                      lanes=lanes(method, fun, tuple(event_functions), records, jac))
    made = _built(spec)
    if spec.lanes and "background" not in vars(made):
        # how a new process builds this kernel, so that auto may compile its lanes there
        from . import compile_worker
        source = compile_worker.kernel_source(method, n, fun, event_functions, event_states,
                                              jac, records)
        made.background = None if source is None else compile_worker.Background(made, source)
    return made


#: The body's parameter for an argument of `arguments` where its name differs.
_PARAMETER = {"params": "p"}
#: The step records, which the loop takes after its working rows (``steps``, ``dense``), and
#: what it is handed in their place without them: typed stand-ins, never written.
_RECORDS, _NO_RECORDS = ("steps", "dense"), ("scratch", "y_events")
#: The lane loop's own arguments after the kernel's: the objects of its group.
_LANE_RANGE = ("first", "last")


def body_source(records, lanes):
    """The source of the kernel's ``body`` (a `KernelSpec.source` template): its
    parameters are `arguments` (with ``records``), in order, and with ``lanes`` the lane
    range; it calls the loop (`.loop.make_solve`, `.lanes.make_solve_lanes`) on them,
    the step records last (stand-ins without them)."""
    if lanes:
        header = ("from hapsira_core.ivp.lanes import make_solve_lanes\n"
                  "from hapsira_core.jit import hjit\n\n"
                  "solve = make_solve_lanes({{method!r}}, {{n}}, {{fun}}, {{lanes}}, {{events}}, "
                  "{{event_states!r}}{flag})\n")
    else:
        header = ("from hapsira_core.ivp.loop import make_solve\n"
                  "from hapsira_core.jit import hjit, switch\n\n"
                  "solve = make_solve({{method!r}}, {{n}}, {{keep!r}}, {{fun}}, {{g}}, "
                  "{{event_states!r}},\n                   {{jac}}{flag})\n")
    args = arguments(records=records)
    inputs = [_PARAMETER.get(a.name, a.name) for a in args if not a.output]
    rest = [a.name for a in args if a.output]
    extra = list(_LANE_RANGE if lanes else ())
    call = [name for name in rest if name not in _RECORDS] \
        + list(_RECORDS if records else _NO_RECORDS)
    note = "" if records else \
        "    # no step records: typed stand-ins, never written (records=False)\n"
    # (the leading newline keeps the source, and so the cache's keys, as they were)
    return ("\n" + header.format(flag=", True" if records else "") + "\n\n@hjit\n"
            f"def body({', '.join(inputs)},\n         {', '.join(rest + extra)}):\n"
            + note
            + f"    solve({', '.join(inputs)},\n          {', '.join(call + extra)})\n")


def run(kernel, arrays, user_functions, diagnose=None, sample=None):
    """Call ``kernel`` on ``arrays``; a compile error in a user function is told
    in the user's terms (`CallbackCompileError`). ``diagnose()``, run first
    when the kernel fails, may raise a clearer error (what a function returns).
    ``sample``: ``(t0, y0 row, params row)`` on which an index error is reproduced
    in Python to name the array indexed past its end (`explain`)."""
    try:
        kernel(*arrays)
    except Exception as exc:
        explain(exc, user_functions, diagnose, sample)
        raise


def explain(exc, user_functions, diagnose=None, sample=None):
    """Raise the clearer error for ``exc``, a kernel's failure, where there is one
    (what a user function returns, a compile error in it, an index past the end
    of ``dydt`` or of a params row); return otherwise (the caller re-raises
    ``exc``). Shared by the numpy, JAX and Dask fronts."""
    if diagnose is not None:
        try:
            diagnose()
        except CallbackCompileError as error:
            raise chained(error, exc)
    if isinstance(exc, IndexError) and "out of bounds" in str(exc):
        # an index past the end of an array at an index computed at run time: a params
        # row read (such as p[int(p[0])]) or, for the array form fun(t, y, p, dydt), a
        # write past dydt. The bounds checks of `checks.bounds_checked` on cpu and
        # parallel, numpy's on the CUDA simulator; told the same way on each
        from .checks import index_error
        raise index_error(user_functions, sample) from exc
    if not type(exc).__module__.startswith("numba"):
        return
    error = user_function_error(exc, user_functions)
    if error is not exc:  # numba's dump and its exception only with HAPSIRA_DEBUG
        raise chained(error, exc)


def work_rows(method, n, fun=None):
    """Rows of the per-object ``work`` array the active target's loop needs (>= 1):
    the stages of a step where the dense output reuses them; for array-shaped
    states (``fun(t, y, p, dydt)``, `.state`) every state of the loop too."""
    found = methods.get(method)
    if found.state_shape == "array" or (fun is not None and fun_form(fun) == "array"):
        return found.rows_for(n).total
    if not target.KEEP_STAGES:
        return 1
    return max(1, found.tableau.n_stages + 1)
