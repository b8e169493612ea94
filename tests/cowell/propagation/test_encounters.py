"""`encounters`: both objects of each approach at its TCA, their covariances and the
relative state in RTN, checked against planted approaches, finite differences and the
RTN frame built by hand; `to_rtn` / `from_rtn`."""

import numpy as np
import pytest
from astropy import units as u

from hapsira_core import settings
from hapsira_cowell import cowell
from hapsira_cowell.conjunctions import ConjunctionTable, screen, two_body_j2
from hapsira_cowell.constants import K_EARTH
from hapsira_cowell.covariance import from_rtn, rtn_basis, to_rtn
from hapsira_cowell.propagation.encounters import encounters

k = K_EARTH
#: A real GPU fuses multiply-adds, differently in the stm kernel than in the plain one
FMA = settings.TARGET == "cuda" and not settings.cuda_simulator_enabled()
STATES_RTOL = 1e-10 if FMA else 1e-12
PLANTED = [(700.5, 0.8), (1500.25, 2.5)]


def circular(a, inc, raan):
    speed = np.sqrt(k / a)
    r = a * np.array([np.cos(raan), np.sin(raan), 0.0])
    v = speed * np.array([-np.sin(raan) * np.cos(inc), np.cos(raan) * np.cos(inc),
                          np.sin(inc)])
    return r, v


def planted_cloud():
    """Pairs meeting at ``PLANTED``'s (tca, miss), built at the meeting and integrated
    back to t = 0 under `two_body_j2`."""
    r, v = [], []
    for q, (tca, miss) in enumerate(PLANTED):
        r_a, v_a = circular(6900.0 + 300 * q, 0.4 + 0.3 * q, 0.5 * q)
        r_b, v_b = circular(6900.0 + 300 * q, 1.5 - 0.2 * q, 0.5 * q)
        v_b = 1.02 * v_b
        side = np.cross(v_a - v_b, r_a)
        r_b = r_b + miss * side / np.linalg.norm(side)
        back = cowell(k, np.array([r_a, r_b]), np.array([v_a, v_b]), [-tca], f=two_body_j2)
        r.extend(back.rr[:, 0])
        v.extend(back.vv[:, 0])
    return np.array(r), np.array(v)


def random_covariances(n, seed):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(n, 6, 6)) * np.array([0.1, 0.1, 0.1, 1e-4, 1e-4, 1e-4])[:, None]
    return A @ A.swapaxes(1, 2) + np.eye(6) * 1e-10


@pytest.fixture(scope="module")
def planted():
    r, v = planted_cloud()
    table = screen(k, r, v, (0.0, 1800.0), 5.0)
    P0 = random_covariances(len(r), seed=3)
    return r, v, table, P0, encounters(k, r, v, table, P0)


def test_the_relative_state_is_the_tables_approach(planted):
    r, v, table, P0, enc = planted
    assert len(enc) == len(PLANTED) == len(table)
    np.testing.assert_array_equal(enc.i, table.i)
    np.testing.assert_array_equal(enc.status, 0)
    # the second propagation lands on the refined approach: miss to a centimetre (measured
    # 1e-7 km), relative speed alike, and the range rate zero at the TCA
    np.testing.assert_allclose(np.linalg.norm(enc.relative[:, :3], axis=1), table.miss,
                               rtol=0, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(enc.relative[:, 3:], axis=1), table.speed,
                               rtol=1e-9)
    rate = np.einsum("ki,ki->k", enc.relative[:, :3], enc.relative[:, 3:])
    assert np.all(np.abs(rate) < 1e-6 * table.miss * table.speed)
    for (tca, miss), t, m in zip(PLANTED, table.tca, table.miss):
        assert abs(t - tca) < 1e-3 and abs(m - miss) < 1e-3


def test_states_are_cowells_and_the_rtn_frame_is_built_as_defined(planted):
    r, v, table, P0, enc = planted
    for row in range(len(enc)):
        pair = [enc.i[row], enc.j[row]]
        res = cowell(k, r[pair], v[pair], [table.tca[row]], f=two_body_j2)
        # (atol: a component of a few nm beside thousands of km)
        np.testing.assert_allclose(enc.rr1[row], res.rr[0, 0], rtol=STATES_RTOL, atol=1e-9)
        np.testing.assert_allclose(enc.vv2[row], res.vv[1, 0], rtol=STATES_RTOL, atol=1e-12)
        rr, vv = enc.rr1[row], enc.vv1[row]
        radial = rr / np.linalg.norm(rr)
        normal = np.cross(rr, vv) / np.linalg.norm(np.cross(rr, vv))
        along = np.cross(normal, radial)
        d = res.rr[1, 0] - res.rr[0, 0]
        np.testing.assert_allclose(enc.relative[row, :3], [d @ radial, d @ along, d @ normal],
                                   rtol=1e-9, atol=1e-9)  # km: a micrometre (a GPU's FMAs)
        # variance along the radial axis, by hand
        assert np.isclose(enc.P1_rtn[row, 0, 0], radial @ enc.P1[row, :3, :3] @ radial,
                          rtol=1e-12)
        assert np.isclose(enc.P1_rtn[row, 4, 4], along @ enc.P1[row, 3:, 3:] @ along,
                          rtol=1e-12)


