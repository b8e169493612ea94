"""Time to the first result in a new process: cold, and with a warm kernel cache; heyoka beside.

    python benchmarks/latency.py [--targets cpu,parallel] [--runs 3]

For each target, fresh processes with ``HAPSIRA_CACHE=1`` and a cache folder
of their own: a cold start (empty cache), then ``--runs`` warm starts. Each
reports the import time, the time of the first result (100 objects of the
reference workload with ``cowell()``, one day; then a Van der Pol ensemble of
100 objects with ``solve_ivp``) and the whole process (wall clock, measured
outside). heyoka (the CPU peer, PyPI ``heyoka``) in the same run: a Taylor
integrator for the same two-body + J2 problem, cold and warm in new processes
(heyoka keeps no compiled code on disk, so its "warm" is its second process).
Writes ``benchmarks/results/latency_<machine>.json`` and prints a table.
"""

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import harness  # noqa: E402

OURS = '''
import time
t0 = time.perf_counter()
import sys
import numpy as np
from hapsira_cowell import cowell
from hapsira_core.ivp import solve_ivp
sys.path.insert(0, {here!r})
import workloads as workload
from workloads import van_der_pol
t1 = time.perf_counter()
rng = np.random.default_rng(0)
r0, v0 = workload.leo_cloud(100)
res = cowell(workload.K, r0, v0, [workload.DAY], f=workload.two_body_j2)
t2 = time.perf_counter()
y0 = np.column_stack([rng.uniform(0.5, 2.5, 100), rng.uniform(-1, 1, 100)])
sol = solve_ivp(van_der_pol, (0.0, 20.0), y0, rtol=1e-9, atol=1e-12,
                params=rng.uniform(0.5, 3.0, (100, 1)))
t3 = time.perf_counter()
assert (res.status == 0).all() and (sol.status == 0).all()
print(json.dumps({{"import_s": t1 - t0, "cowell_first_s": t2 - t1, "solve_ivp_first_s": t3 - t2}}))
'''.replace("import time\n", "import json, time\n", 1)

HEYOKA = '''
import json, time
t0 = time.perf_counter()
import sys
import numpy as np
import heyoka as hy
sys.path.insert(0, {here!r})
import workloads as workload
from peers import heyoka_system
t1 = time.perf_counter()
rhs = heyoka_system(hy)
r0, v0 = workload.leo_cloud(100)
ta = hy.taylor_adaptive(rhs, list(r0[0]) + list(v0[0]), tol=workload.RTOL)
for i in range(100):
    ta.time = 0.0
    ta.state[:] = list(r0[i]) + list(v0[i])
    ta.propagate_until(workload.DAY)
t2 = time.perf_counter()
print(json.dumps({{"import_s": t1 - t0, "first_result_s": t2 - t1}}))
'''


def run(script, env):
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, check=True)
    record = json.loads(done.stdout.strip().splitlines()[-1])
    record["process_s"] = time.perf_counter() - start
    return record


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", default="cpu,parallel")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--name", default="2core",
                        help="result file: benchmarks/results/latency_<name>.json")
    parser.add_argument("--out", default=None,
                        help="the result's path (default benchmarks/results/latency_<name>.json)")
    args = parser.parse_args()
    out = {"targets": {}}
    for target in args.targets.split(","):
        folder = tempfile.mkdtemp(prefix="hapsira-latency-")
        env = dict(os.environ, HAPSIRA_TARGET=target, HAPSIRA_CACHE="1",
                   HAPSIRA_CACHE_DIR=folder)
        try:
            cold = run(OURS.format(here=HERE), env)
            warm = [run(OURS.format(here=HERE), env) for _ in range(args.runs)]
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        out["targets"][target] = {"cold": cold, "warm": warm}
    if importlib.util.find_spec("heyoka") is None:
        out["heyoka"] = {"missing": "heyoka not installed (pip install -e .[bench])"}
        print(out["heyoka"]["missing"])
    else:
        try:
            heyoka = [run(HEYOKA.format(here=HERE), dict(os.environ, HAPSIRA_TARGET="cpu"))
                      for _ in range(1 + args.runs)]
            out["heyoka"] = {"cold": heyoka[0], "warm": heyoka[1:]}
        except (subprocess.CalledProcessError, json.JSONDecodeError) as error:
            out["heyoka"] = {"error": str(error)}
    harness.write_result(args.out or f"latency_{args.name}", out)

    def best(records, key):
        return min(r[key] for r in records)

    print("| | import s | first cowell s (100 obj.) | first solve_ivp s | whole process s |")
    print("|---|---|---|---|---|")
    for target, result in out["targets"].items():
        cold, warm = result["cold"], result["warm"]
        print(f"| {target} cold | {cold['import_s']:.2f} | {cold['cowell_first_s']:.2f} | "
              f"{cold['solve_ivp_first_s']:.2f} | {cold['process_s']:.2f} |")
        print(f"| {target} warm (best of {len(warm)}) | {best(warm, 'import_s'):.2f} | "
              f"{best(warm, 'cowell_first_s'):.2f} | {best(warm, 'solve_ivp_first_s'):.2f} | "
              f"{best(warm, 'process_s'):.2f} |")
    if "cold" in out["heyoka"]:
        cold, warm = out["heyoka"]["cold"], out["heyoka"]["warm"]
        print(f"| heyoka cold | {cold['import_s']:.2f} | {cold['first_result_s']:.2f} | - | "
              f"{cold['process_s']:.2f} |")
        print(f"| heyoka warm (best of {len(warm)}) | {best(warm, 'import_s'):.2f} | "
              f"{best(warm, 'first_result_s'):.2f} | - | {best(warm, 'process_s'):.2f} |")


if __name__ == "__main__":
    main()
