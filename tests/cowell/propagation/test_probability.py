"""Probability of collision (`hapsira_cowell.conjunctions.probability`): Foster's integral
against scipy's adaptive integration over the disc, CARA's documented validation case,
Chan's series, the maximum over the covariance's size, flags, units and argument errors.

The kernel runs on the target of the run (the suite runs on cpu, parallel and the CUDA
simulator: conftest.py)."""

import math
import warnings

import numpy as np
import pytest
from astropy import units as u
from scipy import integrate

from hapsira_cowell.conjunctions import (CovarianceRepairedWarning, Encounters,
                                         LongEncounterWarning, probability)

# NASA CARA Analysis Tools, Pc2D_Foster.m, "Examples/Validation Cases", case 1 (circle):
# states km, km/s; covariances km^2; HBR 0.020 km; computed there with RelTol 1e-9.
CARA_R1 = [378.39559, 4305.721887, 5752.767554]
CARA_V1 = [2.360800244, 5.580331936, -4.322349039]
CARA_R2 = [374.5180598, 4307.560983, 5751.130418]
CARA_V2 = [-5.388125081, -3.946827739, 3.322820358]
CARA_C1 = [[44.5757544811362, 81.6751751052616, -67.8687662707124],
           [81.6751751052616, 158.453402956163, -128.616921644857],
           [-67.8687662707124, -128.616921644858, 105.490542562701]]
CARA_C2 = [[2.31067077720423, 1.69905293875632, -1.4170164577661],
           [1.69905293875632, 1.24957388457206, -1.04174164279599],
           [-1.4170164577661, -1.04174164279599, 0.869260558223714]]
CARA_PC = 2.7060234765697e-05


def _rotation(rng):
    q, r = np.linalg.qr(rng.normal(size=(3, 3)))
    return q * np.sign(np.diag(r))


def _covariance(rng, low, high):
    q = _rotation(rng)
    return q @ np.diag(np.exp(rng.uniform(np.log(low), np.log(high), 3)) ** 2) @ q.T


def geometries(n, seed, sigma=(0.02, 3.0), hbr=(0.005, 0.05), spread=3.0):
    """``n`` approaches at their TCA (relative position normal to the relative velocity):
    LEO states, covariances with standard deviations log-uniform in ``sigma`` (km), a
    hard-body radius log-uniform in ``hbr`` and a miss of up to ``spread`` (Mahalanobis
    distance in the encounter plane)."""
    rng = np.random.default_rng(seed)
    r1 = rng.normal(size=(n, 3))
    r1 *= 7000.0 / np.linalg.norm(r1, axis=1, keepdims=True)
    v1 = np.cross(r1, rng.normal(size=(n, 3)))
    v1 *= 7.5 / np.linalg.norm(v1, axis=1, keepdims=True)
    v2 = np.cross(r1, rng.normal(size=(n, 3)))
    v2 *= 7.5 / np.linalg.norm(v2, axis=1, keepdims=True)
    c1 = np.stack([_covariance(rng, *sigma) for _ in range(n)])
    c2 = np.stack([_covariance(rng, *sigma) for _ in range(n)])
    radius = np.exp(rng.uniform(np.log(hbr[0]), np.log(hbr[1]), n))
    relative = v2 - v1
    direction = np.cross(relative, rng.normal(size=(n, 3)))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    # the miss's length for a Mahalanobis distance of 1 in the encounter plane
    z = relative / np.linalg.norm(relative, axis=1, keepdims=True)
    plane = np.stack([direction, np.cross(z, direction)], axis=1)
    projected = plane @ (c1 + c2) @ plane.transpose(0, 2, 1)
    unit = 1.0 / np.sqrt(np.linalg.inv(projected)[:, 0, 0])
    r2 = r1 + direction * (rng.uniform(0.0, spread, n) * unit)[:, None]
    return r1, v1, c1, r2, v2, c2, radius


def reference(r1, v1, c1, r2, v2, c2, hbr):
    """The 2D Gaussian's mass over the disc, by scipy's dblquad in polar coordinates
    about the disc's centre (the plane and its axes built here, independently)."""
    r, v = np.subtract(r2, r1), np.subtract(v2, v1)
    z = v / np.linalg.norm(v)
    x = r - (r @ z) * z
    x /= np.linalg.norm(x)
    y = np.cross(z, x)
    plane = np.stack([x, y])
    C = plane @ (np.asarray(c1)[:3, :3] + np.asarray(c2)[:3, :3]) @ plane.T
    inverse = np.linalg.inv(C)
    centre = np.array([np.linalg.norm(r), 0.0])

    def density(rho, phi):
        p = centre + rho * np.array([math.cos(phi), math.sin(phi)])
        return math.exp(-0.5 * p @ inverse @ p) * rho

    value, _ = integrate.dblquad(density, 0.0, 2.0 * math.pi, 0.0, hbr, epsabs=0.0,
                                 epsrel=1e-11)
    return value / (2.0 * math.pi * math.sqrt(np.linalg.det(C)))


