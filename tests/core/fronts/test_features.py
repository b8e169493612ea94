"""Every front with every feature of the one table (`hapsira_core.ivp.call.FEATURES`): a
front that takes a feature gives the numpy front's numbers; one that does not refuses it
with the declared error, naming the front and the argument. The table in
docs/architecture.md is the table in code.

Functions are defined at module level: Dask workers import them from this module.
"""

import pathlib
import warnings

import numpy as np
import pytest
from extras import need

from hapsira_core import settings
from hapsira_core.ivp import Event, solve_ivp
from hapsira_core.ivp.call import FEATURES, FRONTS, feature_table
from hapsira_core.jit import hjit
from hapsira_cowell import cowell
from hapsira_cowell.events import LithobrakeEvent

ROOT = pathlib.Path(__file__).resolve().parents[3]


@pytest.fixture(autouse=True)
def _jax_on_the_cpu_under_the_simulator(monkeypatch):
    # the CUDA simulator has no XLA platform: there the JAX fronts' kernels run on the
    # CPU (XlaKernel(..., simulator_on_cpu=True)), as in test_jax.py
    if not (settings.TARGET == "cuda" and settings.cuda_simulator_enabled()):
        return
    try:
        import hapsira_core.fronts.jax as front
        from hapsira_core.fronts.jax import xla
    except ImportError:  # no jax: its fronts' cases skip, naming the extra
        return
    made = {}

    def on_the_cpu(kernel, what):
        if id(kernel) not in made:
            made[id(kernel)] = (kernel, xla.XlaKernel(kernel, what, simulator_on_cpu=True))
        return made[id(kernel)][1]

    monkeypatch.setattr(front, "xla_kernel", on_the_cpu)


@hjit
def lotka(t, y, p):
    return (p[0] * y[0] - p[1] * y[0] * y[1], -p[2] * y[1] + p[3] * y[0] * y[1])


@hjit
def lotka_jac(t, y, p):
    return (p[0] - p[1] * y[1], -p[1] * y[0], p[3] * y[1], -p[2] + p[3] * y[0])


@hjit
def x_minus_one(t, y, p):
    return y[0] - 1.0


Y0 = np.array([[1.0, 2.0], [1.5, 0.5]])
P = np.array([1.0, 0.5, 0.8, 0.3])
K = 398600.4418
R0 = np.array([[7000.0, 0.0, 0.0], [0.0, 7200.0, 0.0]])
V0 = np.array([[0.0, 7.546, 0.5], [-7.4, 0.0, 0.3]])
TOFS = np.array([600.0, 1200.0, 3000.0])

#: each feature's arguments (by the table's ``what``): solve_ivp's, cowell's
SOLVE_IVP = {
    "per-object params rows (N, P)": dict(params=np.tile(P, (2, 1))),
    "events, terminal or not, their times recorded": dict(
        params=P, events=[Event(x_minus_one, terminal=True)]),
    "output times (M,)": dict(params=P, t_eval=[1.0, 5.0, 10.0]),
    "per-object output times (N, M)": dict(
        params=P, t_eval=np.array([[1.0, 5.0, 10.0], [2.0, 3.0, np.nan]])),
    "per-object spans (N,) t0 and tf": dict(
        params=P, t_span=(np.array([0.0, 1.0]), np.array([10.0, 4.0]))),
    "every accepted step, as scipy's t_eval=None": dict(params=P, t_eval="steps"),
    "res.sol(t), scipy's OdeSolution per object": dict(params=P, dense_output=True),
    "the state transition matrix, d y(t) / d y0": dict(params=P, stm=True),
    "a Jacobian for the implicit methods (function or matrix)": dict(
        params=P, method="Radau", jac=lotka_jac),
    "scipy's args, appended to each params row": dict(args=tuple(P)),
    "scipy's max_step": dict(params=P, max_step=0.5),
    "scipy's first_step": dict(params=P, first_step=0.01),
    "a progress bar": dict(params=P, progress=True),
}
COWELL = {
    "per-object params rows (N, P)": dict(params=np.array([[1.0], [2.0]])),
    "events, terminal or not, their times recorded": dict(events=[LithobrakeEvent(6378.0)]),
    "per-object times of flight (N, M)": dict(
        tofs=np.array([[600.0, 1200.0, 3000.0], [300.0, 900.0, np.nan]])),
    "the state transition matrix, d y(t) / d y0": dict(stm=True),
    "scipy's max_step": dict(max_step=100.0),
    "scipy's first_step": dict(first_step=1.0),
    "a progress bar": dict(progress=True),
}


def _jax():
    jax = need("jax")
    jax.config.update("jax_enable_x64", True)
    return jax


def _call(front, kwargs):
    """The front's call with ``kwargs``: numpy arrays of its result's fields."""
    kwargs = dict(kwargs)
    if not front.startswith("cowell"):
        t_span = kwargs.pop("t_span", (0.0, 10.0))
        if front == "numpy":
            return solve_ivp(lotka, t_span, Y0, **kwargs)
        if front == "JAX":
            _jax()
            from hapsira_core.jax import solve_ivp as jax_solve_ivp
            return jax_solve_ivp(lotka, t_span, Y0, **kwargs)
        da = need("dask.array")
        import dask
        with dask.config.set(scheduler="synchronous"):
            return solve_ivp(lotka, t_span, da.from_array(Y0, chunks=(1, 2)), **kwargs).compute()
    tofs = kwargs.pop("tofs", TOFS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if front == "cowell":
            return cowell(K, R0, V0, tofs, **kwargs)
        if front == "cowell JAX":
            _jax()
            from hapsira_cowell.jax import cowell as jax_cowell
            return jax_cowell(K, R0, V0, tofs, **kwargs)
        da = need("dask.array")
        import dask
        with dask.config.set(scheduler="synchronous"):
            return cowell(K, da.from_array(R0, chunks=(1, 3)), V0, tofs, **kwargs).compute()


def _arrays(result):
    return {name: np.asarray(getattr(value, "value", value))
            for name, value in result.arrays().items()}


CASES = [(front, feature) for feature in FEATURES for front in FRONTS
         if feature.on(front) != "-"]


@pytest.mark.parametrize("front, feature", CASES,
                         ids=[f"{front}-{feature.what}" for front, feature in CASES])
def test_every_front_with_every_feature(front, feature):
    table = COWELL if front.startswith("cowell") else SOLVE_IVP
    kwargs = table[feature.what]
    if feature.argument == "progress" and feature.on(front) == "yes":
        pytest.importorskip("tqdm", reason="progress=True needs the progress extra")
    if feature.on(front) == "refused":
        kind, message = feature.refused[front]
        with pytest.raises(kind) as error:
            _call(front, kwargs)
        text = str(error.value)
        assert text == message
        assert text.startswith(feature.argument.split("=")[0] + ("=" if "=" in
                                                                   feature.argument else ":"))
        assert front.split()[-1] in text
        return
    got = _arrays(_call(front, kwargs))
    numpy_front = "cowell" if front.startswith("cowell") else "numpy"
    expected = _arrays(_call(numpy_front, kwargs))
    assert got.keys() == expected.keys()
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=f"{front}: {name}")
    assert np.all(np.atleast_1d(got["status"]) >= 0)


def test_the_docs_show_the_table():
    assert feature_table() in (ROOT / "docs" / "architecture.md").read_text()


def test_every_front_has_every_feature_in_the_table():
    assert {front for front, _ in CASES} == set(FRONTS)
    assert {feature.what for feature in FEATURES} == set(SOLVE_IVP) | set(COWELL)
