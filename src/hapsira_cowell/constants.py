"""Physical constants of the Earth, Moon and Sun, in the package's units (km, s, kg).

The one place these numbers live: the perturbations, the command line, the
plots and the benchmarks import them from here. Plain Python floats, so that
``hjit`` code folds them as compile-time constants.

Sources. The Earth's numbers are those of WGS-84 and of the EGM96 gravity model
(NIMA TR8350.2, 3rd edition): ``J2 = -sqrt(5) C20`` and ``J3 = -sqrt(7) C30`` from
EGM96's normalised ``C20 = -0.484165371736e-3`` and ``C30 = 0.957254173792e-6``
(1.0826266836e-3 and -2.5326565e-6, rounded). hapsira (and poliastro) use other
sources for two of them: ``Earth.R`` 6378.1366 km (IAU WGCCRE 2015), ``Earth.J2``
1.08263e-3 and ``Earth.J3`` -2.5326613168e-6; the GM is the same. To use theirs,
pass them where these are used: ``J2_perturbation(t, rr, vv, k, J2, R)``,
``AltitudeCrossEvent(alt, R)``, ``cowell(k, ...)`` (docs/perturbations.md,
"Constants").
"""

import math

__all__ = ["K_EARTH", "R_EARTH", "J2_EARTH", "J3_EARTH", "OMEGA_EARTH", "K_MOON", "K_SUN",
           "R_SUN", "WDIVC_SUN"]

K_EARTH = 398600.4418  # km^3/s^2, the Earth's GM with its atmosphere (WGS-84; hapsira's too)
R_EARTH = 6378.137  # km, equatorial radius: WGS-84's semi-major axis (hapsira: 6378.1366)
J2_EARTH = 1.08262668e-3  # J2 = -sqrt(5) C20 of EGM96, 1.0826266836e-3 (hapsira: 1.08263e-3)
J3_EARTH = -2.5327e-6  # J3 = -sqrt(7) C30 of EGM96, -2.5326565e-6 (hapsira: -2.5326613168e-6)
OMEGA_EARTH = 7.292115e-5  # rad/s, the Earth's rotation rate (WGS-84; IERS Conventions 2010)
K_MOON = 4902.800066  # km^3/s^2, the Moon's GM (JPL DE-series value)
K_SUN = 1.32712440018e11  # km^3/s^2, the Sun's GM (JPL DE-series value)
R_SUN = 695700.0  # km, the Sun's radius (IAU 2015 nominal; as the eclipse events' docs)
#: The Sun's luminosity over (4 pi c), kg km/s^2: IAU 2015 nominal 3.828e26 W over
#: 4 pi 299792458 m/s (N), times 1e-3 km/m. The pressure at 1 au is WDIVC_SUN / au^2.
WDIVC_SUN = 3.828e26 / (4.0 * math.pi * 299792458.0) * 1e-3
