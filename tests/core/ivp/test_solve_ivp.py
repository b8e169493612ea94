"""The generic solve_ivp: non-orbit ensembles against scipy, object by object, every method."""

import math

import numpy as np
import pytest
from scipy.integrate import solve_ivp as scipy_solve_ivp

from hapsira_core.ivp import STATUS_MESSAGES, Event, solve_ivp
from hapsira_core.ivp.state import TUPLE_MAX_N
from hapsira_core.jit import hjit

METHODS = ("DOP853", "RK45", "RK23")


@hjit
def lotka(t, y, p):
    return (p[0] * y[0] - p[1] * y[0] * y[1], -p[2] * y[1] + p[3] * y[0] * y[1])


def lotka_np(p):
    return lambda t, y: [p[0] * y[0] - p[1] * y[0] * y[1], -p[2] * y[1] + p[3] * y[0] * y[1]]


@hjit
def van_der_pol(t, y, p):
    return (y[1], p[0] * (1.0 - y[0] * y[0]) * y[1] - y[0])


def van_der_pol_np(p):
    return lambda t, y: [y[1], p[0] * (1.0 - y[0] * y[0]) * y[1] - y[0]]


@hjit
def forced_decay(t, y, p):
    """n = 1, explicitly time-dependent."""
    return (-p[0] * y[0] + math.sin(t),)


def lotka_ensemble(n_objects, seed=1):
    rng = np.random.default_rng(seed)
    y0 = rng.uniform(1.0, 10.0, (n_objects, 2))
    params = np.column_stack([rng.uniform(1.0, 2.0, n_objects), rng.uniform(0.5, 1.5, n_objects),
                              rng.uniform(2.0, 4.0, n_objects), rng.uniform(0.5, 1.5, n_objects)])
    return y0, params


def assert_matches_scipy(res, i, reference, rtol=1e-12):
    """Object ``i``: the same accepted steps as scipy and the same states."""
    obj = res[i]
    assert obj.status == 0, obj.message
    assert obj.nsteps == len(reference.t) - 1
    np.testing.assert_allclose(obj.y[:, -1], reference.y[:, -1], rtol=rtol,
                               atol=rtol * np.abs(reference.y).max())


@pytest.mark.parametrize("method", METHODS)
def test_lotka_volterra_ensemble_matches_scipy_object_by_object(method, simulated):
    y0, params = lotka_ensemble(3 if simulated else 12)
    res = solve_ivp(lotka, (0.0, 15.0), y0, method=method, rtol=1e-8, atol=1e-10,
                    params=params)
    assert res.y.shape == (len(y0), 2, 1)
    for i in range(len(y0)):
        reference = scipy_solve_ivp(lotka_np(params[i]), (0.0, 15.0), y0[i], method=method,
                                    rtol=1e-8, atol=1e-10)
        assert_matches_scipy(res, i, reference)


@pytest.mark.parametrize("method", METHODS)
def test_van_der_pol_with_per_object_mu_and_output_times(method, simulated):
    mus = np.array([0.5, 2.0, 5.0] if simulated else [0.3, 0.5, 1.0, 2.0, 3.5, 5.0])
    y0 = np.column_stack([np.linspace(0.5, 2.0, len(mus)), np.linspace(-1.0, 1.0, len(mus))])
    t_eval = np.linspace(0.0, 10.0, 41)
    res = solve_ivp(van_der_pol, (0.0, 10.0), y0, method=method, t_eval=t_eval, rtol=1e-9,
                    atol=1e-11, params=mus[:, None])
    np.testing.assert_array_equal(res.t, t_eval)
    assert res.y.shape == (len(mus), 2, len(t_eval))
    for i, mu in enumerate(mus):
        reference = scipy_solve_ivp(van_der_pol_np([mu]), (0.0, 10.0), y0[i], method=method,
                                    t_eval=t_eval, rtol=1e-9, atol=1e-11)
        np.testing.assert_allclose(res.y[i], reference.y, rtol=1e-11, atol=1e-12)
        dense = scipy_solve_ivp(van_der_pol_np([mu]), (0.0, 10.0), y0[i], method=method,
                                rtol=1e-9, atol=1e-11)
        assert res.nsteps[i] == len(dense.t) - 1


