"""Accelerations for Cowell's method, as :func:`~hapsira_core.jit.hjit` functions.

Units everywhere: km, s, kg (so GM in km^3/s^2, accelerations in km/s^2).
Combine them in your own right-hand side::

    @hjit
    def f(t, rr, vv, k, p):
        drr, dvv = two_body(t, rr, vv, k, p)
        a = J2_perturbation(t, rr, vv, k, 1.08262668e-3, 6378.137)
        return drr, (dvv[0] + a[0], dvv[1] + a[1], dvv[2] + a[2])
"""

from hapsira_core.jit import hjit
from hapsira_core.vec import norm

__all__ = ["two_body", "J2_perturbation"]


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