def test_foster_equals_the_published_cara_validation_case():
    pc = probability(CARA_R1, CARA_V1, CARA_C1, CARA_R2, CARA_V2, CARA_C2, 0.020)
    assert pc.shape == ()
    assert float(pc) == pytest.approx(CARA_PC, rel=1e-9)


def test_foster_equals_dblquad_on_100_random_geometries():
    r1, v1, c1, r2, v2, c2, hbr = geometries(100, seed=54)
    pc = probability(r1, v1, c1, r2, v2, c2, hbr)
    expected = np.array([reference(*row) for row in zip(r1, v1, c1, r2, v2, c2, hbr)])
    assert expected.min() > 1e-12  # relative accuracy is meaningful
    np.testing.assert_allclose(pc, expected, rtol=1e-6, atol=0)


def test_foster_is_exact_where_the_covariance_is_much_smaller_than_the_disc():
    """Narrow Gaussians: many panels, the disc's edge inside the band."""
    r1, v1, c1, r2, v2, c2, hbr = geometries(12, seed=7, sigma=(0.002, 0.05),
                                             hbr=(0.02, 0.1), spread=2.0)
    pc = probability(r1, v1, c1, r2, v2, c2, hbr)
    expected = np.array([reference(*row) for row in zip(r1, v1, c1, r2, v2, c2, hbr)])
    np.testing.assert_allclose(pc, expected, rtol=1e-6, atol=1e-14)


def _isotropic_pair(n, seed):
    """Approaches whose projected combined covariance is a circle (sigma^2 I in 3D)."""
    r1, v1, _, r2, v2, _, hbr = geometries(n, seed)
    rng = np.random.default_rng(seed + 1)
    sigma = rng.uniform(0.05, 1.0, n)
    c = sigma[:, None, None] ** 2 * np.eye(3) / 2.0
    return r1, v1, c, r2, v2, c, hbr


def test_chan_equals_foster_for_a_circular_covariance():
    """Chan's series is the exact (Rice) distribution where the ellipse is a circle."""
    args = _isotropic_pair(20, seed=3)
    np.testing.assert_allclose(probability(*args, method="chan"), probability(*args),
                               rtol=1e-9, atol=1e-30)


def test_chan_agrees_with_foster_in_its_regime():
    """A disc small against the covariance, standard deviations within a factor of 3 of
    each other: a few parts in a thousand (Chan's circle of equal area)."""
    r1, v1, c1, r2, v2, c2, hbr = geometries(30, seed=11, sigma=(0.3, 0.9), hbr=(0.01, 0.01))
    foster = probability(r1, v1, c1, r2, v2, c2, hbr)
    chan = probability(r1, v1, c1, r2, v2, c2, hbr, method="chan")
    assert foster.min() > 1e-8
    np.testing.assert_allclose(chan, foster, rtol=5e-3)


def test_max_is_the_largest_probability_over_the_covariance_scale():
    r1, v1, c1, r2, v2, c2, hbr = geometries(8, seed=5)
    best = probability(r1, v1, c1, r2, v2, c2, hbr, method="max")
    scales = np.exp(np.linspace(-6, 6, 241))
    with warnings.catch_warnings():  # the widest covariances make long encounters
        warnings.simplefilter("ignore", LongEncounterWarning)
        grid = np.array([probability(r1, v1, c1 * s * s, r2, v2, c2 * s * s, hbr)
                         for s in scales])
    assert np.all(best >= grid.max(axis=0) * (1 - 1e-9))
    np.testing.assert_allclose(best, grid.max(axis=0), rtol=3e-3)  # the grid's steps
    assert np.all(best >= probability(r1, v1, c1, r2, v2, c2, hbr))
    # the scale of the covariance does not matter, only its shape
    np.testing.assert_allclose(probability(r1, v1, 9 * c1, r2, v2, 9 * c2, hbr, method="max"),
                               best, rtol=1e-9)


def test_max_of_a_circle_is_alfanos_small_disc_bound_and_one_inside_the_disc():
    """A circular covariance and a disc small against the miss: ``R^2 / (e d^2)``."""
    r1, v1, c, r2, v2, _, _ = _isotropic_pair(5, seed=9)
    miss = np.linalg.norm(r2 - r1, axis=1)
    hbr = 1e-3 * miss
    best = probability(r1, v1, c, r2, v2, c, hbr, method="max")
    np.testing.assert_allclose(best, hbr ** 2 / (math.e * miss ** 2), rtol=1e-5)
    inside = probability(r1, v1, c, r2, v2, c, 2.0 * miss, method="max")
    np.testing.assert_array_equal(inside, 1.0)


def test_hbr_a_number_or_one_per_approach():
    r1, v1, c1, r2, v2, c2, hbr = geometries(6, seed=2)
    np.testing.assert_array_equal(probability(r1, v1, c1, r2, v2, c2, 0.02),
                                  probability(r1, v1, c1, r2, v2, c2, np.full(6, 0.02)))
    each = [float(probability(*row)) for row in zip(r1, v1, c1, r2, v2, c2, hbr)]
    np.testing.assert_array_equal(probability(r1, v1, c1, r2, v2, c2, hbr), each)


