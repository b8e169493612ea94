"""`hapsira_cowell.covariance`: P(t) = Phi P0 Phi^T, Monte-Carlo clones, and the checks of P0.

The linear covariance is checked against an explicit product and against the sample
covariance of clones drawn by `sample` and propagated by cowell over one LEO orbit
(a whitened statistic with a threshold worked out below).
"""

import numpy as np
import pytest
from astropy import units as u

from hapsira_core import memory, settings
from hapsira_cowell import cowell
from hapsira_cowell.covariance import propagate, sample, sample_covariance

SIMULATOR = settings.TARGET == "cuda"  # CI runs cuda under the simulator: short spans
K = 398600.4418
R0 = np.array([[7000.0, 0.0, 0.0], [-2000.0, 7800.0, 1500.0]])
V0 = np.array([[0.0, 7.0, 3.2], [-6.0, -1.2, 4.0]])
TOFS = np.array([300.0, 600.0]) if SIMULATOR else np.array([1500.0, 5800.0])
#: 1 m and 1 mm/s (km, km/s), with a correlation so that P0 is not diagonal
SIGMA = np.array([1e-3, 1e-3, 1e-3, 1e-6, 1e-6, 1e-6])
CORRELATION = np.eye(6) + 0.3 * (np.eye(6, k=3) + np.eye(6, k=-3))
P0 = SIGMA[:, None] * CORRELATION * SIGMA[None, :]


@pytest.fixture(scope="module")
def res():
    return cowell(K, R0, V0, TOFS, stm=True)


def test_propagate_is_phi_p0_phi_transposed(res):
    P = propagate(res, P0)
    assert P.shape == (2, TOFS.size, 6, 6)
    for i in range(2):
        for j in range(TOFS.size):
            phi = res.stm[i, j]
            np.testing.assert_allclose(P[i, j], phi @ P0 @ phi.T, rtol=1e-13,
                                       atol=1e-13 * np.abs(P[i, j]).max())
    per_object = propagate(res, np.stack([P0, 4.0 * P0]))
    np.testing.assert_allclose(per_object[1], 4.0 * P[1], rtol=1e-13)
    np.testing.assert_array_equal(per_object[0], P[0])


def test_one_object_and_quantities():
    one = cowell(K, R0[0], V0[0], TOFS, stm=True)
    P = propagate(one, P0)
    assert P.shape == (TOFS.size, 6, 6)
    # P0 in m and m/s: the same matrix times 1e6, returned in m^2 (Phi has no length unit)
    in_metres = propagate(one, P0 * 1e6 * u.m ** 2)
    assert in_metres.unit == u.m ** 2
    np.testing.assert_allclose(in_metres.to_value(u.km ** 2), P, rtol=1e-13)
    np.testing.assert_array_equal(propagate(one.stm, P0), P)


def whitened_statistic(sample_P, linear_P, clones):
    """``(n - 1) ||L^-1 S L^-T - I||_F^2`` with ``linear_P = L L^T``: for S the sample
    covariance of n = ``clones`` draws from N(m, linear_P), (n - 1) L^-1 S L^-T is
    Wishart(n - 1, I), and this statistic has mean d(d + 1) = 42 for d = 6 and standard
    deviation about 13 (21 distinct entries, each of variance 8 after scaling). In 3000
    numpy trials of 6-dimensional normal samples its largest value was 132 (n = 100) and
    111 (n = 2000): 150 is beyond 99.99 % for every n used here, and a wrong
    covariance (P0 itself, or Phi^T P0 Phi) gives far more."""
    L = np.linalg.cholesky(linear_P)
    W = np.linalg.solve(L, np.linalg.solve(L, sample_P).T)
    return (clones - 1) * ((W - np.eye(6)) ** 2).sum()


def test_sampled_covariance_matches_the_linear_one_over_one_orbit():
    clones = 100 if SIMULATOR else 2000
    r, v = sample(R0, V0, P0, clones, seed=7)
    assert r.shape == v.shape == (2 * clones, 3)
    linear = propagate(cowell(K, R0, V0, TOFS, rtol=1e-12, atol=1e-14, stm=True), P0)
    cloud = cowell(K, r, v, TOFS, rtol=1e-12, atol=1e-14)
    assert np.all(cloud.status == 0)
    sampled = sample_covariance(cloud.rr, cloud.vv, clones)
    assert sampled.shape == linear.shape
    for i in range(2):
        for j in range(TOFS.size):
            assert whitened_statistic(sampled[i, j], linear[i, j], clones) < 150, (i, j)
        # not vacuous: the initial covariance is far from the propagated clouds (1e8 and
        # more after one orbit; over the simulator's 600 s, 400 and more)
        assert whitened_statistic(sampled[i, -1], P0, clones) > 2 * 150


