"""The GPU with the function a user writes: the reference workload with the textbook
right-hand side, rewritten (shared reciprocals) and as written, beside the tuned one,
and beside diffrax and CuBIE on the same GPU.

    HAPSIRA_TARGET=cuda python benchmarks/gpu_user_f.py --n 1000000 [--name h100]
        [--peers diffrax,cubie] [--diffrax-n N] [--cubie-n N] [--peer-timeout 600]

In one process, on the reference workload (LEO cloud, two-body + J2, one day,
rtol 1e-11, atol 1e-12): ``cowell`` with the library's ``two_body`` +
``J2_perturbation`` (tuned), with ``workloads.textbook_cowell`` as the
framework compiles it by default on cuda (``HAPSIRA_FASTMATH=auto``: shared
reciprocals, `hapsira_core.kernels.reciprocals`), and with the same function
marked `as_written`. Each is timed as a user calls it (wall clock through the
public API, inputs and outputs in host memory), median of ``--repeat`` calls
after one warm-up call (compile); the three take turns call by call, so that no
one of them alone is timed on a machine still settling (timed one after the other,
the tuned f, timed first, came out 1.4% faster than the rewritten one in one H200
run and 2.4% slower in the next, 2026-11-29). Positions are checked against scipy
DOP853 at rtol 1e-13 on ``--n-ref`` objects.

Then the peers of ``--peers``, each in its own process (a failure there is
reported, not raised), on the same objects (``workloads.leo_cloud(n)``, seed
0: its first objects do not depend on ``n``), the same model and tolerances:

* ``diffrax``: `peers.diffrax_dopri8`, ``Dopri8`` with a PID controller,
  ``jax.jit(jax.vmap(diffeqsolve))``, ``max_steps=4096`` per object, inputs
  already on the device and outputs left there, at ``--diffrax-n`` objects;
* ``cubie``: `peers.cubie_cowell`, CuBIE's ``Solver`` (``create_ODE_system``
  from equation strings, the constants of workloads.py), its ``dop853``
  tableau with a PID controller, float64, final state only, one run per object
  (``grid_type="verbatim"``), host arrays in and out, at ``--cubie-n``
  objects.

Each peer: its first call (compile included), the best and the median of
``--peer-repeat`` further calls, its accepted steps (orbit-steps/s) and the
largest position error of its first ``--n-ref`` objects against the same
scipy reference. Neither is scaled to ``--n``: ``diffrax_n`` and ``cubie_n``
say how many objects each ran. Writes ``results/gpu_user_f[_<name>].json``
(once ours are measured, again after each peer) with the fields issue 29
names; ``diffrax_s`` and ``cubie_s`` (best of the peer's calls) are null
where the peer did not run (the reason in ``notes``).
"""

import argparse
import statistics
import sys
import time

import numpy as np

import harness
import peers
import workloads
from workloads import ATOL, DAY, K, RTOL

#: workloads.leo_cloud's default seed: ours and the peers integrate the same objects
SEED = 0
PEERS = ("diffrax", "cubie")


def timed(calls, repeat):
    """``{name: (median s, samples s, last result, first call and runs s)}`` of ``calls``
    (``{name: call}``): each called once (compile, warm-up), then ``repeat`` rounds of
    one call each, in turn."""
    spent = {}
    for name, call in calls.items():
        start = time.perf_counter()
        call()  # compile (or load) and warm up
        spent[name] = time.perf_counter() - start
    samples = {name: [] for name in calls}
    results = {}
    for _ in range(repeat):
        for name, call in calls.items():
            start = time.perf_counter()
            results[name] = call()
            samples[name].append(time.perf_counter() - start)
            spent[name] += samples[name][-1]
    return {name: (statistics.median(samples[name]), samples[name], results[name],
                   spent[name]) for name in calls}


def count(text):
    """An object count from the command line: 1000000 or 1e6."""
    return int(float(text))


def run_peer(peer, n, args):
    """One peer at ``n`` objects (its own process): its dict, with ``final_rr`` of the first
    ``--n-ref`` objects where it ran."""
    keep = min(args.n_ref, n)
    if peer == "diffrax":
        return peers.diffrax_dopri8(n, SEED, timeout=args.peer_timeout, repeat=args.peer_repeat,
                                    keep=keep)
    return peers.cubie_cowell(n, SEED, repeat=args.peer_repeat, keep=keep,
                              timeout=args.peer_timeout)


