"""method="Radau" against scipy's Radau on the stiff test problems, object by object.

scipy is given the exact Jacobian (``jac=``), the one ours derives automatically
from ``fun``, so that both iterate with the same matrix: then the accepted steps,
``nfev``, ``njev`` and ``nlu`` are equal and the states agree to rounding.
Problems from Hairer & Wanner, *Solving ODEs II* (Sec. IV.10) and the IVP test
set of Mazzia & Magherini (Bari).
"""

import math

import numpy as np
import pytest
from scipy.integrate import solve_ivp as scipy_solve_ivp

from hapsira_core import settings
from hapsira_core.ivp import Event, solve_ivp
from hapsira_core.ivp.layout import JACOBIAN_NOT_FINITE, STATUS_MESSAGES, STEP_TOO_SMALL
from hapsira_core.jit import hjit

SIMULATED = settings.TARGET == "cuda" and settings.cuda_simulator_enabled()


# Robertson's chemical kinetics, rate constants in p (0.04, 1e4, 3e7)
@hjit
def robertson(t, y, p):
    return (-p[0] * y[0] + p[1] * y[1] * y[2],
            p[0] * y[0] - p[1] * y[1] * y[2] - p[2] * y[1] * y[1],
            p[2] * y[1] * y[1])


def robertson_np(p):
    def fun(t, y):
        return [-p[0] * y[0] + p[1] * y[1] * y[2],
                p[0] * y[0] - p[1] * y[1] * y[2] - p[2] * y[1] ** 2, p[2] * y[1] ** 2]

    def jac(t, y):
        return [[-p[0], p[1] * y[2], p[1] * y[1]],
                [p[0], -p[1] * y[2] - 2 * p[2] * y[1], -p[1] * y[1]],
                [0.0, 2 * p[2] * y[1], 0.0]]
    return fun, jac


# Van der Pol, unscaled: y0'' = mu (1 - y0^2) y0' - y0, mu = p[0]
@hjit
def van_der_pol(t, y, p):
    return (y[1], p[0] * (1.0 - y[0] * y[0]) * y[1] - y[0])


def van_der_pol_np(p):
    def fun(t, y):
        return [y[1], p[0] * (1.0 - y[0] ** 2) * y[1] - y[0]]

    def jac(t, y):
        return [[0.0, 1.0], [-2.0 * p[0] * y[0] * y[1] - 1.0, p[0] * (1.0 - y[0] ** 2)]]
    return fun, jac


# OREGO: the Oregonator (Field & Noyes), n = 3
@hjit
def orego(t, y, p):
    return (77.27 * (y[1] + y[0] * (1.0 - 8.375e-6 * y[0] - y[1])),
            (y[2] - (1.0 + y[0]) * y[1]) / 77.27,
            0.161 * (y[0] - y[2]))


def orego_np(p):
    def fun(t, y):
        return [77.27 * (y[1] + y[0] * (1.0 - 8.375e-6 * y[0] - y[1])),
                (y[2] - (1.0 + y[0]) * y[1]) / 77.27, 0.161 * (y[0] - y[2])]

    def jac(t, y):
        return [[77.27 * (1.0 - 2 * 8.375e-6 * y[0] - y[1]), 77.27 * (1.0 - y[0]), 0.0],
                [-y[1] / 77.27, -(1.0 + y[0]) / 77.27, 1.0 / 77.27],
                [0.161, 0.0, -0.161]]
    return fun, jac


# HIRES: plant physiology (Schaefer 1975), n = 8
@hjit
def hires(t, y, p):
    return (-1.71 * y[0] + 0.43 * y[1] + 8.32 * y[2] + 0.0007,
            1.71 * y[0] - 8.75 * y[1],
            -10.03 * y[2] + 0.43 * y[3] + 0.035 * y[4],
            8.32 * y[1] + 1.71 * y[2] - 1.12 * y[3],
            -1.745 * y[4] + 0.43 * y[5] + 0.43 * y[6],
            -280.0 * y[5] * y[7] + 0.69 * y[3] + 1.71 * y[4] - 0.43 * y[5] + 0.69 * y[6],
            280.0 * y[5] * y[7] - 1.81 * y[6],
            -280.0 * y[5] * y[7] + 1.81 * y[6])


