"""The reference workload of DESIGN.md: a LEO debris-like cloud, two-body + J2, one day.

Imported by the benchmark scripts; the target is whatever HAPSIRA_TARGET says.
"""

import math

import numpy as np

from hapsira_core.jit import hjit
from hapsira_cowell.constants import J2_EARTH as J2
from hapsira_cowell.constants import K_EARTH as K
from hapsira_cowell.constants import R_EARTH as R
from hapsira_cowell.elements import from_classical
from hapsira_cowell.perturbations import J2_perturbation, two_body

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
    ecc = 0.02 * u[:, 1]
    raan, argp, nu = 2 * math.pi * u[:, 3:].T
    return from_classical(K, ecc=ecc, inc=np.arccos(2 * u[:, 2] - 1), raan=raan, argp=argp,
                          nu=nu, p=(R + 300.0 + 900.0 * u[:, 0]) * (1 + ecc))


def jax_rhs(t, y, args):
    """The same model in JAX, for diffrax (jax imported here: only its peers need it)."""
    import jax.numpy as jnp

    r2 = y[0] ** 2 + y[1] ** 2 + y[2] ** 2
    r = jnp.sqrt(r2)
    z2 = y[2] ** 2 / r2
    c = -K / (r2 * r)
    f = 1.5 * K * J2 * R ** 2 / (r2 * r2 * r)
    return jnp.stack([y[3], y[4], y[5], c * y[0] + f * y[0] * (5 * z2 - 1),
                      c * y[1] + f * y[1] * (5 * z2 - 1), c * y[2] + f * y[2] * (5 * z2 - 3)])


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


# --- variant: + exponential-atmosphere drag and a terminal re-entry at 100 km ---
RHO_REF = 0.25  # kg/km^3 (2.5e-10 kg/m^3) at 200 km altitude
H_REF = 200.0  # km
SCALE_HEIGHT = 40.0  # km: a thermosphere-like exponential, smooth for the integrator
C_D = 2.2
REENTRY_ALT = 100.0  # km


@hjit
def two_body_j2_drag(t, rr, vv, k, p):
    """Two-body + J2 + exponential drag; ``p[0]`` = area-to-mass ratio, km^2/kg."""
    drr, dvv = two_body_j2(t, rr, vv, k, p)
    r = math.sqrt(rr[0] * rr[0] + rr[1] * rr[1] + rr[2] * rr[2])
    v = math.sqrt(vv[0] * vv[0] + vv[1] * vv[1] + vv[2] * vv[2])
    rho = 0.25 * math.exp(-(r - 6378.137 - 200.0) / 40.0)
    c = -0.5 * rho * 2.2 * p[0] * v
    return drr, (dvv[0] + c * vv[0], dvv[1] + c * vv[1], dvv[2] + c * vv[2])


def drag_cloud(n, seed=0):
    """LEO states with perigees 130-600 km and area-to-mass ratios 0.001-0.1 m^2/kg
    (returned in km^2/kg as an (n, 1) params array): some re-enter within a day."""
    u = np.random.default_rng(seed + 1000).random((n, 2))
    r0, v0 = leo_cloud(n, seed)
    rp = np.linalg.norm(r0, axis=1)
    # shrink each orbit radially towards a perigee altitude of 130-600 km
    scale = (R + 130.0 + 470.0 * u[:, 0]) / rp
    r0 = r0 * scale[:, None]
    v0 = v0 / np.sqrt(scale)[:, None]
    return r0, v0, (1e-3 * 10 ** (2 * u[:, 1]) * 1e-6)[:, None]


def scipy_rhs_drag(area_to_mass):
    def rhs(t, y):
        d = scipy_rhs(t, y)
        r = math.sqrt(y[0] ** 2 + y[1] ** 2 + y[2] ** 2)
        v = math.sqrt(y[3] ** 2 + y[4] ** 2 + y[5] ** 2)
        c = -0.5 * RHO_REF * math.exp(-(r - R - H_REF) / SCALE_HEIGHT) * C_D * area_to_mass * v
        d[3:] += c * y[3:]
        return d
    return rhs
