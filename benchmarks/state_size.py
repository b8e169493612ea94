"""Compile time and time per object-step against the state size n; scipy and heyoka at the same n.

    python benchmarks/state_size.py [--targets cpu,parallel] [--sizes 6,12,28,60,200,1000]
                                    [--objects 64] [--method DOP853] [--forms tuple,array]

The workload is Lorenz-96 (E. N. Lorenz, 1996: ``dx_i/dt = (x_{i+1} - x_{i-2}) x_{i-1}
- x_i + F``, F = 8, on a ring of n variables), defined for every n >= 4 and chaotic,
with a right-hand side whose cost is linear in n. Each (target, n, form) runs in a
new process with the kernel cache off: the first call's time less the best of three
further calls is the cold compile; the best call over objects x accepted steps is the
time per object-step. The array form ``fun(t, y, p, dydt)`` at every n; the tuple form
``fun(t, y, p) -> tuple`` where it is accepted (n <= state.TUPLE_MAX_N). scipy's
``solve_ivp`` on one object with a numpy right-hand side, in this process; with
``--heyoka``, heyoka's Taylor integrator in SIMD batches on the same objects at
tolerance RTOL (its own steps: compare time per object, ``per_object_us``). Writes
``benchmarks/results/state_size_<host>.json`` and prints a table.
"""

import argparse
import json
import os
import socket
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import harness  # noqa: E402

F = 8.0
SPAN = (0.0, 1.0)
RTOL, ATOL = 1e-8, 1e-8

CHILD = '''
import json, sys, time
import numpy as np
from hapsira_core.ivp import solve_ivp
from hapsira_core.jit import hjit

n, objects, method, form = {n}, {objects}, {method!r}, {form!r}

@hjit
def lorenz96(t, y, p, dydt):
    m = y.shape[0]
    for i in range(m):
        dydt[i] = (y[(i + 1) % m] - y[i - 2]) * y[i - 1] - y[i] + p[0]

if form == "tuple":
    terms = ", ".join(f"(y[{{(i + 1) % n}}] - y[{{(i - 2) % n}}]) * y[{{(i - 1) % n}}] - y[{{i}}] + p[0]"
                      for i in range(n))
    namespace = {{}}
    exec(f"def lorenz96_tuple(t, y, p):\\n    return ({{terms}},)\\n", namespace)
    fun = hjit(namespace["lorenz96_tuple"])
else:
    fun = lorenz96

rng = np.random.default_rng(0)
y0 = rng.uniform(-{F}, {F}, (objects, n))

def call():
    return solve_ivp(fun, {span!r}, y0, method=method, rtol={rtol}, atol={atol}, params=[{F}])

start = time.perf_counter()
res = call()
first = time.perf_counter() - start
times = []
for _ in range(3):
    start = time.perf_counter()
    call()
    times.append(time.perf_counter() - start)
best = min(times)
assert (res.status == 0).all(), res.status
steps = int(res.nsteps.sum())
print(json.dumps({{"first_s": first, "best_s": best, "compile_s": first - best,
                  "steps": steps, "steps_per_object": steps / objects,
                  "steps_object_0": int(res.nsteps[0]),
                  "per_object_step_us": 1e6 * best / steps, "y_end": res.y[0, :, -1].tolist()}}))
'''


HEYOKA_CHILD = '''
import json, time
import numpy as np
import heyoka as hy

n, objects = {n}, {objects}
x = hy.make_vars(*[f"x{{i}}" for i in range(n)])
system = [(x[i], (x[(i + 1) % n] - x[(i - 2) % n]) * x[(i - 1) % n] - x[i] + {F})
          for i in range(n)]
batch = hy.recommended_simd_size()
rng = np.random.default_rng(0)
y0 = rng.uniform(-{F}, {F}, (objects, n))
start = time.perf_counter()
ta = hy.taylor_adaptive_batch(system, np.zeros((n, batch)), tol={rtol})
compile_s = time.perf_counter() - start

def call():
    ends = np.empty_like(y0)
    steps = 0
    for first in range(0, objects, batch):
        rows = y0[first:first + batch]
        state = np.zeros((n, batch))
        state[:, :len(rows)] = rows.T
        ta.set_time(0.0)
        ta.state[:] = state
        result = ta.propagate_until({end})
        steps += sum(int(r[3]) for r in result[:len(rows)]) if isinstance(result, list) else 0
        ends[first:first + len(rows)] = ta.state[:, :len(rows)].T
    return ends, steps

times = []
for _ in range(3):
    start = time.perf_counter()
    ends, steps = call()
    times.append(time.perf_counter() - start)
best = min(times)
print(json.dumps({{"compile_s": compile_s, "best_s": best, "batch": batch,
                  "per_object_us": 1e6 * best / objects, "y_end": ends[0].tolist()}}))
'''


def heyoka_batch(n, objects, timeout):
    """heyoka's Taylor integrator in SIMD batches (``taylor_adaptive_batch``, tolerance
    ``RTOL``) on the same objects, in a child process (its LLVM compile grows with n)."""
    script = HEYOKA_CHILD.format(n=n, objects=objects, F=F, rtol=RTOL, end=SPAN[1])
    return harness.run_child(script, timeout=timeout, check=False)


