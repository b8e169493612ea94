"""Property-based checks (hypothesis): random valid and invalid arguments to cowell and solve_ivp.

Valid arguments match scipy or fail alone with a status; invalid ones raise a
ValueError or TypeError that names the argument; nothing crashes.
"""

import math

import numpy as np
import pytest
from astropy import units as u
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.integrate import solve_ivp as scipy_solve_ivp

from hapsira_core import settings as hapsira_settings
from hapsira_core.ivp import solve_ivp
from hapsira_core.jit import hjit
from hapsira_cowell import cowell

from reference import K_EARTH, coe_to_rv

SIMULATED = hapsira_settings.TARGET == "cuda" and hapsira_settings.cuda_simulator_enabled()
# the simulator runs every thread in Python: fewer, shorter examples there
EXAMPLES = 6 if SIMULATED else 25
SLOW = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
FAST = settings(max_examples=60, deadline=None, derandomize=True)


@hjit
def lotka(t, y, p):
    return (p[0] * y[0] - p[1] * y[0] * y[1], -p[2] * y[1] + p[3] * y[0] * y[1])


def two_body_np(t, y):
    r = math.sqrt(y[0] ** 2 + y[1] ** 2 + y[2] ** 2)
    return np.concatenate([y[3:], -K_EARTH * y[:3] / r ** 3])


orbit = st.tuples(st.floats(6700.0, 20000.0), st.floats(0.0, 0.5), st.floats(0.0, math.pi),
                  st.floats(0.0, 2 * math.pi), st.floats(0.0, 2 * math.pi),
                  st.floats(0.0, 2 * math.pi))


def state(elements):
    a, ecc, inc, raan, argp, nu = elements
    return coe_to_rv(K_EARTH, a * (1 - ecc ** 2), ecc, inc, raan, argp, nu)


@SLOW
@given(orbits=st.lists(orbit, min_size=1, max_size=4),
       times=st.lists(st.floats(10.0, 3000.0), min_size=1, max_size=4, unique=True),
       backward=st.booleans(), rtol=st.floats(1e-11, 1e-7), atol=st.floats(1e-12, 1e-8),
       bad=st.sampled_from([None, "nan", "centre"]))
def test_valid_orbits_match_scipy_or_fail_alone(orbits, times, backward, rtol, atol, bad):
    r0 = np.array([state(o)[0] for o in orbits])
    v0 = np.array([state(o)[1] for o in orbits])
    tofs = np.sort(times) * (-1.0 if backward else 1.0)
    clean = cowell(K_EARTH, r0, v0, tofs, rtol, atol)
    assert (clean.status == 0).all()
    reference = scipy_solve_ivp(two_body_np, (0.0, tofs[-1]), np.concatenate([r0[0], v0[0]]),
                                method="DOP853", t_eval=tofs, rtol=rtol, atol=atol)
    scale = np.abs(reference.y[:3]).max()
    np.testing.assert_allclose(clean.rr[0], reference.y[:3].T, rtol=0,
                               atol=max(1e-6, 1e3 * rtol) * scale)
    if bad is not None:
        r_bad = np.vstack([r0, [np.nan, 1.0, 2.0] if bad == "nan" else [0.0, 0.0, 0.0]])
        v_bad = np.vstack([v0, [0.1, 7.0, 0.2]])
        mixed = cowell(K_EARTH, r_bad, v_bad, tofs, rtol, atol)
        assert mixed.status[-1] < 0 and np.isnan(mixed.rr[-1]).all()
        np.testing.assert_array_equal(mixed.rr[:-1], clean.rr)
        np.testing.assert_array_equal(mixed.status[:-1], clean.status)


@SLOW
@given(y0=st.lists(st.tuples(st.floats(0.5, 10.0), st.floats(0.5, 10.0)), min_size=1, max_size=3),
       rates=st.tuples(st.floats(0.5, 2.0), st.floats(0.3, 1.5), st.floats(1.0, 4.0),
                       st.floats(0.3, 1.5)),
       method=st.sampled_from(["DOP853", "RK45", "RK23"]), end=st.floats(1.0, 10.0),
       rtol=st.floats(1e-9, 1e-5))
