"""Built-in and user events against scipy ``solve_ivp(method="DOP853", events=...)``.

Every test of this module that propagates uses the same right-hand side
(two-body) and the same tuple of event *functions* (altitude, latitude, node,
user, umbra, penumbra), so the solver is compiled once per target; what
varies between tests (altitudes, latitudes, terminal, direction, params, the
Sun's table) is data.
"""

import math

import numpy as np
import pytest
from astropy import units as u
from astropy.time import Time

from hapsira_core.jit import hjit
from hapsira_cowell import cowell
from hapsira_cowell.models.ephem import Ephemeris, interpolate
from hapsira_cowell.models.events import (
    AltitudeCrossEvent,
    EclipseEvent,
    Event,
    LatitudeCrossEvent,
    LithobrakeEvent,
    NodeCrossEvent,
    PenumbraEvent,
    UmbraEvent,
)
from reference import K_EARTH, R_EARTH, Reference, coe_to_rv, relative_error, two_body_rhs

DEG = math.pi / 180
R_SUN = 695700.0  # km, IAU 2015 nominal
AU = 149597870.7  # km


@hjit
def radial_momentum(t, rr, vv, k, p):
    """A user event: ``rr . vv - p[0]`` (km^2/s); with ``p[0] = 0`` the apsides."""
    return rr[0] * vv[0] + rr[1] * vv[1] + rr[2] * vv[2] - p[0]


# Three LEO objects, 4 h (about 2.4 revolutions):
# 0: e = 0.05, perigee ~350 km, apogee ~1050 km, i = 51.6 deg
# 1: sun-synchronous-like, i = 97.5 deg, 630-770 km (e = 0.01: not smaller, or
#    the 700 km crossings become too shallow to locate to 1e-6 s across targets)
# 2: e = 0.08, i = 35 deg, perigee ~220 km
_ELEMENTS = [
    (R_EARTH + 700.0, 0.05, 51.6, 0.4, 1.1, 0.3),
    (R_EARTH + 700.0, 0.01, 97.5, 0.3, 0.2, 2.5),
    (R_EARTH + 800.0, 0.08, 35.0, 4.0, 3.0, 5.0),
]
R0, V0 = [], []
for _a, _e, _i, _raan, _argp, _nu in _ELEMENTS:
    _r, _v = coe_to_rv(K_EARTH, _a * (1 - _e ** 2), _e, _i * DEG, _raan, _argp, _nu)
    R0.append(_r)
    V0.append(_v)
R0 = np.array(R0)
V0 = np.array(V0)
N = len(R0)
TOFS = np.linspace(0.0, 4 * 3600.0, 9)
#: Per-object params: p[0] for the user event, then the Sun's table (offset 1).
USER_P0 = np.array([0.0, 0.0, 1000.0])
EPOCH = Time("2024-03-20 12:00:00", scale="tdb")
SUN = Ephemeris.from_body("sun", EPOCH, -TOFS[-1], TOFS[-1]).to_params()
SUN_OFFSET = 1


def params_rows(p0=USER_P0, sun=SUN):
    return np.hstack([np.asarray(p0, dtype=float)[:, None], np.tile(sun, (len(p0), 1))])


# --------------------------------------------------------------------------
# One event set, in two forms: ours and scipy's.

SLOTS = ("altitude", "latitude", "node", "user", "umbra", "penumbra")
DEFAULTS = {
    "altitude": dict(alt=700.0, terminal=False, direction=0),
    "latitude": dict(lat=30 * DEG, terminal=False, direction=0),
    "node": dict(terminal=False, direction=0),
    "user": dict(terminal=False, direction=0),
    "umbra": dict(terminal=False, direction=0),
    "penumbra": dict(terminal=False, direction=0),
}


def options(**overrides):
    unknown = set(overrides) - set(SLOTS)
    assert not unknown, unknown
    return {name: {**DEFAULTS[name], **overrides.get(name, {})} for name in SLOTS}


