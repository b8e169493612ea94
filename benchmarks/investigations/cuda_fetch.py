"""Fetching threads (``HAPSIRA_CUDA_FETCH=1``) against one thread per object, on one GPU.

    HAPSIRA_TARGET=cuda python benchmarks/investigations/cuda_fetch.py --out fetch.json
        [--n 1e6] [--rounds 5]

The reference workload (``workloads.leo_cloud``, two-body + J2 through ``cowell``, one
day, rtol 1e-11, atol 1e-12, inputs and outputs in host memory) in one process, with
the setting off and on: each position builds its own kernel (``settings.CUDA_FETCH`` is
read when a kernel is built; ``build.KERNELS`` is swapped with it), is called once to
compile and warm up, then the two alternate for ``--rounds`` calls each. Per position:
best and median wall seconds of the calls, median ``last_kernel_seconds`` (the GPU's
time in the call's kernels), registers, and the blocks launched per chunk (fetching:
the kernel's occupancy, blocks per SM times SMs). ``identical``: every call of both
gave the same ``rr``, ``vv``, ``status``, ``nsteps`` and ``nfev``, bit for bit.
Prints and writes JSON to ``--out``.
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

FIELDS = ("rr", "vv", "status", "nsteps", "nfev")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=lambda s: int(float(s)), default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", required=True, help="the JSON file to write")
    args = parser.parse_args()
    os.environ.setdefault("HAPSIRA_TARGET", "cuda")  # before hapsira is imported

    import workloads
    from hapsira_core import settings
    from hapsira_core.ivp import build
    from hapsira_core.targets.cuda import launch
    from hapsira_cowell import cowell

    rr, vv = workloads.leo_cloud(args.n, 0)
    tofs = np.array([workloads.DAY])
    kernels = {False: {}, True: {}}  # each position's build.KERNELS
    blocks = {False: None, True: None}
    real = launch.ObjectKernel.resident_blocks

    def resident(self, kernel, arrays, block):
        blocks[True] = real(self, kernel, arrays, block)
        return blocks[True]

    launch.ObjectKernel.resident_blocks = resident

    def call(fetch):
        settings.CUDA_FETCH = fetch
        build.KERNELS = kernels[fetch]
        start = time.perf_counter()
        result = cowell(workloads.K, rr, vv, tofs, workloads.RTOL, workloads.ATOL,
                        f=workloads.two_body_j2)
        wall = time.perf_counter() - start
        (kernel,) = kernels[fetch].values()  # cowell's one kernel
        return wall, kernel.last_kernel_seconds, result, kernel

    first, identical = {}, True
    samples = {False: [], True: []}
    for fetch in (False, True):  # compile (or load) and warm up
        first[fetch] = call(fetch)
    want = first[False][2]
    for _ in range(args.rounds):
        for fetch in (False, True):
            wall, kernel_s, result, _ = call(fetch)
            samples[fetch].append((wall, kernel_s))
            identical &= all(np.array_equal(np.asarray(getattr(result, f)),
                                            np.asarray(getattr(want, f)), equal_nan=True)
                             for f in FIELDS)
    identical &= all(np.array_equal(np.asarray(getattr(first[True][2], f)),
                                    np.asarray(getattr(want, f)), equal_nan=True)
                     for f in FIELDS)
    block = settings.CUDA_BLOCK
    blocks[False] = -(-min(args.n, settings.CUDA_CHUNK) // block)
    out = {"device": harness.gpus(), "n": args.n, "rounds": args.rounds, "block": block,
           "chunk": settings.CUDA_CHUNK, "identical": bool(identical),
           "steps_mean": float(want.nsteps.mean()), "steps_max": int(want.nsteps.max())}
    for fetch, name in ((False, "plain"), (True, "fetch")):
        walls = [w for w, _ in samples[fetch]]
        kernel_s = [k for _, k in samples[fetch] if k is not None]
        out[name] = {"median_s": statistics.median(walls), "best_s": min(walls),
                     "samples_s": walls, "first_call_s": first[fetch][0],  # compile included
                     "kernel_median_s": statistics.median(kernel_s) if kernel_s else None,
                     "kernel_best_s": min(kernel_s) if kernel_s else None,
                     "blocks_per_launch": blocks[fetch],
                     "resources": list(first[fetch][3].resources().values())}
        print(f"{name:5s} median {out[name]['median_s']:.4f} s  best {out[name]['best_s']:.4f} s"
              f"  kernel {out[name]['kernel_median_s']}  blocks {blocks[fetch]}", flush=True)
    out["fetch_over_plain_median"] = out["fetch"]["median_s"] / out["plain"]["median_s"]
    if out["plain"]["kernel_median_s"] and out["fetch"]["kernel_median_s"]:
        out["fetch_over_plain_kernel"] = (out["fetch"]["kernel_median_s"]
                                          / out["plain"]["kernel_median_s"])
    print(f"identical: {identical}", flush=True)
    harness.write_result(args.out, out)


if __name__ == "__main__":
    main()
