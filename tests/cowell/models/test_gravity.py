"""The spherical-harmonic gravity field (EGM96 to 70x70): J2, the gradient of the
potential written independently in numpy, the Earth rotation, and a propagation."""

import math

import numpy as np
import pytest
from astropy import units as u
from astropy.time import Time
from scipy.special import lpmv

from hapsira_core import settings
from hapsira_core.jit import Arg, ObjectKernel, hjit
from hapsira_cowell import cowell
from hapsira_cowell.models import gravity
from hapsira_cowell.models.perturbations import J2_perturbation, two_body
from hapsira_cowell.perturbations import (EGM96, EGM96_K, EGM96_R, OMEGA_ERA,
                                          earth_rotation_angle, gravity_field)

SIMULATED = settings.TARGET == "cuda" and settings.cuda_simulator_enabled()


@hjit
def _field_row(r, cs, q, out):
    # q: degree, order, rotation angle at t = 0
    a = gravity_field(0.0, (r[0], r[1], r[2]), (0.0, 0.0, 0.0), EGM96_K, EGM96_R, cs,
                      int(q[0]), int(q[1]), q[2])
    out[0] = a[0]
    out[1] = a[1]
    out[2] = a[2]


@hjit
def _j2_row(r, out):
    a = J2_perturbation(0.0, (r[0], r[1], r[2]), (0.0, 0.0, 0.0), EGM96_K,
                        -math.sqrt(5.0) * -0.484165371736e-03, EGM96_R)
    out[0] = a[0]
    out[1] = a[1]
    out[2] = a[2]


FIELD = ObjectKernel(_field_row, [Arg("r", np.float64, ("three",)),
                                  Arg("cs", np.float64, ("ncs",), per_object=False),
                                  Arg("q", np.float64, ("three",)),
                                  Arg("out", np.float64, ("three",), output=True)])
J2 = ObjectKernel(_j2_row, [Arg("r", np.float64, ("three",)),
                            Arg("out", np.float64, ("three",), output=True)])


def field(r, cs, degree, order, era0=0.0):
    """gravity_field compiled for the active target at the points ``r`` (N, 3)."""
    r = np.atleast_2d(np.asarray(r, dtype=np.float64))
    out = np.empty((len(r), 3))
    FIELD(r, np.asarray(cs, dtype=np.float64), np.array([[degree, order, era0]], dtype=float),
          out)
    return out


# LEO, GEO, high above the north pole, on the south pole's axis, near the pole
POINTS = np.array([[6778.0, 120.0, 310.0],
                   [-20000.0, 35000.0, 5000.0],
                   [10.0, -20.0, 6900.0],
                   [0.0, 0.0, -7100.0],
                   [3.0, 2.0, -6800.0],
                   [4100.0, -3900.0, 4500.0]])


def test_egm96_table():
    C, S = gravity.read_coefficients(gravity.os.path.join(gravity._HERE, "data", "egm96_70.txt"))
    assert C.shape == (71, 71)
    assert C[2, 0] == -0.484165371736e-03
    assert C[2, 2] == 0.243914352398e-05 and S[2, 2] == -0.140016683654e-05
    assert C[3, 0] == 0.957254173792e-06
    assert EGM96.shape == (71 * 72,)
    # packed: (n, m) at 2 (n (n + 1) / 2 + m); the central term left to two_body
    assert EGM96[0] == 0.0 and EGM96[2 * 3] == C[2, 0] and EGM96[2 * 5 + 1] == S[2, 2]
    assert EGM96[-2] == C[70, 70] and EGM96[-1] == S[70, 70]
    assert (EGM96_K, EGM96_R) == (398600.4415, 6378.1363)


def test_degree_2_order_0_is_j2():
    C = np.zeros((3, 3))
    C[2, 0] = -0.484165371736e-03
    cs = gravity.pack(C, np.zeros((3, 3)))
    got = field(POINTS, cs, 2, 0)
    expected = np.empty_like(got)
    J2(POINTS, expected)
    for g, e in zip(got, expected):
        assert np.linalg.norm(g - e) <= 1e-14 * np.linalg.norm(e)
    # the whole field at degree 2 order 0 is the same: C21, S21 left out by order 0
    np.testing.assert_array_equal(field(POINTS, EGM96, 2, 0), got)


