"""Non-orbit ensembles with per-object parameters: solve_ivp against scipy and CyRK, in one run.

    python benchmarks/ensembles.py [--n 10000] [--n-scipy 100] [--method DOP853]

Two problems, each N objects with their own parameters (params rows):
Van der Pol (mu in [0.5, 3], t in [0, 20]) and Lotka-Volterra (four rates
per object, t in [0, 15]); rtol 1e-9, atol 1e-12. Peers in the same run:
scipy's ``solve_ivp`` one object at a time (on ``--n-scipy`` objects) and
CyRK's numba solver ``nbsolve_ivp`` (PyPI ``cyrk``) in an ``njit`` loop over
the objects. Our cpu and parallel targets each run in their own process (the
target is fixed at import); compile time is excluded everywhere (each is
warmed up first) and reported apart. Also reported: the largest relative
difference of the final states from scipy's (per object, ``|dy| / |y|``). Needs the ``bench`` extra.
Writes ``benchmarks/results/ensembles.json`` and prints a markdown table.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
RTOL, ATOL = 1e-9, 1e-12
SPANS = {"van_der_pol": (0.0, 20.0), "lotka_volterra": (0.0, 15.0)}
CYRK_METHODS = {"RK23": 0, "RK45": 1, "DOP853": 2}


def problem(name, n, seed=0):
    """Initial states (N, 2) and params (N, P) of ``n`` objects."""
    rng = np.random.default_rng(seed)
    if name == "van_der_pol":
        y0 = np.column_stack([rng.uniform(0.5, 2.5, n), rng.uniform(-1.0, 1.0, n)])
        return y0, rng.uniform(0.5, 3.0, (n, 1))
    y0 = rng.uniform(1.0, 10.0, (n, 2))
    params = np.column_stack([rng.uniform(1.0, 2.0, n), rng.uniform(0.5, 1.5, n),
                              rng.uniform(2.0, 4.0, n), rng.uniform(0.5, 1.5, n)])
    return y0, params


TARGET_SCRIPT = """
import json, sys, time, numpy as np
sys.path.insert(0, {here!r})
from ensembles import problem, SPANS, RTOL, ATOL
from hapsira_core.jit import hjit
from hapsira_core.ivp import solve_ivp

@hjit
def van_der_pol(t, y, p):
    return (y[1], p[0] * (1.0 - y[0] * y[0]) * y[1] - y[0])

@hjit
def lotka_volterra(t, y, p):
    return (p[0] * y[0] - p[1] * y[0] * y[1], -p[2] * y[1] + p[3] * y[0] * y[1])

out = {{}}
for name, fun in (("van_der_pol", van_der_pol), ("lotka_volterra", lotka_volterra)):
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


def relative_difference(states, reference):
    """The largest ``|y - y_ref| / |y_ref|`` over objects (vector norms)."""
    return float(np.max(np.linalg.norm(states - reference, axis=1)
                        / np.linalg.norm(reference, axis=1)))


def run_target(target, n, method, final):
    env = dict(os.environ, HAPSIRA_TARGET=target, HAPSIRA_CACHE="0")
    script = TARGET_SCRIPT.format(here=HERE, n=n, method=method, final=final)
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_scipy(name, n, n_total, method):
    """The first ``n`` of the ``n_total`` objects, one at a time."""
    from scipy.integrate import solve_ivp

    y0, params = problem(name, n_total)
    rhs = {
        "van_der_pol": lambda t, y, p: [y[1], p[0] * (1.0 - y[0] * y[0]) * y[1] - y[0]],
        "lotka_volterra": lambda t, y, p: [p[0] * y[0] - p[1] * y[0] * y[1],
                                           -p[2] * y[1] + p[3] * y[0] * y[1]],
    }[name]
    final = np.empty((n, 2))
    t = time.perf_counter()
    for i in range(n):
        sol = solve_ivp(rhs, SPANS[name], y0[i], method=method, rtol=RTOL, atol=ATOL,
                        args=(params[i],))
        final[i] = sol.y[:, -1]
    return time.perf_counter() - t, final


