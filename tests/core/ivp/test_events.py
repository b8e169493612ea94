"""Event semantics of the solver against solve_ivp: several events, terminal counts, records."""

import math

import numpy as np

from hapsira_core.jit import hjit
from hapsira_cowell import cowell
from hapsira_cowell.models.events import AltitudeCrossEvent, Event, NodeCrossEvent
from reference import K_EARTH, R_EARTH, Reference, coe_to_rv, relative_error, two_body_rhs


@hjit
def radial_velocity(t, rr, vv, k, p):
    return rr[0] * vv[0] + rr[1] * vv[1] + rr[2] * vv[2]


# Perigee 150 km, apogee ~1200 km: descends through 300 km once per revolution.
P = (R_EARTH + 150.0) * (1 + 0.072)
R0, V0 = {}, {}
for i, nu in enumerate([2.0, 3.0, 4.0]):
    R0[i], V0[i] = coe_to_rv(K_EARTH, P, 0.072, math.radians(40 + 10 * i), 0.3 * i, 1.0 + i, nu)
R0 = np.array(list(R0.values()))
V0 = np.array(list(V0.values()))
TOFS = np.linspace(0.0, 4 * 5600.0, 9)


def scipy_events(alt_terminal, node_direction, apsis_terminal):
    def altitude(t, y):
        return np.linalg.norm(y[:3]) - R_EARTH - 300.0
    altitude.terminal, altitude.direction = alt_terminal, -1

    def node(t, y):
        return y[2]
    node.terminal, node.direction = False, node_direction

    def apsis(t, y):
        return y[:3] @ y[3:]
    apsis.terminal, apsis.direction = apsis_terminal, 0
    return [altitude, node, apsis]


def run(alt_terminal, node_direction, apsis_terminal, records=64):
    events = [AltitudeCrossEvent(300.0, R_EARTH, terminal=alt_terminal, direction=-1),
              NodeCrossEvent(direction=node_direction),
              Event(radial_velocity, terminal=apsis_terminal)]
    return cowell(K_EARTH, R0, V0, TOFS, events=events, max_event_records=records)


def compare(res, alt_terminal, node_direction, apsis_terminal):
    for i in range(len(R0)):
        ref = Reference(two_body_rhs(K_EARTH), R0[i], V0[i], TOFS,
                        events=scipy_events(alt_terminal, node_direction, apsis_terminal))
        assert res.status[i] == ref.status
        assert relative_error(res.rr[i], ref.rr) < 1e-9
        for e in range(3):
            expected = ref.t_events[e]
            assert res.n_events[i, e] == len(expected), (i, e)
            got = res.t_events[e][i]
            np.testing.assert_allclose(got[: len(expected)], expected, rtol=0, atol=1e-6)
            assert np.all(np.isnan(got[len(expected):]))


def test_non_terminal_events_match_scipy():
    res = run(False, 0, False)
    assert np.all(res.status == 0)
    assert np.all(res.n_events[:, 0] == 4) and np.all(res.n_events[:, 1] >= 7)
    compare(res, False, 0, False)


def test_first_terminal_event_stops_the_object():
    res = run(True, 1, False)
    assert np.all(res.status == 1)
    stop = res.t_events[0][:, 0]
    assert np.all(np.isfinite(stop)) and np.all(stop < TOFS[-1])
    after = TOFS[None, :] > stop[:, None]
    assert np.all(np.isnan(res.rr[after])) and np.all(np.isfinite(res.rr[~after]))
    compare(res, True, 1, False)


def test_terminal_count_stops_at_nth_occurrence():
    res = run(False, -1, 3)
    assert np.all(res.status == 1) and np.all(res.n_events[:, 2] == 3)
    compare(res, False, -1, 3)


def test_records_are_truncated_counts_are_not():
    full = run(False, 0, False)
    res = run(False, 0, False, records=2)
    assert res.t_events[1].shape == (len(R0), 2)
    np.testing.assert_array_equal(res.n_events, full.n_events)
    np.testing.assert_array_equal(res.t_events[1], full.t_events[1][:, :2])
