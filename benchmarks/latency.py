"""Time to the first result in a fresh process, cold and with a warm kernel cache.

    HAPSIRA_TARGET=cuda python benchmarks/latency.py [--cache-dir DIR]

Runs three fresh processes with ``HAPSIRA_CACHE=1``: cold (empty cache), warm
(same right-hand side), and with a changed right-hand side (same names, other
J2 constant), which must compile anew and give other numbers. Prints and
returns seconds from interpreter start to the first result.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

SCRIPT = '''
import time
t0 = time.perf_counter()
import math, sys
import numpy as np
from hapsira_core.jit import hjit
from hapsira_cowell import cowell
from hapsira_cowell.perturbations import two_body

@hjit
def f(t, rr, vv, k, p):
    drr, dvv = two_body(t, rr, vv, k, p)
    r = math.sqrt(rr[0] ** 2 + rr[1] ** 2 + rr[2] ** 2)
    c = 1.5 * k * J2 * 6378.137 ** 2 / r ** 5
    z2 = (rr[2] / r) ** 2
    return drr, (dvv[0] + c * rr[0] * (5 * z2 - 1), dvv[1] + c * rr[1] * (5 * z2 - 1),
                 dvv[2] + c * rr[2] * (5 * z2 - 3))

res = cowell(398600.4418, np.array([7000.0, 0.0, 500.0]), np.array([0.0, 7.5, 1.0]),
             [86400.0], f=f)
print(json.dumps({"seconds": time.perf_counter() - t0, "x": float(res.rr[0, 0])}))
'''


def run(cache_dir, j2):
    env = dict(os.environ, HAPSIRA_CACHE="1", HAPSIRA_CACHE_DIR=cache_dir)
    source = "import json\nJ2 = %r\n" % j2 + SCRIPT
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False, dir=cache_dir) as script:
        script.write(source)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, script.name], env=env, capture_output=True,
                          text=True, check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["process_seconds"] = time.perf_counter() - start
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cache-dir", default=None)
    args = parser.parse_args()
    cache_dir = args.cache_dir or tempfile.mkdtemp(prefix="hapsira-cache-")
    shutil.rmtree(cache_dir, ignore_errors=True)
    os.makedirs(cache_dir)
    report = {"target": os.environ.get("HAPSIRA_TARGET", "cpu"),
              "cold": run(cache_dir, 1.08262668e-3),
              "warm": run(cache_dir, 1.08262668e-3),
              "changed_f": run(cache_dir, 2e-3)}
    report["changed_f_gives_new_numbers"] = report["changed_f"]["x"] != report["warm"]["x"]
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
