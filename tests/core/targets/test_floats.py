"""Subnormal numbers survive whatever thread runs an object (targets/_floats.py).

A problem whose state decays into the subnormal range (1e-305 * exp(-20) is
2e-314) is solved once from a thread that flushes subnormals to zero, as
XLA's threads do, and once from an IEEE thread: the numbers must be the same
bit for bit, scipy's to its tolerance, and the JAX front (which runs on XLA's
threads) must give the numpy front's numbers. Before the fix the JAX front
and any numba worker started from it gave 7.28e-307 where scipy gives
8.58e-307 (test_properties' orbit with an 8.6e-308 km/s z velocity).
"""

import numpy as np
import pytest
from extras import need
from scipy.integrate import solve_ivp as scipy_solve_ivp

from hapsira_core import settings
from hapsira_core.ivp import solve_ivp
from hapsira_core.jit import hjit
from hapsira_core.targets._floats import _FTZ_DAZ, _X86, flush_subnormals, restore_mode

pytestmark = pytest.mark.skipif(not _X86, reason="the FTZ/DAZ flags are x86's")

SIM = settings.TARGET == "cuda" and settings.cuda_simulator_enabled()
Y0 = np.array([[1e-305, 3e-306], [2.5e-305, -1e-304], [7e-306, 4e-305]])
SPAN = (0.0, 20.0)
T_EVAL = np.linspace(5.0, 20.0, 4)
# at least the smallest normal: hapsira never scales errors below it (scipy does)
ATOL = 1e-306


@hjit
def decay(t, y, p):
    return (-y[0] + 0.1 * y[1], -0.5 * y[1])


def _ours():
    return solve_ivp(decay, SPAN, Y0, method="RK45", t_eval=T_EVAL, rtol=1e-9, atol=ATOL)


def _flushed(call):
    """``call()`` on this thread with FTZ and DAZ set; the mode put back after."""
    saved = flush_subnormals()
    try:
        result = call()
        assert flush_subnormals() & _FTZ_DAZ == _FTZ_DAZ, "the caller's mode was not restored"
    finally:
        restore_mode(saved)
    return result


def test_flushing_changes_plain_arithmetic():
    # the flag works: numba code under it flushes (so the test below can fail)
    from numba import njit

    @njit
    def half(x):
        return x * 0.5

    assert half(1e-308) == 5e-309
    assert _flushed(lambda: half(1e-308)) == 0.0


def test_a_flushing_caller_gets_the_ieee_numbers_and_scipys():
    ieee = _ours()
    flushed = _flushed(_ours)
    np.testing.assert_array_equal(flushed.y, ieee.y)
    np.testing.assert_array_equal(flushed.nsteps, ieee.nsteps)
    assert (ieee.status == 0).all()
    assert (0.0 < np.abs(ieee.y[:, :, -1])).all()
    assert (np.abs(ieee.y[:, 1, -1]) < 2.2250738585072014e-308).all()  # subnormal
    def f(t, y):
        return [-y[0] + 0.1 * y[1], -0.5 * y[1]]

    for i, y0 in enumerate(Y0):
        steps = scipy_solve_ivp(f, SPAN, y0, method="RK45", rtol=1e-9, atol=ATOL)
        assert ieee.nsteps[i] == len(steps.t) - 1
        reference = scipy_solve_ivp(f, SPAN, y0, method="RK45", t_eval=T_EVAL, rtol=1e-9,
                                    atol=ATOL)
        # (subnormal intermediates keep fewer digits: 2e-12 apart seen)
        np.testing.assert_allclose(ieee.y[i], reference.y, rtol=1e-10, atol=0)


def test_the_jax_front_on_xla_threads_gives_the_numpy_numbers(monkeypatch):
    jax = need("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    import hapsira_core.fronts.jax as front
    import hapsira_core.jax as hcj
    from hapsira_core.fronts.jax import xla

    if SIM:  # no XLA GPU platform: the CUDA launcher on XLA's CPU buffers
        kernels = {}

        def simulated(kernel, what):
            key = id(kernel)
            if key not in kernels:
                kernels[key] = (kernel, xla.XlaKernel(kernel, what, simulator_on_cpu=True))
            return kernels[key][1]
        monkeypatch.setattr(front, "xla_kernel", simulated)
    got = hcj.solve_ivp(decay, SPAN, jnp.asarray(Y0), method="RK45",
                        t_eval=jnp.asarray(T_EVAL), rtol=1e-9, atol=ATOL)
    np.testing.assert_array_equal(np.asarray(got.y), _ours().y)
