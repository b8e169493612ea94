"""Constant Jacobians: ``jac=`` a matrix (as scipy takes it), evaluated once by Radau,
BDF and Rodas5P, and Jacobians recognised constant from their source.

scipy is given the same matrix: then the accepted steps, ``nfev``, ``njev`` (0: a
matrix is never evaluated) and ``nlu`` are scipy's and the states agree to the Newton
tolerance. A Jacobian recognised constant (a function whose source reads neither t
nor y) is not a matrix: Radau and BDF evaluate it where scipy evaluates the same
function (scipy's callable path, its steps and counts); Rodas5P evaluates it once.
Problems: the heat equation on n points (method of lines, a linear stiff system with a constant tridiagonal Jacobian) with one diffusivity per object,
and Prothero & Robinson's y' = lambda (y - g(t)) + g'(t) (Hairer & Wanner II, Sec. IV.15).
"""

import math
import warnings

import numpy as np
import pytest
import scipy.linalg
import scipy.sparse
from scipy.integrate import solve_ivp as scipy_solve_ivp

from hapsira_core import settings
from hapsira_core.ivp import sensitivities, solve_ivp
from hapsira_core.jit import hjit

SIMULATED = settings.TARGET == "cuda" and settings.cuda_simulator_enabled()
N_POINTS = 8


@hjit
def heat(t, y, p, dydt):
    """u_t = p[0] u_xx on (0, 1), u(0) = 0, u(1) = 1, on N_POINTS inner points."""
    n = y.shape[0]
    scale = p[0] * (n + 1) ** 2
    for i in range(n):
        left = y[i - 1] if i > 0 else 0.0
        right = y[i + 1] if i < n - 1 else 1.0
        dydt[i] = scale * (left - 2.0 * y[i] + right)


def heat_matrix(diffusivity, n=N_POINTS):
    return diffusivity * (n + 1) ** 2 * (np.diag(np.full(n - 1, 1.0), -1)
                                         + np.diag(np.full(n, -2.0))
                                         + np.diag(np.full(n - 1, 1.0), 1))


def heat_np(diffusivity, n=N_POINTS):
    matrix = heat_matrix(diffusivity, n)
    boundary = np.zeros(n)
    boundary[-1] = diffusivity * (n + 1) ** 2
    return lambda t, y: matrix @ y + boundary


def heat_start(objects, seed=7):
    x = np.linspace(0.0, 1.0, N_POINTS + 2)[1:-1]
    rng = np.random.default_rng(seed)
    return np.sin(np.pi * x)[None, :] * rng.uniform(0.5, 2.0, (objects, 1))


@pytest.mark.parametrize("method", ["Radau", "BDF"])
def test_one_matrix_per_object_gives_scipys_steps_and_counts(method):
    """(N, n, n) matrices, each object its own diffusivity (stiffness ratio ~ n^2)."""
    diffusivity = np.array([0.3, 1.0, 2.5])[:2 if SIMULATED else 3]
    y0 = heat_start(len(diffusivity))
    matrices = np.stack([heat_matrix(d) for d in diffusivity])
    res = solve_ivp(heat, (0.0, 0.5), y0, method=method, rtol=1e-6, atol=1e-9,
                    params=diffusivity[:, None], jac=matrices, t_eval="steps")
    assert (res.status == 0).all()
    for i, d in enumerate(diffusivity):
        ref = scipy_solve_ivp(heat_np(d), (0.0, 0.5), y0[i], method=method, rtol=1e-6,
                              atol=1e-9, jac=heat_matrix(d))
        obj = res[i]
        # the same steps; their sizes and the states agree to the rounding of Newton's
        # iterates (the two LU codes differ in the last bits)
        assert obj.t.shape == ref.t.shape, (d, obj.t.size, ref.t.size)
        np.testing.assert_allclose(obj.t, ref.t, rtol=1e-9)
        np.testing.assert_allclose(obj.y, ref.y, rtol=1e-8, atol=1e-12)
        assert (res.nfev[i], res.njev[i], res.nlu[i]) == (ref.nfev, ref.njev, ref.nlu) \
            == (res.nfev[i], 0, res.nlu[i])
        # the truth: u = x + expm(A t) (u0 - x), x the steady state
        x = np.linspace(0.0, 1.0, N_POINTS + 2)[1:-1]
        exact = x + scipy.linalg.expm(heat_matrix(d) * 0.5) @ (y0[i] - x)
        assert np.abs(obj.y[:, -1] - exact).max() < 1e-5


