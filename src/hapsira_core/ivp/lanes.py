"""The lane loop: W objects stepped together, one per SIMD lane of the host's vectors.

The per-object loop (`.loop`) steps one object at a time, so the host's vector
registers hold one float where they could hold four (AVX2) or eight (AVX-512).
Here each of W lanes holds an object: its state, stages and step control live
in lane-major arrays (``Y[i, lane]``, structure of arrays), and a step's stages,
sums and error norm are loops over the lanes that LLVM turns into packed vector
code, the user's tuple-form ``f`` inlined in them. What differs per lane (accept
or reject, output times, end, failure) is decided lane by lane between
attempts; a lane whose object ends takes the next object, so lanes stay full.

Every number is formed with the operations of the per-object loop in the same
order (the stage sums in increasing stage order, zero weights skipped, as
`.stages.generate` writes them; the norms as `.state`'s tuple code), so the
results are bit-identical to the per-object kernel's; the interpolant, the
first step and the rare overflowing DOP853 norm are the per-object code itself,
run for the one lane that needs them. Events, step records, array-form ``f``
(and so ``stm=True``), ``jac=`` and the implicit methods take the per-object
loop (`supports`).
"""

import math

import numpy as np

from ..jit import hjit
from ..kernels.cache import factory
from . import methods
from .control import MAX_FACTOR, MIN_FACTOR, _step_factor, make_initial_step, ulp_toward
from .layout import (
    BAD_INITIAL_STATE,
    ICONF,
    INFO,
    MAX_STEPS,
    STEP_TOO_SMALL,
    SUCCESS,
    config_row,
)
from .state import fun_form, rhs
from .state import ops as state_ops


def supports(method_name, fun, event_functions=(), records=False, jac=None):
    """Whether the lane loop runs this kernel (else the per-object loop does)."""
    method = methods.get(method_name)
    return (method.state_shape is None and fun_form(fun) == "tuple" and not event_functions
            and not records and jac is None and hasattr(method, "tableau")
            and len(method.tableau.error) in (1, 2))


def _weighted(row, column):
    """``w_a * k_a + w_b * k_b + ...`` in increasing stage order, zeros skipped
    (`.stages.generate`'s sums); ``column(c)`` is the source of stage c."""
    return " + ".join(f"{w!r} * {column(c)}" for c, w in sorted(row.items())) or "0.0"


def generate_attempt(tableau, n, width):
    """Source of ``attempt(V, FL, params, LI, conf)``: one
    attempted step in every lane, written out lane by lane as straight-line code.

    Every number read is loaded first and every result stored last: the lanes'
    arrays are separate, but LLVM cannot prove it, and a store between two lanes'
    loads keeps its SLP vectoriser from packing them (measured: no packed
    instruction at all with one loop per stage). Between, the W lanes' copies of
    each operation are isomorphic and become vector instructions.

    ``V[:, :, lane]``: the lane's states (`ROWS`: ``V[2 + c]`` is stage c, ``V[2 + s]``
    the step end's derivative; ``F`` the derivative at the step's start, stage 0;
    ``V[3 + s + k]`` the k-th output sum, b then the error rows); ``FL`` its floats and
    ``LI`` its integers (`FLOATS`, `INTS`). ``FL[ERR]``: the error norm (one error
    row) or e5's and ``FL[ERR + 1]`` e3's sum of squares (DOP853's pair).
    """
    s = tableau.n_stages
    rows = {"b": {c: w for c, w in enumerate(tableau.b) if w}}
    rows.update({name: {c: w for c, w in enumerate(row[:s]) if w}
                 for name, row in tableau.error.items()})
    idx, lanes = range(n), range(width)
    comma = "," if n == 1 else ""
    lines = ["def attempt(V, FL, params, LI, conf):"]

    def emit(line):
        lines.append("    " + line)

    for l in lanes:
        emit(f"t_{l} = FL[T, {l}]")
        emit(f"h_{l} = FL[H, {l}]")
        emit(f"p_{l} = params[LI[PI, {l}]]")
        emit(f"c_{l} = conf[LI[CI, {l}]]")
        for i in idx:
            emit(f"y{i}_{l} = V[Y, {i}, {l}]")
            emit(f"k0_{i}_{l} = V[F, {i}, {l}]")

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
        # the error scale as `.state`'s error_scale: atol + max(|y|, |y_new|) * rtol, floored
        scale = [f"max(c_{l}[TOL + {n + i}] + max(abs(y{i}_{l}), abs(yn{i}_{l}))"
                 f" * c_{l}[TOL + {i}], 2.2250738585072014e-308)" for i in idx]
        if len(tableau.error) == 1:
            # embedded pairs: err = sums + e_last f_new; norm(h err / scale) / sqrt(n)
            (e_row,) = tableau.error.values()
            name = names[1]
            for i in idx:
                emit(f"q{i}_{l} = h_{l} * ({name}{i}_{l} + {e_row[s]!r} * k{s}_{i}_{l})"
                     f" / {scale[i]}")
            emit(f"err0_{l} = math.sqrt(" + " + ".join(f"q{i}_{l} * q{i}_{l}" for i in idx)
                 + f") / {math.sqrt(n)!r}")
            emit(f"err1_{l} = 0.0")
        else:
            # DOP853: the weights 1 / scale, then sum((e5 w)^2), sum((e3 w)^2)
            for i in idx:
                emit(f"w{i}_{l} = 1.0 / {scale[i]}")
            for k in (1, 2):
                for i in idx:
                    emit(f"q{i}_{l} = {names[k]}{i}_{l} * w{i}_{l}")
                emit(f"err{k - 1}_{l} = " + " + ".join(f"q{i}_{l} * q{i}_{l}" for i in idx))
    for c in range(1, s + 1):
        for i in idx:
            for l in lanes:
                emit(f"V[{2 + c}, {i}, {l}] = k{c}_{i}_{l}")
    for k, name in enumerate(names):
        for i in idx:
            for l in lanes:
                emit(f"V[{3 + s + k}, {i}, {l}] = {name}{i}_{l}")
    for i in idx:
        for l in lanes:
            emit(f"V[YN, {i}, {l}] = yn{i}_{l}")
    for e in (0, 1):
        for l in lanes:
            emit(f"FL[ERR + {e}, {l}] = err{e}_{l}")
    return "\n".join(lines) + "\n"