def test_quantities_are_converted_and_6x6_uses_the_position_block():
    r1, v1, c1, r2, v2, c2, hbr = geometries(5, seed=4)
    plain = probability(r1, v1, c1, r2, v2, c2, hbr)
    quantities = probability(r1 * 1e3 * u.m, v1 * 1e3 * u.m / u.s, c1 * 1e6 * u.m ** 2,
                             r2 * u.km, v2 * u.km / u.s, c2 * u.km ** 2, hbr * 1e3 * u.m)
    np.testing.assert_allclose(quantities, plain, rtol=1e-10)
    big = np.zeros((5, 6, 6))
    big[:, :3, :3] = c1
    big[:, 3:, 3:] = np.eye(3) * 1e-6
    np.testing.assert_array_equal(probability(r1, v1, big, r2, v2, c2, hbr), plain)
    shared = probability(r1, v1, c1[0], r2, v2, c2[0], hbr)
    assert shared[0] == plain[0]


def test_non_positive_definite_covariances_are_clipped_and_named():
    r1, v1, c1, r2, v2, c2, hbr = geometries(4, seed=8)
    bad = c1.copy()
    for k in (1, 3):  # a negative variance along the miss, in the encounter plane
        e = (r2[k] - r1[k]) / np.linalg.norm(r2[k] - r1[k])
        bad[k] = c1[k] - 2.0 * (e @ (c1[k] + c2[k]) @ e) * np.outer(e, e)
    with pytest.warns(CovarianceRepairedWarning, match=r"approach\(es\) 1, 3 "):
        result = probability(r1, v1, bad, r2, v2, c2, hbr, full=True)
    np.testing.assert_array_equal(result.repaired, [False, True, False, True])
    assert np.all(np.isfinite(result.pc)) and np.all(result.pc >= 0)
    assert np.all(result.sigma[[1, 3], 1] >= 1e-4 * hbr[[1, 3]] * (1 - 1e-12))


def test_slow_encounters_are_flagged():
    r1, v1, c1, r2, v2, c2, hbr = geometries(3, seed=6)
    v2 = v2.copy()
    v2[1] = v1[1] + 1e-3 * (v2[1] - v1[1]) / np.linalg.norm(v2[1] - v1[1])  # 1 m/s
    with pytest.warns(LongEncounterWarning, match=r"approach\(es\) 1 "):
        result = probability(r1, v1, c1, r2, v2, c2, hbr, full=True)
    np.testing.assert_array_equal(result.long_encounter, [False, True, False])
    assert result.duration[1] > 100 * result.duration[0]


@pytest.mark.parametrize("change, match", [
    ({"r1": np.zeros((3, 2))}, r"r1: expected shape \(3,\) or \(N, 3\)"),
    ({"v2": np.zeros((4, 3))}, "r1, v1, r2, v2: expected one number of approaches"),
    ({"c1": np.zeros((3, 4, 4))}, "c1: expected shape"),
    ({"c2": np.zeros((2, 3, 3))}, r"c2: expected one covariance per approach \(3\)"),
    ({"hbr": -0.01}, "hbr: expected positive hard-body radii"),
    ({"hbr": np.ones(2)}, r"hbr: expected a number or shape \(3,\)"),
    ({"hbr": 1 * u.s}, "hbr: expected a quantity in km"),
    ({"c1": np.ones((3, 3)) * u.s}, "c1: expected plain numbers"),
    ({"method": "hall"}, "method: expected one of"),
    ({"v2": "v1"}, "v1, v2: equal velocities in approach 0, 1, 2"),
])
def test_bad_arguments_name_the_argument(change, match):
    r1, v1, c1, r2, v2, c2, hbr = geometries(3, seed=1)
    args = dict(r1=r1, v1=v1, c1=c1, r2=r2, v2=v2, c2=c2, hbr=hbr)
    args.update({key: args[value] if isinstance(value, str) and key != "method" else value
                 for key, value in change.items()})
    with pytest.raises(ValueError, match=match):
        probability(**args)


def test_encounters_give_the_probability_of_each_approach():
    r1, v1, c1, r2, v2, c2, hbr = geometries(3, seed=12)
    P1, P2 = np.zeros((3, 6, 6)), np.zeros((3, 6, 6))
    P1[:, :3, :3], P2[:, :3, :3] = c1, c2
    status = np.array([[0, 0], [0, -1], [0, 0]])
    enc = Encounters(rr1=r1, vv1=v1, rr2=r2, vv2=v2, P1=P1, P2=P2, status=status,
                     tca=np.zeros(3))
    expected = probability(r1, v1, c1, r2, v2, c2, hbr)
    pc = enc.probability(hbr)
    np.testing.assert_array_equal(pc[[0, 2]], expected[[0, 2]])
    assert np.isnan(pc[1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        full = enc.probability(0.02, method="chan", full=True)
    assert full.method == "chan" and not full.repaired[1] and np.isnan(full.pc[1])


def test_no_approaches():
    empty = np.zeros((0, 3))
    pc = probability(empty, empty, np.zeros((0, 3, 3)), empty, empty, np.zeros((0, 3, 3)), 0.01)
    assert pc.shape == (0,)
