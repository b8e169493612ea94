"""Accelerations for Cowell's method, as :func:`~hapsira_core.jit.hjit` functions.

Units everywhere: km, s, kg (so GM in km^3/s^2, accelerations in km/s^2).
Combine them in your own right-hand side::

    @hjit
    def f(t, rr, vv, k, p):
        drr, dvv = two_body(t, rr, vv, k, p)
        a = J2_perturbation(t, rr, vv, k, 1.08262668e-3, 6378.137)
        return drr, (dvv[0] + a[0], dvv[1] + a[1], dvv[2] + a[2])
"""

import math

from hapsira_core.jit import hjit
from hapsira_core.vec import norm

from .atmosphere import density_us76

__all__ = ["two_body", "J2_perturbation", "J3_perturbation", "atmospheric_drag",
           "atmospheric_drag_exponential", "atmospheric_drag_us76", "third_body",
           "radiation_pressure", "shadow_function"]


@hjit
def two_body(t, rr, vv, k, p):
    """Keplerian right-hand side: ``(drr, dvv) = (vv, -k rr / r^3)``.

    ``rr`` km, ``vv`` km/s, ``k`` km^3/s^2; ``t`` and ``p`` are unused. This
    is the default ``f`` of :func:`hapsira_cowell.cowell`.
    """
    r = norm(rr)
    c = -k / (r * r * r)
    return vv, (c * rr[0], c * rr[1], c * rr[2])


@hjit
def J2_perturbation(t, rr, vv, k, J2, R):
    """Acceleration (km/s^2) from the attractor's oblateness (zonal J2).

    ``J2``: dimensionless second zonal harmonic; ``R``: the attractor's
    equatorial radius, km; ``rr`` in the attractor's equatorial frame, km.
    Curtis, *Orbital Mechanics for Engineering Students*, eq. 12.30.
    """
    r = norm(rr)
    z2 = (rr[2] / r) ** 2
    factor = 1.5 * k * J2 * R * R / r ** 5
    return (factor * rr[0] * (5.0 * z2 - 1.0),
            factor * rr[1] * (5.0 * z2 - 1.0),
            factor * rr[2] * (5.0 * z2 - 3.0))


@hjit
def J3_perturbation(t, rr, vv, k, J3, R):
    """Acceleration (km/s^2) from the attractor's third zonal harmonic J3.

    ``J3`` dimensionless (Earth: -2.5327e-6), ``R`` equatorial radius km,
    ``rr`` km in the attractor's equatorial frame. Vallado, *Fundamentals of
    Astrodynamics and Applications*, 4th ed., eq. 8-30 (as poliastro writes it:
    ``0.5 k J3 R^3 / r^5`` times a polynomial in ``cos(phi) = z / r``).
    """
    r = norm(rr)
    c = rr[2] / r
    factor = 0.5 * k * J3 * R ** 3 / r ** 5
    horizontal = 5.0 / r * (7.0 * c ** 3 - 3.0 * c)
    return (factor * rr[0] * horizontal,
            factor * rr[1] * horizontal,
            factor * 3.0 * (35.0 / 3.0 * c ** 4 - 10.0 * c ** 2 + 1.0))


@hjit
def atmospheric_drag(t, rr, vv, k, C_D, A_over_m, rho):
    """Drag acceleration (km/s^2) for a given density, along the inertial velocity.

    ``a = -0.5 rho C_D (A/m) |v| v``: ``C_D`` dimensionless, ``A_over_m``
    km^2/kg, ``rho`` kg/km^3 (1 kg/m^3 = 1e9 kg/km^3), ``vv`` km/s. The
    atmosphere is taken at rest in the inertial frame, as poliastro does.
    """
    v = norm(vv)
    c = -0.5 * rho * C_D * A_over_m * v
    return (c * vv[0], c * vv[1], c * vv[2])


@hjit
def atmospheric_drag_exponential(t, rr, vv, k, R, C_D, A_over_m, H0, rho0):
    """Drag (km/s^2) in an exponential atmosphere ``rho0 exp(-(r - R) / H0)``.

    ``R`` km (where the density is ``rho0``, kg/km^3), ``H0`` scale height km,
    ``C_D`` dimensionless, ``A_over_m`` km^2/kg. See :func:`atmospheric_drag`.
    """
    rho = rho0 * math.exp(-(norm(rr) - R) / H0)
    return atmospheric_drag(t, rr, vv, k, C_D, A_over_m, rho)