def our_events(opts):
    o = opts
    return [
        AltitudeCrossEvent(o["altitude"]["alt"], R_EARTH, terminal=o["altitude"]["terminal"],
                           direction=o["altitude"]["direction"]),
        LatitudeCrossEvent(o["latitude"]["lat"], terminal=o["latitude"]["terminal"],
                           direction=o["latitude"]["direction"]),
        NodeCrossEvent(terminal=o["node"]["terminal"], direction=o["node"]["direction"]),
        Event(radial_momentum, terminal=o["user"]["terminal"], direction=o["user"]["direction"]),
        UmbraEvent(R_EARTH, R_SUN, SUN_OFFSET, terminal=o["umbra"]["terminal"],
                   direction=o["umbra"]["direction"]),
        PenumbraEvent(R_EARTH, R_SUN, SUN_OFFSET, terminal=o["penumbra"]["terminal"],
                      direction=o["penumbra"]["direction"]),
    ]


def cone_shadow(r, rs, umbra):
    """Independent shadow test for scipy: the umbra/penumbra cones in the
    Sun-attractor axis frame, as a signed distance (km) from the cone's
    surface, < 0 inside. Valid above the surface (|r| > R / cos(alpha))."""
    D = np.linalg.norm(rs)
    axis = -rs / D  # from the Sun through the attractor, into the shadow
    xi = r @ axis  # distance along the axis behind the attractor's centre
    rho = np.linalg.norm(r - xi * axis)
    if xi <= 0.0:  # sunward of the terminator plane: lit
        return np.linalg.norm(r) - R_EARTH
    if umbra:
        sin_alpha = (R_SUN - R_EARTH) / D
        apex = R_EARTH / sin_alpha  # behind the attractor
        return rho - (apex - xi) * math.tan(math.asin(sin_alpha))
    sin_alpha = (R_SUN + R_EARTH) / D
    apex = R_EARTH / sin_alpha  # between the Sun and the attractor
    return rho - (apex + xi) * math.tan(math.asin(sin_alpha))


def scipy_events(opts, i, params=None):
    """The same events as scipy callables ``g(t, y)`` for object ``i``."""
    o = opts
    row = (params_rows() if params is None else np.atleast_2d(params))[i]
    p0 = row[0]

    def sun(t):
        # the same table, read by the same function the solver uses
        return np.array(interpolate(row, SUN_OFFSET, t))

    def altitude(t, y):
        return np.linalg.norm(y[:3]) - R_EARTH - o["altitude"]["alt"]

    def latitude(t, y):
        return math.asin(y[2] / np.linalg.norm(y[:3])) - o["latitude"]["lat"]

    def node(t, y):
        return y[2]

    def user(t, y):
        return y[:3] @ y[3:] - p0

    def umbra(t, y):
        return cone_shadow(y[:3], sun(t), True)

    def penumbra(t, y):
        return cone_shadow(y[:3], sun(t), False)

    functions = {"altitude": altitude, "latitude": latitude, "node": node, "user": user,
                 "umbra": umbra, "penumbra": penumbra}
    result = []
    for name in SLOTS:
        fun = functions[name]
        fun.terminal = o[name]["terminal"]
        fun.direction = o[name]["direction"]
        result.append(fun)
    return result


def propagate(opts, r0=R0, v0=V0, tofs=TOFS, params=None, records=64):
    params = params_rows() if params is None else params
    return cowell(K_EARTH, r0, v0, tofs, events=our_events(opts), params=params,
                  max_event_records=records)


_DEFAULT_RUN = []


def default_run():
    """``propagate(options())``, computed once for the module (read only)."""
    if not _DEFAULT_RUN:
        _DEFAULT_RUN.append(propagate(options()))
    return _DEFAULT_RUN[0]


def reference(opts, i, r0=R0, v0=V0, tofs=TOFS, params=None):
    return Reference(two_body_rhs(K_EARTH), r0[i], v0[i], tofs,
                     events=scipy_events(opts, i, params))


def assert_matches_scipy(res, opts, r0=R0, v0=V0, tofs=TOFS, params=None, slots=SLOTS):
    """Status, states, event counts and times of every object as scipy has them
    (the events named in ``slots``)."""
    refs = []
    for i in range(len(r0)):
        ref = reference(opts, i, r0, v0, tofs, params)
        refs.append(ref)
        assert res.status[i] == ref.status, i
        assert relative_error(res.rr[i], ref.rr) < 1e-9, i
        for e, name in enumerate(SLOTS):
            if name not in slots:
                continue
            expected = ref.t_events[e]
            got = res.t_events[e][i]
            assert res.n_events[i, e] == len(expected), (i, name, got, expected)
            records = got.size
            np.testing.assert_allclose(got[: min(len(expected), records)],
                                       expected[:records], rtol=0, atol=1e-6,
                                       err_msg=f"object {i}, event {name}")
            assert np.all(np.isnan(got[len(expected):])), (i, name)
    return refs


