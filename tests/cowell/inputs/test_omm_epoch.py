"""`OMMCatalog.covariances_at`: each object's covariance carried from its own epoch to a
common one, against the state transition matrix of central differences of scipy's
DOP853 on the same force model (two-body + J2); an object at the common epoch keeps its
matrix, objects without one (or whose propagation fails) do not touch the others; OMM
files of real TLEs (HAPSIRA_TEST_DATA) with covariances, at two epochs."""

import copy

import numpy as np
import pytest
from astropy import units as u
from extras import need
from reference import DATA_DIR, sized
from scipy.integrate import solve_ivp

from hapsira_core.ivp import BAD_INITIAL_STATE
from hapsira_cowell.constants import J2_EARTH, K_EARTH, R_EARTH
from hapsira_cowell.covariance import from_rtn, to_rtn
from hapsira_cowell.inputs.omm import NO_COVARIANCE, NO_STATE, OMMCatalog
from hapsira_cowell.inputs.tle import from_tle

#: 100 m radial, 1 km along-track, 100 m normal; 0.1, 1, 0.1 m/s (RTN, at each epoch)
SIGMA = np.array([0.1, 1.0, 0.1, 1e-4, 1e-3, 1e-4])
#: ``|P - P_scipy| / |P_scipy|`` (Frobenius) allowed: the finite-difference STM's own
#: error (DOP853 at rtol 1e-13, steps of 10 m and 1 cm/s) is 3e-10 to 5e-9 here (12 h:
#: steps ten times larger give 5e-7, ten times smaller 1e-8: truncation, then rounding)
RELATIVE = 1e-7


def real_tles(name, count):
    """The first ``count`` entries of a real catalog, read in place."""
    return from_tle((DATA_DIR / name).read_text().splitlines()[:3 * count])


def as_omms(tle, covariances):
    """An `OMMCatalog` of ``tle``'s objects with ``covariances`` (what `read_omms` makes
    of OMMs of these TLEs; built directly so that ccsds-ndm is not needed)."""
    return OMMCatalog(tle.names, tle.satellites, tle.r, tle.v, [""] * len(tle),
                      [f"text {i + 1}" for i in range(len(tle))], covariances,
                      ["TEME"] * len(tle))


def j2(t, y):
    r = y[:3]
    norm = np.linalg.norm(r)
    z2 = (r[2] / norm) ** 2
    factor = 1.5 * J2_EARTH * K_EARTH * R_EARTH ** 2 / norm ** 5
    a = -K_EARTH * r / norm ** 3 + factor * r * np.array([5 * z2 - 1, 5 * z2 - 1, 5 * z2 - 3])
    return np.concatenate([y[3:], a])


def scipy_stm(r, v, tof):
    """``d x(tof) / d x(0)`` by central differences of scipy's DOP853 (10 m, 1 cm/s), and
    ``x(tof)``."""
    x0 = np.concatenate([r, v])
    steps = np.array([1e-2, 1e-2, 1e-2, 1e-5, 1e-5, 1e-5])
    end = solve_ivp(j2, (0.0, tof), x0, method="DOP853", rtol=1e-13, atol=1e-13).y[:, -1]
    stm = np.empty((6, 6))
    for column in range(6):
        ends = []
        for sign in (1.0, -1.0):
            x = x0.copy()
            x[column] += sign * steps[column]
            sol = solve_ivp(j2, (0.0, tof), x, method="DOP853", rtol=1e-13, atol=1e-13)
            ends.append(sol.y[:, -1])
        stm[:, column] = (ends[0] - ends[1]) / (2 * steps[column])
    return stm, end


def check_against_scipy(omms, epoch, P, status):
    """``P`` is ``Phi P0 Phi^T`` of scipy's STM along scipy's path, set in the RTN frame of
    SGP4's state at ``epoch`` as it is in the path's; returns the times of flight."""
    tofs = (epoch - omms.epochs).to_value(u.s)
    r, v, ok = omms.states_at(epoch)
    for i in range(len(omms)):
        if tofs[i] == 0:
            continue
        assert status[i] == 0
        phi, end = scipy_stm(omms.r[i], omms.v[i], tofs[i])
        expected = from_rtn(r[i], v[i], to_rtn(end[:3], end[3:], phi @ omms.covariances[i]
                                               @ phi.T))
        error = np.linalg.norm(P[i] - expected) / np.linalg.norm(expected)
        assert error < RELATIVE, (i, tofs[i], error)
        # the matrix moved: along-track grows (or shrinks backward) with |tof|
        assert np.linalg.norm(P[i] - omms.covariances[i]) > 1e-3 * np.linalg.norm(expected)
    return tofs


@pytest.fixture(scope="module")
def cosmos():
    """Three real Cosmos 2251 fragments (epochs 50 min apart), each with a covariance of
    `SIGMA` in its RTN frame at its epoch."""
    tle = real_tles("cosmos-2251-debris.tle", 3)
    return as_omms(tle, from_rtn(tle.r, tle.v, np.diag(SIGMA ** 2)))


def test_covariances_carried_both_ways_equal_scipys_stm(cosmos):
    # the middle epoch: one object there, one carried forward, one backward
    middle = cosmos.epochs[np.argsort(cosmos.epochs.jd)[1]]
    P, status = cosmos.covariances_at(middle)
    tofs = check_against_scipy(cosmos, middle, P, status)
    assert (tofs > 0).sum() == 1 and (tofs < 0).sum() == 1 and (tofs == 0).sum() == 1
    np.testing.assert_array_equal(status, 0)
    for Pi in P:  # still a covariance
        np.testing.assert_array_equal(Pi, Pi.T)
        assert np.linalg.eigvalsh(Pi).min() > -1e-12 * np.abs(Pi).max()


