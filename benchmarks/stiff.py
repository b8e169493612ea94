"""Stiff ensembles with per-object parameters: BDF, Rodas5P (Radau when present) beside scipy.

    python benchmarks/stiff.py [--platform host] [--n 10000] [--n-scipy 50]
                               [--methods BDF,Rodas5P] [--scipy-methods BDF,Radau]
    python benchmarks/stiff.py --platform cuda [--n 1000000] [--peers ours,diffrax,cubie]

Two stiff problems by default (workloads.py, ``stiff_problem``), N objects each, every
parameter drawn within +-20 % of its nominal value: Robertson's kinetics (rate
constants k1, k2, k3 around 0.04, 1e4, 3e7; y0 = (1, 0, 0); t in [0, 1e3];
rtol 1e-6, atol 1e-10) and Van der Pol (mu around 1000; y0 = (2, 0); t in
[0, 2000], one period and its two fast jumps; rtol 1e-6, atol 1e-8); a third on
``--problems``: HIRES (its eight rate constants; y0 and t in [0, 321.8122] of the
test set; rtol 1e-6, atol 1e-9). Final state only.

``--platform host`` (default): our cpu target on one core (``NUMBA_NUM_THREADS=1``)
and our parallel target on every core, each in its own process (the target is
fixed at import), every method of ``--methods`` (a method this checkout lacks,
e.g. Radau before its branch is merged, is reported and skipped); compile time
apart (a call on two objects first), then the best of ``--repeat`` calls at N.
scipy's ``solve_ivp`` (``--scipy-methods``, handed the exact Jacobian: its
strongest setting) runs one object at a time on the first ``--n-scipy``
objects, one pass, and its time is scaled per object. Agreement: the largest
``|y - y_ref| / |y_ref|`` of the final states over those objects, y_ref from
scipy Radau at rtol 1e-10 (atol 1e-16 Robertson, 1e-12 Van der Pol). Speed-up:
scipy's us/object over ours, against each scipy method. Writes
``benchmarks/results/stiff.json`` (``--out``) and prints markdown tables.

``--platform cuda``: one GPU, each peer in its own process: ours
(``HAPSIRA_TARGET=cuda``, every method of ``--methods``), diffrax ``Kvaerno5``
(``jax.jit(jax.vmap(diffeqsolve))``, PID controller, float64) and CuBIE
(``--cubie-algorithm``, default its Radau IIA 5 tableau ``"radau"``); compile apart
(ours: a call on two objects; the peers: their first call at N), then the best of
``--repeat``; agreement against the scipy
reference on the first ``--n-ref`` objects. A peer that is not installed is
reported as "not installed" and the others run. Writes
``benchmarks/results/gpu_stiff.json`` (``--out``).
"""

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness

if "--child" in sys.argv:  # the target is fixed when hapsira is imported (by workloads)
    harness.platform_from_argv("cpu")
else:  # the orchestrating process runs scipy only: hapsira's cpu target will do
    os.environ["HAPSIRA_TARGET"] = "cpu"
import peers
import workloads
from workloads import STIFF, STIFF_REF_TOL, STIFF_SPANS, STIFF_TOL

#: the problems run by default; HIRES (STIFF's third) on --problems
PROBLEMS = ("robertson", "van_der_pol_stiff")
LABELS = {"robertson": "Robertson", "van_der_pol_stiff": "Van der Pol (mu 1000)",
          "hires": "HIRES"}
MAX_STEPS = 100_000
# the peers' install hints (the bench extras of pyproject.toml)
INSTALL = {"diffrax": "pip install jax diffrax (jax[cuda12] on a GPU), or pip install -e .[bench]",
           "cubie": "pip install cubie, or pip install -e .[bench-gpu]"}


# --- scipy, one object at a time ---

