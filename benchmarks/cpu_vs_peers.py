"""The reference workload on the cpu and parallel targets beside scipy and heyoka, in one run.

    python benchmarks/cpu_vs_peers.py [--n-scipy 20] [--n-cpu 500] [--n-parallel 2000] [--n-heyoka 200]

Each target runs per object (``HAPSIRA_LANES=off``) and in SIMD lanes (``on``: always, at
the host's width); ``--lanes auto`` runs the default setting, and each run says whether a
lane kernel ran (``lanes_ran``).
Reports microseconds per object-day (wall clock, compile excluded: each target
is warmed up on two objects first), accepted steps per object, and the largest
position difference from scipy on the objects scipy ran. Each target runs in
its own process (the target is fixed at import). heyoka (PyPI ``heyoka``, the
``bench`` extra), when installed: its Taylor integrator one object at a time
and in SIMD batches, one core (``--n-heyoka 0``: not run). Writes
``benchmarks/results/cpu_vs_scipy.json`` (``--out``) and prints a markdown table.
"""

import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import harness  # noqa: E402

TARGET_SCRIPT = """
import json, sys, time, numpy as np
sys.path.insert(0, {here!r})
import workloads as workload
from hapsira_cowell import cowell
r0, v0 = workload.leo_cloud({n}, seed=0)
tofs = np.array([workload.DAY])
t = time.perf_counter()
cowell(workload.K, r0[:2], v0[:2], tofs, f=workload.two_body_j2)
compile_s = time.perf_counter() - t
best = None
for _ in range(3):
    t = time.perf_counter()
    res = cowell(workload.K, r0, v0, tofs, f=workload.two_body_j2)
    best = min(best or 1e99, time.perf_counter() - t)
np.save({rr_path!r}, res.rr[:, -1])
from hapsira_core.ivp import build
lanes_ran = any(s.lanes and k._compiled is not None for s, k in build.KERNELS.items())
print(json.dumps({{"seconds": best, "compile_s": compile_s, "n_objects": {n},
                  "mean_steps": float(res.nsteps.mean()), "failed": int((res.status < 0).sum()),
                  "lanes_ran": lanes_ran}}))
"""


def run_target(target, n, rr_path, lanes="on"):
    script = TARGET_SCRIPT.format(here=HERE, n=n, rr_path=rr_path)
    result = harness.run_child(script, env=harness.child_env(target, HAPSIRA_LANES=lanes))
    result.pop("process_s", None)
    return result


def run_scipy(n):
    from scipy.integrate import solve_ivp

    import workloads as workload
    r0, v0 = workload.leo_cloud(n, seed=0)
    final = np.empty((n, 3))
    steps = []
    t = time.perf_counter()
    for i in range(n):
        sol = solve_ivp(workload.scipy_rhs, (0.0, workload.DAY), np.concatenate([r0[i], v0[i]]),
                        method="DOP853", rtol=workload.RTOL, atol=workload.ATOL)
        final[i] = sol.y[:3, -1]
        steps.append(len(sol.t) - 1)
    seconds = time.perf_counter() - t
    return {"seconds": seconds, "n_objects": n, "mean_steps": float(np.mean(steps))}, final


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n-scipy", type=int, default=20)
    parser.add_argument("--n-cpu", type=int, default=500)
    parser.add_argument("--n-parallel", type=int, default=2000)
    parser.add_argument("--n-heyoka", type=int, default=200,
                        help="objects for heyoka (scalar; the SIMD batch runs 10x as many)")
    parser.add_argument("--lanes", default="off,on",
                        help="HAPSIRA_LANES settings each target runs with (off: per object; "
                             "on: SIMD lanes, whose first compile is long; auto: the default)")
    parser.add_argument("--out", default="cpu_vs_scipy",
                        help="result name (benchmarks/results/<name>.json) or path")
    args = parser.parse_args()

    machine = harness.machine()
    results = {"machine": machine,
               "workload": "LEO cloud, two-body + J2, 1 day, rtol 1e-11, atol 1e-12",
               "versions": machine["versions"], "peers": {}}
    scipy_result, scipy_final = run_scipy(args.n_scipy)
    results["peers"]["scipy DOP853 (1 core)"] = scipy_result
    out_path = harness.result_path(args.out)
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    rr_path = os.path.join(os.path.dirname(out_path), "_final.npy")
    from hapsira_core.targets import _host
    width = _host.AUTO_LANES_PER_VECTOR * _host.vector_doubles()
    results["lanes"] = {"auto_width": width, "vector_doubles": _host.vector_doubles(),
                        "cpu": _host.cpu_features()[0]}
    # each target per object (HAPSIRA_LANES=off), in lanes (on: the host's width) and as
    # the default setting decides (auto); a target given 0 objects is not run
    runs = [(target, n, lanes) for target, n in (("cpu", args.n_cpu), ("parallel", args.n_parallel))
            for lanes in ("off", "on", "auto") if lanes in args.lanes.split(",") and n > 0]
    for target, n, lanes in runs:
        name = (f"hapsira {target}" + {"off": "", "on": f", {width} lanes",
                                       "auto": ", HAPSIRA_LANES=auto"}[lanes]
                + (" (1 core)" if target == "cpu" else f" ({os.cpu_count()} cores)"))
        result = run_target(target, n, rr_path, lanes)
        final = np.load(rr_path)[: args.n_scipy]
        diff = np.linalg.norm(final - scipy_final, axis=1) / np.linalg.norm(scipy_final, axis=1)
        result["max_rel_pos_diff_vs_scipy"] = float(diff.max())
        results["peers"][name] = result
    os.remove(rr_path)
    if args.n_heyoka:
        import peers
        results["peers"]["heyoka Taylor (1 core)"] = peers.heyoka_scalar(
            args.n_heyoka, seed=0, n_max=args.n_heyoka)
        results["peers"]["heyoka Taylor, SIMD batch (1 core)"] = peers.heyoka_batch(
            10 * args.n_heyoka, seed=0, n_max=10 * args.n_heyoka)
    skipped = {k: v for k, v in results["peers"].items() if v.get("seconds") is None}
    for name, result in skipped.items():
        print(f"{name}: not run: {result.get('missing') or result.get('error')}")
    for result in results["peers"].values():
        if result.get("seconds") is not None:
            result["us_per_object_day"] = 1e6 * result["seconds"] / result["n_objects"]
    base = results["peers"]["scipy DOP853 (1 core)"]["us_per_object_day"]
    harness.write_result(out_path, results, indent=2)
    print(f"machine: {machine['cpu']}, {machine['cores']} cores")
    print("| peer | objects | us / object-day | speed-up vs scipy | steps / object | max rel. pos. diff vs scipy |")
    print("|---|---|---|---|---|---|")
    for name, r in results["peers"].items():
        if name in skipped:
            continue
        diff = r.get("max_rel_pos_diff_vs_scipy")
        print(f"| {name} | {r['n_objects']} | {r['us_per_object_day']:.0f} | "
              f"{base / r['us_per_object_day']:.0f}x | {r.get('mean_steps', float('nan')):.0f} | "
              f"{'' if diff is None else f'{diff:.1e}'} |")


if __name__ == "__main__":
    main()
