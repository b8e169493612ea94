"""dense_output=True and t_eval="steps" against scipy's solve_ivp, object by object."""

import numpy as np
import pytest
from scipy.integrate import solve_ivp as scipy_solve_ivp

from hapsira_core import memory
from hapsira_core.ivp import Event, solve_ivp
from hapsira_core.jit import hjit
from hapsira_core import settings

#: A real GPU fuses multiply-adds (the host targets and the simulator do not).
FMA = settings.TARGET == "cuda" and not settings.cuda_simulator_enabled()

METHODS = ("DOP853", "RK45", "RK23")
RTOL, ATOL = 1e-6, 1e-9


@hjit
def lotka(t, y, p):
    return (p[0] * y[0] - p[1] * y[0] * y[1], -p[2] * y[1] + p[3] * y[0] * y[1])


def lotka_np(p):
    return lambda t, y: [p[0] * y[0] - p[1] * y[0] * y[1], -p[2] * y[1] + p[3] * y[0] * y[1]]


@hjit
def prey_low(t, y, p):
    return y[0] - 1.2


def prey_low_np(t, y):
    return y[0] - 1.2


prey_low_np.terminal = True
prey_low_np.direction = -1

PARAMS = np.array([[1.5, 1.0, 3.0, 1.0], [1.2, 0.8, 2.5, 1.1], [1.8, 1.2, 3.5, 0.9]])
Y0 = np.array([[10.0, 5.0], [4.0, 2.0], [3.0, 6.0]])


def scipy_runs(span, method, **options):
    return [scipy_solve_ivp(lotka_np(PARAMS[i]), span, Y0[i], method=method, rtol=RTOL,
                            atol=ATOL, **options) for i in range(len(Y0))]


def close(actual, expected, scale=1.0, within=1e-11):
    """Equal to scipy's to ``within``, relative to the solution's size."""
    np.testing.assert_allclose(actual, expected, rtol=0, atol=within * scale)


def close_times(actual, expected, span):
    """The same breakpoints as scipy's, one for one. Not to the last bit: the next step
    size follows the error estimate, a small difference of large sums, which scipy
    (K^T E with numpy) and the kernel round differently (measured here: 1e-13 to 2e-8 of
    the span after tens of steps; the states stay within 1e-12)."""
    assert actual.shape == expected.shape
    np.testing.assert_allclose(actual, expected, rtol=0, atol=1e-7 * abs(span[1] - span[0]))


@pytest.mark.parametrize("span", [(0.0, 6.0), (6.0, 0.0)], ids=["forward", "backward"])
@pytest.mark.parametrize("method", METHODS)
def test_the_first_steps_interpolant_is_scipys(method, span):
    """Over the first step (the same step as scipy's, to an ulp) the values are scipy's
    to rounding: the same interpolant (RK23 3 columns of Q, RK45 4, DOP853 7 with y_old)."""
    res = solve_ivp(lotka, span, Y0, method=method, rtol=RTOL, atol=ATOL, params=PARAMS,
                    dense_output=True)
    for i, reference in enumerate(scipy_runs(span, method, dense_output=True)):
        ts = reference.sol.ts
        # a real GPU fuses multiply-adds in the starting step size: a few ulp
        assert res[i].sol.ts[1] == pytest.approx(ts[1], rel=1e-13 if FMA else 1e-15, abs=0)
        inside = ts[0] + (ts[1] - ts[0]) * np.linspace(0.0, 1.0, 11)
        close(res[i].sol(inside), reference.sol(inside), np.abs(reference.y).max(),
              1e-12 if FMA else 1e-14)


