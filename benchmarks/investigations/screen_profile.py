"""Where the GPU broad phase of `screen` spends its time (issue 32), in one process.

    HAPSIRA_TARGET=cuda python benchmarks/investigations/screen_profile.py [--n 20000]
        [--windows 200] [--out PATH]

The population of benchmarks/screening.py (N objects) is sampled over ``--windows``
windows of the default dt; `broad_phase` is compiled on three windows, then run
on all of them with each kernel call and each call of the target's primitives
(``compact_rows``, ``row_max``, ``row_offsets``, ``bucket_sort``) wrapped: its wall time
(GPU synchronised before and after) and, for a kernel, ``last_kernel_seconds`` (CUDA
events around its launches), the host work in between (``other_s``), and a cProfile of
a third call (top entries by own time). The per-row loads of the scan (grid pairs per
(window, entry): maximum and mean, from the first run's counts, copied after the
timing) say whether one thread's work paces the second kernel.
Writes JSON (``--out``).

Written because on an H200 the broad phase of 20,000 objects x 6 h took 48.3 s of wall
and 48.3 s of process CPU time, where its per-slot work is at most ~100 grid pairs.
"""

import argparse
import cProfile
import io
import json
import os
import pstats
import sys
import time

os.environ.setdefault("HAPSIRA_TARGET", "cuda")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--windows", type=int, default=200)
    parser.add_argument("--data", default=os.environ.get("HAPSIRA_TEST_DATA", "../shared/data"))
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)

    from numba import cuda

    from hapsira_core.targets import active
    from hapsira_cowell.constants import K_EARTH
    from hapsira_cowell.propagation import conjunctions as C
    from screening import population

    sync = cuda.synchronize if active.device_memory() is not None else (lambda: None)
    r, v = population(args.n, args.data)
    dt = C.default_dt(K_EARTH, r, v, 5.0)
    times = np.arange(args.windows + 1) * dt
    rows = C._rows(None, len(r))
    now = time.perf_counter()
    states = C.sample_states(K_EARTH, r, v, times, C.two_body_j2, rows, 1e-11, 1e-12)
    sync()
    report = {"n": args.n, "windows": args.windows, "dt": dt,
              "sample_s_with_compile": time.perf_counter() - now}
    now = time.perf_counter()
    C.broad_phase(states[:, :4], dt, K_EARTH, 5.0)
    sync()
    report["compile_broad_s"] = time.perf_counter() - now

    calls = []
    #: where each kernel's counts are among its arrays (the first run's are kept)
    counts_at = {"_SCAN": -1, "_GRID": 4}
    captured = {}

    def wrapped(name, kernel):
        def call(*arrays):
            sync()
            start = time.perf_counter()
            kernel(*arrays)
            sync()
            calls.append({"kernel": name, "rows": int(arrays[0].shape[0]),
                          "wall_s": time.perf_counter() - start,
                          "kernel_s": kernel.last_kernel_seconds})
            if name in counts_at:
                captured.setdefault("counts", arrays[counts_at[name]])
        return call

    def timed_primitive(name, primitive):
        """The target's ``primitive`` (compact_rows, row_max, row_offsets, bucket_sort),
        timed."""
        def call(*arrays):
            sync()
            start = time.perf_counter()
            out = primitive(*arrays)
            sync()
            calls.append({"kernel": name, "rows": int(arrays[-1 if name == "compact_rows"
                                                            else 0].shape[0]),
                          "wall_s": time.perf_counter() - start, "kernel_s": None})
            return out
        return call

    originals = {name: getattr(C, name) for name in ("_OBJECT", "_COUNT", "_ENTRY", "_SLOT",
                                                     "_SCAN", "_GRID")}
    primitives = {name: getattr(active, name) for name in ("compact_rows", "row_max",
                                                           "row_offsets", "bucket_sort")}
    for name, kernel in originals.items():
        setattr(C, name, wrapped(name, kernel))
    for name, primitive in primitives.items():
        setattr(active, name, timed_primitive(name, primitive))
    try:
        now = time.perf_counter()
        i, j, w, grid, chord = C.broad_phase(states, dt, K_EARTH, 5.0)
        sync()
        total = time.perf_counter() - now
    finally:
        for name, kernel in originals.items():
            setattr(C, name, kernel)
        for name, primitive in primitives.items():
            setattr(active, name, primitive)
    report.update(broad_s=total, calls=calls,
                  other_s=total - sum(c["wall_s"] for c in calls),
                  candidates=len(i), grid_pairs=grid, chord_tests=chord)
    counts = active.to_host(captured["counts"])
    per_slot = counts[:, 1].astype(np.int64)
    report["grid_pairs_per_row"] = {"max": int(per_slot.max()), "mean": float(per_slot.mean()),
                                    "rows": len(per_slot)}
    print(json.dumps({k: v for k, v in report.items() if k != "calls"}, indent=1))
    for c in calls:
        print(c)

    profile = cProfile.Profile()
    now = time.perf_counter()
    profile.enable()
    C.broad_phase(states, dt, K_EARTH, 5.0)
    sync()
    profile.disable()
    report["profiled_s"] = time.perf_counter() - now
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(25)
    report["profile"] = text.getvalue()
    print(report["profile"])
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(report, fh, indent=1, default=str)


if __name__ == "__main__":
    main()
