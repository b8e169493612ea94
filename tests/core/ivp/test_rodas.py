"""Rodas5P (`hapsira_core.ivp.methods.rodas`) against tight references on Hairer-Wanner's
stiff test problems, its order, and ``jac=`` of solve_ivp.

References: scipy's Radau at rtol 1e-13 with the exact Jacobian. A Rosenbrock method has
no scipy twin, so the assertions are the global error against the reference (within a
small multiple of the tolerance) and the accepted steps against scipy Radau's at the same
tolerance; the simulator runs the shorter spans.
"""

import math
import warnings

import numpy as np
import pytest
from scipy.integrate import solve_ivp as scipy_solve_ivp

from hapsira_core import settings
from hapsira_core.ivp import solve_ivp
from hapsira_core.ivp.layout import JACOBIAN_NOT_FINITE, STATUS_MESSAGES
from hapsira_core.jit import hjit

from .test_bdf import robertson_jac_bad_from

SIMULATED = settings.TARGET == "cuda" and settings.cuda_simulator_enabled()


@hjit
def robertson(t, y, p):
    return (-0.04 * y[0] + 1e4 * y[1] * y[2],
            0.04 * y[0] - 1e4 * y[1] * y[2] - 3e7 * y[1] * y[1],
            3e7 * y[1] * y[1])


def robertson_jac(t, y):
    return np.array([[-0.04, 1e4 * y[2], 1e4 * y[1]],
                     [0.04, -1e4 * y[2] - 6e7 * y[1], -1e4 * y[1]],
                     [0.0, 6e7 * y[1], 0.0]])


@hjit
def robertson_jac_tuple(t, y, p):
    return (-0.04, 1e4 * y[2], 1e4 * y[1],
            0.04, -1e4 * y[2] - 6e7 * y[1], -1e4 * y[1],
            0.0, 6e7 * y[1], 0.0)


@hjit
def robertson_jac_array(t, y, p, J):
    J[0, 0] = -0.04
    J[0, 1] = 1e4 * y[2]
    J[0, 2] = 1e4 * y[1]
    J[1, 0] = 0.04
    J[1, 1] = -1e4 * y[2] - 6e7 * y[1]
    J[1, 2] = -1e4 * y[1]
    J[2, 0] = 0.0
    J[2, 1] = 6e7 * y[1]
    J[2, 2] = 0.0


@hjit
def van_der_pol(t, y, p):  # unscaled, mu = p[0]
    return (y[1], p[0] * (1.0 - y[0] * y[0]) * y[1] - y[0])


def van_der_pol_jac(mu):
    return lambda t, y: np.array([[0.0, 1.0], [-2.0 * mu * y[0] * y[1] - 1.0,
                                               mu * (1.0 - y[0] * y[0])]])


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


def hires_jac(t, y):
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


@hjit
def orego(t, y, p):
    return (77.27 * (y[1] + y[0] * (1.0 - 8.375e-6 * y[0] - y[1])),
            (y[2] - (1.0 + y[0]) * y[1]) / 77.27,
            0.161 * (y[0] - y[2]))


def orego_jac(t, y):
    return np.array([[77.27 * (1.0 - 2 * 8.375e-6 * y[0] - y[1]), 77.27 * (1.0 - y[0]), 0.0],
                     [-y[1] / 77.27, -(1.0 + y[0]) / 77.27, 1.0 / 77.27],
                     [0.161, 0.0, -0.161]])


def _python(fun, params=None):
    return lambda t, y: np.array(fun.py_func(t, y, params))


# name: (fun, jac, y0, t_end (host, simulator), rtol, atol, params)
PROBLEMS = {
    "robertson": (robertson, robertson_jac, [1.0, 0.0, 0.0], (1e3, 10.0), 1e-6, 1e-10, None),
    "van_der_pol": (van_der_pol, van_der_pol_jac(1000.0), [2.0, 0.0], (1000.0, 50.0), 1e-6,
                    1e-6, [1000.0]),
    "hires": (hires, hires_jac, [1.0, 0, 0, 0, 0, 0, 0, 0.0057], (321.8122, 5.0), 1e-6, 1e-8,
              None),
    "orego": (orego, orego_jac, [1.0, 2.0, 3.0], (360.0, 30.0), 1e-6, 1e-6, None),
}


