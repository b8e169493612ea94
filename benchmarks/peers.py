"""The peers, each a function that runs a workload of workloads.py and returns its timings.

Reference workload (``workloads.leo_cloud(n, seed)``, two-body + J2, one
day): `hapsira_target` (another target, in its own process), `scipy_dop853`,
`heyoka_batch` (SIMD batches), `heyoka_scalar`, `diffrax_dopri8` and
`cubie_cowell` (each in its own process, on the GPU; both can return the final
positions of the first objects). Each returns ``{"seconds": ..., "n_objects":
..., ...}``; where a peer would take too long for ``n``, it runs ``n_max``
objects and scales linearly (``"extrapolated_from"`` says how many really ran;
diffrax and CuBIE never scale).

Ensembles (``workloads.problem(name, n)``): `ensemble_scipy`, `ensemble_cyrk`,
`ensemble_diffrax`, `ensemble_cubie`: ``(first call s, best s, final states,
extra)``.

A peer whose package is missing returns ``{"seconds": None, "missing": reason}``
(`missing`; the ensemble peers raise `Missing`, which the scripts report the
same way). The peers are in the ``bench`` extra (``pip install -e .[bench]``;
CuBIE: ``bench-gpu``).
"""

import json
import os
import subprocess
import sys
import time

import numpy as np

import harness
import workloads as workload

HERE = os.path.dirname(os.path.abspath(__file__))

TARGET_SCRIPT = """
import json, sys, time, numpy as np
sys.path.insert(0, {here!r})
import workloads as workload
from hapsira_cowell import cowell
r0, v0 = workload.leo_cloud({n}, seed={seed})
tofs = np.array([workload.DAY / 2, workload.DAY])
cowell(workload.K, r0[:2], v0[:2], tofs, f=workload.two_body_j2)
times = []
for _ in range({repeat}):
    t = time.perf_counter()
    res = cowell(workload.K, r0, v0, tofs, f=workload.two_body_j2)
    times.append(time.perf_counter() - t)
print(json.dumps({{"seconds": float(np.median(times)), "n_objects": {n},
                  "orbit_steps": int(res.nsteps.sum())}}))
"""


def _scaled(result, n):
    ran = result["n_objects"]
    if ran != n:
        result = dict(result, seconds=result["seconds"] * n / ran, n_objects=n,
                      extrapolated_from=ran)
    return result


class Missing(ImportError):
    """A peer's package is not installed."""


def need(module, pip=None):
    """``import module``, or `Missing` saying what to install."""
    try:
        return __import__(module)
    except ImportError as error:
        raise Missing(f"{module} not installed (pip install {pip or module}, or "
                      f"pip install -e .[bench]): {error}") from error


def missing(error):
    return {"seconds": None, "missing": str(error)}


def hapsira_target(target, n, seed=2, n_max=None, repeat=3):
    """hapsira on another target, in its own process (the target is fixed at import)."""
    ran = n if n_max is None else min(n, n_max)
    script = TARGET_SCRIPT.format(here=HERE, n=ran, seed=seed, repeat=repeat)
    result = harness.run_child(script, env=harness.child_env(target, cache=True))
    result.pop("process_s", None)
    return _scaled(result, n)


def scipy_dop853(n, seed=2, n_max=20):
    try:
        from scipy.integrate import solve_ivp
    except ImportError as error:
        return missing(error)
    ran = min(n, n_max)
    r0, v0 = workload.leo_cloud(ran, seed)
    t = time.perf_counter()
    for i in range(ran):
        solve_ivp(workload.scipy_rhs, (0.0, workload.DAY), np.concatenate([r0[i], v0[i]]),
                  method="DOP853", rtol=workload.RTOL, atol=workload.ATOL,
                  t_eval=[workload.DAY / 2, workload.DAY])
    return _scaled({"seconds": time.perf_counter() - t, "n_objects": ran}, n)