def hires_np(p):
    def fun(t, y):
        return [-1.71 * y[0] + 0.43 * y[1] + 8.32 * y[2] + 0.0007,
                1.71 * y[0] - 8.75 * y[1],
                -10.03 * y[2] + 0.43 * y[3] + 0.035 * y[4],
                8.32 * y[1] + 1.71 * y[2] - 1.12 * y[3],
                -1.745 * y[4] + 0.43 * y[5] + 0.43 * y[6],
                -280.0 * y[5] * y[7] + 0.69 * y[3] + 1.71 * y[4] - 0.43 * y[5] + 0.69 * y[6],
                280.0 * y[5] * y[7] - 1.81 * y[6],
                -280.0 * y[5] * y[7] + 1.81 * y[6]]

    def jac(t, y):
        J = np.zeros((8, 8))
        J[0, :3] = -1.71, 0.43, 8.32
        J[1, :2] = 1.71, -8.75
        J[2, 2:5] = -10.03, 0.43, 0.035
        J[3, 1:4] = 8.32, 1.71, -1.12
        J[4, 4:7] = -1.745, 0.43, 0.43
        J[5, 3:8] = 0.69, 1.71, -0.43 - 280.0 * y[7], 0.69, -280.0 * y[5]
        J[6, 5:8] = 280.0 * y[7], -1.81, 280.0 * y[5]
        J[7, 5:8] = -280.0 * y[7], 1.81, -280.0 * y[5]
        return J
    return fun, jac


HIRES_Y0 = [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0057]

# name: (fun, scipy's fun and jac, y0 of the objects (the first one only under the
# simulator), params, t_span, rtol, atol, how close the end states must be in units of
# the error scale atol + rtol |y|). The spans are the test set's where the simulator
# allows (shorter there) and where scipy's and our step sequences stay equal: both
# compute the same numbers in another order (numpy's BLAS, LAPACK, FMA), the step sizes
# differ from about the tenth step at 1e-13 relative (the error estimate cancels), and
# over a thousand steps such a difference can flip a decision on a threshold. Measured:
# OREGO to t = 360, y0 (1, 2, 3), first differs at step 540 (1039 steps in all, ours 1041);
# Van der Pol mu = 1000 from (1.5, 0.5) at step 38 (Newton fails on a step of 13.9).
PROBLEMS = {
    "robertson": (robertson, robertson_np,
                  [[1.0, 0.0, 0.0], [0.9, 0.1, 0.0], [0.5, 0.0, 0.5]],
                  [[0.04, 1e4, 3e7], [0.05, 1e4, 3e7], [0.04, 2e4, 2e7]],
                  (0.0, 40.0 if SIMULATED else 1e5), 1e-6, 1e-10, 1e-4),
    "van_der_pol_mu1000": (van_der_pol, van_der_pol_np,
                           [[2.0, 0.0], [1.0, 0.0], [2.0, 0.0], [-2.0, 0.1]],
                           [[1000.0], [1000.0], [500.0], [800.0]],
                           (0.0, 500.0 if SIMULATED else 3000.0), 1e-6, 1e-6, 1e-2),
    "orego": (orego, orego_np, [[1.0, 2.0, 3.0], [2.0, 2.0, 3.0], [1.0, 1.0, 1.0]],
              None, (0.0, 10.0 if SIMULATED else 50.0), 1e-6, 1e-8, 1e-4),
    "hires": (hires, hires_np, [HIRES_Y0, [1.0, 0.1] + HIRES_Y0[2:], HIRES_Y0[:7] + [0.006]],
              None, (0.0, 5.0 if SIMULATED else 321.8122), 1e-7, 1e-9, 1e-4),
}


def objects(y0, params):
    count = 1 if SIMULATED else len(y0)
    y0 = np.array(y0[:count], dtype=float)
    params = None if params is None else np.array(params[:count], dtype=float)
    return y0, params


@pytest.mark.parametrize("name", PROBLEMS)
def test_stiff_problems_match_scipy_step_for_step(name):
    fun, reference, y0, params, t_span, rtol, atol, close = PROBLEMS[name]
    y0, params = objects(y0, params)
    res = solve_ivp(fun, t_span, y0, method="Radau", rtol=rtol, atol=atol, params=params)
    for i in range(len(y0)):
        scipy_fun, jac = reference(None if params is None else params[i])
        ref = scipy_solve_ivp(scipy_fun, t_span, y0[i], method="Radau", rtol=rtol, atol=atol,
                              jac=jac)
        obj = res[i]
        assert ref.status == 0 and obj.status == 0, obj.message
        assert obj.nsteps == len(ref.t) - 1
        assert (obj.nfev, obj.njev, obj.nlu) == (ref.nfev, ref.njev, ref.nlu)
        # the states: agreement far below the tolerances (rounding, grown by the problem)
        scale = atol + rtol * np.abs(ref.y[:, -1])
        assert np.max(np.abs(obj.y[:, -1] - ref.y[:, -1]) / scale) < close
        assert obj.njev > 1 and obj.nlu > 2  # the reuse logic was exercised


