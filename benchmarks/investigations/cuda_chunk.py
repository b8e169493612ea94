"""The whole cuda call at several ``HAPSIRA_CUDA_CHUNK`` sizes, on one GPU, in one process.

    HAPSIRA_TARGET=cuda python benchmarks/investigations/cuda_chunk.py --out chunk.json
        [--n 1e6] [--rounds 5] [--chunks 65536,131072,262144,524288,1048576]

The reference workload (``workloads.leo_cloud``, two-body + J2 through ``cowell``, one
day, one output time, inputs and outputs in host memory, as `benchmarks/gpu_user_f.py`
times it). A chunk is the objects of one launch: the GPU computes one while the host
copies the other stream's inputs and results (pageable memory, so each copy holds the
host), and the first chunk's inputs and the last one's results are copied with the GPU
idle. The chunk is read at each call, so one kernel serves every size: after a first
call (compile), the sizes alternate for ``--rounds`` calls each. Per size: median and
best wall seconds, the median of the GPU's busy time in the call's kernels
(``last_kernel_seconds``), and whether every call gave the first call's numbers.
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
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--chunks", default="65536,131072,262144,524288,1048576")
    parser.add_argument("--out", required=True, help="the JSON file to write")
    args = parser.parse_args()
    os.environ.setdefault("HAPSIRA_TARGET", "cuda")  # before hapsira is imported

    import workloads
    from hapsira_core import settings
    from hapsira_core.ivp import build
    from hapsira_cowell import cowell

    rr, vv = workloads.leo_cloud(args.n, 0)
    tofs = np.array([workloads.DAY])
    chunks = [int(c) for c in args.chunks.split(",")]

    def call(chunk):
        settings.CUDA_CHUNK = chunk
        start = time.perf_counter()
        result = cowell(workloads.K, rr, vv, tofs, workloads.RTOL, workloads.ATOL,
                        f=workloads.two_body_j2)
        wall = time.perf_counter() - start
        (kernel,) = build.KERNELS.values()  # cowell's one kernel
        return wall, kernel.last_kernel_seconds, result

    first = call(chunks[0])
    want = first[2]
    samples = {chunk: [] for chunk in chunks}
    identical = True
    for _ in range(args.rounds):
        for chunk in chunks:
            wall, kernel_s, result = call(chunk)
            samples[chunk].append((wall, kernel_s))
            identical &= bool(np.array_equal(result.rr, want.rr) and
                              np.array_equal(result.nsteps, want.nsteps))
    out = {"device": harness.gpus(), "n": args.n, "rounds": args.rounds,
           "fetch": settings.CUDA_FETCH, "first_call_s": first[0], "identical": identical,
           "orbit_steps": int(want.nsteps.sum()), "chunks": {}}
    for chunk in chunks:
        walls = [w for w, _ in samples[chunk]]
        kernels = [k for _, k in samples[chunk] if k is not None]
        out["chunks"][str(chunk)] = {
            "median_s": statistics.median(walls), "best_s": min(walls), "samples_s": walls,
            "kernel_median_s": statistics.median(kernels) if kernels else None}
        print(f"chunk {chunk:8d}: median {statistics.median(walls):.4f} s, best "
              f"{min(walls):.4f} s, kernels busy {out['chunks'][str(chunk)]['kernel_median_s']}",
              flush=True)
    print(f"identical: {identical}", flush=True)
    harness.write_result(args.out, out)


if __name__ == "__main__":
    main()