def heyoka_batch(n, seed=2, n_max=2000, batch=None):
    """heyoka's Taylor integrator, SIMD batches, tolerance 1e-11, two-body + J2."""
    try:
        hy = need("heyoka")
    except Missing as error:
        return missing(error)
    batch = batch or hy.recommended_simd_size()
    ran = min(n, n_max)
    ran -= ran % batch or 0
    ran = max(ran, batch)
    system = heyoka_system(hy)
    r0, v0 = workload.leo_cloud(ran, seed)
    state = np.concatenate([r0, v0], axis=1)
    integrator = hy.taylor_adaptive_batch(system, state[:batch].T.copy(), tol=workload.RTOL)
    t = time.perf_counter()
    for start in range(0, ran, batch):
        integrator.set_time(0.0)
        integrator.state[:] = state[start:start + batch].T
        integrator.propagate_until(workload.DAY)
    return _scaled({"seconds": time.perf_counter() - t, "n_objects": ran,
                    "simd_batch": batch}, n)


def heyoka_system(hy):
    """The reference model (two-body + J2) as heyoka expressions."""
    x, y, z, vx, vy, vz = hy.make_vars("x", "y", "z", "vx", "vy", "vz")
    r2 = x * x + y * y + z * z
    r = hy.sqrt(r2)
    z2 = z * z / r2
    c = -workload.K / (r2 * r)
    f = 1.5 * workload.K * workload.J2 * workload.R ** 2 / (r2 * r2 * r)
    return [(x, vx), (y, vy), (z, vz),
            (vx, c * x + f * x * (5 * z2 - 1)),
            (vy, c * y + f * y * (5 * z2 - 1)),
            (vz, c * z + f * z * (5 * z2 - 3))]


def heyoka_scalar(n, seed=2, n_max=200):
    """heyoka's Taylor integrator, one object at a time (``taylor_adaptive``), tolerance 1e-11."""
    try:
        hy = need("heyoka")
    except Missing as error:
        return missing(error)
    ran = min(n, n_max)
    r0, v0 = workload.leo_cloud(ran, seed)
    ta = hy.taylor_adaptive(heyoka_system(hy), list(r0[0]) + list(v0[0]), tol=workload.RTOL)
    t = time.perf_counter()
    for i in range(ran):
        ta.time = 0.0
        ta.state[:] = list(r0[i]) + list(v0[i])
        ta.propagate_until(workload.DAY)
    return _scaled({"seconds": time.perf_counter() - t, "n_objects": ran}, n)


DIFFRAX_SCRIPT = """
import json, sys, time
import jax, jax.numpy as jnp
jax.config.update("jax_enable_x64", True)
import diffrax, numpy as np
sys.path.insert(0, {here!r})
import workloads as workload
rhs = workload.jax_rhs

def solve(y0):
    sol = diffrax.diffeqsolve(diffrax.ODETerm(rhs), diffrax.Dopri8(), 0.0, workload.DAY, None, y0,
                              stepsize_controller=diffrax.PIDController(rtol=workload.RTOL, atol=workload.ATOL),
                              saveat=diffrax.SaveAt(ts=jnp.array([workload.DAY / 2, workload.DAY])),
                              max_steps={max_steps})
    return sol.ys, sol.stats["num_accepted_steps"]

run = jax.jit(jax.vmap(solve))
r0, v0 = workload.leo_cloud({n}, seed={seed})
y0 = jnp.asarray(np.concatenate([r0, v0], axis=1))
t = time.perf_counter()
ys, steps = run(y0); ys.block_until_ready()
first = time.perf_counter() - t
times = []
for _ in range({repeat}):
    t = time.perf_counter()
    ys, steps = run(y0); ys.block_until_ready()
    times.append(time.perf_counter() - t)
out = {{"seconds": min(times), "n_objects": {n}, "orbit_steps": int(steps.sum()),
       "device": str(jax.devices()[0]), "first_call_s": first, "samples_s": times,
       "steps_max": int(steps.max()), "max_steps": {max_steps}, "version": diffrax.__version__}}
if {keep}:
    out["final_rr"] = np.asarray(ys[:{keep}, -1, :3]).tolist()
print(json.dumps(out))
"""


