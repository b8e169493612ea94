"""method="BDF" against scipy's BDF on the stiff test set (Hairer & Wanner, *Solving ODEs
II*, Sec. IV.10: Robertson, Van der Pol, HIRES, OREGO).

scipy is handed the exact Jacobian (written out below), so that both use the same J
(ours: the automatic derivative of the same function). On the host targets and the
simulator the accepted steps, nfev, njev and nlu are scipy's, the states scipy's to
near rounding.
"""

import math

import numpy as np
import pytest
from scipy.integrate import solve_ivp as scipy_solve_ivp

from hapsira_core.ivp import Event, solve_ivp
from hapsira_core.ivp.layout import JACOBIAN_NOT_FINITE, STATUS_MESSAGES, STEP_TOO_SMALL
from hapsira_core.jit import hjit


@hjit
def robertson(t, y, p):
    return (-0.04 * y[0] + 1e4 * y[1] * y[2],
            0.04 * y[0] - 1e4 * y[1] * y[2] - 3e7 * y[1] * y[1],
            3e7 * y[1] * y[1])


def robertson_jac(t, y, p):
    return np.array([[-0.04, 1e4 * y[2], 1e4 * y[1]],
                     [0.04, -1e4 * y[2] - 6e7 * y[1], -1e4 * y[1]],
                     [0.0, 6e7 * y[1], 0.0]])


@hjit
def van_der_pol(t, y, p):  # unscaled, mu = p[0] (Hairer & Wanner II, eq. IV.1.5')
    return (y[1], p[0] * (1.0 - y[0] * y[0]) * y[1] - y[0])


def van_der_pol_jac(t, y, p):
    mu = p[0]
    return np.array([[0.0, 1.0], [-2.0 * mu * y[0] * y[1] - 1.0, mu * (1.0 - y[0] * y[0])]])


@hjit
def orego(t, y, p):
    return (77.27 * (y[1] + y[0] * (1.0 - 8.375e-6 * y[0] - y[1])),
            (y[2] - (1.0 + y[0]) * y[1]) / 77.27,
            0.161 * (y[0] - y[2]))


def orego_jac(t, y, p):
    return np.array([[77.27 * (1.0 - 2 * 8.375e-6 * y[0] - y[1]), 77.27 * (1.0 - y[0]), 0.0],
                     [-y[1] / 77.27, -(1.0 + y[0]) / 77.27, 1.0 / 77.27],
                     [0.161, 0.0, -0.161]])


@hjit
def hires(t, y, p):
    y1, y2, y3, y4, y5, y6, y7, y8 = y
    r = 280.0 * y6 * y8
    return (-1.71 * y1 + 0.43 * y2 + 8.32 * y3 + 0.0007,
            1.71 * y1 - 8.75 * y2,
            -10.03 * y3 + 0.43 * y4 + 0.035 * y5,
            8.32 * y2 + 1.71 * y3 - 1.12 * y4,
            -1.745 * y5 + 0.43 * y6 + 0.43 * y7,
            -r + 0.69 * y4 + 1.71 * y5 - 0.43 * y6 + 0.69 * y7,
            r - 1.81 * y7,
            -r + 1.81 * y7)


def hires_jac(t, y, p):
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


#: name: (fun, its Jacobian for scipy, y0, t_span, params, tolerances)
PROBLEMS = {
    "robertson": (robertson, robertson_jac, [1.0, 0.0, 0.0], (0.0, 1e3), [0.0],
                  {"rtol": 1e-6, "atol": 1e-10}),
    "van_der_pol": (van_der_pol, van_der_pol_jac, [2.0, 0.0], (0.0, 2000.0), [1000.0],
                    {"rtol": 1e-6, "atol": 1e-8}),
    "hires": (hires, hires_jac, [1.0, 0, 0, 0, 0, 0, 0, 0.0057], (0.0, 321.8122), [0.0],
              {"rtol": 1e-6, "atol": 1e-9}),
    # OREGO to 60 (689 steps): further on, rounding (scipy's BLAS/LAPACK sum in another
    # order) moves one accept/reject decision (t = 120: 760 steps against 759)
    "orego": (orego, orego_jac, [1.0, 2.0, 3.0], (0.0, 60.0), [0.0],
              {"rtol": 1e-6, "atol": 1e-8}),
}
SHORT = {"van_der_pol": 100.0, "hires": 5.0, "orego": 3.0, "robertson": 10.0}