def test_an_object_at_the_epoch_keeps_its_covariance_exactly(cosmos):
    for i in range(len(cosmos)):
        P, status = cosmos.covariances_at(cosmos.epochs[i])
        np.testing.assert_array_equal(P[i], cosmos.covariances[i])
        assert status[i] == 0


def test_missing_covariances_stay_nan_and_leave_the_others_bit_identical(cosmos):
    later = cosmos.epochs.max() + sized(6, 1) * u.hour
    full, full_status = cosmos.covariances_at(later)
    partial = copy.copy(cosmos)
    partial.covariances = cosmos.covariances.copy()
    partial.covariances[1] = np.nan
    P, status = partial.covariances_at(later)
    assert np.isnan(P[1]).all() and status[1] == NO_COVARIANCE
    np.testing.assert_array_equal(P[[0, 2]], full[[0, 2]])  # to the bit
    np.testing.assert_array_equal(status[[0, 2]], 0)
    np.testing.assert_array_equal(full_status, 0)
    # an object whose propagation fails: NaN and cowell's status, the others as before
    broken = copy.copy(cosmos)
    broken.r = cosmos.r.copy()
    broken.r[2] = np.nan
    P, status = broken.covariances_at(later)
    assert np.isnan(P[2]).all() and status[2] == BAD_INITIAL_STATE
    np.testing.assert_array_equal(P[:2], full[:2])
    np.testing.assert_array_equal(status[:2], 0)


def test_omm_files_of_real_tles_at_two_epochs(tmp_path):
    need("ccsds_ndm")
    from cowell.inputs.test_ndm import omm_text

    from hapsira_cowell.inputs.omm import read_omms

    tle = real_tles("fengyun-1c-debris.tle", 2)
    files = []
    for index, (sat, name) in enumerate(zip(tle.satellites, tle.names)):
        files.append(tmp_path / f"{index}.omm")
        frame = "RTN" if index == 0 else "TEME"
        P = np.diag(SIGMA ** 2) if frame == "RTN" else from_rtn(tle.r[index], tle.v[index],
                                                                np.diag(SIGMA ** 2))
        files[-1].write_text(omm_text(sat, name, "kvn" if index == 0 else "xml", P, frame))
    omms = read_omms(files)
    assert omms.covariance_frames == ["RTN", "TEME"]
    # read from either frame, the same RTN standard deviations at each epoch
    np.testing.assert_allclose(omms.covariances, from_rtn(omms.r, omms.v, np.diag(SIGMA ** 2)),
                               rtol=1e-9, atol=1e-18)
    for epoch in (omms.epochs.min() - sized(3, 1) * u.hour,
                  omms.epochs.max() + sized(24, 2) * u.hour):
        P, status = omms.covariances_at(epoch)
        r, v, ok = omms.states_at(epoch)
        assert ok.all()
        check_against_scipy(omms, epoch, P, status)
        # the along-track standard deviation at the epoch, 1 km given, grows with |tof|
        along = np.einsum("ki,kij,kj->k", v / np.linalg.norm(v, axis=1)[:, None],
                          P[:, :3, :3], v / np.linalg.norm(v, axis=1)[:, None])
        assert np.all(np.sqrt(along) > 1.0)


def test_the_matrix_follows_sgp4s_state_along_the_track(cosmos):
    """A day on, the J2 path misses SGP4's state by kilometres along the orbit; the
    carried matrix is set about SGP4's state as it is about the path, so that its RTN
    form is the path's (not its inertial one, which would turn along-track variance into
    radial)."""
    from hapsira_cowell import cowell
    from hapsira_cowell.conjunctions import two_body_j2

    epoch = cosmos.epochs.max() + sized(24, 2) * u.hour
    P, status = cosmos.covariances_at(epoch)
    r, v, ok = cosmos.states_at(epoch)
    tofs = (epoch - cosmos.epochs).to_value(u.s)
    res = cowell(K_EARTH, cosmos.r, cosmos.v, tofs[:, None], f=two_body_j2, stm=True)
    carried = res.stm[:, 0] @ cosmos.covariances @ res.stm[:, 0].swapaxes(1, 2)
    np.testing.assert_allclose(to_rtn(r, v, P), to_rtn(res.rr[:, 0], res.vv[:, 0], carried),
                               rtol=1e-9, atol=1e-12 * np.abs(carried).max())
    miss = np.linalg.norm(res.rr[:, 0] - r, axis=1)
    assert miss.max() > sized(1.0, 0.05)  # km (measured 3.8 a day on, 0.15 after 2 h)
    radial_unturned = to_rtn(r, v, carried)[:, 0, 0]
    # measured: 0.31 to 0.99 of the radial variance a day on, 0.9995 after 2 hours
    assert np.abs(radial_unturned / to_rtn(r, v, P)[:, 0, 0] - 1).max() > sized(0.1, 1e-4)


def test_an_object_sgp4_cannot_place_gets_nan_and_no_state(cosmos, monkeypatch):
    later = cosmos.epochs.max() + 1 * u.hour
    full, _ = cosmos.covariances_at(later)
    r, v, ok = cosmos.states_at(later)
    ok[1], r[1], v[1] = False, np.nan, np.nan
    lost = copy.copy(cosmos)
    monkeypatch.setattr(lost, "states_at", lambda epoch: (r, v, ok))
    P, status = lost.covariances_at(later)
    assert np.isnan(P[1]).all() and status[1] == NO_STATE
    np.testing.assert_array_equal(P[[0, 2]], full[[0, 2]])
    np.testing.assert_array_equal(status[[0, 2]], 0)
