"""Non-orbit ensembles with per-object parameters: solve_ivp against its peers, on the host or one GPU.

    python benchmarks/ensembles.py [--platform host] [--n 10000] [--n-scipy 100] [--method DOP853]
    python benchmarks/ensembles.py --platform cuda [--n 1000000] [--peers ours,cubie,diffrax]

Two problems (workloads.py), each N objects with their own parameters
(params rows): Van der Pol (mu in [0.5, 3], t in [0, 20]) and Lotka-Volterra
(four rates per object, t in [0, 15]); rtol 1e-9, atol 1e-12, final state only.

``--platform host`` (default): our cpu and parallel targets, each per object
(``HAPSIRA_LANES=off``) and in SIMD lanes (``on``), each in its own
process (the target is fixed at import), against scipy's ``solve_ivp`` one
object at a time (on ``--n-scipy`` objects) and CyRK's numba solver
``nbsolve_ivp`` (PyPI ``cyrk``) in an ``njit`` loop over the objects; compile
time is excluded everywhere (each is warmed up first) and reported apart; the
largest relative difference of the final states from scipy's (per object,
``|dy| / |y|``). Writes ``benchmarks/results/ensembles.json``.

``--platform cuda``: on the GPU, three solvers, each in its own process:
ours (``solve_ivp`` with ``HAPSIRA_TARGET=cuda``, DOP853), diffrax
(``jax.jit(jax.vmap(diffeqsolve))``, ``Dopri8``, PID controller, float64, on
JAX's GPU) and CuBIE (PyPI ``cubie``, ``dop853``, PID, float64, one run per
row, ``grid_type="verbatim"``). Each one's first call at full N (compile
included) is reported apart; then the best of ``--repeat`` calls, wall clock,
host arrays in and out. The final states of the first ``--n-ref`` objects are
compared with scipy's DOP853 at rtol 1e-12, atol 1e-14. Writes
``benchmarks/results/gpu_ensembles.json``.

``--out`` names another result file; peers need the ``bench`` extra
(CuBIE: ``bench-gpu``); a missing one is reported and skipped. Prints a
markdown table.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
if "--child" not in sys.argv:  # this process only orchestrates: it needs no GPU
    os.environ["HAPSIRA_TARGET"] = "cpu"

import harness  # noqa: E402
import peers  # noqa: E402
from workloads import ENSEMBLE_ATOL as ATOL  # noqa: E402
from workloads import ENSEMBLE_RTOL as RTOL  # noqa: E402
from workloads import SPANS, problem  # noqa: E402

CYRK_METHODS = peers.CYRK_METHODS

# --- host: our cpu and parallel targets against scipy and CyRK ---

TARGET_SCRIPT = """
import json, sys, time, numpy as np
sys.path.insert(0, {here!r})
from workloads import ENSEMBLES, problem, SPANS, ENSEMBLE_RTOL as RTOL, ENSEMBLE_ATOL as ATOL
from hapsira_core.ivp import solve_ivp

out = {{}}
for name, fun in ENSEMBLES.items():
    y0, params = problem(name, {n})
    t = time.perf_counter()
    solve_ivp(fun, SPANS[name], y0[:2], method={method!r}, rtol=RTOL, atol=ATOL, params=params[:2])
    compile_s = time.perf_counter() - t
    best = 1e99
    for _ in range(3):
        t = time.perf_counter()
        res = solve_ivp(fun, SPANS[name], y0, method={method!r}, rtol=RTOL, atol=ATOL, params=params)
        best = min(best, time.perf_counter() - t)
    np.save({final!r} + name + ".npy", res.y[:, :, -1])
    out[name] = {{"seconds": best, "compile_s": compile_s, "mean_steps": float(res.nsteps.mean()),
                  "failed": int((res.status != 0).sum())}}
