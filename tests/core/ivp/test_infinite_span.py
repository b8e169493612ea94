"""An infinite ``t_span`` end (issue 27 item 5): objects run until a terminal event stops
them, as scipy's ``solve_ivp(fun, (t0, inf), y0, events=...)``; ``max_steps`` still ends
an object whose event never comes (status -2)."""

import numpy as np
import pytest
from scipy.integrate import solve_ivp as scipy_solve_ivp

from hapsira_core.ivp import Event, solve_ivp
from hapsira_core.jit import hjit
from hapsira_core.targets import active

METHODS = ("RK23", "RK45", "DOP853")
TOL = dict(rtol=1e-9, atol=1e-12)
#: against scipy: a few hundred steps (thousands drift apart in the last bits of the step
#: sizes, as any long run does: tests/core/ivp/test_scipy_ported.py says why)
LOOSE = dict(rtol=1e-6, atol=1e-9)
#: How far from scipy's the steps may round. DOP853's error estimate after these short
#: first steps is a cancellation near 1e-13 whose last bits scipy (numpy's K.T @ E) and
#: the kernel round differently, and the next step size follows it: measured on cpu,
#: breakpoints up to 2.1e-8 of the span apart (8 objects; RK45 3e-11), exactly the same
#: with tf = 1e4 in both; on a GPU (and its simulator) divisions also share reciprocals
#: (docs/api.md): 3.3e-8. That the infinite end changes nothing is shown bit for bit, on
#: every target, by the finite-end test; this one checks scipy's steps, count and events.
ROUNDING = 1e-6 if getattr(active, "SHARED_RECIPROCALS", False) else 1e-7


@hjit
def oscillator(t, y, p):
    return (y[1], -p[0] * p[0] * y[0])


@hjit
def below(t, y, p):
    return y[0] - p[1]


def oscillator_np(omega):
    return lambda t, y: [y[1], -omega * omega * y[0]]


def problem(n_objects, seed):
    """Oscillators of random frequency and phase; each stops the 2nd time its position
    falls through a level inside its amplitude (p[1])."""
    rng = np.random.default_rng(seed)
    omega = rng.uniform(0.5, 3.0, n_objects)
    y0 = np.stack([rng.uniform(-1.0, 1.0, n_objects), rng.uniform(-2.0, 2.0, n_objects)], 1)
    amplitude = np.hypot(y0[:, 0], y0[:, 1] / omega)
    level = rng.uniform(-0.8, 0.8, n_objects) * amplitude
    return y0, np.stack([omega, level], axis=1)


def falls(terminal=2):
    return Event(below, terminal=terminal, direction=-1)


def scipy_reference(y0, p, tf, method, **options):
    """scipy's run of one object to ``tf`` with the same terminal event."""
    def g(t, y):
        return y[0] - p[1]
    g.terminal, g.direction = 2, -1
    return scipy_solve_ivp(oscillator_np(p[0]), (0.0, tf), y0, method=method, events=g,
                           **options, **LOOSE)


@pytest.mark.parametrize("tf", [np.inf, -np.inf], ids=["forward", "backward"])
@pytest.mark.parametrize("method", METHODS)
def test_infinite_end_takes_scipys_steps_to_the_terminal_event(method, tf, simulated):
    """t_eval="steps" and dense_output=True: every object as scipy's own run to +-inf."""
    n_objects = 3 if simulated else 8
    y0, params = problem(n_objects, seed=11)
    res = solve_ivp(oscillator, (0.0, tf), y0, method=method, t_eval="steps", params=params,
                    events=falls(), dense_output=True, **LOOSE)
    for i in range(n_objects):
        obj = res[i]
        want = scipy_reference(y0[i], params[i], tf, method, dense_output=True)
        assert obj.status == want.status == 1, obj.message
        assert obj.t.shape == want.t.shape and np.isfinite(obj.t).all()
        span = abs(want.t[-1])
        # The same steps, to rounding (ROUNDING says why); states move with the
        # breakpoints (|dy/dt| <= 3)
        np.testing.assert_allclose(obj.t, want.t, rtol=0, atol=ROUNDING * span)
        np.testing.assert_allclose(obj.y, want.y, rtol=0, atol=10 * ROUNDING)
        np.testing.assert_allclose(obj.t_events[0], want.t_events[0], rtol=0,
                                   atol=ROUNDING * span)
        assert len(obj.t_events[0]) == 2 and obj.t_events[0][-1] == obj.t[-1]
        inside = np.linspace(0.0, want.t[-1], 9)
        np.testing.assert_allclose(obj.sol(inside), want.sol(inside), rtol=0,
                                   atol=10 * ROUNDING)
        assert obj.nsteps == len(want.t) - 1
        assert obj.nfev == want.nfev


