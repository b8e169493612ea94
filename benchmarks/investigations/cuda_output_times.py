"""What output times cost the cuda kernel: the reference workload with 1, 2 and 145 of them.

    HAPSIRA_TARGET=cuda python benchmarks/investigations/cuda_output_times.py --out times.json
        [--n 1e6] [--repeat 3]

The reference workload (``workloads.leo_cloud(n, 0)``, two-body + J2 through ``cowell``,
one day) with the output times ``[day]``, ``[day / 2, day]`` and every 10 minutes, one
launch of all objects (``HAPSIRA_CUDA_CHUNK`` = n), in one process, the variants
alternated. Per variant: the median of the kernel's own time (CUDA events,
``last_kernel_seconds``) and of the whole call, and the steps taken (the same in each:
output times come from the interpolant and do not change the steps). An output time
inside a step costs the lane the step's interpolant; a warp pays it whenever one of
its 32 lanes does.
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=lambda s: int(float(s)), default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", required=True, help="the JSON file to write")
    args = parser.parse_args()
    os.environ.setdefault("HAPSIRA_TARGET", "cuda")  # before hapsira is imported

    import workloads
    from hapsira_core import settings
    from hapsira_core.ivp import build
    from hapsira_cowell import cowell

    rr, vv = workloads.leo_cloud(args.n, 0)
    day = workloads.DAY
    variants = {"end": np.array([day]), "half_and_end": np.array([day / 2, day]),
                "every_10_min": np.linspace(600.0, day, 144)}
    settings.CUDA_CHUNK = args.n  # one launch: the kernel's own time, no chunk ends

    def call(tofs):
        start = time.perf_counter()
        result = cowell(workloads.K, rr, vv, tofs, workloads.RTOL, workloads.ATOL,
                        f=workloads.two_body_j2)
        wall = time.perf_counter() - start
        (kernel,) = build.KERNELS.values()  # cowell's one kernel
        return wall, kernel.last_kernel_seconds, int(np.sum(result.nsteps))

    for tofs in variants.values():  # compile, and the first calls apart
        call(tofs)
    samples = harness.alternate(lambda name, tofs: call(tofs), variants, args.repeat)
    out = {"device": harness.gpus(), "n": args.n, "repeat": args.repeat,
           "fetch": settings.CUDA_FETCH, "variants": {}}
    for name, runs in samples.items():
        out["variants"][name] = {
            "output_times": len(variants[name]),
            "kernel_median_s": statistics.median(k for _, k, _ in runs),
            "call_median_s": statistics.median(w for w, _, _ in runs),
            "orbit_steps": runs[0][2]}
        print(f"{name:14s}: kernel {out['variants'][name]['kernel_median_s']:.4f} s, call "
              f"{out['variants'][name]['call_median_s']:.4f} s, steps {runs[0][2]}", flush=True)
    harness.write_result(args.out, out)


if __name__ == "__main__":
    main()
