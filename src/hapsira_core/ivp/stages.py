"""Runge-Kutta stages evaluated in a streaming order, generated from a tableau.

An explicit Runge-Kutta step evaluates stages ``k_i = f(t + c_i h, y + h S_i)``
with ``S_i = sum_j a_ij k_j`` (Hairer, Norsett & Wanner, *Solving ODEs I*,
Sec. II.1) and then a few weighted sums of the stages (the new state, the
error estimates, the dense output). Written naively, every stage stays alive
until the last sum is formed: for DOP853 that is 13 six-component states,
more than a GPU thread's registers hold, and the rest spills to memory.

This module writes the step out as straight-line code in which each sum is
an accumulator: before a *switch* stage the stages are kept and summed when
needed; from the switch on, every sum still to be formed is an accumulator
and each new stage is added to the accumulators that weight it, then
dropped. The switch is placed where it minimises the number of live states.
Each sum is still formed in increasing stage order, as a plain dot product
would, and zero weights are skipped; so the arithmetic is that of the naive
form, in fewer registers and fewer instructions.

The code is generated once per method and state dimension, from the
numbers in the method's tableau. Where the dense output will need the stages
again (the host targets keep them; see `.methods.base`), each stage is
also written to a small per-object work array: on a CPU a store to L1 costs
far less than carrying 13 states through the step loop as values.
"""

from ..jit import hjit

N = 6  # default number of components of the state


def weights(row):
    """``{column: weight}`` of a tableau row, zeros left out."""
    return {column: weight for column, weight in enumerate(row) if weight}


def _rows(stages, outputs):
    rows = {index: row for index, _, row in stages}
    rows.update(outputs)
    return rows


def _live_states(stages, outputs, given, switch):
    """Peak number of states alive when switching at ``switch``."""
    rows = _rows(stages, outputs)
    columns = sorted(list(given) + [index for index, _, _ in stages])
    peak = 0
    for position, column in enumerate(columns):
        done = set(columns[:position + 1])
        pending = [r for r in rows if r not in done]
        if column < switch:  # stored states that a pending sum still weights
            live = sum(1 for c in done if any(rows[r].get(c) for r in pending))
        else:  # accumulators of the pending sums
            live = sum(1 for r in pending if any(rows[r].get(c) for c in done))
        peak = max(peak, live)
    return peak


def generate(name, stages, outputs, given, n=N, context=("k", "p"), store=False, load=False,
             fun_argument=True):
    """Source of ``name(f, t, y, h, *context, *given_states) -> outputs`` and its switch.

    ``stages``: ``(index, c, {column: weight})`` for each stage to evaluate;
    ``given``: the indices of the stages passed in (``0``: ``f(t, y)``);
    ``outputs``: ``{name: {column: weight}}``, the sums returned as
    n-tuples in that order (unscaled by ``h``). Each stage is
    ``rhs(f, t + c h, y + h S, *context)``; without ``fun_argument`` there is
    no ``f`` and each stage is ``rhs(t + c h, y + h S, *context)``, ``rhs``
    being the right-hand side itself. ``store``: also write each stage
    ``c`` to row ``c`` of an extra last argument ``work`` (for a dense output
    that reuses them); ``load``: read the given stages from rows of ``work``
    instead of taking them as arguments.
    """
    rows = _rows(stages, outputs)
    columns = sorted(list(given) + [index for index, _, _ in stages])
    switch = min(columns, key=lambda s: (_live_states(stages, outputs, given, s), -s))
    evaluated = {index: c for index, c, _ in stages}
    label = {row: (f"s{row}" if isinstance(row, int) else row) for row in rows}
    stored, started = [], set()
    N = n
    args = ", ".join(list(context) + ([] if load else [f"g{c}" for c in given])
                     + (["work"] if store or load else []))
    passed = ", ".join(context)
    head, call = ("f, ", "f, ") if fun_argument else ("", "")
    lines = [f"def {name}({head}t, y, h, {args}):"]

    def state(items):
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"

    def unpack(column):  # a trailing comma unpacks a 1-tuple too
        return ", ".join(f"k{column}_{n}" for n in range(N)) + ","

    def pending(column):
        return [r for r in rows if not isinstance(r, int) or r > column]

    def term(weight, column, n):
        return f"{weight!r} * k{column}_{n}"

    def add(row, weight, column):
        for n in range(N):
            old = f"{label[row]}_{n} + " if row in started else ""
            lines.append(f"    {label[row]}_{n} = {old}{term(weight, column, n)}")
        started.add(row)

    def sum_of(row, n):
        if row in started:
            return f"{label[row]}_{n}"
        return " + ".join(term(w, c, n) for c, w in sorted(rows[row].items())) or "0.0"

    for column in columns:
        if column in evaluated:
            increment = state([f"y[{n}] + h * ({sum_of(column, n)})" for n in range(N)])
            lines.append(f"    {unpack(column)} = "
                         f"rhs({call}t + {evaluated[column]!r} * h, {increment}, {passed})")
        else:
            source = state([f"work[{column}, {n}]" for n in range(N)]) if load else f"g{column}"
            lines.append(f"    {unpack(column)} = {source}")
        if store:
            lines.extend(f"    work[{column}, {n}] = k{column}_{n}" for n in range(N))
        if column < switch:
            stored.append(column)
            continue
        if column == switch:  # from here on, every pending sum is an accumulator
            for row in pending(column):
                for c in stored:
                    if c in rows[row]:
                        add(row, rows[row][c], c)
        for row in pending(column):
            if column in rows[row]:
                add(row, rows[row][column], column)
    results = [state([sum_of(row, n) for n in range(N)]) for row in outputs]
    lines.append(f"    return ({', '.join(results)},)")
    return "\n".join(lines) + "\n", switch