# --- the potential, written independently: spherical angles, the fully normalised
# Legendre functions of geodesy (Holmes & Featherstone 2002, the standard column
# recursion in t = sin(phi), u = cos(phi)), checked against scipy's lpmv ---

def legendre(degree, t, u):
    """P̄_nm(t) for n, m <= degree, with u = sqrt(1 - t^2) given (exact near the poles)."""
    p = np.zeros((degree + 1, degree + 1))
    p[0, 0] = 1.0
    for m in range(1, degree + 1):
        p[m, m] = u * math.sqrt((2 * m + 1) / (2 * m) * (2.0 if m == 1 else 1.0)) * p[m - 1, m - 1]
    for m in range(degree + 1):
        for n in range(m + 1, degree + 1):
            a = math.sqrt((2 * n - 1) * (2 * n + 1) / ((n - m) * (n + m)))
            b = math.sqrt((2 * n + 1) * (n + m - 1) * (n - m - 1) / ((n - m) * (n + m) * (2 * n - 3)))
            p[n, m] = a * t * p[n - 1, m] - (b * p[n - 2, m] if n >= m + 2 else 0.0)
    return p


def test_numpy_legendre_against_scipy():
    t = 0.37
    p = legendre(70, t, math.sqrt(1 - t * t))
    for n, m in [(2, 0), (2, 2), (7, 3), (20, 11), (45, 40), (70, 1), (70, 70)]:
        norm = math.exp(0.5 * (math.log((1.0 if m == 0 else 2.0) * (2 * n + 1))
                               + math.lgamma(n - m + 1) - math.lgamma(n + m + 1)))
        assert abs(p[n, m] - (-1) ** m * lpmv(m, n, t) * norm) <= 1e-11 * max(1.0, abs(p[n, m]))


def potential(r, degree, order):
    """Sum of degrees 2..degree of GM/r (R/r)^n P̄_nm(sin phi) (C cos m lam + S sin m lam)."""
    x, y, z = r
    rho = math.hypot(x, y)
    rn = math.hypot(rho, z)
    lam = math.atan2(y, x)
    p = legendre(degree, z / rn, rho / rn)
    total = 0.0
    for n in range(2, degree + 1):
        m = np.arange(min(n, order) + 1)
        index = n * (n + 1) + 2 * m
        total += (EGM96_R / rn) ** n * np.sum(p[n, m] * (EGM96[index] * np.cos(m * lam)
                                                         + EGM96[index + 1] * np.sin(m * lam)))
    return EGM96_K / rn * total


def gradient(r, degree, order, h):
    """Fourth-order central differences of `potential`."""
    g = np.empty(3)
    for i in range(3):
        e = np.zeros(3)
        e[i] = h
        u = [potential(r + s * e, degree, order) for s in (2.0, 1.0, -1.0, -2.0)]
        g[i] = (-u[0] + 8.0 * u[1] - 8.0 * u[2] + u[3]) / (12.0 * h)
    return g


@pytest.mark.parametrize("degree", [8, 20, 70])
def test_acceleration_is_the_gradient_of_the_potential(degree):
    points = POINTS[[0, 1, 3, 4]] if SIMULATED else POINTS
    got = field(points, EGM96, degree, degree)
    for r, a in zip(points, got):
        g = gradient(r, degree, degree, h=0.02 * np.linalg.norm(r) / 7000.0)
        assert np.linalg.norm(a - g) <= 1e-9 * np.linalg.norm(g), (degree, r)
    # an order below the degree drops exactly the higher orders
    if degree == 20:
        r = points[0]
        a = field(r, EGM96, 20, 5)[0]
        g = gradient(r, 20, 5, h=0.02)
        assert np.linalg.norm(a - g) <= 1e-9 * np.linalg.norm(g)


def test_field_turns_with_the_earth():
    theta = 1.234
    c, s = math.cos(theta), math.sin(theta)
    r = POINTS[[0, 5]]
    fixed = np.column_stack([c * r[:, 0] + s * r[:, 1], c * r[:, 1] - s * r[:, 0], r[:, 2]])
    a_fixed = field(fixed, EGM96, 12, 12)
    expected = np.column_stack([c * a_fixed[:, 0] - s * a_fixed[:, 1],
                                s * a_fixed[:, 0] + c * a_fixed[:, 1], a_fixed[:, 2]])
    np.testing.assert_allclose(field(r, EGM96, 12, 12, era0=theta), expected,
                               rtol=1e-13, atol=1e-20)


