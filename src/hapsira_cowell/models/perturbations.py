"""Accelerations for Cowell's method, as `hapsira_core.jit.hjit` functions.

Units everywhere: km, s, kg (so GM in km^3/s^2, accelerations in km/s^2).
Combine them in your own right-hand side::

    @hjit
    def f(t, rr, vv, k, p):                 # p[0]: C_D, p[1]: A/m (km^2/kg)
        drr, dvv = two_body(t, rr, vv, k, p)
        a = J2_perturbation(t, rr, vv, k, J2_EARTH, R_EARTH)
        d = atmospheric_drag_us76(t, rr, vv, k, R_EARTH, p[0], p[1])
        return drr, (dvv[0] + a[0] + d[0], dvv[1] + a[1] + d[1], dvv[2] + a[2] + d[2])

Per-object numbers (C_D, A/m, C_R, ...) come from the params row ``p``;
bodies' positions from ephemeris tables in it (`hapsira_cowell.models.ephem`).
The module's constants (``J2_EARTH``, ...) are compile-time constants.
"""

import math

from hapsira_core.jit import hjit
from hapsira_core.vec import cross, norm, norm_and_inverse_cube

from .atmosphere import density_us76
# the spherical-harmonic field lives in gravity.py (its coefficients and tables)
from .gravity import (EGM96, EGM96_K, EGM96_MAX_DEGREE, EGM96_R, OMEGA_ERA,
                      earth_rotation_angle, gravity_field, spherical_harmonics)
# Constants for the examples and tests (pass them as arguments; per-object
# numbers belong in the params row instead); they live in constants.py.
from ..constants import J2_EARTH, J3_EARTH, K_MOON, K_SUN, R_EARTH, R_SUN, WDIVC_SUN

__all__ = ["two_body", "J2_perturbation", "J3_perturbation", "atmospheric_drag",
           "atmospheric_drag_exponential", "atmospheric_drag_us76", "third_body",
           "radiation_pressure", "shadow_function", "gravity_field", "spherical_harmonics",
           "earth_rotation_angle", "EGM96", "EGM96_K", "EGM96_R", "EGM96_MAX_DEGREE", "OMEGA_ERA",
           "J2_EARTH", "J3_EARTH", "R_EARTH", "K_MOON", "K_SUN", "R_SUN", "WDIVC_SUN"]


@hjit
def two_body(t, rr, vv, k, p):
    """Keplerian right-hand side: ``(drr, dvv) = (vv, -k rr / r^3)``.

    ``rr`` km, ``vv`` km/s, ``k`` km^3/s^2; ``t`` and ``p`` are unused. This
    is the default ``f`` of `hapsira_cowell.cowell()`.
    """
    _, inverse_r3 = norm_and_inverse_cube(rr)
    c = -(k * inverse_r3)  # k * inverse_r3 is shared with the zonal terms
    return vv, (c * rr[0], c * rr[1], c * rr[2])


@hjit
def J2_perturbation(t, rr, vv, k, J2, R):
    """Acceleration (km/s^2) from the attractor's oblateness (zonal J2).

    ``J2``: dimensionless second zonal harmonic; ``R``: the attractor's
    equatorial radius, km; ``rr`` in the attractor's equatorial frame, km.
    Curtis, *Orbital Mechanics for Engineering Students*, eq. 12.30.
    """
    r, inverse_r3 = norm_and_inverse_cube(rr)
    inverse_r2 = r * inverse_r3
    z2 = rr[2] * rr[2] * inverse_r2
    # constants grouped so that the compiler folds them; k / r^3 shared with two_body
    factor = (k * inverse_r3) * (1.5 * J2 * R * R) * inverse_r2
    return (factor * rr[0] * (5.0 * z2 - 1.0),
            factor * rr[1] * (5.0 * z2 - 1.0),
            factor * rr[2] * (5.0 * z2 - 3.0))


