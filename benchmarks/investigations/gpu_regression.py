"""The reference kernel of one source tree against another's, on one GPU, in one run.

    python benchmarks/investigations/gpu_regression.py --tree old=/path/to/tree --tree new=. [--n 1000000]
        [--tree fetch=.,HAPSIRA_CUDA_FETCH=1]   (a tree with settings of its own)

Each tree (a checkout with ``src/`` and ``benchmarks/workloads.py``, or
``benchmarks/workload.py`` before the harness) runs in
its own processes, alternating with the others (``--rounds``), on the
reference workload (two-body + J2, LEO cloud, one day, two output times):

* ``kernel_s``: one launch of all N objects on one stream, timed with CUDA
  events around the kernel alone (``settings.CUDA_CHUNK`` = N), median of
  ``--repeat``; with the default chunks the per-chunk event times overlap
  on two streams and their sum is not the kernel's time;
* ``call_s``: the whole ``cowell()`` call with the default chunks, median;
* ``profile``: where one whole call spends its host time (cProfile, top
  entries by own time).

Written to find why the rebuilt core's kernel was timed 25% slower than the
previous core's (issue 16). Writes JSON (``--out``).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/


def child(tree, n, repeat):
    sys.path[:0] = [os.path.join(tree, "src"), os.path.join(tree, "benchmarks")]
    import numpy as np
    try:
        import workloads as workload
    except ImportError:  # a tree before benchmarks/workloads.py
        import workload
    from hapsira_core import settings
    from hapsira_cowell import cowell
    try:
        from hapsira_core.ivp.build import KERNELS
    except ImportError:  # the core before the rebuild
        KERNELS = sys.modules["hapsira_cowell.cowell"]._KERNELS
    r0, v0 = workload.leo_cloud(n, 2)
    tofs = np.array([workload.DAY / 2, workload.DAY])

    def call():
        return cowell(workload.K, r0, v0, tofs, workload.RTOL, workload.ATOL,
                      f=workload.two_body_j2)

    t = time.perf_counter()
    result = call()
    first = time.perf_counter() - t
    kernel = next(iter(KERNELS.values()))
    default_chunk = settings.CUDA_CHUNK
    settings.CUDA_CHUNK = n  # read at each call: one launch, one stream
    kernels = []
    for _ in range(repeat):
        call()
        kernels.append(kernel.last_kernel_seconds)
    settings.CUDA_CHUNK = default_chunk
    seconds = []
    for _ in range(repeat):
        t = time.perf_counter()
        result = call()
        seconds.append(time.perf_counter() - t)
    import cProfile
    import io
    import pstats
    profiler = cProfile.Profile()
    profiler.enable()
    call()
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(14)
    lines = [line for line in text.getvalue().splitlines() if line.strip()][-15:]
    report = {"default_chunk": default_chunk, "first_call_s": first, "call_s": statistics.median(seconds),
              "calls_s": seconds, "kernel_s": statistics.median(kernels) if None not in kernels else None, "kernels_s": kernels,
              "orbit_steps": int(np.sum(result.nsteps)),
              "status_counts": {str(k): int(v) for k, v in
                                zip(*np.unique(result.status, return_counts=True))},
              "resources": {str(i): v for i, v in enumerate(kernel.resources().values())},
              "profile": lines}
    print("JSON " + json.dumps(report))


def run_child(tree, n, repeat, timeout, target, settings=()):
    env = dict(os.environ, HAPSIRA_TARGET=target, HAPSIRA_CACHE="0", **dict(settings))
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and not p.endswith("/src"))
    done = subprocess.run([sys.executable, __file__, "--child", tree, "--n", str(n),
                           "--repeat", str(repeat)],
                          env=env, capture_output=True, text=True, timeout=timeout)
    for line in done.stdout.splitlines():
        if line.startswith("JSON "):
            return json.loads(line[5:])
    return {"error": (done.stdout + done.stderr)[-2000:]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", default=[],
                        help="NAME=PATH[,VAR=VALUE...]: a tree, and settings of its processes")
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=240.0)
    parser.add_argument("--target", default="cuda", help="cpu: a check of the script itself")
    parser.add_argument("--out", default=os.path.join(HERE, "results", "gpu_regression.json"))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.n, args.repeat)
        return
    trees = dict(item.split("=", 1) for item in args.tree)
    runs = []
    for round_ in range(args.rounds):
        for name, spec in trees.items():
            path, *settings = spec.split(",")
            report = run_child(os.path.abspath(path), args.n, args.repeat, args.timeout,
                               args.target, [s.split("=", 1) for s in settings])
            report.update(tree=name, round=round_)
            runs.append(report)
            print(f"{name:10s}: " + (
                f"kernel alone {report['kernel_s'] or 0:.4f} s, call {report['call_s']:.4f} s, "
                f"steps {report['orbit_steps']}, first {report['first_call_s']:.1f} s"
                if "error" not in report else report["error"][-600:]), flush=True)
    with open(args.out, "w") as out:
        json.dump({"n_objects": args.n, "trees": trees, "runs": runs}, out, indent=1)
    for report in runs:
        if "profile" in report:
            print(f"-- {report['tree']} (round {report['round']}): host profile of one call")
            print("\n".join(report["profile"][-12:]))


if __name__ == "__main__":
    main()