# --------------------------------------------------------------------------
# Behaviour against scipy


def test_every_event_matches_scipy():
    opts = options()
    res = default_run()
    assert np.all(res.status == 0)
    # each event occurs, more than once, for every object
    assert np.all(res.n_events >= 2), res.n_events
    assert_matches_scipy(res, opts)


def test_event_times_are_zeros_of_g():
    """Propagating to a recorded event time lands on g = 0."""
    opts = options()
    res = default_run()
    i = 0
    t_alt = res.t_events[0][i, 0]
    t_lat = res.t_events[1][i, 0]
    t_node = res.t_events[2][i, 0]
    t_user = res.t_events[3][i, 0]
    times = np.sort([t_alt, t_lat, t_node, t_user])
    at = cowell(K_EARTH, R0[i], V0[i], times)
    state = {t: (at.rr[j], at.vv[j]) for j, t in enumerate(times)}
    r, _ = state[t_alt]
    assert abs(np.linalg.norm(r) - R_EARTH - 700.0) < 1e-6
    r, _ = state[t_lat]
    assert abs(math.asin(r[2] / np.linalg.norm(r)) - 30 * DEG) < 1e-9
    r, _ = state[t_node]
    assert abs(r[2]) < 1e-5
    r, v = state[t_user]
    assert abs(r @ v) < 1e-3  # km^2/s, against |r||v| ~ 5e4


def test_direction_filters():
    both = default_run()
    up = options(**{name: dict(direction=1) for name in SLOTS})
    down = options(**{name: dict(direction=-1) for name in SLOTS})
    res_up = propagate(up)
    res_down = propagate(down)
    np.testing.assert_array_equal(res_up.n_events + res_down.n_events, both.n_events)
    assert np.all(res_up.n_events >= 1) and np.all(res_down.n_events >= 1)
    for e in range(len(SLOTS)):
        for i in range(N):
            merged = np.sort(np.concatenate([
                res_up.t_events[e][i, : res_up.n_events[i, e]],
                res_down.t_events[e][i, : res_down.n_events[i, e]]]))
            np.testing.assert_array_equal(merged, both.t_events[e][i, : both.n_events[i, e]])
    # the node event's +1 is the ascending node (vz > 0); the umbra's -1 an
    # entry: the first exit (+1) of a shadow entered at t comes after t
    t_asc = res_up.t_events[2][0, 0]
    at = cowell(K_EARTH, R0[0], V0[0], [t_asc])
    assert at.vv[0, 2] > 0
    for e in (4, 5):
        entries = res_down.t_events[e][:, 0]
        exits = res_up.t_events[e]
        for i in range(N):
            later = exits[i][exits[i] > entries[i]]
            assert later.size and later[0] - entries[i] < 2400.0  # shadow < 40 min
    assert_matches_scipy(res_up, up)
    assert_matches_scipy(res_down, down)


def test_mixed_directions_match_scipy():
    opts = options(altitude=dict(direction=-1), latitude=dict(direction=1),
                   node=dict(direction=-1), user=dict(direction=0))
    assert_matches_scipy(propagate(opts), opts)


def test_terminal_event_stops_the_object():
    opts = options(altitude=dict(alt=400.0, terminal=True, direction=-1))
    res = propagate(opts)
    # object 1 never goes below 400 km: it runs to the end
    np.testing.assert_array_equal(res.status, [1, 0, 1])
    stop = res.t_events[0][:, 0]
    assert np.isnan(stop[1]) and np.all(stop[[0, 2]] < TOFS[-1])
    assert np.all(res.n_events[[0, 2], 0] == 1)
    for i in (0, 2):
        after = TOFS > stop[i]
        assert after.any() and np.all(np.isnan(res.rr[i][after]))
        assert np.all(np.isnan(res.vv[i][after]))
        assert np.all(np.isfinite(res.rr[i][~after]))
        # no other event is recorded after the stop
        for e in range(len(SLOTS)):
            assert np.all(res.t_events[e][i, : res.n_events[i, e]] <= stop[i])
    assert np.all(np.isfinite(res.rr[1]))
    assert_matches_scipy(res, opts)


