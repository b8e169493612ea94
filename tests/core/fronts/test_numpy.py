"""The numpy front's `states_at`: `solve_ivp`'s states at the output times, optionally left
in the target's own memory (`hapsira_core.ivp.api.Problem.run`'s ``on_device``)."""

import numpy as np
import pytest

from hapsira_core.fronts.numpy import states_at
from hapsira_core.ivp import api, solve_ivp
from hapsira_core.jit import hjit
from hapsira_core.targets import active

#: whether the active target has memory of its own (cuda, the simulator's included)
OWN_MEMORY = active.device_memory() is not None


@hjit
def _pendulum(t, y, p):
    return y[1], -p[0] * np.sin(y[0]) - p[1] * y[1]


@pytest.mark.parametrize("on_device", [False, True])
def test_states_at_equal_solve_ivp_bit_for_bit(on_device):
    """Six damped pendulums with their own parameters, 9 output times: the same numbers
    as `solve_ivp`'s ``y`` (moved to ``(N, M, n)``) and statuses, wherever they are."""
    rng = np.random.default_rng(5)
    y0 = np.column_stack((rng.uniform(-2.0, 2.0, 6), rng.uniform(-1.0, 1.0, 6)))
    params = np.column_stack((rng.uniform(1.0, 9.0, 6), rng.uniform(0.0, 0.3, 6)))
    times = np.linspace(0.0, 5.0, 9)
    res = solve_ivp(_pendulum, (0.0, 5.0), y0, t_eval=times, rtol=1e-9, atol=1e-12,
                    params=params)
    states, status = states_at(_pendulum, (0.0, 5.0), y0, times, rtol=1e-9, atol=1e-12,
                               params=params, on_device=on_device)
    assert isinstance(status, np.ndarray) and np.array_equal(status, res.status)
    assert isinstance(states, np.ndarray) == (not (on_device and OWN_MEMORY))
    host = active.to_host(states)
    assert host.shape == (6, 9, 2)
    np.testing.assert_array_equal(host, np.moveaxis(res.y, 2, 1))
    assert np.ptp(host[:, -1, 0]) > 0.1  # six different motions


def test_on_device_names_an_output_and_not_step_records():
    y0 = np.array([[1.0, 0.0]])
    problem = api.Problem("DOP853", _pendulum, 2, (), np.array([1.0]), 10, 1, 1, [_pendulum],
                          None)
    with pytest.raises(ValueError, match="on_device: no output named"):
        problem.run(y0, np.array([[1.0, 0.1]]), 0.0, 1.0, np.full(2, 1e-6),
                    np.full(2, 1e-9), on_device=("states",))


def test_states_at_writes_a_given_array_and_returns_it():
    """``out``: the same numbers written there (its stale contents overwritten) and
    returned as it, run after run into the same memory."""
    y0 = np.array([[1.0, 0.0], [0.5, 0.2], [-1.0, 0.3]])
    params = np.array([[4.0, 0.1]])
    times = np.linspace(0.0, 3.0, 5)
    fresh, _ = states_at(_pendulum, (0.0, 3.0), y0, times, rtol=1e-9, atol=1e-12,
                         params=params)
    out = np.full((3, 5, 2), np.nan)
    for _ in range(2):
        states, status = states_at(_pendulum, (0.0, 3.0), y0, times, rtol=1e-9, atol=1e-12,
                                   params=params, out=out)
        assert states is out and np.all(status >= 0)
        np.testing.assert_array_equal(out, fresh)


@pytest.mark.parametrize("out, message", [
    (np.empty((3, 4, 2)), r"out: expected a float64 array of shape \(3, 5, 2\), got "
                          r"float64 \(3, 4, 2\)"),
    (np.empty((3, 5, 2), dtype=np.float32), "out: expected a float64 array"),
    (np.empty((3, 2, 5)).transpose(0, 2, 1), "out: expected a C-ordered writable array"),
])
def test_states_at_names_a_wrong_out(out, message):
    y0 = np.array([[1.0, 0.0], [0.5, 0.2], [-1.0, 0.3]])
    with pytest.raises(ValueError, match=message):
        states_at(_pendulum, (0.0, 3.0), y0, np.linspace(0.0, 3.0, 5),
                  params=np.array([[4.0, 0.1]]), out=out)


def test_into_names_an_output_and_not_step_records():
    y0 = np.array([[1.0, 0.0]])
    problem = api.Problem("DOP853", _pendulum, 2, (), np.array([1.0]), 10, 1, 1, [_pendulum],
                          None)
    run = (y0, np.array([[1.0, 0.1]]), 0.0, 1.0, np.full(2, 1e-6), np.full(2, 1e-9))
    with pytest.raises(ValueError, match="into: no output named 'states'"):
        problem.run(*run, into={"states": np.empty((1, 1, 2))})
    with pytest.raises(ValueError, match=r"into\['y'\]: expected a float64 array"):
        problem.run(*run, into={"y": np.empty((1, 2, 2))})
    stepping = api.Problem("DOP853", _pendulum, 2, (), np.array([1.0]), 10, 1, 1,
                           [_pendulum], None, step_records=1)
    with pytest.raises(ValueError, match="into: not with step records"):
        stepping.run(*run, into={"y": np.empty((1, 1, 2))})