@hjit
def J3_perturbation(t, rr, vv, k, J3, R):
    """Acceleration (km/s^2) from the attractor's third zonal harmonic J3.

    ``J3`` dimensionless (Earth: -2.5327e-6), ``R`` equatorial radius km,
    ``k`` km^3/s^2, ``rr`` km in the attractor's equatorial frame (``t``,
    ``vv`` unused). The gradient of the J3 term of the zonal potential,
    ``U3 = -(k / r) J3 (R / r)^3 P3(z / r)``, ``P3(x) = (5 x^3 - 3 x) / 2``:
    ``a = 0.5 k J3 R^3 / r^5 * (5 x / r (7 c^3 - 3 c), 5 y / r (7 c^3 - 3 c),
    3 (35/3 c^4 - 10 c^2 + 1))`` with ``c = z / r`` (the form poliastro
    documents, after Curtis, *Orbital Mechanics for Engineering Students*,
    problem 12.8; Vallado, *Fundamentals of Astrodynamics and Applications*,
    zonal harmonics).
    """
    r, inverse_r3 = norm_and_inverse_cube(rr)
    inverse_r2 = r * inverse_r3
    inverse_r = r * inverse_r2
    c = rr[2] * inverse_r
    factor = (k * inverse_r3) * (0.5 * J3 * R * R * R) * inverse_r2
    horizontal = 5.0 * inverse_r * (7.0 * c * c * c - 3.0 * c)
    return (factor * rr[0] * horizontal,
            factor * rr[1] * horizontal,
            factor * 3.0 * (35.0 / 3.0 * (c * c) * (c * c) - 10.0 * c * c + 1.0))


@hjit
def atmospheric_drag(t, rr, vv, k, C_D, A_over_m, rho):
    """Drag acceleration (km/s^2) for a given density, along the inertial velocity.

    ``a = -0.5 rho C_D (A/m) |v| v`` (Vallado, *Fundamentals of
    Astrodynamics*, atmospheric drag; poliastro's ``atmospheric_drag``):
    ``C_D`` dimensionless, ``A_over_m`` km^2/kg (1 m^2/kg = 1e-6 km^2/kg),
    ``rho`` kg/km^3 (1 kg/m^3 = 1e9 kg/km^3), ``vv`` km/s; ``t``, ``rr``,
    ``k`` unused. The atmosphere is taken at rest in the inertial frame, as
    poliastro does; for a co-rotating one pass the velocity relative to the
    air, ``vv - omega x rr``, as ``vv``.
    """
    v = norm(vv)
    c = -0.5 * rho * C_D * A_over_m * v
    return (c * vv[0], c * vv[1], c * vv[2])


@hjit
def atmospheric_drag_exponential(t, rr, vv, k, R, C_D, A_over_m, H0, rho0):
    """Drag (km/s^2) in an exponential atmosphere ``rho0 exp(-(r - R) / H0)``.

    ``R`` km (the radius where the density is ``rho0``, kg/km^3; poliastro
    uses the attractor's radius and its surface density), ``H0`` scale height
    km, ``C_D`` dimensionless, ``A_over_m`` km^2/kg, ``rr`` km, ``vv`` km/s.
    See `atmospheric_drag()`.
    """
    rho = rho0 * math.exp(-(norm(rr) - R) / H0)
    return atmospheric_drag(t, rr, vv, k, C_D, A_over_m, rho)


@hjit
def atmospheric_drag_us76(t, rr, vv, k, R, C_D, A_over_m):
    """Drag (km/s^2) with the U.S. Standard Atmosphere 1976 density at ``|r| - R``.

    ``R`` km (altitude above a sphere of that radius: the Earth's equatorial
    radius understates the geodetic altitude near the poles by up to 21 km),
    ``C_D`` dimensionless, ``A_over_m`` km^2/kg, ``rr`` km, ``vv`` km/s. See
    `hapsira_cowell.models.atmosphere.density_us76()` and `atmospheric_drag()`.
    """
    rho = density_us76(norm(rr) - R)
    return atmospheric_drag(t, rr, vv, k, C_D, A_over_m, rho)


