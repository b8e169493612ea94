"""A spherical-harmonic gravity field (EGM96 to degree and order 70) as `hjit` functions.

* `spherical_harmonics(x, y, z, k, R, cs, degree, order)`: the acceleration of
  degrees 2..``degree`` (orders up to ``order``) in the body-fixed frame;
* `gravity_field(t, rr, vv, k, R, cs, degree, order, era0)`: the same for an
  inertial position, through the Earth rotation angle ``era0 + OMEGA_ERA t``;
* `EGM96`: the coefficients, packed for both (``EGM96_K``, ``EGM96_R``: the
  model's GM and radius).

The recursion is Cunningham's V/W recursion (Montenbruck & Gill, *Satellite
Orbits*, 2000, Sec. 3.2.4-3.2.5, eqs. 3.29-3.33) rewritten for fully normalised
``V̄_nm = N_nm V_nm`` (``N_nm = sqrt((2 - δ_m0)(2n + 1)(n - m)! / (n + m)!)``),
so that every number stays of order one (no factorials) up to any degree. It
works in Cartesian coordinates, hence has no singularity at the poles. For the
GPU it keeps no arrays: the V̄/W̄ of one order ``j`` are computed degree after
degree with two scalars of memory, and each is used at once by the three
coefficients it multiplies (orders ``j - 1``, ``j``, ``j + 1``), so the sum runs
over one column at a time; the sectorial values are carried from column to
column.
"""

import math
import os

import numpy as np

from hapsira_core.jit import hjit

__all__ = ["EGM96", "EGM96_K", "EGM96_R", "EGM96_MAX_DEGREE", "OMEGA_ERA", "MAX_DEGREE",
           "spherical_harmonics", "gravity_field", "pack", "read_coefficients",
           "earth_rotation_angle"]

#: EGM96's GM (km^3/s^2) and reference radius (km), to which its coefficients are
#: scaled (Lemoine et al., NASA/TP-1998-206861): 3986004.415e8 m^3/s^2, 6378136.3 m.
#: (WGS-84's GM, `hapsira_cowell.constants.K_EARTH`, is 398600.4418.)
EGM96_K = 398600.4415
EGM96_R = 6378.1363
EGM96_MAX_DEGREE = 70
#: The rate of the Earth rotation angle, rad/s (of UT1): 2 pi 1.00273781191135448 / 86400
#: (IERS Conventions 2010, eq. 5.15).
OMEGA_ERA = 2.0 * math.pi * 1.00273781191135448 / 86400.0
#: The highest degree the kernel's tables of square roots allow.
MAX_DEGREE = 120

# sqrt(i) and 1/sqrt(i) for the normalisation factors: products of these replace
# a square root and a division per term (constant memory on the GPU: 4 KB)
_SQ = np.sqrt(np.arange(2 * MAX_DEGREE + 8, dtype=np.float64))
_ISQ = np.concatenate(([0.0], 1.0 / _SQ[1:]))


# One function reads each table: numba-cuda makes a copy of a global array in
# constant memory at every place that reads it, and a copy per read of these tables
# with EGM96's beside them overflows constant memory's 64 KB (the kernel does not
# link: "too much global constant data"); through these, one copy each.
@hjit
def _sq(i):
    return _SQ[i]


@hjit
def _isq(i):
    return _ISQ[i]


def pack(C, S):
    """Pack square arrays ``C[n, m]``, ``S[n, m]`` (fully normalised, n <= N) into
    the kernel's layout: ``[C_00, S_00, C_10, S_10, C_11, S_11, C_20, ...]``, the
    pair of (n, m) at ``2 (n (n + 1) / 2 + m)``, ``(N + 1)(N + 2)`` numbers."""
    C = np.asarray(C, dtype=np.float64)
    S = np.asarray(S, dtype=np.float64)
    N = C.shape[0] - 1
    out = np.zeros((N + 1) * (N + 2))
    for n in range(N + 1):
        base = n * (n + 1)
        out[base:base + 2 * (n + 1):2] = C[n, :n + 1]
        out[base + 1:base + 2 * (n + 1):2] = S[n, :n + 1]
    return out