@pytest.mark.parametrize("method", METHODS)
def test_one_component_backward_from_a_nonzero_start(method):
    t_eval = np.array([3.0, 2.5, 1.0, -0.5])
    res = solve_ivp(forced_decay, (3.0, -0.5), [1.7], method=method, t_eval=t_eval,
                    rtol=1e-10, atol=1e-12, params=[0.8])
    reference = scipy_solve_ivp(lambda t, y: [-0.8 * y[0] + math.sin(t)], (3.0, -0.5), [1.7],
                                method=method, t_eval=t_eval, rtol=1e-10, atol=1e-12)
    assert res.y.shape == (1, 4)  # one object: (n, M), as scipy's sol.y
    np.testing.assert_allclose(res.y, reference.y, rtol=1e-12)
    assert res.y[0, 0] == 1.7  # t_eval[0] == t0: the initial state itself


def make_chain(n):
    """n coupled, damped oscillator coordinates on a ring (n even): a linear system; the
    tuple form up to TUPLE_MAX_N components, the array form above."""
    array = n > TUPLE_MAX_N
    lines = ["def chain(t, y, p, dydt):" if array else "def chain(t, y, p):",
             "" if array else "    return ("]
    for i in range(n):
        left, right = (i - 1) % n, (i + 1) % n
        term = (f"p[0] * (y[{left}] - 2.0 * y[{i}] + y[{right}]) - p[1] * y[{i}]"
                f" + 0.1 * math.cos(t + {i})")
        lines.append(f"    dydt[{i}] = {term}" if array else f"        {term},")
    lines.append("" if array else "    )")
    namespace = {"math": math}
    exec("\n".join(lines), namespace)
    if not array:
        return hjit(namespace["chain"]), namespace["chain"]

    def plain(t, y, p):
        dydt = np.empty(n)
        namespace["chain"](t, y, p, dydt)
        return dydt
    return hjit(namespace["chain"]), plain


# n = 32 in the array form (state.TUPLE_MAX_N = 16); the tuple form at 32 compiled in
# 45 s (RK23) to 206 s (DOP853)
@pytest.mark.parametrize("n, method", [(9, "DOP853"), (7, "RK45"), (32, "RK23"),
                                       (32, "DOP853")])
def test_large_states_match_scipy(n, method):
    fun, plain = make_chain(n)
    rng = np.random.default_rng(n)
    y0 = rng.uniform(-1.0, 1.0, (2, n))
    params = np.array([[0.7, 0.05], [1.3, 0.2]])
    res = solve_ivp(fun, (0.0, 4.0), y0, method=method, rtol=1e-9, atol=1e-11, params=params)
    for i in range(2):
        reference = scipy_solve_ivp(lambda t, y: plain(t, y, params[i]), (0.0, 4.0), y0[i],
                                    method=method, rtol=1e-9, atol=1e-11)
        assert_matches_scipy(res, i, reference, rtol=1e-11)


def test_tuple_form_beyond_its_threshold_is_refused_naming_the_array_form():
    # any n integrates (tests/core/ivp/test_large_n.py); a tuple fun only up to TUPLE_MAX_N
    n = TUPLE_MAX_N + 1
    with pytest.raises(ValueError, match=rf"fun: .*lotka is the tuple form .* up to n = "
                                         rf"{TUPLE_MAX_N} .* n = {n}: write it in the array form "
                                         r"fun\(t, y, p, dydt\)"):
        solve_ivp(lotka, (0.0, 1.0), np.ones(n))
    with pytest.raises(ValueError, match=r"y0: expected shape \(n,\) or \(N, n\) with n >= 1"):
        solve_ivp(lotka, (0.0, 1.0), np.ones((3, 0)))


