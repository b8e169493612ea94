"""The cost of ``stm=True`` over a plain run, per object-day, beside heyoka's variational equations.

    python benchmarks/stm_cost.py [--targets cpu,parallel,cuda] [--objects 256]
                                  [--cuda-objects 1000000] [--heyoka-objects 32]

Reference workload (``workloads.leo_cloud``: two-body + J2, one day, rtol 1e-11, atol
1e-12). For each target, in its own process with the kernel cache off (``cuda`` only
where a GPU is present): ``cowell(..., stm=False)`` and ``stm=True`` on the same objects,
each the best of three calls after a first call that compiles; the ratio of the two and
microseconds per object-day. Our error control is on the state alone (the states and
steps are those of the plain call), so the ratio is the price of the 36 variational
equations and the automatic Jacobian on the same steps.

heyoka (``taylor_adaptive``, one object at a time, tolerance 1e-11): the plain system and
its first-order variational system (``var_ode_sys`` with respect to the initial state),
the same objects; heyoka's Taylor steps are its own. Its Phi at one day is compared with
ours, object by object: the largest ``|Phi - Phi_heyoka|`` over the largest ``|Phi_heyoka|``
entry. Where heyoka is not installed (a GPU host without it), the first target's Phi is
the reference instead (run ``cpu`` first) and the row says so. ``cuda`` runs
``--cuda-objects`` objects (a GPU needs many to fill it); the others ``--objects``.
Writes ``benchmarks/results/stm_cost_<host>.json`` (``--out``) and prints a table.
"""

import argparse
import os
import socket
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import harness
import workloads as workload

SEED = 2

CHILD = '''
import json, sys, time
import numpy as np
sys.path.insert(0, {here!r})
import workloads as workload
from hapsira_cowell import cowell

r0, v0 = workload.leo_cloud({n}, seed={seed})
tofs = np.array([workload.DAY])
out = {{}}
for stm in (False, True):
    def call():
        return cowell(workload.K, r0, v0, tofs, workload.RTOL, workload.ATOL,
                      f=workload.two_body_j2, stm=stm)
    start = time.perf_counter()
    res = call()
    first = time.perf_counter() - start
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        res = call()
        best = min(best, time.perf_counter() - start)
    key = "stm" if stm else "plain"
    out[key] = {{"first_s": first, "best_s": best, "steps": int(res.nsteps.sum()),
                 "ok": int((res.status == 0).sum())}}
    if stm:
        out["phi"] = res.stm[:{compare}, -1].tolist()
        out["state"] = np.concatenate([res.rr[:{compare}, -1], res.vv[:{compare}, -1]],
                                      axis=-1).tolist()
print(json.dumps(out))
'''


def hapsira(target, n, compare):
    script = CHILD.format(here=HERE, n=n, seed=SEED, compare=compare)
    return harness.run_child(script, env=harness.child_env(target), check=False)


