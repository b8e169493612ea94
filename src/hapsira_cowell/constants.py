"""Physical constants of the Earth, Moon and Sun, in the package's units (km, s, kg).

The one place these numbers live: the perturbations, the command line, the
plots and the benchmarks import them from here. Plain Python floats, so that
``hjit`` code folds them as compile-time constants.
"""

import math

__all__ = ["K_EARTH", "R_EARTH", "J2_EARTH", "J3_EARTH", "OMEGA_EARTH", "K_MOON", "K_SUN",
           "R_SUN", "WDIVC_SUN"]

K_EARTH = 398600.4418  # km^3/s^2, the Earth's GM (WGS-84, with the atmosphere)
R_EARTH = 6378.137  # km, WGS-84 equatorial radius
J2_EARTH = 1.08262668e-3  # Earth's J2, dimensionless (EGM-96; poliastro's value)
J3_EARTH = -2.5327e-6  # Earth's J3, dimensionless (poliastro's value)
OMEGA_EARTH = 7.292115e-5  # rad/s, the Earth's rotation rate (IERS)
K_MOON = 4902.800066  # km^3/s^2, the Moon's GM (JPL DE-series value)
K_SUN = 1.32712440018e11  # km^3/s^2, the Sun's GM (IAU/JPL)
R_SUN = 695700.0  # km, the Sun's radius (IAU 2015 nominal; as the eclipse events' docs)
#: The Sun's luminosity over (4 pi c), kg km/s^2: IAU 2015 nominal 3.828e26 W over
#: 4 pi 299792458 m/s (N), times 1e-3 km/m. The pressure at 1 au is WDIVC_SUN / au^2.
WDIVC_SUN = 3.828e26 / (4.0 * math.pi * 299792458.0) * 1e-3
