"""What a new user waits for: a new function's first call, each in a new process.

For each workload (Lorenz with DOP853 and a user's hjit f; ``cowell`` with J2; HIRES,
the stiff chemistry problem of Hairer & Wanner, with Radau and its Jacobian derived
from f), in fresh processes on the active target (cpu by default):

* ``classic_cold``: ``HAPSIRA_JOIN=0``, an empty cache: the whole kernel compiled;
* ``joined_cold``: ``HAPSIRA_JOIN=1``, an empty cache: the generic loop compiled, then
  joined to f (`hapsira_core.targets._join`);
* ``joined_new_function``: the cache holding the generic loop from another function
  of the same form: what each new f, or each edit of f, costs;
* ``warm``: the same f again, in a new process;
* ``run_s``: the best of 5 calls after the first, classic and joined, in the same
  processes (the kernels' speed).

Each first call is timed on the wall clock (``first_call_s``, the summary's minimum over
rounds) and in the process's CPU time (``first_call_cpu_s``, the summary's ``*_cpu``: a
compile runs on one core, so on a loaded machine it is the steadier of the two).

diffrax's first ``jax.jit`` call of the same Lorenz ensemble is measured beside them
where diffrax is installed (``pip install -e ".[bench]"``). ``--lanes on`` (or a width)
runs every process with that ``HAPSIRA_LANES``: the lane kernel compiled at once against
the generic lane loop joined to f (`hapsira_core.targets._join.JoinedLaneKernel`).

    python benchmarks/cold_start.py [--objects 256] [--rounds 2] [--workloads hires_radau]
        [--lanes on]

Writes ``benchmarks/results/cold_start_<machine>_<date>.json``.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402

LORENZ = '''
from hapsira_core.jit import hjit

@hjit
def f(t, y, p):
    return (p[0] * (y[1] - y[0]) * {scale}, y[0] * (p[1] - y[2]) - y[1], y[0] * y[1] - p[2] * y[2])
'''

COWELL = '''
from hapsira_core.jit import hjit
from hapsira_cowell.perturbations import J2_perturbation, two_body

@hjit
def f(t, rr, vv, k, p):
    drr, dvv = two_body(t, rr, vv, k, p)
    a = J2_perturbation(t, rr, vv, k, 1.08262668e-3 * {scale}, 6378.137)
    return drr, (dvv[0] + a[0], dvv[1] + a[1], dvv[2] + a[2])
'''

HIRES = '''
from hapsira_core.jit import hjit

@hjit
def f(t, y, p):
    y1, y2, y3, y4, y5, y6, y7, y8 = y
    r = 280.0 * {scale} * y6 * y8
    return (-1.71 * y1 + 0.43 * y2 + 8.32 * y3 + 0.0007,
            1.71 * y1 - 8.75 * y2,
            -10.03 * y3 + 0.43 * y4 + 0.035 * y5,
            8.32 * y2 + 1.71 * y3 - 1.12 * y4,
            -1.745 * y5 + 0.43 * y6 + 0.43 * y7,
            -r + 0.69 * y4 + 1.71 * y5 - 0.43 * y6 + 0.69 * y7,
            r - 1.81 * y7,
            -r + 1.81 * y7)
'''

#: each workload's call, in the child (``user.f``, ``objects`` and numpy as np in scope)
CALLS = {
    "orbit": """
from hapsira_cowell import cowell
rng = np.random.default_rng(0)
r0 = np.zeros((objects, 3)); r0[:, 0] = 6800 + rng.uniform(0, 800, objects)
v0 = np.zeros((objects, 3)); v0[:, 1] = 7.5; v0[:, 2] = rng.uniform(0, 1, objects)
call = lambda: cowell(398600.4418, r0, v0, np.linspace(0, 86400.0, 5), f=user.f).rr
""",
    "lorenz": """
from hapsira_core.ivp import solve_ivp
y0 = np.random.default_rng(0).uniform(-10, 10, (objects, 3))
call = lambda: solve_ivp(user.f, (0.0, 10.0), y0, method="DOP853", rtol=1e-8, atol=1e-8,
                         params=[10.0, 28.0, 8 / 3]).y
""",
    "hires": """
from hapsira_core.ivp import solve_ivp
y0 = np.array([1.0, 0, 0, 0, 0, 0, 0, 0.0057]) * np.random.default_rng(0).uniform(
    0.5, 1.5, (objects, 1))
call = lambda: solve_ivp(user.f, (0.0, 321.8122), y0, method="Radau", rtol=1e-6,
                         atol=1e-9).y
