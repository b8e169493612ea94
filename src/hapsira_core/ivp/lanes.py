"""The lane loop: W objects stepped together, one per SIMD lane of the host's vectors.

The per-object loop (`.loop`) steps one object at a time, so the host's vector
registers hold one float where they could hold four (AVX2) or eight (AVX-512).
Here each of W lanes holds an object: its state, stages and step control live
in lane-major arrays (``Y[i, lane]``, structure of arrays), and a step's stages,
sums and error norm are straight-line code over the lanes that LLVM turns into
packed vector code, the user's tuple-form ``f`` inlined in them, and so is the
step control of the common step (accept or reject, the next step size, the state
moving on), as selects. What is rarer (an output time or the span's end in the
step, a step near its 10-ulp floor or max_steps, failure) is done lane by lane
between attempts; a lane whose object ends takes the next object, so lanes stay
full.

Every number is formed with the operations of the per-object loop in the same
order (the stage sums in increasing stage order, zero weights skipped, as
`.stages.generate` writes them; the norms as `.state`'s tuple code), so the
results are bit-identical to the per-object kernel's; the interpolant, the
first step and the rare overflowing DOP853 norm are the per-object code itself,
run for the one lane that needs them.

Events run in the lanes too: the attempt evaluates each event function at an accepted
step's end for every lane (inlined, like ``f``) and compares it with the lane's last
value as `.events.is_triggered` does, as selects; a lane where an event triggers is
left to the lane-by-lane code, which steps it again with the per-object code and
then locates, records and, for a terminal event, stops as the per-object loop does
(`.events.make_roots`, the same source); the other lanes go on in the vectors.
So do step records (``dense_output=True``, ``t_eval="steps"``): the attempt then also
stores each lane's step start and stages, and the lane-by-lane code records each step
that moved on from them (the interpolant by the per-object ``coefficients``, on the
object's work rows), as `.loop.make_records` writes them. Array-form ``f`` (and so
``stm=True``), ``jac=`` and the implicit methods take the per-object loop
(`supports`).
"""

import math

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from ..jit import hjit, switch
from ..kernels.cache import factory
from . import methods
from .events import is_triggered, make_roots
from .control import (MAX_FACTOR, MIN_FACTOR, SAFETY, _step_factor, make_initial_step,
                      ulp_toward)
from .layout import (
    BAD_INITIAL_STATE,
    RECORD_DENSE,
    RECORD_STATES,
    ICONF,
    INFO,
    MAX_STEPS,
    STEP_TOO_SMALL,
    SCRATCH,
    SUCCESS,
    TERMINATED,
    config_row,
)
from .loop import end_values, interpolant_needed, make_records, make_store_outputs
from .state import fun_form, rhs
from .state import ops as state_ops


@intrinsic
def _sqrt(typingctx, x):
    """``math.sqrt`` as LLVM's ``llvm.sqrt`` (the same correctly rounded number): numba
    calls libm's ``sqrt``, which LLVM turns into the intrinsic, and so into packed
    ``vsqrtpd``, only where it can prove the argument non-negative (errno)."""
    if isinstance(x, types.Float):
        def codegen(context, builder, signature, args):
            function = builder.module.declare_intrinsic("llvm.sqrt", [ir.DoubleType()])
            return builder.call(function, [context.cast(builder, args[0], x, types.float64)])
        return types.float64(x), codegen


@intrinsic
def _select(typingctx, condition, a, b):
    """``a if condition else b`` as one LLVM ``select`` of the two values (both
    computed): what LLVM makes of the attempt's conditional expressions, without the
    branches and the two-way definitions that numba's SSA pass rewrites one at a time
    over the whole attempt (`generate_attempt`)."""
    result = typingctx.unify_types(a, b)
    if result is None or not isinstance(condition, types.Boolean):
        return None

    def codegen(context, builder, signature, args):
        value, first, second = args
        return builder.select(context.cast(builder, value, condition, types.boolean),
                              context.cast(builder, first, a, result),
                              context.cast(builder, second, b, result))
    return result(condition, a, b), codegen


def _lane_step_factor(exponent):
    """`.control._step_factor`'s numbers, DOP853's three square roots as `_sqrt`."""
    if exponent != -1.0 / 8.0:
        return _step_factor(exponent)

    @hjit
    def factor(err):
        return SAFETY / _sqrt(_sqrt(_sqrt(err)))
    return factor


def supports(method_name, fun, event_functions=(), records=False, jac=None):
    """Whether the lane loop runs this kernel (else the per-object loop does): the
    explicit pairs with a tuple-form ``f`` and no ``jac=``, whatever their events and
    step records (``event_functions``, ``records``: both run in lanes)."""
    method = methods.get(method_name)
    return (method.state_shape is None and fun_form(fun) == "tuple"
            and jac is None and method.tableau is not None
            and len(method.tableau.error) in (1, 2))


def _weighted(row, column):
    """``w_a * k_a + w_b * k_b + ...`` in increasing stage order, zeros skipped
    (`.stages.generate`'s sums); ``column(c)`` is the source of stage c."""
    return " + ".join(f"{w!r} * {column(c)}" for c, w in sorted(row.items())) or "0.0"