def generate_rows(name, stages, outputs, given, context=("p",), load=False, stage_in=None,
                  out_row=None):
    """Source of the same step on array-shaped states (rows of ``work``): each stage
    ``c`` is ``rhs(t + c h, x, *context, work[c])`` with ``x = y + h S_c`` formed
    in ``work[stage_in]``; output ``k`` goes to ``work[out_row + k]``, and the
    rows are returned as a tuple.

    One loop over the components per sum, so the code is the same whatever n
    is (the constant ``N``); each sum is formed in increasing stage order, as
    `generate()` forms it, so that both shapes give the same numbers. The
    given stages are copied into their rows unless ``load`` (already there).
    """
    args = ", ".join(list(context) + ([] if load else [f"g{c}" for c in given]) + ["work"])
    passed = ", ".join(context)
    lines = [f"def {name}(t, y, h, {args}):"]

    def weighted(row):
        return " + ".join(f"{w!r} * work[{c}, i]" for c, w in sorted(row.items())) or "0.0"

    if not load:
        for c in given:
            lines += [f"    given = g{c}", "    for i in range(N):",
                      f"        work[{c}, i] = given[i]"]
    for index, c, row in stages:
        lines += [f"    x = work[{stage_in}]", "    for i in range(N):",
                  f"        x[i] = y[i] + h * ({weighted(row)})",
                  f"    rhs(t + {c!r} * h, x, {passed}, work[{index}])"]
    for k, row in enumerate(outputs.values()):
        lines += [f"    out = work[{out_row + k}]", "    for i in range(N):",
                  f"        out[i] = {weighted(row)}"]
    results = ", ".join(f"work[{out_row + k}]" for k in range(len(outputs)))
    lines.append(f"    return ({results},)")
    return "\n".join(lines) + "\n"


def compile_stages(name, stages, outputs, given, fun, n=N, context=("p",), store=False,
                   load=False, rows=None, out_row=None):
    """`generate()`, compiled as an `hjit()` function
    ``name(t, y, h, p, ...)`` whose stages call the right-hand side ``fun``
    (a compile-time constant, not an argument: see `hapsira_core.kernels.cache`).

    With ``rows`` (a `hapsira_core.ivp.layout.WorkRows`) the states are rows of
    ``work`` (`generate_rows()`): ``fun(t, y, p, dydt)`` fills its row, ``work`` is
    always the last argument, and the outputs go to rows ``out_row`` on.
    """
    if rows is not None:
        source = generate_rows(name, stages, outputs, given, context, load, rows.stage_in,
                               out_row)
        label = f"<{name} rows n={n}>"
    else:
        source, _ = generate(name, stages, outputs, given, n, context, store, load,
                             fun_argument=False)
        label = f"<{name} n={n}>"
    # generated functions belong to this module: numba imports it to reload a cached kernel
    namespace = {"rhs": fun, "__name__": __name__, "N": n}
    exec(compile(source, label, "exec"), namespace)
    return hjit(namespace[name], cache=False)
