"""The reference workload of DESIGN.md: a LEO debris-like cloud, two-body + J2, one day.

Imported by the benchmark scripts; the target is whatever HAPSIRA_TARGET says.
"""

import math

import numpy as np

from hapsira_core.jit import hjit
from hapsira_cowell.perturbations import J2_perturbation, two_body

K = 398600.4418  # km^3/s^2
R = 6378.137  # km
J2 = 1.08262668e-3
DAY = 86400.0
RTOL = 1e-11
ATOL = 1e-12


@hjit
def two_body_j2(t, rr, vv, k, p):
    drr, dvv = two_body(t, rr, vv, k, p)
    a = J2_perturbation(t, rr, vv, k, 1.08262668e-3, 6378.137)
    return drr, (dvv[0] + a[0], dvv[1] + a[1], dvv[2] + a[2])


def leo_cloud(n, seed=0):
    """n LEO states (km, km/s): perigee 300-1200 km, e < 0.02, any inclination."""
    # one row of draws per object, so that leo_cloud(n)[:m] == leo_cloud(m)
    u = np.random.default_rng(seed).random((n, 6))
    rp = R + 300.0 + 900.0 * u[:, 0]
    ecc = 0.02 * u[:, 1]
    p = rp * (1 + ecc)
    inc = np.arccos(2 * u[:, 2] - 1)
    raan, argp, nu = 2 * math.pi * u[:, 3:].T
    r_pqw = np.stack([np.cos(nu), np.sin(nu), np.zeros(n)], -1) * (p / (1 + ecc * np.cos(nu)))[:, None]
    v_pqw = np.stack([-np.sin(nu), ecc + np.cos(nu), np.zeros(n)], -1) * np.sqrt(K / p)[:, None]
    cO, sO, ci, si, cw, sw = np.cos(raan), np.sin(raan), np.cos(inc), np.sin(inc), np.cos(argp), np.sin(argp)
    rot = np.stack([
        np.stack([cO * cw - sO * sw * ci, -cO * sw - sO * cw * ci, sO * si], -1),
        np.stack([sO * cw + cO * sw * ci, -sO * sw + cO * cw * ci, -cO * si], -1),
        np.stack([sw * si, cw * si, ci], -1),
    ], 1)
    return np.einsum("nij,nj->ni", rot, r_pqw), np.einsum("nij,nj->ni", rot, v_pqw)


def scipy_rhs(t, y):
    """The same model in numpy, for scipy's solve_ivp."""
    x, yy, z = y[:3]
    r = math.sqrt(x * x + yy * yy + z * z)
    z2 = (z / r) ** 2
    factor = 1.5 * K * J2 * R * R / r ** 5
    c = -K / r ** 3
    return np.array([y[3], y[4], y[5],
                     c * x + factor * x * (5 * z2 - 1),
                     c * yy + factor * yy * (5 * z2 - 1),
                     c * z + factor * z * (5 * z2 - 3)])
