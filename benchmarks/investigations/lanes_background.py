"""``HAPSIRA_LANES=auto`` from an empty cache: a process that calls `cowell` on the LEO cloud
again and again, and when its lane kernel (compiled in the background) takes over.

    HAPSIRA_CACHE_DIR=<an empty folder> python benchmarks/investigations/lanes_background.py
        [--objects 2000] [--gap 3] [--calls 40] [--after 2] [--out NAME]

One process, the active target (``HAPSIRA_TARGET``), default settings but the cache
folder: ``HAPSIRA_LANES_BACKGROUND`` as the environment says (run it with ``0`` for the
per-object kernel all along). The reference LEO workload (`benchmarks/workloads.py`: two-body
+ J2, one day, rtol 1e-11) on ``--objects`` objects, a call every ``--gap`` seconds
after the last one ended, until ``--after`` calls ran lanes or ``--calls`` calls. Prints
(and with ``--out`` writes ``benchmarks/results/<NAME>.json``) each call's start, wall and
CPU seconds of this process, which kernel ran (lanes or per object), the background
worker's CPU seconds once reaped, whether each call's results equal the first's bit for
bit, and the load average. The process exits when its calls are done, a background
compile running or not (it is never waited for).
"""

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

import workloads  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--objects", type=int, default=2000)
    parser.add_argument("--gap", type=float, default=3.0)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--after", type=int, default=2)
    parser.add_argument("--out")
    args = parser.parse_args()

    start = time.perf_counter()
    from hapsira_core import settings
    from hapsira_core.ivp import build
    from hapsira_cowell import cowell

    r0, v0 = workloads.leo_cloud(args.objects, seed=0)
    tofs = np.array([workloads.DAY])
    calls, first, lanes_calls = [], None, 0
    for number in range(1, args.calls + 1):
        began, cpu = time.perf_counter(), time.process_time()
        res = cowell(workloads.K, r0, v0, tofs, f=workloads.two_body_j2,
                     rtol=workloads.RTOL, atol=workloads.ATOL)
        out = [np.asarray(getattr(res, f)) for f in ("rr", "vv", "status", "nfev", "nsteps")]
        wall, cpu = time.perf_counter() - began, time.process_time() - cpu
        # (a lane kernel is compiled or loaded only where a call runs it)
        lanes = any(k._compiled is not None for s, k in build.KERNELS.items() if s.lanes)
        first = out if first is None else first
        same = all(np.array_equal(a, b) for a, b in zip(out, first))
        children = os.times()
        calls.append({"call": number, "start_s": round(began - start, 2),
                      "wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
                      "kernel": "lanes" if lanes else "per object", "same_bits": same,
                      "reaped_children_cpu_s": round(children.children_user
                                                     + children.children_system, 2),
                      "load": [round(x, 2) for x in os.getloadavg()]})
        print(json.dumps(calls[-1]), flush=True)
        lanes_calls += lanes
        if lanes_calls >= args.after or number == args.calls:
            break
        time.sleep(args.gap)
    result = {"objects": args.objects, "gap_s": args.gap, "target": settings.TARGET,
              "lanes": settings.LANES, "background": settings.LANES_BACKGROUND,
              "calls": calls}
    if args.out:
        path = os.path.join(HERE, "results", f"{args.out}.json")
        with open(path, "w") as file:
            json.dump(result, file, indent=1)
        print("wrote", path)


if __name__ == "__main__":
    main()
