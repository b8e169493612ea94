"""Compile time and time per object-step against the state size n; scipy, heyoka, CuBIE and diffrax at the same n.

    python benchmarks/state_size.py [--targets cpu,parallel] [--sizes 6,12,28,60,200,1000]
                                    [--objects 64] [--method DOP853] [--forms tuple,array]
                                    [--heyoka] [--peers cubie,diffrax] [--peer-timeout 600]

The workload is Lorenz-96 (E. N. Lorenz, 1996: ``dx_i/dt = (x_{i+1} - x_{i-2}) x_{i-1}
- x_i + F``, F = 8, on a ring of n variables), defined for every n >= 4 and chaotic,
with a right-hand side whose cost is linear in n. Each (target, n, form) runs in a
new process with the kernel cache off: the first call's time less the best of three
further calls is the cold compile; the best call over objects x accepted steps is the
time per object-step. The array form ``fun(t, y, p, dydt)`` at every n; the tuple form
``fun(t, y, p) -> tuple`` where it is accepted (n <= state.TUPLE_MAX_N). scipy's
``solve_ivp`` on one object with a numpy right-hand side, in this process; with
``--heyoka``, heyoka's Taylor integrator in SIMD batches on the same objects at
tolerance RTOL (its own steps: compare time per object, ``per_object_us``).

``--peers cubie,diffrax`` (for ``--targets cuda``: both run on the GPU) adds, at each n, on
the same ``--objects`` objects (the same y0), each in a new process killed after
``--peer-timeout`` seconds (a timeout or a failure is a row with ``"error"``, and the run
goes on):

* ``diffrax``: ``jax.jit(jax.vmap(diffeqsolve))`` in float64 on JAX's default device, the
  right-hand side with ``jnp.roll``, the method matching ``--method`` (DOP853: ``Dopri8``,
  RK45: ``Dopri5``, RK23: ``Bosh3``), ``PIDController(rtol, atol)`` (diffrax's defaults: an
  I controller), ``SaveAt(t1=True)``; a timed call takes y0 from numpy and gives the final
  states back to numpy. Compile: first call less best (tracing and XLA).
* ``cubie``: CuBIE (PyPI ``cubie``) on numba-cuda, the system from n generated equation
  strings (``create_ODE_system``, F a parameter as in ours), ``Solver`` with the tableau
  matching ``--method`` (``dop853``, ``dormand-prince-54``, ``bogacki-shampine-32``), its
  ``pid`` controller at its defaults (first step, growth limits), ``output_types`` state
  and ``iteration_counters`` (the step counts), its kernel cache off and its generated code
  in a new folder (``CUBIE_CACHE_DIR``); ``solve(..., grid_type="verbatim")`` from numpy
  arrays (one run per object). Compile: building the system and the solver plus the first
  call, less best (``codegen_s``: the system and the solver alone).

Each peer takes its own steps (``mean_steps``, ``steps_object_0``; scipy's are in its row):
compare ``per_object_us`` across solvers as well as ``per_object_step_us``. Writes
``benchmarks/results/state_size_<host>.json`` (or ``--out``) and prints a line per row.
"""

import argparse
import os
import shutil
import socket
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

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
                  "per_object_step_us": 1e6 * best / steps, "y_end": res.y[0, :, -1].tolist(),
                  "y_ends": res.y[:{keep}, :, -1].tolist()}}))
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


# --- the GPU peers (--peers): each in a new process, on the same y0 as CHILD ---

PEER_METHODS = {
    "diffrax": {"DOP853": "Dopri8", "RK45": "Dopri5", "RK23": "Bosh3"},
    "cubie": {"DOP853": "dop853", "RK45": "dormand-prince-54", "RK23": "bogacki-shampine-32"},
}

DIFFRAX_CHILD = """
import json, time
import numpy as np
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
import diffrax

n, objects = {n}, {objects}
solver = diffrax.{solver}()
term = diffrax.ODETerm(lambda t, y, args: (jnp.roll(y, -1) - jnp.roll(y, 2)) * jnp.roll(y, 1)
                       - y + {F})
controller = diffrax.PIDController(rtol={rtol}, atol={atol})

def solve(y):
    sol = diffrax.diffeqsolve(term, solver, {t0}, {t1}, None, y, stepsize_controller=controller,
                              saveat=diffrax.SaveAt(t1=True), max_steps=100_000)
    return sol.ys[-1], sol.stats["num_accepted_steps"], sol.result._value

program = jax.jit(jax.vmap(solve))
rng = np.random.default_rng(0)
y0 = rng.uniform(-{F}, {F}, (objects, n))

def call():
    final, steps, result = program(jnp.asarray(y0))
    return np.asarray(final), np.asarray(steps), np.asarray(result)

start = time.perf_counter()
call()
first = time.perf_counter() - start
times = []
for _ in range(3):
    start = time.perf_counter()
    final, steps, result = call()
    times.append(time.perf_counter() - start)
best = min(times)
mean_steps = float(steps.mean())
print(json.dumps({{"first_s": first, "best_s": best, "compile_s": first - best,
                  "mean_steps": mean_steps, "steps_object_0": int(steps[0]),
                  "per_object_step_us": 1e6 * best / objects / mean_steps,
                  "failed": int(np.sum(result != 0)), "algorithm": {solver!r},
                  "device": str(jax.devices()[0]), "version": diffrax.__version__,
                  "y_end": final[0].tolist(), "y_ends": final[:{keep}].tolist()}}))
"""