def test_counts_on_a_robertson_run():
    """Measured once against scipy 1.17 (Radau, rtol 1e-6, atol 1e-10, exact jac):
    Robertson to t = 40 takes 78 steps, 647 evaluations of fun, 18 Jacobians, 100 LU."""
    res = solve_ivp(robertson, (0.0, 40.0), [1.0, 0.0, 0.0], method="Radau", rtol=1e-6,
                    atol=1e-10, params=[0.04, 1e4, 3e7])
    assert (res.nsteps, res.nfev, res.njev, res.nlu) == (78, 647, 18, 100)
    # y(40) of the test problem (Hairer & Wanner II, Sec. IV.10)
    np.testing.assert_allclose(res.y[:, -1], [0.7158270687, 9.185534765e-6, 0.2841637457],
                               rtol=1e-5)


@hjit
def y0_crossing(t, y, p):
    return y[0] - 0.8


def test_t_eval_and_events_from_the_collocation_polynomial():
    t_eval = np.array([0.0, 1e-3, 0.5, 3.0, 7.5, 20.0, 40.0])
    p = [0.04, 1e4, 3e7]
    res = solve_ivp(robertson, (0.0, 40.0), [1.0, 0.0, 0.0], method="Radau", t_eval=t_eval,
                    rtol=1e-6, atol=1e-10, params=p, events=[Event(y0_crossing)])
    fun, jac = robertson_np(p)
    ref = scipy_solve_ivp(fun, (0.0, 40.0), [1.0, 0.0, 0.0], method="Radau", t_eval=t_eval,
                          rtol=1e-6, atol=1e-10, jac=jac, events=lambda t, y: y[0] - 0.8)
    obj = res[0]
    assert obj.nsteps == 78  # as without output times (test_counts_on_a_robertson_run)
    assert (obj.nfev, obj.njev, obj.nlu) == (ref.nfev, ref.njev, ref.nlu)
    np.testing.assert_allclose(obj.y, ref.y, rtol=1e-9, atol=1e-16)
    assert len(obj.t_events[0]) == 1 == len(ref.t_events[0])
    np.testing.assert_allclose(obj.t_events[0], ref.t_events[0], rtol=1e-10)
    np.testing.assert_allclose(obj.y_events[0], ref.y_events[0], rtol=1e-9, atol=1e-16)
    assert 7.5 < obj.t_events[0][0] < 20.0  # y0 falls through 0.8 between these


def test_terminal_event_stops_the_object():
    p = [0.04, 1e4, 3e7]
    res = solve_ivp(robertson, (0.0, 40.0), [1.0, 0.0, 0.0], method="Radau",
                    t_eval=[7.5, 30.0], rtol=1e-6, atol=1e-10, params=p,
                    events=[Event(y0_crossing, terminal=True)])
    fun, jac = robertson_np(p)
    ref = scipy_solve_ivp(fun, (0.0, 40.0), [1.0, 0.0, 0.0], method="Radau", rtol=1e-6,
                          atol=1e-10, jac=jac, t_eval=[7.5, 30.0],
                          events=_terminal(lambda t, y: y[0] - 0.8))
    assert res.status == 1 and ref.status == 1
    np.testing.assert_allclose(res.y[:, 0], ref.y[:, 0], rtol=1e-9)
    assert np.isnan(res.y[:, 1]).all() and ref.y.shape == (3, 1)  # stopped before t = 30
    assert (res.nfev, res.njev, res.nlu) == (ref.nfev, ref.njev, ref.nlu)
    np.testing.assert_allclose(res.t_events[0][0], ref.t_events[0][0], rtol=1e-10)


def _terminal(g):
    g.terminal = True
    return g