@hjit
def prey_threshold(t, y, p):
    return y[0] - p[4]


@hjit
def predator_threshold(t, y, p):
    return y[1] - p[5]


@pytest.mark.parametrize("method", METHODS)
def test_events_match_scipy(method, simulated):
    y0, params = lotka_ensemble(2 if simulated else 5, seed=4)
    params = np.column_stack([params, np.full(len(y0), 3.0), np.full(len(y0), 2.5)])
    events = [Event(prey_threshold, direction=-1),
              Event(predator_threshold, terminal=3, direction=1)]
    res = solve_ivp(lotka, (0.0, 30.0), y0, method=method, rtol=1e-10, atol=1e-12,
                    params=params, events=events, max_event_records=8)
    for i in range(len(y0)):
        p = params[i]
        g1 = lambda t, y: y[0] - p[4]  # noqa: E731
        g1.direction = -1
        g2 = lambda t, y: y[1] - p[5]  # noqa: E731
        g2.direction, g2.terminal = 1, 3
        reference = scipy_solve_ivp(lotka_np(p), (0.0, 30.0), y0[i], method=method,
                                    rtol=1e-10, atol=1e-12, events=[g1, g2])
        obj = res[i]
        assert obj.status == reference.status
        for e in range(2):
            assert len(obj.t_events[e]) == len(reference.t_events[e]) > 0
            np.testing.assert_allclose(obj.t_events[e], reference.t_events[e], atol=1e-9)
            np.testing.assert_allclose(obj.y_events[e], reference.y_events[e], rtol=1e-9)
        assert res.n_events[i].tolist() == [len(t) for t in reference.t_events]
        # after the terminal event: nothing more, and its third crossing is the end
        assert obj.t_events[1][-1] == pytest.approx(reference.t[-1], abs=1e-9)


@hjit
def falling(t, y, p):
    return (y[1], -9.81)


@hjit
def height(t, y, p):
    return y[0]


@hjit
def height_too(t, y, p):
    return y[0] * 2.0


def test_terminal_first_at_the_same_instant_records_no_later_listed_event():
    """scipy: events are taken in time order (ties by position) up to the first terminal one."""
    t_eval = np.linspace(0.0, 3.0, 7)
    y0 = [[20.0, 0.0], [5.0, 3.0]]
    res = solve_ivp(falling, (0.0, 3.0), y0, t_eval=t_eval, rtol=1e-10, atol=1e-12,
                    events=[Event(height, terminal=True), Event(height_too)])
    assert res.status.tolist() == [1, 1]
    assert res.n_events.tolist() == [[1, 0], [1, 0]]
    np.testing.assert_allclose(res.t_events[0][:, 0], [math.sqrt(40.0 / 9.81),
                                                       (3.0 + math.sqrt(9.0 + 98.1)) / 9.81])
    assert np.isnan(res.t_events[1]).all()
    # listed first, the non-terminal one is recorded too (scipy does the same)
    res = solve_ivp(falling, (0.0, 3.0), y0, rtol=1e-10, atol=1e-12,
                    events=[Event(height_too), Event(height, terminal=True)])
    assert res.n_events.tolist() == [[1, 1], [1, 1]]
    # outputs after the terminal event are NaN, before it the states
    res = solve_ivp(falling, (0.0, 3.0), y0, t_eval=t_eval, rtol=1e-10, atol=1e-12,
                    events=Event(height, terminal=True))
    stop = res.t_events[0][0, 0]
    assert np.isnan(res.y[0][:, t_eval > stop]).all()
    np.testing.assert_allclose(res.y[0][0, t_eval <= stop], 20.0 - 9.81 / 2 * t_eval[t_eval <= stop] ** 2,
                               rtol=1e-12)


