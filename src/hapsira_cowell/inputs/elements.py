"""Orbital elements to Cartesian states, written once as `hjit` code for every target.

`coe2rv` (classical elements) and `mee2rv` (modified equinoctial elements) are
device functions, usable inside your own right-hand sides and events;
`from_classical` and `from_equinoctial` run them over arrays of elements (one
object per element set) on the active target and return ``r0``, ``v0`` for
`cowell`. Angles in radians (or astropy Quantities in any angle unit),
lengths in km, GM in km^3/s^2.
"""

import math

import numpy as np
from astropy import units as u

from hapsira_core.jit import Arg, ObjectKernel, hjit

from ..units import to_value

__all__ = ["coe2rv", "mee2rv", "from_classical", "from_equinoctial"]


@hjit
def coe2rv(k, p, ecc, inc, raan, argp, nu):
    """Position (km) and velocity (km/s) 3-tuples from classical elements.

    ``k`` GM (km^3/s^2), ``p`` semi-latus rectum (km), ``ecc`` eccentricity,
    ``inc`` inclination, ``raan`` right ascension of the ascending node,
    ``argp`` argument of periapsis, ``nu`` true anomaly (rad). The state in
    the perifocal frame, rotated by (raan, inc, argp) into the frame the
    elements refer to (Vallado, *Fundamentals of Astrodynamics*, alg. 10).
    """
    cos_nu = math.cos(nu)
    sin_nu = math.sin(nu)
    radius = p / (1.0 + ecc * cos_nu)
    speed = math.sqrt(k / p)
    x, y = radius * cos_nu, radius * sin_nu  # perifocal position
    vx, vy = -speed * sin_nu, speed * (ecc + cos_nu)  # perifocal velocity
    c_raan, s_raan = math.cos(raan), math.sin(raan)
    c_inc, s_inc = math.cos(inc), math.sin(inc)
    c_argp, s_argp = math.cos(argp), math.sin(argp)
    # the first two columns of R3(-raan) R1(-inc) R3(-argp); the perifocal z is 0
    m11 = c_raan * c_argp - s_raan * s_argp * c_inc
    m12 = -c_raan * s_argp - s_raan * c_argp * c_inc
    m21 = s_raan * c_argp + c_raan * s_argp * c_inc
    m22 = -s_raan * s_argp + c_raan * c_argp * c_inc
    m31 = s_argp * s_inc
    m32 = c_argp * s_inc
    return ((m11 * x + m12 * y, m21 * x + m22 * y, m31 * x + m32 * y),
            (m11 * vx + m12 * vy, m21 * vx + m22 * vy, m31 * vx + m32 * vy))


@hjit
def mee2rv(k, p, f, g, h, kk, L):
    """Position (km) and velocity (km/s) 3-tuples from modified equinoctial elements.

    ``p`` semi-latus rectum (km); ``f = e cos(argp + raan)``, ``g = e sin(argp
    + raan)``; ``h = tan(inc/2) cos(raan)``, ``kk = tan(inc/2) sin(raan)`` (the
    element usually called k: here k is GM, km^3/s^2, as everywhere in this
    package); ``L = raan + argp + nu`` true longitude (rad). Walker, Ireland
    and Owens (1985); singular only for inc = 180 deg.
    """
    cos_l = math.cos(L)
    sin_l = math.sin(L)
    alpha2 = h * h - kk * kk
    s2 = 1.0 + h * h + kk * kk
    w = 1.0 + f * cos_l + g * sin_l
    radius = p / w
    hk2 = 2.0 * h * kk
    scale_r = radius / s2
    scale_v = -math.sqrt(k / p) / s2
    return ((scale_r * (cos_l + alpha2 * cos_l + hk2 * sin_l),
             scale_r * (sin_l - alpha2 * sin_l + hk2 * cos_l),
             scale_r * 2.0 * (h * sin_l - kk * cos_l)),
            (scale_v * (sin_l + alpha2 * sin_l - hk2 * cos_l + g - hk2 * f + alpha2 * g),
             scale_v * (-cos_l + alpha2 * cos_l + hk2 * sin_l - f + hk2 * g + alpha2 * f),
             scale_v * -2.0 * (h * cos_l + kk * sin_l + f * h + g * kk)))


@hjit
def _classical_row(x, r, v):
    rr, vv = coe2rv(x[0], x[1], x[2], x[3], x[4], x[5], x[6])
    r[0], r[1], r[2] = rr
    v[0], v[1], v[2] = vv


@hjit
def _equinoctial_row(x, r, v):
    rr, vv = mee2rv(x[0], x[1], x[2], x[3], x[4], x[5], x[6])
    r[0], r[1], r[2] = rr
    v[0], v[1], v[2] = vv


def _kernel(row):
    # one row of 7 numbers per object (GM first), two 3-vectors out
    return ObjectKernel(row, [Arg("elements", np.float64, ("seven",)),
                              Arg("r", np.float64, ("three",), output=True),
                              Arg("v", np.float64, ("three",), output=True)])


_CLASSICAL = _kernel(_classical_row)
_EQUINOCTIAL = _kernel(_equinoctial_row)


def _columns(values, units):
    """Broadcast named inputs (Quantities converted) to one (N, 7) float64 table."""
    arrays = [to_value(value, unit, name) for name, value, unit in zip(values, values.values(),
                                                                       units)]
    try:
        arrays = np.broadcast_arrays(*arrays)
    except ValueError:
        shapes = ", ".join(f"{name} {np.shape(a)}" for name, a in zip(values, arrays))
        raise ValueError(f"elements: expected scalars or arrays of one length, got {shapes}") \
            from None
    if arrays[0].ndim > 1:
        raise ValueError(f"elements: expected scalars or 1-D arrays, got shape {arrays[0].shape}")
    for name, array in zip(values, arrays):
        bad = ~np.isfinite(array)
        if bad.any():
            index = int(np.flatnonzero(bad.ravel())[0])
            raise ValueError(f"{name}: expected finite numbers, got {array.ravel()[index]} "
                             f"at index {index}")
    return np.column_stack([np.atleast_1d(a) for a in arrays]), arrays[0].ndim == 0