def test_backward_integration_matches_scipy():
    mu = [5.0]
    res = solve_ivp(van_der_pol, (10.0, 0.0), [2.0, 0.0], method="Radau", rtol=1e-8,
                    atol=1e-8, params=mu)
    fun, jac = van_der_pol_np(mu)
    ref = scipy_solve_ivp(fun, (10.0, 0.0), [2.0, 0.0], method="Radau", rtol=1e-8,
                          atol=1e-8, jac=jac)
    assert res.status == 0 and res.nsteps == len(ref.t) - 1
    assert (res.nfev, res.njev, res.nlu) == (ref.nfev, ref.njev, ref.nlu)
    np.testing.assert_allclose(res.y[:, -1], ref.y[:, -1], rtol=1e-9, atol=1e-12)


def test_max_step_and_first_step_as_scipy():
    p = [0.04, 1e4, 3e7]
    options = {"method": "Radau", "rtol": 1e-6, "atol": 1e-10, "max_step": 2.0,
               "first_step": 1e-4}
    res = solve_ivp(robertson, (0.0, 40.0), [1.0, 0.0, 0.0], params=p, **options)
    fun, jac = robertson_np(p)
    ref = scipy_solve_ivp(fun, (0.0, 40.0), [1.0, 0.0, 0.0], jac=jac, **options)
    assert res.nsteps == len(ref.t) - 1 > 20  # at least 40 / 2 steps
    assert (res.nfev, res.njev, res.nlu) == (ref.nfev, ref.njev, ref.nlu)
    np.testing.assert_allclose(res.y[:, -1], ref.y[:, -1], rtol=1e-9)


@hjit
def blow_up(t, y, p):
    return (p[0] * y[0] * y[0],)


def test_a_failing_object_fails_alone():
    """y' = y^2 from y(0) = 1 reaches infinity at t = 1: Newton fails, the step size
    falls below 10 ulp, as in scipy; the object beside it (from -1) is unaffected."""
    res = solve_ivp(blow_up, (0.0, 2.0), [[1.0], [-1.0]], method="Radau", params=[[1.0]] * 2)
    assert res.status[0] == STEP_TOO_SMALL and res.status[1] == 0
    ref = scipy_solve_ivp(lambda t, y: [y[0] ** 2], (0.0, 2.0), [1.0], method="Radau",
                          jac=lambda t, y: [[2 * y[0]]])
    assert ref.status == -1
    assert res.nsteps[0] == len(ref.t) - 1
    np.testing.assert_allclose(res.y[1, 0, -1], -1.0 / 3.0, rtol=1e-3)  # y = -1 / (1 + t)
    ok = scipy_solve_ivp(lambda t, y: [y[0] ** 2], (0.0, 2.0), [-1.0], method="Radau",
                         jac=lambda t, y: [[2 * y[0]]])
    assert res.nsteps[1] == len(ok.t) - 1 and res.nfev[1] == ok.nfev


@hjit
def decay_rows(t, y, p, dydt):
    dydt[0] = -y[0]


def test_array_form_fun_names_jac():
    with pytest.raises(ValueError, match="jac"):
        solve_ivp(decay_rows, (0.0, 1.0), [1.0], method="Radau")


@hjit
def robertson_jac(t, y, p):
    return (-p[0], p[1] * y[2], p[1] * y[1],
            p[0], -p[1] * y[2] - 2.0 * p[2] * y[1], -p[1] * y[1],
            0.0, 2.0 * p[2] * y[1], 0.0)


@hjit
def robertson_rows(t, y, p, dydt):
    dydt[0] = -p[0] * y[0] + p[1] * y[1] * y[2]
    dydt[1] = p[0] * y[0] - p[1] * y[1] * y[2] - p[2] * y[1] * y[1]
    dydt[2] = p[2] * y[1] * y[1]


@hjit
def robertson_jac_rows(t, y, p, J):
    J[0, 0] = -p[0]
    J[0, 1] = p[1] * y[2]
    J[0, 2] = p[1] * y[1]
    J[1, 0] = p[0]
    J[1, 1] = -p[1] * y[2] - 2.0 * p[2] * y[1]
    J[1, 2] = -p[1] * y[1]
    J[2, 0] = 0.0
    J[2, 1] = 2.0 * p[2] * y[1]
    J[2, 2] = 0.0


