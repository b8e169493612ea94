"""U.S. Standard Atmosphere 1976 density, as an ``hjit`` function usable in kernels.

Sources:

* 0 to 86 km: the standard's hydrostatic layers (base geopotential height,
  temperature, lapse rate and pressure of each layer; *U.S. Standard
  Atmosphere, 1976*, NOAA/NASA/USAF, Washington D.C., 1976, Table 4), density
  from the ideal gas law with the sea-level molar mass.
* 86 to 1000 km: the standard's tabulated densities as fitted per layer by
  ``ln(rho / (kg/m^3)) = A z^4 + B z^3 + C z^2 + D z + E`` (``z`` geometric
  altitude in km), coefficients from R. A. Braeunig, *Atmospheric Models*
  (braeunig.us/space/atmmodel.htm). The fits match the standard's Table 1
  within 0.2% at the tabulated altitudes; adjacent layers disagree by up to
  0.07% at their common boundary (a small jump in density).
* above 1000 km (the standard's top): an exponential tail,
  ``rho(1000) exp(-(z - 1000) / H_TOP)``, continuous in value and slope with
  the last fit (``H_TOP`` = 235 km). A smooth stand-in, not part of the standard.
* below 0 km: the sea-level layer continued downwards (an object there has
  hit the ground; stop it with an event).

Tables are module-level tuples: compile-time constants on every target.
"""

import math

from hapsira_core.jit import hjit

__all__ = ["density_us76", "ALT_MAX", "H_TOP"]

R0_GEOPOTENTIAL = 6356.766  # km, the standard's Earth radius for geopotential height
M0 = 28.9644e-3  # kg/mol, sea-level mean molar mass of air
R_GAS = 8.31432  # J/(mol K), the standard's gas constant
G0 = 9.80665  # m/s^2
G0_M_OVER_R = G0 * M0 / R_GAS  # K per m
M0_OVER_R = M0 / R_GAS  # kg K / J

# Layers below 86 km: base geopotential height (km'), temperature (K),
# lapse rate (K/km'), pressure (Pa).
LAYER_H = (0.0, 11.0, 20.0, 32.0, 47.0, 51.0, 71.0)
LAYER_T = (288.15, 216.65, 216.65, 228.65, 270.65, 270.65, 214.65)
LAYER_L = (-6.5, 0.0, 1.0, 2.8, 0.0, -2.8, -2.0)
LAYER_P = (101325.0, 22632.0, 5474.8, 868.01, 110.9, 66.938, 3.9564)

# 86 to 1000 km: layer base altitude z (km) and fit coefficients A..E (Braeunig).
UPPER_Z = (86.0, 91.0, 100.0, 110.0, 120.0, 150.0, 200.0, 300.0, 500.0, 750.0)
UPPER_A = (0.0, 0.0, -1.240774e-05, 0.0, 3.661771e-07, 1.906032e-08, 1.199282e-09,
           1.140564e-10, 8.105631e-12, -3.701195e-12)
UPPER_B = (-3.322622e-06, 2.873405e-05, 0.005162063, -8.854164e-05, -0.0002154344,
           -1.527799e-05, -1.451051e-06, -2.130756e-07, -2.358417e-09, -8.608611e-09)
UPPER_C = (0.000911146, -0.008492037, -0.8048342, 0.03373254, 0.04809214, 0.004724294,
           0.0006910474, 0.0001570762, -2.63511e-06, 5.118829e-05)
UPPER_D = (-0.2609971, 0.6541179, 55.55996, -4.390837, -4.884744, -0.699234, -0.173622,
           -0.07029296, -0.01562608, -0.06600998)
UPPER_E = (5.944694, -23.6201, -1443.338, 176.5294, 172.3597, 20.50921, -5.321644,
           -12.89844, -20.02246, -6.137674)

#: Top of the standard (km); above it the exponential tail.
ALT_MAX = 1000.0


def _last_fit(z):
    a, b, c, d, e = UPPER_A[-1], UPPER_B[-1], UPPER_C[-1], UPPER_D[-1], UPPER_E[-1]
    value = (((a * z + b) * z + c) * z + d) * z + e
    slope = ((4.0 * a * z + 3.0 * b) * z + 2.0 * c) * z + d
    return value, slope


#: ln(rho) at ALT_MAX (rho in kg/m^3) and the tail's scale height (km).
LN_RHO_TOP = _last_fit(ALT_MAX)[0]
H_TOP = -1.0 / _last_fit(ALT_MAX)[1]


@hjit
def density_us76(alt):
    """Density of the U.S. Standard Atmosphere 1976 at geometric altitude ``alt`` km, in kg/km^3.

    1 kg/m^3 = 1e9 kg/km^3. Valid from 0 to 1000 km; above 1000 km an
    exponential tail with a 235 km scale height, below 0 km the sea-level
    layer continued (see the module's docstring for sources and accuracy).
    """
    if alt >= ALT_MAX:
        return math.exp(LN_RHO_TOP - (alt - ALT_MAX) / H_TOP) * 1e9
    if alt >= 86.0:
        i = 0
        for j in range(1, 10):
            if alt >= UPPER_Z[j]:
                i = j
        z = alt
        exponent = (((UPPER_A[i] * z + UPPER_B[i]) * z + UPPER_C[i]) * z + UPPER_D[i]) * z \
            + UPPER_E[i]
        return math.exp(exponent) * 1e9
    h = R0_GEOPOTENTIAL * alt / (R0_GEOPOTENTIAL + alt)  # geopotential height, km'
    i = 0
    for j in range(1, 7):
        if h >= LAYER_H[j]:
            i = j
    dh = (h - LAYER_H[i]) * 1000.0  # m'
    lapse = LAYER_L[i] / 1000.0  # K/m'
    if lapse == 0.0:
        temperature = LAYER_T[i]
        pressure = LAYER_P[i] * math.exp(-G0_M_OVER_R * dh / LAYER_T[i])
    else:
        temperature = LAYER_T[i] + lapse * dh
        pressure = LAYER_P[i] * (LAYER_T[i] / temperature) ** (G0_M_OVER_R / lapse)
    return pressure * M0_OVER_R / temperature * 1e9
