"""Time `conjunctions.probability` over many approaches: the first call (compiling, or
loading from the kernel cache) and the best of warm calls, per method.

    python benchmarks/probability.py [--approaches 100000] [--repeat 5] [--out PATH]

The approaches are LEO pairs at their TCA drawn in numpy: miss 0-5 km in the encounter
plane, relative speed 0.5-15 km/s, position covariances of 0.05-2 km sigmas, random
orientations. The target is ``HAPSIRA_TARGET`` (cpu, parallel or cuda); the JSON
records it with the machine.
"""

import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import harness  # noqa: E402


def _rotations(rng, n):
    q = rng.normal(size=(n, 4))
    q /= np.linalg.norm(q, axis=1)[:, None]
    w, x, y, z = q.T
    return np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)], -1),
        np.stack([2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)], -1),
        np.stack([2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)], -1),
    ], 1)


def approaches(n, seed=0):
    """``(r1, v1, c1, r2, v2, c2)`` of ``n`` approaches at their TCA."""
    rng = np.random.default_rng(seed)
    radius = 6778.0 + rng.uniform(0.0, 800.0, n)
    direction = rng.normal(size=(n, 3))
    direction /= np.linalg.norm(direction, axis=1)[:, None]
    r1 = direction * radius[:, None]
    speed = np.sqrt(398600.4418 / radius)
    tangent = np.cross(direction, rng.normal(size=(n, 3)))
    tangent /= np.linalg.norm(tangent, axis=1)[:, None]
    v1 = tangent * speed[:, None]
    relative = np.cross(direction, tangent) * rng.uniform(0.5, 15.0, n)[:, None]
    miss_direction = np.cross(relative, rng.normal(size=(n, 3)))
    miss_direction /= np.linalg.norm(miss_direction, axis=1)[:, None]
    r2 = r1 + miss_direction * rng.uniform(0.0, 5.0, n)[:, None]
    v2 = v1 + relative

    def covariance():
        rotation = _rotations(rng, n)
        sigmas = rng.uniform(0.05, 2.0, (n, 3))
        return np.einsum("nij,nj,nkj->nik", rotation, sigmas**2, rotation)

    return r1, v1, covariance(), r2, v2, covariance()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--approaches", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--methods", nargs="+", default=["foster", "chan", "max"])
    parser.add_argument("--hbr", type=float, default=0.02, help="hard-body radius, km")
    parser.add_argument("--out", default=None,
                        help="the result's path (default benchmarks/results/probability.json)")
    args = parser.parse_args()

    import warnings

    from hapsira_core import settings
    from hapsira_cowell.conjunctions import probability

    data = approaches(args.approaches)
    rows = {}
    for method in args.methods:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the flags' warnings name approaches
            start = time.perf_counter()
            pc = probability(*data, args.hbr, method=method)
            first = time.perf_counter() - start
            seconds = []
            for _ in range(args.repeat):
                start = time.perf_counter()
                probability(*data, args.hbr, method=method)
                seconds.append(time.perf_counter() - start)
        best = min(seconds)
        rows[method] = {"first_s": first, "seconds": seconds, "best_s": best,
                        "approaches_per_s": args.approaches / best,
                        "finite": int(np.isfinite(pc).sum()),
                        "median_pc": float(np.median(pc))}
        print(f"{method}: {args.approaches} approaches on {settings.TARGET}: first call "
              f"{first:.2f} s, best {best:.4f} s of {len(seconds)} "
              f"({args.approaches / best:,.0f} approaches/s)")
    harness.write_result(args.out or "probability", {
        "approaches": args.approaches, "hbr_km": args.hbr, "target": settings.TARGET,
        "cache": bool(settings.CACHE), "methods": rows})


if __name__ == "__main__":
    main()
