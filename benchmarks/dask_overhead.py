"""What Dask costs: cowell() on Dask arrays against one single-process parallel call.

The reference workload (benchmarks/workloads.py: LEO cloud, two-body + J2,
rtol 1e-11) at 1e5 objects by default. In this process HAPSIRA_TARGET is
set to ``parallel`` and one numpy call is timed; then a distributed
``LocalCluster`` runs the same objects as Dask arrays, chunked along the
object axis, in two shapes that use the same cores:

* ``cpu x W``: W single-threaded worker processes on the cpu target,
* ``parallel x 1``: one worker process on the parallel target.

Every configuration is warmed up first (compile excluded everywhere; with
the disk cache on, workers load the kernel) and timed ``--repeat`` times;
the best time counts. Outputs: the state at the end of the span only
(``--outputs 1``), gathered into this process (``compute()``), and, with
``--outputs M``, M states per object, also written by the workers to Zarr
(``to_zarr``). Every Dask result is checked bit for bit against the numpy
call. Results: ``benchmarks/results/dask_overhead_<name>.json``.

    python benchmarks/dask_overhead.py --n 100000 --name 2core
"""

import argparse
import os
import shutil
import sys
import tempfile
import time

os.environ["HAPSIRA_TARGET"] = "parallel"  # this process: the single-process reference
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import harness  # noqa: E402


def best(function, repeat):
    return harness.best_of(function, repeat)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--span", type=float, default=86400.0, help="seconds (default 1 day)")
    parser.add_argument("--outputs", type=int, default=1, help="output times per object")
    parser.add_argument("--chunks", default="10000,25000", help="objects per Dask chunk")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--name", default="2core",
                        help="result file: benchmarks/results/dask_overhead_<name>.json")
    parser.add_argument("--out", default=None,
                        help="the result's path (default: from --name)")
    args = parser.parse_args()

    import dask.array as da
    import distributed

    from hapsira_core.dask import worker_info
    from hapsira_cowell import cowell
    from workloads import ATOL, RTOL, K, leo_cloud, two_body_j2

    cores = len(os.sched_getaffinity(0))
    r0, v0 = leo_cloud(args.n)
    r0, v0 = np.asarray(r0, dtype=float), np.asarray(v0, dtype=float)
    tofs = np.linspace(args.span / args.outputs, args.span, args.outputs)

    def numpy_call():
        return cowell(K, r0, v0, tofs, RTOL, ATOL, f=two_body_j2)

    cowell(K, r0[:2], v0[:2], tofs, RTOL, ATOL, f=two_body_j2)  # compile
    reference_seconds, reference_all, ref = best(numpy_call, args.repeat)
    steps = int(ref.nsteps.sum())
    print(f"single process, parallel ({cores} cores): {reference_seconds:.2f} s "
          f"({steps / args.n:.0f} steps/object)", flush=True)
    results = {"single process parallel": {"seconds": reference_seconds,
                                           "all": reference_all}}

    shapes = {f"cpu x {cores}": dict(n_workers=cores, env={"HAPSIRA_TARGET": "cpu"}),
              "parallel x 1": dict(n_workers=1, env={"HAPSIRA_TARGET": "parallel"})}
    for label, shape in shapes.items():
        cluster = distributed.LocalCluster(threads_per_worker=1, processes=True,
                                           dashboard_address=":0", **shape)
        client = distributed.Client(cluster)
        try:
            targets = {i["target"] for i in client.run(worker_info).values()}
            assert targets == {shape["env"]["HAPSIRA_TARGET"]}, targets
            # warm-up: every worker compiles (or loads) the kernel once
            warm = cowell(K, da.from_array(r0[:4 * cores], chunks=4), v0[:4 * cores], tofs,
                          RTOL, ATOL, f=two_body_j2)
            warm.compute()
            for chunk in (int(c) for c in args.chunks.split(",")):
                def dask_call():
                    res = cowell(K, da.from_array(r0, chunks=chunk),
                                 da.from_array(v0, chunks=chunk), tofs, RTOL, ATOL,
                                 f=two_body_j2)
                    return res.compute()

                seconds, every, out = best(dask_call, args.repeat)
                same = all(np.asarray(getattr(out, k)).tobytes()
                           == np.asarray(getattr(ref, k)).tobytes()
                           for k in ("rr", "vv", "status", "nsteps"))
                key = f"dask {label}, chunks of {chunk}, compute()"
                results[key] = {"seconds": seconds, "all": every, "bit_identical": same,
                                "overhead_vs_single_process": seconds / reference_seconds - 1}
                print(f"{key}: {seconds:.2f} s ({seconds / reference_seconds - 1:+.1%}), "
                      f"bit-identical: {same}", flush=True)
                if args.outputs > 1:
                    folder = tempfile.mkdtemp(prefix="hapsira-dask-bench-")

                    def zarr_call():
                        res = cowell(K, da.from_array(r0, chunks=chunk),
                                     da.from_array(v0, chunks=chunk), tofs, RTOL, ATOL,
                                     f=two_body_j2)
                        res.to_zarr(os.path.join(folder, "out.zarr"), overwrite=True)

                    try:
                        seconds, every, _ = best(zarr_call, args.repeat)
                        size = sum(os.path.getsize(os.path.join(d, f))
                                   for d, _, fs in os.walk(folder) for f in fs)
                    finally:
                        shutil.rmtree(folder, ignore_errors=True)
                    key = f"dask {label}, chunks of {chunk}, to_zarr()"
                    results[key] = {"seconds": seconds, "all": every, "zarr_bytes": size,
                                    "overhead_vs_single_process":
                                        seconds / reference_seconds - 1}
                    print(f"{key}: {seconds:.2f} s ({seconds / reference_seconds - 1:+.1%}), "
                          f"{size / 1e6:.1f} MB on disk", flush=True)
        finally:
            client.close()
            cluster.close()

    record = {
        "workload": {"objects": args.n, "span_s": args.span, "outputs": args.outputs,
                     "model": "two-body + J2", "rtol": RTOL, "atol": ATOL,
                     "accepted_steps": steps},
        "repeat": args.repeat, "measured": time.strftime("%Y-%m-%d"),
        "results": results,
    }
    harness.write_result(args.out or f"dask_overhead_{args.name}", record)


if __name__ == "__main__":
    main()