def test_shared_matrix_and_a_sparse_one_are_the_same_numbers():
    y0 = heat_start(2, seed=11)
    matrix = heat_matrix(1.0)
    dense = solve_ivp(heat, (0.0, 0.2), y0, method="BDF", rtol=1e-6, atol=1e-9,
                      params=[1.0], jac=matrix)
    sparse = solve_ivp(heat, (0.0, 0.2), y0, method="BDF", rtol=1e-6, atol=1e-9,
                       params=[1.0], jac=scipy.sparse.csr_matrix(matrix))
    np.testing.assert_array_equal(dense.y, sparse.y)
    ref = scipy_solve_ivp(heat_np(1.0), (0.0, 0.2), y0[1], method="BDF", rtol=1e-6,
                          atol=1e-9, jac=scipy.sparse.csr_matrix(matrix))
    np.testing.assert_allclose(dense.y[1, :, -1], ref.y[:, -1], rtol=1e-8)
    assert dense.nsteps[1] == ref.t.size - 1 and dense.njev[1] == 0


# Prothero & Robinson: y' = lambda (y - g(t)) + g'(t), g = sin: exact solution sin(t)
@hjit
def prothero_robinson(t, y, p):
    return (p[0] * (y[0] - math.sin(t)) + math.cos(t),)


@pytest.mark.parametrize("method", ["Radau", "BDF"])
def test_automatic_jacobian_recognised_constant_takes_scipys_steps(method):
    """The automatic Jacobian of a fun affine in y is recognised constant: it takes
    scipy's steps with the same Jacobian as a callable (not as a matrix: that is only
    for jac= an array), evaluated again where scipy evaluates it again."""
    lam = np.array([[-1e4], [-50.0]])[:1 if SIMULATED else 2]
    y0 = np.full((len(lam), 1), 0.5)  # off the smooth solution: a fast transient first
    res = solve_ivp(prothero_robinson, (0.0, 3.0), y0, method=method, rtol=1e-7,
                    atol=1e-10, params=lam, t_eval="steps")
    assert sensitivities.constant_jacobian(sensitivities.jacobian_rows(
        prothero_robinson, 1)) == sensitivities.RECOGNISED
    assert (res.status == 0).all() and (res.njev >= 1).all()
    for i in range(len(lam)):
        fun = (lambda k: lambda t, y: [k * (y[0] - math.sin(t)) + math.cos(t)])(lam[i, 0])
        ref = scipy_solve_ivp(fun, (0.0, 3.0), y0[i], method=method, rtol=1e-7, atol=1e-10,
                              jac=(lambda k: lambda t, y: [[k]])(lam[i, 0]))
        # the same steps; past the transient the step sizes follow error norms near 1,
        # where sin and cos's last bits (libm here, numpy there) grow to 1e-7 of a step
        assert res[i].t.shape == ref.t.shape
        np.testing.assert_allclose(res[i].t, ref.t, rtol=1e-6)
        # the states against the exact solution sin(t) + 0.5 exp(lambda t), as scipy's
        exact = np.sin(res[i].t) + 0.5 * np.exp(lam[i, 0] * res[i].t)
        ours, theirs = (np.abs(res[i].y[0] - exact).max(),
                        np.abs(ref.y[0] - np.sin(ref.t) - 0.5 * np.exp(lam[i, 0] * ref.t)).max())
        assert ours < 1e-6 and ours < 1.01 * theirs + 1e-12, (ours, theirs)
        assert (res.nfev[i], res.njev[i], res.nlu[i]) == (ref.nfev, ref.njev, ref.nlu)
        assert abs(res[i].y[0, -1] - math.sin(3.0)) < 1e-6