def _reference(fun, jac, y0, t_end, t_eval, params):
    return scipy_solve_ivp(_python(fun, params), (0.0, t_end), y0, method="Radau", rtol=1e-13,
                           atol=1e-14, jac=jac, t_eval=t_eval)


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_stiff_problems_against_a_tight_reference(name):
    fun, jac, y0, spans, rtol, atol, params = PROBLEMS[name]
    t_end = spans[1] if SIMULATED else spans[0]
    t_eval = np.linspace(0.0, t_end, 6)[1:]
    y0 = np.array(y0)
    res = solve_ivp(fun, (0.0, t_end), y0, method="Rodas5P", rtol=rtol, atol=atol,
                    t_eval=t_eval, params=params)
    assert res.status == 0
    ref = _reference(fun, jac, y0, t_end, t_eval, None if params is None else np.array(params))
    # global error within a few tolerances (the local error is what is controlled)
    bound = 50.0 * (atol + rtol * np.abs(ref.y))
    assert np.all(np.abs(res.y - ref.y) <= bound), np.max(np.abs(res.y - ref.y) / bound)
    # work against scipy's Radau at the same tolerance and Jacobian
    radau = scipy_solve_ivp(_python(fun, None if params is None else np.array(params)),
                            (0.0, t_end), y0, method="Radau", rtol=rtol, atol=atol, jac=jac)
    assert 0 < res.nsteps <= 1.5 * (len(radau.t) - 1) + 5
    # one Jacobian per accepted step, one LU per attempt; 7 evaluations per attempt,
    # one at each accepted step's end, two at the start (f(t0) and the first step's)
    assert res.njev == res.nsteps
    assert res.nlu >= res.njev
    assert res.nfev == 7 * res.nlu + res.nsteps + 2


def test_robertson_numbers():
    """Measured once (cpu): the steps and states of Robertson to 1e3 at rtol 1e-6. Any
    target takes the same steps (same arithmetic in the same order)."""
    if SIMULATED:
        pytest.skip("long span: the host targets")
    res = solve_ivp(robertson, (0.0, 1e3), [1.0, 0.0, 0.0], method="Rodas5P", rtol=1e-6,
                    atol=1e-10, t_eval=[1.0, 10.0, 100.0, 1e3])
    assert (res.nsteps, res.nfev, res.njev, res.nlu) == (57, 493, 57, 62)
    ref = np.array([[9.66459737e-01, 8.41369924e-01, 6.17234882e-01, 3.36874531e-01],
                    [3.07462658e-05, 1.62339094e-05, 6.15359127e-06, 2.01370232e-06],
                    [3.35095164e-02, 1.58613842e-01, 3.82758964e-01, 6.63123456e-01]])
    # against scipy Radau at rtol 1e-13: measured 7.3e-6 relative at most (the y_2 at 100)
    np.testing.assert_allclose(res.y, ref, rtol=1e-5)


@hjit
def forced(t, y, p):  # non-autonomous and non-stiff: the d f/d t term matters
    return (math.cos(t) * y[0] - 0.5 * y[1], 0.5 * y[0] + math.sin(t))


@hjit
def forced_jac(t, y, p):
    return (math.cos(t), -0.5, 0.5, 0.0)


@pytest.mark.parametrize("jac", [None, forced_jac], ids=["automatic", "jac"])
def test_order_five_with_the_time_derivative(jac):
    """Fixed steps (tolerances that accept every step, first_step = max_step = h): the
    global error falls as h^5, with the exact d f/d t (automatic) and with the forward
    difference in t taken when jac= is given."""
    ref = scipy_solve_ivp(_python(forced), (0.0, 2.0), [1.0, 0.5], method="DOP853",
                          rtol=1e-13, atol=1e-14).y[:, -1]
    errors = []
    for m in (20, 40, 80):
        h = 2.0 / m
        res = solve_ivp(forced, (0.0, 2.0), [1.0, 0.5], method="Rodas5P", rtol=1e3, atol=1e3,
                        first_step=h, max_step=h, jac=jac)
        errors.append(np.max(np.abs(res.y[:, -1] - ref)))
    orders = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    assert np.all((orders > 4.8) & (orders < 5.3)), orders