@hjit
def third_body(t, rr, vv, k, k_third, r_third):
    """Acceleration (km/s^2) from a third body, direct minus indirect term.

    ``a = k3 ((r3 - r) / |r3 - r|^3 - r3 / |r3|^3)``: the pull on the object
    minus the pull on the attractor (whose frame is not inertial).
    Montenbruck & Gill, *Satellite Orbits*, Sec. 3.3 (Sun and Moon as point
    masses); Vallado, *Fundamentals of Astrodynamics*, third-body perturbations.
    ``k_third`` its GM (km^3/s^2; Moon `K_MOON`, Sun `K_SUN`),
    ``r_third`` its position relative to the attractor (km, a 3-tuple, e.g.
    from `hapsira_cowell.models.ephem.position()`), ``rr`` km; ``t``, ``vv``,
    ``k`` unused.
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
    """Fraction of the star's disc visible from ``rr``: 1 lit, 0 umbra, between in penumbra.

    Conical shadow model (Montenbruck & Gill, *Satellite Orbits*, 2000, Sec.
    3.4.2): seen from the object, the star's disc has the angular radius
    ``a = asin(R_star / |r_star - rr|)``, the attractor's ``b = asin(R / |rr|)``,
    their centres are ``c`` apart, and the hidden part is the area of overlap of
    the two discs. ``rr``, ``r_star``: km from the attractor's centre, one
    frame; ``R``, ``R_star``: the attractor's and the star's radii, km.
    (Not the same as `hapsira_cowell.models.events.shadow_angle()`, the signed
    angular distance to the shadow's edge used by the eclipse events; both
    use the same discs, so the fraction leaves 1 (0) exactly where the
    penumbra (umbra) event fires.)
    """
    sx = r_star[0] - rr[0]
    sy = r_star[1] - rr[1]
    sz = r_star[2] - rr[2]
    d_star = norm((sx, sy, sz))
    r = norm(rr)
    a = math.asin(min(1.0, R_star / d_star))  # apparent radius of the star
    b = math.asin(min(1.0, R / r))  # apparent radius of the attractor
    # angle between -rr (towards the attractor) and the star; atan2 keeps it
    # accurate near 0 and pi, and rr x (r_star - rr) = rr x r_star
    c = math.atan2(norm(cross(rr, r_star)),
                   -(rr[0] * sx + rr[1] * sy + rr[2] * sz))
    if c >= a + b:
        return 1.0
    if c <= b - a:
        return 0.0
    if c <= a - b:
        return 1.0 - (b * b) / (a * a)
    x = (c * c + a * a - b * b) / (2.0 * c)
    y = math.sqrt(max(0.0, a * a - x * x))
    area = a * a * math.acos(max(-1.0, min(1.0, x / a))) \
        + b * b * math.acos(max(-1.0, min(1.0, (c - x) / b))) - c * y
    return 1.0 - area / (math.pi * a * a)


@hjit
def radiation_pressure(t, rr, vv, k, R, C_R, A_over_m, Wdivc_s, r_star):
    """Radiation pressure of a star (km/s^2), away from it, in the attractor's conical shadow.

    ``a = nu C_R (A/m) Wdivc_s / d^2 * (rr - r_star) / d``, ``d = |rr - r_star|``
    (Curtis, *Orbital Mechanics for Engineering Students*, solar radiation
    pressure, ``p = -nu (S/c) (C_R A / m) u``, the section poliastro cites as
    12.9; the flux falls off as 1/d^2). ``t``, ``vv``, ``k`` unused.

    * ``R``: the attractor's radius, km (its shadow);
    * ``C_R``: radiation pressure coefficient, dimensionless (1 absorbing, 2 mirror);
    * ``A_over_m``: area-to-mass ratio, km^2/kg (1 m^2/kg = 1e-6 km^2/kg);
    * ``Wdivc_s``: the star's radiated power over the speed of light and 4 pi,
      kg km/s^2, i.e. the radiation pressure times the squared distance, as
      poliastro/hapsira document it (their ``Wdivc_sun`` = 1.0203759306204136e14
      can be passed as is; `WDIVC_SUN` is the IAU nominal value);
    * ``r_star``: the star's position relative to the attractor, km (a
      3-tuple, e.g. from `hapsira_cowell.models.ephem.position()`);
    * ``nu``: `shadow_function()` with the star's radius taken as the
      Sun's, `R_SUN` (695700 km).

    Unlike poliastro (direction and distance of the star from the attractor, and
    a cylindrical, all-or-nothing shadow), the push is along the star-object
    line at the star-object distance, and the penumbra is partial; at GEO the
    two directions differ by up to 3e-4 rad and the magnitudes by 6e-4.
    """
    sx = rr[0] - r_star[0]
    sy = rr[1] - r_star[1]
    sz = rr[2] - r_star[2]
    d = norm((sx, sy, sz))
    nu = shadow_function(rr, r_star, R, R_SUN)
    c = nu * C_R * A_over_m * Wdivc_s / (d * d * d)
    return (c * sx, c * sy, c * sz)
