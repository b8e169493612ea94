"""This checkout against an earlier git revision: the same results bit for bit, and the speed, paired.

    python benchmarks/against_revision.py [--rev c3639da] [--n 300] [--rounds 3] [--platform cpu]

The reference workload (two-body + J2, LEO cloud, one day; this checkout's
``benchmarks/workloads.py`` for both sources, so that only ``src/`` differs)
with one output time and with 1440 (one a minute). The revision is checked
out with ``git worktree`` into a temporary folder; each measurement runs in
its own process with ``PYTHONPATH`` at one source's ``src/`` (compile
excluded, best of ``--calls`` calls, CPU time of the process so that other
jobs on the machine disturb it less than wall time), alternating the two
sources ``--rounds`` times.

Each process also saves its arrays (``rr``, ``vv``, ``status``, ``nsteps``,
``nfev`` of the last call) to a ``.npy`` file; they are compared byte for
byte between the two sources (and between rounds of the same source): the
accepted steps and evaluations and the states, bit-identical or not, with
the number of objects that differ and the largest relative position
difference when they do. Prints microseconds per object-day and the
comparison; writes ``benchmarks/results/against_<rev>.json``. Exits 1 when
the results differ (``--allow-differences``: 0).
"""

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import harness  # noqa: E402

FIELDS = ("rr", "vv", "status", "nsteps", "nfev")

SCRIPT = """
import json, sys, time
import numpy as np
sys.path.insert(0, {bench!r})
import workloads as workload
import hapsira_core
from hapsira_cowell import cowell
r0, v0 = workload.leo_cloud({n}, seed=0)
tofs = np.linspace(0.0, workload.DAY, {m} + 1)[1:]
cowell(workload.K, r0[:2], v0[:2], tofs, f=workload.two_body_j2)
best = 1e99
for _ in range({calls}):
    t = time.process_time()
    res = cowell(workload.K, r0, v0, tofs, f=workload.two_body_j2)
    best = min(best, time.process_time() - t)
np.save({out!r}, {{k: np.asarray(getattr(res, k)) for k in {fields!r}}}, allow_pickle=True)
print(json.dumps({{"us_per_object_day": best / {n} * 1e6, "nfev": float(res.nfev.mean()),
                  "steps": float(res.nsteps.mean()), "core": hapsira_core.__file__}}))
"""


def measure(src, n, m, calls, platform, out):
    """One process on the source tree ``src`` (this checkout's workloads.py); arrays to ``out``."""
    env = harness.child_env(platform, pythonpath=src)
    script = SCRIPT.format(bench=HERE, n=n, m=m, calls=calls, out=out, fields=FIELDS)
    return harness.run_child(script, env=env)


def load(path):
    return np.load(path, allow_pickle=True).item()