PEER_NOTES = {
    "diffrax": "diffrax {version} Dopri8, PIDController(rtol, atol of the workload), dt0 "
               "automatic, max_steps {max_steps} per object (the most one took: {steps_max}), "
               "jax.jit(jax.vmap(diffeqsolve)) on {device}, float64; inputs on the device "
               "before the clock starts, outputs left there; orbit_steps: its "
               "num_accepted_steps",
    "cubie": "CuBIE {version} Solver, dop853 tableau, PID controller at the workload's "
             "rtol/atol, first step {dt} s, dt_max {dt_max} s, float64, final state (and its "
             "step counters) only, pre-built (states, runs) host arrays in, host arrays out; "
             "orbit_steps: its steps less its rejected ones ({rejected_steps} rejected)",
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=count, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--n-ref", type=int, default=10)
    parser.add_argument("--name", default="")
    parser.add_argument("--out", default=None,
                        help="result path (default results/gpu_user_f[_<name>].json)")
    parser.add_argument("--peers", default=",".join(PEERS),
                        help="comma-separated, of diffrax,cubie ('' for none)")
    parser.add_argument("--diffrax-n", type=count, default=None,
                        help="objects diffrax runs (default: --n)")
    parser.add_argument("--cubie-n", type=count, default=None,
                        help="objects CuBIE runs (default: --n)")
    parser.add_argument("--peer-repeat", type=int, default=3,
                        help="timed calls of each peer after its first (best and median)")
    parser.add_argument("--peer-timeout", type=float, default=600.0,
                        help="seconds for each peer's process (import, compile, all calls)")
    args = parser.parse_args()
    wanted = [p.strip() for p in args.peers.split(",") if p.strip()]
    if set(wanted) - set(PEERS):
        parser.error(f"--peers: unknown {sorted(set(wanted) - set(PEERS))} (of {PEERS})")
    peer_n = {"diffrax": args.diffrax_n or args.n, "cubie": args.cubie_n or args.n}
    args.n_ref = min(args.n_ref, args.n)

    from scipy.integrate import solve_ivp as scipy_solve_ivp

    from hapsira_core import settings
    from hapsira_core.jit import as_written, hjit
    from hapsira_cowell import cowell

    rr, vv = workloads.leo_cloud(args.n, SEED)
    tofs = np.array([DAY])
    exact = as_written(hjit(workloads.textbook_cowell.py_func))
    variants = {"tuned": workloads.two_body_j2, "rewritten": workloads.textbook_cowell,
                "as_written": exact}
    out = {"device": harness.machine().get("gpus"), "target": settings.TARGET,
           "fastmath": settings.FASTMATH, "n": args.n, "repeat": args.repeat, "notes": []}
    results = {}
    runs = timed({name: (lambda f=f: cowell(K, rr, vv, tofs, RTOL, ATOL, f=f))
                  for name, f in variants.items()}, args.repeat)
    for name, (median, samples, res, spent) in runs.items():
        results[name] = res
        steps = res.nsteps.astype(float)
        out[name] = {"median_s": median, "samples_s": samples,
                     "first_call_and_runs_s": spent,
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
    out["notes"].append(f"ours: median of {args.repeat} calls of each f, the three taking "
                        "turns call by call after a first call of each (compile)")
    out["seed"] = SEED
    out["notes"].extend(f"{peer}: not run (not in --peers)" for peer in PEERS
                        if peer not in wanted)
    name = args.out or "gpu_user_f" + (f"_{args.name}" if args.name else "")
    print(harness.write_result(name, out), file=sys.stderr)  # again after each peer
    for peer in (p for p in PEERS if p in wanted):
        n = peer_n[peer]
        out[f"{peer}_n"] = n
        print(f"{peer}: {n} objects, in its own process ...", file=sys.stderr, flush=True)
        start = time.perf_counter()
        result = run_peer(peer, n, args)
        result["process_s"] = time.perf_counter() - start
        final = result.pop("final_rr", None)
        out[peer] = result
        if result.get("seconds") is None:
            reason = result.get("missing") or result.get("error") or "no result"
            out["notes"].append(f"{peer}: not run at n={n} ({reason})")
            print(f"{peer:11s} not run: {reason}", flush=True)
            print(harness.write_result(name, out), file=sys.stderr)
            continue
        seconds = result["seconds"]
        out[f"{peer}_s"] = seconds
        if result.get("samples_s"):
            result["median_s"] = statistics.median(result["samples_s"])
        if result.get("orbit_steps"):
            result["orbit_steps_per_s"] = result["orbit_steps"] / seconds
            result["steps_mean"] = result["orbit_steps"] / n
        if final is not None and len(final):
            final = np.asarray(final, dtype=float)
            result["n_ref"] = len(final)
            result["max_pos_err_km"] = float(np.abs(final - reference[:len(final)]).max())
        fields = _Missing(result.get("settings", {}), **result)
        out["notes"].append(
            f"{peer}: ran at n={n}" + ("" if n == args.n else f" (not --n={args.n}; not scaled)")
            + f", same objects as ours (leo_cloud seed {SEED}); best of {args.peer_repeat} "
              "calls after a first (compile); " + PEER_NOTES[peer].format_map(fields))
        ratio = f", {seconds / out['tuned_s']:.2f}x tuned" if n == args.n else ""
        print(f"{peer:11s} {seconds:.4f} s  "
              f"{result.get('orbit_steps_per_s', float('nan')):.3e} orbit-steps/s  "
              f"(n={n}{ratio}; first call {result.get('first_call_s', float('nan')):.1f} s; "
              f"{result.get('steps_mean', float('nan')):.1f} steps/object; max position error "
              f"{result.get('max_pos_err_km', float('nan')):.2e} km)", flush=True)
        print(harness.write_result(name, out), file=sys.stderr)
    print(f"as written / tuned: {out['as_written_s'] / out['tuned_s']:.2f}x "
          f"(without the rewrite {out['as_written_without_rewrite_s'] / out['tuned_s']:.2f}x); "
          f"max position error {out['max_pos_err_km']:.2e} km")


class _Missing(dict):
    """``str.format_map`` with ``?`` for a field a peer did not report."""

    def __missing__(self, key):
        return "?"


if __name__ == "__main__":
    main()