def test_terminal_count_stops_at_the_nth_occurrence():
    opts = options(node=dict(terminal=3))
    res = propagate(opts)
    assert np.all(res.status == 1)
    assert np.all(res.n_events[:, 2] == 3)
    full = default_run()
    # the stop is the third node crossing of the unstopped run
    np.testing.assert_allclose(res.t_events[2][:, 2], full.t_events[2][:, 2], rtol=0, atol=1e-9)
    assert_matches_scipy(res, opts)


def test_terminal_with_direction_counts_only_allowed_crossings():
    opts = options(latitude=dict(terminal=2, direction=-1))
    res = propagate(opts)
    assert np.all(res.status == 1) and np.all(res.n_events[:, 1] == 2)
    assert_matches_scipy(res, opts)


def test_earliest_of_two_terminal_events_wins():
    opts = options(node=dict(terminal=True), user=dict(terminal=True))
    res = propagate(opts)
    assert np.all(res.status == 1)
    for i in range(N):
        t_node = res.t_events[2][i, 0] if res.n_events[i, 2] else np.inf
        t_user = res.t_events[3][i, 0] if res.n_events[i, 3] else np.inf
        assert res.n_events[i, 2] + res.n_events[i, 3] == 1
        assert min(t_node, t_user) < TOFS[-1]
    assert_matches_scipy(res, opts)


def test_records_are_truncated_counts_are_not():
    opts = options()
    full = default_run()
    res = propagate(opts, records=2)
    for e in range(len(SLOTS)):
        assert res.t_events[e].shape == (N, 2)
        np.testing.assert_array_equal(res.t_events[e], full.t_events[e][:, :2])
    np.testing.assert_array_equal(res.n_events, full.n_events)
    assert np.any(full.n_events > 2)
    none = propagate(opts, records=0)
    assert all(t.shape == (N, 0) for t in none.t_events)
    np.testing.assert_array_equal(none.n_events, full.n_events)
    assert_matches_scipy(res, opts)


def test_user_event_reads_its_params_row():
    opts = options()
    res = default_run()
    # object 2 has p[0] = 1000 km^2/s: not the apsides. Where rr.vv = 1000.
    t = res.t_events[3][2, : res.n_events[2, 3]]
    at = cowell(K_EARTH, R0[2], V0[2], t)
    np.testing.assert_allclose(np.einsum("ij,ij->i", at.rr, at.vv), 1000.0, rtol=0, atol=1e-3)
    # new params values, same compiled code: object 2 back to the apsides
    zero = propagate(opts, params=params_rows(p0=np.zeros(N)))
    apsides = zero.t_events[3][2, : zero.n_events[2, 3]]
    assert not np.allclose(apsides[: len(t)], t[: len(apsides)])


def test_backward_propagation_matches_scipy():
    opts = options(latitude=dict(direction=1), node=dict(terminal=2, direction=-1))
    tofs = -TOFS
    res = propagate(opts, tofs=tofs)
    assert np.all(res.status == 1)
    assert np.all(res.t_events[2][:, 1] < 0)
    assert_matches_scipy(res, opts, tofs=tofs)


def test_lithobrake_stops_at_the_surface():
    # a = R + 200 km, e = 0.04: perigee 83 km below the surface; start at apogee
    a = R_EARTH + 200.0
    r, v = coe_to_rv(K_EARTH, a * (1 - 0.04 ** 2), 0.04, 0.5, 0.1, 0.2, math.pi)
    # the module's event set with the altitude event swapped for LithobrakeEvent
    # (same function, alt = 0: no recompile)
    events = our_events(options())
    events[0] = LithobrakeEvent(R_EARTH)
    res = cowell(K_EARTH, r, v, TOFS, events=events, params=params_rows(p0=[0.0])[0])
    assert res.status == 1 and res.n_events[0] == 1
    t_hit = res.t_events[0][0]
    assert 0 < t_hit < TOFS[-1]

    def ground(t, y):
        return np.linalg.norm(y[:3]) - R_EARTH
    ground.terminal, ground.direction = True, -1
    ref = Reference(two_body_rhs(K_EARTH), r, v, TOFS, events=[ground])
    assert ref.status == 1
    assert abs(t_hit - ref.t_events[0][0]) < 1e-6
    at = cowell(K_EARTH, r, v, [t_hit])
    assert abs(np.linalg.norm(at.rr[0]) - R_EARTH) < 1e-6
    assert relative_error(res.rr, ref.rr) < 1e-9


# --------------------------------------------------------------------------
# Eclipses