def generate_attempt(tableau, n, width, n_events=0, records=False):
    """Source of ``attempt(V, FL, PV, LI, TL, max_steps, GL, ED, EC) -> special``:
    one attempted step in every lane and, for most lanes, the step control after it,
    written out lane by lane as straight-line code.

    Every number read is loaded first and every result stored last: the lanes'
    arrays are separate, but LLVM cannot prove it, and a store between two lanes'
    loads keeps its SLP vectoriser from packing them (a loop per stage packs nothing),
    and so does a branch, which splits the W lanes' operations into narrower vectors:
    what is stored is stored for every lane, with no branch around it. Between, the
    W lanes' copies of each operation are isomorphic and become vector instructions,
    the step control's decisions selects (the assembly counts behind this:
    docs/log.md, "lanes"). Each name is assigned once and each decision is written as
    `_select`, not as a conditional expression: numba's SSA pass rewrites each name
    with two definitions over the whole attempt, which took most of the lane loop's
    first compile (docs/log.md, "a cheaper lane loop compile").

    ``V[:, :, lane]``: the lane's states (``Y``, ``F`` the derivative at the step's
    start; ``YN`` and ``FN``, the step's end and its derivative, are written by the
    lane-by-lane code); ``FL`` its floats, ``LI`` its integers (`FLOATS`, `INTS`),
    ``PV[lane]`` its object's parameters, ``TL[:, lane]`` its rtol then atol.

    Only the states, times and counts that move on are stored: a lane the lane-by-lane
    code takes over gets the step again from the per-object attempt (the same numbers),
    its stages in its object's work rows for the interpolant; storing every lane's
    stages and sums each attempt (90 of its 120 stores on the orbit workload) was for
    the one lane in hundreds of attempts that needed them.

    The step control of the per-object loop (`.control.make_step`) then runs here, as
    selects, for a lane whose attempt is rejected with a step still above the smallest
    one, or accepted without an output time, its span's end or max_steps in reach: its
    state, step size and counts move on and its next attempt's times are set. The
    lane's ``LI[SPECIAL]`` says what is left to the lane-by-lane code: 0 nothing, 1 the
    whole control (the lane's state untouched), 2 only the next step's opening (the
    accepted step's state already in place). The smallest step, 10 ulp of t, is bounded
    above by ``10 |t| 2^-52 + 1e-300``: a step at or above that bound is above it and
    needs no exact ulp (`.control.ulp_toward`'s ``frexp``); a step below it goes to the
    lane-by-lane code. Returns whether any lane has something left there.

    With ``n_events`` events (``ev0``, ``ev1``, ... in the namespace: the user's
    ``g(t, y, p, c)``, inlined like ``f``), an accepted step's end is checked as the
    per-object loop checks it: each event's value there against its last one
    (``GL[e, lane]``) under its direction (``ED[e]``, `.events.is_triggered` as
    selects), with its constants ``EC[e]``. A lane where one triggers is left whole to
    the lane-by-lane code (its state untouched: the per-object step again, then the
    interpolant, the roots and a terminal stop, `.events.make_roots`); a lane that
    moves on keeps the new values. So every accepted step is checked exactly once: here
    where the lane moves on, else in the lane-by-lane code.

    With ``records`` (step records: ``dense_output=True``, ``t_eval="steps"``) every
    lane's step start (``V[YO]``, ``V[FO]``, ``FL[TO]``, ``FL[HO]``) and stages 1 to s
    (``V[KS + c - 1]``) are stored too, and ``LI[MOVED]`` says whether the lane moved
    on, so that the lane-by-lane code records the step (its interpolant from these
    stages, as the per-object loop's from its work rows); then it returns whether any
    lane moved on or has something left.
    """
    s = tableau.n_stages
    pair = len(tableau.error) == 2
    rows = {"b": {c: w for c, w in enumerate(tableau.b) if w}}
    rows.update({name: {c: w for c, w in enumerate(row[:s]) if w}
                 for name, row in tableau.error.items()})
    idx, lanes = range(n), range(width)
    comma = "," if n == 1 else ""
    lines = ["def attempt(V, FL, PV, LI, TL, max_steps, GL, ED, EC):"]

    def emit(line, indent=1):
        lines.append("    " * indent + line)

    events = range(n_events)
    for e in events:  # (shared by all objects: read once)
        # `.events.is_triggered`'s direction filter as two flags (a NaN direction, as
        # 0, lets both through): upward crossings count unless the direction is
        # negative, downward ones unless positive; selects on them stay in the vectors,
        # where its branches on the direction were taken per lane
        emit(f"eup{e} = not (ED[{e}] < 0.0)")
        emit(f"edown{e} = not (ED[{e}] > 0.0)")
        emit(f"ec{e} = EC[{e}]")
    for l in lanes:
        for e in events:
            emit(f"go{e}_{l} = GL[{e}, {l}]")
        emit(f"t_{l} = FL[T, {l}]")
        emit(f"h_{l} = FL[H, {l}]")
        emit(f"p_{l} = PV[{l}]")
        for i in idx:
            emit(f"y{i}_{l} = V[Y, {i}, {l}]")
            emit(f"k0_{i}_{l} = V[F, {i}, {l}]")
            emit(f"rt{i}_{l} = TL[{i}, {l}]")
            emit(f"at{i}_{l} = TL[{n + i}, {l}]")
        for name, row, source in (("act", "ACTIVE", "LI"), ("rj", "REJ", "LI"),
                                  ("df", "DF", "LI"), ("ns", "NSTEPS_", "LI"),
                                  ("nf", "NFEV_", "LI"), ("dr", "DIRS", "FL"),
                                  ("te", "TEND", "FL"), ("mx", "MAXS", "FL"),
                                  ("nx", "NEXT", "FL"), ("ha", "HABS", "FL"),
                                  ("tn", "TN", "FL")):
            emit(f"{name}_{l} = {source}[{row}, {l}]")

    def call(l, time, state, index):
        targets = ", ".join(f"k{index}_{i}_{l}" for i in idx) + ","
        emit(f"{targets} = fun({time}, ({', '.join(state)}{comma}), p_{l})")

    for index, c, row in tableau.stage_rows(range(1, s)):
        for l in lanes:
            call(l, f"t_{l} + {c!r} * h_{l}",
                 [f"y{i}_{l} + h_{l} * ({_weighted(row, lambda c, i=i, l=l: f'k{c}_{i}_{l}')})"
                  for i in idx], index)
    names = list(rows)
    for l in lanes:
        for k, row in enumerate(rows.values()):
            for i in idx:
                emit(f"{names[k]}{i}_{l} = {_weighted(row, lambda c, i=i, l=l: f'k{c}_{i}_{l}')}")
        for i in idx:
            emit(f"yn{i}_{l} = y{i}_{l} + h_{l} * b{i}_{l}")
    for l in lanes:
        call(l, f"t_{l} + h_{l}", [f"yn{i}_{l}" for i in idx], s)
    for l in lanes:
        # the events at the step's end t_new, as the per-object loop calls them
        for e in events:
            emit(f"gn{e}_{l} = ev{e}(tn_{l}, ({', '.join(f'yn{i}_{l}' for i in idx)}{comma}),"
                 f" p_{l}, ec{e})")
    for l in lanes:
        # the error scale as `.state`'s error_scale: atol + max(|y|, |y_new|) * rtol, floored
        scale = [f"max(at{i}_{l} + max(abs(y{i}_{l}), abs(yn{i}_{l}))"
                 f" * rt{i}_{l}, 2.2250738585072014e-308)" for i in idx]
        if not pair:
            # embedded pairs: err = sums + e_last f_new; norm(h err / scale) / sqrt(n)
            (e_row,) = tableau.error.values()
            name = names[1]
            for i in idx:
                emit(f"q{i}_{l} = h_{l} * ({name}{i}_{l} + {e_row[s]!r} * k{s}_{i}_{l})"
                     f" / {scale[i]}")
            emit(f"err0_{l} = sqrt(" + " + ".join(f"q{i}_{l} * q{i}_{l}" for i in idx)
                 + f") / {math.sqrt(n)!r}")
            emit(f"err1_{l} = 0.0")
        else:
            # DOP853: the weights 1 / scale, then sum((e5 w)^2), sum((e3 w)^2)
            for i in idx:
                emit(f"w{i}_{l} = 1.0 / {scale[i]}")
            for k in (1, 2):
                for i in idx:
                    emit(f"q{k}_{i}_{l} = {names[k]}{i}_{l} * w{i}_{l}")
                emit(f"err{k - 1}_{l} = " + " + ".join(f"q{k}_{i}_{l} * q{k}_{i}_{l}"
                                                       for i in idx))
    for l in lanes:
        # the error norm (`pair_norm` for DOP853), then `.control.make_step`'s decisions
        if pair:
            emit(f"ov_{l} = (err0_{l} == math.inf) | (err1_{l} == math.inf)")
            # (both sides computed: a select packs, a branch per lane would not)
            emit(f"er_{l} = abs(h_{l}) * err0_{l} / sqrt((err0_{l} + 0.01 * err1_{l}) * "
                 f"{float(n)!r})")
            emit(f"en_{l} = select((err0_{l} == 0.0) & (err1_{l} == 0.0), 0.0, er_{l})")
        else:
            emit(f"ov_{l} = False")
            emit(f"en_{l} = err0_{l}")
        emit(f"acc_{l} = en_{l} < 1.0")
        emit(f"sf_{l} = step_factor(en_{l})")
        emit(f"fm_{l} = select(en_{l} == 0.0, MAX_FACTOR, min(MAX_FACTOR, sf_{l}))")
        emit(f"fa_{l} = select(rj_{l} != 0, min(1.0, fm_{l}), fm_{l})")
        emit(f"hacc_{l} = ha_{l} * fa_{l}")
        emit(f"hcap_{l} = select(hacc_{l} > mx_{l}, mx_{l}, hacc_{l})")
        emit(f"hrej_{l} = ha_{l} * max(MIN_FACTOR, sf_{l})")
        # an output time, DF's interpolant or the end in this step: the lane-by-lane code
        emit(f"near_{l} = (df_{l} != 0) | (dr_{l} * (nx_{l} - tn_{l}) <= 0.0) | "
             f"(dr_{l} * (tn_{l} - te_{l}) >= 0.0)")
        emit(f"open_{l} = (hcap_{l} >= 10.0 * (abs(tn_{l}) * 2.220446049250313e-16) + 1e-300)"
             f" & (ns_{l} + 1 < max_steps)")
        emit(f"okrej_{l} = hrej_{l} >= 10.0 * (abs(t_{l}) * 2.220446049250313e-16) + 1e-300")
        emit(f"live_{l} = (act_{l} != 0) & (not ov_{l})")
        # `.events.is_triggered`: touching zero counts; the direction filters
        trig = ["False"]
        for e in events:
            emit(f"tr{e}_{l} = ((go{e}_{l} <= 0.0) & (gn{e}_{l} >= 0.0) & eup{e}) | "
                 f"((go{e}_{l} >= 0.0) & (gn{e}_{l} <= 0.0) & edown{e})")
            trig.append(f"tr{e}_{l}")
        emit(f"trig_{l} = {' | '.join(trig)}")
        emit(f"moved_{l} = live_{l} & acc_{l} & (not near_{l}) & (not trig_{l})")
        emit(f"cacc_{l} = moved_{l} & open_{l}")
        emit(f"crej_{l} = live_{l} & (not acc_{l}) & okrej_{l}")
        emit(f"clean_{l} = cacc_{l} | crej_{l}")
        emit(f"half_{l} = moved_{l} & (not open_{l})")
        emit(f"full_{l} = (act_{l} != 0) & (not clean_{l}) & (not half_{l})")
        emit(f"tc_{l} = select(moved_{l}, tn_{l}, t_{l})")
        emit(f"hx_{l} = select(cacc_{l}, hcap_{l}, hrej_{l})")
        emit(f"ts_{l} = tc_{l} + hx_{l} * dr_{l}")
        emit(f"tx_{l} = select(dr_{l} * (ts_{l} - te_{l}) > 0.0, te_{l}, ts_{l})")
        emit(f"hn_{l} = tx_{l} - tc_{l}")
    for i in idx:
        for l in lanes:
            emit(f"V[Y, {i}, {l}] = select(moved_{l}, yn{i}_{l}, y{i}_{l})")
    for i in idx:
        for l in lanes:
            emit(f"V[F, {i}, {l}] = select(moved_{l}, k{s}_{i}_{l}, k0_{i}_{l})")
    for e in events:
        for l in lanes:
            emit(f"GL[{e}, {l}] = select(moved_{l}, gn{e}_{l}, go{e}_{l})")
    for row, value in (("T", "tc_{l}"), ("TN", "select(clean_{l}, tx_{l}, tn_{l})"),
                       ("H", "select(clean_{l}, hn_{l}, h_{l})"),
                       ("HABS", "select(clean_{l}, abs(hn_{l}), "
                                "select(half_{l}, hacc_{l}, ha_{l}))")):
        for l in lanes:
            emit(f"FL[{row}, {l}] = " + value.format(l=l))
    for row, value in (("NSTEPS_", "select(moved_{l}, ns_{l} + 1, ns_{l})"),
                       ("NFEV_", "select(clean_{l} | half_{l}, nf_{l} + {nfev}, nf_{l})"),
                       ("REJ", "select(cacc_{l}, 0, select(crej_{l}, 1, rj_{l}))"),
                       ("FRESH", "select(half_{l}, 1, 0)"),
                       ("SPECIAL", "select(full_{l}, 1, select(half_{l}, 2, 0))")):
        for l in lanes:
            emit(f"LI[{row}, {l}] = " + value.format(l=l, nfev="STEP_NFEV"))
    if records:
        stage_indices = [index for index, _, _ in tableau.stage_rows(range(1, s))] + [s]
        for i in idx:
            for l in lanes:
                emit(f"V[YO, {i}, {l}] = y{i}_{l}")
        for i in idx:
            for l in lanes:
                emit(f"V[FO, {i}, {l}] = k0_{i}_{l}")
        for c in stage_indices:
            for i in idx:
                for l in lanes:
                    emit(f"V[KS + {c - 1}, {i}, {l}] = k{c}_{i}_{l}")
        for row, value in (("TO", "t_{l}"), ("HO", "h_{l}")):
            for l in lanes:
                emit(f"FL[{row}, {l}] = " + value.format(l=l))
        for l in lanes:
            emit(f"LI[MOVED, {l}] = select(moved_{l}, 1, 0)")
        emit("return " + " | ".join(f"full_{l} | half_{l} | moved_{l}" for l in lanes))
    else:
        emit("return " + " | ".join(f"full_{l} | half_{l}" for l in lanes))
    return "\n".join(lines) + "\n"