def read_coefficients(path, degree=None):
    """``(C, S)`` square arrays from a text file of rows ``n m C_nm S_nm``
    (``#`` comments), up to ``degree`` (default: the file's highest)."""
    rows = np.loadtxt(path, comments="#", ndmin=2)
    n = rows[:, 0].astype(int)
    m = rows[:, 1].astype(int)
    N = int(n.max()) if degree is None else int(degree)
    keep = n <= N
    C = np.zeros((N + 1, N + 1))
    S = np.zeros((N + 1, N + 1))
    C[n[keep], m[keep]] = rows[keep, 2]
    S[n[keep], m[keep]] = rows[keep, 3]
    return C, S


_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: EGM96 to degree and order 70, fully normalised, packed (`pack`; 5112 numbers,
#: 40 KB: it fits the GPU's 64 KB of constant memory). C_00 = 1 is left out
#: (zero): the central term is `two_body`'s. Source: data/egm96_70.txt.
EGM96 = pack(*read_coefficients(os.path.join(_HERE, "data", "egm96_70.txt")))
EGM96[0] = 0.0


def earth_rotation_angle(epoch, dut1=0.0):
    """The Earth rotation angle (rad, in [0, 2 pi)) at ``epoch`` (astropy ``Time``).

    ``ERA = 2 pi (0.7790572732640 + 1.00273781191135448 Tu)``, ``Tu`` = UT1
    Julian date - 2451545.0 (IERS Conventions 2010, eq. 5.15). UT1 is taken as
    the epoch's UTC plus ``dut1`` seconds (UT1 - UTC, within 0.9 s; 0 by
    default: an angle error of up to 6.6e-5 rad).
    """
    utc = epoch.utc
    # the two parts of the Julian date, kept apart for precision
    tu = (utc.jd1 - 2451545.0) + utc.jd2 + dut1 / 86400.0
    frac = (utc.jd1 % 1.0) + (utc.jd2 % 1.0) + dut1 / 86400.0
    turns = 0.7790572732640 + 0.00273781191135448 * tu + frac
    return float(2.0 * math.pi * (turns % 1.0))


@hjit
def spherical_harmonics(x, y, z, k, R, cs, degree, order):
    """Acceleration (km/s^2) of degrees 2..``degree``, orders 0..``order``, body-fixed.

    ``x, y, z``: position in the body-fixed frame, km; ``k``: GM, km^3/s^2,
    and ``R``: reference radius, km, both those the coefficients are scaled to
    (EGM96: `EGM96_K`, `EGM96_R`); ``cs``: fully normalised coefficients packed
    by `pack` (e.g. `EGM96`, or a slice of the params row); ``degree``,
    ``order``: ints (or integral floats), ``order`` capped at ``degree``.
    Returns the body-fixed acceleration; degrees 0 and 1 are left out, whatever
    ``cs`` holds there. A ``degree`` beyond ``cs`` or `MAX_DEGREE` gives NaN.
    """
    N = int(degree)
    M = min(int(order), N)
    size = cs.shape[0]
    available = int(0.5 * (math.sqrt(4.0 * size + 1.0) - 3.0) + 1e-9)
    if N > available or N > MAX_DEGREE:
        return (math.nan, math.nan, math.nan)
    if N < 2:
        return (0.0, 0.0, 0.0)
    r2 = x * x + y * y + z * z
    rho = R / r2
    x0 = x * rho
    y0 = y * rho
    z0 = z * rho
    rho2 = R * rho
    ax = 0.0
    ay = 0.0
    az = 0.0
    vs = R / math.sqrt(r2)  # sectorial V̄_jj, W̄_jj
    ws = 0.0
    for j in range(M + 2):
        if j > 0:
            f = 1.7320508075688772 if j == 1 else _sq(2 * j + 1) * _isq(2 * j)
            vs, ws = f * (x0 * vs - y0 * ws), f * (x0 * ws + y0 * vs)
            if 3 <= j <= N + 1:  # V̄_jj: x, y of the sectorial (n, m) = (j - 1, j - 1)
                row = (j - 1) * j
                c = cs[row + 2 * j - 2]
                sn = cs[row + 2 * j - 1]
                fp = 0.5 * _sq(2 * j - 1) * _isq(2 * j + 1) * _sq(2 * j - 1) * _sq(2 * j)
                ax -= fp * (c * vs + sn * ws)
                ay += fp * (sn * vs - c * ws)
        # down column j: V̄_kj for k = j + 1 .. N + 1 (V̄_{k-2,j} in v2, V̄_{k-1,j} in v1)
        v2 = 0.0
        w2 = 0.0
        v1 = vs
        w1 = ws
        for kk in range(j + 1, N + 2):
            s = _isq(kk - j) * _isq(kk + j) * _sq(2 * kk + 1)
            a = s * _sq(2 * kk - 1) * z0
            if kk > j + 1:
                b = s * _sq(kk + j - 1) * _sq(kk - j - 1) * _isq(2 * kk - 3) * rho2
                v = a * v1 - b * v2
                w = a * w1 - b * w2
            else:
                v = a * v1
                w = a * w1
            v2 = v1
            w2 = w1
            v1 = v
            w1 = w
            n = kk - 1  # V̄_{n+1, j} enters the acceleration of degree n
            if n < 2:
                continue
            g = _sq(2 * kk - 1) * _isq(2 * kk + 1)
            row = n * (n + 1)
            if j <= M:  # z from order j
                c = cs[row + 2 * j]
                sn = cs[row + 2 * j + 1]
                az -= g * _sq(kk - j) * _sq(kk + j) * (c * v + sn * w)
            if j >= 1:  # x, y from order j - 1 (its V̄_{n+1, m+1})
                c = cs[row + 2 * j - 2]
                sn = cs[row + 2 * j - 1]
                fp = 0.5 * g * _sq(kk + j - 1) * _sq(kk + j)
                if j == 1:
                    fp *= 1.4142135623730951
                ax -= fp * (c * v + sn * w)
                ay += fp * (sn * v - c * w)
            if j + 1 <= M and j + 1 <= n:  # x, y from order j + 1 (its V̄_{n+1, m-1})
                c = cs[row + 2 * j + 2]
                sn = cs[row + 2 * j + 3]
                fm = 0.5 * g * _sq(kk - j - 1) * _sq(kk - j)
                if j == 0:
                    fm *= 1.4142135623730951
                ax += fm * (c * v + sn * w)
                ay += fm * (sn * v - c * w)
    scale = k / (R * R)
    return (scale * ax, scale * ay, scale * az)


@hjit
def gravity_field(t, rr, vv, k, R, cs, degree, order, era0):
    """Acceleration (km/s^2) of a spherical-harmonic field, degrees 2..``degree``.

    ``rr``: km in the attractor's inertial equatorial frame (GCRS, taken as
    the true equator of date); ``t``: s since the epoch at which the Earth
    rotation angle is ``era0`` rad (`earth_rotation_angle()`); the body-fixed
    frame is the inertial one turned by ``era0 + OMEGA_ERA t`` about z
    (precession, nutation and polar motion neglected). ``k``, ``R``, ``cs``,
    ``degree``, ``order``: see `spherical_harmonics()` (EGM96: `EGM96_K`,
    `EGM96_R`, `EGM96`). ``vv`` unused. The central term is not included.
    """
    theta = era0 + OMEGA_ERA * t
    c = math.cos(theta)
    s = math.sin(theta)
    xf = c * rr[0] + s * rr[1]
    yf = c * rr[1] - s * rr[0]
    a = spherical_harmonics(xf, yf, rr[2], k, R, cs, degree, order)
    return (c * a[0] - s * a[1], s * a[0] + c * a[1], a[2])
