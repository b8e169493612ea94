"""The implicit methods' LU decompositions against LAPACK's (scipy.linalg)."""

import numpy as np
import pytest
import scipy.linalg

from hapsira_core.ivp import linalg


@pytest.mark.parametrize("n", [1, 2, 5, 12])
def test_real_lu_solves_as_lapack(n):
    rng = np.random.default_rng(n)
    for _ in range(5):
        a = rng.normal(size=(n, n)) * 10.0 ** rng.uniform(-3, 3, size=(n, 1))
        b = rng.normal(size=n)
        factors = a.copy()
        piv = np.zeros(n)
        assert linalg.lu_factor.py_func(factors, piv, n)
        lu, lapack_piv = scipy.linalg.lu_factor(a)
        np.testing.assert_array_equal(piv.astype(int), lapack_piv)  # the same pivots
        np.testing.assert_allclose(factors, lu, rtol=1e-12, atol=1e-12 * abs(lu).max())
        x = b.copy()
        linalg.lu_solve.py_func(factors, piv, x, n)
        np.testing.assert_allclose(x, scipy.linalg.lu_solve((lu, lapack_piv), b), rtol=1e-9)


@pytest.mark.parametrize("n", [1, 3, 8])
def test_complex_lu_solves_as_lapack(n):
    rng = np.random.default_rng(100 + n)
    a = rng.normal(size=(n, n)) + 1j * rng.normal(size=(n, n))
    b = rng.normal(size=n) + 1j * rng.normal(size=n)
    ar, ai, piv = a.real.copy(), a.imag.copy(), np.zeros(n)
    assert linalg.lu_factor_complex.py_func(ar, ai, piv, n)
    lu, lapack_piv = scipy.linalg.lu_factor(a)
    np.testing.assert_array_equal(piv.astype(int), lapack_piv)
    np.testing.assert_allclose(ar + 1j * ai, lu, rtol=1e-12, atol=1e-12)
    br, bi = b.real.copy(), b.imag.copy()
    linalg.lu_solve_complex.py_func(ar, ai, piv, br, bi, n)
    np.testing.assert_allclose(br + 1j * bi, np.linalg.solve(a, b), rtol=1e-10)


def test_singular_matrix_is_reported():
    a = np.array([[1.0, 2.0], [2.0, 4.0]])
    assert not linalg.lu_factor.py_func(a, np.zeros(2), 2)
    z = np.zeros((2, 2))
    assert not linalg.lu_factor_complex.py_func(z.copy(), z.copy(), np.zeros(2), 2)


def test_compiles_for_the_host():
    """The same source compiled by numba (the host targets' form of hjit code)."""
    import numba

    factor, solve = numba.njit(linalg.lu_factor.py_func), numba.njit(linalg.lu_solve.py_func)
    a = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]])
    b = np.array([1.0, 2.0, 3.0])
    factors, piv, x = a.copy(), np.zeros(3), b.copy()
    assert factor(factors, piv, 3)
    solve(factors, piv, x, 3)
    np.testing.assert_allclose(a @ x, b, rtol=1e-14)