@pytest.mark.parametrize("span", [(0.0, 6.0), (6.0, 0.0)], ids=["forward", "backward"])
@pytest.mark.parametrize("method", METHODS)
def test_sol_equals_scipys_odesolution(method, span):
    res = solve_ivp(lotka, span, Y0, method=method, rtol=RTOL, atol=ATOL, params=PARAMS,
                    dense_output=True)
    # inside the span, and outside it where scipy extrapolates the end steps
    grid = np.linspace(span[0] - 0.05, span[1] + 0.05, 41)
    batch = res.sol(grid)
    assert batch.shape == (len(Y0), 2, grid.size)
    for i, reference in enumerate(scipy_runs(span, method, dense_output=True)):
        sol, expected = res[i].sol, reference.sol
        scale = np.abs(reference.y).max()
        assert sol.n_segments == expected.n_segments == res.nsteps[i]
        close_times(sol.ts, expected.ts, span)
        assert (sol.t_min, sol.t_max) == (min(span), max(span))
        close(batch[i], expected(grid), scale)
        # at every breakpoint exactly (scipy takes the earlier step there), unsorted
        at = expected.ts[::-1].copy()
        close(sol(at), expected(at), scale)
        middle = expected.ts[len(expected.ts) // 2]
        assert sol(middle).shape == (2,)
        close(sol(middle), expected(middle), scale)
        # every step builds its interpolant, as scipy's (DOP853: 3 more evaluations a step)
        assert res[i].nfev == reference.nfev
    assert res.sol(1.0).shape == (len(Y0), 2)


@pytest.mark.parametrize("method", METHODS)
def test_every_accepted_step_as_scipys_default_output(method):
    res = solve_ivp(lotka, (0.0, 6.0), Y0, method=method, rtol=RTOL, atol=ATOL, params=PARAMS,
                    t_eval="steps")
    references = scipy_runs((0.0, 6.0), method, dense_output=True)
    most = max(len(r.t) for r in references)
    assert res.t.shape == (len(Y0), most) and res.y.shape == (len(Y0), 2, most)
    for i, reference in enumerate(references):
        obj = res[i]
        assert obj.t.shape == reference.t.shape
        close_times(obj.t, reference.t, (0.0, 6.0))
        # the states at the breakpoints lie on scipy's solution (its own breakpoints
        # differ in the last digits: `close_times`)
        close(obj.y, reference.sol(obj.t), np.abs(reference.y).max())
        # NaN padding after the object's own steps, in the batch arrays only
        assert np.isnan(res.t[i, len(reference.t):]).all()
        assert np.isnan(res.y[i, :, len(reference.t):]).all()
        # no interpolant is built: scipy's count without dense output
        assert obj.nfev == scipy_solve_ivp(lotka_np(PARAMS[i]), (0.0, 6.0), Y0[i],
                                           method=method, rtol=RTOL, atol=ATOL).nfev
    assert res.sol is None and res[0].sol is None


@pytest.mark.parametrize("method", METHODS)
def test_terminal_event_ends_the_steps_and_the_solution_at_the_root(method):
    event = Event(prey_low, terminal=True, direction=-1)
    res = solve_ivp(lotka, (0.0, 6.0), Y0, method=method, rtol=RTOL, atol=ATOL, params=PARAMS,
                    events=[event], dense_output=True, t_eval="steps")
    for i, reference in enumerate(scipy_runs((0.0, 6.0), method, events=[prey_low_np],
                                             dense_output=True)):
        assert res[i].status == reference.status == 1
        scale = np.abs(reference.y).max()
        close_times(res[i].t, reference.t, (0.0, 6.0))
        close(res[i].y, reference.sol(res[i].t), scale)
        assert res[i].t[-1] == res[i].t_events[0][0]
        assert abs(res[i].y[0, -1] - 1.2) < 1e-9
        close_times(res[i].sol.ts, reference.sol.ts, (0.0, 6.0))
        # past the root the last step extrapolates, as scipy's
        grid = np.linspace(0.0, res[i].t[-1] + 0.05, 13)
        close(res[i].sol(grid), reference.sol(grid), scale)


def test_output_times_events_and_dense_output_together():
    t_eval = np.linspace(0.0, 6.0, 25)
    event = Event(prey_low, terminal=False, direction=-1)
    plain = solve_ivp(lotka, (0.0, 6.0), Y0, t_eval=t_eval, params=PARAMS, rtol=RTOL, atol=ATOL,
                      events=[event])
    res = solve_ivp(lotka, (0.0, 6.0), Y0, t_eval=t_eval, params=PARAMS, rtol=RTOL, atol=ATOL,
                    events=[event], dense_output=True)
    np.testing.assert_array_equal(res.y, plain.y)
    np.testing.assert_array_equal(res.t_events[0], plain.t_events[0])
    np.testing.assert_array_equal(res.nsteps, plain.nsteps)
    np.testing.assert_allclose(res.sol(t_eval), res.y, rtol=0, atol=1e-14)
    assert plain.n_events[:, 0].min() > 0  # the event did occur


def test_a_failed_object_keeps_its_own_status_and_nan():
    y0 = Y0.copy()
    y0[1, 0] = np.nan
    res = solve_ivp(lotka, (0.0, 6.0), y0, params=PARAMS, rtol=RTOL, atol=ATOL,
                    dense_output=True, t_eval="steps")
    assert list(res.status) == [0, -3, 0]
    grid = np.linspace(0.0, 6.0, 7)
    values = res.sol(grid)
    assert np.isnan(values[1]).all() and np.isfinite(values[[0, 2]]).all()
    np.testing.assert_array_equal(res[1].t, [0.0])  # t0 only, its state as given
    np.testing.assert_array_equal(res[1].y[:, 0], y0[1])
    alone = solve_ivp(lotka, (0.0, 6.0), Y0[[0, 2]], params=PARAMS[[0, 2]], rtol=RTOL,
                      atol=ATOL, dense_output=True)
    np.testing.assert_array_equal(values[[0, 2]], alone.sol(grid))


def test_an_empty_span_is_constant_as_scipys():
    res = solve_ivp(lotka, (2.0, 2.0), Y0[0], params=PARAMS[0], dense_output=True)
    reference = scipy_solve_ivp(lotka_np(PARAMS[0]), (2.0, 2.0), Y0[0], dense_output=True)
    np.testing.assert_array_equal(res.sol([1.0, 2.0, 3.0]), reference.sol([1.0, 2.0, 3.0]))
    assert res.sol([1.0]).shape == (2, 1)


def test_step_records_over_the_memory_limit_are_refused_with_their_size(monkeypatch):
    # the counting pass fits; 30 objects x ~28 steps x 8 x 2 numbers do not fit in 20 kB
    # (few objects: the simulator runs a thread per object)
    monkeypatch.setattr(memory, "LIMIT", 2e4)
    y0 = np.repeat(Y0, 10, axis=0)
    params = np.repeat(PARAMS, 10, axis=0)
    with pytest.raises(memory.OutputTooLargeError,
                       match=r"30 objects x \d+ steps \(an interpolant of 8 x 2 numbers per "
                             r"step\) need .* kB, more than the 20 kB allowed"):
        solve_ivp(lotka, (0.0, 6.0), y0, params=params, rtol=RTOL, atol=ATOL, dense_output=True)


def test_step_records_that_max_step_makes_too_many_are_refused_before_any_run(monkeypatch):
    """max_step=1e-3 over (0, 6): at least 6000 steps per object, 30 x 6000 x 8 x 2
    numbers (23 MB) over a 1 MB limit: refused with that bound, no kernel run (before,
    the counting pass integrated every object first: minutes at 1e5 objects)."""
    from hapsira_core.ivp import build

    monkeypatch.setattr(memory, "LIMIT", 1e6)
    runs = []
    monkeypatch.setattr(build, "run", lambda *args, **kwargs: runs.append(args))
    y0 = np.repeat(Y0, 10, axis=0)
    params = np.repeat(PARAMS, 10, axis=0)
    for options, per_step in (({"dense_output": True}, "an interpolant of 8 x 2 numbers"),
                              ({"t_eval": "steps"}, "a state of 2 numbers")):
        with pytest.raises(memory.OutputTooLargeError,
                           match=r"30 objects x at least 6000 steps \(\|tf - t0\| / max_step, "
                                 + per_step + r" per step\) need [\d.]+ MB, more than the 1 MB"):
            solve_ivp(lotka, (0.0, 6.0), y0, params=params, rtol=RTOL, atol=ATOL,
                      max_step=1e-3, **options)
    assert runs == []


def test_bad_options_name_themselves():
    with pytest.raises(TypeError, match="dense_output: expected True or False"):
        solve_ivp(lotka, (0.0, 1.0), Y0, params=PARAMS, dense_output="yes")
    with pytest.raises(ValueError, match='t_eval: expected an array of times, None or "steps"'):
        solve_ivp(lotka, (0.0, 1.0), Y0, params=PARAMS, t_eval="all")
    with pytest.raises(ValueError, match="t: expected a number or a 1-D array"):
        solve_ivp(lotka, (0.0, 1.0), Y0, params=PARAMS, dense_output=True).sol(np.ones((2, 2)))
