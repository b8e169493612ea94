"""The cuda target on a real GPU: compile, compare with the host, then time.

    python benchmarks/investigations/gpu_check.py [--check N] [--sizes 1e4,1e5,1e6] [--out DIR]

Runs the reference workload (benchmarks/workload.py) on ``HAPSIRA_TARGET=cuda``
and on the ``parallel`` target (in a subprocess, the host reference) for the
same N objects; reports status agreement, the distribution of the relative
position difference, accepted-step agreement, registers and local memory per
thread, compile time, and seconds / orbit-steps per second per size. Writes
``gpu_check.json`` to --out.
"""

import argparse
import json
import os
import subprocess
import sys
import time

os.environ["HAPSIRA_TARGET"] = os.environ.get("HAPSIRA_TARGET", "cuda")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # benchmarks/

import numpy as np  # noqa: E402

import harness  # noqa: E402
import workloads as workload  # noqa: E402
from hapsira_cowell import cowell  # noqa: E402
from hapsira_core.ivp import build  # noqa: E402
from hapsira_cowell.propagation.forms import orbit_rhs  # noqa: E402

HOST_SCRIPT = """
import sys, time, numpy as np
sys.path.insert(0, {bench!r})
import workloads as workload
from hapsira_cowell import cowell
r0, v0 = workload.leo_cloud({n}, seed=1)
tofs = np.array([workload.DAY / 2, workload.DAY])
cowell(workload.K, r0[:2], v0[:2], tofs, f=workload.two_body_j2)
t = time.perf_counter()
res = cowell(workload.K, r0, v0, tofs, f=workload.two_body_j2)
seconds = time.perf_counter() - t
np.savez({path!r}, rr=res.rr, status=res.status, nsteps=res.nsteps, seconds=seconds)
"""


def host_reference(n, path, target="parallel"):
    env = dict(os.environ, HAPSIRA_TARGET=target)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    script = HOST_SCRIPT.format(bench=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                n=n, path=path)
    subprocess.run([sys.executable, "-c", script], env=env, check=True)
    return dict(np.load(path))


def workload_kernel():
    """The kernel that cowell(f=workload.two_body_j2) runs (built by the first call)."""
    return build.kernel("DOP853", 6, orbit_rhs(workload.two_body_j2), ())


def device_name():
    from numba import cuda
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return "CUDA simulator"
    return cuda.get_current_device().name.decode() if isinstance(
        cuda.get_current_device().name, bytes) else str(cuda.get_current_device().name)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", type=float, default=1e4)
    parser.add_argument("--sizes", default="1e4,1e5,1e6")
    parser.add_argument("--out", default=".")
    parser.add_argument("--sort", action="store_true",
                        help="order the timed objects by expected step count")
    parser.add_argument("--label", default="")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--budget", type=float, default=240.0,
                        help="skip sizes predicted to take longer than this (s)")
    args = parser.parse_args()
    report = {"device": device_name(), "versions": harness.versions(), "target": "cuda",
              "machine": harness.machine()}
    tofs = np.array([workload.DAY / 2, workload.DAY])

    r0, v0 = workload.leo_cloud(32, seed=3)
    t = time.perf_counter()
    cowell(workload.K, r0, v0, tofs, f=workload.two_body_j2)
    report["compile_and_first_call_s"] = time.perf_counter() - t
    kernel = workload_kernel()
    report["kernel_resources"] = kernel.resources()
    print("compile + first call", round(report["compile_and_first_call_s"], 1), "s",
          report["kernel_resources"], flush=True)

    n = int(args.check)
    report["label"] = args.label
    if n == 0:
        report["check"] = None
    else:
        check(report, n, tofs, args)
    time_sizes(report, tofs, args)
    with open(os.path.join(args.out, f"gpu_check{args.label}.json"), "w") as out:
        json.dump(report, out, indent=2)


def check(report, n, tofs, args):
    host = host_reference(n, os.path.join(args.out, "host_reference.npz"))
    r0, v0 = workload.leo_cloud(n, seed=1)
    res = cowell(workload.K, r0, v0, tofs, f=workload.two_body_j2)
    rel = np.linalg.norm(res.rr - host["rr"], axis=-1) / np.linalg.norm(host["rr"], axis=-1)
    rel = rel[np.isfinite(rel)]
    report["check"] = {
        "n_objects": n,
        "host_target": "parallel",
        "host_seconds": float(host["seconds"]),
        "status_equal": bool(np.array_equal(res.status, host["status"])),
        "status_counts": {int(s): int((res.status == s).sum()) for s in np.unique(res.status)},
        "nsteps_equal_fraction": float(np.mean(res.nsteps == host["nsteps"])),
        "rel_pos_diff": {q: float(np.quantile(rel, float(q))) for q in ("0.5", "0.99", "1.0")},
    }
    print("check", json.dumps(report["check"]), flush=True)


def expected_steps_order(r0, v0):
    """Objects ordered by mean motion and eccentricity: a proxy of their step counts."""
    r = np.linalg.norm(r0, axis=1)
    energy = 0.5 * np.sum(v0 * v0, axis=1) - workload.K / r
    a = -workload.K / (2 * energy)
    h = np.cross(r0, v0)
    ecc = np.linalg.norm(np.cross(v0, h) / workload.K - r0 / r[:, None], axis=1)
    return np.argsort(np.sqrt(workload.K / np.abs(a) ** 3) * (1 + 3 * ecc))


def time_sizes(report, tofs, args):
    timings = []
    last = None
    for size in [int(float(s)) for s in args.sizes.split(",")]:
        if last is not None and last[1] * size / last[0] > args.budget:
            print(f"skip N={size}: predicted {last[1] * size / last[0]:.0f} s", flush=True)
            continue
        r0, v0 = workload.leo_cloud(size, seed=2)
        if args.sort:
            order = expected_steps_order(r0, v0)
            r0, v0 = r0[order], v0[order]
        cowell(workload.K, r0[:64], v0[:64], tofs, f=workload.two_body_j2)
        runs, kernel_runs = [], []
        kernel = workload_kernel()
        for _ in range(args.repeat):
            t = time.perf_counter()
            res = cowell(workload.K, r0, v0, tofs, f=workload.two_body_j2)
            runs.append(time.perf_counter() - t)
            kernel_runs.append(kernel.last_kernel_seconds)
        seconds = float(np.median(runs))
        # (the simulator keeps no kernel time)
        kernel_seconds = None if None in kernel_runs else float(np.median(kernel_runs))
        steps = int(res.nsteps.sum())
        timings.append({"label": args.label, "n_objects": size, "seconds": seconds,
                        "seconds_min_max": [min(runs), max(runs)], "orbit_steps": steps,
                        "orbit_steps_per_s": steps / seconds,
                        "kernel_seconds": kernel_seconds,
                        "kernel_orbit_steps_per_s": steps / kernel_seconds if kernel_seconds else None,
                        "us_per_object_day": 1e6 * seconds / size,
                        "failed": int((res.status < 0).sum())})
        print("timing", json.dumps(timings[-1]), flush=True)
        last = (size, seconds)
    report["timings"] = timings


if __name__ == "__main__":
    main()
