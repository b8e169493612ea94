"""What checking params reads at a computed index costs, on the active target.

Lotka-Volterra whose rate is read at ``p[int(p[4])]`` (a computed index: on
cpu/parallel compiled with numba's bounds checks, on a GPU rewritten so that
a read past the row gives NaN, `hapsira_core.kernels.guard`) against the same
function reading ``p[0]`` (a constant subscript: nothing added). Same numbers,
same steps; alternated round by round, best of ``--repeat`` per round.

    HAPSIRA_TARGET=cuda python benchmarks/investigations/guarded_reads.py --n 1000000
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import harness  # noqa: E402

from hapsira_core import settings  # noqa: E402
from hapsira_core.ivp import solve_ivp  # noqa: E402
from hapsira_core.jit import hjit  # noqa: E402


@hjit
def lotka_constant(t, y, p):
    a = p[0]
    return (a * y[0] - p[1] * y[0] * y[1], -p[2] * y[1] + p[3] * y[0] * y[1])


@hjit
def lotka_computed(t, y, p):
    a = p[int(p[4])]
    return (a * y[0] - p[1] * y[0] * y[1], -p[2] * y[1] + p[3] * y[0] * y[1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", default="guarded_reads")
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    y0 = rng.uniform(0.5, 2.0, (args.n, 2))
    params = np.column_stack([rng.uniform(0.9, 1.1, args.n), np.full(args.n, 0.5),
                              np.full(args.n, 0.8), np.full(args.n, 0.3),
                              np.zeros(args.n)])  # p[4] = 0: the computed read is p[0]

    def run(fun):
        return solve_ivp(fun, (0.0, 15.0), y0, params=params, rtol=1e-9, atol=1e-9)

    first = {name: run(f) for name, f in (("constant", lotka_constant),
                                          ("computed", lotka_computed))}
    np.testing.assert_array_equal(first["constant"].y, first["computed"].y)
    rows = []
    for round_ in range(args.rounds):
        for name, f in (("constant", lotka_constant), ("computed", lotka_computed)):
            best, samples, _ = harness.best_of(lambda: run(f), args.repeat)
            rows.append({"round": round_, "function": name, "best_s": best, "samples_s": samples})
            print(f"round {round_} {name:9s} best {best * 1e3:9.2f} ms", flush=True)
    payload = {"target": settings.TARGET, "n": args.n,
               "steps_per_object": float(np.mean(first["constant"].nsteps)), "rows": rows}
    print(harness.write_result(args.out, payload))


if __name__ == "__main__":
    main()