def fixed_sun(direction, distance=AU):
    """An ephemeris table with the Sun standing still at ``distance * direction``."""
    direction = np.asarray(direction, dtype=float) / np.linalg.norm(direction)
    samples = 8
    positions = np.tile(distance * direction, (samples, 1))
    velocities = np.zeros((samples, 3))
    dt = 2 * TOFS[-1] / (samples - 1)
    return Ephemeris.from_samples(-TOFS[-1], dt, positions, velocities).to_params()


def circular_shadow_times(r, sun_azimuth, sun_elevation, t_end, umbra, distance=AU):
    """Analytic entry and exit times of a circular equatorial orbit of radius r
    (starting on +x, prograde) through the conical shadow of a fixed Sun.

    The shadow's edge is where the angle phi between the position and the
    anti-Sun axis satisfies sin(phi + alpha) = R / r (umbra; sin(alpha) =
    (R_sun - R) / D, lines tangent to both spheres on the same side) or
    sin(phi - alpha) = R / r (penumbra; sin(alpha) = (R_sun + R) / D)."""
    n = math.sqrt(K_EARTH / r ** 3)
    if umbra:
        phi = math.asin(R_EARTH / r) - math.asin((R_SUN - R_EARTH) / distance)
    else:
        phi = math.asin(R_EARTH / r) + math.asin((R_SUN + R_EARTH) / distance)
    # cos(phi) = cos(elevation) cos(theta - anti-Sun azimuth)
    half = math.acos(math.cos(phi) / math.cos(sun_elevation))
    anti = sun_azimuth + math.pi
    entries, exits = [], []
    for rev in range(-1, 10):
        for angle, out in ((anti - half, entries), (anti + half, exits)):
            t = (angle + 2 * math.pi * rev) / n
            if 0 < t <= t_end:
                out.append(t)
    return np.array(entries), np.array(exits)


def circular_equatorial(r, count):
    v = math.sqrt(K_EARTH / r)
    return np.tile([r, 0.0, 0.0], (count, 1)), np.tile([0.0, v, 0.0], (count, 1))


def test_umbra_and_penumbra_match_the_analytic_cone():
    # Sun fixed: in the orbit plane, and 20 deg above it; directions split
    # entries (-1) from exits (+1).
    r = R_EARTH + 500.0
    suns = [(0.3, 0.0), (2.0, 20 * DEG)]
    r0, v0 = circular_equatorial(r, len(suns))
    tables = [fixed_sun([math.cos(az) * math.cos(el), math.sin(az) * math.cos(el), math.sin(el)])
              for az, el in suns]
    # p[0] = 1e6 km^2/s: the user event never fires on these circular orbits
    params = np.array([np.concatenate([[1e6], table]) for table in tables])
    for direction in (-1, 1):
        opts = options(umbra=dict(direction=direction), penumbra=dict(direction=direction))
        res = propagate(opts, r0=r0, v0=v0, params=params)
        assert np.all(res.status == 0)
        for i, (az, el) in enumerate(suns):
            for e, umbra in ((4, True), (5, False)):
                entries, exits = circular_shadow_times(r, az, el, TOFS[-1], umbra)
                expected = entries if direction < 0 else exits
                assert len(expected) >= 2
                assert res.n_events[i, e] == len(expected), (i, e, direction)
                np.testing.assert_allclose(res.t_events[e][i, : len(expected)], expected,
                                           rtol=0, atol=1e-6)
        # the penumbra starts before the umbra and ends after it
        if direction < 0:
            assert np.all(res.t_events[5][:, :2] < res.t_events[4][:, :2])
        else:
            assert np.all(res.t_events[5][:, :2] > res.t_events[4][:, :2])
        # (the node event is not compared: z = 0 all along, g touches zero every step)
        assert_matches_scipy(res, opts, r0=r0, v0=v0, params=params,
                             slots=("altitude", "umbra", "penumbra"))


def test_umbra_absent_when_the_sun_is_high_above_the_orbit():
    # beta angle 80 deg: the orbit never enters the shadow
    r = R_EARTH + 500.0
    r0, v0 = circular_equatorial(r, 1)
    table = fixed_sun([math.cos(80 * DEG), 0.0, math.sin(80 * DEG)])
    res = propagate(options(), r0=r0, v0=v0, params=np.concatenate([[1e6], table]))
    assert res.n_events[0, 4] == 0 and res.n_events[0, 5] == 0


