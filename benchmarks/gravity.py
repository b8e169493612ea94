"""Time per evaluation of `gravity_field` (EGM96) at 8x8, 20x20 and 70x70 on the cpu target.

    HAPSIRA_TARGET=cpu python benchmarks/gravity.py [--label NAME] [--points N] [--repeat K]

A compiled loop evaluates the field at N points (LEO to GEO, all latitudes) and
sums the results (so nothing is optimised away); the best of K runs over N gives
the time per evaluation. `J2_perturbation` is timed the same way for scale.
Results: benchmarks/results/gravity_<label>.json, with the machine.
"""

import argparse
import os
import sys

os.environ.setdefault("HAPSIRA_TARGET", "cpu")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import harness  # noqa: E402
from hapsira_core.jit import hjit  # noqa: E402
from hapsira_cowell.perturbations import (EGM96, EGM96_K, EGM96_R, J2_perturbation,  # noqa: E402
                                          gravity_field)


@hjit
def _field_sum(points, degree, order):
    sx = 0.0
    for i in range(points.shape[0]):
        a = gravity_field(10.0 * i, (points[i, 0], points[i, 1], points[i, 2]), (0.0, 0.0, 0.0),
                          EGM96_K, EGM96_R, EGM96, degree, order, 0.3)
        sx += a[0] + a[1] + a[2]
    return sx


@hjit
def _j2_sum(points):
    sx = 0.0
    for i in range(points.shape[0]):
        a = J2_perturbation(0.0, (points[i, 0], points[i, 1], points[i, 2]), (0.0, 0.0, 0.0),
                            EGM96_K, 1.0826e-3, EGM96_R)
        sx += a[0] + a[1] + a[2]
    return sx


def points(n, seed=1):
    rng = np.random.default_rng(seed)
    d = rng.normal(size=(n, 3))
    d /= np.linalg.norm(d, axis=1)[:, None]
    return d * rng.uniform(6700.0, 42200.0, n)[:, None]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", default="2core")
    parser.add_argument("--points", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    p = points(args.points)
    rows = {}
    _j2_sum(p[:2])
    best, samples, _ = harness.best_of(lambda: _j2_sum(p), args.repeat)
    rows["J2_perturbation"] = {"us_per_eval": best / len(p) * 1e6,
                               "samples_s": samples}
    for n in (8, 20, 70):
        _field_sum(p[:2], n, n)  # compile (once) and warm
        best, samples, _ = harness.best_of(lambda: _field_sum(p, n, n), args.repeat)
        rows[f"{n}x{n}"] = {"us_per_eval": best / len(p) * 1e6, "samples_s": samples}
    for name, row in rows.items():
        print(f"{name:>16}: {row['us_per_eval']:.3f} us per evaluation", flush=True)
    harness.write_result(f"gravity_{args.label}", {
        "what": "gravity_field (EGM96) time per evaluation, cpu target, one core",
        "points": args.points, "repeat": args.repeat, "results": rows})


if __name__ == "__main__":
    main()
