"""Warm start on the GPU: what each new process finds in the kernel cache, and how long it takes.

    HAPSIRA_TARGET=cuda python ci/gpu/cache_check.py [--runs 3] [--out FILE]

Fresh processes in a row share one empty cache folder (``HAPSIRA_CACHE=1``).
Each imports the libraries, then for cowell's kernel (the reference workload,
100 objects, one day) and a solve_ivp kernel (Van der Pol, 100 objects)
reports: whether the kernel was on disk before, the seconds to get it
(compile or load), numba-cuda's cache hits and misses, and the first call.
numba's cache log (``NUMBA_DEBUG_CACHE=1``) of each process is kept.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "..", "..", "benchmarks")

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import numpy as np
sys.path.insert(0, {bench!r})
import workloads as workload
from workloads import van_der_pol
from hapsira_core.ivp import build, solve_ivp
from hapsira_cowell import cowell
from hapsira_cowell.orbit_form import orbit_rhs
report = {{"import_s": time.perf_counter() - t0}}
rng = np.random.default_rng(0)
r0, v0 = workload.leo_cloud(100)
y0 = np.column_stack([rng.uniform(0.5, 2.5, 100), rng.uniform(-1, 1, 100)])
mu = rng.uniform(0.5, 3.0, (100, 1))
cases = (
    ("cowell", build.kernel("DOP853", 6, orbit_rhs(workload.two_body_j2), ()),
     lambda: cowell(workload.K, r0, v0, [workload.DAY], f=workload.two_body_j2)),
    ("solve_ivp", build.kernel("DOP853", 2, van_der_pol, ()),
     lambda: solve_ivp(van_der_pol, (0.0, 20.0), y0, rtol=1e-9, atol=1e-12, params=mu)),
)
for name, kernel, call in cases:
    record = {{"cache_name": kernel.cache_name, "on_disk_before": kernel.on_disk()}}
    t = time.perf_counter()
    compiled = kernel.compile()
    record["get_kernel_s"] = time.perf_counter() - t
    record["numba_cache"] = type(getattr(compiled, "_cache", None)).__name__
    record["cache_hits"] = sum(getattr(compiled, "_cache_hits", {{}}).values())
    record["cache_misses"] = sum(getattr(compiled, "_cache_misses", {{}}).values())
    t = time.perf_counter()
    result = call()
    record["first_call_s"] = time.perf_counter() - t
    record["kernels_built"] = len(build.KERNELS)
    record["ok"] = bool(np.all(np.asarray(result.status) == 0))
    report[name] = record
report["total_s"] = time.perf_counter() - t0
print(json.dumps(report))
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="processes: one cold, then warm")
    parser.add_argument("--out", default="cache_check.json")
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="hapsira-cache-check-")
    env = dict(os.environ, HAPSIRA_CACHE="1", HAPSIRA_CACHE_DIR=folder, NUMBA_DEBUG_CACHE="1")
    runs = []
    for number in range(args.runs):
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", CHILD.format(bench=os.path.abspath(BENCH))],
                              env=env, capture_output=True, text=True, timeout=300)
        record = {"process_s": time.perf_counter() - start, "returncode": done.returncode}
        lines = done.stdout.strip().splitlines()
        try:
            record.update(json.loads(lines[-1]))
        except (IndexError, json.JSONDecodeError):
            record["stderr"] = done.stderr[-3000:]
        record["numba_cache_log"] = [line for line in lines[:-1] if "[cache]" in line][-30:]
        record["files"] = sorted(os.path.relpath(os.path.join(d, f), folder)
                                 for d, _, files in os.walk(folder) for f in files)[:60]
        runs.append(record)
        print(json.dumps({k: v for k, v in record.items()
                          if k not in ("numba_cache_log", "files")}), flush=True)
    with open(args.out, "w") as stream:
        json.dump({"cache_dir": folder, "runs": runs}, stream, indent=1)
    print("| process | import s | cowell: on disk, kernel s, first call s | "
          "solve_ivp: on disk, kernel s, first call s | whole process s |")
    print("|---|---|---|---|---|")
    for number, r in enumerate(runs):
        if "cowell" not in r:
            print(f"| {number} | failed: {r.get('stderr', '')[-200:]} |")
            continue
        c, s = r["cowell"], r["solve_ivp"]
        print(f"| {'cold' if number == 0 else 'warm'} | {r['import_s']:.2f} | "
              f"{c['on_disk_before']}, {c['get_kernel_s']:.2f}, {c['first_call_s']:.2f} | "
              f"{s['on_disk_before']}, {s['get_kernel_s']:.2f}, {s['first_call_s']:.2f} | "
              f"{r['process_s']:.2f} |")


if __name__ == "__main__":
    main()