def test_a_bad_object_fails_alone():
    y0, params = lotka_ensemble(4, seed=7)
    good = solve_ivp(lotka, (0.0, 5.0), y0, params=params, rtol=1e-9, atol=1e-12)
    bad = y0.copy()
    bad[1, 0] = np.nan
    mixed = solve_ivp(lotka, (0.0, 5.0), bad, params=params, rtol=1e-9, atol=1e-12)
    assert mixed.status.tolist() == [0, -3, 0, 0]
    assert np.isnan(mixed.y[1]).all()
    keep = [0, 2, 3]
    np.testing.assert_array_equal(mixed.y[keep], good.y[keep])
    np.testing.assert_array_equal(mixed.nfev[keep], good.nfev[keep])
    assert mixed.messages()[1] == STATUS_MESSAGES[-3]
    assert mixed.success.tolist() == [True, False, True, True]


def test_max_steps_and_object_results_read_like_scipy():
    res = solve_ivp(van_der_pol, (0.0, 10.0), [[1.0, 0.0], [2.0, 0.5]], params=[[1.0], [1.0]],
                    rtol=1e-9, max_steps=5)
    assert res.status.tolist() == [-2, -2]
    assert res.nsteps.tolist() == [5, 5]
    res = solve_ivp(van_der_pol, (0.0, 2.0), [2.0, 0.5], params=[1.0], rtol=1e-9,
                    events=[Event(height)])
    obj = res[0]
    reference = scipy_solve_ivp(van_der_pol_np([1.0]), (0.0, 2.0), [2.0, 0.5], rtol=1e-9,
                                method="DOP853", events=lambda t, y: y[0])
    assert obj.success and obj.message == STATUS_MESSAGES[0]
    assert [len(t) for t in obj.t_events] == [len(t) for t in reference.t_events]
    assert obj.y.shape == (2, 1) and len(res) == 1


@pytest.mark.parametrize("kwargs, error, match", [
    ({"method": "LSODA"}, ValueError, "method: expected one of 'DOP853', 'RK45', 'RK23'"),
    ({"method": "radau"}, ValueError, r"got 'radau'; did you mean 'Radau'\?$"),
    ({"method": "rodas"}, ValueError, r"got 'rodas'; did you mean 'Rodas5P'\?$"),
    ({"method": "RK54"}, ValueError, r"got 'RK54'; did you mean 'RK45'\?$"),
    ({"method": "xyz"}, ValueError, r"'Rodas5P' or a Method, got 'xyz'$"),
    ({"t_eval": [0.5, 20.0]}, ValueError, r"t_eval: expected times within t_span"),
    ({"t_eval": [2.0, 1.0]}, ValueError, "t_eval: expected times sorted"),
    # scipy refuses a repeated time ("not properly sorted"); so does every front here
    ({"t_eval": [0.0, 1.0, 1.0, 2.0]}, ValueError,
     r"t_eval: expected times sorted in the direction of integration, none repeated"),
    ({"rtol": [1e-6, 1e-6, 1e-6]}, ValueError, r"rtol: expected a scalar or 2 values"),
    ({"atol": -1.0}, ValueError, "atol: expected finite non-negative"),
    ({"atol": np.float64(-1.0)}, ValueError, "atol: expected finite non-negative "
                                             "tolerances, got -1.0$"),
    ({"params": [[1.0, 2.0]] * 3}, ValueError, r"params: expected shape \(P,\) or \(2, P\)"),
    ({"params": ["a", "b"]}, TypeError, "params: expected real numbers, got text"),
    ({"max_steps": 0}, ValueError, "max_steps: expected an integer from 1 to"),
    ({"events": 3}, TypeError, "events: expected a sequence"),
])
def test_bad_arguments_name_themselves(kwargs, error, match):
    with pytest.raises(error, match=match):
        solve_ivp(lotka, (0.0, 10.0), [[1.0, 2.0], [3.0, 4.0]], **kwargs)


