"""Register caps (``HAPSIRA_CUDA_MAX_REGISTERS``) kernel by kernel, alternated in one process.

    HAPSIRA_TARGET=cuda python benchmarks/investigations/register_cap.py --out caps.json
        [--caps 0,168] [--rounds 5] [--workloads j2,textbook,drag,stm,vdp]

Each workload's kernel is built once per cap (the cap is part of the cuda target's
kernel key: ``settings.CUDA_MAX_REGISTERS`` is read when a kernel is compiled;
``build.KERNELS`` is swapped with it), called once to compile and warm up, then the caps
alternate call by call for ``--rounds`` calls each. Per workload and cap: median wall
seconds, median ``last_kernel_seconds`` (the GPU's time in the call's kernels), the
compiled kernel's registers and local bytes per thread, and whether every call gave the
same results bit for bit as the first cap's. Workloads: ``j2`` the reference (10^6 LEO
orbits, two-body + J2, one day, the library's f), ``textbook`` the same with the textbook
f, ``drag`` the drag variant (2*10^4 objects of its cloud), ``stm`` the reference with the
state transition matrix (10^5, 42 states), ``vdp`` Van der Pol through ``solve_ivp``
(10^6, 2 states).
"""

import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

import harness  # noqa: E402


def workload_calls(names, scale=1.0):
    import workloads
    from hapsira_core.ivp import solve_ivp
    from hapsira_cowell import cowell

    tofs = np.array([workloads.DAY])
    calls = {}

    def orbit(f, n, cloud=workloads.leo_cloud, **options):
        made = cloud(n, 0)
        rr, vv = made[:2]
        if len(made) == 3:
            options["params"] = made[2]

        def call():
            res = cowell(workloads.K, rr, vv, tofs, workloads.RTOL, workloads.ATOL, f=f,
                         **options)
            return [np.asarray(res.rr), np.asarray(res.vv), res.status, res.nsteps]
        return call

    def size(n):
        return max(64, int(n * scale))

    for name in names:
        if name == "j2":
            calls[name] = orbit(workloads.two_body_j2, size(1_000_000))
        elif name == "textbook":
            calls[name] = orbit(workloads.textbook_cowell, size(1_000_000))
        elif name == "drag":
            calls[name] = orbit(workloads.two_body_j2_drag, size(20_000), workloads.drag_cloud)
        elif name == "stm":
            calls[name] = orbit(workloads.two_body_j2, size(100_000), stm=True)
        elif name == "vdp":
            y0, p = workloads.problem("van_der_pol", size(1_000_000))

            def call(y0=y0, p=p):
                res = solve_ivp(workloads.van_der_pol, workloads.SPANS["van_der_pol"], y0,
                                method="DOP853", rtol=1e-8, atol=1e-10, params=p)
                return [np.asarray(res.y), res.status, res.nfev]
            calls[name] = call
        else:
            raise SystemExit(f"--workloads: unknown workload {name!r}")
    return calls


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--caps", default="0,168")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workloads", default="j2,textbook,drag,stm,vdp")
    parser.add_argument("--scale", type=float, default=1.0, help="objects times this (a check)")
    parser.add_argument("--out", required=True, help="the JSON file to write")
    args = parser.parse_args()
    os.environ.setdefault("HAPSIRA_TARGET", "cuda")  # before hapsira is imported

    from hapsira_core import settings
    from hapsira_core.ivp import build

    caps = [int(c) for c in args.caps.split(",")]
    out = {"device": harness.gpus(), "caps": caps, "rounds": args.rounds,
           "block": settings.CUDA_BLOCK, "workloads": {}}
    for name, call in workload_calls(args.workloads.split(","), args.scale).items():
        kernels = {cap: {} for cap in caps}

        def run(cap):
            settings.CUDA_MAX_REGISTERS = cap
            build.KERNELS = kernels[cap]
            start = time.perf_counter()
            result = call()
            wall = time.perf_counter() - start
            seconds = [k.last_kernel_seconds for k in kernels[cap].values()]
            return wall, sum(s for s in seconds if s is not None), result

        first = {cap: run(cap) for cap in caps}
        want = first[caps[0]][2]
        identical = {cap: True for cap in caps}
        samples = {cap: [] for cap in caps}
        for _ in range(args.rounds):
            for cap in caps:
                wall, kernel_s, result = run(cap)
                samples[cap].append((wall, kernel_s))
                identical[cap] &= all(np.array_equal(a, b, equal_nan=True)
                                      for a, b in zip(result, want))
        rows = {}
        for cap in caps:
            walls = [w for w, _ in samples[cap]]
            kernel_s = [k for _, k in samples[cap]]
            rows[cap] = {"median_s": statistics.median(walls), "best_s": min(walls),
                         "kernel_median_s": statistics.median(kernel_s),
                         "kernel_best_s": min(kernel_s), "first_call_s": first[cap][0],
                         "identical_to_first_cap": bool(identical[cap]),
                         "resources": [r for k in kernels[cap].values()
                                       for r in k.resources().values()]}
            res = rows[cap]["resources"]
            print(f"{name:9s} cap {cap:3d}: call {rows[cap]['median_s']:.4f} s, kernel "
                  f"{rows[cap]['kernel_median_s']:.4f} s (best {rows[cap]['kernel_best_s']:.4f}),"
                  f" {res}, same bits {identical[cap]}", flush=True)
        out["workloads"][name] = rows
        build.KERNELS = {}
    harness.write_result(args.out, out)


if __name__ == "__main__":
    main()