def scipy_sample(name, method, n, rtol=None, atol=None):
    """(wall and process CPU seconds for the n objects, one pass; mean accepted steps; final
    states (n, dim); failures) of scipy's solve_ivp, given the exact Jacobian."""
    from scipy.integrate import solve_ivp
    y0, params = workloads.stiff_problem(name, n)
    default_rtol, default_atol = STIFF_TOL[name]
    rtol, atol = rtol or default_rtol, atol or default_atol
    final, steps, failed = np.empty_like(y0), [], 0
    start, start_cpu = time.perf_counter(), time.process_time()
    for i in range(n):
        rhs, jac = workloads.stiff_scipy(name, params[i])
        sol = solve_ivp(rhs, STIFF_SPANS[name], y0[i], method=method, rtol=rtol, atol=atol,
                        jac=jac)
        final[i] = sol.y[:, -1]
        steps.append(len(sol.t) - 1)
        failed += sol.status != 0
    wall, cpu = time.perf_counter() - start, time.process_time() - start_cpu
    return wall, cpu, float(np.mean(steps)), final, int(failed)


def reference(name, n):
    """scipy Radau at the reference tolerances on the first n objects: (final states, seconds)."""
    rtol, atol = STIFF_REF_TOL[name]
    seconds, _, _, final, failed = scipy_sample(name, "Radau", n, rtol, atol)
    if failed:
        raise RuntimeError(f"the scipy reference failed on {failed} {name} objects")
    return final, seconds


# --- ours, in a child process per target ---

def tolerances(name, scale=1.0):
    """(rtol, atol) of problem ``name``, both multiplied by ``scale`` (a work-precision sweep)."""
    rtol, atol = STIFF_TOL[name]
    return float(f"{rtol * scale:.12g}"), float(f"{atol * scale:.12g}")


def run_ours(name, method, n, repeat, n_keep, scale=1.0):
    """Our solve_ivp at N objects on this process's target: a compile call on two objects,
    then the best of ``repeat`` calls (wall clock, host arrays in and out); tolerances
    ``tolerances(name, scale)``."""
    from hapsira_core.ivp import METHODS, solve_ivp
    if method not in METHODS:
        return {"missing": f"method {method!r} is not in this checkout's METHODS "
                           f"({', '.join(METHODS)})"}, None
    y0, params = workloads.stiff_problem(name, n)
    rtol, atol = tolerances(name, scale)

    def call(m):
        return solve_ivp(STIFF[name], STIFF_SPANS[name], y0[:m], method=method, rtol=rtol,
                         atol=atol, params=params[:m], max_steps=MAX_STEPS)
    start = time.perf_counter()
    call(2)
    compile_s = time.perf_counter() - start
    # wall clock and process CPU time of the same calls: on a shared machine the CPU time of
    # the one-thread cpu target is the steadier measure (for parallel it sums the threads)
    best, times, cpu_times, res = 1e99, [], [], None
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        res = call(n)
        times.append(time.perf_counter() - start)
        cpu_times.append(time.process_time() - start_cpu)
    best = min(times)
    return {"seconds": best, "samples": times, "cpu_samples": cpu_times, "compile_s": compile_s,
            "us_per_object": 1e6 * best / n, "cpu_us_per_object": 1e6 * min(cpu_times) / n, "mean_steps": float(res.nsteps.mean()),
            "mean_njev": float(res.njev.mean()), "mean_nlu": float(res.nlu.mean()),
            "mean_nfev": float(res.nfev.mean()),
            "failed": int((res.status < 0).sum()), "rtol": rtol, "atol": atol,
            # steps on scipy's sample too: the same objects as scipy's mean_steps
            "mean_steps_sample": float(res.nsteps[:n_keep].mean()) if n_keep else None,
            }, res.y[:n_keep, :, -1]


def run_diffrax(name, n, repeat, n_keep, scale=1.0):
    """diffrax Kvaerno5 (an ESDIRK of order 5 with its own Newton solver), PID controller,
    float64, ``jax.jit(jax.vmap(diffeqsolve))`` on JAX's default device."""
    jax = peers.need("jax")
    jax.config.update("jax_enable_x64", True)
    diffrax = peers.need("diffrax")
    import jax.numpy as jnp
    y0, params = workloads.stiff_problem(name, n)
    rtol, atol = tolerances(name, scale)
    t0, tf = STIFF_SPANS[name]
    term = diffrax.ODETerm(workloads.stiff_jax_rhs(name))

    def solve(y, p):
        sol = diffrax.diffeqsolve(term, diffrax.Kvaerno5(), t0, tf, None, y, args=p,
                                  stepsize_controller=diffrax.PIDController(rtol=rtol, atol=atol),
                                  saveat=diffrax.SaveAt(t1=True), max_steps=MAX_STEPS)
        return sol.ys[-1], sol.stats["num_accepted_steps"], sol.result._value

    program = jax.jit(jax.vmap(solve))

    def call():
        out = program(jnp.asarray(y0), jnp.asarray(params))
        jax.block_until_ready(out)
        return out
    first, best, (final, steps, result) = harness.first_and_best(call, repeat)
    return {"first_call_s": first, "seconds": best, "us_per_object": 1e6 * best / n,
            "mean_steps": float(np.mean(steps)),
            "failed": int(np.sum(np.asarray(result) != 0)), "device": str(jax.devices()[0]),
            "version": diffrax.__version__, "rtol": rtol, "atol": atol}, np.asarray(final)[:n_keep]