def scipy_bdf(name, y0=None, params=None, t_span=None, t_eval=None, events=None, **options):
    fun, jac, y0_, span, params_, tol = PROBLEMS[name]
    p = np.asarray(params_ if params is None else params, dtype=float)
    py = fun.py_func
    return scipy_solve_ivp(lambda t, y: np.array(py(t, y, p)), t_span or span,
                           np.asarray(y0_ if y0 is None else y0, dtype=float), method="BDF",
                           jac=lambda t, y: jac(t, y, p), t_eval=t_eval, events=events,
                           **{**tol, **options})


@pytest.mark.parametrize("name", list(PROBLEMS))
def test_steps_counts_and_states_equal_scipy(name, simulated):
    fun, _, y0, span, params, tol = PROBLEMS[name]
    if simulated:  # the simulator interprets every thread in Python: a short span
        span = (span[0], SHORT[name])
    t_eval = np.linspace(span[0], span[1], 7)
    expected = scipy_bdf(name, t_span=span, t_eval=t_eval)
    steps = len(scipy_bdf(name, t_span=span).t) - 1
    res = solve_ivp(fun, span, np.array(y0), method="BDF", t_eval=t_eval, params=params, **tol)
    assert res.status == 0, res.messages()
    assert steps > 20  # a real stiff run, not a trivial one
    assert (res.nsteps, res.nfev, res.njev, res.nlu) == (
        steps, expected.nfev, expected.njev, expected.nlu)
    # each component to 1e-8 of its own size over the run (Robertson's y2 is ~1e-5): the
    # same steps, rounding apart (Van der Pol's sharp turns amplify it to 1.5e-9)
    scale = np.abs(expected.y).max(axis=1, keepdims=True)
    error = np.abs(res.y - expected.y) / scale
    assert error.max() < 1e-8, error.max()


def test_per_object_parameters_each_as_scipy(simulated):
    """Van der Pol with mu per object: each object's steps and counts are scipy's for its
    own mu; the stiffest does not change the others'."""
    mus = [1000.0, 100.0, 10.0] if not simulated else [1000.0, 10.0]
    span = (0.0, 300.0 if simulated else 1500.0)
    fun, _, y0, _, _, tol = PROBLEMS["van_der_pol"]
    res = solve_ivp(fun, span, np.tile(y0, (len(mus), 1)), method="BDF",
                    params=np.array(mus)[:, None], **tol)
    for i, mu in enumerate(mus):
        expected = scipy_bdf("van_der_pol", params=[mu], t_span=span)
        assert res.status[i] == 0
        assert (res.nsteps[i], res.nfev[i], res.njev[i], res.nlu[i]) == (
            len(expected.t) - 1, expected.nfev, expected.njev, expected.nlu), mu
        np.testing.assert_allclose(res.y[i, :, -1], expected.y[:, -1], rtol=1e-7, atol=1e-10)
    assert len(set(res.nsteps.tolist())) == len(mus)  # different work per object


def test_terminal_event_located_on_scipy_dense_output(simulated):
    span = (0.0, 1e3 if not simulated else 10.0)
    fun, _, y0, _, _params, tol = PROBLEMS["robertson"]
    threshold = 0.5 if not simulated else 0.9
    expected = scipy_bdf("robertson", t_span=span, events=_shifted(threshold))
    res = solve_ivp(fun, span, np.array(y0), method="BDF", params=[threshold],
                    events=[Event(crossed, terminal=True, direction=-1)], **tol)
    assert res.status == 1 and expected.status == 1
    t_root = expected.t_events[0][0]
    assert 0.0 < t_root < span[1]
    np.testing.assert_allclose(res.t_events[0][0], t_root, rtol=1e-9)
    np.testing.assert_allclose(res.y_events[0][0], expected.y_events[0][0], rtol=1e-9,
                               atol=1e-14)
    assert res.nsteps == len(expected.t) - 1


@hjit
def crossed(t, y, p):
    return y[0] - p[0]


def _shifted(threshold):
    def g(t, y):
        return y[0] - threshold
    g.terminal = True
    g.direction = -1
    return g


