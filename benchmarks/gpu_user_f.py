"""The GPU with the function a user writes: the reference workload with the textbook
right-hand side, rewritten (shared reciprocals) and as written, beside the tuned one.

    HAPSIRA_TARGET=cuda python benchmarks/gpu_user_f.py --n 1000000 [--name h100]

In one process, on the reference workload (LEO cloud, two-body + J2, one day,
rtol 1e-11, atol 1e-12): ``cowell`` with the library's ``two_body`` +
``J2_perturbation`` (tuned), with ``workloads.textbook_cowell`` as the
framework compiles it by default on cuda (``HAPSIRA_FASTMATH=auto``: shared
reciprocals, `hapsira_core.kernels.reciprocals`), and with the same function
marked `as_written`. Each is timed as a user calls it (wall clock through the
public API, inputs and outputs in host memory), median of ``--repeat`` calls
after one warm-up call (compile). Positions are checked against scipy DOP853 at
rtol 1e-13 on ``--n-ref`` objects. Writes ``results/gpu_user_f[_<name>].json``
with the fields issue 29 names; diffrax and CuBIE are null where they do not
import (the reason in ``notes``).
"""

import argparse
import statistics
import sys
import time

import numpy as np

import harness
import workloads
from workloads import ATOL, DAY, K, RTOL


def timed(call, repeat):
    call()  # compile (or load) and warm up
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        result = call()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples), samples, result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--n-ref", type=int, default=10)
    parser.add_argument("--name", default="")
    args = parser.parse_args()

    from scipy.integrate import solve_ivp as scipy_solve_ivp

    from hapsira_core import settings
    from hapsira_core.jit import as_written, hjit
    from hapsira_cowell import cowell

    rr, vv = workloads.leo_cloud(args.n)
    tofs = np.array([DAY])
    exact = as_written(hjit(workloads.textbook_cowell.py_func))
    variants = {"tuned": workloads.two_body_j2, "rewritten": workloads.textbook_cowell,
                "as_written": exact}
    out = {"device": harness.machine().get("gpus"), "target": settings.TARGET,
           "fastmath": settings.FASTMATH, "n": args.n, "repeat": args.repeat, "notes": []}
    results = {}
    for name, f in variants.items():
        start = time.perf_counter()
        median, samples, res = timed(lambda: cowell(K, rr, vv, tofs, RTOL, ATOL, f=f),
                                     args.repeat)
        results[name] = res
        steps = res.nsteps.astype(float)
        out[name] = {"median_s": median, "samples_s": samples,
                     "first_call_and_runs_s": time.perf_counter() - start,
                     "steps_mean": float(steps.mean()), "orbit_steps_per_s": steps.sum() / median,
                     "failed": int((res.status < 0).sum())}
        print(f"{name:11s} {median:.4f} s  {steps.sum() / median:.3e} orbit-steps/s", flush=True)

    reference = np.array([scipy_solve_ivp(workloads.scipy_rhs, (0.0, DAY),
                                          np.concatenate([rr[i], vv[i]]), method="DOP853",
                                          rtol=1e-13, atol=1e-14).y[:3, -1]
                          for i in range(args.n_ref)])
    for name, res in results.items():
        out[name]["max_pos_err_km"] = float(np.abs(res.rr[:args.n_ref, -1] - reference).max())
        out[name]["same_steps_as_tuned"] = float((res.nsteps == results["tuned"].nsteps).mean())
    out.update(steps_mean=out["tuned"]["steps_mean"], tuned_s=out["tuned"]["median_s"],
               as_written_s=out["rewritten"]["median_s"],
               as_written_without_rewrite_s=out["as_written"]["median_s"],
               orbit_steps_per_s_tuned=out["tuned"]["orbit_steps_per_s"],
               orbit_steps_per_s_as_written=out["rewritten"]["orbit_steps_per_s"],
               max_pos_err_km=max(out[k]["max_pos_err_km"] for k in variants),
               diffrax_s=None, cubie_s=None)
    out["notes"].append("as_written_s: the textbook f as the framework compiles it by default "
                        "on cuda (shared reciprocals); as_written_without_rewrite_s: the same "
                        "function marked as_written")
    for peer in ("diffrax", "cubie"):
        try:
            __import__(peer)
            out["notes"].append(f"{peer}: imports but is not run by this script yet")
        except ImportError as error:
            out["notes"].append(f"{peer}: not run ({error})")
    name = "gpu_user_f" + (f"_{args.name}" if args.name else "")
    print(harness.write_result(name, out), file=sys.stderr)
    print(f"as written / tuned: {out['as_written_s'] / out['tuned_s']:.2f}x "
          f"(without the rewrite {out['as_written_without_rewrite_s'] / out['tuned_s']:.2f}x); "
          f"max position error {out['max_pos_err_km']:.2e} km")


if __name__ == "__main__":
    main()
