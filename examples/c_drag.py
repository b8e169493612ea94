"""Drag with an atmosphere written in C, through ``cowell()``, against its ``hjit`` twin.

    python examples/c_drag.py [N]

``density.c`` (beside this file) is a piecewise exponential atmosphere whose
table (Vallado, *Fundamentals of Astrodynamics*, table 8-4) travels in the
params row. ``declare`` compiles it once for the active target (a cached
shared library on cpu/parallel and under the CUDA simulator, linked into the
kernel on a GPU) and returns a function that ``hjit`` code calls like any
other. N objects in low orbits are propagated for a day with the C density
and with the same model in ``hjit``; the two agree to rounding.
"""

import math
import sys
import time
from pathlib import Path

import numpy as np

from hapsira_core.foreign import declare
from hapsira_core.jit import hjit
from hapsira_core.vec import norm
from hapsira_cowell import cowell
from hapsira_cowell.perturbations import R_EARTH, atmospheric_drag, two_body

K = 398600.4418  # km^3/s^2

density_c = declare("double density(double h, const double *table, int64_t rows)",
                    Path(__file__).resolve().parent / "density.c")


@hjit
def density_hjit(h, table, rows):
    """The hjit twin of density.c: the same table walk and the same arithmetic."""
    i = 0
    while i + 1 < rows and table[3 * (i + 1)] <= h:
        i += 1
    return table[3 * i + 1] * math.exp(-(h - table[3 * i]) / table[3 * i + 2])


@hjit
def drag_c(t, rr, vv, k, p):
    """Two-body + drag; p = [C_D, A/m (km^2/kg), table rows, table...]; density from C."""
    drr, dvv = two_body(t, rr, vv, k, p)
    rho = density_c(norm(rr) - R_EARTH, p[3:], int(p[2]))
    d = atmospheric_drag(t, rr, vv, k, p[0], p[1], rho)
    return drr, (dvv[0] + d[0], dvv[1] + d[1], dvv[2] + d[2])


@hjit
def drag_hjit(t, rr, vv, k, p):
    """drag_c with the density from :func:`density_hjit`."""
    drr, dvv = two_body(t, rr, vv, k, p)
    rho = density_hjit(norm(rr) - R_EARTH, p[3:], int(p[2]))
    d = atmospheric_drag(t, rr, vv, k, p[0], p[1], rho)
    return drr, (dvv[0] + d[0], dvv[1] + d[1], dvv[2] + d[2])


#: base altitude (km), density (kg/m^3), scale height (km): Vallado table 8-4
VALLADO = np.array([
    (0, 1.225, 7.249), (25, 3.899e-2, 6.349), (30, 1.774e-2, 6.682),
    (40, 3.972e-3, 7.554), (50, 1.057e-3, 8.382), (60, 3.206e-4, 7.714),
    (70, 8.770e-5, 6.549), (80, 1.905e-5, 5.799), (90, 3.396e-6, 5.382),
    (100, 5.297e-7, 5.877), (110, 9.661e-8, 7.263), (120, 2.438e-8, 9.473),
    (130, 8.484e-9, 12.636), (140, 3.845e-9, 16.149), (150, 2.070e-9, 22.523),
    (180, 5.464e-10, 29.740), (200, 2.789e-10, 37.105), (250, 7.248e-11, 45.546),
    (300, 2.418e-11, 53.628), (350, 9.518e-12, 53.298), (400, 3.725e-12, 58.515),
    (450, 1.585e-12, 60.828), (500, 6.967e-13, 63.822), (600, 1.454e-13, 71.835),
    (700, 3.614e-14, 88.667), (800, 1.170e-14, 124.64), (900, 5.245e-15, 181.05),
    (1000, 3.019e-15, 268.00),
])
#: the same table in the units of the propagation: km, kg/km^3, km
TABLE = VALLADO * np.array([1.0, 1e9, 1.0])


def params(drag_coefficient, area_to_mass):
    """The (N, 3 + 3 rows) params: C_D, A/m (km^2/kg), rows, then the table."""
    n = len(area_to_mass)
    head = np.column_stack([drag_coefficient, area_to_mass, np.full(n, len(TABLE))])
    return np.hstack([head, np.tile(TABLE.ravel(), (n, 1))])


def low_orbits(n, seed=0):
    """N near-circular orbits between 300 and 600 km, any inclination and phase."""
    rng = np.random.default_rng(seed)
    a = R_EARTH + rng.uniform(300.0, 600.0, n)
    inc = rng.uniform(0.0, math.pi, n)
    raan, u = rng.uniform(0.0, 2 * math.pi, (2, n))
    speed = np.sqrt(K / a) * rng.uniform(0.998, 1.002, n)  # small eccentricities
    cO, sO, ci, si = np.cos(raan), np.sin(raan), np.cos(inc), np.sin(inc)
    cu, su = np.cos(u), np.sin(u)
    r0 = a[:, None] * np.column_stack([cO * cu - sO * su * ci, sO * cu + cO * su * ci, su * si])
    v0 = speed[:, None] * np.column_stack([-cO * su - sO * cu * ci, -sO * su + cO * cu * ci,
                                           cu * si])
    area_to_mass = rng.uniform(0.005, 0.05, n) * 1e-6  # m^2/kg -> km^2/kg
    return r0, v0, params(rng.uniform(2.0, 2.4, n), area_to_mass)


def semi_major_axis(r, v):
    """km, from the orbital energy."""
    return 1.0 / (2.0 / np.linalg.norm(r, axis=-1) - np.sum(v * v, axis=-1) / K)


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    r0, v0, p = low_orbits(n)
    tofs = np.linspace(0.0, 86400.0, 25)
    results = {}
    for name, f in (("C", drag_c), ("hjit", drag_hjit)):
        start = time.perf_counter()
        results[name] = cowell(K, r0, v0, tofs, f=f, params=p)
        print(f"{name:4s} density: {time.perf_counter() - start:6.2f} s "
              "(compilation included)")
    c, twin = results["C"], results["hjit"]
    scale = np.linalg.norm(twin.rr, axis=-1)
    difference = np.max(np.linalg.norm(c.rr - twin.rr, axis=-1) / scale)
    decay = semi_major_axis(r0, v0) - semi_major_axis(c.rr[:, -1], c.vv[:, -1])
    print(f"{n} objects, one day: largest relative difference C vs hjit {difference:.1e}; "
          f"semi-major axes lowered by drag by {decay.min():.3f} to {decay.max():.3f} km")
    print(f"C library: {density_c.library}")


if __name__ == "__main__":
    main()
