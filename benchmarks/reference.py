"""The reference workload on one platform, against N, beside its peers, in one run.

    python benchmarks/reference.py --platform cuda --name h100
    python benchmarks/reference.py --platform cpu --name laptop --sizes 1e3,1e4

For each N: two-body + J2 over one day (DESIGN.md), and a variant with
exponential drag and a terminal re-entry event at 100 km; seconds (median of
repeats, compile excluded), orbit-steps per second, the largest position error
against a high-accuracy reference (scipy DOP853 at rtol 1e-13 on the first
objects of the cloud), and the peers' seconds for the same N: on a GPU
machine diffrax and the parallel and cpu targets, on a CPU machine scipy,
heyoka and the parallel target (peers too slow for N run fewer objects and
are scaled linearly, marked ``extrapolated_from``). Writes
``benchmarks/results/<name>.json``.
"""

import argparse
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import harness  # noqa: E402

harness.platform_from_argv()

import peers  # noqa: E402
import workloads as workload  # noqa: E402
from hapsira_core import settings  # noqa: E402
from hapsira_cowell import cowell  # noqa: E402
from hapsira_cowell.events import AltitudeCrossEvent  # noqa: E402
from hapsira_cowell.propagation.forms import orbit_rhs  # noqa: E402

TOFS = np.array([workload.DAY / 2, workload.DAY])
SEED = 2


def device_name():
    if settings.TARGET == "cuda" and not settings.cuda_simulator_enabled():
        from numba import cuda
        name = cuda.get_current_device().name
        return name.decode() if isinstance(name, bytes) else str(name)
    return f"{harness.cpu_model()}, {os.cpu_count()} cores"


def variant_inputs(variant, n):
    if variant == "j2":
        r0, v0 = workload.leo_cloud(n, SEED)
        return r0, v0, dict(f=workload.two_body_j2)
    r0, v0, area_to_mass = workload.drag_cloud(n, SEED)
    # a terminal event happens once: one record per object, not the default 64
    # (8 bytes per record and object, copied back from the GPU)
    return r0, v0, dict(f=workload.two_body_j2_drag, params=area_to_mass,
                        events=[AltitudeCrossEvent(workload.REENTRY_ALT, workload.R)],
                        max_event_records=1)


def reference(variant, n_ref):
    """scipy DOP853 at rtol 1e-13, atol 1e-15 on the first n_ref objects (NaN after re-entry)."""
    from scipy.integrate import solve_ivp
    r0, v0, _ = variant_inputs(variant, n_ref)
    if variant == "drag":
        _, _, area_to_mass = workload.drag_cloud(n_ref, SEED)
    out = np.full((n_ref, TOFS.size, 3), np.nan)
    for i in range(n_ref):
        rhs = workload.scipy_rhs if variant == "j2" else workload.scipy_rhs_drag(area_to_mass[i, 0])

        def reentry(t, y):
            return np.linalg.norm(y[:3]) - workload.R - workload.REENTRY_ALT
        reentry.terminal, reentry.direction = True, -1
        sol = solve_ivp(rhs, (0.0, TOFS[-1]), np.concatenate([r0[i], v0[i]]), method="DOP853",
                        rtol=1e-13, atol=1e-15, dense_output=True,
                        events=None if variant == "j2" else [reentry])
        reached = TOFS <= sol.t[-1]
        if reached.any():
            out[i, reached] = sol.sol(TOFS[reached])[:3].T
    return out


def solve_kernel(variant):
    """The cuda kernel that cowell() ran for this variant (None on other targets)."""
    if settings.TARGET != "cuda":
        return None
    from hapsira_core.ivp import build
    n_events = 0 if variant == "j2" else 1
    f = orbit_rhs(workload.two_body_j2 if variant == "j2" else workload.two_body_j2_drag)
    # build.KERNELS (the active target's): (method, n, fun, event functions, event states)
    return next((k for key, k in build.KERNELS.items()
                 if key[1] == 6 and key[2] is f and len(key[3]) == n_events), None)


def time_hapsira(variant, n, repeat):
    cowell(workload.K, *variant_inputs(variant, 2)[:2], TOFS, **variant_inputs(variant, 2)[2])
    r0, v0, kwargs = variant_inputs(variant, n)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        res = cowell(workload.K, r0, v0, TOFS, **kwargs)
        times.append(time.perf_counter() - t)
    return float(np.median(times)), res