#: rows of the lanes' states ``V``: the state, its derivative, the step's end and its
#: derivative; with step records also the step's start state and derivative, then its
#: stages 1, 2, ... from row ``KS`` (`generate_attempt`'s ``records``)
Y, F, YN, FN, YO, FO, KS = 0, 1, 2, 3, 4, 5, 6
#: rows of the lanes' floats ``FL``: time, the attempt's end, its signed step, the span's
#: end, the direction, max_step, |h|, the next output time (``direction * inf``: none
#: left); with step records the attempt's start and signed step
T, TN, H, TEND, DIRS, MAXS, HABS, NEXT, TO, HO = range(10)
N_FLOATS = HO + 1
#: rows of the lanes' integers ``LI``: object, its params, conf and t_eval rows, next
#: output time, nfev, nsteps; flags: has an object, at a step's start, rejected in this
#: step, owes the interpolant of outputs at t0 (scipy builds the first step's; its
#: nfev counts it), what the lane-by-lane code owes the lane after an attempt (0, 1, 2:
#: `generate_attempt`), whether the attempt moved the lane on (step records)
OBJ, PI, CI, TI, J, NFEV_, NSTEPS_, ACTIVE, FRESH, REJ, DF, SPECIAL, MOVED = range(13)
N_INTS = MOVED + 1
_CONSTANTS = {name: value for name, value in globals().items()
              if name in ("Y", "F", "YN", "FN", "YO", "FO", "KS", "T", "TN", "H", "TEND",
                          "DIRS", "MAXS", "HABS", "NEXT", "TO", "HO", "OBJ", "PI", "CI", "TI",
                          "J", "NFEV_", "NSTEPS_", "ACTIVE", "FRESH", "REJ", "DF", "SPECIAL",
                          "MOVED")}


