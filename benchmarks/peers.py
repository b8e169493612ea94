"""The peers, each a function that runs a workload of workloads.py and returns its timings.

Reference workload (``workloads.leo_cloud(n, seed)``, two-body + J2, one
day): `hapsira_target` (another target, in its own process), `scipy_dop853`,
`heyoka_batch` (SIMD batches), `heyoka_scalar`, `diffrax_dopri8`. Each returns
``{"seconds": ..., "n_objects": ..., ...}``; where a peer would take too long
for ``n``, it runs ``n_max`` objects and scales linearly (``"extrapolated_from"``
says how many really ran).

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
                              max_steps=4096)
    return sol.ys, sol.stats["num_accepted_steps"]

run = jax.jit(jax.vmap(solve))
r0, v0 = workload.leo_cloud({n}, seed={seed})
y0 = jnp.asarray(np.concatenate([r0, v0], axis=1))
ys, steps = run(y0); ys.block_until_ready()
t = time.perf_counter()
ys, steps = run(y0); ys.block_until_ready()
seconds = time.perf_counter() - t
print(json.dumps({{"seconds": seconds, "n_objects": {n}, "orbit_steps": int(steps.sum()),
                  "device": str(jax.devices()[0])}}))
"""


def diffrax_dopri8(n, seed=2, timeout=400):
    """diffrax Dopri8 with a PID controller, vmapped over objects, jitted (compile excluded)."""
    script = DIFFRAX_SCRIPT.format(here=HERE, n=n, seed=seed)
    env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false")
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=timeout)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr else "failed"}
    return json.loads(done.stdout.strip().splitlines()[-1])
