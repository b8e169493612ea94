"""``stm=True`` at events: the total derivatives of the event's state and time with respect
to y0, the event's time moving (`hapsira_core.ivp.event_derivatives`).

Against central differences of the solver itself (perturb y0, solve again, read the
state and time at the new event) for Van der Pol with a y0 = 0 crossing (and a crossing
of a moving level, so that dg/dt takes part) and a LEO orbit with J2 at its ascending
node; the fixed-time matrix ``stm_events`` differs from them (the tests can fail); NaN
padding; a bad object failing alone; an event function that cannot be differentiated
refused by name.
"""

import math

import numpy as np
import pytest

from hapsira_core import settings
from hapsira_core.ivp import Event, NotDifferentiable, solve_ivp
from hapsira_core.jit import hjit

SIMULATOR = settings.TARGET == "cuda"  # the simulator interprets every step: short spans
TIGHT = dict(rtol=1e-13, atol=1e-15)


@hjit
def van_der_pol(t, y, p):
    return (y[1], p[0] * (1.0 - y[0] * y[0]) * y[1] - y[0])


@hjit
def x_at_level(t, y, p):
    """y0 crosses a level that moves at the rate p[1] (dg/dt = -p[1])."""
    return y[0] - p[1] * t


@hjit
def kepler_j2(t, y, p):
    """Two-body + J2 about the Earth (km, s), mu in p[0]."""
    x, yy, z = y[0], y[1], y[2]
    r2 = x * x + yy * yy + z * z
    r = math.sqrt(r2)
    w = -p[0] / (r2 * r)
    c = 1.5 * 1.08262668e-3 * p[0] * 6378.1366 * 6378.1366 / (r2 * r2 * r)
    s = 5.0 * z * z / r2
    return (y[3], y[4], y[5], w * x + c * x * (s - 1.0), w * yy + c * yy * (s - 1.0),
            w * z + c * z * (s - 3.0))


@hjit
def z_up(t, y, p):
    return y[2]


@hjit
def x_looked_up(t, y, p):
    """Not differentiable: a loop over a value that depends on y."""
    k = 0.0
    while k < y[0]:
        k += 1.0
    return y[0] - k


def central_differences(fun, t_span, y0, params, events, steps):
    """``(M (C, n, n), dt (C, n))``: the event state and time of each recorded event of
    one object, differentiated by central differences of the solver (2 n runs in one
    batch). The steps are chosen against two errors, measured: the integration's noise
    divided by the step (smaller steps: 4e-6 for the orbit's dr/dv0 block at 10 m and
    1 cm/s, rtol 1e-12; 1.3e-6 for Van der Pol's second crossing at 1e-4, rtol 1e-12,
    4e-7 at rtol 1e-13) and the truncation, the step squared."""
    n = y0.size
    rows = []
    for j in range(n):
        for sign in (1.0, -1.0):
            x = y0.copy()
            x[j] += sign * steps[j]
            rows.append(x)
    res = solve_ivp(fun, t_span, np.array(rows), params=params, events=events, **TIGHT)
    assert np.all(res.status >= 0) and np.all(res.n_events[:, 0] == res.n_events[0, 0])
    count = res.n_events[0, 0]
    ye, te = res.y_events[0][:, :count], res.t_events[0][:, :count]
    matrix = np.stack([(ye[2 * j] - ye[2 * j + 1]) / (2.0 * steps[j]) for j in range(n)],
                      axis=2)
    time = np.stack([(te[2 * j] - te[2 * j + 1]) / (2.0 * steps[j]) for j in range(n)],
                    axis=1)
    return matrix, time


def relative(a, b):
    return np.abs(a - b).max() / np.abs(b).max()


VDP_Y0 = np.array([[2.0, 0.5], [-1.2, 1.8], [0.4, -2.0]])
VDP_P = np.array([[1.5, 0.0], [0.8, 0.2], [2.5, -0.3]])  # mu, the level's rate
VDP_SPAN = (0.0, 4.0 if SIMULATOR else 9.0)


def test_van_der_pol_crossings_match_central_differences():
    events = [Event(x_at_level)]
    res = solve_ivp(van_der_pol, VDP_SPAN, VDP_Y0, params=VDP_P, events=events, stm=True,
                    **TIGHT)
    assert np.all(res.status == 0) and np.all(res.n_events[:, 0] >= 1)
    assert res.stm_events_total[0].shape == (3, 64, 2, 2)
    assert res.dt_events_dy0[0].shape == (3, 64, 2)
    checked = 0
    for i in range(3):
        matrix, time = central_differences(van_der_pol, VDP_SPAN, VDP_Y0[i], VDP_P[i], events,
                                           [1e-4, 1e-4])
        count = res.n_events[i, 0]
        for c in range(count):
            assert relative(res.stm_events_total[0][i, c], matrix[c]) < 1e-6
            assert relative(res.dt_events_dy0[0][i, c], time[c]) < 1e-6
            # the matrix at the event's time held fixed is another quantity
            assert relative(res.stm_events[0][i, c], matrix[c]) > 1e-3
            checked += 1
        # NaN beyond the recorded events, as y_events
        assert np.isnan(res.stm_events_total[0][i, count:]).all()
        assert np.isnan(res.dt_events_dy0[0][i, count:]).all()
        obj = res[i]
        assert len(obj.stm_events_total[0]) == len(obj.dt_events_dy0[0]) == count
    assert checked >= 4


