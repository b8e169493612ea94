"""One GPU, ours beside its peers: stiff ensembles against CuBIE's Radau IIA, Lorenz-96 at large n against diffrax Dopri8, the cost of stm=True.

    python benchmarks/gpu_peers.py [--parts stiff,large_n,stm] [--quick] [--out PATH]
        [--n 100000] [--problems robertson,van_der_pol_stiff,hires]
        [--methods Radau,Rodas5P,BDF] [--sweep 100,0.01] [--n-ref 16]
        [--large-objects 10000] [--sizes 200,1000] [--large-peers diffrax] [--n-ref-large 4]
        [--stm-objects 1000000] [--timeout 240] [--deadline SECONDS]
    python benchmarks/gpu_peers.py --merge PART.json [PART.json ...] --out PATH
    python benchmarks/gpu_peers.py --plot-sweep RESULT.json [--png PATH]

The comparisons of issue 53 in one record (``benchmarks/results/gpu_peers.json`` by
default), each solver run by the script that already measures it, in a process of its own
with a timeout, so that a failure or a hang loses that run alone; the record is written
again after every run (a run cut short still leaves what was done).

``stiff`` (stiff.py's children): N objects (``--n``) of each problem of ``--problems``
(workloads.stiff_problem: Robertson, Van der Pol mu ~ 1000, and HIRES, on which the stiff
methods' defaults were not chosen), every parameter within +-20 % of its nominal value. Ours
on the cuda target, one process per (problem, method) of ``--methods``; CuBIE's Radau IIA
(``Solver(algorithm="radau")``, PID controller, float64), one process per problem. Each at
the problem's tolerances (rtol 1e-6; stiff.py), timed as stiff.py times them (ours: a call
on two objects compiles, then the best of ``--repeat`` calls at N; CuBIE: its first call at
N compiles, then the best of ``--repeat``), then again at each factor of ``--sweep`` times
both tolerances (one timed call each: the work-precision points). Error: the largest
``|y - y_ref| / |y_ref|`` (2-norms of the final state) over the first ``--n-ref``
objects, y_ref from scipy's Radau at rtol 1e-10 with the exact Jacobian, computed here on
every core but one before the GPU runs.

``large_n`` (state_size.py's children): Lorenz-96 (F = 8, t in [0, 1], rtol = atol = 1e-8)
at each n of ``--sizes`` on ``--large-objects`` objects; ours (DOP853, the array form
``fun(t, y, p, dydt)``, kernel cache off) against diffrax's Dopri8
(``jax.jit(jax.vmap(diffeqsolve))``, float64; ``--large-peers cubie`` adds CuBIE's dop853).
Microseconds per object from the best of three calls after the first; error against scipy's
DOP853 at rtol = atol = 1e-13 on the first ``--n-ref-large`` objects.

``stm`` (stm_cost.py, ``--targets cuda``): the reference workload (LEO cloud, two-body + J2,
one day, rtol 1e-11) on ``--stm-objects`` objects, ``cowell(..., stm=True)`` over the same
call without: ``stm_ratio``.

The record: ``device`` (the GPU's name), ``stiff`` (one row per problem and method:
``problem, ours_method, ours_s, ours_err, cubie_s, cubie_err`` and the tolerances,
microseconds per object, compile times, steps, failures), ``stiff_sweep`` (every
work-precision point, CuBIE's and ours), ``large_n`` (``n, ours_us, diffrax_us, ours_err,
diffrax_err`` and more), ``stm_ratio`` with stm_cost.py's row under ``stm``, ``notes``,
``parts`` (how each part went: seconds, the GPU, the src digest), ``settings`` and
``machine`` (harness.machine(): CPU, GPUs, versions, git revision, src digest). Parts run on
separate calls (a GPU machine's command is limited in time) are joined with ``--merge``
(later files win for the parts they have). ``--deadline`` bounds the whole run: a run starts
only if some time is left and its timeout is cut to what is. ``--quick``: tiny sizes, to
check the code paths (under ``NUMBA_ENABLE_CUDASIM=1`` too: ours and CuBIE then run on
numba's simulator and the times mean nothing; the record says so).
"""

