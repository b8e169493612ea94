"""Ephemeris tables: interpolation error against astropy, layout, validation."""

import numpy as np
import pytest
from astropy import units as u
from astropy.coordinates import get_body_barycentric_posvel
from astropy.time import Time, TimeDelta

from hapsira_core import settings
from hapsira_core.jit import Arg, ObjectKernel, hjit
from hapsira_cowell.models.ephem import DEFAULT_STEP, HEADER, Ephemeris, position

EPOCH = Time("2025-02-15T12:00:00", scale="tdb")


def geocentric(body, t):
    times = EPOCH + np.atleast_1d(t) * u.s
    pv = get_body_barycentric_posvel(body, times, ephemeris="builtin")
    earth = get_body_barycentric_posvel("earth", times, ephemeris="builtin")
    return (pv[0] - earth[0]).xyz.to_value(u.km).T


# Measured at the default steps over 30 days: Sun 0.4 m, Moon 1.1 m (max).
@pytest.mark.parametrize("body, bound_km", [("sun", 0.001), ("moon", 0.005)])
def test_interpolation_error_between_samples(body, bound_km):
    eph = Ephemeris.from_body(body, EPOCH, -86400.0, 2 * 86400.0)
    assert eph.dt == DEFAULT_STEP[body]
    t = np.linspace(-86400.0, 2 * 86400.0, 241) + 777.7  # off the sample times
    t = t[t < 2 * 86400.0]
    err = np.linalg.norm(eph.position(t) - geocentric(body, t), axis=1)
    assert err.max() < bound_km
    distance = np.linalg.norm(geocentric(body, 0.0))
    assert (3.5e5 < distance < 4.1e5) if body == "moon" else (1.47e8 < distance < 1.49e8)


def test_table_layout_and_quantities():
    eph = Ephemeris.from_body("moon", EPOCH, 0 * u.s, TimeDelta(0.5, format="jd"), step=2 * u.h)
    table = eph.to_params()
    t0, dt, n = table[:HEADER]
    assert dt == 7200.0 and t0 == -7200.0 and n == len(eph.positions)
    assert table.size == HEADER + 6 * int(n)
    assert t0 + (n - 1) * dt >= 43200.0
    np.testing.assert_array_equal(table[HEADER:HEADER + 3], eph.positions[0])


def test_from_samples_reproduces_samples_and_clamps():
    positions = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 5.0], [4.0, 4.0, 4.0]])
    velocities = np.array([[0.1, 0.0, 0.0], [0.1, 0.1, 0.0], [0.0, 0.0, -0.1]])
    eph = Ephemeris.from_samples(100.0, 10.0, positions, velocities)
    np.testing.assert_allclose(eph.position(np.array([100.0, 110.0, 120.0])), positions)
    np.testing.assert_allclose(eph.position(50.0), positions[0])  # before the table
    np.testing.assert_allclose(eph.position(500.0), positions[-1])  # after it
    mid = eph.position(105.0)
    assert np.all(mid > positions[0] - 1e-12) and np.all(mid < positions[1] + 1e-12)


@pytest.mark.parametrize("kwargs, match", [
    (dict(positions=np.ones((1, 3)), velocities=np.ones((1, 3))), "positions: expected shape"),
    (dict(positions=np.ones((3, 3)), velocities=np.ones((2, 3))), "velocities: expected shape"),
    (dict(positions=np.ones((3, 3)), velocities=np.ones((3, 3)), dt=0.0), "dt: expected a positive"),
])
def test_bad_tables(kwargs, match):
    args = dict(t0=0.0, dt=60.0)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        Ephemeris.from_samples(args["t0"], args["dt"], args["positions"], args["velocities"])


def test_from_samples_round_trip():
    eph = Ephemeris.from_body("moon", EPOCH, -3600.0, -7200.0 * 3)  # backward, span reversed
    assert eph.t0 <= -21600.0 - eph.dt and eph.t0 + (len(eph.positions) - 1) * eph.dt >= -3600.0
    copy = Ephemeris.from_samples(eph.t0, eph.dt, eph.positions, eph.velocities)
    np.testing.assert_array_equal(copy.to_params(), eph.to_params())
    t = eph.t0 + eph.dt * np.arange(len(eph.positions))
    np.testing.assert_allclose(copy.position(t), eph.positions, rtol=1e-15)
    np.testing.assert_allclose(copy.position(t), geocentric("moon", t), rtol=1e-15)


@hjit
def _position_row(t, p, out):
    # the table at offset 2 of the row, behind two per-object numbers
    x = position(p, 2, t[0])
    out[0] = x[0]
    out[1] = x[1]
    out[2] = x[2]


POSITION = ObjectKernel(_position_row, [Arg("t", np.float64, ("one",)),
                                        Arg("p", np.float64, ("np",), per_object=False),
                                        Arg("out", np.float64, ("three",), output=True)])


def test_kernel_position_equals_host_position():
    """position() compiled for the active target reads the table as the host does."""
    eph = Ephemeris.from_body("sun", EPOCH, 0.0, 86400.0)
    params = np.concatenate([[2.2, 0.01e-6], eph.to_params()])
    n = 16 if settings.TARGET == "cuda" and settings.cuda_simulator_enabled() else 200
    t = np.linspace(-2 * 86400.0, 3 * 86400.0, n)  # across the table and beyond both ends
    out = np.empty((n, 3))
    POSITION(t[:, None], params, out)
    # cuda may fuse multiply-adds: equal to rounding, not bit for bit
    np.testing.assert_allclose(out, eph.position(t), rtol=1e-14)
    np.testing.assert_array_equal(out[0], eph.positions[0])  # clamped before
    np.testing.assert_array_equal(out[-1], eph.positions[-1])  # and after