CUBIE_EQUATIONS = {
    "robertson": (["dy1 = -k1*y1 + k2*y2*y3", "dy2 = k1*y1 - k2*y2*y3 - k3*y2*y2",
                   "dy3 = k3*y2*y2"], ("y1", "y2", "y3"), ("k1", "k2", "k3")),
    "van_der_pol_stiff": (["dx = v", "dv = mu * (1 - x*x) * v - x"], ("x", "v"), ("mu",)),
    "hires": (["dy1 = -k1*y1 + k2*y2 + k3*y3 + k4",
               "dy2 = k1*y1 - (k3 + k2)*y2",
               "dy3 = -(k3 + k1)*y3 + k2*y4 + k5*y5",
               "dy4 = k3*y2 + k1*y3 - (k2 + k7)*y4",
               "dy5 = -(k1 + k5)*y5 + k2*y6 + k2*y7",
               "dy6 = -k6*y6*y8 + k7*y4 + k1*y5 - k2*y6 + k7*y7",
               "dy7 = k6*y6*y8 - k8*y7",
               "dy8 = -k6*y6*y8 + k8*y7"],
              tuple(f"y{i}" for i in range(1, 9)), tuple(f"k{i}" for i in range(1, 9))),
}


def run_cubie(name, n, repeat, n_keep, algorithm, scale=1.0):
    """CuBIE (PyPI ``cubie``): ``Solver`` with ``algorithm``, a PID controller, float64, one run
    per (y0, params) row (``grid_type="verbatim"``), as peers.ensemble_cubie."""
    cubie = peers.need("cubie", "cubie (the bench-gpu extra)")
    equations, states, names = CUBIE_EQUATIONS[name]
    y0, params = workloads.stiff_problem(name, n)
    rtol, atol = tolerances(name, scale)
    t0, tf = STIFF_SPANS[name]
    system = cubie.create_ODE_system(equations, precision=np.float64,
                                     states={s: 1.0 for s in states},
                                     parameters={p: 1.0 for p in names})
    solver = cubie.Solver(system, algorithm=algorithm, step_controller="pid", atol=atol,
                          rtol=rtol, output_types=["state"], time_logging_level=None)
    inits = {s: np.ascontiguousarray(y0[:, i]) for i, s in enumerate(states)}
    values = {p: np.ascontiguousarray(params[:, i]) for i, p in enumerate(names)}

    def call():
        return solver.solve(inits, values, duration=tf - t0, t0=t0, grid_type="verbatim")
    first, best, res = harness.first_and_best(call, repeat)
    legend = {v: k for k, v in res.time_domain_legend.items()}
    final = np.column_stack([res.time_domain_array[-1, legend[s], :] for s in states])
    status = np.asarray(res.status_codes)
    return {"first_call_s": first, "seconds": best, "us_per_object": 1e6 * best / n,
            "algorithm": algorithm, "failed": int(np.sum(status != 0)),
            "version": getattr(cubie, "__version__", None), "rtol": rtol, "atol": atol,
            }, final[:n_keep]


