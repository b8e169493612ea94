"""Where one ``cowell()`` call spends its time on the host: cProfile of warm calls.

    HAPSIRA_TARGET=cuda python benchmarks/investigations/host_profile.py [--n 1000000]
        [--repeat 5] [--top 30] [--workload j2|textbook|drag] [--stm] [--out PATH]

The reference workload (two-body + J2, one day, the library's tuned f; ``--workload``:
the textbook f, or the drag variant on its cloud; ``--stm``: with the state transition
matrix) on N objects:
one warm-up call (compile), the median wall time of ``--repeat`` calls, then one
call under cProfile, its functions sorted by own time and by cumulative time. On
the GPU the kernel's time shows up where the host waits for it (the copies back);
the rest is host work that a faster kernel does not hide. Writes JSON with the
median, the profiled call's total and the top functions.
"""

import argparse
import cProfile
import json
import os
import pstats
import statistics
import sys
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

import workloads  # noqa: E402
from workloads import ATOL, DAY, K, RTOL  # noqa: E402


def rows(stats, key, top):
    stats.sort_stats(key)
    out = []
    for func in stats.fcn_list[:top]:
        cc, nc, tt, ct, _ = stats.stats[func]
        out.append({"function": f"{os.path.basename(func[0])}:{func[1]}({func[2]})",
                    "calls": nc, "own_s": tt, "cumulative_s": ct})
    return out


def warp_efficiency(nsteps, width=32):
    """Steps taken over steps a warp of ``width`` consecutive objects runs for (each warp
    as long as its longest object): the share of lanes doing work in the step loop."""
    steps = np.asarray(nsteps, dtype=float)
    whole = steps[:steps.size // width * width].reshape(-1, width)
    return float(whole.sum() / (width * whole.max(axis=1)).sum()) if whole.size else None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=lambda s: int(float(s)), default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--workload", choices=("j2", "textbook", "drag"), default="j2")
    parser.add_argument("--stm", action="store_true")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    from hapsira_core import settings
    from hapsira_cowell import cowell

    tofs = np.array([DAY])
    options = {"stm": True} if args.stm else {}
    if args.workload == "drag":
        rr, vv, options["params"] = workloads.drag_cloud(args.n, 0)
        f = workloads.two_body_j2_drag
    else:
        rr, vv = workloads.leo_cloud(args.n, 0)
        f = workloads.two_body_j2 if args.workload == "j2" else workloads.textbook_cowell

    def call():
        return cowell(K, rr, vv, tofs, RTOL, ATOL, f=f, **options)

    call()
    samples = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        res = call()
        samples.append(time.perf_counter() - start)
    profile = cProfile.Profile()
    start = time.perf_counter()
    profile.enable()
    call()
    profile.disable()
    profiled = time.perf_counter() - start
    stats = pstats.Stats(profile)
    out = {"target": settings.TARGET, "n": args.n, "workload": args.workload, "stm": args.stm,
           "block": settings.CUDA_BLOCK, "max_registers": settings.CUDA_MAX_REGISTERS,
           "median_s": statistics.median(samples),
           "samples_s": samples, "profiled_call_s": profiled,
           "steps": int(res.nsteps.sum()),
           "warp_step_efficiency": warp_efficiency(res.nsteps),
           "by_own_time": rows(stats, "tottime", args.top),
           "by_cumulative_time": rows(stats, "cumulative", args.top)}
    print(f"median {out['median_s']:.4f} s of {samples}; profiled {profiled:.4f} s; "
          f"{out['steps']} steps, warp step efficiency {out['warp_step_efficiency']:.3f}")
    for key in ("by_own_time", "by_cumulative_time"):
        print(f"-- {key}")
        for row in out[key]:
            print(f"{row['own_s']*1e3:9.2f} ms own {row['cumulative_s']*1e3:9.2f} ms cum "
                  f"{row['calls']:6d}  {row['function']}")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
