"""Step-size control options against scipy: ``max_step`` and ``first_step``."""

import math

import numpy as np
import pytest
from scipy.integrate import solve_ivp as scipy_solve_ivp

from hapsira_core.ivp import STEP_TOO_SMALL, solve_ivp
from hapsira_core.ivp import build
from hapsira_core.jit import hjit
from hapsira_core import settings

#: A real GPU contracts a * b + c into fused multiply-adds: last-bit differences may
#: move one accept/reject decision (the simulator and the host do not fuse).
FMA = settings.TARGET == "cuda" and not settings.cuda_simulator_enabled()

METHODS = ("DOP853", "RK45", "RK23")


@hjit
def van_der_pol(t, y, p):
    return (y[1], p[0] * (1.0 - y[0] * y[0]) * y[1] - y[0])


def van_der_pol_np(t, y, mu):
    return [y[1], mu * (1.0 - y[0] * y[0]) * y[1] - y[0]]


Y0 = np.array([[2.0, 0.0], [0.3, 1.1], [-1.2, 0.4]])
MUS = np.array([[0.8], [2.5], [5.0]])


def assert_as_scipy(res, t_span, method, t_eval=None, **options):
    for i in range(len(Y0)):
        ref = scipy_solve_ivp(van_der_pol_np, t_span, Y0[i], method=method, t_eval=t_eval,
                              args=(MUS[i, 0],), **options)
        obj = res[i]
        # backward, mu = 5 blows up in both (nfev then differs by the attempts on a
        # non-finite state: scipy's max(0.2, nan) shrinks the step, ours stops earlier)
        assert obj.status == ref.status, obj.message
        if ref.status != 0:
            continue
        # A real GPU fuses multiply-adds: one accept/reject decision may move, by one
        # step's evaluations (16 at most)
        slack = 16 if FMA else 0
        assert abs(int(obj.nfev) - ref.nfev) <= slack
        # the same steps; states apart by rounding, amplified at loose tolerances
        close = max(1e-11, 1e-5 * options.get("rtol", 1e-3))
        if t_eval is None:
            assert abs(int(obj.nsteps) - (len(ref.t) - 1)) <= (1 if FMA else 0)
            np.testing.assert_allclose(obj.y[:, -1], ref.y[:, -1], rtol=close, atol=close)
        else:
            np.testing.assert_allclose(obj.y, ref.y, rtol=close, atol=close)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("t_span", [(0.0, 8.0), (2.0, -0.5)])  # backward: unstable
def test_max_step_and_first_step_take_scipys_steps(method, t_span, simulated):
    cases = [dict(max_step=0.1), dict(max_step=0.73, rtol=1e-9, atol=1e-12),
             dict(first_step=1e-4), dict(first_step=0.5, rtol=1e-8, atol=1e-10),
             dict(first_step=2.0, max_step=0.4, rtol=1e-6),  # max_step caps first_step too
             dict(max_step=3.0, rtol=1e-10, atol=1e-12),
             dict(first_step=abs(t_span[1] - t_span[0]) / 4)]
    if simulated:
        cases = cases[:1] + cases[4:5]
    t_eval = np.linspace(*t_span, 6)
    for options in cases:
        res = solve_ivp(van_der_pol, t_span, Y0, method=method, params=MUS, **options)
        assert_as_scipy(res, t_span, method, **options)
        res = solve_ivp(van_der_pol, t_span, Y0, method=method, params=MUS, t_eval=t_eval,
                        **options)
        assert_as_scipy(res, t_span, method, t_eval=t_eval, **options)


def test_max_step_caps_every_step_and_first_step_costs_no_evaluation():
    res = solve_ivp(van_der_pol, (0.0, 10.0), Y0, params=MUS, max_step=0.25)
    assert (res.nsteps >= 40).all()
    auto = solve_ivp(van_der_pol, (0.0, 10.0), Y0, params=MUS, first_step=0.01)
    ref = scipy_solve_ivp(van_der_pol_np, (0.0, 10.0), Y0[0], method="DOP853", args=(0.8,))
    chosen = scipy_solve_ivp(van_der_pol_np, (0.0, 10.0), Y0[0], method="DOP853", args=(0.8,),
                             first_step=0.01)
    assert auto.nfev[0] == chosen.nfev != ref.nfev


def test_new_step_options_never_recompile():
    solve_ivp(van_der_pol, (0.0, 1.0), Y0, params=MUS)
    kernels = len(build.KERNELS)
    for max_step, first_step in [(0.1, None), (math.inf, 0.2), (0.05, 0.01)]:
        solve_ivp(van_der_pol, (0.0, 1.0), Y0, params=MUS, max_step=max_step,
                  first_step=first_step)
    assert len(build.KERNELS) == kernels


def test_max_step_below_the_spacing_of_t_fails_as_scipy_before_evaluating():
    # scipy: the first step is raised to 10 ulp (the cap comes before the raise only
    # for the step proposed after a step), the second refused before any evaluation
    ref = scipy_solve_ivp(van_der_pol_np, (1e6, 1e6 + 1.0), Y0[0], args=(0.8,), method="RK45",
                          max_step=1e-12)
    assert ref.status == -1 and ref.nfev == 2 + 6 and len(ref.t) == 2
    res = solve_ivp(van_der_pol, (1e6, 1e6 + 1.0), Y0[0], params=[0.8], method="RK45",
                    max_step=1e-12)
    assert res.status == STEP_TOO_SMALL and res.nfev == ref.nfev and res.nsteps == 1
    assert np.isnan(res.y).all()


@pytest.mark.parametrize("options, message", [
    (dict(max_step=0.0), r"max_step: must be positive \(as in scipy\), got 0.0"),
    (dict(max_step=-1.0), r"max_step: must be positive"),
    (dict(max_step=math.nan), r"max_step: must be positive"),
    (dict(max_step=[0.1, 0.2]), r"max_step: expected a positive number .* got shape \(2,\)"),
    (dict(first_step=0.0), r"first_step: must be positive \(as in scipy\), got 0.0"),
    (dict(first_step=-0.1), r"first_step: must be positive"),
    (dict(first_step=math.inf), r"first_step: must be positive"),
    (dict(first_step=2.5), r"first_step: exceeds the time span: 2.5 > \|tf - t0\| = 2.0"),
])
def test_bad_step_options_are_refused_naming_them(options, message):
    with pytest.raises(ValueError, match=message):
        solve_ivp(van_der_pol, (1.0, -1.0), Y0, params=MUS, **options)


def test_step_options_of_the_wrong_kind_are_type_errors():
    with pytest.raises(TypeError, match=r"max_step: expected a positive number"):
        solve_ivp(van_der_pol, (0.0, 1.0), Y0, params=MUS, max_step="1")
    with pytest.raises(TypeError, match=r"first_step: expected a positive number or None"):
        solve_ivp(van_der_pol, (0.0, 1.0), Y0, params=MUS, first_step=True)