def test_real_sun_eclipses_match_scipy():
    opts = options(umbra=dict(direction=-1))
    res = propagate(opts)
    # every object enters the umbra at least once in 4 h (the real Sun)
    assert np.all(res.n_events[:, 4] >= 1), res.n_events
    assert np.all(res.n_events[:, 5] >= 2), res.n_events
    assert_matches_scipy(res, opts)
    # at each umbra entry the Sun is hidden: the object is behind the Earth
    # and the Sun's direction passes within R of the Earth's centre
    for i in range(N):
        t = res.t_events[4][i, : res.n_events[i, 4]]
        at = cowell(K_EARTH, R0[i], V0[i], t)
        for j, tj in enumerate(t):
            rs = np.array(interpolate(params_rows()[i], SUN_OFFSET, tj))
            r = at.rr[j]
            s = rs / np.linalg.norm(rs)
            assert r @ s < 0
            assert np.linalg.norm(r - (r @ s) * s) < R_EARTH


def test_terminal_umbra_entry_stops_the_object():
    opts = options(umbra=dict(terminal=True, direction=-1))
    res = propagate(opts)
    assert np.all(res.status == 1)
    stop = res.t_events[4][:, 0]
    assert np.all(res.n_events[:, 4] == 1)
    for i in range(N):
        after = TOFS > stop[i]
        assert after.any() and np.all(np.isnan(res.rr[i][after]))
    # the penumbra entry of that same shadow comes before it
    assert np.all(res.t_events[5][:, 0] < stop)
    assert_matches_scipy(res, opts)


def test_eclipse_table_is_data_not_code():
    """A different Sun table and offset in params: same compiled code, new answer."""
    r = R_EARTH + 500.0
    r0, v0 = circular_equatorial(r, 1)
    table = fixed_sun([1.0, 0.0, 0.0])
    # put the table at offset 3 and use events whose offset says so
    row = np.concatenate([[1e6, -1.0, -1.0], table])
    events = our_events(options())
    events[4] = UmbraEvent(R_EARTH, R_SUN, 3, direction=-1)
    events[5] = PenumbraEvent(R_EARTH * u.km, R_SUN / 1000 * u.Mm, 3, direction=1)
    res = cowell(K_EARTH, r0[0], v0[0], TOFS, events=events, params=row)
    entries, _ = circular_shadow_times(r, 0.0, 0.0, TOFS[-1], True)
    _, exits = circular_shadow_times(r, 0.0, 0.0, TOFS[-1], False)
    np.testing.assert_allclose(res.t_events[4][: res.n_events[4]], entries, rtol=0, atol=1e-6)
    np.testing.assert_allclose(res.t_events[5][: res.n_events[5]], exits, rtol=0, atol=1e-6)


# --------------------------------------------------------------------------
# Constructors


def test_quantities_are_accepted():
    a = AltitudeCrossEvent(600 * u.km, 6378.137 * u.km)
    b = AltitudeCrossEvent(0.6 * u.Mm, R_EARTH * 1000 * u.m)
    assert b.constants == pytest.approx(a.constants, rel=1e-15)
    assert a.constants == (600.0, R_EARTH)
    lat = LatitudeCrossEvent(30 * u.deg)
    assert lat.constants == pytest.approx((30 * DEG,), rel=1e-15)
    assert LithobrakeEvent(R_EARTH * u.km).constants == (0.0, R_EARTH)
    umbra = UmbraEvent(R_EARTH * u.km, 695.7 * u.Mm, 5)
    assert umbra.constants == pytest.approx((R_EARTH, R_SUN, 5.0, 1.0), rel=1e-15)
    penumbra = PenumbraEvent(R_EARTH * 1000 * u.m, R_SUN, np.int64(2), terminal=True,
                             direction=-1)
    assert penumbra.constants == pytest.approx((R_EARTH, R_SUN, 2.0, -1.0), rel=1e-15)
    assert penumbra.offset == 2 and isinstance(penumbra.offset, int)
    assert EclipseEvent(R_EARTH, R_SUN, 0, kind="penumbra").constants[3] == -1.0


