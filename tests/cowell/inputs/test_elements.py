"""Elements to states (hapsira_cowell.inputs.elements): the hjit conversion on the active target
against an independent numpy rotation (tests/reference.py) and against each other."""

import math

import numpy as np
import pytest
from astropy import units as u

from hapsira_core import settings
from hapsira_cowell.inputs.elements import from_classical, from_equinoctial
from reference import K_EARTH, coe_to_rv

SIMULATED = settings.TARGET == "cuda" and settings.cuda_simulator_enabled()
N = 12 if SIMULATED else 400  # the simulator runs each object in Python


def random_elements(n, seed):
    """Varied orbits: LEO to GEO, circular to highly eccentric, prograde and retrograde,
    and hyperbolas with anomalies inside their asymptotes."""
    rng = np.random.default_rng(seed)
    ecc = np.concatenate([rng.uniform(0.0, 0.95, n - n // 4), rng.uniform(1.05, 3.0, n // 4)])
    p = rng.uniform(6700.0, 45000.0, n)
    inc = rng.uniform(0.0, math.pi, n)
    raan, argp = rng.uniform(0.0, 2 * math.pi, (2, n))
    limit = np.where(ecc > 1, np.arccos(-1 / np.maximum(ecc, 1)) * 0.95, math.pi)
    nu = rng.uniform(-1.0, 1.0, n) * limit
    return p, ecc, inc, raan, argp, nu


def reference(p, ecc, inc, raan, argp, nu, k=K_EARTH):
    states = [coe_to_rv(k, *row) for row in zip(p, ecc, inc, raan, argp, nu)]
    return np.array([s[0] for s in states]), np.array([s[1] for s in states])


def test_classical_matches_the_reference_rotation():
    p, ecc, inc, raan, argp, nu = random_elements(N, seed=1)
    r, v = from_classical(K_EARTH, ecc=ecc, inc=inc, raan=raan, argp=argp, nu=nu, p=p)
    r_ref, v_ref = reference(p, ecc, inc, raan, argp, nu)
    assert r.shape == v.shape == (N, 3) and r.dtype == np.float64
    # equal to rounding (cuda may fuse multiply-adds)
    np.testing.assert_allclose(r, r_ref, rtol=1e-13, atol=1e-9)
    np.testing.assert_allclose(v, v_ref, rtol=1e-13, atol=1e-12)
    # physics: |r| = p / (1 + e cos nu) and the specific angular momentum sqrt(k p)
    np.testing.assert_allclose(np.linalg.norm(r, axis=1), p / (1 + ecc * np.cos(nu)),
                               rtol=1e-13)
    np.testing.assert_allclose(np.linalg.norm(np.cross(r, v), axis=1), np.sqrt(K_EARTH * p),
                               rtol=1e-13)


def test_semi_major_axis_quantities_and_scalars():
    p, ecc, inc, raan, argp, nu = random_elements(N, seed=2)
    a = p / (1 - ecc ** 2)  # negative for the hyperbolas
    r_a, v_a = from_classical(K_EARTH, a, ecc, inc, raan, argp, nu)
    r_p, v_p = from_classical(K_EARTH, ecc=ecc, inc=inc, raan=raan, argp=argp, nu=nu, p=p)
    np.testing.assert_allclose(r_a, r_p, rtol=1e-12)
    np.testing.assert_allclose(v_a, v_p, rtol=1e-12)
    # Quantities in other units: GM in m^3/s^2, a in m, angles in degrees
    r_q, v_q = from_classical(K_EARTH * 1e9 * u.m ** 3 / u.s ** 2, a * 1000 * u.m,
                              ecc * u.one, np.degrees(inc) * u.deg, np.degrees(raan) * u.deg,
                              np.degrees(argp) * u.deg, np.degrees(nu) * u.deg)
    np.testing.assert_allclose(r_q, r_a, rtol=1e-12)
    np.testing.assert_allclose(v_q, v_a, rtol=1e-12)
    # all scalars: one object, (3,); scalars broadcast against arrays
    r1, v1 = from_classical(K_EARTH, a[3], ecc[3], inc[3], raan[3], argp[3], nu[3])
    assert r1.shape == v1.shape == (3,)
    np.testing.assert_allclose(r1, r_a[3], rtol=1e-14)
    r_b, _ = from_classical(K_EARTH, 7000.0, 0.01, inc[:5], 0.3, 1.1, nu[:5])
    r_ref, _ = reference(np.full(5, 7000.0 * (1 - 0.01 ** 2)), np.full(5, 0.01), inc[:5],
                         np.full(5, 0.3), np.full(5, 1.1), nu[:5])
    np.testing.assert_allclose(r_b, r_ref, rtol=1e-13)


def test_parabola_needs_p():
    r, v = from_classical(K_EARTH, ecc=1.0, inc=0.4, raan=1.0, argp=2.0, nu=2.5, p=9000.0)
    # on a parabola the speed is the escape speed
    np.testing.assert_allclose(np.linalg.norm(v), math.sqrt(2 * K_EARTH / np.linalg.norm(r)),
                               rtol=1e-13)
    with pytest.raises(ValueError, match="a: expected .*give p for ecc = 1"):
        from_classical(K_EARTH, 9000.0, 1.0, 0.4, 1.0, 2.0, 2.5)


def test_equinoctial_matches_classical():
    p, ecc, inc, raan, argp, nu = random_elements(N, seed=3)
    inc = np.minimum(inc, 3.0)  # the modified equinoctial elements are singular at 180 deg
    f, g = ecc * np.cos(argp + raan), ecc * np.sin(argp + raan)
    h, kk = np.tan(inc / 2) * np.cos(raan), np.tan(inc / 2) * np.sin(raan)
    r, v = from_equinoctial(K_EARTH, p, f, g, h, kk, raan + argp + nu)
    r_ref, v_ref = reference(p, ecc, inc, raan, argp, nu)
    np.testing.assert_allclose(r, r_ref, rtol=1e-11, atol=1e-8)
    np.testing.assert_allclose(v, v_ref, rtol=1e-11, atol=1e-11)
    r_q, _ = from_equinoctial(K_EARTH * u.km ** 3 / u.s ** 2, p * u.km, f, g, h, kk,
                              np.degrees(raan + argp + nu) * u.deg)
    np.testing.assert_allclose(r_q, r, rtol=1e-12)


@pytest.mark.parametrize("call, error, words", [
    (lambda: from_classical(K_EARTH, 7000.0, -0.1, 0.1, 0.0, 0.0, 0.0), ValueError, "ecc: "),
    (lambda: from_classical(K_EARTH, -7000.0, 0.1, 0.1, 0.0, 0.0, 0.0), ValueError, "a: "),
    (lambda: from_classical(K_EARTH, 7000.0, 1.5, 0.1, 0.0, 0.0, 0.0), ValueError, "a < 0"),
    (lambda: from_classical(K_EARTH, -7000.0, 2.0, 0.1, 0.0, 0.0, 3.0), ValueError,
     "nu: 3.0 rad is beyond the asymptotes"),
    (lambda: from_classical(-1.0, 7000.0, 0.1, 0.1, 0.0, 0.0, 0.0), ValueError, "k: "),
    (lambda: from_classical(K_EARTH, 7000.0, 0.1, [0.1, np.nan], 0.0, 0.0, 0.0), ValueError,
     "inc: expected finite numbers, got nan at index 1"),
    (lambda: from_classical(K_EARTH, 7000.0 * u.s, 0.1, 0.1, 0.0, 0.0, 0.0), ValueError,
     "a: expected a quantity in km"),
    (lambda: from_classical(K_EARTH, [7000.0, 8000.0], 0.1, [0.1, 0.2, 0.3], 0, 0, 0),
     ValueError, "elements: expected scalars or arrays of one length"),
    (lambda: from_classical(K_EARTH, 7000.0, 0.1, 0.1, 0.0, 0.0), TypeError, "missing element"),
    (lambda: from_classical(K_EARTH, 7000.0, 0.1, 0.1, 0, 0, 0, p=7000.0), TypeError,
     "exactly one of a"),
    (lambda: from_equinoctial(K_EARTH, -1.0, 0.0, 0.0, 0.0, 0.0, 0.0), ValueError, "p: "),
    (lambda: from_equinoctial(K_EARTH, 7000.0, 2.0, 0.0, 0.0, 0.0, math.pi), ValueError, "L: "),
])
def test_bad_elements_name_the_argument(call, error, words):
    with pytest.raises(error, match=words):
        call()