def test_per_object_times_in_messages_read_as_numbers():
    # the object's t0 and tf as numbers, not np.float64(0.0)
    with pytest.raises(ValueError, match=r"got t0 = 0\.0, tf = nan for object 1 \("):
        solve_ivp(lotka, (np.zeros(2), np.array([10.0, np.nan])), [[1.0, 2.0], [3.0, 4.0]])


@pytest.mark.parametrize("y0, error, match", [
    (np.array([1.0 + 2j, 3.0]), TypeError, "y0: expected real numbers, got complex"),
    (np.array([True, False]), TypeError, "y0: expected real numbers, got booleans"),
    (np.ma.masked_array([1.0, 2.0], mask=[0, 1]), TypeError, "y0: .* masked array"),
    ([[1.0, 2.0], [3.0]], ValueError, "y0: expected real numbers in a regular array"),
    (np.ones((2, 2, 2)), ValueError, r"y0: expected shape \(n,\) or \(N, n\)"),
])
def test_bad_initial_states_name_themselves(y0, error, match):
    with pytest.raises(error, match=match):
        solve_ivp(lotka, (0.0, 1.0), y0)


@hjit
def scaled_decay(t, y, p):
    """p[0] per object (params), p[1] shared (scipy's args, appended)."""
    return (-p[0] * p[1] * y[0] + math.sin(t),)


def test_args_as_scipys_are_the_params_row_shared_by_all_objects():
    y0, _ = lotka_ensemble(3, seed=4)
    args = (1.5, 1, 3, np.float64(1.0))
    res = solve_ivp(lotka, (0.0, 15.0), y0, rtol=1e-9, atol=1e-11, args=args)
    same = solve_ivp(lotka, (0.0, 15.0), y0, rtol=1e-9, atol=1e-11, params=[1.5, 1, 3, 1])
    np.testing.assert_array_equal(res.y, same.y)
    for i in range(len(y0)):
        ref = scipy_solve_ivp(lambda t, y, a, b, c, d: [a * y[0] - b * y[0] * y[1],
                                                        -c * y[1] + d * y[0] * y[1]],
                              (0.0, 15.0), y0[i], method="DOP853", rtol=1e-9, atol=1e-11,
                              args=args)
        assert_matches_scipy(res, i, ref)
        assert res.nfev[i] == ref.nfev


def test_args_follow_the_params_columns():
    y0 = np.array([[1.0], [2.0], [0.5]])
    rates = np.array([[0.3], [1.1], [2.0]])
    res = solve_ivp(scaled_decay, (0.0, 6.0), y0, method="RK45", rtol=1e-10, atol=1e-12,
                    params=rates, args=(0.7,))
    for i in range(3):
        ref = scipy_solve_ivp(lambda t, y, k, s: [-k * s * y[0] + math.sin(t)], (0.0, 6.0),
                              y0[i], method="RK45", rtol=1e-10, atol=1e-12,
                              args=(rates[i, 0], 0.7))
        assert_matches_scipy(res, i, ref)


def test_args_that_are_not_numbers_point_to_params():
    with pytest.raises(TypeError, match=r"args: expected a tuple of numbers, e\.g\. "
                                        r"args=\(2\.0,\); .*reads scipy's args=\(a, b\) as "
                                        r"p\[0\], p\[1\] .*params=\(N, P\)"):
        solve_ivp(forced_decay, (0.0, 1.0), [1.0], args=2.0)
    with pytest.raises(TypeError, match=r"args\[1\]: expected a number shared by all "
                                        r"objects, got ndarray .*params=\(N, P\) rows"):
        solve_ivp(forced_decay, (0.0, 1.0), [1.0], args=(1.0, np.ones(3)))
    with pytest.raises(ValueError, match=r"params: .*lotka .* reads p\[3\], but the params "
                                         r"rows have 2 columns"):
        solve_ivp(lotka, (0.0, 1.0), [1.0, 1.0], args=(1.0, 2.0))