@hjit
def prothero_robinson_rational(t, y, p):
    """y' = lambda (y - g(t)) + g'(t) with g = 1 / (1 + t): no sin or cos, whose last
    bits (libm here, numpy there) would move the step sizes apart from scipy's."""
    d = 1.0 + t
    return (p[0] * (y[0] - 1.0 / d) - 1.0 / (d * d),)


@hjit
def prothero_robinson_jac(t, y, p):  # reads p only: recognised constant
    return (p[0],)


@hjit
def forced_pair(t, y, p, dydt):
    """y' = A (y - g(t)) + g'(t), g = (1 / (1 + t), 1 / (2 + t)), A = [[-p0, p1], [-p1,
    -p2]]: a stiff linear pair with a rotation (complex eigenvalues where p1 is large)."""
    d1 = 1.0 + t
    d2 = 2.0 + t
    u = y[0] - 1.0 / d1
    v = y[1] - 1.0 / d2
    dydt[0] = -p[0] * u + p[1] * v - 1.0 / (d1 * d1)
    dydt[1] = -p[1] * u - p[2] * v - 1.0 / (d2 * d2)


@hjit
def forced_pair_jac(t, y, p, J):  # the array form, reading p only: recognised constant
    J[0, 0] = -p[0]
    J[0, 1] = p[1]
    J[1, 0] = -p[1]
    J[1, 1] = -p[2]


def _objects(problem, count):
    rng = np.random.default_rng(20)
    if problem == "prothero_robinson":
        params = -10.0 ** rng.uniform(2.0, 6.0, (count, 1))
        y0 = rng.uniform(-2.0, 2.0, (count, 1))
        return prothero_robinson_rational, prothero_robinson_jac, params, y0
    params = np.column_stack([10.0 ** rng.uniform(2.0, 5.0, count),
                              10.0 ** rng.uniform(0.0, 4.0, count),
                              10.0 ** rng.uniform(0.0, 3.0, count)])
    y0 = rng.uniform(-2.0, 2.0, (count, 2))
    return forced_pair, forced_pair_jac, params, y0


def _scipy_callable(problem, k):
    """scipy's fun and jac (a function) for the object of params ``k``."""
    if problem == "prothero_robinson":
        return (lambda t, y: [k[0] * (y[0] - 1.0 / (1.0 + t)) - 1.0 / ((1.0 + t) * (1.0 + t))],
                lambda t, y: [[k[0]]])
    a = np.array([[-k[0], k[1]], [-k[1], -k[2]]])

    def fun(t, y):
        d1, d2 = 1.0 + t, 2.0 + t
        u, v = y[0] - 1.0 / d1, y[1] - 1.0 / d2
        return [a[0, 0] * u + a[0, 1] * v - 1.0 / (d1 * d1),
                a[1, 0] * u + a[1, 1] * v - 1.0 / (d2 * d2)]
    return fun, lambda t, y: a