def _lane_views(width):
    """``views(A)``: the tuple of A's columns (made once per call: a column taken inside
    the attempt is a branch per lane that keeps its lanes apart)."""
    return (f"def views(A):\n    return ({', '.join(f'A[:, {l}]' for l in range(width))},)\n")


def _lane_access(n):
    """``get(A, l)``: the tuple of column l of A; ``put(A, l, y)``: written back."""
    idx = range(n)
    comma = "," if n == 1 else ""
    return (f"def get(A, l):\n    return ({', '.join(f'A[{i}, l]' for i in idx)}{comma})\n"
            "def put(A, l, y):\n" + "".join(f"    A[{i}, l] = y[{i}]\n" for i in idx))


@factory
def make_attempt(method_name, n, f, width, events=(), records=False):
    """`generate_attempt` compiled, with ``f``, the width and the event functions
    ``events`` (each ``g(t, y, p, c)``) as constants; ``records``: the attempt of a
    kernel with step records (it stores each lane's step start and stages)."""
    method = methods.get(method_name)
    parts = method.build(state_ops(n, "tuple"), True, f)
    tableau = method.tableau
    namespace = {"fun": f, "math": math, "W": width, "MAX_FACTOR": MAX_FACTOR,
                 "MIN_FACTOR": MIN_FACTOR, "STEP_NFEV": parts.step_nfev,
                 "step_factor": _lane_step_factor(parts.error_exponent), "sqrt": _sqrt,
                 "select": _select,
                 "__name__": __name__, **_CONSTANTS}
    namespace.update({f"ev{e}": g for e, g in enumerate(events)})
    exec(compile(generate_attempt(tableau, n, width, len(events), records),
                 f"<hapsira lanes {method_name} n={n} W={width} events={len(events)} "
                 f"records={records}>", "exec"), namespace)
    from ..targets import _host  # (lanes run on the host targets only)

    return hjit(namespace["attempt"], cache=False, pipeline_class=_host.lane_compiler())


