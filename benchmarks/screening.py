"""Conjunction screening (`hapsira_cowell.conjunctions.screen`) of N debris objects.

    HAPSIRA_TARGET=cpu python benchmarks/screening.py [--n 2000] [--days 1] [--threshold 5]
                                                      [--dt S] [--data DIR]
    python benchmarks/screening.py --cascade [--targets cpu parallel] [--json PATH] ...

The objects are the debris catalogs of ``$HAPSIRA_TEST_DATA`` (default
../shared/data), all brought to their latest epoch with SGP4; for N larger
than the catalogs hold (about 2,700), copies of them rotated about the Earth's
axis by random angles (seed 0) are added, the way cascade's 20,000-object test
population is a LEO catalog of that size. The first call compiles the kernels
(the cache makes later processes start in about a second); the screen is timed
on a second call, printing the seconds per phase (propagation, broad phase,
refinement), the windows, the pairs the grid formed, the candidates refined
and the approaches found.

With ``--cascade`` the same population is screened, in one run, by our screen
on each of ``--targets`` (one process each, since the target is chosen per
process) and by ESA's cascade (PyPI ``esa-cascade``, heyoka's Taylor integrator
with its own conjunction detection), and the two lists of approaches are
matched pair by pair. Both use two-body dynamics: esa-cascade 0.1.7 pins
heyoka 3.0, whose expressions the heyoka of our benchmark extra (7.x) cannot
hand it, so cascade runs its built-in Keplerian dynamics (mu = 1: lengths in
Earth radii, times in sqrt(R^3/GM)), and ours runs ``f=two_body`` on the same
GM. ``--json`` writes the times, threads and the agreement.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HAPSIRA_TARGET", "cpu")

import numpy as np  # noqa: E402

from hapsira_cowell import from_tle  # noqa: E402
from hapsira_cowell.constants import K_EARTH, R_EARTH  # noqa: E402

CATALOGS = ("fengyun-1c-debris.tle", "cosmos-2251-debris.tle", "iridium-33-debris.tle",
            "cosmos-1408-debris.tle")
# cascade's collisional step in its one-week LEO example: the ISS's period / 40, s
CASCADE_CT = 90 * 60.0 / 40
# approaches of the two lists are the same one when their TCAs are this close, s
SAME_TCA = 1.0


def population(n, data):
    """``n`` states (km, km/s) at one epoch per catalog (see the module's docstring)."""
    r, v = [], []
    for name in CATALOGS:
        catalog = from_tle(Path(data) / name)
        ri, vi, ok = catalog.states_at(catalog.epochs.max())
        r.append(ri[ok])
        v.append(vi[ok])
    r, v = np.concatenate(r), np.concatenate(v)
    rng = np.random.default_rng(0)
    rs, vs = [r], [v]
    while sum(len(x) for x in rs) < n:
        angle = rng.uniform(0, 2 * np.pi)
        c, s = np.cos(angle), np.sin(angle)
        rot = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
        rs.append(r @ rot.T)
        vs.append(v @ rot.T)
    return np.concatenate(rs)[:n], np.concatenate(vs)[:n]


def _usage():
    """This process's user and system CPU seconds (all threads) and minor page faults."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    return np.array([used.ru_utime, used.ru_stime, used.ru_minflt])


def _spent(before):
    """`_usage` since ``before``, as the result's fields."""
    user, system, faults = _usage() - before
    return {"user_s": float(user), "sys_s": float(system), "minor_faults": int(faults)}


def run_ours(r, v, days, threshold, dt=None, force="two_body_j2", chunks=(None,)):
    """Our screen on the active target: seconds per phase, threads, the table's columns.
    With several ``chunks`` (windows per chunk; None: the default) the screen runs once
    per value, after one compile; the first value's run is the result, every run's
    times are in its ``by_chunk``."""
    import numba

    from hapsira_core import settings
    from hapsira_cowell import conjunctions, perturbations

    f = conjunctions.two_body_j2 if force == "two_body_j2" else perturbations.two_body
    started = time.perf_counter()
    # compile (or load) both kernels: a wide threshold so that some pair is refined
    conjunctions.screen(K_EARTH, r[:200], v[:200], (0.0, 600.0), 200.0, f=f)
    compile_s = time.perf_counter() - started
    threads = numba.get_num_threads() if settings.TARGET == "parallel" else 1
    runs = []
    for chunk in chunks:
        stats = {}
        load = os.getloadavg()[0]
        started, cpu, usage = time.perf_counter(), time.process_time(), _usage()
        table = conjunctions.screen(K_EARTH, r, v, (0.0, days * 86400.0), threshold, f=f,
                                    dt=dt, stats=stats, chunk=chunk)
        total, cpu = time.perf_counter() - started, time.process_time() - cpu
        runs.append(({"target": settings.TARGET, "force": force, "threads": threads,
                      "compile_s": compile_s, "chunk": chunk, "total_s": total, "cpu_s": cpu,
                      **_spent(usage), "load_before": load,
                      # "identical": the pairs of identical objects (rows), counted
                      **{k: (float(x) if isinstance(x, float) else
                             len(x) if isinstance(x, np.ndarray) else int(x))
                         for k, x in stats.items()},
                      "approaches": len(table)}, table))
    result, table = runs[0]
    if len(runs) > 1:
        result = dict(result, by_chunk=[run for run, _ in runs])
    columns = {name: table[name] for name in table.columns}
    return result, columns


def _import_cascade():
    """``import cascade``, its bundled SLEEF made visible to its JIT first: heyoka's
    JIT resolves the vector math it emits (Sleef_powd4_u10avx2...) among the
    process's global symbols, and the wheel's libsleef is loaded locally."""
    import ctypes
    import importlib.util

    spec = importlib.util.find_spec("cascade")
    if spec is None:
        raise SystemExit("--cascade: ESA's cascade is not installed (pip install --no-deps "
                         "esa-cascade: it pins heyoka 3.0, see the module's docstring)")
    libs = Path(spec.origin).parents[1] / "esa_cascade.libs"
    for lib in sorted(libs.glob("libsleef*")):
        ctypes.CDLL(str(lib), mode=os.RTLD_GLOBAL)
    import cascade

    return cascade


def run_cascade(r, v, days, threshold, ct=CASCADE_CT, n_par_ct=1, threads=None):
    """cascade on the same states, Keplerian, conjunction threshold ``threshold``."""
    csc = _import_cascade()
    if threads:
        csc.set_nthreads(threads)
    length = R_EARTH  # km: cascade's Kepler dynamics has mu = 1 in its units
    unit_t = float(np.sqrt(length**3 / K_EARTH))  # s
    state = np.zeros((len(r), 7))
    state[:, :3] = r / length
    state[:, 3:6] = v / (length / unit_t)
    started = time.perf_counter()
    # sizes 0 and an infinite minimum collisional radius: conjunctions only, no collisions
    sim = csc.sim(state, ct / unit_t, n_par_ct=n_par_ct, conj_thresh=threshold / length,
                  min_coll_radius=float("inf"))
    build_s = time.perf_counter() - started
    final = days * 86400.0 / unit_t
    load = os.getloadavg()[0]
    started, cpu, usage = time.perf_counter(), time.process_time(), _usage()
    while sim.time < final:
        outcome = sim.propagate_until(final)
        if outcome != csc.outcome.time_limit:
            raise RuntimeError(f"cascade stopped early: {outcome} {sim.interrupt_info}")
    total, cpu = time.perf_counter() - started, time.process_time() - cpu
    conj = sim.conjunctions
    dv = conj["state_i"][:, 3:6] - conj["state_j"][:, 3:6]
    i, j = np.minimum(conj["i"], conj["j"]), np.maximum(conj["i"], conj["j"])
    columns = {"i": i.astype(np.int64), "j": j.astype(np.int64), "tca": conj["time"] * unit_t,
               "miss": conj["dist"] * length,
               "speed": np.linalg.norm(dv, axis=1) * length / unit_t}
    result = {"version": csc.__version__, "threads": csc.get_nthreads(), "ct_s": ct,
              "n_par_ct": n_par_ct, "build_s": build_s, "total_s": total, "cpu_s": cpu,
              **_spent(usage), "load_before": load, "approaches": len(conj)}
    return result, columns


def compare(ours, theirs, threshold, span):
    """Match the two tables' approaches: same pair, TCAs within SAME_TCA seconds.

    Unmatched rows are sorted into those at an end of the span (a minimum on the
    span's boundary, which one tool counts and the other does not), those within
    a metre of the threshold, and the rest."""
    def keyed(table):
        rows = {}
        for n, key in enumerate(zip(table["i"].tolist(), table["j"].tolist())):
            rows.setdefault(key, []).append(n)
        return rows

    mine, other = keyed(ours), keyed(theirs)
    matched, used = [], set()
    for key, rows in mine.items():
        for a in rows:
            best = min((b for b in other.get(key, []) if b not in used),
                       key=lambda b: abs(theirs["tca"][b] - ours["tca"][a]), default=None)
            if best is not None and abs(theirs["tca"][best] - ours["tca"][a]) < SAME_TCA:
                matched.append((a, best))
                used.add(best)
    a = np.array([m[0] for m in matched], dtype=int)
    b = np.array([m[1] for m in matched], dtype=int)

    def unmatched(table, taken):
        rest = np.setdiff1d(np.arange(len(table["i"])), taken)
        edge = (table["tca"][rest] < SAME_TCA) | (table["tca"][rest] > span - SAME_TCA)
        near = ~edge & (np.abs(table["miss"][rest] - threshold) < 1e-3)
        return {"count": len(rest), "at_span_ends": int(edge.sum()),
                "within_1m_of_threshold": int(near.sum()),
                "other": int((~edge & ~near).sum()),
                "other_rows": [{c: table[c][k].item() for c in ("i", "j", "tca", "miss")}
                               for k in rest[~edge & ~near][:10]]}

    dt = np.abs(ours["tca"][a] - theirs["tca"][b])
    dm = np.abs(ours["miss"][a] - theirs["miss"][b])
    return {"ours": len(ours["i"]), "cascade": len(theirs["i"]),
            "matched": len(a),
            "tca_diff_max_s": float(dt.max()) if len(a) else None,
            "tca_diff_median_s": float(np.median(dt)) if len(a) else None,
            "miss_diff_max_m": float(dm.max() * 1e3) if len(a) else None,
            "miss_diff_median_m": float(np.median(dm) * 1e3) if len(a) else None,
            "ours_only": unmatched(ours, a), "cascade_only": unmatched(theirs, b)}


def _worker(args):
    """One side of a ``--cascade`` run, in its own process: reads the population,
    writes its table and timings."""
    data = np.load(args.population)
    r, v = data["r"], data["v"]
    if args.worker == "cascade":
        result, columns = run_cascade(r, v, args.days, args.threshold,
                                      n_par_ct=args.n_par_ct, threads=args.threads)
    else:
        result, columns = run_ours(r, v, args.days, args.threshold, args.dt, "two_body")
    np.savez(args.out, **columns)
    Path(args.out + ".json").write_text(json.dumps(result))
    return 0


def _side(args, population, worker, target=None):
    out = str(Path(population).with_name(f"{worker}-{target or 'x'}"))
    command = [sys.executable, __file__, "--worker", worker, "--population", population,
               "--out", out, "--days", str(args.days), "--threshold", str(args.threshold),
               "--n-par-ct", str(args.n_par_ct)]
    if args.dt:
        command += ["--dt", str(args.dt)]
    if args.threads:
        command += ["--threads", str(args.threads)]
    env = dict(os.environ, HAPSIRA_TARGET=target or os.environ["HAPSIRA_TARGET"])
    subprocess.run(command, check=True, env=env)
    columns = dict(np.load(out + ".npz"))
    return json.loads(Path(out + ".json").read_text()), columns


def huge_pages():
    """The kernel's transparent huge page modes and numpy's request for them (its
    ``NUMPY_MADVISE_HUGEPAGE``, unset: numpy asks for them on large arrays)."""
    modes = {}
    for name in ("enabled", "defrag"):
        try:
            modes[name] = Path(f"/sys/kernel/mm/transparent_hugepage/{name}").read_text().strip()
        except OSError:
            modes[name] = None
    return dict(modes, numpy_madvise_hugepage=os.environ.get("NUMPY_MADVISE_HUGEPAGE"))


def against_cascade(args):
    """Our screen on each target and cascade on one population; the lists matched."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import harness

    r, v = population(args.n, args.data)
    span = args.days * 86400.0
    report = {"machine": args.machine, "machine_info": harness.machine(), "objects": args.n, "days": args.days,
              "threshold_km": args.threshold, "dynamics": "two-body (Kepler), GM "
              f"{K_EARTH} km^3/s^2", "population": "debris catalogs of HAPSIRA_TEST_DATA at "
              "their latest epoch (SGP4), rotated copies beyond them", "cpu_count":
              os.cpu_count(), "huge_pages": huge_pages(), "label": args.label,
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "ours": [], "agreement": {}}
    with tempfile.TemporaryDirectory() as folder:
        pop = str(Path(folder) / "population.npz")
        np.savez(pop, r=r, v=v)
        tables = {}
        for target in args.targets:
            result, tables[target] = _side(args, pop, "ours", target)
            report["ours"].append(result)
            print(f"ours, {target} ({result['threads']} thread(s)): compile/load "
                  f"{result['compile_s']:.1f} s, propagation {result['propagate_s']:.2f} s, "
                  f"broad phase {result['broad_s']:.2f} s, refinement {result['narrow_s']:.2f} "
                  f"s, total {result['total_s']:.2f} s ({result['cpu_s']:.2f} s CPU: user "
                  f"{result['user_s']:.2f}, system {result['sys_s']:.2f}), "
                  f"{result['windows']} windows, {result['candidates']} candidates, "
                  f"{result['approaches']} approaches", flush=True)
        result, theirs = _side(args, pop, "cascade")
        report["cascade"] = result
        print(f"cascade {result['version']} ({result['threads']} threads, ct "
              f"{result['ct_s']:g} s, n_par_ct {result['n_par_ct']}): build/JIT "
              f"{result['build_s']:.1f} s, total {result['total_s']:.2f} s "
              f"({result['cpu_s']:.2f} s CPU: user {result['user_s']:.2f}, system "
              f"{result['sys_s']:.2f}), {result['approaches']} approaches", flush=True)
        for target, ours in tables.items():
            agreement = compare(ours, theirs, args.threshold, span)
            report["agreement"][target] = agreement
            print(f"{target} vs cascade: {json.dumps({k: x for k, x in agreement.items()})}")
    if args.json:
        path = Path(args.json)
        runs = json.loads(path.read_text())["runs"] if path.exists() else []
        runs.append(report)
        path.write_text(json.dumps({"runs": runs}, indent=1) + "\n")
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--days", type=float, default=1.0)
    parser.add_argument("--threshold", type=float, default=5.0, help="km")
    parser.add_argument("--dt", type=float, default=None, help="broad-phase sampling, s")
    parser.add_argument("--chunk", type=int, nargs="+", default=[0],
                        help="windows per chunk (0: the default); several: one run each")
    parser.add_argument("--data", default=os.environ.get(
        "HAPSIRA_TEST_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
    parser.add_argument("--cascade", action="store_true",
                        help="also run ESA's cascade on the same population and match lists")
    parser.add_argument("--targets", nargs="+", default=["cpu", "parallel"])
    parser.add_argument("--threads", type=int, default=None, help="cascade's threads")
    parser.add_argument("--n-par-ct", type=int, default=1,
                        help="cascade's collisional steps processed at once")
    parser.add_argument("--json", default=None, help="append the run here")
    parser.add_argument("--label", default=None, help="a name for the run in --json")
    parser.add_argument("--machine", default="2-core shared dev box, loaded")
    parser.add_argument("--worker", choices=["ours", "cascade"], help=argparse.SUPPRESS)
    parser.add_argument("--population", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return _worker(args)
    if args.cascade:
        return against_cascade(args)
    r, v = population(args.n, args.data)
    result, _ = run_ours(r, v, args.days, args.threshold, args.dt,
                         chunks=[None if c == 0 else c for c in args.chunk])
    for run in result.get("by_chunk", ()):
        print(f"chunk {run['chunk'] or 'default'} windows: propagation "
              f"{run['propagate_s']:.2f} s, broad phase {run['broad_s']:.2f} s, refinement "
              f"{run['narrow_s']:.2f} s, total {run['total_s']:.2f} s, approaches "
              f"{run['approaches']}")
    print(f"compile/load: {result['compile_s']:.1f} s")
    print(f"target {result['target']}: {args.n} objects, {args.days:g} days, threshold "
          f"{args.threshold:g} km, dt {result['dt']:.2f} s, {result['windows']} windows")
    print(f"propagation {result['propagate_s']:.2f} s, broad phase {result['broad_s']:.2f} s "
          f"({result['broad_cpu_s']:.2f} s CPU), "
          f"refinement {result['narrow_s']:.2f} s, total {result['total_s']:.2f} s wall "
          f"({result['cpu_s']:.2f} s CPU time of this process, all threads: user "
          f"{result['user_s']:.2f}, system {result['sys_s']:.2f})")
    print(f"grid pairs {result['grid_pairs']}, chord-tested (boxes overlapping) "
          f"{result.get('chord_tests', 'n/a')}, candidates refined {result['candidates']}, "
          f"approaches {result['approaches']}")
    if args.json:
        path = Path(args.json)
        runs = json.loads(path.read_text())["runs"] if path.exists() else []
        runs.append({"label": args.label, "machine": args.machine, "n": args.n,
                     "days": args.days, "threshold_km": args.threshold,
                     "date": time.strftime("%Y-%m-%d"), **result})
        path.write_text(json.dumps({"runs": runs}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
