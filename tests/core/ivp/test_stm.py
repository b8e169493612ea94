"""``solve_ivp(..., stm=True)`` and the automatic Jacobian inside kernels, on every target.

The state transition matrix against central differences of the solver itself (all
perturbed runs in one batch: one kernel call), the state and accepted steps identical
to the call without ``stm``, det(Phi) = 1 for the two-body problem (a Hamiltonian
flow), and a right-hand side that calls `hapsira_core.ivp.jacobian` (the cuda check of
the Jacobian: there it is a device function).
"""

import math

import numpy as np
import pytest

from hapsira_core import settings
from hapsira_core.ivp import jacobian, solve_ivp
from hapsira_core.jit import hjit

SIMULATOR = settings.TARGET == "cuda"  # CI runs cuda under the simulator: short spans
#: A real GPU fuses multiply-adds, differently in the plain and the augmented kernel:
#: there the states agree to rounding, an edge accept/reject may move by one step.
FMA = SIMULATOR and not settings.cuda_simulator_enabled()
MU = 398600.4418


@hjit
def vdp(t, y, p):
    return (y[1], p[0] * (1.0 - y[0] ** 2) * y[1] - y[0])


@hjit
def gravity(rr, k):
    r = math.sqrt(rr[0] * rr[0] + rr[1] * rr[1] + rr[2] * rr[2])
    w = -k / (r * r * r)
    return (w * rr[0], w * rr[1], w * rr[2])


@hjit
def kepler(t, y, p):
    a = gravity((y[0], y[1], y[2]), p[0])
    return (y[3], y[4], y[5], a[0], a[1], a[2])


def differences(fun, y0, span, t_eval, params, step, **tolerances):
    """Central differences of the solver's states at ``t_eval``: ``(n, n, M)``."""
    n = len(y0)
    rows = [y0]
    for j in range(n):
        for sign in (1.0, -1.0):
            row = np.array(y0, dtype=float)
            row[j] += sign * step[j]
            rows.append(row)
    res = solve_ivp(fun, span, np.array(rows), t_eval=t_eval, params=params, **tolerances)
    assert np.all(res.status == 0)
    y = res.y
    return np.stack([(y[1 + 2 * j] - y[2 + 2 * j]) / (2.0 * step[j]) for j in range(n)],
                    axis=1)


def close(stm, fd, tolerance):
    scale = np.abs(fd).max(axis=(0, 1), keepdims=True)
    return np.all(np.abs(stm - fd) <= tolerance * scale), np.abs(stm - fd).max() / scale.min()


def test_van_der_pol_stm_against_differences_and_the_same_steps():
    y0 = np.array([[2.0, 0.0], [0.5, 1.0]])
    span = (0.0, 1.0 if SIMULATOR else 3.0)
    t_eval = np.linspace(*span, 4)
    tight = dict(rtol=1e-11, atol=1e-12)
    res = solve_ivp(vdp, span, y0, t_eval=t_eval, params=[1.5], stm=True, **tight)
    plain = solve_ivp(vdp, span, y0, t_eval=t_eval, params=[1.5], **tight)
    assert res.stm.shape == (2, 2, 2, 4) and res[1].stm.shape == (2, 2, 4)
    if FMA:  # measured on an H100: 1.1e-15
        np.testing.assert_allclose(res.y, plain.y, rtol=1e-12, atol=1e-14)
        assert np.abs(res.nsteps - plain.nsteps).max() <= 1
    else:
        np.testing.assert_array_equal(res.y, plain.y)
        np.testing.assert_array_equal(res.nsteps, plain.nsteps)
    # scipy's count on every target, whether the stages are kept (the augmented run's
    # array shape) or evaluated again (the GPU's tuple shape); where a step moves (FMA),
    # by that step's evaluations
    if FMA:
        assert np.abs(res.nfev - plain.nfev).max() <= 16
    else:
        np.testing.assert_array_equal(res.nfev, plain.nfev)
    np.testing.assert_array_equal(res.stm[:, :, :, 0], np.broadcast_to(np.eye(2), (2, 2, 2)))
    fd = differences(vdp, y0[0], span, t_eval, [1.5], [1e-6, 1e-6], rtol=1e-13, atol=1e-14)
    ok, worst = close(res.stm[0], fd, 1e-6)
    assert ok, worst