@pytest.mark.parametrize("form", ["tuple", "array"])
def test_a_given_jac_as_scipy_s(form):
    """jac= (either form; with the array form of fun too) is the matrix scipy gets:
    Robertson to t = 40 as in test_counts_on_a_robertson_run."""
    fun, jac = (robertson, robertson_jac) if form == "tuple" else (
        robertson_rows, robertson_jac_rows)
    p = [0.04, 1e4, 3e7]
    res = solve_ivp(fun, (0.0, 40.0), [1.0, 0.0, 0.0], method="Radau", rtol=1e-6,
                    atol=1e-10, params=p, jac=jac)
    scipy_fun, scipy_jac = robertson_np(p)
    ref = scipy_solve_ivp(scipy_fun, (0.0, 40.0), [1.0, 0.0, 0.0], method="Radau",
                          rtol=1e-6, atol=1e-10, jac=scipy_jac)
    assert res.nsteps == len(ref.t) - 1 == 78
    assert (res.nfev, res.njev, res.nlu) == (ref.nfev, ref.njev, ref.nlu)
    np.testing.assert_allclose(res.y[:, -1], ref.y[:, -1], rtol=1e-9)


@hjit
def robertson_jac_nan_from(t, y, p):
    """Robertson's Jacobian, with a NaN entry from t = p[3] on."""
    bad = math.nan if t >= p[3] else 0.0
    return (-p[0] + bad, p[1] * y[2], p[1] * y[1],
            p[0], -p[1] * y[2] - 2.0 * p[2] * y[1], -p[1] * y[1],
            0.0, 2.0 * p[2] * y[1], 0.0)


def test_a_jacobian_not_finite_stops_its_object_naming_the_jacobian():
    """A jac= with NaN from t0 or from t = 1 on stops that object with its own status
    and a message naming the Jacobian (before: "step size fell below 10 ulp", status
    -1, after Newton failed on it at every halved step); the object whose jac stays
    finite takes scipy's 78 steps with its counts, its numbers those of a run alone."""
    params = np.array([[0.04, 1e4, 3e7, math.inf], [0.04, 1e4, 3e7, 0.0],
                       [0.04, 1e4, 3e7, 1.0]])
    y0 = np.array([[1.0, 0.0, 0.0]] * 3)
    options = dict(method="Radau", rtol=1e-6, atol=1e-10, jac=robertson_jac_nan_from)
    res = solve_ivp(robertson, (0.0, 40.0), y0, params=params, **options)
    np.testing.assert_array_equal(res.status, [0, JACOBIAN_NOT_FINITE, JACOBIAN_NOT_FINITE])
    assert JACOBIAN_NOT_FINITE < 0 and not res.success[1:].any()
    message = res.messages()[1]
    assert message == STATUS_MESSAGES[JACOBIAN_NOT_FINITE] and "Jacobian (jac" in message
    assert res.nsteps[1] == 0 and 0 < res.nsteps[2] < 78
    assert np.isnan(res.y[1:, :, -1]).all()  # tf not reached
    alone = solve_ivp(robertson, (0.0, 40.0), y0[:1], params=params[:1], **options)
    scipy_fun, scipy_jac = robertson_np(params[0, :3])
    ref = scipy_solve_ivp(scipy_fun, (0.0, 40.0), y0[0], method="Radau", rtol=1e-6,
                          atol=1e-10, jac=scipy_jac)
    assert res.nsteps[0] == len(ref.t) - 1 == 78
    assert (res.nfev[0], res.njev[0], res.nlu[0]) == (ref.nfev, ref.njev, ref.nlu)
    np.testing.assert_array_equal(res.y[0], alone.y[0])


def test_a_fun_without_readable_source_names_jac():
    # a lambda inside an expression: its own source cannot be told from the line's
    with pytest.raises(ValueError, match="jac: method='Radau'.*source"):
        solve_ivp(hjit(lambda t, y, p: (-y[0],)), (0.0, 1.0), [1.0], method="Radau")


def test_stm_is_refused_naming_it():
    with pytest.raises(ValueError, match="stm: method='Radau'"):
        solve_ivp(van_der_pol, (0.0, 1.0), [2.0, 0.0], method="Radau", params=[1.0], stm=True)


def test_explicit_methods_report_no_jacobians():
    res = solve_ivp(van_der_pol, (0.0, 1.0), [2.0, 0.0], method="RK45", params=[1.0])
    assert res.njev == 0 and res.nlu == 0
    assert math.isfinite(res.y[0, -1])
