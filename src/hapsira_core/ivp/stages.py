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

The code is generated once, at import, from the numbers in :mod:`.tableau`.
"""

from ..jit import hjit
from .state import rhs

N = 6  # components of the state


def weights(row):
    """``{column: weight}`` of a tableau row, zeros left out."""
    return {column: weight for column, weight in enumerate(row) if weight}


def _rows(stages, outputs):
    rows = {index: row for index, _, row in stages}
    rows.update(outputs)
    return rows


def _live_states(stages, outputs, given, switch):
    """Peak number of six-component states alive when switching at ``switch``."""
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


def generate(name, stages, outputs, given):
    """Source of ``name(f, t, y, h, k, p, *given_states) -> outputs`` and its switch.

    ``stages``: ``(index, c, {column: weight})`` for each stage to evaluate;
    ``given``: the indices of the stages passed in (``0``: ``f(t, y)``);
    ``outputs``: ``{name: {column: weight}}``, the sums returned as
    six-tuples in that order (unscaled by ``h``).
    """
    rows = _rows(stages, outputs)
    columns = sorted(list(given) + [index for index, _, _ in stages])
    switch = min(columns, key=lambda s: (_live_states(stages, outputs, given, s), -s))
    evaluated = {index: c for index, c, _ in stages}
    label = {row: (f"s{row}" if isinstance(row, int) else row) for row in rows}
    stored, started = [], set()
    lines = [f"def {name}(f, t, y, h, k, p, {', '.join(f'g{c}' for c in given)}):"]

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
        return " + ".join(term(w, c, n) for c, w in sorted(rows[row].items()))

    for column in columns:
        if column in evaluated:
            increment = ", ".join(f"y[{n}] + h * ({sum_of(column, n)})" for n in range(N))
            lines.append(f"    {', '.join(f'k{column}_{n}' for n in range(N))} = "
                         f"rhs(f, t + {evaluated[column]!r} * h, ({increment}), k, p)")
        else:
            lines.append(f"    {', '.join(f'k{column}_{n}' for n in range(N))} = g{column}")
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
    results = ", ".join("(" + ", ".join(sum_of(row, n) for n in range(N)) + ")" for row in outputs)
    lines.append(f"    return ({results},)")
    return "\n".join(lines) + "\n", switch


def compile_stages(name, stages, outputs, given):
    """:func:`generate`, compiled as an :func:`~hapsira_core.jit.hjit` function."""
    source, _ = generate(name, stages, outputs, given)
    namespace = {"rhs": rhs}
    exec(compile(source, f"<{name}>", "exec"), namespace)
    return hjit(namespace[name], cache=False)