@pytest.mark.parametrize("problem", ["prothero_robinson", "forced_pair"])
@pytest.mark.parametrize("method", ["Radau", "BDF"])
def test_a_callable_jac_recognised_constant_takes_scipys_callable_steps(method, problem):
    """A jac= function whose source reads neither t nor y returns a constant matrix,
    and is recognised so; scipy, handed the same function, evaluates it again after
    Newton fails with an old one (and Radau after a slow convergence, which also
    decides its LU reuse and next step size), where a matrix it never evaluates
    again. Ours takes scipy's callable path: its steps, nfev, njev and nlu, object by
    object (before: the matrix path, BDF 0 of 20 Prothero-Robinson objects with
    scipy's steps)."""
    count = 3 if SIMULATED else 20
    fun, jac, params, y0 = _objects(problem, count)
    assert sensitivities.constant_jacobian(sensitivities.method_jacobian(
        fun, y0.shape[1], jac)) == sensitivities.RECOGNISED
    span, tol = (0.0, 2.0 if SIMULATED else 10.0), dict(rtol=1e-6, atol=1e-9)
    res = solve_ivp(fun, span, y0, method=method, params=params, jac=jac, t_eval="steps",
                    **tol)
    assert (res.status == 0).all()
    for i in range(count):
        scipy_fun, scipy_jac = _scipy_callable(problem, params[i])
        ref = scipy_solve_ivp(scipy_fun, span, y0[i], method=method, jac=scipy_jac, **tol)
        assert (res.nsteps[i], res.nfev[i], res.njev[i], res.nlu[i]) == (
            ref.t.size - 1, ref.nfev, ref.njev, ref.nlu), i
        # the same steps: their times and states part by rounding only, from the first
        # step's last bit (scipy's norms) grown by the step-size rule to at most 5e-8
        # of the span (2e-7 allowed); the end states agree to 4e-15 (1e-12 allowed)
        scale = np.abs(ref.y).max(axis=1)
        assert np.abs(res[i].t - ref.t).max() < 2e-7 * span[1], i
        assert (np.abs(res[i].y - ref.y).max(axis=1) / scale).max() < 2e-7, i
        assert (np.abs(res[i].y[:, -1] - ref.y[:, -1]) / scale).max() < 1e-12, i
    # evaluated again after t0 (what a matrix never is) for some objects: the runs
    # take the callable path's decisions, not only its first evaluation
    assert SIMULATED or (res.njev > 1).sum() >= 2, res.njev


def test_rodas_evaluates_a_constant_jacobian_once_with_the_same_numbers():
    """Recognised (automatic: J and df/dt of an autonomous linear fun; a user's jac=
    reading only p) or given (a matrix): evaluated once, and every step's numbers
    are those of evaluating the same matrix at every step."""
    y0 = heat_start(1, seed=3)

    @hjit
    def heat3(t, y, p):  # 3 points, tuple form: differentiated automatically
        s = p[0] * 16.0
        return (s * (-2.0 * y[0] + y[1]), s * (y[0] - 2.0 * y[1] + y[2]),
                s * (y[1] - 2.0 * y[2] + 1.0))

    @hjit
    def heat3_jac(t, y, p):
        s = p[0] * 16.0
        return (-2.0 * s, s, 0.0, s, -2.0 * s, s, 0.0, s, -2.0 * s)

    @hjit
    def heat3_jac_reading_y(t, y, p):
        s = p[0] * 16.0 + 0.0 * y[0]
        return (-2.0 * s, s, 0.0, s, -2.0 * s, s, 0.0, s, -2.0 * s)

    assert sensitivities.constant_jacobian(
        sensitivities.jacobian_with_time(heat3, 3)) == sensitivities.RECOGNISED
    assert sensitivities.constant_jacobian(
        sensitivities.method_jacobian(heat3, 3, heat3_jac)) == sensitivities.RECOGNISED
    assert sensitivities.constant_jacobian(
        sensitivities.method_jacobian(heat3, 3, heat3_jac_reading_y)) is None
    y0 = np.array([[0.2, 0.9, 0.4], [1.0, 0.5, 0.1]])
    common = dict(method="Rodas5P", rtol=1e-8, atol=1e-10, params=[[1.0], [3.0]])
    auto = solve_ivp(heat3, (0.0, 2.0), y0, **common)
    given = solve_ivp(heat3, (0.0, 2.0), y0, jac=heat3_jac, **common)
    every_step = solve_ivp(heat3, (0.0, 2.0), y0, jac=heat3_jac_reading_y, **common)
    matrices = np.stack([heat3_jac.py_func(0.0, None, np.array([k]))
                         for k in (1.0, 3.0)]).reshape(2, 3, 3)
    matrix = solve_ivp(heat3, (0.0, 2.0), y0, jac=matrices, **common)
    assert (auto.njev == 1).all() and (given.njev == 1).all() and (matrix.njev == 0).all()
    assert (every_step.njev >= every_step.nsteps).all()
    for res in (given, matrix):  # the same J and the same finite difference in t
        np.testing.assert_array_equal(res.y, every_step.y)
        np.testing.assert_array_equal(res.nsteps, every_step.nsteps)
    np.testing.assert_allclose(auto.y, every_step.y, rtol=1e-7)
    assert (auto.status == 0).all()


