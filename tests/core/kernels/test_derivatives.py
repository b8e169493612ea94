"""The source transformation behind `hapsira_core.ivp.jacobian`: its Jacobians against
central finite differences (numpy, here) and against hand-written ones, and its errors.

The compiled twins are called from Python, so these run on the host targets only; on
cuda the Jacobian is checked through a kernel (tests/core/ivp/test_jacobian.py).
"""

import math

import numpy as np
import pytest

from hapsira_core import settings
from hapsira_core.jit import hjit
from hapsira_core.kernels import derivatives
from hapsira_core.kernels.derivatives import NotDifferentiable, SCALAR, transform

#: The compiled twins are called from Python on the host targets only (on cuda they are
#: device functions, checked through kernels in tests/core/ivp/test_stm.py).
host_only = pytest.mark.skipif(settings.TARGET == "cuda",
                               reason="host targets: the compiled twins are called from Python")

MU = 398600.4418
J2, R = 1.08262668e-3, 6378.137


@hjit
def vdp(t, y, p):
    return (y[1], p[0] * (1.0 - y[0] ** 2) * y[1] - y[0])


@hjit
def lorenz(t, y, p):
    x, yy, z = y
    return (10.0 * (yy - x), x * (28.0 - z) - yy, x * yy - 8.0 / 3.0 * z)


@hjit
def lotka(t, y, p):
    return (p[0] * y[0] - p[1] * y[0] * y[1], -p[2] * y[1] + p[3] * y[0] * y[1])


@hjit
def kepler_j2(t, y, p):
    """Two-body + J2, the textbook flat 6-state form."""
    x, yy, z, vx, vy, vz = y
    r2 = x * x + yy * yy + z * z
    r = math.sqrt(r2)
    r3 = r2 * r
    f = 1.5 * J2 * R ** 2 / r2
    c = 5.0 * z * z / r2
    ax = -MU * x / r3 * (1.0 + f * (1.0 - c))
    ay = -MU * yy / r3 * (1.0 + f * (1.0 - c))
    az = -MU * z / r3 * (1.0 + f * (3.0 - c))
    return (vx, vy, vz, ax, ay, az)


@hjit
def gravity(rr, k):
    r = math.hypot(math.hypot(rr[0], rr[1]), rr[2])
    w = -k / r ** 3
    return (w * rr[0], w * rr[1], w * rr[2])


@hjit
def with_helper(t, y, p):
    a = gravity((y[0], y[1], y[2]), p[0])
    return y[3], y[4], y[5], a[0], a[1], a[2]


@hjit
def branches(t, y, p):
    if y[0] > p[0]:
        s = y[0] * y[1]
        q = math.exp(-y[1])
    elif y[1] < 0.0:
        s = y[1] ** 3
        q = 2.0
    else:
        s = math.sqrt(y[0] ** 2 + 1.0)
        q = y[0]
    w = y[1] if s > 1.0 else -y[0] * s
    return (s + q, w * q + math.atan2(y[0], y[1]) + abs(y[1] - 0.5))


@hjit
def functions(t, y, p):
    a, b, c = y
    return (math.log(a) * math.sin(b) + math.cos(c) ** 2.5,
            math.tan(a / 3.0) - math.pow(b, 1.5) + a ** b,
            np.sqrt(a) * np.exp(-c) + math.fabs(b - c) / math.hypot(a, c) - a ** -2)


def central(fun, y, p, step=1e-6):
    y = np.asarray(y, dtype=float)
    columns = []
    for j in range(len(y)):
        h = step * max(1.0, abs(y[j]))
        plus, minus = y.copy(), y.copy()
        plus[j] += h
        minus[j] -= h
        columns.append((np.array(fun.py_func(0.0, tuple(plus), p))
                        - np.array(fun.py_func(0.0, tuple(minus), p))) / (2.0 * h))
    return np.array(columns).T


def automatic(fun, y, p):
    from hapsira_core.ivp import jacobian
    n = len(y)
    return np.array(jacobian(fun)(0.0, tuple(float(v) for v in y), p)).reshape(n, n)


CASES = [
    (vdp, (1.3, -0.4), [2.5]),
    (lorenz, (1.0, 2.0, 25.0), [0.0]),
    (lotka, (10.0, 5.0), [1.1, 0.4, 0.4, 0.1]),
    (kepler_j2, (7000.0, 120.0, 1300.0, 0.2, 7.4, 1.1), [0.0]),
    (with_helper, (7000.0, -300.0, 900.0, 0.2, 7.4, 1.1), [MU]),
    (branches, (2.0, 0.7), [1.0]),    # first branch
    (branches, (0.5, -0.3), [1.0]),   # elif
    (branches, (0.5, 0.3), [1.0]),    # else
    (functions, (1.2, 0.8, 0.4), [0.0]),
]


@host_only
@pytest.mark.parametrize("fun, y, p", CASES, ids=lambda v: getattr(v, "__name__", ""))
def test_equals_central_differences(fun, y, p):
    p = np.array(p, dtype=float)
    J = automatic(fun, y, p)
    fd = central(fun, y, p)
    scale = np.maximum(np.abs(fd), np.abs(fd).max(axis=1, keepdims=True))
    assert np.all(np.abs(J - fd) <= 1e-7 * scale + 1e-300), (J, fd)


