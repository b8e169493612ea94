"""The lane loop (``HAPSIRA_LANES``) against the per-object kernel, alternated in one process.

    [HAPSIRA_TARGET=parallel] python benchmarks/lanes.py [--widths 0,4,8,8@once]
        [--workloads leo,van_der_pol,lotka_volterra,leo_event,van_der_pol_event,
                     van_der_pol_dense]
        [--n-leo 256] [--n-ensemble 4000]
        [--rounds 5] [--n-heyoka 0] [--out lanes_NAME]

One core (the cpu target, the default): process CPU time (``time.process_time``) of each
call; all cores (``HAPSIRA_TARGET=parallel``, numba's threads): the wall time of each
call, and heyoka's batch mode also on all cores (its ensemble propagation, and one batch
integrator per core in Python threads).
Compile excluded (each kernel is built and called on the whole batch once before the
rounds start). Each round calls every width of a workload once, in turn, so that the
box's load falls on all of them alike; reported per width: best and median over the
rounds, in us/object-day (LEO: two-body + J2, one day, rtol 1e-11, ``cowell``) or
us/object (Van der Pol, Lotka-Volterra: DOP853, rtol 1e-9, atol 1e-12, final state
only). With an event (not run by default): ``leo_event``, the same LEO objects with
cowell's ascending node (`NodeCrossEvent`, counted, never terminal), and
``van_der_pol_event``, Van der Pol with x's zero crossings in both directions counted;
their event times and counts are compared too. ``van_der_pol_dense``: Van der Pol with
``dense_output=True`` (the step records: two runs of the kernel, the first counting the
steps), its breakpoints and interpolants compared too. Width 0 is the per-object kernel
(``HAPSIRA_LANES=off``); every other width's results (states, status, nfev, nsteps)
must equal its bytes, or the script says so and exits 1. A width is compiled as
``HAPSIRA_JOIN`` says (on by default: the generic lane loop joined to f,
`hapsira_core.targets._join.JoinedLaneKernel`); ``W@once`` is width W compiled at once
(``HAPSIRA_JOIN=0``), measured in the same rounds. The load average is read before and
after.
"""

import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("HAPSIRA_TARGET", "cpu")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

import harness  # noqa: E402
import workloads  # noqa: E402
from hapsira_core import settings  # noqa: E402


def _leo(n, event=False):
    from hapsira_cowell import cowell
    from hapsira_cowell.models.events import NodeCrossEvent

    r0, v0 = workloads.leo_cloud(n, seed=0)
    tofs = np.array([workloads.DAY])
    events = [NodeCrossEvent(direction=1)] if event else []

    def call():
        res = cowell(workloads.K, r0, v0, tofs, f=workloads.two_body_j2,
                     rtol=workloads.RTOL, atol=workloads.ATOL, events=events)
        out = {f: np.asarray(getattr(res, f)) for f in ("rr", "vv", "status", "nfev",
                                                       "nsteps")}
        if event:
            out.update(t_events=np.asarray(res.t_events[0]), n_events=np.asarray(res.n_events))
        return out
    return call


def _crossing():
    from hapsira_core.jit import hjit

    @hjit
    def crossing(t, y, p):
        return y[0]
    return crossing


def _ensemble(name, n, event=False, dense=False):
    from hapsira_core.ivp import Event, solve_ivp

    y0, params = workloads.problem(name, n)
    fun = workloads.ENSEMBLES[name]
    events = [Event(_crossing())] if event else []

    def call():
        res = solve_ivp(fun, workloads.SPANS[name], y0, method="DOP853",
                        rtol=workloads.ENSEMBLE_RTOL, atol=workloads.ENSEMBLE_ATOL,
                        params=params, events=events, dense_output=dense)
        out = {f: np.asarray(getattr(res, f)) for f in ("y", "status", "nfev", "nsteps")}
        if dense:  # the step records: breakpoints and interpolants
            out.update(steps=np.asarray(res.sol._records[3]),
                       dense=np.asarray(res.sol._records[4]))
        if event:
            out.update(t_events=np.asarray(res.t_events), y_events=np.asarray(res.y_events),
                       n_events=np.asarray(res.n_events))
        return out
    return call


UNITS = {"leo": "us/object-day", "van_der_pol": "us/object", "lotka_volterra": "us/object",
         "leo_event": "us/object-day", "van_der_pol_event": "us/object",
         "van_der_pol_dense": "us/object"}