@pytest.mark.parametrize("method", METHODS)
def test_infinite_end_is_bit_identical_to_a_finite_end_past_the_events(method, simulated):
    """A finite end that no step reaches gives the same run: the same first step (the
    span only caps it), the same steps, output states and events, bit for bit."""
    n_objects = 3 if simulated else 10
    y0, params = problem(n_objects, seed=5)
    t_eval = np.linspace(0.0, 2.0, 7)
    kwargs = dict(method=method, t_eval=t_eval, params=params, events=falls(), **TOL)
    endless = solve_ivp(oscillator, (0.0, np.inf), y0, **kwargs)
    finite = solve_ivp(oscillator, (0.0, 1e4), y0, **kwargs)
    assert (endless.status == 1).all() and endless.t_events[0].shape[1] >= 2
    for name in ("y", "status", "nfev", "nsteps", "n_events"):
        np.testing.assert_array_equal(getattr(endless, name), getattr(finite, name))
    np.testing.assert_array_equal(endless.t_events[0], finite.t_events[0])
    np.testing.assert_array_equal(endless.y_events[0], finite.y_events[0])
    # an output time after an object stopped is NaN, as with a finite end
    stopped = endless.t_events[0][:, 1]
    assert np.isnan(endless.y[:, 0, :][t_eval[None, :] > stopped[:, None]]).all()
    assert np.isfinite(endless.y[:, 0, :][t_eval[None, :] < stopped[:, None]]).all()


def test_per_object_infinite_ends_and_an_event_that_never_comes(simulated):
    """Per-object ends, finite and +-inf mixed: each object as alone with its own span; one
    whose level is out of reach runs to max_steps (status -2, NaN where not reached)."""
    y0, params = problem(4, seed=8)
    params[3, 1] = 10.0  # beyond its amplitude: never falls through it
    tf = np.array([np.inf, 3.0, -np.inf, np.inf])
    rows = np.array([np.linspace(0.0, 1.5, 4), np.linspace(0.0, 3.0, 4),
                     np.linspace(0.0, -1.5, 4), [0.0, 1.0, 1e6, np.nan]])
    res = solve_ivp(oscillator, (np.zeros(4), tf), y0, method="DOP853", t_eval=rows,
                    params=params, events=falls(), max_steps=300, **TOL)
    assert res.status[3] == -2 and res.nsteps[3] == 300 and res.n_events[3, 0] == 0
    assert np.isfinite(res.y[3, :, :2]).all() and np.isnan(res.y[3, :, 2:]).all()
    assert res.status[1] in (0, 1) and (res.status[[0, 2]] == 1).all()
    for i in range(3):
        alone = solve_ivp(oscillator, (0.0, tf[i]), y0[i], method="DOP853", t_eval=rows[i],
                          params=params[i], events=falls(), max_steps=300, **TOL)
        np.testing.assert_array_equal(res.y[i], alone.y)
        np.testing.assert_array_equal(res.t_events[0][i], alone.t_events[0])
        assert res.nfev[i] == alone.nfev
    # the endless object against a finite end it never reaches either: the same 300 steps
    finite = solve_ivp(oscillator, (0.0, 1e9), y0[3], method="DOP853", t_eval=rows[3, :3],
                       params=params[3], events=falls(), max_steps=300, **TOL)
    np.testing.assert_array_equal(res.y[3, :, :3], finite.y)
    assert np.all(finite.status == -2)


def test_max_step_and_first_step_with_an_infinite_end():
    """scipy's step options keep their meaning where |tf - t0| is infinite."""
    y0, params = problem(2, seed=2)
    res = solve_ivp(oscillator, (0.0, np.inf), y0, method="RK45", t_eval="steps",
                    params=params, events=falls(), max_step=0.05, first_step=1e-3, **LOOSE)
    for i in range(2):
        want = scipy_reference(y0[i], params[i], np.inf, "RK45", max_step=0.05,
                               first_step=1e-3)
        assert res[i].t.shape == want.t.shape and res[i].t[1] == want.t[1] == 1e-3
        assert np.diff(res[i].t).max() <= 0.05 * (1 + 1e-12)  # a difference of sums
        np.testing.assert_allclose(res[i].y, want.y, rtol=0, atol=10 * ROUNDING)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(t_span=(0.0, np.inf), t_eval=[1.0]), ValueError,
     r"^t_span: an infinite tf needs a terminal event"),
    (dict(t_span=(0.0, -np.inf), t_eval="steps", events=Event(below)), ValueError,
     r"^t_span: an infinite tf needs a terminal event"),
    (dict(t_span=(np.zeros(2), np.array([1.0, np.inf])), t_eval=[0.5]), ValueError,
     r"^t_span: an infinite tf needs a terminal event"),
    (dict(t_span=(0.0, np.inf), events=falls()), ValueError,
     r"^t_eval: the default output time, tf, is never reached where tf is infinite"),
    (dict(t_span=(np.zeros(2), np.array([1.0, -np.inf])), events=falls()), ValueError,
     r"^t_eval: the default output time"),
    (dict(t_span=(0.0, np.inf), t_eval=[0.0, np.inf], events=falls()), ValueError,
     r"^t_eval: expected times within t_span|^t_eval: expected finite"),
    (dict(t_span=(np.inf, 0.0), t_eval=[1.0], events=falls()), ValueError,
     r"^t_span: expected a finite t0"),
    (dict(t_span=(np.array([0.0, -np.inf]), 1.0), events=falls()), ValueError,
     r"^t_span: expected a finite t0 .*object 1"),
    (dict(t_span=(0.0, np.nan), t_eval=[1.0], events=falls()), ValueError,
     r"^t_span: expected a finite t0 and a finite or infinite tf \(no NaN\)"),
])
def test_bad_infinite_spans_name_the_argument(kwargs, error, match):
    y0, params = problem(2, seed=1)
    kwargs.setdefault("events", ())
    with pytest.raises(error, match=match):
        solve_ivp(oscillator, y0=y0, params=params, **kwargs)