@pytest.mark.parametrize("jac", [robertson_jac_tuple, robertson_jac_array],
                         ids=["tuple", "array"])
def test_jac_forms_give_the_automatic_steps(jac):
    t_end = 10.0
    auto = solve_ivp(robertson, (0.0, t_end), [1.0, 0.0, 0.0], method="Rodas5P", rtol=1e-6,
                     atol=1e-10)
    given = solve_ivp(robertson, (0.0, t_end), [1.0, 0.0, 0.0], method="Rodas5P", rtol=1e-6,
                      atol=1e-10, jac=jac)
    assert given.status == 0 and given.nsteps == auto.nsteps
    # the forward difference in t of an autonomous fun is exactly 0: one more f per step
    assert given.nfev == auto.nfev + given.nsteps
    np.testing.assert_allclose(given.y, auto.y, rtol=1e-9, atol=1e-15)


def test_per_object_parameters():
    """Van der Pol with mu per object: each object as when solved alone."""
    mus = np.array([[1.0], [10.0], [100.0]])
    t_end = 5.0 if SIMULATED else 20.0
    y0 = np.array([[2.0, 0.0]] * 3)
    res = solve_ivp(van_der_pol, (0.0, t_end), y0, method="Rodas5P", rtol=1e-8, atol=1e-8,
                    params=mus)
    for i, mu in enumerate(mus[:, 0]):
        one = solve_ivp(van_der_pol, (0.0, t_end), y0[i], method="Rodas5P", rtol=1e-8,
                        atol=1e-8, params=[mu])
        assert res.nsteps[i] == one.nsteps
        np.testing.assert_array_equal(res.y[i], one.y)
        ref = _reference(van_der_pol, van_der_pol_jac(mu), y0[i], t_end, None, np.array([mu]))
        np.testing.assert_allclose(res.y[i][:, -1], ref.y[:, -1], rtol=1e-5)


def test_dense_output_and_events():
    """t_eval inside steps comes from Rodas' interpolant (order 4); an event located on it."""
    from hapsira_core.ivp import Event

    @hjit
    def half(t, y, p):
        return y[0] - 0.7

    t_end = 50.0 if SIMULATED else 100.0
    t_eval = np.linspace(0.0, t_end, 41)
    res = solve_ivp(robertson, (0.0, t_end), [1.0, 0.0, 0.0], method="Rodas5P", rtol=1e-8,
                    atol=1e-12, t_eval=t_eval, events=[Event(half)])
    ref = _reference(robertson, robertson_jac, [1.0, 0.0, 0.0], t_end, t_eval, None)
    np.testing.assert_allclose(res.y, ref.y, rtol=1e-5, atol=1e-11)
    assert res.n_events[0] == 1
    root = scipy_solve_ivp(_python(robertson), (0.0, t_end), [1.0, 0.0, 0.0], method="Radau",
                           rtol=1e-12, atol=1e-14, jac=robertson_jac,
                           events=lambda t, y: y[0] - 0.7).t_events[0][0]
    assert abs(res.t_events[0][0] - root) < 1e-5 * root


def test_jac_errors_name_jac():
    with pytest.raises(TypeError, match="jac"):
        solve_ivp(robertson, (0.0, 1.0), [1.0, 0.0, 0.0], method="Rodas5P", jac=robertson_jac)

    @hjit
    def two_args(t, y):
        return (0.0,)

    with pytest.raises(TypeError, match="jac: .*neither"):
        solve_ivp(robertson, (0.0, 1.0), [1.0, 0.0, 0.0], method="Rodas5P", jac=two_args)

    @hjit
    def decay(t, y, p, dydt):
        dydt[0] = -y[0]

    with pytest.raises(ValueError, match="jac: .*array form"):
        solve_ivp(decay, (0.0, 1.0), [1.0], method="Rodas5P")


