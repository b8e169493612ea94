"""What the host's copies of one ``cowell()`` call on the GPU cost, and whether touching
the output pages first (``launch.PREFAULT``) takes that off the chunks' pace.

    HAPSIRA_TARGET=cuda python benchmarks/investigations/cuda_host_copies.py --out copies.json
        [--n 1e6] [--rounds 5]

1. Copies alone: the transparent huge page settings, then one chunk's results (2^17
   objects of ``cowell``'s outputs: (1, 6) float64 and (5,) int64 each) copied from the
   GPU into fresh ``np.empty`` arrays, into the same arrays again (pages already
   touched), and into pinned host memory; the inputs (two (2^17, 3) float64) copied in.
   Median of 7 of each, milliseconds.
2. The reference workload (``workloads.leo_cloud``, two-body + J2, one day) at ``--n``,
   ``launch.PREFAULT`` off and on alternated for ``--rounds`` calls each after one
   warm-up call: median wall and kernel seconds, and whether every call gave the same
   states, statuses and step counts, bit for bit.
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
CHUNK = 1 << 17


def _sysfs(path):
    try:
        with open(path) as handle:
            return handle.read().strip()
    except OSError as error:
        return f"unreadable: {error}"


def _ms(samples):
    return round(1e3 * statistics.median(samples), 3)


def copies_alone(cuda):
    y = cuda.to_device(np.random.default_rng(0).random((CHUNK, 1, 6)))
    info = cuda.to_device(np.arange(CHUNK * 5, dtype=np.int64).reshape(CHUNK, 5))
    r0 = np.random.default_rng(1).random((CHUNK, 3))
    v0 = np.random.default_rng(2).random((CHUNK, 3))
    d_r0, d_v0 = cuda.device_array_like(r0), cuda.device_array_like(v0)
    stream = cuda.stream()
    fresh, touched, pinned, copy_in = [], [], [], []
    pinned_y = cuda.pinned_array((CHUNK, 1, 6))
    pinned_info = cuda.pinned_array((CHUNK, 5), np.int64)
    for _ in range(7):
        host_y, host_info = np.empty((CHUNK, 1, 6)), np.empty((CHUNK, 5), np.int64)
        for samples in (fresh, touched):
            start = time.perf_counter()
            y.copy_to_host(host_y, stream=stream)
            info.copy_to_host(host_info, stream=stream)
            stream.synchronize()
            samples.append(time.perf_counter() - start)
        start = time.perf_counter()
        y.copy_to_host(pinned_y, stream=stream)
        info.copy_to_host(pinned_info, stream=stream)
        stream.synchronize()
        pinned.append(time.perf_counter() - start)
        start = time.perf_counter()
        d_r0.copy_to_device(r0, stream=stream)
        d_v0.copy_to_device(v0, stream=stream)
        stream.synchronize()
        copy_in.append(time.perf_counter() - start)
    start = time.perf_counter()
    np.empty((CHUNK * 11,)).fill(0)
    fill_fresh = time.perf_counter() - start
    megabytes = CHUNK * 88 / 1e6
    return {"results_mb": megabytes, "inputs_mb": CHUNK * 48 / 1e6,
            "back_fresh_ms": _ms(fresh), "back_touched_ms": _ms(touched),
            "back_pinned_ms": _ms(pinned), "in_ms": _ms(copy_in),
            "fill_fresh_ms": round(1e3 * fill_fresh, 3)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=lambda s: int(float(s)), default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", required=True, help="the JSON file to write")
    args = parser.parse_args()
    os.environ.setdefault("HAPSIRA_TARGET", "cuda")  # before hapsira is imported

    from numba import cuda

    import workloads
    from hapsira_core.ivp import build
    from hapsira_core.targets.cuda import launch
    from hapsira_cowell import cowell

    out = {"device": harness.gpus(), "n": args.n, "rounds": args.rounds,
           "thp_enabled": _sysfs("/sys/kernel/mm/transparent_hugepage/enabled"),
           "thp_defrag": _sysfs("/sys/kernel/mm/transparent_hugepage/defrag")}
    try:
        from numpy._core.multiarray import _get_madvise_hugepage
        out["numpy_madvise_hugepage"] = bool(_get_madvise_hugepage())
    except ImportError as error:
        out["numpy_madvise_hugepage"] = f"unknown: {error}"
    out["copies_alone"] = copies_alone(cuda)
    print(out, flush=True)

    rr, vv = workloads.leo_cloud(args.n, 0)
    tofs = np.array([workloads.DAY])

    def call(prefault):
        launch.PREFAULT = prefault
        start = time.perf_counter()
        result = cowell(workloads.K, rr, vv, tofs, workloads.RTOL, workloads.ATOL,
                        f=workloads.two_body_j2)
        wall = time.perf_counter() - start
        (kernel,) = build.KERNELS.values()
        return wall, kernel.last_kernel_seconds, result

    want = call(False)[2]
    samples = {False: [], True: []}
    identical = True
    for _ in range(args.rounds):
        for prefault in (False, True):
            wall, kernel_s, result = call(prefault)
            samples[prefault].append((wall, kernel_s))
            identical &= all(np.array_equal(np.asarray(getattr(result, f)),
                                            np.asarray(getattr(want, f)), equal_nan=True)
                             for f in FIELDS)
    out["identical"] = bool(identical)
    for prefault, name in ((False, "plain"), (True, "prefault")):
        walls = [w for w, _ in samples[prefault]]
        kernels = [k for _, k in samples[prefault]]
        out[name] = {"median_s": statistics.median(walls), "best_s": min(walls),
                     "samples_s": walls, "kernel_median_s": statistics.median(kernels)}
        print(f"{name:8s} median {out[name]['median_s']:.4f} s  best {out[name]['best_s']:.4f}"
              f"  kernels {out[name]['kernel_median_s']:.4f} s", flush=True)
    print(f"identical: {identical}", flush=True)
    harness.write_result(args.out, out)


if __name__ == "__main__":
    main()