def test_quantity_events_propagate_like_floats():
    opts = options()
    floats = default_run()
    events = our_events(opts)
    events[0] = AltitudeCrossEvent(0.7 * u.Mm, R_EARTH * u.km, terminal=False, direction=0)
    events[1] = LatitudeCrossEvent(30 * u.deg)
    res = cowell(K_EARTH, R0 * u.km, V0 * u.km / u.s, TOFS * u.s, events=events,
                 params=params_rows())
    for e in range(len(SLOTS)):
        assert res.t_events[e].unit == u.s
        np.testing.assert_allclose(res.t_events[e].to_value(u.s), floats.t_events[e],
                                   rtol=0, atol=1e-9)


def test_defaults():
    alt = AltitudeCrossEvent(100.0, R_EARTH)
    assert alt.terminal is True and alt.max_occurrences == 1 and alt.direction == -1
    lith = LithobrakeEvent(R_EARTH)
    assert lith.max_occurrences == 1 and lith.direction == -1
    lat = LatitudeCrossEvent(0.1)
    assert lat.max_occurrences == 0 and lat.direction == 0
    node = NodeCrossEvent(terminal=4, direction=1)
    assert node.max_occurrences == 4 and node.direction == 1
    assert NodeCrossEvent(terminal=np.int64(2)).max_occurrences == 2
    assert NodeCrossEvent(terminal=np.bool_(True)).max_occurrences == 1
    user = Event(radial_momentum)
    assert user.max_occurrences == 0 and user.direction == 0 and user.constants == ()
    for cls in (UmbraEvent, PenumbraEvent):
        eclipse = cls(R_EARTH, R_SUN, 1)
        assert eclipse.max_occurrences == 0 and eclipse.direction == 0
        assert eclipse.device_function is UmbraEvent(1.0, 2.0, 0).device_function
    assert UmbraEvent(R_EARTH, R_SUN, 1).kind == "umbra"
    assert PenumbraEvent(R_EARTH, R_SUN, 1).kind == "penumbra"


@pytest.mark.parametrize("make, name", [
    (lambda: AltitudeCrossEvent(100.0, -1.0), "R"),
    (lambda: AltitudeCrossEvent(100.0, 0.0), "R"),
    (lambda: AltitudeCrossEvent(100 * u.s, R_EARTH), "alt"),
    (lambda: AltitudeCrossEvent(math.nan, R_EARTH), "alt"),
    (lambda: AltitudeCrossEvent([1.0, 2.0], R_EARTH), "alt"),
    (lambda: AltitudeCrossEvent(100.0, R_EARTH, terminal="yes"), "terminal"),
    (lambda: AltitudeCrossEvent(100.0, R_EARTH, terminal=-1), "terminal"),
    (lambda: AltitudeCrossEvent(100.0, R_EARTH, direction=2), "direction"),
    (lambda: LithobrakeEvent(R_EARTH * u.kg), "R"),
    (lambda: LatitudeCrossEvent(2.0), "lat"),
    (lambda: LatitudeCrossEvent(91 * u.deg), "lat"),
    (lambda: LatitudeCrossEvent(1 * u.km), "lat"),
    (lambda: NodeCrossEvent(direction="up"), "direction"),
    (lambda: NodeCrossEvent(terminal=1.5), "terminal"),
    (lambda: Event(3.0), "g"),
    (lambda: UmbraEvent(-R_EARTH, R_SUN, 0), "R"),
    (lambda: UmbraEvent(R_EARTH * u.s, R_SUN, 0), "R"),
    (lambda: UmbraEvent(R_EARTH, 0.0, 0), "R_sun"),
    (lambda: PenumbraEvent(R_EARTH, R_SUN * u.kg, 0), "R_sun"),
    (lambda: PenumbraEvent(R_EARTH, math.inf, 0), "R_sun"),
    (lambda: UmbraEvent(R_EARTH, R_SUN, -1), "offset"),
    (lambda: UmbraEvent(R_EARTH, R_SUN, 1.5), "offset"),
    (lambda: UmbraEvent(R_EARTH, R_SUN, True), "offset"),
    (lambda: UmbraEvent(R_EARTH, R_SUN, "1"), "offset"),
    (lambda: UmbraEvent(R_EARTH, R_SUN, 0, terminal=-1), "terminal"),
    (lambda: PenumbraEvent(R_EARTH, R_SUN, 0, direction=-2), "direction"),
    (lambda: EclipseEvent(R_EARTH, R_SUN, 0, kind="total"), "kind"),
    (lambda: Event(radial_momentum, direction=0.5), "direction"),
])
def test_bad_arguments_name_the_argument(make, name):
    with pytest.raises(ValueError, match=rf"^{name}\b"):
        make()
