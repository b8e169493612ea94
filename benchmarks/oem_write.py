"""Time `write_oem` (CCSDS OEM, one file per object) on a synthetic catalog.

    python benchmarks/oem_write.py [--objects 1000] [--times 145] [--repeat 3] [--label 2core]

States are circular LEO orbits made in numpy (no solver: this measures the
writer alone), ``--times`` output times 10 min apart (145 = one day). Prints
the best-of-``--repeat`` wall clock and writes
``benchmarks/results/oem_write_<label>.json`` with the machine.
"""

import argparse
import os
import shutil
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import harness  # noqa: E402


def states(n, m, seed=0):
    rng = np.random.default_rng(seed)
    tofs = np.arange(m) * 600.0
    a = 6778.0 + rng.uniform(0, 800, n)
    mean_motion = np.sqrt(398600.4418 / a**3)
    phase = rng.uniform(0, 2 * np.pi, n)[:, None] + mean_motion[:, None] * tofs
    inc = rng.uniform(0, np.pi, n)[:, None]
    r = np.stack([np.cos(phase), np.sin(phase) * np.cos(inc), np.sin(phase) * np.sin(inc)], -1)
    speed = (a * mean_motion)[:, None, None]
    v = np.stack([-np.sin(phase), np.cos(phase) * np.cos(inc), np.cos(phase) * np.sin(inc)], -1)
    return tofs, r * a[:, None, None], v * speed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=1000)
    parser.add_argument("--times", type=int, default=145)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--label", default="2core")
    parser.add_argument("--out", default=None,
                        help="the result's path (default benchmarks/results/oem_write_<label>.json)")
    args = parser.parse_args()

    from astropy.time import Time

    from hapsira_cowell.outputs.oem import write_oem

    tofs, rr, vv = states(args.objects, args.times)
    epoch = Time("2026-01-01T00:00:00", scale="utc")
    seconds = []
    for _ in range(args.repeat):
        folder = tempfile.mkdtemp(prefix="oem-bench-")
        try:
            start = time.perf_counter()
            written = write_oem(os.path.join(folder, "out"), epoch, tofs, rr, vv, frame="GCRF")
            seconds.append(time.perf_counter() - start)
            size = sum(os.path.getsize(p) for p in written)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    best = min(seconds)
    print(f"write_oem: {args.objects} objects x {args.times} states: best {best:.3f} s "
          f"of {len(seconds)} ({', '.join(f'{s:.3f}' for s in seconds)}); "
          f"{args.objects * args.times / best:,.0f} states/s; {size / 1e6:.1f} MB")
    harness.write_result(args.out or f"oem_write_{args.label}", {
        "objects": args.objects, "times": args.times, "seconds": seconds, "best_s": best,
        "states_per_s": args.objects * args.times / best, "bytes": size,
        "label": args.label})


if __name__ == "__main__":
    main()