def _heyoka(n, batch, threads=None):
    """heyoka's Taylor integrator on the first n LEO objects (`peers`' model and
    tolerance), one at a time or in SIMD batches of its recommended size; ``threads``:
    the batches on all cores, by heyoka's ensemble propagation (``"ensemble"``: a copy of
    the batch integrator per batch of objects, ``algorithm="thread"``) or by one batch
    integrator per core, each in a Python thread (``"threads"``: heyoka releases the GIL
    while it propagates); None where heyoka is not installed."""
    try:
        import heyoka as hy
    except ImportError:
        return None
    import peers

    system = peers.heyoka_system(hy)
    r0, v0 = workloads.leo_cloud(n, seed=0)
    state = np.concatenate([r0, v0], axis=1)
    if batch:
        size = hy.recommended_simd_size()
        n -= n % size
        ta = hy.taylor_adaptive_batch(system, state[:size].T.copy(), tol=workloads.RTOL)
        if threads == "ensemble":
            def start(copy, k):  # the k-th batch of objects
                copy.set_time(0.0)
                copy.state[:] = state[k * size:(k + 1) * size].T
                return copy

            def call():
                out = hy.ensemble_propagate_until(ta, workloads.DAY, n // size, start,
                                                  algorithm="thread")
                # every batch reached the day
                assert all(float(np.min(r[0].time)) == workloads.DAY for r in out)
            return call, n
        if threads == "threads":
            from concurrent.futures import ThreadPoolExecutor

            cores = os.cpu_count()
            copies = [ta] + [hy.taylor_adaptive_batch(system, state[:size].T.copy(),
                                                      tol=workloads.RTOL)
                             for _ in range(cores - 1)]

            def share(j):  # every cores-th batch from the j-th
                mine = copies[j]
                for first in range(j * size, n, cores * size):
                    mine.set_time(0.0)
                    mine.state[:] = state[first:first + size].T
                    mine.propagate_until(workloads.DAY)
                return float(np.min(mine.time))

            def call():
                with ThreadPoolExecutor(cores) as pool:
                    reached = list(pool.map(share, range(cores)))
                assert min(reached) == workloads.DAY
            return call, n

        def call():
            for start in range(0, n, size):
                ta.set_time(0.0)
                ta.state[:] = state[start:start + size].T
                ta.propagate_until(workloads.DAY)
    else:
        ta = hy.taylor_adaptive(system, list(state[0]), tol=workloads.RTOL)

        def call():
            for i in range(n):
                ta.time = 0.0
                ta.state[:] = state[i]
                ta.propagate_until(workloads.DAY)
    return call, n


def _use(width, kernels):
    """Set up the kernels of ``width`` (``W`` or ``W@once``): its lane width, its
    ``HAPSIRA_JOIN``, its own built kernels (`build.KERNELS` does not tell a joined
    kernel from one compiled at once)."""
    from hapsira_core.ivp import build

    lanes, _, how = str(width).partition("@")
    settings.LANES = int(lanes)
    settings.JOIN = "off" if how == "once" else JOIN
    build.KERNELS = kernels.setdefault(width, {})


JOIN = settings.JOIN