print(json.dumps(out))
"""

relative_difference = harness.relative_difference


#: our host runs: (name, target, HAPSIRA_LANES): per object and in SIMD lanes
VARIANTS = (("cpu", "cpu", "off"), ("cpu_lanes", "cpu", "on"),
            ("parallel", "parallel", "off"), ("parallel_lanes", "parallel", "on"))


def run_target(target, n, method, final, lanes="on"):
    script = TARGET_SCRIPT.format(here=HERE, n=n, method=method, final=final)
    result = harness.run_child(script, env=harness.child_env(target, HAPSIRA_LANES=lanes))
    result.pop("process_s", None)
    return result


def host_main(args):
    prefix = os.path.join(HERE, "results", "_ensembles_final_")
    ours = {}
    variants = [v for v in VARIANTS if v[0] in args.variants.split(",")]
    for variant, target, lanes in variants:
        ours[variant] = run_target(target, args.n, args.method, f"{prefix}{variant}_", lanes)
    rows = {}
    for name in SPANS:
        scipy_s, scipy_final = peers.ensemble_scipy(name, args.n_scipy, args.n, args.method)
        scipy_us = scipy_s / args.n_scipy * 1e6
        row = {"scipy_us_per_object": scipy_us}
        try:
            cyrk_compile, cyrk_s, cyrk_final, _ = peers.ensemble_cyrk(name, args.n, args.method)
            row.update(cyrk_us_per_object=cyrk_s / args.n * 1e6, cyrk_compile_s=cyrk_compile,
                       cyrk_max_rel_diff=relative_difference(cyrk_final[:args.n_scipy],
                                                             scipy_final))
        except peers.Missing as error:
            row["cyrk_missing"] = str(error)
            print(f"CyRK not run: {error}", flush=True)
        for target, _, _ in variants:
            final = np.load(f"{prefix}{target}_{name}.npy")
            os.remove(f"{prefix}{target}_{name}.npy")
            result = ours[target][name]
            us = result["seconds"] / args.n * 1e6
            row[target] = dict(result, us_per_object=us, vs_scipy=scipy_us / us,
                               max_rel_diff=relative_difference(final[:args.n_scipy],
                                                                scipy_final))
            if "cyrk_us_per_object" in row:
                row[target]["vs_cyrk"] = row["cyrk_us_per_object"] / us
        rows[name] = row
    from hapsira_core.targets import _host
    record = {"lanes": {"auto_width": _host.AUTO_LANES_PER_VECTOR * _host.vector_doubles(),
                        "cpu": _host.cpu_features()[0]}, "n_objects": args.n, "n_scipy": args.n_scipy, "method": args.method,
              "rtol": RTOL, "atol": ATOL, "problems": rows}
    harness.write_result(args.out or "ensembles", record)
    print("| problem | scipy us/obj | CyRK us/obj | cpu us/obj (x scipy, x CyRK) | "
          "cpu lanes | parallel | parallel lanes | max rel. diff vs scipy |")
    print("|---|---|---|---|---|---|---|---|")
    for name, row in rows.items():
        cells = [f"{row[t]['us_per_object']:.1f} ({row[t]['vs_scipy']:.0f}x, "
                 f"{row[t].get('vs_cyrk', float('nan')):.1f}x)" if t in row else "not run"
                 for t, _, _ in VARIANTS]
        print(f"| {name} | {row['scipy_us_per_object']:.0f} | "
              f"{row.get('cyrk_us_per_object', float('nan')):.1f} | "
              f"{' | '.join(cells)} | {row[variants[0][0]]['max_rel_diff']:.1e} |")


# --- cuda: ours against diffrax and CuBIE on one GPU ---

PEER_ENV = {
    "ours": {"HAPSIRA_TARGET": "cuda", "HAPSIRA_CACHE": "0"},
    "diffrax": {"XLA_PYTHON_CLIENT_PREALLOCATE": "false", "HAPSIRA_TARGET": "cpu"},
    "cubie": {"NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS": "0", "HAPSIRA_TARGET": "cpu"},
}


def run_ours(name, y0, params, repeat):
    from hapsira_core.ivp import solve_ivp
    from workloads import ENSEMBLES
    fun = ENSEMBLES[name]
    first, best, res = harness.first_and_best(
        lambda: solve_ivp(fun, SPANS[name], y0, rtol=RTOL, atol=ATOL, params=params), repeat)
    return first, best, res.y[:, :, -1], {"mean_steps": float(res.nsteps.mean()),
                                          "failed": int((res.status != 0).sum())}


RUNNERS = {"ours": run_ours, "diffrax": peers.ensemble_diffrax, "cubie": peers.ensemble_cubie}

def child(peer, n, repeat, n_ref, out):
    """One peer, both problems, in this process; JSON on stdout, finals in ``out``."""
    report, finals = {}, {}
    for name in SPANS:
        y0, params = problem(name, n)
        try:
            first, best, final, extra = RUNNERS[peer](name, y0, params, repeat)
        except peers.Missing as error:
            report[name] = {"seconds": None, "missing": str(error)}
            continue
        except Exception as error:  # a peer that fails is reported, the others still run
            report[name] = {"error": f"{type(error).__name__}: {error}"[:2000]}
            continue
        finals[name] = final[:n_ref]
        report[name] = dict(extra, first_call_s=first, seconds=best,
                            us_per_object=1e6 * best / n)
        print(peer, name, json.dumps(report[name]), file=sys.stderr, flush=True)
    np.savez(out, **finals)
    print(json.dumps(report))


def scipy_reference(name, n_ref, n):
    from scipy.integrate import solve_ivp
    y0, params = problem(name, n)
    out = np.empty((n_ref, 2))
    for i in range(n_ref):
        p = params[i]
        if name == "van_der_pol":
            def rhs(t, y):
                return [y[1], p[0] * (1.0 - y[0] * y[0]) * y[1] - y[0]]
        else:
            def rhs(t, y):
                return [p[0] * y[0] - p[1] * y[0] * y[1], -p[2] * y[1] + p[3] * y[0] * y[1]]
        out[i] = solve_ivp(rhs, SPANS[name], y0[i], method="DOP853", rtol=1e-12,
                           atol=1e-14).y[:, -1]
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--platform", default="host", choices=("host", "cuda"),
                        help="host: cpu and parallel targets vs scipy and CyRK; "
                             "cuda: one GPU, vs diffrax and CuBIE")
    parser.add_argument("--n", type=int, default=None,
                        help="objects (default 10000 on the host, 1000000 on cuda)")
    parser.add_argument("--n-scipy", type=int, default=100, help="host: objects scipy runs")
    parser.add_argument("--variants", default=",".join(v[0] for v in VARIANTS),
                        help="host: our runs, of " + ",".join(v[0] for v in VARIANTS)
                             + " (the lanes' first compile is long)")
    parser.add_argument("--method", default="DOP853", choices=sorted(CYRK_METHODS),
                        help="host: the method of every solver")
    parser.add_argument("--peers", default="ours,cubie,diffrax", help="cuda: who runs")
    parser.add_argument("--repeat", type=int, default=3, help="cuda: timed calls (best)")
    parser.add_argument("--n-ref", type=int, default=100, help="cuda: objects checked vs scipy")
    parser.add_argument("--timeout", type=float, default=300.0, help="cuda: seconds per peer")
    parser.add_argument("--out", default=None,
                        help="result name or path (default ensembles / gpu_ensembles)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--finals", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.platform == "host":
        args.n = args.n or 10_000
        return host_main(args)
    args.n = args.n or 1_000_000
    args.n_ref = min(args.n_ref, args.n)
    if args.child:
        return child(args.child, args.n, args.repeat, args.n_ref, args.finals)
    refs = {name: scipy_reference(name, args.n_ref, args.n) for name in SPANS}
    from hapsira_core.targets import _host
    record = {"lanes": {"auto_width": _host.AUTO_LANES_PER_VECTOR * _host.vector_doubles(),
                        "cpu": _host.cpu_features()[0]}, "n_objects": args.n, "rtol": RTOL, "atol": ATOL, "repeat": args.repeat,
              "reference": f"scipy DOP853 rtol 1e-12 atol 1e-14, first {args.n_ref} objects",
              "peers": {}}
    with tempfile.TemporaryDirectory() as scratch:
        for peer in args.peers.split(","):
            finals = os.path.join(scratch, f"{peer}.npz")
            env = dict(os.environ, **PEER_ENV[peer])
            command = [sys.executable, os.path.abspath(__file__), "--platform", "cuda", "--child", peer,
                       "--n", str(args.n), "--repeat", str(args.repeat),
                       "--n-ref", str(args.n_ref), "--finals", finals]
            start = time.perf_counter()
            try:
                done = subprocess.run(command, env=env, capture_output=True, text=True,
                                      timeout=args.timeout)
                ok = done.returncode == 0
                result = json.loads(done.stdout.strip().splitlines()[-1]) if ok else {
                    "error": done.stderr.strip()[-2000:]}
            except subprocess.TimeoutExpired:
                ok, result = False, {"error": f"timed out after {args.timeout:.0f} s"}
            result["process_s"] = time.perf_counter() - start
            if ok and os.path.exists(finals):
                with np.load(finals) as saved:
                    for name in saved.files:
                        diff = (np.linalg.norm(saved[name] - refs[name], axis=1)
                                / np.linalg.norm(refs[name], axis=1))
                        result[name]["max_rel_diff_vs_scipy"] = float(diff.max())
            record["peers"][peer] = result
            print(peer, json.dumps(result), flush=True)
    harness.write_result(args.out or "gpu_ensembles", record)

    print(f"\n{args.n} objects, rtol {RTOL}, atol {ATOL}; best of {args.repeat}, "
          "first call (compile) apart")
    print("| problem | peer | seconds | us/object | first call s | steps/object | "
          "max rel. diff vs scipy | seconds / ours |")
    print("|---|---|---|---|---|---|---|---|")
    for name in SPANS:
        ours = record["peers"].get("ours", {}).get(name, {}).get("seconds")
        for peer, result in record["peers"].items():
            row = result.get(name, result)
            if row.get("seconds") is None:
                print(f"| {name} | {peer} | not run: "
                      f"{str(row.get('error') or row.get('missing'))[:120]} | | | | | |")
                continue
            ratio = f"{row['seconds'] / ours:.3g}" if ours else ""
            print(f"| {name} | {peer} | {row['seconds']:.4g} | {row['us_per_object']:.3g} | "
                  f"{row['first_call_s']:.3g} | {row.get('mean_steps', float('nan')):.0f} | "
                  f"{row.get('max_rel_diff_vs_scipy', float('nan')):.1e} | {ratio} |")



if __name__ == "__main__":
    main()