@factory
def make_views(width):
    namespace = {"__name__": __name__}
    exec(compile(_lane_views(width), f"<hapsira lane views W={width}>", "exec"), namespace)
    return hjit(namespace["views"], cache=False)


@factory
def make_access(n):
    namespace = {"__name__": __name__}
    exec(compile(_lane_access(n), f"<hapsira lane access n={n}>", "exec"), namespace)
    return hjit(namespace["get"], cache=False), hjit(namespace["put"], cache=False)


@factory
def make_solve_lanes(method_name, n, f, width, events=(), event_states=False,
                     records=False):
    """``solve(y0, t_eval, params, conf, iconf, ev_direction, ev_max, ev_consts, out_y,
    info, t_events, y_events, n_events, scratch, work, first, last)``: objects
    ``first`` to ``last - 1`` of the whole arrays (rows of one with a first axis of 1
    are shared), in ``width`` lanes; the outputs are those of `.loop.make_solve`'s
    ``solve`` for the same objects, bit for bit. ``events``: the event functions
    ``g(t, y, p, c)`` (checked in the attempt, `generate_attempt`; located lane by lane),
    ``event_states``: `.loop.make_solve`'s. With ``records`` it writes the step records
    ``steps`` and ``dense`` as `.loop.make_solve` does (each moved lane's step recorded
    lane by lane after the attempt, from the stages it stored); without, ``steps`` and
    ``dense`` are stand-ins, never written."""
    method = methods.get(method_name)
    ops = state_ops(n, "tuple")
    parts = method.build(ops, True, f)
    fun = rhs(f, "tuple", n)
    initial_step = make_initial_step(ops, method.rows, method.error_estimator_order, fun)
    coefficients, evaluate, own_placeholder = parts.coefficients, parts.evaluate, parts.placeholder
    step_factor = _step_factor(parts.error_exponent)
    step_attempt = parts.attempt
    attempt = make_attempt(method_name, n, f, width, events, records)
    record_reset, record_step = make_records(ops, method.coefficient_states(n))
    stage_rows = 1 + (method.tableau.n_stages if records else 0)  # stages 1..s from KS
    g = switch(events, 4)  # the per-object loop's g(e, t, y, p, c)
    roots = make_roots(parts.evaluate, g, ops.store_row, event_states)
    has_events = len(events) > 0
    n_rows_g = max(len(events), 1)
    get, put = make_access(n)
    views = make_views(width)
    load, store_row, fill_row, is_finite = ops.load, ops.store_row, ops.fill_row, ops.is_finite
    W = width
    step_nfev, dense_nfev = parts.step_nfev, parts.dense_nfev
    by_difference = end_values(parts)[0]
    store_outputs = make_store_outputs(ops, parts)
    conf_row = config_row(n)
    T0, TF, TOL = conf_row.t0, conf_row.tf, conf_row.rtol
    MAX_STEP, FIRST_STEP = conf_row.max_step, conf_row.first_step
    MAX, END_STATES = ICONF.max_steps, ICONF.end_states
    N_EV, Y_RECORDS, G = ICONF.n_events, ICONF.y_event_records, SCRATCH.g
    RECORDS = ICONF.records
    STATUS, NFEV, NSTEPS, NJEV, NLU = INFO.status, INFO.nfev, INFO.nsteps, INFO.njev, INFO.nlu
    inline = {"inline": "always"}  # the per-lane code of every attempt: no calls

    @hjit
    def begin(i, l, y0, t_eval, params, conf, iconf, ev_consts, out_y, info, t_events,
              y_events, n_events, work, steps, dense, V, FL, LI, TL, PL, GL):
        """Object i from its start to its first step (the per-object loop's opening),
        into lane l; False where it ends before any step."""
        out = out_y[i]
        for j in range(out.shape[0]):
            fill_row(out, j, math.nan)
        for e in range(t_events.shape[1]):
            n_events[i, e] = 0
            for c in range(t_events.shape[2]):
                t_events[i, e, c] = math.nan
        if event_states:
            for e in range(iconf[N_EV]):
                for c in range(iconf[Y_RECORDS]):
                    fill_row(y_events[i, e], c, math.nan)
        pi = i if params.shape[0] != 1 else 0
        ci = i if conf.shape[0] != 1 else 0
        ti = i if t_eval.shape[0] != 1 else 0
        p = params[pi]
        cr = conf[ci]
        te = t_eval[ti]
        t = cr[T0]
        t_end = cr[TF]
        direction = 1.0 if t_end >= t else -1.0
        y = load(y0[i if y0.shape[0] != 1 else 0], 0, None)
        info[i, NFEV] = 0
        info[i, NSTEPS] = 0
        info[i, NJEV] = 0
        info[i, NLU] = 0
        if records:
            mode = iconf[RECORDS]
            record_reset(steps[i], dense[i], mode)
            steps[i, 0, 0] = t
            if mode & RECORD_STATES:
                store_row(out, 0, y)
            if mode & RECORD_DENSE:  # scipy's constant interpolant where t0 == tf
                store_row(dense[i, 0], 0, y)
        if not is_finite(y):
            info[i, STATUS] = BAD_INITIAL_STATE
            return False
        fy = fun(t, y, p, None)
        nfev = 1
        if not is_finite(fy):
            info[i, STATUS] = BAD_INITIAL_STATE
            info[i, NFEV] = nfev
            return False
        j = 0
        while j < te.shape[0] and te[j] == t:
            store_row(out, j, y)
            j += 1
        if t == t_end:
            info[i, STATUS] = SUCCESS
            info[i, NFEV] = nfev
            return False
        for e in range(iconf[N_EV]):  # the events' values at t0, the lane's "last" ones
            GL[e, l] = g(e, t, y, p, ev_consts[e])
        max_step = cr[MAX_STEP]
        h_abs = cr[FIRST_STEP]
        if not h_abs > 0.0:
            h_abs = initial_step(t, y, fy, t_end, direction, max_step, cr, TOL, p, work[i])
            nfev += 1
        put(V[Y], l, y)
        put(V[F], l, fy)
        for r in range(2 * n):
            TL[r, l] = cr[TOL + r]
        for r in range(p.shape[0]):
            PL[r, l] = p[r]
        FL[NEXT, l] = te[j] if j < te.shape[0] else direction * math.inf
        FL[T, l] = t
        FL[TEND, l] = t_end
        FL[DIRS, l] = direction
        FL[MAXS, l] = max_step
        FL[HABS, l] = h_abs
        LI[OBJ, l] = i
        LI[PI, l] = pi
        LI[CI, l] = ci
        LI[TI, l] = ti
        LI[J, l] = j
        LI[NFEV_, l] = nfev
        LI[NSTEPS_, l] = 0
        LI[ACTIVE, l] = 1
        LI[FRESH, l] = 1
        LI[REJ, l] = 0
        LI[DF, l] = 1 if j > 0 and iconf[END_STATES] == 0 else 0
        return True

    @hjit
    def fill(l, next_object, last, y0, t_eval, params, conf, iconf, ev_consts, out_y, info,
             t_events, y_events, n_events, work, steps, dense, V, FL, LI, TL, PL, GL):
        """Lane l takes the next object that needs steps; returns the next untaken one."""
        while next_object < last:
            i = next_object
            next_object += 1
            if begin(i, l, y0, t_eval, params, conf, iconf, ev_consts, out_y, info, t_events,
                     y_events, n_events, work, steps, dense, V, FL, LI, TL, PL, GL):
                return next_object
        LI[ACTIVE, l] = 0
        return next_object

    @hjit(**inline)
    def finish(l, status, info, LI):
        i = LI[OBJ, l]
        info[i, STATUS] = status
        info[i, NFEV] = LI[NFEV_, l]
        info[i, NSTEPS] = LI[NSTEPS_, l]
        info[i, NJEV] = 0
        info[i, NLU] = 0

    @hjit
    def dense_outputs(l, t_eval, params, iconf, out_y, work, V, FL, LI, need_dense):
        """The output times in lane l's accepted step (the per-object interpolant,
        on the lane's stages, where one falls inside)."""
        i = LI[OBJ, l]
        te = t_eval[LI[TI, l]]
        n_out = te.shape[0]
        end_states = iconf[END_STATES] != 0
        direction = FL[DIRS, l]
        t = FL[T, l]
        t_new = FL[TN, l]
        h = FL[H, l]
        j = LI[J, l]
        y = get(V[Y], l)
        y_new = get(V[YN], l)
        w = work[i]
        coeffs = own_placeholder(y)
        if need_dense:
            for r in range(n):
                w[0, r] = V[F, r, l]
            coeffs = coefficients(t, y, get(V[F], l), y_new, get(V[FN], l), h,
                                  params[LI[PI, l]], w)
            LI[NFEV_, l] += dense_nfev
        j, out_nfev = store_outputs(out_y[i], te, j, t_new, t, t_new, h, y, y_new, coeffs,
                                    need_dense, end_states, direction, None)
        LI[NFEV_, l] += out_nfev
        LI[J, l] = j
        FL[NEXT, l] = te[j] if j < n_out else direction * math.inf

    @hjit(**inline)
    def accept(l, t_eval, params, iconf, out_y, work, V, FL, LI):
        """Lane l's accepted step: its output times, then its end is the lane's state."""
        te = t_eval[LI[TI, l]]
        j = LI[J, l]
        t_new = FL[TN, l]
        LI[NSTEPS_, l] += 1
        need_dense = LI[DF, l] != 0 or (j < te.shape[0] and interpolant_needed(
            te[j], t_new, FL[DIRS, l], iconf[END_STATES] != 0 or by_difference))
        LI[DF, l] = 0
        if need_dense or (j < te.shape[0] and FL[DIRS, l] * (te[j] - t_new) <= 0.0):
            dense_outputs(l, t_eval, params, iconf, out_y, work, V, FL, LI, need_dense)
        FL[T, l] = t_new
        for r in range(n):
            V[Y, r, l] = V[YN, r, l]
            V[F, r, l] = V[FN, r, l]

    @hjit
    def accept_events(l, t_eval, params, iconf, ev_direction, ev_max, ev_consts, out_y,
                      t_events, y_events, n_events, scratch, work, steps, dense, V, FL, LI, GL):
        """`accept` with events: the per-object loop's accepted step (`.loop.make_solve`),
        its events' roots (`.events.make_roots`, on the object's scratch rows, the lane's
        last values in and out), its output times up to a terminal root. Returns whether
        a terminal event ends the object."""
        i = LI[OBJ, l]
        te = t_eval[LI[TI, l]]
        n_out = te.shape[0]
        end_states = iconf[END_STATES] != 0
        direction = FL[DIRS, l]
        t = FL[T, l]
        t_new = FL[TN, l]
        h = FL[H, l]
        j = LI[J, l]
        y = get(V[Y], l)
        y_new = get(V[YN], l)
        p = params[LI[PI, l]]
        w = work[i]
        sc = scratch[i]
        n_ev = iconf[N_EV]
        LI[NSTEPS_, l] += 1
        need_dense = LI[DF, l] != 0 or (j < n_out and interpolant_needed(
            te[j], t_new, direction, end_states or by_difference))
        LI[DF, l] = 0
        mode = iconf[RECORDS] if records else 0
        need_dense = need_dense or mode & RECORD_DENSE != 0  # scipy: every step
        for e in range(n_ev):
            sc[e, G] = GL[e, l]
            if is_triggered(sc[e, G], g(e, t_new, y_new, p, ev_consts[e]), ev_direction[e]):
                need_dense = True
        coeffs = own_placeholder(y)
        if need_dense:
            for r in range(n):
                w[0, r] = V[F, r, l]
            coeffs = coefficients(t, y, get(V[F], l), y_new, get(V[FN], l), h, p, w)
            LI[NFEV_, l] += dense_nfev
        t_stop, e_stop = roots(t, t_new, y, y_new, h, coeffs, p, ev_direction, ev_max,
                               ev_consts, n_ev, iconf[Y_RECORDS], direction, t_events[i],
                               y_events[i], n_events[i], sc, None)
        for e in range(n_ev):
            GL[e, l] = sc[e, G]
        out = out_y[i]
        j, out_nfev = store_outputs(out, te, j, t_stop, t, t_new, h, y, y_new, coeffs,
                                    need_dense, end_states, direction, None)
        LI[NFEV_, l] += out_nfev
        if records:
            state = y_new
            if t_stop != t_new:  # scipy's t_eval=None: the terminal root's state
                state = evaluate(coeffs, t, h, y, t_stop, None)
            record_step(steps[i], dense[i], mode, LI[NSTEPS_, l] - 1, t_stop, h, y, coeffs,
                        out, state)
        LI[J, l] = j
        FL[NEXT, l] = te[j] if j < n_out else direction * math.inf
        FL[T, l] = t_new
        for r in range(n):
            V[Y, r, l] = V[YN, r, l]
            V[F, r, l] = V[FN, r, l]
        return e_stop < n_ev

    @hjit
    def record_moved(l, params, iconf, out_y, work, steps, dense, V, FL, LI):
        """The step records of a step that the attempt took and moved on (no event, no
        output time in it): its interpolant, where asked, from the stages the attempt
        stored, put in the object's work rows where the per-object attempt leaves them."""
        i = LI[OBJ, l]
        mode = iconf[RECORDS]
        y = get(V[YO], l)
        y_new = get(V[Y], l)
        t = FL[TO, l]
        h = FL[HO, l]
        coeffs = own_placeholder(y)
        if mode & RECORD_DENSE:
            w = work[i]
            for r in range(n):
                w[0, r] = V[FO, r, l]
            for c in range(1, stage_rows):
                for r in range(n):
                    w[c, r] = V[KS + c - 1, r, l]
            coeffs = coefficients(t, y, get(V[FO], l), y_new, get(V[F], l), h,
                                  params[LI[PI, l]], w)
            LI[NFEV_, l] += dense_nfev
        record_step(steps[i], dense[i], mode, LI[NSTEPS_, l] - 1, FL[T, l], h, y, coeffs,
                    out_y[i], y_new)

    @hjit(**inline)
    def opening(l, next_object, last, max_steps, y0, t_eval, params, conf, iconf, ev_consts,
                out_y, info, t_events, y_events, n_events, work, steps, dense, V, FL, LI, TL,
                PL, GL):
        """Lane l at a step's start: scipy's _step_impl opening (`.control.make_step`),
        then the times of its next attempt; a lane that fails there takes the next
        object. Returns the next untaken object."""
        while LI[ACTIVE, l] != 0 and LI[FRESH, l] != 0:
            if LI[NSTEPS_, l] >= max_steps:
                status = MAX_STEPS
            else:
                direction = FL[DIRS, l]
                min_step = 10.0 * ulp_toward(FL[T, l], direction)
                h_abs = FL[HABS, l]
                status = SUCCESS
                if h_abs > FL[MAXS, l]:
                    h_abs = FL[MAXS, l]
                    if h_abs < min_step:
                        status = STEP_TOO_SMALL
                elif h_abs < min_step:
                    h_abs = min_step
                FL[HABS, l] = h_abs
                LI[FRESH, l] = 0
                LI[REJ, l] = 0
            if status != SUCCESS:
                finish(l, status, info, LI)
                next_object = fill(l, next_object, last, y0, t_eval, params, conf, iconf,
                                   ev_consts, out_y, info, t_events, y_events, n_events, work,
                                   steps, dense, V, FL, LI, TL, PL, GL)
        if LI[ACTIVE, l] != 0:
            direction = FL[DIRS, l]
            t_new = FL[T, l] + FL[HABS, l] * direction
            if direction * (t_new - FL[TEND, l]) > 0.0:
                t_new = FL[TEND, l]
            FL[TN, l] = t_new
            FL[H, l] = t_new - FL[T, l]
            FL[HABS, l] = abs(FL[H, l])
        return next_object

    @hjit
    def solve(y0, t_eval, params, conf, iconf, ev_direction, ev_max, ev_consts,
              out_y, info, t_events, y_events, n_events, scratch, work, steps, dense, first,
              last):
        # lane arrays (zeros: a lane without an object computes on harmless numbers)
        V = np.zeros((KS + stage_rows - 1 if records else FN + 1, n, W))
        FL = np.zeros((N_FLOATS, W))
        LI = np.zeros((N_INTS, W), np.int64)
        TL = np.ones((2 * n, W))
        PL = np.zeros((params.shape[1], W))
        GL = np.zeros((n_rows_g, W))  # each event's last value (`generate_attempt`)
        FL[DIRS] = 1.0
        if last > first:  # a lane without an object computes with the first one's params
            p = params[first if params.shape[0] != 1 else 0]
            for l in range(W):
                for r in range(p.shape[0]):
                    PL[r, l] = p[r]
        PV = views(PL)
        max_steps = iconf[MAX]
        next_object = first
        for l in range(W):
            next_object = fill(l, next_object, last, y0, t_eval, params, conf, iconf,
                               ev_consts, out_y, info, t_events, y_events, n_events, work,
                               steps, dense, V, FL, LI, TL, PL, GL)
        for l in range(W):
            next_object = opening(l, next_object, last, max_steps, y0, t_eval, params, conf,
                                  iconf, ev_consts, out_y, info, t_events, y_events, n_events,
                                  work, steps, dense, V, FL, LI, TL, PL, GL)
        mode = iconf[RECORDS] if records else 0
        busy = False
        for l in range(W):
            busy = busy or LI[ACTIVE, l] != 0
        while busy:
            if not attempt(V, FL, PV, LI, TL, max_steps, GL, ev_direction, ev_consts):
                continue
            for l in range(W):
                if mode != 0 and LI[MOVED, l] != 0:
                    record_moved(l, params, iconf, out_y, work, steps, dense, V, FL, LI)
                if LI[SPECIAL, l] == 1:
                    # the per-object loop's step control, lane by lane, on the per-object
                    # attempt's numbers (the same as the lanes', and its stages in the
                    # object's work rows for the interpolant; an overflowed DOP853 norm)
                    LI[NFEV_, l] += step_nfev
                    y_new, f_new, err = step_attempt(
                        FL[T, l], get(V[Y], l), get(V[F], l), FL[H, l], params[LI[PI, l]],
                        conf[LI[CI, l]], TOL, work[LI[OBJ, l]])
                    put(V[YN], l, y_new)
                    put(V[FN], l, f_new)
                    if err < 1.0:
                        if err == 0.0:
                            factor = MAX_FACTOR
                        else:
                            factor = min(MAX_FACTOR, step_factor(err))
                        if LI[REJ, l] != 0:
                            factor = min(1.0, factor)
                        FL[HABS, l] = FL[HABS, l] * factor
                        stopped = False
                        if has_events or records:
                            stopped = accept_events(l, t_eval, params, iconf, ev_direction,
                                                    ev_max, ev_consts, out_y, t_events,
                                                    y_events, n_events, scratch, work, steps,
                                                    dense, V, FL, LI, GL)
                        else:
                            accept(l, t_eval, params, iconf, out_y, work, V, FL, LI)
                        if stopped or FL[DIRS, l] * (FL[T, l] - FL[TEND, l]) >= 0.0:
                            finish(l, TERMINATED if stopped else SUCCESS, info, LI)
                            next_object = fill(l, next_object, last, y0, t_eval, params,
                                               conf, iconf, ev_consts, out_y, info, t_events,
                                               y_events, n_events, work, steps, dense, V, FL,
                                               LI, TL, PL, GL)
                        else:
                            LI[FRESH, l] = 1
                    else:
                        FL[HABS, l] = FL[HABS, l] * max(MIN_FACTOR, step_factor(err))
                        LI[REJ, l] = 1
                        # the step's smallest |h|, 10 ulp of its start; written so that a
                        # NaN error (a non-finite state) also ends here
                        if not FL[HABS, l] >= 10.0 * ulp_toward(FL[T, l], FL[DIRS, l]):
                            finish(l, STEP_TOO_SMALL, info, LI)
                            next_object = fill(l, next_object, last, y0, t_eval, params,
                                               conf, iconf, ev_consts, out_y, info, t_events,
                                               y_events, n_events, work, steps, dense, V, FL,
                                               LI, TL, PL, GL)
                if LI[SPECIAL, l] != 0:
                    LI[SPECIAL, l] = 0
                    next_object = opening(l, next_object, last, max_steps, y0, t_eval,
                                          params, conf, iconf, ev_consts, out_y, info,
                                          t_events, y_events, n_events, work, steps, dense,
                                          V, FL, LI, TL, PL, GL)
            busy = False
            for l in range(W):
                busy = busy or LI[ACTIVE, l] != 0

    return solve