@hjit
def atmospheric_drag_us76(t, rr, vv, k, R, C_D, A_over_m):
    """Drag (km/s^2) with the U.S. Standard Atmosphere 1976 density at ``|r| - R``.

    ``R`` km (altitude above a sphere of that radius), ``C_D`` dimensionless,
    ``A_over_m`` km^2/kg. See :func:`hapsira_cowell.atmosphere.density_us76`.
    """
    rho = density_us76(norm(rr) - R)
    return atmospheric_drag(t, rr, vv, k, C_D, A_over_m, rho)


@hjit
def third_body(t, rr, vv, k, k_third, r_third):
    """Acceleration (km/s^2) from a third body, direct minus indirect term.

    ``k_third`` its GM (km^3/s^2), ``r_third`` its position relative to the
    attractor (km, a 3-tuple, e.g. from :func:`hapsira_cowell.ephem.position`).
    ``a = k3 ((r3 - r) / |r3 - r|^3 - r3 / |r3|^3)`` (Vallado eq. 8-35).
    """
    dx = r_third[0] - rr[0]
    dy = r_third[1] - rr[1]
    dz = r_third[2] - rr[2]
    d3 = norm((dx, dy, dz)) ** 3
    s3 = norm(r_third) ** 3
    return (k_third * (dx / d3 - r_third[0] / s3),
            k_third * (dy / d3 - r_third[1] / s3),
            k_third * (dz / d3 - r_third[2] / s3))


@hjit
def shadow_function(rr, r_star, R, R_star):
    """Fraction of the star's disc visible from ``rr`` (1 lit, 0 umbra), conical model.

    Montenbruck & Gill, *Satellite Orbits*, Sec. 3.4.2: the apparent discs of
    the star (radius ``R_star``) and the attractor (``R``) seen from the
    object, and their overlap. ``rr``, ``r_star`` km relative to the attractor.
    """
    sx = r_star[0] - rr[0]
    sy = r_star[1] - rr[1]
    sz = r_star[2] - rr[2]
    d_star = norm((sx, sy, sz))
    r = norm(rr)
    a = math.asin(min(1.0, R_star / d_star))  # apparent radius of the star
    b = math.asin(min(1.0, R / r))  # apparent radius of the attractor
    cos_c = -(rr[0] * sx + rr[1] * sy + rr[2] * sz) / (r * d_star)
    c = math.acos(max(-1.0, min(1.0, cos_c)))  # angle between their centres
    if c >= a + b:
        return 1.0
    if c <= b - a:
        return 0.0
    if c <= a - b:
        return 1.0 - (b * b) / (a * a)
    x = (c * c + a * a - b * b) / (2.0 * c)
    y = math.sqrt(max(0.0, a * a - x * x))
    area = a * a * math.acos(x / a) + b * b * math.acos((c - x) / b) - c * y
    return 1.0 - area / (math.pi * a * a)


@hjit
def radiation_pressure(t, rr, vv, k, R, C_R, A_over_m, Wdivc_s, r_star):
    """Solar radiation pressure (km/s^2), with the conical shadow of the attractor.

    ``R`` attractor radius km, ``C_R`` reflectivity coefficient, ``A_over_m``
    km^2/kg, ``Wdivc_s`` the star's luminosity over the speed of light, W/(km/s)
    (kg km/s^2; Sun: 3.828e26 W / 299792.458 km/s = 1.2769e21), ``r_star``
    the star's position relative to the attractor (km). The pressure at
    distance d is ``Wdivc_s / (4 pi d^2)``, pushing away from the star, scaled
    by the visible fraction of the Sun's disc (radius 696000 km) from
    :func:`shadow_function`, as in Curtis, *Orbital Mechanics*, eq. 10.106.
    """
    sx = rr[0] - r_star[0]
    sy = rr[1] - r_star[1]
    sz = rr[2] - r_star[2]
    d = norm((sx, sy, sz))
    nu = shadow_function(rr, r_star, R, 696000.0)
    c = nu * C_R * A_over_m * Wdivc_s / (4.0 * math.pi * d * d) / d * 1e-6
    return (c * sx, c * sy, c * sz)