def test_covariances_are_carried_by_finite_differences_of_the_flow(planted):
    """Phi from central differences of cowell (12 propagations of object i), not the STM."""
    r, v, table, P0, enc = planted
    row, tca = 1, table.tca[1]
    i = enc.i[row]
    steps = np.array([1e-3, 1e-3, 1e-3, 1e-6, 1e-6, 1e-6])
    x0 = np.concatenate([r[i], v[i]])
    starts = np.array([x0 + s * steps[c] * np.eye(6)[c] for c in range(6) for s in (1, -1)])
    res = cowell(k, starts[:, :3], starts[:, 3:], [tca], f=two_body_j2)
    x = np.concatenate([res.rr[:, 0], res.vv[:, 0]], axis=1)
    phi = np.stack([(x[2 * c] - x[2 * c + 1]) / (2 * steps[c]) for c in range(6)], axis=1)
    np.testing.assert_allclose(enc.P1[row], phi @ P0[i] @ phi.T, rtol=2e-5,
                               atol=2e-5 * np.abs(enc.P1[row]).max())
    np.testing.assert_allclose(enc.P1_rtn[row], to_rtn(enc.rr1[row], enc.vv1[row],
                                                       enc.P1[row]), rtol=1e-12, atol=1e-18)


def test_an_approach_at_the_epoch_needs_no_propagation():
    r, v = planted_cloud()
    P0 = random_covariances(len(r), seed=4)
    table = ConjunctionTable([0, 1], [2, 3], [0.0, 60.0], [1.0, 2.0], [3.0, 4.0])
    enc = encounters(k, r, v, table, P0, t0=0.0)
    np.testing.assert_array_equal(enc.rr1[0], r[0])
    np.testing.assert_array_equal(enc.vv2[0], v[2])
    np.testing.assert_allclose(enc.P2[0], P0[2], rtol=1e-15, atol=0)
    assert np.all(np.isfinite(enc.P1)) and not np.array_equal(enc.P1[1], P0[1])
    # a time axis that does not start at 0, and Quantities
    shifted = ConjunctionTable([1], [3], [1060.0], [1.0], [3.0])
    same = encounters(k * u.km ** 3 / u.s ** 2, r * u.km, v * u.km / u.s, shifted,
                      P0 * 1e6 * u.m ** 2, t0=1000.0 * u.s)
    np.testing.assert_allclose(same.rr1[0], enc.rr1[1], rtol=1e-15, atol=0)
    np.testing.assert_allclose(same.P1[0], enc.P1[1], rtol=1e-12, atol=0)


def test_bad_arguments_are_named():
    r, v = planted_cloud()
    table = ConjunctionTable([0], [9], [10.0], [1.0], [1.0])
    P0 = np.eye(6)
    with pytest.raises(ValueError, match="table: expected the ConjunctionTable"):
        encounters(k, r, v, {"i": [0]}, P0)
    with pytest.raises(ValueError, match="table: object indices up to 9 for 4 states"):
        encounters(k, r, v, table, P0)
    with pytest.raises(ValueError, match="table: a TCA -90 s before t0"):
        encounters(k, r, v, ConjunctionTable([0], [1], [10.0], [1.0], [1.0]), P0, t0=100.0)
    with pytest.raises(ValueError, match=r"P0: expected one matrix per object \(4\)"):
        encounters(k, r, v, ConjunctionTable([0], [1], [10.0], [1.0], [1.0]),
                   np.stack([P0] * 3))


def test_rtn_round_trip_and_sigmas():
    r, v = planted_cloud()
    sigma = np.array([0.1, 1.0, 0.05, 1e-4, 2e-4, 3e-5])
    P = from_rtn(r, v, np.diag(sigma ** 2))
    basis = rtn_basis(r, v)
    np.testing.assert_allclose(basis @ basis.swapaxes(1, 2), np.broadcast_to(np.eye(3),
                               basis.shape), atol=1e-15)
    radial = r / np.linalg.norm(r, axis=1, keepdims=True)
    np.testing.assert_allclose(np.einsum("ni,nij,nj->n", radial, P[:, :3, :3], radial),
                               sigma[0] ** 2, rtol=1e-12)
    np.testing.assert_allclose(to_rtn(r, v, P), np.broadcast_to(np.diag(sigma ** 2), P.shape),
                               rtol=0, atol=1e-15)
    in_m = from_rtn(r[0], v[0], np.diag(sigma ** 2) * 1e6 * u.m ** 2)
    assert in_m.unit == u.m ** 2
    np.testing.assert_allclose(in_m.value, P[0] * 1e6, rtol=1e-14, atol=1e-20)
    with pytest.raises(ValueError, match="rr, vv: an RTN frame needs"):
        rtn_basis(r[0], r[0])
    with pytest.raises(ValueError, match=r"P_rtn: expected \(6, 6\) or one matrix per"):
        from_rtn(r, v, np.eye(5))