CUBIE_CHILD = """
import json, time
import numpy as np
import cubie

n, objects = {n}, {objects}
rng = np.random.default_rng(0)
y0 = rng.uniform(-{F}, {F}, (objects, n))
equations = [f"dx{{i}} = (x{{(i + 1) % n}} - x{{(i - 2) % n}}) * x{{(i - 1) % n}} - x{{i}} + forcing"
             for i in range(n)]

start = time.perf_counter()
system = cubie.create_ODE_system(equations, precision=np.float64,
                                 states={{f"x{{i}}": 0.0 for i in range(n)}},
                                 parameters={{"forcing": {F}}}, name=f"lorenz96_{{n}}")
solver = cubie.Solver(system, algorithm={algorithm!r}, step_controller="pid", atol={atol},
                      rtol={rtol}, output_types=["state", "iteration_counters"],
                      time_logging_level=None, cache=False)
codegen = time.perf_counter() - start
# CuBIE orders the states its own way (by name): the rows of inits in its order
order = [int(name[1:]) for name in system.states.names]
inits = np.ascontiguousarray(y0[:, order].T)
params = np.full((1, objects), {F})

def call():
    return solver.solve(inits, params, duration={t1} - {t0}, t0={t0}, grid_type="verbatim")

start = time.perf_counter()
call()
first = time.perf_counter() - start
times, res = [], None
for _ in range(3):
    res = None  # a live result keeps its host buffers: the next call would allocate new ones
    start = time.perf_counter()
    res = call()
    times.append(time.perf_counter() - start)
best = min(times)
row = {{label: i for i, label in res.time_domain_legend.items()}}
state = res.time_domain_array  # (time, variable, run)
counters = np.asarray(res.iteration_counters)  # (save, [newton, krylov, steps, rejected], run)
steps = counters[:, 2, :].sum(axis=0) - counters[:, 3, :].sum(axis=0)
mean_steps = float(steps.mean())
try:
    from numba import cuda
    device = cuda.get_current_device().name
    device = device.decode() if isinstance(device, bytes) else str(device)
except Exception as error:  # the device's name is no reason to lose the timings
    device = f"unknown ({{error}})"
print(json.dumps({{"first_s": first, "best_s": best, "codegen_s": codegen,
                  "compile_s": codegen + first - best,
                  "mean_steps": mean_steps, "steps_object_0": int(steps[0]),
                  "rejected_object_0": int(counters[:, 3, 0].sum()),
                  "per_object_step_us": 1e6 * best / objects / mean_steps,
                  "failed": int(np.sum(np.asarray(res.status_codes) != 0)),
                  "algorithm": {algorithm!r}, "device": device, "version": cubie.__version__,
                  "y_end": [float(state[-1, row[f"x{{i}}"], 0]) for i in range(n)],
                  "y_ends": [[float(state[-1, row[f"x{{i}}"], k]) for i in range(n)]
                             for k in range(min({keep}, objects))]}}))
"""


def gpu_peer(who, n, objects, method, timeout, keep=1):
    """``who`` (diffrax or cubie) on Lorenz-96 at this n, in a new process: a record with
    ``y_end`` (object 0's final state) and ``y_ends`` (the first ``keep`` objects'), or
    ``{"error": ...}`` (a failure, a timeout, a method the peer lacks)."""
    solver = PEER_METHODS[who].get(method)
    if solver is None:
        return {"error": f"{who} has no method matching {method} here"}
    env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false",
               NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS="0")
    common = {"n": n, "objects": objects, "F": F, "rtol": RTOL, "atol": ATOL,
              "t0": SPAN[0], "t1": SPAN[1], "keep": keep}
    if who == "diffrax":
        return harness.run_child(DIFFRAX_CHILD.format(solver=solver, **common), env=env,
                                 timeout=timeout, check=False)
    folder = tempfile.mkdtemp(prefix="state_size_cubie_")
    env["CUBIE_CACHE_DIR"] = folder  # its generated code (and any cache): cold, and not in cwd
    try:
        return harness.run_child(CUBIE_CHILD.format(algorithm=solver, **common), env=env,
                                 timeout=timeout, check=False)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def ours_script(n, objects, method, form="array", keep=1):
    """The child's source: our solve_ivp on Lorenz-96 at this n on ``objects`` objects (the
    target: the child's HAPSIRA_TARGET), ``y_ends`` the first ``keep`` objects' final states."""
    return CHILD.format(n=n, objects=objects, method=method, form=form, F=F, span=SPAN,
                        rtol=RTOL, atol=ATOL, keep=keep)