def peer_results(n, args):
    found = {}
    cores = os.cpu_count()
    if settings.TARGET == "cuda":
        if "diffrax" in args.peers:
            found["diffrax Dopri8 (vmap, same GPU)"] = peers.diffrax_dopri8(n, SEED)
        if "parallel" in args.peers:
            found[f"hapsira parallel ({cores} cores)"] = peers.hapsira_target(
                "parallel", n, SEED, n_max=100_000)
        if "cpu" in args.peers:
            found["hapsira cpu (1 core)"] = peers.hapsira_target("cpu", n, SEED, n_max=2_000, repeat=1)
    else:
        if "scipy" in args.peers:
            found["scipy DOP853 (1 core)"] = peers.scipy_dop853(n, SEED)
        if "heyoka" in args.peers:
            found["heyoka Taylor, SIMD batch (1 core)"] = peers.heyoka_batch(n, SEED)
        other = "parallel" if settings.TARGET == "cpu" else "cpu"
        if other in args.peers:
            label = f"hapsira {other} ({cores} cores)" if other == "parallel" else "hapsira cpu (1 core)"
            found[label] = peers.hapsira_target(other, n, SEED, n_max=20_000, repeat=1)
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    harness.add_platform(parser, settings.TARGET)
    parser.add_argument("--name", default=f"{settings.TARGET}",
                        help="the result file: benchmarks/results/<name>.json (or a path)")
    parser.add_argument("--sizes", default="1e3,1e4,1e5,1e6")
    parser.add_argument("--variants", default="j2,drag")
    parser.add_argument("--peers", default="diffrax,parallel,cpu,scipy,heyoka")
    parser.add_argument("--n-ref", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--budget", type=float, default=120.0,
                        help="skip sizes whose hapsira run is predicted to exceed this (s)")
    args = parser.parse_args()
    args.peers = set(args.peers.split(","))
    report = {"name": args.name, "device": device_name(), "versions": harness.versions(),
              "target": settings.TARGET,
              "workload": "LEO cloud, two-body + J2, 1 day, rtol 1e-11, atol 1e-12; "
                          "variant 'drag': + exponential drag, re-entry event at 100 km",
              "runs": []}
    for variant in args.variants.split(","):
        ref = reference(variant, args.n_ref)
        per_object = None
        for n in [int(float(s)) for s in args.sizes.split(",")]:
            if per_object is not None and per_object * n * args.repeat > args.budget:
                print(f"skip {variant} N={n}: predicted {per_object * n * args.repeat:.0f} s",
                      flush=True)
                continue
            seconds, res = time_hapsira(variant, n, args.repeat)
            per_object = seconds / n
            m = min(n, args.n_ref)
            err = np.linalg.norm(res.rr[:m] - ref[:m], axis=-1)
            same_nan = bool(np.array_equal(np.isnan(err), np.isnan(ref[:m, :, 0])))
            steps = int(res.nsteps.sum())
            run = {"variant": variant, "n_objects": n, "seconds": seconds, "orbit_steps": steps,
                   "orbit_steps_per_s": steps / seconds, "us_per_object_day": 1e6 * seconds / n,
                   "max_pos_err_km": float(np.nanmax(err)) if same_nan else float("inf"),
                   "status_counts": {int(s): int((res.status == s).sum())
                                     for s in np.unique(res.status)}}
            kernel = solve_kernel(variant)
            if kernel is not None:  # GPU time of the last call's launches, and the kernel's needs
                run["kernel_seconds"] = kernel.last_kernel_seconds
                run["kernel_resources"] = kernel.resources()
            if variant == "j2":
                run["peers"] = peer_results(n, args)
            report["runs"].append(run)
            print(json.dumps(run), flush=True)
    path = harness.write_result(args.name, report, indent=2)
    print(f"\n{report['device']}, target {report['target']}; written to {path}")
    print("| variant | N | seconds | orbit-steps/s | max pos err km | peers (seconds) |")
    print("|---|---|---|---|---|---|")
    for run in report["runs"]:
        peer_text = "; ".join(f"{k}: {v['seconds']:.3g}" if v.get("seconds") is not None
                              else f"{k}: {v.get('error') or v.get('missing')}"
                              for k, v in run.get("peers", {}).items())
        print(f"| {run['variant']} | {run['n_objects']:.0e} | {run['seconds']:.3g} | "
              f"{run['orbit_steps_per_s']:.3g} | {run['max_pos_err_km']:.2g} | {peer_text} |")


if __name__ == "__main__":
    main()
