"""scipy references and test orbits shared by the test modules."""

import math
import os
from pathlib import Path

import numpy as np
from scipy.integrate import solve_ivp

from hapsira_core import settings

#: The real debris catalogs, read in place beside the repository (``../shared/data``);
#: HAPSIRA_TEST_DATA points elsewhere (e.g. on a GPU machine that has no ../shared).
DATA_DIR = Path(os.environ.get("HAPSIRA_TEST_DATA",
                               Path(__file__).resolve().parents[2] / "shared" / "data"))

K_EARTH = 398600.4418  # km^3/s^2
R_EARTH = 6378.137  # km
J2_EARTH = 1.08262668e-3


#: numba's CUDA simulator interprets every GPU thread in Python: there a test's cost is
#: objects x steps x statements, nothing is compiled (tests/conftest.py's `simulated`)
SIMULATED = settings.TARGET == "cuda" and settings.cuda_simulator_enabled()


def sized(host, simulator):
    """``host`` on the compiled targets, ``simulator`` (smaller: fewer objects, a shorter
    span) under the CUDA simulator. The smaller size must still fail on a wrong answer:
    say in the test why it does."""
    return simulator if SIMULATED else host


def coe_to_rv(k, p, ecc, inc, raan, argp, nu):
    """Position (km) and velocity (km/s) from classical elements (semi-latus rectum p, km)."""
    r_pqw = np.array([math.cos(nu), math.sin(nu), 0.0]) * p / (1 + ecc * math.cos(nu))
    v_pqw = np.array([-math.sin(nu), ecc + math.cos(nu), 0.0]) * math.sqrt(k / p)
    cO, sO, ci, si, cw, sw = (math.cos(raan), math.sin(raan), math.cos(inc), math.sin(inc),
                              math.cos(argp), math.sin(argp))
    rot = np.array([
        [cO * cw - sO * sw * ci, -cO * sw - sO * cw * ci, sO * si],
        [sO * cw + cO * sw * ci, -sO * sw + cO * cw * ci, -cO * si],
        [sw * si, cw * si, ci],
    ])
    return rot @ r_pqw, rot @ v_pqw


def varied_orbits(seed=0):
    """Named (r0, v0) pairs: LEO, SSO, eccentric, Molniya-like, GEO, hyperbolic."""
    rng = np.random.default_rng(seed)
    deg = math.pi / 180
    cases = {
        "leo": (6778.0, 0.001, 51.6),
        "sso": (7078.0, 0.0012, 98.2),
        "eccentric": (11000.0 * (1 - 0.3 ** 2), 0.3, 30.0),
        "molniya": (26600.0 * (1 - 0.74 ** 2), 0.74, 63.4),
        "geo": (42164.0, 0.0002, 0.05),
        "hyperbolic": (7000.0 * (1 + 1.5), 1.5, 20.0),
    }
    orbits = {}
    for name, (p, ecc, inc) in cases.items():
        raan, argp = rng.uniform(0, 2 * math.pi, 2)
        nu = rng.uniform(-0.5, 0.5) if ecc > 1 else rng.uniform(0, 2 * math.pi)
        orbits[name] = coe_to_rv(K_EARTH, p, ecc, inc * deg, raan, argp, nu)
    return orbits


def two_body_rhs(k):
    def fun(t, y):
        r = np.linalg.norm(y[:3])
        return np.concatenate([y[3:], -k * y[:3] / r ** 3])
    return fun


def j2_rhs(k, J2, R):
    def fun(t, y):
        x, yy, z = y[:3]
        r = np.linalg.norm(y[:3])
        z2 = (z / r) ** 2
        factor = 1.5 * k * J2 * R * R / r ** 5
        a = -k * y[:3] / r ** 3 + factor * np.array(
            [x * (5 * z2 - 1), yy * (5 * z2 - 1), z * (5 * z2 - 3)])
        return np.concatenate([y[3:], a])
    return fun


class Reference:
    """scipy's DOP853 for one object: accepted steps, states at tofs, events."""

    def __init__(self, fun, r0, v0, tofs, rtol=1e-11, atol=1e-12, events=()):
        tofs = np.asarray(tofs, dtype=float)
        sol = solve_ivp(fun, (0.0, tofs[-1]), np.concatenate([r0, v0]), method="DOP853",
                        rtol=rtol, atol=atol, dense_output=True, events=list(events) or None)
        self.sol = sol
        self.status = sol.status
        self.nsteps = len(sol.t) - 1
        t_final = sol.t[-1]
        reached = np.sign(tofs[-1] or 1.0) * (tofs - t_final) <= 0
        y = np.full((tofs.size, 6), np.nan)
        if reached.any():
            y[reached] = sol.sol(tofs[reached]).T
        self.rr, self.vv = y[:, :3], y[:, 3:]
        self.t_events = [] if sol.t_events is None else list(sol.t_events)


def relative_error(actual, expected):
    """max |a - e| / |e| over rows of 3-vectors (NaN rows must match exactly)."""
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    assert np.array_equal(np.isnan(actual), np.isnan(expected)), "NaN rows differ"
    ok = ~np.isnan(expected[..., 0])
    if not ok.any():
        return 0.0
    diff = np.linalg.norm(actual[ok] - expected[ok], axis=-1)
    return float(np.max(diff / np.linalg.norm(expected[ok], axis=-1)))
