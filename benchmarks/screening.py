"""Conjunction screening (`hapsira_cowell.conjunctions.screen`) of N debris objects.

    HAPSIRA_TARGET=cpu python benchmarks/screening.py [--n 2000] [--days 1] [--threshold 5]
                                                      [--dt S] [--data DIR]

The objects are the debris catalogs of ``$HAPSIRA_TEST_DATA`` (default
../shared/data), all brought to their latest epoch with SGP4; for N larger
than the catalogs hold (about 2,700), copies of them rotated about the Earth's
axis by random angles (seed 0) are added, the way cascade's 20,000-object test
population is a LEO catalog of that size. The first call compiles the kernels
(the cache makes later processes start in about a second); the screen is timed
on a second call, printing the seconds per phase (propagation, broad phase,
refinement), the windows, the pairs the grid formed, the candidates refined
and the approaches found.
"""

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HAPSIRA_TARGET", "cpu")

import numpy as np  # noqa: E402

from hapsira_cowell import from_tle  # noqa: E402
from hapsira_cowell.conjunctions import screen  # noqa: E402
from hapsira_cowell.constants import K_EARTH  # noqa: E402

CATALOGS = ("fengyun-1c-debris.tle", "cosmos-2251-debris.tle", "iridium-33-debris.tle",
            "cosmos-1408-debris.tle")


def population(n, data):
    """``n`` states (km, km/s) at one epoch per catalog (see the module's docstring)."""
    r, v = [], []
    for name in CATALOGS:
        catalog = from_tle(Path(data) / name)
        ri, vi, ok = catalog.states_at(catalog.epochs.max())
        r.append(ri[ok])
        v.append(vi[ok])
    r, v = np.concatenate(r), np.concatenate(v)
    rng = np.random.default_rng(0)
    rs, vs = [r], [v]
    while sum(len(x) for x in rs) < n:
        angle = rng.uniform(0, 2 * np.pi)
        c, s = np.cos(angle), np.sin(angle)
        rot = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
        rs.append(r @ rot.T)
        vs.append(v @ rot.T)
    return np.concatenate(rs)[:n], np.concatenate(vs)[:n]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--days", type=float, default=1.0)
    parser.add_argument("--threshold", type=float, default=5.0, help="km")
    parser.add_argument("--dt", type=float, default=None, help="broad-phase sampling, s")
    parser.add_argument("--data", default=os.environ.get(
        "HAPSIRA_TEST_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
    args = parser.parse_args(argv)
    r, v = population(args.n, args.data)
    from hapsira_core import settings

    started = time.perf_counter()
    # compile (or load) both kernels: a wide threshold so that some pair is refined
    screen(K_EARTH, r[:200], v[:200], (0.0, 600.0), 200.0)
    print(f"compile/load: {time.perf_counter() - started:.1f} s")
    stats = {}
    started, cpu = time.perf_counter(), time.process_time()
    table = screen(K_EARTH, r, v, (0.0, args.days * 86400.0), args.threshold, dt=args.dt,
                   stats=stats)
    total, cpu = time.perf_counter() - started, time.process_time() - cpu
    print(f"target {settings.TARGET}: {args.n} objects, {args.days:g} days, threshold "
          f"{args.threshold:g} km, dt {stats['dt']:.2f} s, {stats['windows']} windows")
    print(f"propagation {stats['propagate_s']:.2f} s, broad phase {stats['broad_s']:.2f} s "
          f"({stats['broad_cpu_s']:.2f} s CPU), "
          f"refinement {stats['narrow_s']:.2f} s, total {total:.2f} s wall "
          f"({cpu:.2f} s CPU time of this process, all threads)")
    print(f"grid pairs {stats['grid_pairs']}, candidates refined {stats['candidates']}, "
          f"approaches {len(table)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