import argparse
import concurrent.futures
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

import harness  # noqa: E402
import state_size  # noqa: E402
import stiff  # noqa: E402  (sets HAPSIRA_TARGET=cpu here: this process runs scipy alone)
import workloads  # noqa: E402

PARTS = ("stiff", "large_n", "stm")
STIFF_METHODS = "Radau,Rodas5P,BDF"
STIFF_PROBLEMS = "robertson,van_der_pol_stiff,hires"
#: the tight reference of large_n: scipy's DOP853 at these tolerances
LARGE_REF_TOL = 1e-13
LARGE_PEER_LABELS = {"diffrax": "diffrax", "cubie": "cubie"}
QUICK = {"n": 32, "n_ref": 3, "sweep": "100", "repeat": 1, "large_objects": 16,
         "sizes": "12,24", "n_ref_large": 2, "stm_objects": 4, "timeout": 600}


# --- references, on the host's cores ---

def stiff_reference_one(name, index):
    """scipy Radau at the reference tolerances on object ``index`` of problem ``name``."""
    from scipy.integrate import solve_ivp
    _, params = workloads.stiff_problem(name, index + 1)
    y0 = workloads.stiff_problem(name, index + 1)[0][index]
    rhs, jac = workloads.stiff_scipy(name, params[index])
    rtol, atol = workloads.STIFF_REF_TOL[name]
    sol = solve_ivp(rhs, workloads.STIFF_SPANS[name], y0, method="Radau", rtol=rtol, atol=atol,
                    jac=jac)
    if sol.status != 0:
        raise RuntimeError(f"the scipy reference failed on {name} object {index}: "
                           f"{sol.message}")
    return sol.y[:, -1]


def lorenz_reference_one(n, index):
    """scipy DOP853 at rtol = atol = LARGE_REF_TOL on object ``index`` of Lorenz-96 at n."""
    from scipy.integrate import solve_ivp
    y0 = state_size.initial_states(n, index + 1)[index]
    sol = solve_ivp(state_size.lorenz96_numpy, state_size.SPAN, y0, method="DOP853",
                    rtol=LARGE_REF_TOL, atol=LARGE_REF_TOL)
    if sol.status != 0:
        raise RuntimeError(f"the scipy reference failed on Lorenz-96 n={n} object {index}")
    return sol.y[:, -1]


def references(jobs, workers=None):
    """``{key: (count, dim) final states}`` of ``jobs`` (``{key: (function, arg, count)}``,
    ``function(arg, index)`` for index < count), over a pool of processes (every core but
    one); (the states, seconds)."""
    workers = workers or max(1, (os.cpu_count() or 2) - 1)
    start = time.perf_counter()
    tasks = [(key, f, arg, i) for key, (f, arg, count) in jobs.items() for i in range(count)]
    with concurrent.futures.ProcessPoolExecutor(
            max_workers=min(workers, len(tasks)) or 1,
            mp_context=multiprocessing.get_context("fork")) as pool:
        futures = [(key, i, pool.submit(f, arg, i)) for key, f, arg, i in tasks]
        out = {key: [None] * count for key, (_, _, count) in jobs.items()}
        for key, i, future in futures:
            out[key][i] = future.result()
    return {key: np.array(rows) for key, rows in out.items()}, time.perf_counter() - start


def error(final, reference):
    """The largest relative difference over the objects that have a reference, or None."""
    if final is None or reference is None:
        return None
    final = np.asarray(final)
    return harness.relative_difference(final[:len(reference)], reference[:len(final)])


# --- the record ---