@hjit
def decay_jac_of_p(t, y, p):  # reads p only: recognised constant, evaluated at t0 only
    return (p[1],)


def test_a_jacobian_not_finite_stops_its_object_naming_the_jacobian():
    """A jac= with NaN at t0 or inf from t = 1 on (Rodas5P evaluates J every step; a
    constant one at t0 only) stops that object with its own status and a message
    naming the Jacobian (before: "step size fell below 10 ulp", status -1); the object
    whose jac stays finite is unchanged, its numbers those of a run alone."""
    params = np.array([[0.0, math.inf], [math.nan, 0.0], [math.inf, 1.0]])
    span = (0.0, 10.0 if SIMULATED else 40.0)
    y0 = np.tile([1.0, 0.0, 0.0], (3, 1))
    options = dict(method="Rodas5P", rtol=1e-6, atol=1e-10, jac=robertson_jac_bad_from)
    res = solve_ivp(robertson, span, y0, params=params, **options)
    np.testing.assert_array_equal(res.status, [0, JACOBIAN_NOT_FINITE, JACOBIAN_NOT_FINITE])
    assert not res.success[1:].any()
    message = res.messages()[1]
    assert message == STATUS_MESSAGES[JACOBIAN_NOT_FINITE] and "Jacobian (jac" in message
    assert res.nsteps[1] == 0 and 0 < res.nsteps[2] < res.nsteps[0]
    assert np.isnan(res.y[1:, :, -1]).all()  # tf not reached
    alone = solve_ivp(robertson, span, y0[:1], params=params[:1], **options)
    np.testing.assert_array_equal(res.y[0], alone.y[0])
    np.testing.assert_array_equal(res.nsteps[0], alone.nsteps[0])

    @hjit
    def decay(t, y, p):
        return (p[0] * y[0],)

    # a constant J (evaluated at t0 only) not finite: the first step stops
    res = solve_ivp(decay, (0.0, 1.0), [[1.0], [1.0]], method="Rodas5P",
                    params=[[-2.0, -2.0], [-2.0, math.nan]], jac=decay_jac_of_p)
    np.testing.assert_array_equal(res.status, [0, JACOBIAN_NOT_FINITE])
    assert res.nsteps[1] == 0 and res.njev[1] == 1


def test_array_form_fun_with_jac():
    @hjit
    def decay(t, y, p, dydt):
        dydt[0] = -1000.0 * (y[0] - math.cos(t))

    @hjit
    def decay_jac(t, y, p, J):
        J[0, 0] = -1000.0

    res = solve_ivp(decay, (0.0, 1.0), [0.0], method="Rodas5P", rtol=1e-8, atol=1e-10,
                    jac=decay_jac)
    ref = scipy_solve_ivp(lambda t, y: -1000.0 * (y - math.cos(t)), (0.0, 1.0), [0.0],
                          method="Radau", rtol=1e-13, atol=1e-14, jac=lambda t, y: [[-1000.0]])
    assert res.status == 0
    np.testing.assert_allclose(res.y[:, -1], ref.y[:, -1], rtol=1e-7)


def test_explicit_methods_warn_and_ignore_jac():
    """As scipy's: "The following arguments have no effect for a chosen solver: `jac`."."""
    @hjit
    def decay(t, y, p):
        return (-y[0],)

    @hjit
    def decay_jac(t, y, p):
        return (-1.0,)

    plain = solve_ivp(decay, (0.0, 1.0), [1.0], method="RK45")
    with pytest.warns(UserWarning, match="no effect for a chosen solver: `jac`"):
        given = solve_ivp(decay, (0.0, 1.0), [1.0], method="RK45", jac=decay_jac)
    assert given.nsteps == plain.nsteps
    np.testing.assert_array_equal(given.y, plain.y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        solve_ivp(decay, (0.0, 1.0), [1.0], method="Rodas5P", jac=decay_jac)