#: rows of the lanes' states ``V`` (then the stages from row 3, then the sums)
Y, F, YN = 0, 1, 2
#: rows of the lanes' floats ``FL``: time, the attempt's end, its signed step, the span's
#: end, the direction, max_step, |h|, the step's smallest |h|, the error numbers (2)
T, TN, H, TEND, DIRS, MAXS, HABS, MINS, ERR = range(9)
N_FLOATS = ERR + 2
#: rows of the lanes' integers ``LI``: object, its params, conf and t_eval rows, next
#: output time, nfev, nsteps; flags: has an object, at a step's start, rejected in this
#: step, owes the interpolant of outputs at t0 (scipy builds the first step's; its
#: nfev counts it)
OBJ, PI, CI, TI, J, NFEV_, NSTEPS_, ACTIVE, FRESH, REJ, DF = range(11)
N_INTS = DF + 1
_CONSTANTS = {name: value for name, value in globals().items()
              if name in ("Y", "F", "YN", "T", "TN", "H", "TEND", "DIRS", "MAXS", "HABS",
                          "MINS", "ERR", "OBJ", "PI", "CI", "TI", "J", "NFEV_", "NSTEPS_",
                          "ACTIVE", "FRESH", "REJ", "DF")}


def _lane_access(n):
    """``get(A, l)``: the tuple of column l of A; ``put(A, l, y)``: written back."""
    idx = range(n)
    comma = "," if n == 1 else ""
    return (f"def get(A, l):\n    return ({', '.join(f'A[{i}, l]' for i in idx)}{comma})\n"
            "def put(A, l, y):\n" + "".join(f"    A[{i}, l] = y[{i}]\n" for i in idx))


@factory
def make_attempt(method_name, n, f, width):
    """`generate_attempt` compiled, with ``f`` and the width as constants."""
    tableau = methods.get(method_name).tableau
    namespace = {"fun": f, "math": math, "W": width, "TOL": config_row(n).rtol,
                 "__name__": __name__, **_CONSTANTS}
    exec(compile(generate_attempt(tableau, n, width), f"<hapsira lanes {method_name} n={n} "
                 f"W={width}>", "exec"), namespace)
    return hjit(namespace["attempt"], cache=False)


@factory
def make_access(n):
    namespace = {"__name__": __name__}
    exec(compile(_lane_access(n), f"<hapsira lane access n={n}>", "exec"), namespace)
    return hjit(namespace["get"], cache=False), hjit(namespace["put"], cache=False)