def test_degree_beyond_the_table_is_nan_and_below_two_is_zero():
    assert np.isnan(field(POINTS[0], EGM96, 71, 71)).all()
    assert (field(POINTS[0], EGM96, 1, 1) == 0.0).all()


def test_earth_rotation_angle():
    erfa = pytest.importorskip("erfa")
    for iso in ("2000-01-01T12:00:00", "2025-02-15T12:00:00", "2024-07-04T03:21:09.5"):
        epoch = Time(iso, scale="utc")
        expected = erfa.era00(epoch.utc.jd1, epoch.utc.jd2)  # UT1 taken as UTC
        assert abs(earth_rotation_angle(epoch) - expected) < 1e-12
        later = earth_rotation_angle(epoch + 1.0 * u.day)
        # one day on: the angle has turned by OMEGA_ERA * 86400, modulo 2 pi
        assert abs((later - expected - OMEGA_ERA * 86400.0 + math.pi) % (2 * math.pi) - math.pi) < 1e-9
    # dut1 seconds shift the angle by OMEGA_ERA * dut1
    epoch = Time("2025-02-15T12:00:00", scale="utc")
    assert abs(earth_rotation_angle(epoch, 0.3) - earth_rotation_angle(epoch)
               - OMEGA_ERA * 0.3) < 1e-12


# --- a propagation with the field: degree and order per object, no recompilation ---

@hjit
def with_field(t, rr, vv, k, p):
    """Two-body plus EGM96 to degree p[0], order p[1]; Earth rotation angle p[2] at t = 0."""
    drr, dvv = two_body(t, rr, vv, k, p)
    a = gravity_field(t, rr, vv, EGM96_K, EGM96_R, EGM96, int(p[0]), int(p[1]), p[2])
    return drr, (dvv[0] + a[0], dvv[1] + a[1], dvv[2] + a[2])


R0 = np.array([[6778.0, 0.0, 0.0], [0.0, -6878.0, 500.0]])
V0 = np.array([[0.0, 1.2, 7.57], [7.5, 0.0, 1.0]])   # near polar, 8 deg inclined
TOFS = np.array([600.0, 1800.0])
ERA0 = earth_rotation_angle(Time("2025-02-15T12:00:00", scale="utc"))



def scipy_with_field(era0):
    """The same model for scipy: two-body plus the field evaluated by `field` (the
    compiled gravity_field at t = 0, the rotation angle advanced to t by hand)."""
    def rhs(t, y):
        r = y[:3]
        a = field(r, EGM96, 8, 8, era0 + OMEGA_ERA * t)[0]
        return np.concatenate([y[3:], -EGM96_K * r / np.linalg.norm(r) ** 3 + a])
    return rhs


def test_propagation_with_the_field():
    params = np.array([[8.0, 8.0, ERA0], [8.0, 8.0, ERA0]])
    res = cowell(EGM96_K, R0, V0, TOFS, f=with_field, params=params)
    assert (res.status == 0).all()
    from scipy.integrate import solve_ivp as scipy_solve_ivp
    for i in range(len(R0)):
        reference = scipy_solve_ivp(scipy_with_field(ERA0), (0.0, TOFS[-1]),
                                    np.concatenate([R0[i], V0[i]]), method="DOP853",
                                    t_eval=TOFS, rtol=1e-11, atol=1e-12)
        # the same model, two-body and the angle written differently: rounding apart
        np.testing.assert_allclose(res.rr[i], reference.y[:3].T, rtol=0, atol=1e-6)
    # degree 2 from the params row: the same kernel, close to J2 alone (tesserals
    # and C21/S21 are small), far from two-body
    from hapsira_core.ivp.build import KERNELS
    count = len(KERNELS)
    low = cowell(EGM96_K, R0, V0, TOFS, f=with_field, params=np.array([2.0, 0.0, ERA0]))
    assert len(KERNELS) == count
    plain = cowell(EGM96_K, R0, V0, TOFS)
    moved = np.linalg.norm(low.rr[:, -1] - plain.rr[:, -1], axis=1)
    high = np.linalg.norm(res.rr[:, -1] - low.rr[:, -1], axis=1)
    assert (moved > 1.0).all()          # J2 moves LEO by km in 30 min
    assert (high < 0.05 * moved).all() and (high > 1e-4).all()
