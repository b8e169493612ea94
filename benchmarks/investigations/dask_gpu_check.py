"""The dask-cuda example of docs/dask.md on a GPU machine: one worker per GPU, checked bit for bit.

Starts ``dask_cuda.LocalCUDACluster`` before anything touches CUDA in this
process, with ``HAPSIRA_TARGET=cuda`` for the workers; propagates the
reference workload (LEO cloud, two-body + J2, 1 day, states at 12 h and
24 h) as Dask arrays, timed (second run; the first compiles on each
worker), then the same objects in this process with the numpy ``cowell()``
on GPU 0, and compares the bits. Writes ``dask_gpu_check.json`` to
``--out``.

    HAPSIRA_TARGET=cuda python benchmarks/investigations/dask_gpu_check.py --n 2000000 --out gpu-out
"""

import argparse
import json
import os
import sys
import time

os.environ["HAPSIRA_TARGET"] = "cuda"
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # benchmarks/


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2_000_000)
    parser.add_argument("--chunks-per-gpu", type=int, default=2)
    parser.add_argument("--out", default=".")
    args = parser.parse_args()

    from dask_cuda import LocalCUDACluster
    from distributed import Client

    cluster = LocalCUDACluster(threads_per_worker=1)  # before any CUDA context here
    client = Client(cluster)

    import dask.array as da
    import numpy as np

    from hapsira_core.dask import worker_info
    from hapsira_cowell import cowell
    from workloads import ATOL, DAY, RTOL, K, leo_cloud, two_body_j2

    info = client.run(worker_info)
    gpus = len(info)
    visible = client.run(lambda: os.environ.get("CUDA_VISIBLE_DEVICES"))
    print(f"workers: {gpus}, targets {sorted({i['target'] for i in info.values()})}, "
          f"CUDA_VISIBLE_DEVICES {sorted(visible.values())}", flush=True)
    r0, v0 = (np.asarray(a, dtype=float) for a in leo_cloud(args.n))
    tofs = np.array([DAY / 2, DAY])
    chunk = -(-args.n // (gpus * args.chunks_per_gpu))
    record = {"n": args.n, "gpus": gpus, "chunk": chunk, "workers": list(info.values()),
              "runs": []}
    out = None
    for attempt in range(2):
        start = time.perf_counter()
        res = cowell(K, da.from_array(r0, chunks=chunk), da.from_array(v0, chunks=chunk), tofs,
                     RTOL, ATOL, f=two_body_j2)
        out = res.compute()
        seconds = time.perf_counter() - start
        record["runs"].append(seconds)
        print(f"dask, {gpus} GPU workers, run {attempt + 1}: {seconds:.2f} s", flush=True)
    record["compiled_per_worker"] = [i["compiled"] for i in client.run(worker_info).values()]
    client.close()
    cluster.close()

    cowell(K, r0[:2], v0[:2], tofs, RTOL, ATOL, f=two_body_j2)  # compile here
    start = time.perf_counter()
    ref = cowell(K, r0, v0, tofs, RTOL, ATOL, f=two_body_j2)
    record["single_process_seconds"] = time.perf_counter() - start
    record["bit_identical"] = all(
        np.asarray(getattr(out, k)).tobytes() == np.asarray(getattr(ref, k)).tobytes()
        for k in ("rr", "vv", "status", "nfev", "nsteps"))
    record["status_counts"] = {int(s): int((ref.status == s).sum())
                               for s in np.unique(ref.status)}
    print(json.dumps(record, indent=1))
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "dask_gpu_check.json"), "w") as handle:
        json.dump(record, handle, indent=1)


if __name__ == "__main__":
    main()