def child(args):
    """One peer (ours: every method) on every problem in this process: JSON on stdout,
    the first ``--n-keep`` final states in ``--finals`` (npz). With ``--tol-scales``, each
    (problem, method) again at its tolerances times each scale (``--sweep-repeat`` timed
    calls), under the key ``problem/method@scale``."""
    report, finals = {}, {}
    methods = args.methods.split(",") if args.child == "ours" else [args.child]
    scales = [1.0] + [float(s) for s in args.tol_scales.split(",") if s and float(s) != 1.0]
    runs = [(name, method, scale) for name in args.problems.split(",") for method in methods
            for scale in scales]
    for name, method, scale in runs:
        key = f"{name}/{method}" + (f"@{scale:g}" if scale != 1.0 else "")
        repeat = args.repeat if scale == 1.0 else args.sweep_repeat
        try:
            if args.child == "ours":
                result, final = run_ours(name, method, args.n, repeat, args.n_keep, scale)
            elif args.child == "diffrax":
                result, final = run_diffrax(name, args.n, repeat, args.n_keep, scale)
            else:
                result, final = run_cubie(name, args.n, repeat, args.n_keep,
                                          args.cubie_algorithm, scale)
        except peers.Missing as error:
            result, final = {"missing": str(error)}, None
        except Exception as error:  # noqa: BLE001 (one failing run is reported; the others still run)
            result, final = {"error": f"{type(error).__name__}: {error}"[:2000]}, None
        if final is not None:
            finals[key.replace("/", "__")] = final
        report[key] = result
        print(args.child, key, json.dumps(result), file=sys.stderr, flush=True)
        # what is done so far, kept should a later run outlast the parent's timeout
        np.savez(args.finals, **finals)
        with open(args.finals + ".json", "w") as out:
            json.dump(report, out)
    print(json.dumps(report))