@host_only
def test_van_der_pol_and_lotka_exactly_as_by_hand():
    mu = 2.5
    x, v = 1.3, -0.4
    J = automatic(vdp, (x, v), np.array([mu]))
    assert np.array_equal(J, [[0.0, 1.0], [-2.0 * mu * x * v - 1.0, mu * (1.0 - x * x)]]) \
        or np.allclose(J, [[0.0, 1.0], [-2.0 * mu * x * v - 1.0, mu * (1.0 - x * x)]],
                       rtol=1e-14, atol=0)
    a, b, c, d = 1.1, 0.4, 0.4, 0.1
    u, w = 10.0, 5.0
    J = automatic(lotka, (u, w), np.array([a, b, c, d]))
    np.testing.assert_allclose(J, [[a - b * w, -b * u], [d * w, -c + d * u]], rtol=1e-14, atol=0)


@host_only
def test_lorenz_exactly_as_by_hand():
    x, y, z = 1.0, 2.0, 25.0
    J = automatic(lorenz, (x, y, z), np.zeros(1))
    np.testing.assert_allclose(J, [[-10.0, 10.0, 0.0], [28.0 - z, -1.0, -x],
                                   [y, x, -8.0 / 3.0]], rtol=1e-14, atol=0)


@host_only
def test_two_body_and_J2_of_the_library():
    """A cowell-form function calling the built-in hjit perturbations (differentiated
    through ``norm_and_inverse_cube`` and ``rsqrt``)."""
    from hapsira_cowell.perturbations import J2_EARTH, R_EARTH, J2_perturbation, two_body

    @hjit
    def f(t, y, p):
        rr, vv = (y[0], y[1], y[2]), (y[3], y[4], y[5])
        drr, dvv = two_body(t, rr, vv, MU, p)
        a = J2_perturbation(t, rr, vv, MU, J2_EARTH, R_EARTH)
        return drr + (dvv[0] + a[0], dvv[1] + a[1], dvv[2] + a[2])

    y, p = (6800.0, 500.0, 2100.0, -0.5, 7.1, 2.2), np.zeros(1)
    J, fd = automatic(f, y, p), central(f, y, p)
    np.testing.assert_allclose(J, fd, rtol=1e-7, atol=1e-7 * np.abs(fd).max())
    np.testing.assert_array_equal(J[:3], np.eye(6)[3:])


def test_the_twin_returns_the_value_too_and_knows_its_zeros():
    made = transform(lorenz.py_func, (None, (SCALAR,) * 3, None))
    assert made.out == (SCALAR,) * 3 and made.n_in == 3
    assert made.zeros == {2}  # d f0 / d z
    assert "def lorenz__hapsira_jacobian(t, y, p)" in made.source


@hjit
def loops(t, y, p):
    s = 0.0
    for i in range(2):
        s += y[i]
    return (s, y[0])


@hjit
def computed_index(t, y, p):
    i = int(p[0])
    return (y[i], y[0])


@hjit
def harmless_loop(t, y, p):
    c = 0.0
    for i in range(3):
        c += p[i]
    return (c * y[0], y[1])


def test_what_it_cannot_differentiate_is_named():
    with pytest.raises(NotDifferentiable, match=r"loops \(.*test_derivatives.py:\d+\).*loop"):
        transform(loops.py_func, (None, (SCALAR,) * 2, None))
    with pytest.raises(NotDifferentiable, match=r"computed_index.*computed index.*y\[i\]"):
        transform(computed_index.py_func, (None, (SCALAR,) * 2, None))


@host_only
def test_a_loop_that_does_not_touch_y_is_kept():
    p = np.array([1.0, 2.0, 3.5])
    np.testing.assert_array_equal(automatic(harmless_loop, (2.0, 3.0), p),
                                  [[6.5, 0.0], [0.0, 1.0]])


def test_the_array_form_is_refused_by_name():
    from hapsira_core.ivp import jacobian

    @hjit
    def heat(t, y, p, dydt):
        dydt[0] = -y[0]

    with pytest.raises(NotDifferentiable, match="heat.*array form"):
        jacobian(heat)


def test_the_transform_is_pure():
    """The transform lives below the jit floor (tests/core/test_architecture.py)."""
    names = set(vars(derivatives))
    assert "hjit" not in names and "numba" not in names


ZERO = (0.0, 0.0)


@hjit
def switched(t, y, p):
    """A helper's branches: one returns a tuple that does not depend on y."""
    off = ZERO
    if p[0] > 0.0:
        return (y[1] * y[0], math.cos(y[1]))
    none = (0.0, p[0])
    if p[0] < -1.0:
        return none
    return off


@host_only
@pytest.mark.parametrize("switch", [1.0, -2.0, -0.5])
def test_branches_that_return_constant_tuples(switch):
    p = np.array([switch])
    J = automatic(switched, (0.3, 0.7), p)
    np.testing.assert_allclose(J, central(switched, (0.3, 0.7), p), rtol=1e-7, atol=1e-12)


@hjit
def through_helper(t, y, p):
    return gravity(y, 1.0)


@host_only
def test_the_state_size_is_asked_for_where_it_cannot_be_read():
    from hapsira_core.ivp import jacobian
    with pytest.raises(NotDifferentiable, match="through_helper.*pass n="):
        jacobian(through_helper)
    y = (7000.0, 100.0, -500.0)
    J = np.array(jacobian(through_helper, n=3)(0.0, y, np.zeros(1))).reshape(3, 3)
    np.testing.assert_allclose(J, central(through_helper, y, np.zeros(1)), rtol=1e-7,
                               atol=1e-7 * np.abs(J).max())