def diffrax_dopri8(n, seed=2, timeout=400, repeat=1, keep=0, max_steps=4096):
    """diffrax Dopri8 with a PID controller, vmapped over objects, jitted (compile excluded):
    ``seconds`` is the best of ``repeat`` calls after a first one (``first_call_s``, compile
    included), ``orbit_steps`` its accepted steps (``steps_max``: the most of one object,
    against ``max_steps``); ``keep > 0`` adds the final positions of the first ``keep`` objects
    (``final_rr``, km). A failure or a timeout gives ``{"error": ...}``."""
    import importlib.util
    if importlib.util.find_spec("diffrax") is None:
        return missing(Missing("diffrax not installed (pip install -e .[bench])"))
    script = DIFFRAX_SCRIPT.format(here=HERE, n=n, seed=seed, repeat=max(1, repeat),
                                   keep=min(keep, n), max_steps=max_steps)
    # hapsira (imported by workloads) on the cpu: the GPU is JAX's alone
    env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false", HAPSIRA_TARGET="cpu")
    return _run_script(script, env, timeout)


def _run_script(script, env, timeout):
    """``script`` in a new Python process: its result (`_child_result`), or an error
    row when it outlasts ``timeout`` s."""
    try:
        done = subprocess.run([sys.executable, "-c", script], check=False, env=env,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    return _child_result(done)


def _child_result(done):
    """The last stdout line of a finished child as JSON, or ``{"error": its last stderr line,
    "stderr_tail": ...}``."""
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = (done.stderr or "").strip()
        return {"error": tail.splitlines()[-1] if tail else f"failed ({done.returncode})",
                "stderr_tail": tail[-3000:]}
    return json.loads(lines[-1])


#: the reference model (two-body + J2, as `workloads.jax_rhs`) in CuBIE's equation strings:
#: auxiliaries first, then the derivatives of the states; mu, j2, req are constants
CUBIE_COWELL_STATES = ("x", "y", "z", "vx", "vy", "vz")
CUBIE_COWELL_EQUATIONS = [
    "r2 = x*x + y*y + z*z",
    "r = sqrt(r2)",
    "zz = z*z / r2",
    "c = -mu / (r2*r)",
    "fj2 = 1.5*mu*j2*req*req / (r2*r2*r)",
    "dx = vx",
    "dy = vy",
    "dz = vz",
    "dvx = c*x + fj2*x*(5*zz - 1)",
    "dvy = c*y + fj2*y*(5*zz - 1)",
    "dvz = c*z + fj2*z*(5*zz - 3)",
]

CUBIE_SCRIPT = """
import json, sys
sys.path.insert(0, {here!r})
import peers
print(json.dumps(peers.cubie_cowell_here({n}, seed={seed}, repeat={repeat}, keep={keep},
                                         dt0={dt0!r}, parameter={parameter!r})))
"""


def cubie_cowell(n, seed=2, repeat=3, keep=0, timeout=600, dt0=10.0):
    """CuBIE (PyPI ``cubie``) on the reference workload, in its own process (a CUDA failure
    there cannot take the caller down; hapsira on the cpu there, CuBIE's caches in a new
    folder, so that its first call compiles): `cubie_cowell_here`'s dict, or
    ``{"error": ...}``. Should the system without parameters fail (other than by a
    timeout), one more process runs it with one unused parameter per run
    (``"first_try_error"`` says why)."""
    import importlib.util
    if importlib.util.find_spec("cubie") is None:
        return missing(Missing("cubie not installed (pip install cubie, or "
                               "pip install -e .[bench-gpu])"))
    result = _cubie_child(n, seed, repeat, keep, timeout, dt0, None)
    if "error" in result and not result["error"].startswith("timed out"):
        retry = _cubie_child(n, seed, repeat, keep, timeout, dt0, True)
        retry["first_try_error"] = result["error"]
        retry["first_try_stderr_tail"] = result.get("stderr_tail")
        return retry
    return result


def _cubie_child(n, seed, repeat, keep, timeout, dt0, parameter):
    import tempfile
    script = CUBIE_SCRIPT.format(here=HERE, n=n, seed=seed, repeat=max(1, repeat),
                                 keep=min(keep, n), dt0=float(dt0), parameter=parameter)
    with tempfile.TemporaryDirectory(prefix="cubie_cache_") as scratch:
        env = dict(os.environ, HAPSIRA_TARGET="cpu", NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS="0",
                   CUBIE_CACHE_DIR=scratch)
        return _run_script(script, env, timeout)


def cubie_cowell_here(n, seed=2, repeat=3, keep=0, dt0=10.0, parameter=None):
    """CuBIE in this process: `CUBIE_COWELL_EQUATIONS` (``create_ODE_system``, float64, the
    constants of workloads.py), ``Solver`` with its ``dop853`` tableau and a PID controller at
    the workload's rtol/atol, first step ``dt0`` s, steps up to a day (CuBIE's default
    ``dt_max`` is 1 s), final state only (plus its step counters), one run per object of
    ``leo_cloud(n, seed)`` (``grid_type="verbatim"``). ``setup_s``: the system and the solver;
    ``first_call_s``: the first ``solve`` (code generation and compile included);
    ``seconds``: the best of ``repeat`` further calls (each after the previous result is
    released, so that CuBIE reuses its buffers). ``orbit_steps``: accepted steps (its
    counters: steps taken less the rejected ones); ``final_rr``: the final positions (km) of
    the first ``keep`` objects. ``parameter``: give the system one unused parameter per run
    (``None``: only under the CUDA simulator)."""
    import gc
    cubie = need("cubie", "cubie (the bench-gpu extra)")
    r0, v0 = workload.leo_cloud(n, seed)
    y0 = np.concatenate([r0, v0], axis=1)
    settings = {"algorithm": "dop853", "step_controller": "pid", "atol": workload.ATOL,
                "rtol": workload.RTOL, "dt": float(dt0), "dt_min": 1e-6,
                "dt_max": workload.DAY, "output_types": ["state", "iteration_counters"]}
    # No parameters. CuBIE's kernel still takes each run's column of its parameter array,
    # a (1, 1) placeholder then: harmless on a GPU (nothing is read), out of bounds for the
    # CUDA simulator's checks, where (only) the system gets one unused parameter per run.
    simulator = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
    parameter = simulator if parameter is None else bool(parameter)
    start = time.perf_counter()
    system = cubie.create_ODE_system(
        CUBIE_COWELL_EQUATIONS, precision=np.float64,
        states={s: float(y0[0, i]) for i, s in enumerate(CUBIE_COWELL_STATES)},
        parameters={"unused": 0.0} if parameter else None,
        constants={"mu": workload.K, "j2": workload.J2, "req": workload.R})
    solver = cubie.Solver(system, time_logging_level=None, **settings)
    setup = time.perf_counter() - start
    # pre-built (states, runs) inputs, the rows in the system's order of the states (CuBIE
    # sorts them by name): its path without grid building
    order = [CUBIE_COWELL_STATES.index(name) for name in system.states.names]
    inits = np.ascontiguousarray(y0[:, order].T)
    params = np.zeros((1, n)) if parameter else None

    def call():
        return solver.solve(inits, params, duration=workload.DAY, t0=0.0, grid_type="verbatim")

    start = time.perf_counter()
    res = call()
    first = time.perf_counter() - start
    times = []
    for _ in range(repeat):
        res = None
        gc.collect()
        start = time.perf_counter()
        res = call()
        times.append(time.perf_counter() - start)
    legend = {v: k for k, v in res.time_domain_legend.items()}
    final = np.asarray(res.time_domain_array)[-1]  # (variable, run)
    status = np.asarray(res.status_codes)
    out = {"seconds": min(times), "first_call_s": first, "setup_s": setup, "samples_s": times,
           "n_objects": n, "failed": int(np.sum(status != 0)),
           "version": getattr(cubie, "__version__", None),
           "settings": dict(settings, precision="float64", grid_type="verbatim",
                            states=list(system.states.names), simulator=simulator,
                            unused_parameter=parameter)}
    counters = res.iteration_counters  # (saves, [Newton, Krylov, steps, rejected], runs)
    if counters is not None and np.size(counters):
        counters = np.asarray(counters).sum(axis=0)
        accepted = counters[2] - counters[3]
        out.update(orbit_steps=int(accepted.sum()), rejected_steps=int(counters[3].sum()),
                   steps_mean=float(accepted.mean()), steps_max=int(accepted.max()))
    try:
        from numba import cuda
        name = cuda.get_current_device().name
        out["device"] = name.decode() if isinstance(name, bytes) else str(name)
    except Exception as error:  # noqa: BLE001 (the device's name is only a label)
        out["device"] = f"unknown ({type(error).__name__})"
    if keep:
        out["final_rr"] = np.stack([final[legend[s], :keep] for s in ("x", "y", "z")],
                                   axis=1).tolist()
    return out


# --- ensembles (workloads.problem): (first call s, best s, final states, extra) ---

CYRK_METHODS = {"RK23": 0, "RK45": 1, "DOP853": 2}


def ensemble_scipy(name, n, n_total, method="DOP853", rtol=workload.ENSEMBLE_RTOL,
                   atol=workload.ENSEMBLE_ATOL):
    """scipy's ``solve_ivp``, the first ``n`` of ``n_total`` objects, one at a time:
    (seconds, final states)."""
    from scipy.integrate import solve_ivp

    y0, params = workload.problem(name, n_total)
    rhs = workload.ensemble_rhs(name)
    final = np.empty((n, 2))
    t = time.perf_counter()
    for i in range(n):
        sol = solve_ivp(rhs, workload.SPANS[name], y0[i], method=method, rtol=rtol, atol=atol,
                        args=(params[i],))
        final[i] = sol.y[:, -1]
    return time.perf_counter() - t, final


def ensemble_cyrk(name, n, method="DOP853", repeat=3):
    """CyRK's numba solver ``nbsolve_ivp`` in an ``njit`` loop over the objects (PyPI ``cyrk``)."""
    import numba
    nbsolve_ivp = need("CyRK", "cyrk").nbsolve_ivp
    rtol, atol = workload.ENSEMBLE_RTOL, workload.ENSEMBLE_ATOL

    @numba.njit
    def van_der_pol(t, y, mu):
        return np.array([y[1], mu * (1.0 - y[0] * y[0]) * y[1] - y[0]])

    @numba.njit
    def lotka_volterra(t, y, a, b, c, d):
        return np.array([a * y[0] - b * y[0] * y[1], -c * y[1] + d * y[0] * y[1]])

    rk = CYRK_METHODS[method]
    t0, tf = workload.SPANS[name]
    if name == "van_der_pol":
        @numba.njit
        def ensemble(y0, params, out):
            for i in range(y0.shape[0]):
                result = nbsolve_ivp(van_der_pol, (t0, tf), y0[i], (params[i, 0],),
                                     rtol=rtol, atol=atol, rk_method=rk, warnings=False)
                out[i] = result[6][:, -1]  # CyRK 0.20: (success, message, 4 counts, y, t)
    else:
        @numba.njit
        def ensemble(y0, params, out):
            for i in range(y0.shape[0]):
                p = params[i]
                result = nbsolve_ivp(lotka_volterra, (t0, tf), y0[i],
                                     (p[0], p[1], p[2], p[3]), rtol=rtol, atol=atol,
                                     rk_method=rk, warnings=False)
                out[i] = result[6][:, -1]
    y0, params = workload.problem(name, n)
    out = np.empty((n, 2))
    t = time.perf_counter()
    ensemble(y0[:2], params[:2], out[:2])
    compile_s = time.perf_counter() - t
    best, _, _ = harness.best_of(lambda: ensemble(y0, params, out), repeat)
    return compile_s, best, out, {}


def ensemble_diffrax(name, y0, params, repeat=3):
    """``jax.jit(jax.vmap(diffeqsolve))``, ``Dopri8``, PID controller, float64, JAX's default device."""
    jax = need("jax")
    jax.config.update("jax_enable_x64", True)
    diffrax = need("diffrax")
    import jax.numpy as jnp
    rtol, atol = workload.ENSEMBLE_RTOL, workload.ENSEMBLE_ATOL
    rhs = workload.ensemble_jax_rhs(name)
    t0, tf = workload.SPANS[name]

    def solve(y, p):
        sol = diffrax.diffeqsolve(diffrax.ODETerm(rhs), diffrax.Dopri8(), t0, tf, None, y, args=p,
                                  stepsize_controller=diffrax.PIDController(rtol=rtol, atol=atol),
                                  saveat=diffrax.SaveAt(t1=True), max_steps=100_000)
        return sol.ys[-1], sol.stats["num_accepted_steps"], sol.result._value

    program = jax.jit(jax.vmap(solve))

    def call():
        out = program(jnp.asarray(y0), jnp.asarray(params))
        jax.block_until_ready(out)
        return out

    first, best, (final, steps, result) = harness.first_and_best(call, repeat)
    return first, best, np.asarray(final), {
        "mean_steps": float(np.mean(steps)), "failed": int(np.sum(np.asarray(result) != 0)),
        "device": str(jax.devices()[0]), "version": diffrax.__version__}


CUBIE_EQUATIONS = {
    "van_der_pol": (["dx = v", "dv = mu * (1 - x*x) * v - x"], ("x", "v"), ("mu",)),
    "lotka_volterra": (["dx = a*x - b*x*y", "dy = -c*y + d*x*y"], ("x", "y"), ("a", "b", "c", "d")),
}


def ensemble_cubie(name, y0, params, repeat=3):
    """CuBIE (PyPI ``cubie``, a numba-cuda batch integrator): ``Solver`` with its ``dop853``
    tableau, a PID controller, float64, one run per (y0, params) row (``grid_type="verbatim"``)."""
    cubie = need("cubie", "cubie (the bench-gpu extra)")
    equations, states, names = CUBIE_EQUATIONS[name]
    system = cubie.create_ODE_system(equations, precision=np.float64,
                                     states={s: 1.0 for s in states},
                                     parameters={p: 1.0 for p in names})
    solver = cubie.Solver(system, algorithm="dop853", step_controller="pid",
                          atol=workload.ENSEMBLE_ATOL, rtol=workload.ENSEMBLE_RTOL,
                          output_types=["state"], time_logging_level=None)
    inits = {s: np.ascontiguousarray(y0[:, i]) for i, s in enumerate(states)}
    values = {p: np.ascontiguousarray(params[:, i]) for i, p in enumerate(names)}
    t0, tf = workload.SPANS[name]

    def call():
        return solver.solve(inits, values, duration=tf - t0, t0=t0, grid_type="verbatim")

    first, best, res = harness.first_and_best(call, repeat)
    legend = {v: k for k, v in res.time_domain_legend.items()}
    final = np.column_stack([res.time_domain_array[-1, legend[s], :] for s in states])
    status = np.asarray(res.status_codes)
    return first, best, final, {"failed": int(np.sum(status != 0)),
                                "version": getattr(cubie, "__version__", None)}