def spawn(peer, args, env, finals, n, n_keep, timeout=None):
    command = [sys.executable, os.path.abspath(__file__), "--child", peer,
               "--platform", env.get("HAPSIRA_TARGET", "cpu"), "--n", str(n),
               "--n-keep", str(n_keep), "--repeat", str(args.repeat), "--methods", args.methods,
               "--problems", args.problems, "--cubie-algorithm", args.cubie_algorithm,
               "--tol-scales", getattr(args, "tol_scales", ""),
               "--sweep-repeat", str(getattr(args, "sweep_repeat", 1)), "--finals", finals]
    start = time.perf_counter()
    try:
        done = subprocess.run(command, check=False, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        # the runs that ended before the timeout, as the child left them
        report, arrays = saved_so_far(finals)
        return dict(report, timed_out=f"timed out after {timeout:.0f} s (the runs finished "
                                      "before it are kept)"), arrays
    if done.returncode:
        return {"error": done.stderr.strip()[-2000:]}, {}
    report = json.loads(done.stdout.strip().splitlines()[-1])
    report["process_s"] = time.perf_counter() - start
    return report, saved_so_far(finals)[1]


def saved_so_far(finals):
    """(the child's report, its final states by key) as it last wrote them to ``finals``."""
    try:
        with open(finals + ".json") as source:
            report = json.load(source)
        with np.load(finals) as saved:
            arrays = {key.replace("__", "/"): saved[key] for key in saved.files}
    except (OSError, ValueError):
        return {}, {}
    return report, arrays


def agreement(final, ref):
    return harness.relative_difference(final[:len(ref)], ref)


# --- host: cpu (one core) and parallel (every core) against scipy ---

def host_main(args):
    problems = args.problems.split(",")
    scipy_rows, refs = {}, {}
    load_start = os.getloadavg()[0]
    for name in problems:
        refs[name], ref_s = reference(name, args.n_scipy)
        scipy_rows[name] = {"reference_s_per_object": ref_s / args.n_scipy}
        for method in args.scipy_methods.split(","):
            seconds, cpu, steps, final, failed = scipy_sample(name, method, args.n_scipy)
            scipy_rows[name][method] = {
                "us_per_object": 1e6 * seconds / args.n_scipy,
                "cpu_us_per_object": 1e6 * cpu / args.n_scipy, "mean_steps": steps,
                "failed": failed, "max_rel_diff_vs_reference": agreement(final, refs[name])}
            print("scipy", name, method, json.dumps(scipy_rows[name][method]), flush=True)
    ours = {}
    with tempfile.TemporaryDirectory() as scratch:
        for target, threads in (("cpu", 1), ("parallel", None)):
            if target not in args.targets.split(","):
                continue
            extra = {"NUMBA_NUM_THREADS": threads} if threads else {}
            env = harness.child_env(target, cache=True, **extra)
            report, finals = spawn("ours", args, env, os.path.join(scratch, f"{target}.npz"),
                                   args.n, args.n_scipy)
            for key, row in report.items():
                if isinstance(row, dict) and key in finals:
                    name, method = key.split("/")
                    row["max_rel_diff_vs_reference"] = agreement(finals[key], refs[name])
                    for scipy_method, srow in scipy_rows[name].items():
                        if isinstance(srow, dict):
                            row[f"vs_scipy_{scipy_method}"] = (srow["us_per_object"]
                                                               / row["us_per_object"])
                            if target == "cpu":  # one thread: CPU time against CPU time too
                                row[f"cpu_time_vs_scipy_{scipy_method}"] = (
                                    srow["cpu_us_per_object"] / row["cpu_us_per_object"])
            report["threads"] = threads or "all"
            ours[target] = report
            print(target, json.dumps(report), flush=True)
    record = {"n_objects": args.n, "n_scipy": args.n_scipy, "repeat": args.repeat,
              "problems": {name: {"span": STIFF_SPANS[name], "rtol": STIFF_TOL[name][0],
                                  "atol": STIFF_TOL[name][1], "reference": (
                                      "scipy Radau rtol {:g} atol {:g}, first {} objects".format(
                                          *STIFF_REF_TOL[name], args.n_scipy))}
                           for name in problems},
              "parameters": "each within +-20% of nominal (Robertson: k1, k2, k3; Van der Pol: mu)",
              "scipy_timing": (f"one object at a time, the first {args.n_scipy} objects, one pass, "
                               "exact Jacobian given; us/object = that time / n_scipy"),
              "scipy": scipy_rows, "ours": ours,
              "load_average_start_end": [load_start, os.getloadavg()[0]]}
    harness.write_result(args.out or "stiff", record)
    print_host(record, args.scipy_methods.split(","))


def print_host(record, scipy_methods):
    n = record["n_objects"]
    print(f"\n{n} objects; scipy one object at a time on {record['n_scipy']} objects, scaled per "
          "object; agreement: max relative difference of the final states from scipy Radau "
          "at rtol 1e-10 on those objects\n")
    head = " | ".join(f"x scipy {m}" for m in scipy_methods)
    print(f"| problem | solver | us/object | steps/object | {head} | max rel. diff |")
    print("|---|---|---|---|" + "---|" * len(scipy_methods) + "---|")
    for name in record["problems"]:
        for method in scipy_methods:
            row = record["scipy"][name][method]
            print(f"| {LABELS[name]} | scipy {method} | {row['us_per_object']:.0f} | "
                  f"{row['mean_steps']:.0f} | " + " | ".join("" for _ in scipy_methods)
                  + f" | {row['max_rel_diff_vs_reference']:.1e} |")
        for target, report in record["ours"].items():
            for key, row in report.items():
                if not key.startswith(name + "/"):
                    continue
                method = key.split("/")[1]
                if "us_per_object" not in row:
                    print(f"| {LABELS[name]} | {target} {method} | "
                          f"{row.get('missing') or row.get('error', '')[:80]} |")
                    continue
                speed = " | ".join(
                    f"{row[f'vs_scipy_{m}']:.0f}x" + (
                        f" ({row[f'cpu_time_vs_scipy_{m}']:.0f}x CPU time)"
                        if f"cpu_time_vs_scipy_{m}" in row else "") for m in scipy_methods)
                print(f"| {LABELS[name]} | {target} {method} | {row['us_per_object']:.1f} | "
                      f"{row['mean_steps']:.0f} | {speed} | "
                      f"{row['max_rel_diff_vs_reference']:.1e} |")


# --- cuda: ours, diffrax, CuBIE on one GPU ---

PEER_ENV = {
    "ours": {"HAPSIRA_TARGET": "cuda"},
    "diffrax": {"XLA_PYTHON_CLIENT_PREALLOCATE": "false", "HAPSIRA_TARGET": "cpu"},
    "cubie": {"NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS": "0", "HAPSIRA_TARGET": "cpu"},
}
PEER_MODULES = {"diffrax": ("jax", "diffrax"), "cubie": ("cubie",)}


def cuda_main(args):
    problems = args.problems.split(",")
    refs = {name: reference(name, args.n_ref)[0] for name in problems}
    record = {"n_objects": args.n, "repeat": args.repeat, "peers": {},
              "reference": f"scipy Radau rtol 1e-10, first {args.n_ref} objects",
              "tolerances": {name: STIFF_TOL[name] for name in problems}}
    with tempfile.TemporaryDirectory() as scratch:
        for peer in args.peers.split(","):
            absent = [m for m in PEER_MODULES.get(peer, ()) if importlib.util.find_spec(m) is None]
            if absent:
                note = f"{', '.join(absent)} not installed ({INSTALL[peer]})"
                print(f"{peer}: {note}; going on", flush=True)
                record["peers"][peer] = {"missing": note}
                continue
            env = dict(os.environ, **PEER_ENV[peer])
            report, finals = spawn(peer, args, env, os.path.join(scratch, f"{peer}.npz"),
                                   args.n, args.n_ref, timeout=args.timeout)
            for key, final in finals.items():
                report[key]["max_rel_diff_vs_reference"] = agreement(final, refs[key.split("/")[0]])
            record["peers"][peer] = report
            print(peer, json.dumps(report), flush=True)
    harness.write_result(args.out or "gpu_stiff", record)
    print("\n| peer | problem/method | first call s | best s | us/object | steps | max rel. diff |")
    print("|---|---|---|---|---|---|---|")
    for peer, report in record["peers"].items():
        if "missing" in report or "error" in report:
            print(f"| {peer} | {report.get('missing') or report['error'][:80]} |")
            continue
        for key, row in report.items():
            if isinstance(row, dict) and "seconds" in row:
                print(f"| {peer} | {key} | {row.get('first_call_s', row.get('compile_s', 0)):.2f} "
                      f"| {row['seconds']:.3f} | {row['us_per_object']:.3f} | "
                      f"{row.get('mean_steps', float('nan')):.0f} | "
                      f"{row.get('max_rel_diff_vs_reference', float('nan')):.1e} |")
            elif isinstance(row, dict):
                print(f"| {peer} | {key} | {row.get('missing') or row.get('error', '')[:80]} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--platform", default="host", choices=("host", "cuda", "cpu", "parallel"),
                        help="host: cpu (one core) and parallel targets vs scipy; cuda: one GPU, "
                             "vs diffrax Kvaerno5 and CuBIE (cpu/parallel: children only)")
    parser.add_argument("--n", type=int, default=None,
                        help="objects (default 10000 on the host, 1000000 on cuda)")
    parser.add_argument("--n-scipy", type=int, default=50,
                        help="host: objects scipy runs (time scaled per object; the agreement "
                             "sample)")
    parser.add_argument("--methods", default="BDF,Rodas5P",
                        help="our methods, comma-separated (add Radau once it is merged)")
    parser.add_argument("--scipy-methods", default="BDF,Radau", help="host: scipy's methods")
    parser.add_argument("--targets", default="cpu,parallel",
                        help="host: our targets (cpu: one core; parallel: every core)")
    parser.add_argument("--problems", default=",".join(PROBLEMS), help="comma-separated")
    parser.add_argument("--repeat", type=int, default=3, help="timed calls at N (best)")
    parser.add_argument("--peers", default="ours,diffrax,cubie", help="cuda: who runs")
    parser.add_argument("--cubie-algorithm", default="radau",
                        help="cuda: CuBIE's algorithm (its Radau IIA 5 tableau by default)")
    parser.add_argument("--n-ref", type=int, default=20, help="cuda: objects checked vs scipy")
    parser.add_argument("--timeout", type=float, default=1200.0, help="cuda: seconds per peer")
    parser.add_argument("--out", default=None, help="result name or path "
                                                    "(default stiff / gpu_stiff)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--n-keep", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--finals", help=argparse.SUPPRESS)
    parser.add_argument("--tol-scales", default="",
                        help="children: each run again with rtol and atol times each of these "
                             "(comma-separated; a work-precision sweep, benchmarks/gpu_peers.py)")
    parser.add_argument("--sweep-repeat", type=int, default=1,
                        help="children: timed calls at each --tol-scales point (best)")
    args = parser.parse_args()
    if args.child:
        return child(args)
    if args.platform == "cuda":
        args.n = args.n or 1_000_000
        return cuda_main(args)
    args.n = args.n or 10_000
    return host_main(args)


if __name__ == "__main__":
    main()
