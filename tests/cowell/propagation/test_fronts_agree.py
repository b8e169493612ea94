"""The same bad arguments give the same error (type and message) on every front of
``cowell``: numpy, JAX and Dask call one checker (`hapsira_cowell.propagation.forms.call_options`),
and a params read past the row at a computed index is caught on each.

Before the shared checker the JAX front returned status 0 (and garbage) for both
of the params cases below. Functions are defined at module level: Dask workers
import them from this module.
"""

import warnings

import numpy as np
import pytest
from extras import need

jax = need("jax")
da = need("dask.array")

import hapsira_core.fronts.jax as fronts_jax  # noqa: E402
import hapsira_cowell.propagation.dask as cowell_dask  # noqa: E402
import hapsira_cowell.propagation.jax as cowell_jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from hapsira_core import settings  # noqa: E402
from hapsira_core.fronts.jax import xla  # noqa: E402
from hapsira_core.ivp import Event as CoreEvent  # noqa: E402
from hapsira_core.jit import hjit  # noqa: E402
from hapsira_core.targets import active  # noqa: E402
from hapsira_cowell import cowell  # noqa: E402
from hapsira_cowell.models.perturbations import two_body  # noqa: E402

SIM = settings.TARGET == "cuda" and settings.cuda_simulator_enabled()
_SIMULATED = {}
K = 398600.4418
R0 = np.array([[7000.0, 0.0, 0.0], [7100.0, 0.0, 0.0], [7200.0, 0.0, 0.0]])
V0 = np.array([[0.0, 7.5, 0.0], [0.0, 7.4, 0.1], [0.0, 7.3, 0.2]])
TOFS = np.array([10.0, 20.0])


def _simulated_kernel(kernel, what):
    if id(kernel) not in _SIMULATED:
        _SIMULATED[id(kernel)] = (kernel, xla.XlaKernel(kernel, what, simulator_on_cpu=True))
    return _SIMULATED[id(kernel)][1]


@pytest.fixture(autouse=True)
def _x64_and_simulator(monkeypatch):
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    if SIM:
        monkeypatch.setattr(fronts_jax, "xla_kernel", _simulated_kernel)
    yield
    jax.config.update("jax_enable_x64", previous)


@hjit
def drag_at_computed_column(t, rr, vv, k, p):
    """Reads the column that p[0] names."""
    drr, dvv = two_body(t, rr, vv, k, p)
    c = p[int(p[0])]
    return drr, (dvv[0] - c * vv[0], dvv[1] - c * vv[1], dvv[2] - c * vv[2])


@hjit
def drag_in_column_3(t, rr, vv, k, p):
    drr, dvv = two_body(t, rr, vv, k, p)
    return drr, (dvv[0] - p[3] * vv[0], dvv[1] - p[3] * vv[1], dvv[2] - p[3] * vv[2])


@hjit
def radius_above_7000(t, y, p):
    return y[0] - 7000.0


def numpy_front(r0, v0, tofs, **kwargs):
    return cowell(K, r0, v0, tofs, **kwargs)


def jax_front(r0, v0, tofs, **kwargs):
    return cowell_jax.cowell(K, jnp.asarray(r0), jnp.asarray(v0), jnp.asarray(tofs), **kwargs)


def dask_front(r0, v0, tofs, **kwargs):
    # lazy: a kernel's failure shows when the chunks run
    return cowell_dask.cowell(K, da.from_array(r0, chunks=(1, 3)), v0, tofs,
                              **kwargs).compute(retries=0, scheduler="synchronous")


FRONTS = {"numpy": numpy_front, "jax": jax_front, "dask": dask_front}

CASES = {
    "params too narrow for f": {"f": drag_in_column_3, "params": np.ones((3, 2))},
    "negative rtol": {"rtol": -1.0},
    "atol of 5": {"atol": [1e-6] * 5},
    "max_steps 2**70": {"max_steps": 2 ** 70},
    "max_event_records -1": {"max_event_records": -1},
    "events of another kind": {"events": [object()]},
    "f not callable": {"f": 3.0},
    "solve_ivp's event": {"events": [CoreEvent(radius_above_7000)]},
}


def error_of(front, kwargs, r0=R0, v0=V0, tofs=TOFS):
    with pytest.raises(Exception) as info:
        FRONTS[front](r0, v0, tofs, **kwargs)
    return type(info.value), str(info.value)


@pytest.mark.parametrize("front", ["jax", "dask"])
@pytest.mark.parametrize("case", list(CASES))
def test_bad_arguments_raise_the_numpy_fronts_error(front, case):
    want = error_of("numpy", CASES[case])
    assert error_of(front, CASES[case]) == want
    assert issubclass(want[0], (ValueError, TypeError))