@hjit
def blow_up(t, y, p):  # y' = p y^2: a singularity at t = 1 / (p y0) for p > 0
    return (p[0] * y[0] * y[0],)


def test_one_failing_object_leaves_the_others_as_scipy():
    y0 = np.array([[1.0], [1.0]])
    params = np.array([[1.0], [-1.0]])  # object 0 blows up at t = 1, object 1 decays
    res = solve_ivp(blow_up, (0.0, 2.0), y0, method="BDF", params=params, rtol=1e-6,
                    atol=1e-9)
    assert res.status[0] == STEP_TOO_SMALL
    ref = scipy_solve_ivp(lambda t, y: -y * y, (0.0, 2.0), [1.0], method="BDF", rtol=1e-6,
                          atol=1e-9, jac=lambda t, y: [[-2.0 * y[0]]])
    assert res.status[1] == 0
    assert (res.nsteps[1], res.nfev[1], res.njev[1], res.nlu[1]) == (
        len(ref.t) - 1, ref.nfev, ref.njev, ref.nlu)
    np.testing.assert_allclose(res.y[1, 0, -1], 1.0 / 3.0, rtol=1e-4)
    np.testing.assert_allclose(res.y[1, 0, -1], ref.y[0, -1], rtol=1e-12)
    failed = scipy_solve_ivp(lambda t, y: y * y, (0.0, 2.0), [1.0], method="BDF", rtol=1e-6,
                             atol=1e-9, jac=lambda t, y: [[2.0 * y[0]]])
    assert failed.status == -1  # scipy fails there too


@hjit
def robertson_jac_bad_from(t, y, p):
    """Robertson's Jacobian with p[0] added to its first entry from t = p[1] on."""
    bad = p[0] if t >= p[1] else 0.0
    return (-0.04 + bad, 1e4 * y[2], 1e4 * y[1],
            0.04, -1e4 * y[2] - 6e7 * y[1], -1e4 * y[1],
            0.0, 6e7 * y[1], 0.0)


def test_a_jacobian_not_finite_stops_its_object_naming_the_jacobian(simulated):
    """A jac= with NaN at t0, or inf from t = 1 on (BDF evaluates J again only after
    Newton fails with an old one), stops that object with its own status and a
    message naming the Jacobian (before: "step size fell below 10 ulp", status -1,
    after Newton failed on it at every halved step); the object whose jac stays
    finite takes scipy's steps and counts, its numbers those of a run alone."""
    params = np.array([[0.0, math.inf], [math.nan, 0.0], [math.inf, 1.0]])
    span = (0.0, SHORT["robertson"] if simulated else 1e3)
    y0 = np.tile([1.0, 0.0, 0.0], (3, 1))
    options = dict(method="BDF", rtol=1e-6, atol=1e-10, jac=robertson_jac_bad_from)
    res = solve_ivp(robertson, span, y0, params=params, **options)
    np.testing.assert_array_equal(res.status, [0, JACOBIAN_NOT_FINITE, JACOBIAN_NOT_FINITE])
    assert not res.success[1:].any()
    message = res.messages()[1]
    assert message == STATUS_MESSAGES[JACOBIAN_NOT_FINITE] and "Jacobian (jac" in message
    assert res.nsteps[1] == 0 and res.njev[1] == 1 and res.nlu[1] == 0
    assert 0 < res.nsteps[2] and res.njev[2] > 1  # evaluated again after t = 1: inf
    assert np.isnan(res.y[1:, :, -1]).all()  # tf not reached
    alone = solve_ivp(robertson, span, y0[:1], params=params[:1], **options)
    expected = scipy_bdf("robertson", t_span=span)
    assert (res.nsteps[0], res.nfev[0], res.njev[0], res.nlu[0]) == (
        len(expected.t) - 1, expected.nfev, expected.njev, expected.nlu)
    np.testing.assert_array_equal(res.y[0], alone.y[0])


def test_array_form_fun_is_refused_naming_jac():
    @hjit
    def decay(t, y, p, dydt):
        dydt[0] = -y[0]

    with pytest.raises(ValueError, match="jac"):
        solve_ivp(decay, (0.0, 1.0), np.array([1.0]), method="BDF")