def heyoka(n):
    """heyoka's plain and variational runs over the first ``n`` objects, one at a time."""
    import heyoka as hy
    from peers import heyoka_system

    r0, v0 = workload.leo_cloud(n, seed=SEED)
    system = heyoka_system(hy)
    out = {}
    start = time.perf_counter()
    plain = hy.taylor_adaptive(system, list(r0[0]) + list(v0[0]), tol=workload.RTOL)
    variational = hy.taylor_adaptive(hy.var_ode_sys(system, hy.var_args.vars, 1),
                                     list(r0[0]) + list(v0[0]), tol=workload.RTOL)
    out["compile_s"] = time.perf_counter() - start
    phis, states = [], []
    for name, ta in (("plain", plain), ("stm", variational)):
        start = time.perf_counter()
        for i in range(n):
            ta.time = 0.0
            ta.state[:6] = np.concatenate([r0[i], v0[i]])
            if name == "stm":
                ta.state[6:] = np.eye(6).ravel()  # d x_i / d x0_j, row by row
            outcome = ta.propagate_until(workload.DAY)
            assert outcome[0] == hy.taylor_outcome.time_limit, outcome
            if name == "stm":
                phis.append(ta.state[6:].reshape(6, 6).copy())
                states.append(ta.state[:6].copy())
        out[name] = {"best_s": time.perf_counter() - start}
    out["phi"], out["state"] = np.array(phis), np.array(states)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", default="cpu,parallel")
    parser.add_argument("--objects", type=int, default=256)
    parser.add_argument("--cuda-objects", type=int, default=1_000_000)
    parser.add_argument("--heyoka-objects", type=int, default=32)
    parser.add_argument("--out", default=f"stm_cost_{socket.gethostname()}")
    args = parser.parse_args()
    compare = min(args.objects, args.cuda_objects, args.heyoka_objects)
    rows = {}
    try:
        reference = heyoka(compare)
    except ImportError as error:
        reference = None
        rows["heyoka"] = {"skipped": f"not installed ({error})"}
    else:
        per_day = 1e6 / compare
        rows["heyoka"] = {"objects": compare, "compile_s": reference["compile_s"],
                          "plain_us_per_object_day": reference["plain"]["best_s"] * per_day,
                          "stm_us_per_object_day": reference["stm"]["best_s"] * per_day,
                          "ratio": reference["stm"]["best_s"] / reference["plain"]["best_s"]}
    reference_name = "heyoka"
    for target in args.targets.split(","):
        if target == "cuda" and not harness.gpus() and not harness.simulated():
            rows[target] = {"skipped": "no GPU on this machine"}
            continue
        objects = args.cuda_objects if target == "cuda" else args.objects
        result = hapsira(target, objects, compare)
        if "error" in result:
            rows[target] = result
            continue
        phi = np.array(result.pop("phi"))
        state = np.array(result.pop("state"))
        if reference is None:  # no heyoka: the first target that ran is the reference
            reference, reference_name = {"phi": phi, "state": state}, target
        scale = np.abs(reference["phi"]).max(axis=(1, 2))
        per_day = 1e6 / objects
        rows[target] = {
            "objects": objects,
            "plain_us_per_object_day": result["plain"]["best_s"] * per_day,
            "stm_us_per_object_day": result["stm"]["best_s"] * per_day,
            "ratio": result["stm"]["best_s"] / result["plain"]["best_s"],
            "first_call_s": {"plain": result["plain"]["first_s"],
                             "stm": result["stm"]["first_s"]},
            "steps_identical": result["plain"]["steps"] == result["stm"]["steps"],
            "all_ok": result["stm"]["ok"] == objects,
            "phi_reference": reference_name,
            "phi_vs_reference_max": float((np.abs(phi - reference["phi"]).max(axis=(1, 2))
                                           / scale).max()),
            "position_vs_reference_km_max": float(np.linalg.norm(
                state[:, :3] - reference["state"][:, :3], axis=1).max()),
        }
    print(f"{'':10} {'objects':>8} {'plain us/obj-day':>17} {'stm us/obj-day':>15} "
          f"{'ratio':>6} {'Phi vs ref.':>14}")
    for name, row in rows.items():
        if "ratio" not in row:
            print(f"{name:10} {row}")
            continue
        diff = row.get("phi_vs_reference_max")
        print(f"{name:10} {row['objects']:8d} {row['plain_us_per_object_day']:17.1f} "
              f"{row['stm_us_per_object_day']:15.1f} {row['ratio']:6.2f} "
              f"{'' if diff is None else f'{diff:14.2e}'}")
    payload = {"benchmark": "stm_cost",
               "workload": {"model": "two-body + J2", "span_s": workload.DAY,
                            "rtol": workload.RTOL, "atol": workload.ATOL, "seed": SEED},
               "rows": rows}
    harness.write_result(args.out, payload)
    return 0


if __name__ == "__main__":
    sys.exit(main())