class Record:
    """The result being built: written after every run (``write``)."""

    def __init__(self, path, args):
        self.path = path
        self.start = time.perf_counter()
        self.deadline = args.deadline
        machine = harness.machine()
        self.data = {
            "benchmark": "gpu_peers", "device": device_name(machine), "quick": args.quick,
            "stiff": [], "stiff_sweep": [], "large_n": [], "stm_ratio": None, "stm": None,
            "notes": [], "parts": {}, "settings": settings(args), "machine": machine}
        if harness.simulated():
            self.note("NUMBA_ENABLE_CUDASIM=1: ours and CuBIE ran on numba's CUDA simulator; "
                      "the times mean nothing, the errors and code paths are checked")

    def note(self, text):
        if text not in self.data["notes"]:
            self.data["notes"].append(text)

    def left(self):
        """Seconds before the deadline (None without one)."""
        if not self.deadline:
            return None
        return self.deadline - (time.perf_counter() - self.start)

    def timeout(self, wanted, least=15.0):
        """The timeout of the next run: ``wanted`` cut to the time left (a margin kept to
        write the record), or None where too little is left to start it."""
        left = self.left()
        if left is None:
            return wanted
        left -= 10.0
        return min(wanted, left) if left >= least else None

    def write(self):
        harness.write_result(self.path, self.data)


def device_name(machine):
    if harness.simulated():
        return "CUDA simulator (NUMBA_ENABLE_CUDASIM=1)"
    gpus = machine.get("gpus") or []
    return ", ".join(g["name"] for g in gpus) or "no GPU found (nvidia-smi lists none)"


def settings(args):
    return {"n": args.n, "problems": args.problems, "methods": args.methods,
            "sweep": args.sweep, "repeat": args.repeat, "n_ref": args.n_ref,
            "large_objects": args.large_objects, "sizes": args.sizes,
            "large_peers": args.large_peers, "n_ref_large": args.n_ref_large,
            "stm_objects": args.stm_objects, "timeout": args.timeout, "deadline": args.deadline,
            "cubie_algorithm": args.cubie_algorithm}


def part_info(record, seconds, status):
    machine = record.data["machine"]
    return {"status": status, "seconds": seconds, "device": record.data["device"],
            "src_digest": machine.get("src_digest"), "git_revision": machine.get("git_revision"),
            "measured": machine.get("measured")}


# --- stiff: ours (every method) and CuBIE's Radau IIA, stiff.py's children ---

def stiff_child(peer, problem, methods, args, timeout, scratch):
    """stiff.py's child for ``peer`` on one problem: (report, finals by key)."""
    spec = argparse.Namespace(repeat=args.repeat, methods=methods, problems=problem,
                              cubie_algorithm=args.cubie_algorithm, tol_scales=args.sweep,
                              sweep_repeat=1)
    env = dict(os.environ, **stiff.PEER_ENV[peer])
    if peer == "cubie":  # its generated code in a new folder, not in the working directory
        env["CUBIE_CACHE_DIR"] = tempfile.mkdtemp(prefix="cubie-", dir=scratch)
    finals = os.path.join(scratch, f"{peer}_{problem}_{methods}.npz")
    return stiff.spawn(peer, spec, env, finals, args.n, args.n_ref, timeout=timeout)


def failure(report, key):
    """Why run ``key`` of a child's report has no result (None where it has one)."""
    row = report.get(key)
    if isinstance(row, dict) and "seconds" in row:
        return None
    if isinstance(row, dict):
        return row.get("missing") or row.get("error") or "no result"
    return report.get("timed_out") or report.get("error") or report.get("skipped") or (
        "not run")


def sweep_keys(args):
    scales = [1.0] + [float(s) for s in args.sweep.split(",") if s and float(s) != 1.0]
    return [(scale, "" if scale == 1.0 else f"@{scale:g}") for scale in scales]