def compare(a, b):
    """Byte-for-byte comparison of two saved results."""
    out = {}
    for key in FIELDS:
        x, y = a[key], b[key]
        same = x.shape == y.shape and x.dtype == y.dtype and x.tobytes() == y.tobytes()
        entry = {"bit_identical": bool(same)}
        if not same and x.shape == y.shape:
            differs = (x != y) & ~(np.isnan(x) & np.isnan(y)) if x.dtype.kind == "f" else x != y
            entry["objects_differing"] = int(differs.reshape(len(x), -1).any(axis=1).sum())
        elif not same:
            entry["shapes"] = [list(x.shape), list(y.shape)]
        out[key] = entry
    if a["rr"].shape == b["rr"].shape and not out["rr"]["bit_identical"]:
        rel = (np.linalg.norm(a["rr"] - b["rr"], axis=-1)
               / np.linalg.norm(b["rr"], axis=-1))
        out["rr"]["max_rel_diff"] = float(np.nanmax(rel))
    out["all_bit_identical"] = all(out[k]["bit_identical"] for k in FIELDS)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", default="c3639da", help="a git revision of this repository")
    parser.add_argument("--n", type=int, default=300, help="objects")
    parser.add_argument("--rounds", type=int, default=3, help="alternations of the two sources")
    parser.add_argument("--calls", type=int, default=5, help="timed calls per process (best)")
    parser.add_argument("--outputs", default="1,1440", help="output times per object, per case")
    harness.add_platform(parser, "cpu")
    parser.add_argument("--name", default=None,
                        help="result file (default: against_<rev>, in benchmarks/results)")
    parser.add_argument("--allow-differences", action="store_true",
                        help="exit 0 even when the results are not bit-identical")
    args = parser.parse_args()
    outputs = [int(m) for m in args.outputs.split(",")]
    with tempfile.TemporaryDirectory() as folder:
        tree = os.path.join(folder, "tree")
        subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", tree, args.rev],
                       check=True, capture_output=True)
        try:
            revision = subprocess.run(["git", "-C", tree, "rev-parse", "--short", "HEAD"],
                                      capture_output=True, text=True).stdout.strip()
            sources = {"this checkout": os.path.join(ROOT, "src"),
                       args.rev: os.path.join(tree, "src")}
            saved = {}

            def one(name, src, m, round_):
                path = os.path.join(folder, f"{len(saved)}.npy")
                result = measure(src, args.n, m, args.calls, args.platform, path)
                expected = os.path.join(src, "hapsira_core", "__init__.py")
                assert os.path.samefile(result.pop("core"), expected), (name, src)
                saved[name, m, round_] = load(path)
                return result

            results = {name: {m: [] for m in outputs} for name in sources}
            for round_ in range(args.rounds):
                for m in outputs:
                    for name, src in sources.items():
                        results[name][m].append(one(name, src, m, round_))
                        print(f"round {round_ + 1}, {m} output(s), {name}: "
                              f"{results[name][m][-1]['us_per_object_day']:.1f} us/object-day",
                              flush=True)
        finally:
            subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", tree],
                           capture_output=True)
    names = list(sources)
    identity = {}
    for m in outputs:
        across = compare(saved[names[0], m, 0], saved[names[1], m, 0])
        repeatable = {name: all(compare(saved[name, m, 0], saved[name, m, r])["all_bit_identical"]
                                for r in range(1, args.rounds)) if args.rounds > 1
                      else "not checked (one round)" for name in names}
        identity[str(m)] = dict(across, repeatable_across_rounds=repeatable)
    summary = {name: {str(m): {"best_us": min(r["us_per_object_day"] for r in runs),
                               "all_us": [r["us_per_object_day"] for r in runs],
                               "nfev": runs[0]["nfev"], "steps": runs[0]["steps"]}
                      for m, runs in by_m.items()} for name, by_m in results.items()}
    harness.write_result(args.name or f"against_{args.rev}", {
        "n_objects": args.n, "revision": args.rev, "revision_commit": revision,
        "platform": args.platform, "rounds": args.rounds, "calls": args.calls,
        "clock": "process CPU time, best of calls", "results": summary,
        "bit_identity": identity})
    print("| source | " + " | ".join(f"{m} output(s): us/object-day (nfev, steps)" for m in outputs)
          + " |")
    print("|---|" + "---|" * len(outputs))
    for name, by_m in summary.items():
        print(f"| {name} | " + " | ".join(
            f"{by_m[str(m)]['best_us']:.1f} ({by_m[str(m)]['nfev']:.0f}, {by_m[str(m)]['steps']:.0f})"
            for m in outputs) + " |")
    ok = True
    for m, entry in identity.items():
        fields = ", ".join(f"{k} {'identical' if entry[k]['bit_identical'] else 'DIFFERENT'}"
                           + (f" ({entry[k]['objects_differing']} objects)"
                              if "objects_differing" in entry[k] else "")
                           for k in FIELDS)
        print(f"{m} output(s), this checkout vs {args.rev}: bit-identical: "
              f"{entry['all_bit_identical']} ({fields}); each source repeatable across rounds: "
              f"{entry['repeatable_across_rounds']}")
        ok &= entry["all_bit_identical"]
    if not ok and not args.allow_differences:
        sys.exit(1)


if __name__ == "__main__":
    main()