def test_leo_ascending_node_matches_central_differences():
    """A LEO orbit with J2 starting below the equator: the node comes after ~80 s
    (and again a revolution later on the host targets)."""
    y0 = np.array([7000.0, 0.0, -300.0, 0.0, 6.5, 3.8])
    span = (0.0, 300.0 if SIMULATOR else 6500.0)
    events = [Event(z_up, direction=1)]
    params = [398600.4418]
    res = solve_ivp(kepler_j2, span, y0, params=params, events=events, stm=True, **TIGHT)
    count = res.n_events[0]
    assert res.status == 0 and count == (1 if SIMULATOR else 2)
    # 100 m and 10 cm/s (measured: 3e-8 at most; 6e-7 at 10 m and 1 cm/s)
    matrix, time = central_differences(kepler_j2, span, y0, params, events,
                                       [1e-1] * 3 + [1e-4] * 3)
    for c in range(count):
        total = res.stm_events_total[0][c]
        for rows in (slice(0, 3), slice(3, 6)):  # blocks differ in size (s vs 1/s)
            for cols in (slice(0, 3), slice(3, 6)):
                assert relative(total[rows, cols], matrix[c][rows, cols]) < 1e-6
        assert relative(res.dt_events_dy0[0][c], time[c]) < 1e-6
        # at the node z = 0 whatever y0: the total derivative's z row is zero
        np.testing.assert_allclose(total[2], 0.0, atol=1e-9 * np.abs(total).max())
        assert np.abs(res.stm_events[0][c][2]).max() > 1e-3


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_a_bad_object_gets_nan_and_the_others_are_unchanged():
    y0 = np.concatenate([VDP_Y0[:1], [[np.nan, 0.0]], VDP_Y0[1:]])
    params = np.concatenate([VDP_P[:1], VDP_P[:1], VDP_P[1:]])
    kwargs = dict(events=[Event(x_at_level)], stm=True, **TIGHT)
    res = solve_ivp(van_der_pol, VDP_SPAN, y0, params=params, **kwargs)
    alone = solve_ivp(van_der_pol, VDP_SPAN, VDP_Y0, params=VDP_P, **kwargs)
    assert res.status[1] < 0 and np.all(res.status[[0, 2, 3]] == 0)
    assert np.isnan(res.stm_events_total[0][1]).all() and np.isnan(res.dt_events_dy0[0][1]).all()
    np.testing.assert_array_equal(res.stm_events_total[0][[0, 2, 3]], alone.stm_events_total[0])
    np.testing.assert_array_equal(res.dt_events_dy0[0][[0, 2, 3]], alone.dt_events_dy0[0])


def test_one_object_and_no_records():
    one = solve_ivp(van_der_pol, VDP_SPAN, VDP_Y0[0], params=VDP_P[0], stm=True,
                    events=[Event(x_at_level)], max_event_records=2, **TIGHT)
    assert one.stm_events_total[0].shape == (2, 2, 2) and one.dt_events_dy0[0].shape == (2, 2)
    none = solve_ivp(van_der_pol, VDP_SPAN, VDP_Y0, params=VDP_P, stm=True,
                     events=[Event(x_at_level)], max_event_records=0, **TIGHT)
    assert none.stm_events_total[0].shape == (3, 0, 2, 2)
    plain = solve_ivp(van_der_pol, VDP_SPAN, VDP_Y0, params=VDP_P, stm=True, **TIGHT)
    assert plain.stm_events_total == [] and plain.dt_events_dy0 == []


def test_an_event_that_cannot_be_differentiated_is_named():
    with pytest.raises(NotDifferentiable, match=r"events\[1\].*stm=True.*x_looked_up"):
        solve_ivp(van_der_pol, VDP_SPAN, VDP_Y0, params=VDP_P, stm=True,
                  events=[Event(x_at_level), Event(x_looked_up)])
    # without stm it is an event like any other
    solve_ivp(van_der_pol, (0.0, 0.1), VDP_Y0, params=VDP_P, events=[Event(x_looked_up)])