@factory
def make_solve_lanes(method_name, n, f, width):
    """``solve(y0, t_eval, params, conf, iconf, ev_direction, ev_max, ev_consts, out_y,
    info, t_events, y_events, n_events, scratch, work, first, last)``: objects
    ``first`` to ``last - 1`` of the whole arrays (rows of one with a first axis of 1
    are shared), in ``width`` lanes; the outputs are those of `.loop.make_solve`'s
    ``solve`` for the same objects, bit for bit."""
    method = methods.get(method_name)
    tableau = method.tableau
    ops = state_ops(n, "tuple")
    parts = method.build(ops, True, f)
    fun = rhs(f, "tuple", n)
    initial_step = make_initial_step(ops, method.rows, method.error_estimator_order, fun)
    coefficients, evaluate, own_placeholder = parts.coefficients, parts.evaluate, parts.placeholder
    step_factor = _step_factor(parts.error_exponent)
    attempt = make_attempt(method_name, n, f, width)
    get, put = make_access(n)
    load, store_row, fill_row, is_finite = ops.load, ops.store_row, ops.fill_row, ops.is_finite
    S = tableau.n_stages
    n_rows = 3 + S + 1 + len(tableau.error)  # y, f, y_new, stages 1..s, the sums
    SUM1 = 3 + S + 1  # the first error row's sums
    pair = len(tableau.error) == 2  # DOP853's combined 5th/3rd order norm
    W = width
    step_nfev, dense_nfev = parts.step_nfev, parts.dense_nfev
    conf_row = config_row(n)
    T0, TF, TOL = conf_row.t0, conf_row.tf, conf_row.rtol
    MAX_STEP, FIRST_STEP = conf_row.max_step, conf_row.first_step
    MAX, END_STATES = ICONF.max_steps, ICONF.end_states
    STATUS, NFEV, NSTEPS, NJEV, NLU = INFO.status, INFO.nfev, INFO.nsteps, INFO.njev, INFO.nlu
    n_err = float(n)
    inline = {"inline": "always"}  # the per-lane code of every attempt: no calls

    @hjit
    def overflowed_norm(l, V, h, conf_row_):
        e5 = 0.0
        e3 = 0.0
        for i in range(n):
            w = abs(h) * (1.0 / max(conf_row_[TOL + n + i] + max(abs(V[Y, i, l]),
                                                                 abs(V[YN, i, l]))
                                    * conf_row_[TOL + i], 2.2250738585072014e-308))
            q5 = V[SUM1, i, l] * w
            q3 = V[SUM1 + 1, i, l] * w
            if i == 0:
                e5 = q5 * q5
                e3 = q3 * q3
            else:
                e5 = e5 + q5 * q5
                e3 = e3 + q3 * q3
        return e5 / math.sqrt((e5 + 0.01 * e3) * n_err)

    @hjit(**inline)
    def pair_norm(l, V, FL, conf_row_):
        """DOP853's norm from the lane's sums of squares (`.methods.dop853`'s error_norm)."""
        e5 = FL[ERR, l]
        e3 = FL[ERR + 1, l]
        if e5 == 0.0 and e3 == 0.0:
            return 0.0
        h = FL[H, l]
        if e5 == math.inf or e3 == math.inf:  # overflowed: |h| moved into the weights
            return overflowed_norm(l, V, h, conf_row_)
        return abs(h) * e5 / math.sqrt((e5 + 0.01 * e3) * n_err)

    @hjit
    def begin(i, l, y0, t_eval, params, conf, iconf, out_y, info, t_events, n_events, work,
              V, FL, LI):
        """Object i from its start to its first step (the per-object loop's opening),
        into lane l; False where it ends before any step."""
        out = out_y[i]
        for j in range(out.shape[0]):
            fill_row(out, j, math.nan)
        for e in range(t_events.shape[1]):
            n_events[i, e] = 0
            for c in range(t_events.shape[2]):
                t_events[i, e, c] = math.nan
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
        max_step = cr[MAX_STEP]
        h_abs = cr[FIRST_STEP]
        if not h_abs > 0.0:
            h_abs = initial_step(t, y, fy, t_end, direction, max_step, cr, TOL, p, work[i])
            nfev += 1
        put(V[Y], l, y)
        put(V[F], l, fy)
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
    def fill(l, next_object, last, y0, t_eval, params, conf, iconf, out_y, info, t_events,
             n_events, work, V, FL, LI):
        """Lane l takes the next object that needs steps; returns the next untaken one."""
        while next_object < last:
            i = next_object
            next_object += 1
            if begin(i, l, y0, t_eval, params, conf, iconf, out_y, info, t_events, n_events,
                     work, V, FL, LI):
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
            for c in range(1, S + 1):
                for r in range(n):
                    w[c, r] = V[2 + c, r, l]
            coeffs = coefficients(t, y, get(V[F], l), y_new, get(V[2 + S], l), h,
                                  params[LI[PI, l]], w)
            LI[NFEV_, l] += dense_nfev
        out = out_y[i]
        while j < n_out and direction * (te[j] - t_new) <= 0.0:
            if end_states and te[j] == t_new:
                store_row(out, j, y_new)
            else:
                store_row(out, j, evaluate(coeffs, t, h, y, te[j], None))
            j += 1
        LI[J, l] = j

    @hjit(**inline)
    def accept(l, t_eval, params, iconf, out_y, work, V, FL, LI):
        """Lane l's accepted step: its output times, then its end is the lane's state."""
        te = t_eval[LI[TI, l]]
        j = LI[J, l]
        t_new = FL[TN, l]
        LI[NSTEPS_, l] += 1
        need_dense = LI[DF, l] != 0 or (
            j < te.shape[0] and (FL[DIRS, l] * (te[j] - t_new) < 0.0
                                 or (te[j] == t_new and iconf[END_STATES] == 0)))
        LI[DF, l] = 0
        if need_dense or (j < te.shape[0] and FL[DIRS, l] * (te[j] - t_new) <= 0.0):
            dense_outputs(l, t_eval, params, iconf, out_y, work, V, FL, LI, need_dense)
        FL[T, l] = t_new
        for r in range(n):
            V[Y, r, l] = V[YN, r, l]
            V[F, r, l] = V[2 + S, r, l]

    @hjit
    def solve(y0, t_eval, params, conf, iconf, ev_direction, ev_max, ev_consts,
              out_y, info, t_events, y_events, n_events, scratch, work, first, last):
        # lane arrays (zeros: a lane without an object computes on harmless numbers)
        V = np.zeros((n_rows, n, W))
        FL = np.zeros((N_FLOATS, W))
        LI = np.zeros((N_INTS, W), np.int64)
        FL[DIRS] = 1.0
        if last > first:  # a lane without an object reads the first one's rows
            for l in range(W):
                LI[PI, l] = first if params.shape[0] != 1 else 0
                LI[CI, l] = first if conf.shape[0] != 1 else 0
        max_steps = iconf[MAX]
        next_object = first
        for l in range(W):
            next_object = fill(l, next_object, last, y0, t_eval, params, conf, iconf, out_y,
                               info, t_events, n_events, work, V, FL, LI)
        while True:
            busy = False
            for l in range(W):
                # a lane at a step's start: scipy's _step_impl opening (`.control.make_step`)
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
                        FL[MINS, l] = min_step
                        LI[FRESH, l] = 0
                        LI[REJ, l] = 0
                    if status != SUCCESS:
                        finish(l, status, info, LI)
                        next_object = fill(l, next_object, last, y0, t_eval, params, conf,
                                           iconf, out_y, info, t_events, n_events, work, V, FL,
                                           LI)
                if LI[ACTIVE, l] != 0:
                    busy = True
                    direction = FL[DIRS, l]
                    t_new = FL[T, l] + FL[HABS, l] * direction
                    if direction * (t_new - FL[TEND, l]) > 0.0:
                        t_new = FL[TEND, l]
                    FL[TN, l] = t_new
                    FL[H, l] = t_new - FL[T, l]
                    FL[HABS, l] = abs(FL[H, l])
            if not busy:
                break
            attempt(V, FL, params, LI, conf)
            for l in range(W):
                if LI[ACTIVE, l] == 0:
                    continue
                LI[NFEV_, l] += step_nfev
                if pair:
                    err = pair_norm(l, V, FL, conf[LI[CI, l]])
                else:
                    err = FL[ERR, l]
                if err < 1.0:
                    if err == 0.0:
                        factor = MAX_FACTOR
                    else:
                        factor = min(MAX_FACTOR, step_factor(err))
                    if LI[REJ, l] != 0:
                        factor = min(1.0, factor)
                    FL[HABS, l] = FL[HABS, l] * factor
                    accept(l, t_eval, params, iconf, out_y, work, V, FL, LI)
                    if FL[DIRS, l] * (FL[T, l] - FL[TEND, l]) >= 0.0:
                        finish(l, SUCCESS, info, LI)
                    else:
                        LI[FRESH, l] = 1
                        continue
                else:
                    FL[HABS, l] = FL[HABS, l] * max(MIN_FACTOR, step_factor(err))
                    LI[REJ, l] = 1
                    # written so that a NaN error (a non-finite state) also ends here
                    if FL[HABS, l] >= FL[MINS, l]:
                        continue
                    finish(l, STEP_TOO_SMALL, info, LI)
                next_object = fill(l, next_object, last, y0, t_eval, params, conf, iconf,
                                   out_y, info, t_events, n_events, work, V, FL, LI)

    return solve
