"""The workloads of the benchmarks, one definition each; the target is whatever HAPSIRA_TARGET says.

* the reference workload of DESIGN.md: a LEO debris-like cloud (`leo_cloud`),
  two-body + J2 (`two_body_j2`), one day, rtol 1e-11, atol 1e-12; the same
  model for scipy (`scipy_rhs`) and JAX (`jax_rhs`);
* its variant with exponential drag and a re-entry at 100 km (`drag_cloud`,
  `two_body_j2_drag`, `scipy_rhs_drag`);
* the non-orbit ensembles with per-object parameters (`ENSEMBLES`, `problem`):
  Van der Pol (mu per object) and Lotka-Volterra (four rates per object), as
  hjit functions (`van_der_pol`, `lotka_volterra`: importable, so that their
  kernels can be cached), for scipy (`ensemble_rhs`) and for JAX
  (`ensemble_jax_rhs`).

(``textbook_f`` is the plain ``f(t, y)`` form of the reference model for
``hapsira_core.ivp.solve_ivp``: the right-hand side as a scipy user writes it.)
"""

import math

import numpy as np

from hapsira_core.jit import hjit
from hapsira_cowell.constants import J2_EARTH as J2
from hapsira_cowell.constants import K_EARTH as K
from hapsira_cowell.constants import R_EARTH as R
from hapsira_cowell.inputs.elements import from_classical
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


# --- the plain solve_ivp form of the reference model ---

@hjit
def textbook_f(t, y, p):
    """Two-body + J2 on a flat state ``y = (x, y, z, vx, vy, vz)``, for ``solve_ivp``."""
    r2 = y[0] * y[0] + y[1] * y[1] + y[2] * y[2]
    r = math.sqrt(r2)
    z2 = y[2] * y[2] / r2
    c = -398600.4418 / (r2 * r)
    f = 1.5 * 398600.4418 * 1.08262668e-3 * 6378.137 * 6378.137 / (r2 * r2 * r)
    return (y[3], y[4], y[5], c * y[0] + f * y[0] * (5 * z2 - 1),
            c * y[1] + f * y[1] * (5 * z2 - 1), c * y[2] + f * y[2] * (5 * z2 - 3))


@hjit
def textbook_cowell(t, rr, vv, k, p):
    """Two-body + J2 in ``cowell``'s form as a textbook writes it: ``r**3``, ``r**5``,
    a division per term (issue 29's "as written" right-hand side)."""
    x, y, z = rr
    r = math.sqrt(x * x + y * y + z * z)
    r3 = r**3
    z2 = z * z / (r * r)
    f = 1.5 * k * 1.08262668e-3 * 6378.137 * 6378.137 / r**5
    return vv, (-k * x / r3 + f * x * (5 * z2 - 1), -k * y / r3 + f * y * (5 * z2 - 1),
                -k * z / r3 + f * z * (5 * z2 - 3))


# --- ensembles: N objects, each with its own parameters (params rows) ---

ENSEMBLE_RTOL, ENSEMBLE_ATOL = 1e-9, 1e-12
#: time spans of the ensembles
SPANS = {"van_der_pol": (0.0, 20.0), "lotka_volterra": (0.0, 15.0)}


def problem(name, n, seed=0):
    """Initial states (N, 2) and params (N, P) of ``n`` objects of ensemble ``name``."""
    rng = np.random.default_rng(seed)
    if name == "van_der_pol":
        y0 = np.column_stack([rng.uniform(0.5, 2.5, n), rng.uniform(-1.0, 1.0, n)])
        return y0, rng.uniform(0.5, 3.0, (n, 1))
    y0 = rng.uniform(1.0, 10.0, (n, 2))
    params = np.column_stack([rng.uniform(1.0, 2.0, n), rng.uniform(0.5, 1.5, n),
                              rng.uniform(2.0, 4.0, n), rng.uniform(0.5, 1.5, n)])
    return y0, params


@hjit
def van_der_pol(t, y, p):
    return (y[1], p[0] * (1.0 - y[0] * y[0]) * y[1] - y[0])


@hjit
def lotka_volterra(t, y, p):
    return (p[0] * y[0] - p[1] * y[0] * y[1], -p[2] * y[1] + p[3] * y[0] * y[1])