def stiff_rows(problem, method, ours, ours_finals, cubie, cubie_finals, ref, args):
    """The row of ``stiff`` (the problem's tolerances) and the sweep points of ours."""
    key, peer_key = f"{problem}/{method}", f"{problem}/cubie"
    o, c = ours.get(key), cubie.get(peer_key)
    o = o if isinstance(o, dict) and "seconds" in o else None
    c = c if isinstance(c, dict) and "seconds" in c else None
    rtol, atol = stiff.tolerances(problem)
    row = {"problem": problem, "ours_method": method, "n": args.n, "rtol": rtol, "atol": atol,
           "ours_s": o and o["seconds"], "ours_err": error(ours_finals.get(key), ref),
           "cubie_s": c and c["seconds"], "cubie_err": error(cubie_finals.get(peer_key), ref),
           "ours_us_per_object": o and o["us_per_object"],
           "cubie_us_per_object": c and c["us_per_object"],
           "ours_compile_s": o and o["compile_s"], "cubie_first_call_s": c and c["first_call_s"],
           "ours_mean_steps": o and o["mean_steps"], "ours_failed": o and o["failed"],
           "cubie_failed": c and c["failed"], "cubie_algorithm": args.cubie_algorithm,
           "n_ref": len(ref) if ref is not None else 0}
    for who, report in (("ours", ours), ("cubie", cubie)):
        why = failure(report, key if who == "ours" else peer_key)
        if why:
            row[f"{who}_error"] = why[-600:]
    points = [sweep_point(problem, f"hapsira {method}", ours, ours_finals, key + suffix, scale,
                          ref, args) for scale, suffix in sweep_keys(args)]
    return row, points


def sweep_point(problem, solver, report, finals, key, scale, ref, args):
    rtol, atol = stiff.tolerances(problem, scale)
    row = report.get(key)
    point = {"problem": problem, "solver": solver, "rtol": rtol, "atol": atol, "n": args.n}
    if isinstance(row, dict) and "seconds" in row:
        point.update(seconds=row["seconds"], us_per_object=row["us_per_object"],
                     err=error(finals.get(key), ref), failed=row.get("failed"),
                     mean_steps=row.get("mean_steps"))
    else:
        point["error"] = (failure(report, key) or "")[-300:]
    return point


def run_stiff(record, args):
    problems = [p for p in args.problems.split(",") if p]
    methods = [m for m in args.methods.split(",") if m]
    for name in problems:
        if name not in workloads.STIFF:
            raise SystemExit(f"--problems: {name!r} is none of {', '.join(workloads.STIFF)}")
    jobs = {name: (stiff_reference_one, name, args.n_ref) for name in problems}
    refs, seconds = references(jobs)
    print(f"stiff references: scipy Radau rtol 1e-10 on {args.n_ref} objects of each problem "
          f"in {seconds:.1f} s", flush=True)
    record.note("err: the largest |y - y_ref| / |y_ref| (2-norms of the final state) over the "
                "first n_ref objects; stiff y_ref: scipy Radau, rtol 1e-10 and atol "
                + ", ".join(f"{workloads.STIFF_REF_TOL[p][1]:g} ({p})" for p in problems)
                + ", exact Jacobian, computed in the run on the host's cores")
    record.note("stiff ours_s, cubie_s: best of --repeat calls at n objects, host arrays in "
                "and out, compile excluded (ours: a call on two objects first; CuBIE: its first "
                "call at n); ours and CuBIE each in processes of their own")
    record.data["stiff_reference_s"] = seconds
    order = {(p, m): i for i, (p, m) in enumerate((p, m) for p in problems for m in methods)}
    with tempfile.TemporaryDirectory(prefix="gpu-peers-") as scratch:
        for name in problems:
            ours, ours_finals = {}, {}
            for method in methods:
                timeout = record.timeout(args.timeout)
                if timeout is None:
                    ours[f"{name}/{method}"] = {"error": "skipped: the deadline was near"}
                    continue
                report, finals = stiff_child("ours", name, method, args, timeout, scratch)
                ours.update({k: v for k, v in report.items() if k.startswith(name + "/")})
                why = report.get("timed_out") or report.get("error") or "not run"
                for _, suffix in sweep_keys(args):  # a run the child did not reach: why
                    ours.setdefault(f"{name}/{method}{suffix}", {"error": why})
                ours_finals.update(finals)
                print(f"ours {name} {method}: " + json.dumps(
                    {k: v.get("us_per_object", v) if isinstance(v, dict) else v
                     for k, v in report.items()})[:600], flush=True)
                publish_stiff(record, name, methods[:methods.index(method) + 1], ours,
                              ours_finals, {}, {}, refs[name], args, order)
            timeout = record.timeout(args.timeout)
            if timeout is None:
                cubie, cubie_finals = {"error": "skipped: the deadline was near"}, {}
            elif importlib_missing("cubie"):
                cubie, cubie_finals = {"error": f"cubie not installed ({stiff.INSTALL['cubie']})"}, {}
            else:
                cubie, cubie_finals = stiff_child("cubie", name, "cubie", args, timeout, scratch)
            print(f"cubie {name}: " + json.dumps(
                {k: v.get("us_per_object", v) if isinstance(v, dict) else v
                 for k, v in cubie.items()})[:600], flush=True)
            publish_stiff(record, name, methods, ours, ours_finals, cubie, cubie_finals,
                          refs[name], args, order)
            for scale, suffix in sweep_keys(args):
                record.data["stiff_sweep"].append(sweep_point(
                    name, f"CuBIE {args.cubie_algorithm}", cubie, cubie_finals,
                    f"{name}/cubie{suffix}", scale, refs[name], args))
            record.write()


