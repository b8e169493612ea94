"""cowell() on the cpu target, this checkout against an earlier git revision, paired.

    python benchmarks/against_revision.py [--rev 315507c] [--n 300] [--rounds 3]

The reference workload (two-body + J2, LEO cloud, one day) with one output
time and with 1440 (one a minute). Each measurement runs in its own process
(compile excluded, best of 5 calls, CPU time of the process so that other
jobs on the machine disturb it less than wall time), alternating the two
sources ``--rounds`` times; the revision is checked out with ``git worktree``
into a temporary folder. Prints microseconds per object-day for each.
Writes ``benchmarks/results/against_<rev>.json``.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

SCRIPT = """
import json, sys, time
import numpy as np
sys.path.insert(0, {bench!r})
import workload
from hapsira_cowell import cowell
r0, v0 = workload.leo_cloud({n}, seed=0)
tofs = np.linspace(0.0, workload.DAY, {m} + 1)[1:]
cowell(workload.K, r0[:2], v0[:2], tofs, f=workload.two_body_j2)
best = 1e99
for _ in range(5):
    t = time.process_time()
    res = cowell(workload.K, r0, v0, tofs, f=workload.two_body_j2)
    best = min(best, time.process_time() - t)
print(json.dumps({{"us_per_object_day": best / {n} * 1e6, "nfev": float(res.nfev.mean()),
                  "steps": float(res.nsteps.mean())}}))
"""


def measure(src, n, m):
    """One process on the source tree ``src`` (its own benchmarks/workload.py)."""
    bench = os.path.join(os.path.dirname(src), "benchmarks")
    env = dict(os.environ, HAPSIRA_TARGET="cpu", HAPSIRA_CACHE="0", PYTHONPATH=src)
    done = subprocess.run([sys.executable, "-c", SCRIPT.format(bench=bench, n=n, m=m)], env=env,
                          capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{src}: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", default="315507c")
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", folder, args.rev],
                       check=True, capture_output=True)
        try:
            sources = {"this checkout": os.path.join(ROOT, "src"),
                       args.rev: os.path.join(folder, "src")}
            results = {name: {1: [], 1440: []} for name in sources}
            for _ in range(args.rounds):
                for m in (1, 1440):
                    for name, src in sources.items():
                        results[name][m].append(measure(src, args.n, m))
        finally:
            subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", folder],
                           capture_output=True)
    summary = {name: {str(m): {"best_us": min(r["us_per_object_day"] for r in runs),
                               "all_us": [r["us_per_object_day"] for r in runs],
                               "nfev": runs[0]["nfev"], "steps": runs[0]["steps"]}
                      for m, runs in by_m.items()} for name, by_m in results.items()}
    out = {"machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
           "n_objects": args.n, "revision": args.rev, "results": summary}
    path = os.path.join(HERE, "results", f"against_{args.rev}.json")
    with open(path, "w") as stream:
        json.dump(out, stream, indent=1)
    print("| source | 1 output: us/object-day (nfev) | 1440 outputs: us/object-day (nfev) |")
    print("|---|---|---|")
    for name, by_m in summary.items():
        print(f"| {name} | {by_m['1']['best_us']:.1f} ({by_m['1']['nfev']:.0f}) | "
              f"{by_m['1440']['best_us']:.1f} ({by_m['1440']['nfev']:.0f}) |")
    print(f"written to {path}")


if __name__ == "__main__":
    main()
