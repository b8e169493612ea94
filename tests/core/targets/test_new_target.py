"""Adding a target is one module in a folder of targets: a test target, written
here and found through HAPSIRA_TARGETS_PATH, runs the core cases against scipy."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from scipy.integrate import solve_ivp as scipy_solve_ivp

# The whole target: the cpu target's code, but objects run last to first, so that
# a result in the right row proves the new kernel (not cpu's) ran.
TARGET = textwrap.dedent('''
    """serial: one core, objects last to first (a test target)."""
    from hapsira_core import settings
    from hapsira_core.targets import cpu
    from hapsira_core.targets._host import (KEEP_STAGES, declare_foreign, hjit,
                                            is_device_array, rsqrt)

    NAME = "serial"
    BOUNDS_CHECKS = True
    XLA_PLATFORM = "cpu"
    XLA_SIMULATED = False
    xla_handler = cpu.xla_handler
    local_dask_cluster = cpu.local_dask_cluster
    RUNS = []


    def code_options():
        return (NAME, settings.DEBUG)


    def xla_mismatch(what):
        return f"{what}: the serial target runs on the CPU"


    class ObjectKernel(cpu.ObjectKernel):
        TARGET = NAME
        code_options = staticmethod(code_options)

        def _source(self):
            names, rows, first_out = self._call_parts()
            return (f"def kernel({names}):\\n"
                    f"    for j in range({first_out}.shape[0]):\\n"
                    f"        i = {first_out}.shape[0] - 1 - j\\n"
                    f"        body({rows})\\n")

        def _run(self, compiled, arrays):
            RUNS.append(arrays[self.n_inputs].shape[0])
            compiled(*arrays)
''')

SCRIPT = textwrap.dedent('''
    import json
    import numpy as np
    from hapsira_core import settings, targets
    from hapsira_core.ivp import Event, solve_ivp
    from hapsira_core.jit import hjit
    from hapsira_cowell import cowell

    @hjit
    def lotka(t, y, p):
        return (p[0] * y[0] - p[1] * y[0] * y[1], -p[2] * y[1] + p[3] * y[0] * y[1])

    @hjit
    def prey_low(t, y, p):
        return y[0] - 1.0

    y0 = np.array([[10.0, 5.0], [4.0, 2.0], [1.5, 3.0]])
    params = np.array([[1.5, 1.0, 3.0, 1.0], [1.1, 0.4, 0.4, 0.1], [0.9, 0.5, 0.8, 0.3]])
    res = solve_ivp(lotka, (0.0, 10.0), y0, method="RK45", t_eval=np.linspace(0, 10, 11),
                    rtol=1e-9, atol=1e-9, params=params, events=[Event(prey_low)])
    orbit = cowell(398600.4418, np.array([[7000.0, 0, 0], [0, 8000.0, 500.0]]),
                   np.array([[0, 7.5, 1.0], [-7.0, 0, 0.5]]), np.array([0.0, 3000.0]),
                   rtol=1e-11, atol=1e-12)
    print(json.dumps({"targets": list(settings.TARGETS), "active": targets.active.NAME,
                      "runs": targets.active.RUNS, "y": res.y.tolist(),
                      "nsteps": res.nsteps.tolist(), "status": res.status.tolist(),
                      "t_events": [row[:int(k)].tolist() for row, k in
                                   zip(res.t_events[0], res.n_events[:, 0])],
                      "rr": orbit.rr.tolist()}))
''')


@pytest.fixture(scope="module")
def serial_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("targets")
    (folder / "serial.py").write_text(TARGET)
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env.update(HAPSIRA_TARGET="serial", HAPSIRA_TARGETS_PATH=str(folder), HAPSIRA_CACHE="0")
    run = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_the_new_target_is_listed_and_active(serial_run):
    assert "serial" in serial_run["targets"] and "cpu" in serial_run["targets"]
    assert serial_run["active"] == "serial"
    assert serial_run["runs"] == [3, 2]  # its own kernel ran both problems


def test_the_new_target_equals_scipy(serial_run):
    y0 = [[10.0, 5.0], [4.0, 2.0], [1.5, 3.0]]
    params = [[1.5, 1.0, 3.0, 1.0], [1.1, 0.4, 0.4, 0.1], [0.9, 0.5, 0.8, 0.3]]
    for i, (start, (a, b, c, d)) in enumerate(zip(y0, params)):
        def rhs(t, y):
            return [a * y[0] - b * y[0] * y[1], -c * y[1] + d * y[0] * y[1]]

        def prey_low(t, y):
            return y[0] - 1.0
        sol = scipy_solve_ivp(rhs, (0.0, 10.0), start, method="RK45", t_eval=np.linspace(0, 10, 11),
                              rtol=1e-9, atol=1e-9, events=prey_low)
        steps = scipy_solve_ivp(rhs, (0.0, 10.0), start, method="RK45", rtol=1e-9, atol=1e-9)
        assert serial_run["status"][i] == 0
        assert serial_run["nsteps"][i] == steps.t.size - 1  # scipy's accepted steps
        np.testing.assert_allclose(serial_run["y"][i], sol.y, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(serial_run["t_events"][i], sol.t_events[0], rtol=1e-10)


def test_the_events_occurred(serial_run):
    assert sum(len(times) for times in serial_run["t_events"]) >= 3


def test_the_new_target_propagates_orbits(serial_run):
    k = 398600.4418
    for i, (r, v) in enumerate([([7000.0, 0, 0], [0, 7.5, 1.0]), ([0, 8000.0, 500.0], [-7.0, 0, 0.5])]):
        def f(t, y):
            rr = np.linalg.norm(y[:3])
            return np.concatenate([y[3:], -k * y[:3] / rr ** 3])
        sol = scipy_solve_ivp(f, (0.0, 3000.0), r + v, method="DOP853", rtol=1e-11, atol=1e-12)
        # scipy's f here rounds otherwise than two_body (1.6e-12 apart after 3000 s)
        np.testing.assert_allclose(serial_run["rr"][i][-1], sol.y[:3, -1], rtol=1e-10)