ENSEMBLES = {"van_der_pol": van_der_pol, "lotka_volterra": lotka_volterra}


def ensemble_rhs(name):
    """``rhs(t, y, p)`` of ensemble ``name`` in plain Python, for scipy (``args=(p,)``)."""
    if name == "van_der_pol":
        return lambda t, y, p: [y[1], p[0] * (1.0 - y[0] * y[0]) * y[1] - y[0]]
    return lambda t, y, p: [p[0] * y[0] - p[1] * y[0] * y[1], -p[2] * y[1] + p[3] * y[0] * y[1]]


def ensemble_jax_rhs(name):
    """``rhs(t, y, p)`` of ensemble ``name`` in JAX, for diffrax."""
    import jax.numpy as jnp

    def rhs(t, y, p):
        if name == "van_der_pol":
            return jnp.stack([y[1], p[0] * (1.0 - y[0] * y[0]) * y[1] - y[0]])
        return jnp.stack([p[0] * y[0] - p[1] * y[0] * y[1], -p[2] * y[1] + p[3] * y[0] * y[1]])
    return rhs


# --- stiff ensembles (issue 31): Robertson and Van der Pol mu ~ 1000, per-object parameters;
# HIRES (issue 53), a problem the stiff methods' defaults were not chosen on ---

#: time spans of the stiff ensembles: Robertson to t = 1e3 (the docs' Rodas5P example),
#: Van der Pol mu ~ 1000 to t = 2000 (Hairer & Wanner II, Sec. IV.10: over one period,
#: 1.614 mu, with its two fast jumps), HIRES to t = 321.8122 (Hairer & Wanner II, Sec. IV.10)
STIFF_SPANS = {"robertson": (0.0, 1e3), "van_der_pol_stiff": (0.0, 2000.0),
               "hires": (0.0, 321.8122)}
#: benchmark tolerances (the BDF tests' on the same problems)
STIFF_TOL = {"robertson": (1e-6, 1e-10), "van_der_pol_stiff": (1e-6, 1e-8),
             "hires": (1e-6, 1e-9)}
#: the reference's tolerances (scipy Radau): rtol 1e-10, atol well under each problem's scale
STIFF_REF_TOL = {"robertson": (1e-10, 1e-16), "van_der_pol_stiff": (1e-10, 1e-12),
                 "hires": (1e-10, 1e-14)}
#: Robertson's rate constants (Hairer & Wanner II, Sec. IV.10, eq. 10.3)
ROBERTSON_RATES = (0.04, 1e4, 3e7)
#: HIRES's eight independent rate constants (Schaefer 1975; Hairer & Wanner II, Sec. IV.10):
#: k1 1.71, k2 0.43, k3 8.32, k4 0.0007, k5 0.035, k6 280, k7 0.69, k8 1.81; the test set's
#: other constants are their sums (8.75 = k3 + k2, 10.03 = k3 + k1, 1.12 = k2 + k7,
#: 1.745 = k1 + k5), kept so whatever the draws
HIRES_RATES = (1.71, 0.43, 8.32, 0.0007, 0.035, 280.0, 0.69, 1.81)
HIRES_Y0 = (1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0057)


def stiff_problem(name, n, seed=0, spread=0.2):
    """Initial states (N, n) and params (N, P) of ``n`` objects of stiff ensemble ``name``:
    each parameter drawn uniformly within +-``spread`` of its nominal value (Robertson: the
    three rate constants, y0 = (1, 0, 0); Van der Pol: mu around 1000, y0 = (2, 0); HIRES:
    its eight rate constants, y0 of the test set)."""
    rng = np.random.default_rng(seed)
    if name == "robertson":
        params = np.array(ROBERTSON_RATES) * rng.uniform(1 - spread, 1 + spread, (n, 3))
        return np.tile([1.0, 0.0, 0.0], (n, 1)), params
    if name == "hires":
        params = np.array(HIRES_RATES) * rng.uniform(1 - spread, 1 + spread, (n, 8))
        return np.tile(HIRES_Y0, (n, 1)), params
    return np.tile([2.0, 0.0], (n, 1)), 1000.0 * rng.uniform(1 - spread, 1 + spread, (n, 1))