def publish_stiff(record, name, methods, ours, ours_finals, cubie, cubie_finals, ref, args,
                  order):
    """(Re)place problem ``name``'s rows and ours' sweep points in the record; write it."""
    data = record.data
    data["stiff"] = [r for r in data["stiff"] if r["problem"] != name]
    data["stiff_sweep"] = [p for p in data["stiff_sweep"] if p["problem"] != name]
    for method in methods:
        row, points = stiff_rows(name, method, ours, ours_finals, cubie, cubie_finals, ref, args)
        data["stiff"].append(row)
        data["stiff_sweep"] += points
    data["stiff"].sort(key=lambda r: order.get((r["problem"], r["ours_method"]), 0))
    record.write()


def importlib_missing(module):
    import importlib.util
    return importlib.util.find_spec(module) is None


# --- large n: Lorenz-96, ours against diffrax (and CuBIE), state_size.py's children ---

def run_large(record, args):
    sizes = [int(s) for s in args.sizes.split(",") if s]
    peers = [p for p in args.large_peers.split(",") if p]
    for peer in peers:
        if peer not in state_size.PEER_METHODS:
            raise SystemExit(f"--large-peers: {peer!r} is none of "
                             f"{', '.join(state_size.PEER_METHODS)}")
    jobs = {n: (lorenz_reference_one, n, args.n_ref_large) for n in sizes}
    refs, seconds = references(jobs)
    print(f"large_n references: scipy DOP853 rtol 1e-13 on {args.n_ref_large} objects at each n "
          f"in {seconds:.1f} s", flush=True)
    record.note(f"large_n: Lorenz-96 (F = 8, t in [0, 1]), rtol = atol = {state_size.RTOL:g}, "
                "ours DOP853 (array form, kernel cache off), diffrax Dopri8 (PID controller, "
                "float64); ours_us, diffrax_us: microseconds per object, the best of three "
                "calls after the first (host arrays in and out); y_ref: scipy "
                f"DOP853 at rtol = atol = {LARGE_REF_TOL:g}")
    env = harness.child_env("cuda")
    for n in sizes:
        row = {"n": n, "objects": args.large_objects, "rtol": state_size.RTOL,
               "atol": state_size.ATOL, "n_ref": args.n_ref_large}
        record.data["large_n"] = [r for r in record.data["large_n"] if r["n"] != n] + [row]
        runs = [("ours", None)] + [(peer, peer) for peer in peers]
        for who, peer in runs:
            timeout = record.timeout(args.timeout)
            if timeout is None:
                result = {"error": "skipped: the deadline was near"}
            elif peer is None:
                script = state_size.ours_script(n, args.large_objects, "DOP853", "array",
                                                keep=args.n_ref_large)
                result = harness.run_child(script, env=env, timeout=timeout, check=False)
            elif importlib_missing("jax" if peer == "diffrax" else peer):
                result = {"error": f"{peer} not installed"}
            else:
                result = state_size.gpu_peer(peer, n, args.large_objects, "DOP853", timeout,
                                             keep=args.n_ref_large)
            label = "ours" if peer is None else LARGE_PEER_LABELS[peer]
            if "best_s" in result:
                steps = result.get("steps_per_object", result.get("mean_steps"))
                row.update({f"{label}_us": 1e6 * result["best_s"] / args.large_objects,
                            f"{label}_err": error(result.get("y_ends"), refs[n]),
                            f"{label}_s": result["best_s"],
                            f"{label}_compile_s": result.get("compile_s"),
                            f"{label}_mean_steps": steps,
                            f"{label}_failed": result.get("failed", 0)})
                if peer is not None:
                    row[f"{label}_algorithm"] = result.get("algorithm")
            else:
                row.update({f"{label}_us": None, f"{label}_err": None,
                            f"{label}_error": str(result.get("error"))[-600:]})
            print(f"large_n n={n} {label}: " + json.dumps(
                {k: v for k, v in row.items() if k.startswith(label)}), flush=True)
            record.write()