def test_sample_is_seeded_object_major_and_takes_quantities():
    r, v = sample(R0, V0, P0, 5, seed=1)
    again, _ = sample(R0, V0, P0, 5, seed=1)
    np.testing.assert_array_equal(r, again)
    assert np.abs(r[:5] - R0[0]).max() < 1e-2 and np.abs(r[5:] - R0[1]).max() < 1e-2
    rq, vq = sample(R0 * 1000 * u.m, V0 * u.km / u.s, P0 * 1e6 * u.m ** 2, 5, seed=1)
    assert rq.unit == u.km and vq.unit == u.km / u.s
    np.testing.assert_allclose(rq.value, r, rtol=1e-15)
    np.testing.assert_allclose(vq.value, v, rtol=1e-15)
    # a singular P0 (velocity known exactly) is a covariance too
    singular = P0.copy()
    singular[3:, :] = singular[:, 3:] = 0.0
    r1, v1 = sample(R0[0], V0[0], singular, 4, seed=2)
    assert r1.shape == (4, 3)
    np.testing.assert_array_equal(v1, np.broadcast_to(V0[0], (4, 3)))


def test_clones_too_many_for_memory_are_refused_before_drawing(monkeypatch):
    """10**9 clones of 2 objects are 3 arrays of 96 GB: numpy's MemoryError (or the
    process killed) once, the size check's error naming them now."""
    monkeypatch.setattr(memory, "LIMIT", 8e9)
    with pytest.raises(memory.OutputTooLargeError,
                       match=r"^the outputs of 2 objects x 1000000000 clones need 288 GB, more "
                             r"than the 8 GB allowed \(hapsira_core.memory.LIMIT\); nothing was "
                             r"allocated. Ask for fewer clones \(clones\)"):
        sample(R0, V0, P0, 10 ** 9)
    monkeypatch.setattr(memory, "LIMIT", 3 * 2 * 1000 * 6 * 8)  # 1000 clones: just fits
    assert sample(R0, V0, P0, 1000, seed=3)[0].shape == (2000, 3)
    with pytest.raises(memory.OutputTooLargeError, match="2 objects x 1100 clones need 317 kB"):
        sample(R0, V0, P0, 1100, seed=3)


@pytest.mark.parametrize("bad, message", [
    (np.eye(5), r"P0: expected shape \(6, 6\) or \(N, 6, 6\)"),
    (np.stack([P0] * 3), r"P0: expected one matrix per object \(2\), got 3"),
    (P0 + 1e-7 * np.eye(6, k=1), "P0: expected a symmetric matrix"),
    (np.diag([1.0, 1.0, 1.0, 1.0, 1.0, -1.0]), "P0: expected a positive semidefinite"),
    (np.stack([P0, -P0]), r"P0\[1\]: expected a positive semidefinite"),
    (np.full((6, 6), np.nan), "P0: expected finite numbers"),
    (P0 * u.km ** 2 / u.s, "P0: expected plain numbers .* or a Quantity of length squared"),
])
def test_bad_covariances_are_named(res, bad, message):
    with pytest.raises(ValueError, match=message):
        propagate(res, bad)


def test_bad_arguments_are_named(res):
    with pytest.raises(ValueError, match="res: has no state transition matrices"):
        propagate(cowell(K, R0, V0, TOFS), P0)
    for clones in (1, 0, -5, 2.0, True):
        with pytest.raises(ValueError, match=f"clones: expected an integer from 2 to .*, got "
                                             f"{clones!r}"):
            sample(R0, V0, P0, clones)
    with pytest.raises(ValueError, match=r"P0: expected one matrix per object \(2\)"):
        sample(R0, V0, np.stack([P0] * 3), 4)
    with pytest.raises(ValueError, match="clones: 7 states are not a whole number"):
        sample_covariance(np.zeros((7, 2, 3)), np.zeros((7, 2, 3)), 2)