""",
}

#: name: (the user's module, with {scale}; its call in `CALLS`)
WORKLOADS = {"lorenz_dop853": (LORENZ, "lorenz"), "cowell_j2": (COWELL, "orbit"),
             "hires_radau": (HIRES, "hires")}

CHILD = '''
import json, sys, time
start = time.perf_counter()
import numpy as np
sys.path.insert(0, {folder!r})
import {module} as user
imported = time.perf_counter()
objects = {objects}
{call}
cpu = time.process_time()
first = time.perf_counter(); out = call(); first = time.perf_counter() - first
cpu = time.process_time() - cpu
runs = []
for _ in range({repeat}):
    t = time.perf_counter(); call(); runs.append(time.perf_counter() - t)
import hashlib
print(json.dumps({{"import_s": imported - start, "first_call_s": first,
                  "first_call_cpu_s": cpu,
                  "run_s": min(runs) if runs else None,
                  "digest": hashlib.sha1(np.ascontiguousarray(out).tobytes()).hexdigest()}}))
'''

DIFFRAX = '''
import json, time
start = time.perf_counter()
import jax, jax.numpy as jnp, diffrax, numpy as np
jax.config.update("jax_enable_x64", True)
imported = time.perf_counter()
def f(t, y, p):
    return jnp.stack([p[0] * (y[1] - y[0]), y[0] * (p[1] - y[2]) - y[1], y[0] * y[1] - p[2] * y[2]])
def one(y0):
    return diffrax.diffeqsolve(diffrax.ODETerm(f), diffrax.Dopri8(), 0.0, 10.0, None, y0,
                               jnp.array([10.0, 28.0, 8 / 3]),
                               stepsize_controller=diffrax.PIDController(rtol=1e-8, atol=1e-8),
                               max_steps=100000).ys
solve = jax.jit(jax.vmap(one))
y0 = jnp.asarray(np.random.default_rng(0).uniform(-10, 10, ({objects}, 3)))
t = time.perf_counter(); solve(y0).block_until_ready(); first = time.perf_counter() - t
print(json.dumps({{"import_s": imported - start, "first_call_s": first}}))
'''


def run_case(name, template, call, objects, repeat, rounds, lanes=None):
    """Every measurement of one workload, each in a new process (``lanes``: their
    ``HAPSIRA_LANES``, or this process's)."""
    out = {"classic_cold": [], "joined_cold": [], "joined_new_function": [], "warm": []}
    for round_ in range(rounds):
        folder = tempfile.mkdtemp(prefix="hapsira-cold-")
        try:
            def child(module, scale, cache_dir, join):
                with open(os.path.join(folder, module + ".py"), "w") as source:
                    source.write(template.format(scale=scale))
                env = harness.child_env(cache=True, HAPSIRA_CACHE_DIR=cache_dir,
                                        HAPSIRA_JOIN=join,
                                        **({} if lanes is None else {"HAPSIRA_LANES": lanes}))
                return harness.run_child(CHILD.format(folder=folder, module=module,
                                                      objects=objects, call=CALLS[call],
                                                      repeat=repeat), env=env)

            classic = child(f"classic{round_}", 1.0, os.path.join(folder, "c0"), "0")
            joined = child(f"joined{round_}", 1.0, os.path.join(folder, "c1"), "1")
            # another function of the same form, on the cache the joined run left
            new = child(f"other{round_}", 1.0 + 1e-9, os.path.join(folder, "c1"), "1")
            warm = child(f"other{round_}", 1.0 + 1e-9, os.path.join(folder, "c1"), "1")
            for key, record in (("classic_cold", classic), ("joined_cold", joined),
                                ("joined_new_function", new), ("warm", warm)):
                out[key].append(record)
            if classic["digest"] != joined["digest"]:
                out.setdefault("mismatch", []).append(round_)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    summary = {key: min(r["first_call_s"] for r in records)
               for key, records in out.items() if key != "mismatch"}
    summary.update({f"{key}_cpu": min(r["first_call_cpu_s"] for r in records)
                    for key, records in out.items() if key != "mismatch"})
    summary["run_s_classic"] = min(r["run_s"] for r in out["classic_cold"])
    summary["run_s_joined"] = min(r["run_s"] for r in out["joined_cold"] + out["warm"])
    summary["same_results"] = "mismatch" not in out
    print(name, json.dumps(summary), flush=True)
    return {"summary": summary, "runs": out}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workloads", default=",".join(WORKLOADS),
                        help=f"comma-separated, of {', '.join(WORKLOADS)} (default: all)")
    parser.add_argument("--lanes", default=None,
                        help="HAPSIRA_LANES of every process (default: this process's)")
    parser.add_argument("--out", default=None)
    options = parser.parse_args()
    chosen = [w for w in options.workloads.split(",") if w]
    unknown = [w for w in chosen if w not in WORKLOADS]
    if unknown or not chosen:
        parser.error(f"--workloads: expected names among {', '.join(WORKLOADS)}, "
                     f"got {options.workloads!r}")
    results = {"objects": options.objects, "lanes": options.lanes, "cases": {}}
    for name in chosen:
        template, call = WORKLOADS[name]
        results["cases"][name] = run_case(name, template, call, options.objects,
                                          options.repeat, options.rounds, options.lanes)
    if "lorenz_dop853" not in chosen:  # diffrax runs the Lorenz ensemble
        return _write(results, options)
    results["diffrax_first_jit_s"] = None
    if options.lanes is not None:
        results["notes"] = "diffrax not run (--lanes: our lane kernels alone)"
        return _write(results, options)
    try:
        import diffrax  # noqa: F401
        results["diffrax_first_jit_s"] = min(
            harness.run_child(DIFFRAX.format(objects=options.objects))["first_call_s"]
            for _ in range(options.rounds))
    except ImportError:
        results["notes"] = "diffrax not installed (pip install -e '.[bench]')"
    _write(results, options)


def _write(results, options):
    host = harness.cpu_model().split()[0].lower() if harness.cpu_model() else "host"
    lanes = "" if options.lanes is None else f"_lanes_{options.lanes}"
    name = options.out or (f"cold_start_{host}{os.cpu_count()}{lanes}_"
                           f"{time.strftime('%Y-%m-%d')}")
    harness.write_result(name, results)


if __name__ == "__main__":
    main()