def test_the_source_decides_what_is_recognised():
    @hjit
    def affine(t, y, p):
        a = p[0] * 2.0
        return (a * y[0] + y[1] + t, -y[0] + p[1])

    @hjit
    def time_varying(t, y, p):
        return (math.cos(t) * y[0], y[0])

    @hjit
    def branch_on_y(t, y, p):
        if y[0] > 0.0:
            return (2.0 * y[0],)
        return (-y[0],)

    @hjit
    def array_jac_constant(t, y, p, J):
        for i in range(2):
            for j in range(2):
                J[i, j] = 0.0
        J[0, 0] = -p[0]

    @hjit
    def array_jac_of_y(t, y, p, J):
        K = J
        K[0, 0] = -p[0]
        K[1, 1] = y[1]

    assert sensitivities.constant_jacobian(
        sensitivities.jacobian_rows(affine, 2)) == sensitivities.RECOGNISED
    assert sensitivities.constant_jacobian(sensitivities.jacobian_rows(time_varying, 2)) is None
    assert sensitivities.constant_jacobian(sensitivities.jacobian_rows(branch_on_y, 1)) is None
    assert sensitivities.constant_jacobian(sensitivities.method_jacobian(
        affine, 2, array_jac_constant)) == sensitivities.RECOGNISED
    assert sensitivities.constant_jacobian(sensitivities.method_jacobian(
        affine, 2, array_jac_of_y)) is None


@pytest.mark.parametrize("jac, message", [
    (np.eye(3), r"jac: expected a constant matrix of shape \(n, n\) = \(2, 2\) or "
                r"\(N, n, n\) = \(4, 2, 2\), got shape \(3, 3\)"),
    (np.ones((3, 2, 2)), r"jac: expected .* got shape \(3, 2, 2\)"),
    (np.array([[1.0, np.nan], [0.0, 1.0]]), "jac: the constant matrix holds NaN"),
    (np.stack([np.eye(2)] * 3 + [np.full((2, 2), np.inf)]),
     "jac: the constant matrix of object 3 holds NaN or infinite"),
    (np.eye(2) * 1j, "jac: expected an hjit function or a constant matrix of real numbers, "
                     "got complex numbers"),
    ("eye", "jac: expected an hjit function or a constant matrix of real numbers, got text"),
])
def test_a_bad_matrix_is_refused_naming_jac(jac, message):
    @hjit
    def decay(t, y, p):
        return (-y[0], -2.0 * y[1])

    with pytest.raises((ValueError, TypeError), match=message):
        solve_ivp(decay, (0.0, 1.0), np.ones((4, 2)), method="Radau", jac=jac)


def test_explicit_methods_warn_and_ignore_a_matrix_as_scipy():
    @hjit
    def decay(t, y, p):
        return (-y[0],)

    with pytest.warns(UserWarning, match="no effect for a chosen solver: `jac`"):
        res = solve_ivp(decay, (0.0, 1.0), [1.0], method="RK45", jac=[[-1.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plain = solve_ivp(decay, (0.0, 1.0), [1.0], method="RK45")
    np.testing.assert_array_equal(res.y, plain.y)