def test_two_body_stm_against_differences_and_its_determinant():
    y0 = np.array([7000.0, 0.0, 300.0, 0.0, 7.4, 1.0])
    span = (0.0, 600.0 if SIMULATOR else 3000.0)
    t_eval = np.linspace(*span, 3)
    res = solve_ivp(kepler, span, y0, t_eval=t_eval, params=[MU], rtol=1e-12, atol=1e-12,
                    stm=True)
    assert res.status == 0 and res.stm.shape == (6, 6, 3)
    determinants = [np.linalg.det(res.stm[:, :, j]) for j in range(3)]
    np.testing.assert_allclose(determinants, 1.0, rtol=0, atol=1e-9)
    step = np.array([1e-3] * 3 + [1e-6] * 3)
    fd = differences(kepler, y0, span, t_eval, [MU], step, rtol=1e-13, atol=1e-14)
    # column by column: positions and velocities differ in scale by 10^3
    for j in range(6):
        scale = np.abs(fd[:, j]).max()
        assert np.abs(res.stm[:, j] - fd[:, j]).max() <= 1e-6 * scale, j


def test_stm_with_rk45_keeps_the_steps_of_the_state():
    y0 = np.array([[2.0, 0.0]])
    span = (0.0, 1.0)
    res = solve_ivp(vdp, span, y0, method="RK45", params=[1.0], stm=True, rtol=1e-6)
    plain = solve_ivp(vdp, span, y0, method="RK45", params=[1.0], rtol=1e-6)
    np.testing.assert_array_equal(res.y, plain.y)
    np.testing.assert_array_equal(res.nsteps, plain.nsteps)


@hjit
def lorenz(t, y, p):
    x, yy, z = y
    return (10.0 * (yy - x), x * (28.0 - z) - yy, x * yy - 8.0 / 3.0 * z)


lorenz_jacobian = jacobian(lorenz)


@hjit
def linearised(t, y, p):
    """dy/dt = J y, J the Lorenz Jacobian at the point (p[0], p[1], p[2])."""
    J = lorenz_jacobian(t, (p[0], p[1], p[2]), p)
    return (J[0] * y[0] + J[1] * y[1] + J[2] * y[2],
            J[3] * y[0] + J[4] * y[1] + J[5] * y[2],
            J[6] * y[0] + J[7] * y[1] + J[8] * y[2])


def test_the_jacobian_inside_a_kernel_is_the_lorenz_jacobian():
    from scipy.linalg import expm
    point = np.array([[1.0, 2.0, 20.0], [-3.0, 0.5, 10.0]])
    y0 = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 1.0]])
    res = solve_ivp(linearised, (0.0, 0.2), y0, params=point, rtol=1e-12, atol=1e-12)
    for i in range(2):
        x, y, z = point[i]
        J = np.array([[-10.0, 10.0, 0.0], [28.0 - z, -1.0, -x], [y, x, -8.0 / 3.0]])
        np.testing.assert_allclose(res.y[i][:, -1], expm(0.2 * J) @ y0[i], rtol=1e-9,
                                   atol=1e-10)


def test_stm_refuses_what_is_not_a_flag():
    with pytest.raises(TypeError, match="stm"):
        solve_ivp(vdp, (0.0, 1.0), [1.0, 0.0], params=[1.0], stm="yes")


def test_jacobian_rows_write_the_robertson_jacobian_into_rows():
    """The implicit methods' form: d f / d y written into rows of a 2-D array."""
    from hapsira_core.ivp.sensitivities import jacobian_rows

    @hjit
    def robertson(t, y, p):
        return (-0.04 * y[0] + 1e4 * y[1] * y[2],
                0.04 * y[0] - 1e4 * y[1] * y[2] - 3e7 * y[1] ** 2, 3e7 * y[1] ** 2)

    into = jacobian_rows(robertson, 3)
    y = np.array([0.9, 2.5e-5, 0.1])
    rows = np.full((4, 3), 7.0)
    if FMA:  # a real GPU: the device function runs in a one-thread kernel
        from numba import cuda

        @cuda.jit
        def one_thread(y, p, rows):
            into(0.0, y, p, rows)

        one_thread[1, 1](y, np.zeros(1), rows)
    else:
        into.py_func(0.0, y, np.zeros(1), rows)
    a, b, c = y
    expected = [[-0.04, 1e4 * c, 1e4 * b],
                [0.04, -1e4 * c - 6e7 * b, -1e4 * b],
                [0.0, 6e7 * b, 0.0]]
    np.testing.assert_allclose(rows[:3], expected, rtol=1e-15)
    assert (rows[3] == 7.0).all()  # rows past n untouched