def initial_states(n, objects):
    """The children's y0 (every one draws the same): ``(objects, n)``, each row's first
    draws those of any larger ``objects``."""
    return np.random.default_rng(0).uniform(-F, F, (objects, n))


def lorenz96_numpy(t, y):
    """Lorenz-96's right-hand side in numpy, for scipy."""
    return (np.roll(y, -1) - np.roll(y, 2)) * np.roll(y, 1) - y + F


def scipy_per_step(n, method, repeat=3):
    """scipy's solve_ivp on one object of Lorenz-96 with a numpy right-hand side."""
    from scipy.integrate import solve_ivp

    y0 = initial_states(n, 1)[0]
    best, _, sol = harness.best_of(
        lambda: solve_ivp(lorenz96_numpy, SPAN, y0, method=method, rtol=RTOL, atol=ATOL),
        repeat)
    steps = len(sol.t) - 1
    return {"best_s": best, "steps": steps, "per_object_step_us": 1e6 * best / steps,
            "per_object_us": 1e6 * best,
            "y_end": sol.y[:, -1].tolist()}


def add_agreement(record, reference, objects):
    """``per_object_us`` and ``max_rel_diff_vs_scipy`` (object 0's end state against
    scipy's) added to a row that has what they need."""
    import numpy as np
    if "best_s" in record:
        record["per_object_us"] = 1e6 * record["best_s"] / objects
    if "y_end" in record:
        record["max_rel_diff_vs_scipy"] = float(np.max(
            np.abs(np.array(record["y_end"]) - reference["y_end"]) / np.abs(reference["y_end"])))


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
    parser.add_argument("--peers", default="",
                        help="GPU peers at the same n, comma-separated: cubie, diffrax")
    parser.add_argument("--peer-timeout", type=float, default=600,
                        help="seconds each peer's process (one n) may take")
    parser.add_argument("--out", default=f"state_size_{socket.gethostname()}")
    args = parser.parse_args()
    gpu_peers = [who for who in args.peers.split(",") if who]
    for who in gpu_peers:
        if who not in PEER_METHODS:
            parser.error(f"--peers: {who!r} is none of {', '.join(PEER_METHODS)}")
    sys.path.insert(0, os.path.join(harness.ROOT, "src"))
    import numpy as np

    from hapsira_core.ivp.state import TUPLE_MAX_N
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
        for target in [t for t in args.targets.split(",") if t]:  # --targets "": peers only
            for form in args.forms.split(","):
                if form == "tuple" and n > TUPLE_MAX_N:
                    continue
                script = ours_script(n, args.objects, args.method, form)
                record = harness.run_child(script, env=harness.child_env(
                    target=target, pythonpath=pythonpath), timeout=1800, check=False)
                record.update({"who": f"{target}/{form}", "n": n, "target": target,
                               "form": form, "objects": args.objects})
                add_agreement(record, reference, args.objects)
                if "y_end" in record:
                    record["same_steps_as_scipy"] = (record["steps_object_0"] ==
                                                     reference["steps"])
                rows.append(record)
                if "error" in record:
                    print(f"{target}/{form} n={n}: {record['error'][-300:]}", flush=True)
                    continue
                print(f"{target + '/' + form:12s} n={n:5d}: compile {record['compile_s']:6.1f} s,"
                      f" {record['per_object_step_us']:9.2f} us/object-step "
                      f"(scipy/ours {reference['per_object_step_us'] / record['per_object_step_us']:7.1f}x),"
                      f" {record['per_object_us']:9.3f} us/object,"
                      f" object 0: {record['steps_object_0']} steps (scipy {reference['steps']}),"
                      f" rel. diff {record['max_rel_diff_vs_scipy']:.1e}",
                      flush=True)
        for who in gpu_peers:
            record = gpu_peer(who, n, args.objects, args.method, args.peer_timeout)
            record.update({"who": who, "n": n, "objects": args.objects})
            add_agreement(record, reference, args.objects)
            rows.append(record)
            if "error" in record:
                print(f"{who} n={n}: {record['error'][-300:]}", flush=True)
                continue
            print(f"{who:12s} n={n:5d}: compile {record['compile_s']:6.1f} s,"
                  f" {record['per_object_step_us']:9.2f} us/object-step,"
                  f" {record['per_object_us']:9.3f} us/object,"
                  f" object 0: {record['steps_object_0']} steps (scipy {reference['steps']}),"
                  f" mean {record['mean_steps']:.1f}, failed {record['failed']},"
                  f" rel. diff {record['max_rel_diff_vs_scipy']:.1e}"
                  f" ({record['algorithm']}, {record['device']})", flush=True)
    for row in rows:
        row.pop("y_end", None)
        row.pop("y_ends", None)
    harness.write_result(args.out, {"method": args.method, "span": SPAN, "rtol": RTOL,
                                    "atol": ATOL, "workload": "Lorenz-96, F = 8",
                                    "peers": gpu_peers, "peer_timeout_s": args.peer_timeout,
                                    "rows": rows, "measured_at": time.time()})


if __name__ == "__main__":
    main()