def run(name, call, n, widths, rounds, others=None, clock=time.process_time):
    """``others``: {name: (call, n_objects)} measured in the same rounds (heyoka);
    ``clock``: process time (one core) or wall time (all cores)."""
    others = {k: v for k, v in (others or {}).items() if v is not None}
    times = {w: [] for w in list(widths) + list(others)}
    compile_s, reference, identical, kernels = {}, None, {}, {}
    for w in widths:  # build and warm every kernel first
        _use(w, kernels)
        t = time.perf_counter()
        out = call()
        compile_s[w] = round(time.perf_counter() - t, 1)
        if w == widths[0]:
            reference = out
        identical[w] = all(out[k].tobytes() == reference[k].tobytes() for k in reference)
        print(f"{name}: width {w} built and called in {compile_s[w]} s; "
              f"bit-identical to width {widths[0]}: {identical[w]}", flush=True)
    for other, (other_call, _) in others.items():
        t = time.perf_counter()
        other_call()
        compile_s[other] = round(time.perf_counter() - t, 1)
    for r in range(rounds):
        for w in widths:
            _use(w, kernels)
            t = clock()
            out = call()
            times[w].append(clock() - t)
            identical[w] = identical[w] and all(
                out[k].tobytes() == reference[k].tobytes() for k in reference)
        for other, (other_call, _) in others.items():
            t = clock()
            other_call()
            times[other].append(clock() - t)
    rows = {}
    for w in times:
        scale = 1e6 / (others[w][1] if w in others else n)  # one day per LEO object
        rows[w] = {"best": round(scale * min(times[w]), 2),
                   "median": round(scale * statistics.median(times[w]), 2),
                   "all": [round(scale * s, 2) for s in times[w]],
                   "first_call_s": compile_s[w]}
        if w in others:
            rows[w]["n_objects"] = others[w][1]
        else:
            rows[w]["bit_identical_to_off"] = identical[w]
    base = rows[widths[0]]
    for w in rows:
        rows[w]["speedup_best"] = round(base["best"] / rows[w]["best"], 2)
        rows[w]["speedup_median"] = round(base["median"] / rows[w]["median"], 2)
    mean_steps = float(reference["nsteps"].mean())
    row = {"n_objects": n, "unit": UNITS[name], "mean_steps": mean_steps,
           "mean_nfev": float(reference["nfev"].mean()), "widths": rows}
    if "n_events" in reference:
        row["mean_events"] = float(reference["n_events"].sum() / n)
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--widths", default="0,4,8",
                        help="lane widths, 0 (the per-object kernel) first; W@once: width W "
                             "compiled at once (HAPSIRA_JOIN=0)")
    parser.add_argument("--workloads", default="leo,van_der_pol,lotka_volterra")
    parser.add_argument("--n-leo", type=int, default=256)
    parser.add_argument("--n-ensemble", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--n-heyoka", type=int, default=0,
                        help="LEO objects for heyoka, scalar and SIMD batch, in the same rounds "
                             "(0: not run)")
    parser.add_argument("--out", default="lanes", help="benchmarks/results/<name>.json or path")
    args = parser.parse_args()
    widths = [w if "@" in w else int(w) for w in args.widths.split(",")]
    import numba

    from hapsira_core.targets import _host

    parallel = settings.TARGET == "parallel"
    clock = time.perf_counter if parallel else time.process_time
    load_before = os.getloadavg()
    how = (f"parallel target ({numba.get_num_threads()} threads), wall time per call"
           if parallel else "cpu target (one core), process CPU time per call")
    result = {"method": f"one process, {how}, "
                        "widths alternated round by round, compile excluded; width 0 is the "
                        "per-object kernel (HAPSIRA_LANES=off)",
              "target": settings.TARGET, "threads": numba.get_num_threads(),
              "cpu_count": os.cpu_count(),
              "llvm_cpu": _host.cpu_features()[0], "vector_doubles": _host.vector_doubles(),
              "auto_width": _host.AUTO_LANES_PER_VECTOR * _host.vector_doubles(),
              "join": JOIN, "rounds": args.rounds, "load_average_before": load_before,
              "workloads": {}}
    failed = False
    for name in args.workloads.split(","):
        others = None
        if name in ("leo", "leo_event"):
            call, n = _leo(args.n_leo, name == "leo_event"), args.n_leo
            if args.n_heyoka and name == "leo":
                others = {"heyoka_scalar": _heyoka(args.n_heyoka, False),
                          "heyoka_batch": _heyoka(args.n_heyoka, True)}
                if parallel:
                    others["heyoka_batch_ensemble"] = _heyoka(args.n_heyoka, True, "ensemble")
                    others["heyoka_batch_threads"] = _heyoka(args.n_heyoka, True, "threads")
        else:
            event, dense = name.endswith("_event"), name.endswith("_dense")
            call, n = _ensemble(name.removesuffix("_event").removesuffix("_dense"),
                                args.n_ensemble, event, dense), args.n_ensemble
        row = run(name, call, n, widths, args.rounds, others, clock)
        result["workloads"][name] = row
        for w, r in row["widths"].items():
            failed = failed or not r.get("bit_identical_to_off", True)
            print(f"{name} W={w}: best {r['best']} median {r['median']} {row['unit']} "
                  f"(x{r['speedup_best']} best, x{r['speedup_median']} median), "
                  f"identical {r.get('bit_identical_to_off', '-')}", flush=True)
    result["load_average_after"] = os.getloadavg()
    harness.write_result(args.out, json.loads(json.dumps(result)), indent=1)
    if failed:
        print("LANE RESULTS DIFFER FROM THE PER-OBJECT KERNEL'S")
        sys.exit(1)


if __name__ == "__main__":
    main()