@hjit
def robertson(t, y, p):
    """Robertson's kinetics with the rate constants ``p = (k1, k2, k3)``."""
    return (-p[0] * y[0] + p[1] * y[1] * y[2],
            p[0] * y[0] - p[1] * y[1] * y[2] - p[2] * y[1] * y[1],
            p[2] * y[1] * y[1])


@hjit
def hires(t, y, p):
    """HIRES (Schaefer's plant physiology model, 8 species) with the rate constants
    ``p = (k1, ..., k8)`` of ``HIRES_RATES``; its Python body (``hires.py_func``) is scipy's
    and JAX's right-hand side too."""
    r = p[5] * y[5] * y[7]
    return (-p[0] * y[0] + p[1] * y[1] + p[2] * y[2] + p[3],
            p[0] * y[0] - (p[2] + p[1]) * y[1],
            -(p[2] + p[0]) * y[2] + p[1] * y[3] + p[4] * y[4],
            p[2] * y[1] + p[0] * y[2] - (p[1] + p[6]) * y[3],
            -(p[0] + p[4]) * y[4] + p[1] * y[5] + p[1] * y[6],
            -r + p[6] * y[3] + p[0] * y[4] - p[1] * y[5] + p[6] * y[6],
            r - p[7] * y[6],
            -r + p[7] * y[6])


STIFF = {"robertson": robertson, "van_der_pol_stiff": van_der_pol, "hires": hires}


def stiff_scipy(name, p):
    """(rhs(t, y), jac(t, y)) of stiff ensemble ``name`` for one object's params ``p``, numpy,
    for scipy (the exact Jacobian: scipy's strongest setting, as the BDF tests give it)."""
    if name == "robertson":
        k1, k2, k3 = (float(x) for x in p)

        def rhs(t, y):
            return np.array([-k1 * y[0] + k2 * y[1] * y[2],
                             k1 * y[0] - k2 * y[1] * y[2] - k3 * y[1] * y[1],
                             k3 * y[1] * y[1]])

        def jac(t, y):
            return np.array([[-k1, k2 * y[2], k2 * y[1]],
                             [k1, -k2 * y[2] - 2 * k3 * y[1], -k2 * y[1]],
                             [0.0, 2 * k3 * y[1], 0.0]])
        return rhs, jac
    if name == "hires":
        k = [float(x) for x in p]

        def rhs(t, y):
            return np.array(hires.py_func(t, y, k))

        def jac(t, y):
            J = np.zeros((8, 8))
            J[0, :3] = -k[0], k[1], k[2]
            J[1, :2] = k[0], -(k[2] + k[1])
            J[2, 2:5] = -(k[2] + k[0]), k[1], k[4]
            J[3, 1:4] = k[2], k[0], -(k[1] + k[6])
            J[4, 4:7] = -(k[0] + k[4]), k[1], k[1]
            J[5, 3:8] = k[6], k[0], -k[1] - k[5] * y[7], k[6], -k[5] * y[5]
            J[6, 5:8] = k[5] * y[7], -k[7], k[5] * y[5]
            J[7, 5:8] = -k[5] * y[7], k[7], -k[5] * y[5]
            return J
        return rhs, jac
    mu = float(p[0])

    def rhs(t, y):
        return np.array([y[1], mu * (1.0 - y[0] * y[0]) * y[1] - y[0]])

    def jac(t, y):
        return np.array([[0.0, 1.0], [-2.0 * mu * y[0] * y[1] - 1.0, mu * (1.0 - y[0] * y[0])]])
    return rhs, jac


def stiff_jax_rhs(name):
    """``rhs(t, y, p)`` of stiff ensemble ``name`` in JAX, for diffrax."""
    import jax.numpy as jnp

    def rhs(t, y, p):
        if name == "robertson":
            return jnp.stack([-p[0] * y[0] + p[1] * y[1] * y[2],
                              p[0] * y[0] - p[1] * y[1] * y[2] - p[2] * y[1] * y[1],
                              p[2] * y[1] * y[1]])
        if name == "hires":
            return jnp.stack(hires.py_func(t, y, p))
        return jnp.stack([y[1], p[0] * (1.0 - y[0] * y[0]) * y[1] - y[0]])
    return rhs