# --- stm: stm_cost.py on the cuda target ---

def run_stm(record, args):
    timeout = record.timeout(args.timeout * 2)
    if timeout is None:
        record.data["stm"] = {"error": "skipped: the deadline was near"}
        return
    with tempfile.TemporaryDirectory(prefix="gpu-peers-stm-") as scratch:
        out = os.path.join(scratch, "stm_cost.json")
        failed = run_script("stm_cost.py", ["--targets", "cuda", "--cuda-objects",
                                            str(args.stm_objects), "--objects",
                                            str(args.stm_objects), "--heyoka-objects", "2",
                                            "--out", out], timeout)
        if failed or not os.path.exists(out):
            record.data["stm"] = {"error": failed or "stm_cost.py wrote no result"}
            return
        with open(out) as source:
            row = json.load(source)["rows"].get("cuda", {})
    record.data["stm"] = row
    record.data["stm_ratio"] = row.get("ratio")
    record.note("stm_ratio: cowell(..., stm=True) over the same call without, best of three "
                "calls after the first each, on the reference workload (LEO cloud, two-body + "
                f"J2, one day, rtol 1e-11, atol 1e-12), {args.stm_objects} objects "
                "(stm_cost.py --targets cuda)")


def run_script(script, arguments, timeout):
    """A script beside this one in a new process: None where it ran, else why not (its
    output's tail)."""
    command = [sys.executable, os.path.join(HERE, script), *arguments]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"timed out after {timeout:.0f} s"
    print(done.stdout[-3000:], flush=True)
    if done.returncode:
        return f"exit {done.returncode}: {(done.stderr or done.stdout).strip()[-2000:]}"
    return None


# --- merging parts, plotting the sweep ---

def merge(paths, out):
    """Join the records of parts run apart: a later file wins for what it ran (the stiff
    problems, the sizes of large_n, stm), so a part may also be split over calls (one
    problem per call, say)."""
    merged = None
    for path in paths:
        with open(path) as source:
            record = json.load(source)
        name = os.path.basename(path)
        if merged is None:
            merged = dict(record, parts_by_file={name: record.get("parts", {})},
                          settings_by_file={name: record.get("settings")})
            continue
        merged["parts_by_file"][name] = record.get("parts", {})
        merged["settings_by_file"][name] = record.get("settings")
        parts = record.get("parts", {})
        if "stiff" in parts:
            problems = {r["problem"] for r in record["stiff"]}
            merged["stiff"] = [r for r in merged["stiff"] if r["problem"] not in problems] + \
                record["stiff"]
            merged["stiff_sweep"] = [p for p in merged["stiff_sweep"]
                                     if p["problem"] not in problems] + record["stiff_sweep"]
            merged["stiff_reference_s"] = record.get("stiff_reference_s")
        if "large_n" in parts:
            sizes = {r["n"] for r in record["large_n"]}
            merged["large_n"] = sorted(
                [r for r in merged["large_n"] if r["n"] not in sizes] + record["large_n"],
                key=lambda r: r["n"])
        if "stm" in parts:
            merged["stm"], merged["stm_ratio"] = record["stm"], record["stm_ratio"]
        merged["parts"].update(parts)
        for note in record.get("notes", []):
            if note not in merged["notes"]:
                merged["notes"].append(note)
    infos = [info for parts in merged["parts_by_file"].values() for info in parts.values()]
    devices = sorted({str(info.get("device")) for info in infos})
    digests = sorted({str(info.get("src_digest")) for info in infos})
    if len(devices) > 1:
        merged["notes"].append(f"the parts ran on different devices: {', '.join(devices)} "
                               "(each file's under parts_by_file)")
    if len(digests) > 1:
        merged["notes"].append(f"the parts ran different sources: src digests {digests}")
    merged["device"] = " / ".join(devices)
    merged["merged_from"] = [os.path.basename(p) for p in paths]
    harness.write_result(out, merged)