def scipy_per_step(n, method, repeat=3):
    """scipy's solve_ivp on one object of Lorenz-96 with a numpy right-hand side."""
    import numpy as np
    from scipy.integrate import solve_ivp

    def lorenz96_np(t, y):
        return (np.roll(y, -1) - np.roll(y, 2)) * np.roll(y, 1) - y + F

    rng = np.random.default_rng(0)
    y0 = rng.uniform(-F, F, (1, n))[0]
    best, _, sol = harness.best_of(
        lambda: solve_ivp(lorenz96_np, SPAN, y0, method=method, rtol=RTOL, atol=ATOL), repeat)
    steps = len(sol.t) - 1
    return {"best_s": best, "steps": steps, "per_object_step_us": 1e6 * best / steps,
            "per_object_us": 1e6 * best,
            "y_end": sol.y[:, -1].tolist()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", default="cpu,parallel")
    parser.add_argument("--sizes", default="6,12,28,60,200,1000")
    parser.add_argument("--objects", type=int, default=64)
    parser.add_argument("--method", default="DOP853")
    parser.add_argument("--forms", default="tuple,array", help="fun forms to time")
    parser.add_argument("--heyoka", action="store_true",
                        help="heyoka's batch mode at the same n (the bench extra)")
    parser.add_argument("--heyoka-timeout", type=float, default=900)
    parser.add_argument("--out", default=f"state_size_{socket.gethostname()}")
    args = parser.parse_args()
    sys.path.insert(0, os.path.join(harness.ROOT, "src"))
    from hapsira_core.ivp.state import TUPLE_MAX_N

    import numpy as np
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    pythonpath = os.pathsep.join([os.path.join(harness.ROOT, "src"),
                                  os.environ.get("PYTHONPATH", "")])
    for n in sizes:
        reference = scipy_per_step(n, args.method)
        rows.append({"who": "scipy", "n": n, **reference})
        print(f"scipy        n={n:5d}: {reference['per_object_step_us']:9.2f} us/object-step "
              f"({reference['steps']} steps)", flush=True)
        if args.heyoka:
            record = heyoka_batch(n, args.objects, args.heyoka_timeout)
            record.update({"who": "heyoka_batch", "n": n, "objects": args.objects})
            if "y_end" in record:
                record["max_rel_diff_vs_scipy"] = float(np.max(
                    np.abs(np.array(record.pop("y_end")) - reference["y_end"])
                    / np.abs(reference["y_end"])))
                print(f"heyoka batch n={n:5d}: compile {record['compile_s']:6.1f} s, "
                      f"{record['per_object_us']:9.1f} us/object (Taylor: its own steps), "
                      f"rel. diff {record['max_rel_diff_vs_scipy']:.1e}", flush=True)
            else:
                print(f"heyoka batch n={n}: {record.get('error', '')[-300:]}", flush=True)
            rows.append(record)
        for target in args.targets.split(","):
            for form in args.forms.split(","):
                if form == "tuple" and n > TUPLE_MAX_N:
                    continue
                script = CHILD.format(n=n, objects=args.objects, method=args.method, form=form,
                                      F=F, span=SPAN, rtol=RTOL, atol=ATOL)
                record = harness.run_child(script, env=harness.child_env(
                    target=target, pythonpath=pythonpath), timeout=1800, check=False)
                record.update({"who": f"{target}/{form}", "n": n, "target": target,
                               "form": form, "objects": args.objects})
                if "best_s" in record:
                    record["per_object_us"] = 1e6 * record["best_s"] / args.objects
                if "y_end" in record:
                    record["max_rel_diff_vs_scipy"] = float(np.max(
                        np.abs(np.array(record["y_end"]) - reference["y_end"])
                        / np.abs(reference["y_end"])))
                    record["same_steps_as_scipy"] = (record["steps_object_0"] ==
                                                     reference["steps"])
                rows.append(record)
                if "error" in record:
                    print(f"{target}/{form} n={n}: {record['error'][-300:]}", flush=True)
                    continue
                print(f"{target + '/' + form:12s} n={n:5d}: compile {record['compile_s']:6.1f} s,"
                      f" {record['per_object_step_us']:9.2f} us/object-step "
                      f"(scipy/ours {reference['per_object_step_us'] / record['per_object_step_us']:7.1f}x),"
                      f" object 0: {record['steps_object_0']} steps (scipy {reference['steps']}),"
                      f" rel. diff {record['max_rel_diff_vs_scipy']:.1e}",
                      flush=True)
    for row in rows:
        row.pop("y_end", None)
    harness.write_result(args.out, {"method": args.method, "span": SPAN, "rtol": RTOL,
                                    "atol": ATOL, "workload": "Lorenz-96, F = 8",
                                    "rows": rows, "measured_at": time.time()})


if __name__ == "__main__":
    main()