def test_the_width_error_names_f_and_the_column():
    kind, message = error_of("numpy", CASES["params too narrow for f"])
    assert kind is ValueError
    assert "drag_in_column_3" in message and "reads p[3]" in message


@pytest.mark.parametrize("front", ["numpy", "jax", "dask"])
def test_a_params_read_past_the_row_at_a_computed_index_is_an_error(front):
    """The last of three objects names a column past its row (p[7] of 2 columns)."""
    params = np.array([[1.0, 0.0], [1.0, 1e-9], [7.0, 0.0]])
    if getattr(active, "GUARDED_READS", False):  # a GPU cannot raise: NaN, the object fails
        res = FRONTS[front](R0, V0, TOFS, f=drag_at_computed_column, params=params)
        status = np.asarray(res.status).tolist()
        assert status[:2] == [0, 0] and status[2] < 0
        assert np.all(np.isnan(np.asarray(res.rr)[2]))
        return
    with pytest.raises(Exception, match=r"params: a read past the end of a params row"):
        FRONTS[front](R0, V0, TOFS, f=drag_at_computed_column, params=params)


@pytest.mark.parametrize("front", ["jax", "dask"])
def test_in_range_computed_reads_give_the_numpy_fronts_numbers(front):
    params = np.array([[1.0, 0.0], [1.0, 1e-6], [0.0, 0.0]])
    want = numpy_front(R0, V0, TOFS, f=drag_at_computed_column, params=params)
    got = FRONTS[front](R0, V0, TOFS, f=drag_at_computed_column, params=params)
    assert np.asarray(want.status).tolist() == [0, 0, 0]
    np.testing.assert_array_equal(np.asarray(got.status), np.asarray(want.status))
    np.testing.assert_allclose(np.asarray(got.rr), np.asarray(want.rr), rtol=0, atol=0)


UNITS_CASES = {
    "k in m^3/s^2": dict(k=K * 1e9),
    "r0 in m about the Sun": dict(k=1.32712440018e11, r0=R0 * 1.5e8),
    "v0 in m/s": dict(v0=V0 * 1e3),
    "r0 in AU about the Sun": dict(k=1.32712440018e11, r0=R0 / 7000.0),
}


def units_messages(front, case):
    """The messages of the UnitsWarnings about the inputs (those naming k, r0 or v0)."""
    args = {"k": K, "r0": R0, "v0": V0, **UNITS_CASES[case]}
    k, r0, v0 = args["k"], args["r0"], args["v0"]
    calls = {
        "numpy": lambda: cowell(k, r0, v0, TOFS),
        "jax": lambda: cowell_jax.cowell(k, jnp.asarray(r0), jnp.asarray(v0), jnp.asarray(TOFS)),
        # numpy states, Dask params: the states are looked at on the client (a Dask array
        # of states is not: that would compute it)
        "dask": lambda: cowell_dask.cowell(k, r0, v0, TOFS,
                                           params=da.zeros((3, 1), chunks=(1, 1))).compute(
                                               retries=0, scheduler="synchronous"),
    }
    from hapsira_cowell import UnitsWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        calls[front]()
    return [str(w.message) for w in caught if issubclass(w.category, UnitsWarning)
            and str(w.message).startswith(("k:", "r0:", "v0:"))]


@pytest.mark.parametrize("front", ["jax", "dask"])
@pytest.mark.parametrize("case", list(UNITS_CASES))
def test_units_warnings_are_the_numpy_fronts(front, case):
    want = units_messages("numpy", case)
    assert len(want) == 1
    assert units_messages(front, case) == want


@pytest.mark.parametrize("front", ["jax", "dask"])
def test_the_tofs_units_warning_is_the_numpy_fronts(front):
    """TOFS (10 and 20 "s" of LEO orbits) looks like days: every front says so alike."""
    from hapsira_cowell import UnitsWarning

    calls = {
        "numpy": lambda: cowell(K, R0, V0, TOFS),
        "jax": lambda: cowell_jax.cowell(K, jnp.asarray(R0), jnp.asarray(V0), jnp.asarray(TOFS)),
        "dask": lambda: cowell_dask.cowell(K, R0, V0, TOFS,
                                           params=da.zeros((3, 1), chunks=(1, 1))).compute(
                                               retries=0, scheduler="synchronous"),
    }

    def messages(name):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            calls[name]()
        return [str(w.message) for w in caught if issubclass(w.category, UnitsWarning)
                and str(w.message).startswith("tofs:")]

    want = messages("numpy")
    assert len(want) == 1 and "looks like days" in want[0]
    assert messages(front) == want