def plot_sweep(path, png=None):
    """Error against microseconds per object, one panel per stiff problem, a line per solver
    (ours in blues, CuBIE grey). Returns the PNG's path."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(path) as source:
        record = json.load(source)
    points = [p for p in record.get("stiff_sweep", []) if p.get("err") and p.get("us_per_object")]
    problems = list(dict.fromkeys(p["problem"] for p in points))
    if not problems:
        raise SystemExit(f"{path}: no work-precision points with an error and a time")
    fig, axes = plt.subplots(1, len(problems), figsize=(4.2 * len(problems), 3.6), squeeze=False)
    for ax, problem in zip(axes[0], problems):
        solvers = list(dict.fromkeys(p["solver"] for p in points if p["problem"] == problem))
        for solver in solvers:
            mine = sorted((p for p in points if p["problem"] == problem
                           and p["solver"] == solver), key=lambda p: -p["rtol"])
            style = {"color": "tab:gray", "marker": "s"} if not solver.startswith("hapsira") \
                else {"marker": "o"}
            ax.loglog([p["us_per_object"] for p in mine], [p["err"] for p in mine], label=solver,
                      **style)
            for p in mine:
                ax.annotate(f"{p['rtol']:.0e}", (p["us_per_object"], p["err"]), fontsize=6,
                            textcoords="offset points", xytext=(3, 3))
        ax.set_title(stiff.LABELS.get(problem, problem), fontsize=9)
        ax.set_xlabel("us per object", fontsize=8)
        ax.set_ylabel("max relative error", fontsize=8)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    n = next((p["n"] for p in points), "?")
    fig.suptitle(f"work-precision on {record.get('device', '?')}, {n} objects "
                 "(labels: rtol)", fontsize=10)
    fig.tight_layout()
    png = png or os.path.splitext(path)[0] + "_sweep.png"
    fig.savefig(png, dpi=110)
    plt.close(fig)
    print(f"plotted to {png}")
    return png


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default=",".join(PARTS),
                        help="comma-separated, in this order: stiff, large_n, stm")
    parser.add_argument("--quick", action="store_true",
                        help="tiny sizes (every size not given on the command line): checks "
                             "the code paths in a few minutes")
    parser.add_argument("--out", default="gpu_peers",
                        help="result name or path (default benchmarks/results/gpu_peers.json)")
    parser.add_argument("--n", type=int, default=None, help="stiff: objects (default 100000)")
    parser.add_argument("--problems", default=STIFF_PROBLEMS, help="stiff: comma-separated")
    parser.add_argument("--methods", default=STIFF_METHODS, help="stiff: ours, comma-separated")
    parser.add_argument("--cubie-algorithm", default="radau", help="stiff: CuBIE's algorithm")
    parser.add_argument("--sweep", default=None,
                        help="stiff: factors on both tolerances for the work-precision points, "
                             "comma-separated (default 100,0.01: rtol 1e-4 and 1e-8; '' none)")
    parser.add_argument("--repeat", type=int, default=None,
                        help="stiff: timed calls at the problem's tolerances (best; default 3)")
    parser.add_argument("--n-ref", type=int, default=None,
                        help="stiff: objects checked against the reference (default 16)")
    parser.add_argument("--large-objects", type=int, default=None,
                        help="large_n: objects (default 10000)")
    parser.add_argument("--sizes", default=None, help="large_n: n, comma-separated "
                                                      "(default 200,1000)")
    parser.add_argument("--large-peers", default="diffrax",
                        help="large_n: diffrax and/or cubie, comma-separated")
    parser.add_argument("--n-ref-large", type=int, default=None,
                        help="large_n: objects checked against the reference (default 4)")
    parser.add_argument("--stm-objects", type=int, default=None,
                        help="stm: objects (default 1000000)")
    parser.add_argument("--timeout", type=float, default=None,
                        help="seconds each solver's process may take (default 240; stm twice)")
    parser.add_argument("--deadline", type=float, default=0.0,
                        help="seconds for the whole run: a run starts only where time is left "
                             "(default: none)")
    parser.add_argument("--merge", nargs="+", metavar="JSON",
                        help="run nothing: join these records of parts into --out")
    parser.add_argument("--plot-sweep", metavar="JSON",
                        help="run nothing: draw the work-precision points of a record")
    parser.add_argument("--png", help="with --plot-sweep: the picture's path")
    args = parser.parse_args()
    if args.plot_sweep:
        plot_sweep(args.plot_sweep, args.png)
        return 0
    if args.merge:
        merge(args.merge, args.out)
        return 0
    full = {"n": 100_000, "n_ref": 16, "sweep": "100,0.01", "repeat": 3,
            "large_objects": 10_000, "sizes": "200,1000", "n_ref_large": 4,
            "stm_objects": 1_000_000, "timeout": 240}
    for key, value in (QUICK if args.quick else full).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    parts = [p for p in args.parts.split(",") if p]
    for part in parts:
        if part not in PARTS:
            parser.error(f"--parts: {part!r} is none of {', '.join(PARTS)}")
    record = Record(args.out, args)
    print(f"device: {record.data['device']}; src digest "
          f"{record.data['machine']['src_digest']}; parts {', '.join(parts)}", flush=True)
    record.write()
    functions = {"stiff": run_stiff, "large_n": run_large, "stm": run_stm}
    for part in PARTS:
        if part not in parts:
            continue
        start = time.perf_counter()
        try:
            functions[part](record, args)
            status = "ok"
        except Exception as failed:  # noqa: BLE001 (the other parts still run)
            status = f"error: {type(failed).__name__}: {failed}"[:2000]
            print(f"{part}: {status}", flush=True)
        record.data["parts"][part] = part_info(record, time.perf_counter() - start, status)
        record.write()
    summary(record.data)
    return 0


def summary(data):
    def fmt(value, spec):
        return "-" if value is None else format(value, spec)
    print(f"\n{data['device']}")
    print("| problem | ours | ours s | ours err | CuBIE s | CuBIE err |")
    print("|---|---|---|---|---|---|")
    for r in data["stiff"]:
        print(f"| {r['problem']} | {r['ours_method']} | {fmt(r['ours_s'], '.4f')} | "
              f"{fmt(r['ours_err'], '.1e')} | {fmt(r['cubie_s'], '.4f')} | "
              f"{fmt(r['cubie_err'], '.1e')} |")
    print("\n| n | ours us/object | ours err | diffrax us/object | diffrax err |")
    print("|---|---|---|---|---|")
    for r in data["large_n"]:
        print(f"| {r['n']} | {fmt(r.get('ours_us'), '.2f')} | {fmt(r.get('ours_err'), '.1e')} | "
              f"{fmt(r.get('diffrax_us'), '.2f')} | {fmt(r.get('diffrax_err'), '.1e')} |")
    print(f"\nstm=True over plain: {fmt(data['stm_ratio'], '.2f')}")


if __name__ == "__main__":
    sys.exit(main())