def run_cyrk(name, n, method):
    import numba
    from CyRK import nbsolve_ivp

    @numba.njit
    def van_der_pol(t, y, mu):
        return np.array([y[1], mu * (1.0 - y[0] * y[0]) * y[1] - y[0]])

    @numba.njit
    def lotka_volterra(t, y, a, b, c, d):
        return np.array([a * y[0] - b * y[0] * y[1], -c * y[1] + d * y[0] * y[1]])

    rk = CYRK_METHODS[method]
    t0, tf = SPANS[name]
    if name == "van_der_pol":
        @numba.njit
        def ensemble(y0, params, out):
            for i in range(y0.shape[0]):
                result = nbsolve_ivp(van_der_pol, (t0, tf), y0[i], (params[i, 0],),
                                     rtol=RTOL, atol=ATOL, rk_method=rk, warnings=False)
                out[i] = result[6][:, -1]  # CyRK 0.20: (success, message, 4 counts, y, t)
    else:
        @numba.njit
        def ensemble(y0, params, out):
            for i in range(y0.shape[0]):
                p = params[i]
                result = nbsolve_ivp(lotka_volterra, (t0, tf), y0[i],
                                     (p[0], p[1], p[2], p[3]), rtol=RTOL, atol=ATOL,
                                     rk_method=rk, warnings=False)
                out[i] = result[6][:, -1]
    y0, params = problem(name, n)
    out = np.empty((n, 2))
    t = time.perf_counter()
    ensemble(y0[:2], params[:2], out[:2])
    compile_s = time.perf_counter() - t
    best = 1e99
    for _ in range(3):
        t = time.perf_counter()
        ensemble(y0, params, out)
        best = min(best, time.perf_counter() - t)
    return best, compile_s, out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--n-scipy", type=int, default=100)
    parser.add_argument("--method", default="DOP853", choices=sorted(CYRK_METHODS))
    parser.add_argument("--out", default=os.path.join(HERE, "results", "ensembles.json"))
    args = parser.parse_args()
    prefix = os.path.join(HERE, "results", "_ensembles_final_")
    ours = {}
    for target in ("cpu", "parallel"):
        ours[target] = run_target(target, args.n, args.method, f"{prefix}{target}_")
    rows = {}
    for name in SPANS:
        scipy_s, scipy_final = run_scipy(name, args.n_scipy, args.n, args.method)
        cyrk_s, cyrk_compile, cyrk_final = run_cyrk(name, args.n, args.method)
        scipy_us = scipy_s / args.n_scipy * 1e6
        row = {"scipy_us_per_object": scipy_us, "cyrk_us_per_object": cyrk_s / args.n * 1e6,
               "cyrk_compile_s": cyrk_compile,
               "cyrk_max_rel_diff": relative_difference(cyrk_final[:args.n_scipy], scipy_final)}
        for target in ("cpu", "parallel"):
            final = np.load(f"{prefix}{target}_{name}.npy")
            os.remove(f"{prefix}{target}_{name}.npy")
            result = ours[target][name]
            us = result["seconds"] / args.n * 1e6
            row[target] = dict(result, us_per_object=us, vs_scipy=scipy_us / us,
                               vs_cyrk=row["cyrk_us_per_object"] / us,
                               max_rel_diff=relative_difference(final[:args.n_scipy],
                                                                scipy_final))
        rows[name] = row
    record = {"machine": {"platform": platform.platform(), "processor": platform.processor(),
                          "cpus": os.cpu_count(), "python": platform.python_version()},
              "n_objects": args.n, "n_scipy": args.n_scipy, "method": args.method,
              "rtol": RTOL, "atol": ATOL, "problems": rows}
    with open(args.out, "w") as out:
        json.dump(record, out, indent=1)
    print(f"| problem | scipy us/obj | CyRK us/obj | cpu us/obj (x scipy, x CyRK) | "
          f"parallel us/obj (x scipy, x CyRK) | max rel. diff vs scipy |")
    print("|---|---|---|---|---|---|")
    for name, row in rows.items():
        cells = [f"{row[t]['us_per_object']:.1f} ({row[t]['vs_scipy']:.0f}x, "
                 f"{row[t]['vs_cyrk']:.1f}x)" for t in ("cpu", "parallel")]
        print(f"| {name} | {row['scipy_us_per_object']:.0f} | {row['cyrk_us_per_object']:.1f} | "
              f"{cells[0]} | {cells[1]} | {row['cpu']['max_rel_diff']:.1e} |")


if __name__ == "__main__":
    main()
