"""Where the host targets' broad phase of `screen` spends its CPU (issue 53), per size.

    HAPSIRA_TARGET=cpu python benchmarks/investigations/broad_phase_host.py
        [--n 2000 5000 20000] [--windows 100] [--repeat 3] [--out PATH]

The population of benchmarks/screening.py (N objects, two-body + J2) is sampled over
``--windows`` windows of the default dt (5 km); `broad_phase` is compiled on two windows,
then run ``--repeat`` times on all of them. Reported per size: the process CPU seconds
(``time.process_time``: the box is shared, wall time is not the work) of the whole
broad phase (best of the repeats), of its per-window sort alone (`_sort_window` as a
kernel of one object per window: boxes, cell sizes, entries, the counting sort), the
difference (the scan and the host's unique pass), and the grid pairs the scan formed,
those it chord-tested and the candidates it kept; each per object-window (us) and per
grid pair (ns).
"""

import argparse
import json
import os
import sys
import time

os.environ.setdefault("HAPSIRA_TARGET", "cpu")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[2000, 5000, 20000])
    parser.add_argument("--windows", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threshold", type=float, default=5.0)
    parser.add_argument("--data", default=os.environ.get("HAPSIRA_TEST_DATA", "../shared/data"))
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)

    from hapsira_core.jit import Arg, ObjectKernel
    from hapsira_cowell.constants import K_EARTH
    from hapsira_cowell.propagation import conjunctions as C
    from screening import population

    report = {"windows": args.windows, "threshold_km": args.threshold, "sizes": []}
    r_all, v_all = population(max(args.n), args.data)
    for n in args.n:
        r, v = r_all[:n], v_all[:n]
        dt = C.default_dt(K_EARTH, r, v, args.threshold)
        times = np.arange(args.windows + 1) * dt
        states = C.sample_states(K_EARTH, r, v, times, C.two_body_j2, C._rows(None, n),
                                 1e-11, 1e-12)
        C.broad_phase(states[:, :3], dt, K_EARTH, args.threshold)  # compile or load
        whole = []
        for _ in range(args.repeat):
            cpu = time.process_time()
            i, j, w, grid, thin = C.broad_phase(states, dt, K_EARTH, args.threshold)
            whole.append(time.process_time() - cpu)
        row = {"n": n, "dt": dt, "broad_cpu_s": min(whole), "broad_cpu_runs": whole,
               "grid_pairs": grid, "chord_tests": thin, "candidates": len(i)}
        size = C.table_size(n)
        conf = np.array([dt, K_EARTH, args.threshold, size])
        work = getattr(C, "_WORK", ())
        kernel = ObjectKernel(C._sort_window, [
            Arg("window", np.int64, ("one",)), *C._SAMPLES,
            *(Arg(name, dtype, core, output=True) for name, dtype, core in C._WINDOW_ARRAYS),
            *(Arg(name, dtype, core, scratch=True) for name, dtype, core in work)])
        sizes = {"n": n, "two": 2, "eight": 8, "e": getattr(C, "CELLS", 1) * n, "h1": size + 1}
        batch = getattr(C, "HOST_BATCH", args.windows)
        arrays = [np.empty((batch, *(sizes[d] for d in core)), dtype)
                  for _, dtype, core in tuple(C._WINDOW_ARRAYS) + tuple(work)]
        which = np.arange(args.windows).reshape(-1, 1)
        kernel(which[:1], states, conf, *(a[:1] for a in arrays))
        runs = []
        for _ in range(args.repeat):
            cpu = time.process_time()
            for first in range(0, args.windows, batch):
                rows = which[first:first + batch]
                kernel(rows, states, conf, *(a[:len(rows)] for a in arrays))
            runs.append(time.process_time() - cpu)
        row["sort_cpu_s"] = min(runs)
        ow = n * args.windows
        row["us_per_object_window"] = 1e6 * row["broad_cpu_s"] / ow
        row["sort_us_per_object_window"] = 1e6 * row["sort_cpu_s"] / ow
        scan = row["broad_cpu_s"] - row["sort_cpu_s"]
        row["scan_ns_per_grid_pair"] = 1e9 * scan / max(grid, 1)
        row["grid_pairs_per_window"] = grid / args.windows
        print(json.dumps(row), flush=True)
        report["sizes"].append(row)
    report["load_after"] = os.getloadavg()[0]
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