def _first(mask):
    return int(np.flatnonzero(mask)[0])


def _run(kernel, table, scalar):
    r, v = np.empty((table.shape[0], 3)), np.empty((table.shape[0], 3))
    kernel(np.ascontiguousarray(table), r, v)
    return (r[0], v[0]) if scalar else (r, v)


def from_classical(k, a=None, ecc=None, inc=None, raan=None, argp=None, nu=None, *, p=None):
    """Cartesian states from classical elements: ``(r, v)``, km and km/s.

    Parameters
    ----------
    k : float or Quantity
        GM of the attractor, km^3/s^2.
    a : float, array or Quantity
        Semi-major axis, km (negative for hyperbolas); or give ``p`` instead.
    ecc, inc, raan, argp, nu : float, array or Quantity
        Eccentricity; inclination, right ascension of the ascending node,
        argument of periapsis and true anomaly in rad (Quantities in any
        angle unit).
    p : float, array or Quantity, keyword-only
        Semi-latus rectum, km: instead of ``a``, and needed for parabolas.

    Returns
    -------
    r, v : ndarray
        Positions (km) and velocities (km/s), (N, 3), or (3,) when every
        element is a scalar, in the frame the angles refer to.

    Notes
    -----
    Every element may be a scalar or an (N,) array; they broadcast. The
    conversion runs on the active target (`coe2rv` inside an
    `hapsira_core.jit.ObjectKernel`).
    """
    given = {"ecc": ecc, "inc": inc, "raan": raan, "argp": argp, "nu": nu}
    missing = [name for name, value in given.items() if value is None]
    if missing:
        raise TypeError(f"from_classical: missing element(s) {', '.join(missing)}")
    if (a is None) == (p is None):
        raise TypeError("from_classical: give exactly one of a (semi-major axis) and p "
                        f"(semi-latus rectum), got {'both' if a is not None else 'neither'}")
    size, size_name = (a, "a") if p is None else (p, "p")
    values = {"k": k, size_name: size, **given}
    table, scalar = _columns(values, (u.km ** 3 / u.s ** 2, u.km, u.one, u.rad, u.rad,
                                      u.rad, u.rad))
    gm, length, e, true_anomaly = table[:, 0], table[:, 1], table[:, 2], table[:, 6]
    if (gm <= 0).any():
        raise ValueError(f"k: expected a positive GM, got {gm[_first(gm <= 0)]}")
    if (e < 0).any():
        raise ValueError(f"ecc: expected eccentricities >= 0, got {e[_first(e < 0)]} at index "
                         f"{_first(e < 0)}")
    if p is None:
        wrong = (np.abs(e - 1.0) < 1e-12) | ((e < 1) & (length <= 0)) | ((e > 1) & (length >= 0))
        if wrong.any():
            i = _first(wrong)
            raise ValueError(f"a: expected a > 0 for ecc < 1 and a < 0 for ecc > 1 (give p for "
                             f"ecc = 1), got a = {length[i]} with ecc = {e[i]} at index {i}")
        table[:, 1] = length * (1.0 - e * e)
    elif (length <= 0).any():
        raise ValueError(f"p: expected a positive semi-latus rectum, got "
                         f"{length[_first(length <= 0)]} at index {_first(length <= 0)}")
    beyond = 1.0 + e * np.cos(true_anomaly) <= 0
    if beyond.any():
        i = _first(beyond)
        raise ValueError(f"nu: {true_anomaly[i]} rad is beyond the asymptotes of the "
                         f"hyperbola with ecc = {e[i]} (1 + ecc cos(nu) must be > 0), index {i}")
    return _run(_CLASSICAL, table, scalar)


def from_equinoctial(k, p, f, g, h, kk, L):
    """Cartesian states from modified equinoctial elements: ``(r, v)``, km and km/s.

    ``k`` GM (km^3/s^2); ``p`` semi-latus rectum (km); ``f``, ``g`` the
    eccentricity vector's components (``e cos(argp + raan)``, ``e sin(argp +
    raan)``); ``h``, ``kk`` the node vector's (``tan(inc/2) cos(raan)``,
    ``tan(inc/2) sin(raan)``); ``L`` true longitude (rad, or a Quantity).
    Scalars or (N,) arrays that broadcast; returns (N, 3) arrays (or (3,)).
    Runs `mee2rv` on the active target.
    """
    values = {"k": k, "p": p, "f": f, "g": g, "h": h, "kk": kk, "L": L}
    table, scalar = _columns(values, (u.km ** 3 / u.s ** 2, u.km, u.one, u.one, u.one, u.one,
                                      u.rad))
    if (table[:, 0] <= 0).any():
        raise ValueError(f"k: expected a positive GM, got {table[_first(table[:, 0] <= 0), 0]}")
    if (table[:, 1] <= 0).any():
        i = _first(table[:, 1] <= 0)
        raise ValueError(f"p: expected a positive semi-latus rectum, got {table[i, 1]} at "
                         f"index {i}")
    w = 1.0 + table[:, 2] * np.cos(table[:, 6]) + table[:, 3] * np.sin(table[:, 6])
    if (w <= 0).any():
        i = _first(w <= 0)
        raise ValueError(f"L: {table[i, 6]} rad is beyond the asymptotes of the hyperbola "
                         f"(1 + f cos L + g sin L must be > 0), index {i}")
    return _run(_EQUINOCTIAL, table, scalar)
