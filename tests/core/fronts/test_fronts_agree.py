"""The same bad arguments give the same error (type and message) on every front of
``solve_ivp``: numpy, JAX and Dask call one checker (`hapsira_core.ivp.checks.solver_options`)
and tell a kernel's failure the same way (`hapsira_core.ivp.build.explain`).

Functions are defined at module level: Dask workers import them from this module.
"""

import numpy as np
import pytest
from extras import need

jax = need("jax")
da = need("dask.array")

import hapsira_core.fronts.jax as fronts_jax  # noqa: E402
import hapsira_core.jax as hcj  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from hapsira_core import settings  # noqa: E402
from hapsira_core.fronts.jax import xla  # noqa: E402
from hapsira_core.dask import solve_ivp as dask_solve_ivp  # noqa: E402
from hapsira_core.ivp import Event, solve_ivp  # noqa: E402
from hapsira_core.jit import hjit  # noqa: E402
from hapsira_cowell.models.events import LithobrakeEvent  # noqa: E402

SIM = settings.TARGET == "cuda" and settings.cuda_simulator_enabled()
_SIMULATED = {}


def _simulated_kernel(kernel, what):
    if id(kernel) not in _SIMULATED:
        _SIMULATED[id(kernel)] = (kernel, xla.XlaKernel(kernel, what, simulator_on_cpu=True))
    return _SIMULATED[id(kernel)][1]


@pytest.fixture(autouse=True)
def _x64_and_simulator(monkeypatch):
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    if SIM:
        # the JAX front's own module: hapsira_core.jax only re-exports its entry points
        monkeypatch.setattr(fronts_jax, "xla_kernel", _simulated_kernel)
    yield
    jax.config.update("jax_enable_x64", previous)


@hjit
def lotka(t, y, p):
    return (p[0] * y[0] - p[1] * y[0] * y[1], -p[2] * y[1] + p[3] * y[0] * y[1])


@hjit
def two_of_three(t, y, p):
    return (y[1], -y[0])


Y0 = np.array([[1.0, 2.0], [1.5, 0.5]])
P = np.array([1.0, 0.5, 0.8, 0.3])


def numpy_front(fun, t_span, y0, **kwargs):
    return solve_ivp(fun, t_span, y0, **kwargs)


def jax_front(fun, t_span, y0, **kwargs):
    return hcj.solve_ivp(fun, t_span, jnp.asarray(y0), **kwargs)


def dask_front(fun, t_span, y0, **kwargs):
    # lazy: a kernel's failure shows when the chunks run
    return dask_solve_ivp(fun, t_span, da.from_array(np.asarray(y0), chunks=(1, -1)),
                          **kwargs).compute(retries=0, scheduler="synchronous")


FRONTS = {"numpy": numpy_front, "jax": jax_front, "dask": dask_front}

CASES = {
    # y0 of 3 components for a function returning 2: numba's TypingError on JAX and Dask
    "y0 too wide for fun": (two_of_three, (0.0, 1.0), np.ones((2, 3)), {}),
    "t_span text": (lotka, "10", Y0, {"params": P}),
    "t_span of three": (lotka, (0.0, 1.0, 2.0), Y0, {"params": P}),
    "t_span NaN": (lotka, (0.0, np.nan), Y0, {"params": P}),
    "negative rtol": (lotka, (0.0, 1.0), Y0, {"params": P, "rtol": -1.0}),
    "atol of 3 for 2": (lotka, (0.0, 1.0), Y0, {"params": P, "atol": [1e-6] * 3}),
    "params too narrow": (lotka, (0.0, 1.0), Y0, {"params": P[:3]}),
    "params rows not N": (lotka, (0.0, 1.0), Y0, {"params": np.ones((3, 4))}),
    "max_steps 2**70": (lotka, (0.0, 1.0), Y0, {"params": P, "max_steps": 2 ** 70}),
    "unknown method": (lotka, (0.0, 1.0), Y0, {"params": P, "method": "RK99"}),
    "events of another kind": (lotka, (0.0, 1.0), Y0,
                               {"params": P, "events": [LithobrakeEvent(1.0)]}),
    "fun not callable": (3.0, (0.0, 1.0), Y0, {"params": P}),
}


def error_of(front, case):
    fun, t_span, y0, kwargs = CASES[case]
    with pytest.raises(Exception) as info:
        FRONTS[front](fun, t_span, y0, **kwargs)
    return type(info.value), str(info.value)


@pytest.mark.parametrize("front", ["jax", "dask"])
@pytest.mark.parametrize("case", list(CASES))
def test_bad_arguments_raise_the_numpy_fronts_error(front, case):
    want = error_of("numpy", case)
    assert error_of(front, case) == want
    assert issubclass(want[0], (ValueError, TypeError))


def test_the_width_error_names_the_users_function():
    kind, message = error_of("numpy", "y0 too wide for fun")
    assert "user function 'two_of_three'" in message
    assert "returns a tuple of 2" in message and "expected a tuple of 3 floats" in message
    assert isinstance(Event(lotka), Event)


@hjit
def decay_at_computed_index(t, y, p):
    return (-p[int(p[0])] * y[0],)


def test_jax_front_reports_a_params_read_past_the_row():
    """The last of three objects reads past its row: on parallel numba's prange
    dropped that exception and the JAX front returned garbage statuses."""
    if not SIM and settings.TARGET == "cuda":
        pytest.skip("a GPU cannot raise: the read gives NaN and the object fails "
                    "(tests/core/kernels/test_guard.py)")
    with pytest.raises(Exception, match=r"params: a read past the end of a params row"):
        jax_front(decay_at_computed_index, (0.0, 1.0), np.ones((3, 1)),
                  params=np.array([[0.0], [0.0], [5.0]]))
