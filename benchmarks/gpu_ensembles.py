"""Non-orbit ensembles on one GPU: solve_ivp (cuda target) against diffrax and CuBIE, in one run.

    python benchmarks/gpu_ensembles.py [--n 1000000] [--peers ours,cubie,diffrax] [--out PATH]

The two problems of ``benchmarks/ensembles.py`` (Van der Pol with mu per
object, t in [0, 20]; Lotka-Volterra with four rates per object, t in
[0, 15]; rtol 1e-9, atol 1e-12, final state only), N objects each, on the
GPU, by three solvers, each in its own process:

* ours: ``hapsira_core.ivp.solve_ivp`` with ``HAPSIRA_TARGET=cuda``, DOP853;
* diffrax: ``jax.jit(jax.vmap(diffeqsolve))`` with ``Dopri8`` and a PID
  controller on JAX's GPU platform (float64);
* CuBIE (PyPI ``cubie``, a numba-cuda batch integrator): ``Solver`` with its
  ``dop853`` tableau, a PID controller, float64, one run per (y0, params) row
  (``grid_type="verbatim"``).

Each peer's first call at full N (compile included) is reported apart; then
the best of ``--repeat`` calls, wall clock, host arrays in and out. The final
states of the first ``--n-ref`` objects are compared with scipy's DOP853 at
rtol 1e-12, atol 1e-14. Writes JSON (default
``benchmarks/results/gpu_ensembles.json``) and prints a markdown table.
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

from ensembles import ATOL, RTOL, SPANS, problem  # noqa: E402

PEER_ENV = {
    "ours": {"HAPSIRA_TARGET": "cuda", "HAPSIRA_CACHE": "0"},
    "diffrax": {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"},
    "cubie": {"NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS": "0"},
}


def timed(call, repeat):
    """(first call's seconds, best of ``repeat`` further calls, last result)."""
    t = time.perf_counter()
    result = call()
    first = time.perf_counter() - t
    best = 1e99
    for _ in range(repeat):
        t = time.perf_counter()
        result = call()
        best = min(best, time.perf_counter() - t)
    return first, best, result


def run_ours(name, y0, params, repeat):
    from hapsira_core.ivp import solve_ivp
    from latency_models import van_der_pol
    from gpu_ensembles_models import lotka_volterra
    fun = van_der_pol if name == "van_der_pol" else lotka_volterra
    first, best, res = timed(lambda: solve_ivp(fun, SPANS[name], y0, rtol=RTOL, atol=ATOL,
                                               params=params), repeat)
    return first, best, res.y[:, :, -1], {"mean_steps": float(res.nsteps.mean()),
                                          "failed": int((res.status != 0).sum())}


def run_diffrax(name, y0, params, repeat):
    import jax
    jax.config.update("jax_enable_x64", True)
    import diffrax
    import jax.numpy as jnp

    def rhs(t, y, p):
        if name == "van_der_pol":
            return jnp.stack([y[1], p[0] * (1.0 - y[0] * y[0]) * y[1] - y[0]])
        return jnp.stack([p[0] * y[0] - p[1] * y[0] * y[1], -p[2] * y[1] + p[3] * y[0] * y[1]])

    t0, tf = SPANS[name]

    def solve(y, p):
        sol = diffrax.diffeqsolve(diffrax.ODETerm(rhs), diffrax.Dopri8(), t0, tf, None, y, args=p,
                                  stepsize_controller=diffrax.PIDController(rtol=RTOL, atol=ATOL),
                                  saveat=diffrax.SaveAt(t1=True), max_steps=100_000)
        return sol.ys[-1], sol.stats["num_accepted_steps"], sol.result._value

    program = jax.jit(jax.vmap(solve))

    def call():
        out = program(jnp.asarray(y0), jnp.asarray(params))
        jax.block_until_ready(out)
        return out

    first, best, (final, steps, result) = timed(call, repeat)
    return first, best, np.asarray(final), {
        "mean_steps": float(np.mean(steps)), "failed": int(np.sum(np.asarray(result) != 0)),
        "device": str(jax.devices()[0]), "version": diffrax.__version__}


CUBIE_EQUATIONS = {
    "van_der_pol": (["dx = v", "dv = mu * (1 - x*x) * v - x"], ("x", "v"), ("mu",)),
    "lotka_volterra": (["dx = a*x - b*x*y", "dy = -c*y + d*x*y"], ("x", "y"), ("a", "b", "c", "d")),
}


def run_cubie(name, y0, params, repeat):
    import cubie
    from cubie import Solver, create_ODE_system
    equations, states, names = CUBIE_EQUATIONS[name]
    system = create_ODE_system(equations, precision=np.float64,
                               states={s: 1.0 for s in states},
                               parameters={p: 1.0 for p in names})
    solver = Solver(system, algorithm="dop853", step_controller="pid", atol=ATOL, rtol=RTOL,
                    output_types=["state"], time_logging_level=None)
    inits = {s: np.ascontiguousarray(y0[:, i]) for i, s in enumerate(states)}
    values = {p: np.ascontiguousarray(params[:, i]) for i, p in enumerate(names)}
    t0, tf = SPANS[name]

    def call():
        return solver.solve(inits, values, duration=tf - t0, t0=t0, grid_type="verbatim")

    first, best, res = timed(call, repeat)
    legend = {v: k for k, v in res.time_domain_legend.items()}
    final = np.column_stack([res.time_domain_array[-1, legend[s], :] for s in states])
    status = np.asarray(res.status_codes)
    return first, best, final, {"failed": int(np.sum(status != 0)),
                                "version": getattr(cubie, "__version__", None)}


RUNNERS = {"ours": run_ours, "diffrax": run_diffrax, "cubie": run_cubie}


def child(peer, n, repeat, n_ref, out):
    """One peer, both problems, in this process; JSON on stdout, finals in ``out``."""
    report, finals = {}, {}
    for name in SPANS:
        y0, params = problem(name, n)
        try:
            first, best, final, extra = RUNNERS[peer](name, y0, params, repeat)
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
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--peers", default="ours,cubie,diffrax")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--n-ref", type=int, default=100)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per peer")
    parser.add_argument("--out", default=os.path.join(HERE, "results", "gpu_ensembles.json"))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--finals", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.n_ref = min(args.n_ref, args.n)
    if args.child:
        return child(args.child, args.n, args.repeat, args.n_ref, args.finals)

    record = {"n_objects": args.n, "rtol": RTOL, "atol": ATOL, "repeat": args.repeat,
              "reference": f"scipy DOP853 rtol 1e-12 atol 1e-14, first {args.n_ref} objects",
              "peers": {}}
    refs = {name: scipy_reference(name, args.n_ref, args.n) for name in SPANS}
    with tempfile.TemporaryDirectory() as scratch:
        for peer in args.peers.split(","):
            finals = os.path.join(scratch, f"{peer}.npz")
            env = dict(os.environ, **PEER_ENV[peer])
            command = [sys.executable, os.path.abspath(__file__), "--child", peer,
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
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as stream:
        json.dump(record, stream, indent=1)

    print(f"\n{args.n} objects, rtol {RTOL}, atol {ATOL}; best of {args.repeat}, "
          "first call (compile) apart")
    print("| problem | peer | seconds | us/object | first call s | steps/object | "
          "max rel. diff vs scipy | seconds / ours |")
    print("|---|---|---|---|---|---|---|---|")
    for name in SPANS:
        ours = record["peers"].get("ours", {}).get(name, {}).get("seconds")
        for peer, result in record["peers"].items():
            row = result.get(name, result)
            if "seconds" not in row:
                print(f"| {name} | {peer} | failed: {str(row.get('error'))[:120]} | | | | | |")
                continue
            ratio = f"{row['seconds'] / ours:.3g}" if ours else ""
            print(f"| {name} | {peer} | {row['seconds']:.4g} | {row['us_per_object']:.3g} | "
                  f"{row['first_call_s']:.3g} | {row.get('mean_steps', float('nan')):.0f} | "
                  f"{row.get('max_rel_diff_vs_scipy', float('nan')):.1e} | {ratio} |")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