def test_valid_ensembles_match_scipy(y0, rates, method, end, rtol):
    y0 = np.array(y0)
    res = solve_ivp(lotka, (0.0, end), y0, method=method, rtol=rtol, atol=1e-10, params=rates)
    for i in range(len(y0)):
        p = rates
        reference = scipy_solve_ivp(lambda t, y: [p[0] * y[0] - p[1] * y[0] * y[1],
                                                  -p[2] * y[1] + p[3] * y[0] * y[1]],
                                    (0.0, end), y0[i], method=method, rtol=rtol, atol=1e-10)
        assert res.status[i] == 0
        assert abs(int(res.nsteps[i]) - (len(reference.t) - 1)) <= 1
        np.testing.assert_allclose(res.y[i, :, -1], reference.y[:, -1],
                                   rtol=max(1e-9, 1e2 * rtol))


R0 = np.array([[7000.0, 100.0, 50.0], [6900.0, -300.0, 800.0]])
V0 = np.array([[0.1, 7.5, 1.0], [-0.5, 7.3, 1.5]])

COWELL_MISTAKES = [
    ("k", dict(k=-1.0)), ("k", dict(k=math.nan)), ("k", dict(k=[1.0, 2.0])),
    ("r0", dict(r0=R0[:, :2])), ("r0", dict(r0=R0 + 1j)), ("r0", dict(r0=R0 > 0)),
    ("r0", dict(r0=R0.astype(str))), ("r0", dict(r0=R0 * u.s)),
    ("r0, v0", dict(v0=V0[:1])), ("tofs", dict(tofs=[])), ("tofs", dict(tofs=[1.0, -1.0])),
    ("tofs", dict(tofs=[math.nan])), ("tofs", dict(tofs=[3.0, 2.0])),
    ("rtol", dict(rtol=-1.0)), ("rtol", dict(rtol=[1e-6, 1e-6])), ("atol", dict(atol=math.inf)),
    ("params", dict(params=[1.0, 2.0] * u.m)), ("params", dict(params=[[1.0], [2.0], [3.0]])),
    ("params", dict(params=["x"])), ("params", dict(params=[[1.0, 2.0], [3.0]])),
    ("max_steps", dict(max_steps=0)), ("max_steps", dict(max_steps=2.5)),
    ("max_event_records", dict(max_event_records=-1)), ("events", dict(events=5)),
    ("f", dict(f=3.0)),
]

IVP_MISTAKES = [
    ("method", dict(method="LSODA")), ("t_span", dict(t_span=(0.0,))),
    ("t_span", dict(t_span=(0.0, math.inf))), ("t_eval", dict(t_eval=[20.0])),
    ("t_eval", dict(t_eval=[3.0, 1.0])), ("y0", dict(y0=np.ones((2, 0)))),
    # a tuple-form fun (lotka) at n = 40: any n integrates, but in the array form
    ("fun", dict(y0=np.ones((2, 40)))),
    ("y0", dict(y0=[[1.0, 2.0], [3.0]])), ("y0", dict(y0=np.array([1 + 1j, 2.0]))),
    ("rtol", dict(rtol=[1e-3] * 3)), ("params", dict(params=[1.0, 2.0])),
    ("params", dict(params=[1.0, 2.0, 3.0, 4.0] * u.kg)), ("fun", dict(fun=None)),
]


@FAST
@given(mistakes=st.lists(st.sampled_from(COWELL_MISTAKES), min_size=1, max_size=1))
def test_invalid_cowell_arguments_raise_named_errors(mistakes):
    name, change = mistakes[0]
    args = dict(k=K_EARTH, r0=R0, v0=V0, tofs=[100.0, 200.0])
    args.update(change)
    with pytest.raises((ValueError, TypeError)) as error:
        cowell(args.pop("k"), args.pop("r0"), args.pop("v0"), args.pop("tofs"), **args)
    assert str(error.value).startswith(name) or f"{name}:" in str(error.value), str(error.value)


@FAST
@given(mistakes=st.lists(st.sampled_from(IVP_MISTAKES), min_size=1, max_size=1))
def test_invalid_solve_ivp_arguments_raise_named_errors(mistakes):
    name, change = mistakes[0]
    args = dict(fun=lotka, t_span=(0.0, 10.0), y0=[[1.0, 2.0], [3.0, 4.0]],
                params=[1.0, 1.0, 1.0, 1.0])
    args.update(change)
    with pytest.raises((ValueError, TypeError)) as error:
        solve_ivp(args.pop("fun"), args.pop("t_span"), args.pop("y0"), **args)
    assert f"{name}" in str(error.value).split(":")[0] or f"{name}:" in str(error.value), \
        str(error.value)
