"""dense_output=True and t_eval="steps" for the implicit methods (`hapsira_core.ivp.dense`).

Radau and BDF against scipy's ``OdeSolution`` (scipy given the exact Jacobian, the
one ours derives, so that the accepted steps are the same: `test_radau`, `test_bdf`);
Rodas5P, which scipy lacks, against a tight reference and for its continuity.
The explicit methods' dense output: `test_dense`.
"""

import numpy as np
import pytest
from scipy.integrate import solve_ivp as scipy_solve_ivp

from hapsira_core import memory, settings
from hapsira_core.ivp import Event, solve_ivp
from hapsira_core.jit import hjit

from .test_radau import (robertson, robertson_jac_rows, robertson_np, robertson_rows,
                         van_der_pol, van_der_pol_np)

SIMULATED = settings.TARGET == "cuda" and settings.cuda_simulator_enabled()
#: A real GPU fuses multiply-adds (the host targets and the simulator do not).
FMA = settings.TARGET == "cuda" and not SIMULATED
SCIPY_METHODS = ("Radau", "BDF")

ROBERTSON_Y0 = np.array([[1.0, 0.0, 0.0], [0.9, 0.1, 0.0], [0.5, 0.0, 0.5]])
ROBERTSON_P = np.array([[0.04, 1e4, 3e7], [0.05, 1e4, 3e7], [0.04, 2e4, 2e7]])
VDP_Y0 = np.array([[2.0, 0.0], [1.0, 0.0], [2.0, 0.0]])
VDP_P = np.array([[1000.0], [1000.0], [500.0]])

# name: fun, scipy's (fun, jac) from params, y0, params, span, rtol, atol. Spans where
# scipy's and our step sequences stay equal (`test_radau`, `test_bdf`), short under the
# simulator (which interprets every thread in Python), one object there.
PROBLEMS = {
    "robertson": (robertson, robertson_np, ROBERTSON_Y0, ROBERTSON_P,
                  (0.0, 40.0 if SIMULATED else 1e3), 1e-6, 1e-10),
    "van_der_pol": (van_der_pol, van_der_pol_np, VDP_Y0, VDP_P,
                    (0.0, 100.0 if SIMULATED else 1500.0), 1e-6, 1e-6),
}


if settings.TARGET == "parallel":
    # the per-object loop of cpu in a prange (checked there on both problems): Robertson
    # alone here, each problem being several implicit kernels to compile (CI's time)
    del PROBLEMS["van_der_pol"]


def objects(y0, params):
    count = 1 if SIMULATED else len(y0)
    return y0[:count], params[:count]


def scipy_run(name, method, i, span=None, **options):
    _, scipy_form, y0, params, span_, rtol, atol = PROBLEMS[name]
    f, jac = scipy_form(params[i])
    return scipy_solve_ivp(f, span or span_, y0[i], method=method, rtol=rtol, atol=atol,
                           jac=jac, **options)


def ours(name, method, span=None, **options):
    fun, _, y0, params, span_, rtol, atol = PROBLEMS[name]
    y0, params = objects(y0, params)
    return solve_ivp(fun, span or span_, y0, method=method, rtol=rtol, atol=atol,
                     params=params, **options)


def component_scale(reference):
    """Each component's largest size over the run (Robertson's y2 is ~1e-5 of y0)."""
    return np.abs(reference.y).max(axis=1, keepdims=True)


def close(actual, expected, scale, within):
    error = np.abs(actual - expected) / scale
    assert error.max() <= within, error.max()


#: The absolute part of a step's bound after the first: a real GPU contracts a * b + c into
#: fused multiply-adds, in the step and in the polynomial's coefficients, which moved one
#: interpolant of BDF's Van der Pol by 2.8e-13 of the component's size where its ends
#: agreed to 8e-14 (H200, 2026-11-27); the host and the simulator do not fuse: 1e-13 there.
FLOOR = 1e-12 if settings.TARGET == "cuda" and not settings.cuda_simulator_enabled() else 1e-13


def assert_scipys_interpolants(sol, expected, scale):
    """Each step's interpolant is scipy's for that step, to the rounding in which the two
    runs' states differ.

    Both take the same steps, but compute in another order (scipy sums with BLAS and
    LAPACK), so the breakpoints and states drift apart by rounding (measured: up to
    4e-6 of a component's size over BDF's 1184 steps of Van der Pol, 2e-10 on
    Robertson; `test_radau` and `test_bdf` accept it). So each step is held to its own
    ends' agreement: at the same fractions of the step, within 3 times the larger
    difference of the states at its two ends (measured: 1.7 times at most, and 2.1 on
    Van der Pol with numpy 2.4.6's OpenBLAS under scipy 1.17.1 (Radau step 435, BDF
    step 1154: scipy's rounding moved, ours did not); another
    polynomial of the same order would be off by its local error, about 1e-6 of the
    size here), plus FLOOR (1e-14 on the first step, where nothing has drifted).
    Before the first step and after the last the end steps extrapolate, as scipy's:
    half a step out, within 8 times (measured: 3.3 times at most). Returns the largest difference at the ends."""
    assert sol.n_segments == expected.n_segments
    ts, ts_scipy = sol.ts, expected.ts
    ends = np.abs(sol(ts) - expected(ts_scipy)) / scale  # (n, breakpoints)
    inside = np.linspace(0.0, 1.0, 7)[1:-1]
    last = sol.n_segments - 1
    for k in range(sol.n_segments):
        fractions = np.concatenate([[-0.5] if k == 0 else [], inside, [1.5] if k == last else []])
        ours_k = sol(ts[k] + fractions * (ts[k + 1] - ts[k]))
        scipy_k = expected(ts_scipy[k] + fractions * (ts_scipy[k + 1] - ts_scipy[k]))
        error = np.abs(ours_k - scipy_k) / scale
        # outside the step the polynomials' differences grow as |x|^3 and more: 8 there
        factor = np.where((fractions < 0.0) | (fractions > 1.0), 8.0, 3.0)
        bound = (factor * np.maximum(ends[:, k], ends[:, k + 1])[:, None]
                 + (1e-14 if k == 0 else FLOOR))
        assert (error <= bound).all(), (k, error, bound)


@pytest.mark.parametrize("name", list(PROBLEMS))
@pytest.mark.parametrize("method", SCIPY_METHODS)
def test_sol_equals_scipys_odesolution(method, name):
    """The same steps, the same interpolant: Radau's collocation polynomial (3 columns of
    Q and y_old), BDF's differences up to the step's order (`assert_scipys_interpolants`)."""
    span = PROBLEMS[name][4]
    res = ours(name, method, dense_output=True, t_eval="steps")
    assert (res.status == 0).all()
    grid = np.linspace(*span, 101)
    batch = res.sol(grid)
    assert batch.shape == (len(res.status), res.y.shape[1], grid.size)
    for i in range(len(res.status)):
        reference = scipy_run(name, method, i, dense_output=True)
        sol, expected = res[i].sol, reference.sol
        scale = component_scale(reference)
        assert sol.n_segments == expected.n_segments == res.nsteps[i] > 10
        np.testing.assert_array_equal(sol.ts, res[i].t)  # t_eval="steps"'s breakpoints
        close(sol(sol.ts), res[i].y, scale, 1e-14)  # and states: the step ends, to rounding
        assert (sol.t_min, sol.t_max) == span
        assert_scipys_interpolants(sol, expected, scale)
        close(batch[i], sol(grid), 1.0, 0.0)
        assert sol(grid[3]).shape == (res.y.shape[1],)
        # dense output costs these methods no evaluation: scipy's counts
        assert (res.nfev[i], res.njev[i], res.nlu[i]) == (reference.nfev, reference.njev,
                                                          reference.nlu)
    assert res.sol(span[1] / 2).shape == (len(res.status), res.y.shape[1])


@pytest.mark.parametrize("method", SCIPY_METHODS)
def test_every_accepted_step_as_scipys_default_output(method):
    """t_eval="steps": scipy's t_eval=None, the breakpoints and the states there (to the
    rounding drift of `assert_scipys_interpolants`: measured 4e-9 of the span in t,
    2.4e-10 of a component's size in y, on these runs)."""
    res = ours("robertson", method, t_eval="steps")
    for i in range(len(res.status)):
        reference = scipy_run("robertson", method, i)
        obj = res[i]
        assert obj.t.shape == reference.t.shape
        close(obj.t, reference.t, reference.t[-1], 1e-8)
        close(obj.y, reference.y, component_scale(reference), 1e-9)
        assert (obj.nfev, obj.njev, obj.nlu) == (reference.nfev, reference.njev, reference.nlu)
        assert np.isnan(res.t[i, len(reference.t):]).all()
    assert res.sol is None


@pytest.mark.parametrize("span", [(0.0, 6.0), (6.0, 0.0)], ids=["forward", "backward"])
@pytest.mark.parametrize("method", SCIPY_METHODS)
def test_backward_and_forward_lotka_volterra_as_scipy(method, span):
    """A non-stiff problem both ways: BDF's interpolant on negative steps, and the choice
    of step at a breakpoint (the earlier one in the direction of integration)."""
    res = solve_ivp(lotka, span, LOTKA_Y0[:1], method=method, rtol=1e-6, atol=1e-9,
                    params=LOTKA_P[:1], dense_output=True)
    reference = scipy_solve_ivp(lotka_np(LOTKA_P[0]), span, LOTKA_Y0[0], method=method,
                                rtol=1e-6, atol=1e-9, jac=lotka_jac_np(LOTKA_P[0]),
                                dense_output=True)
    sol, expected = res[0].sol, reference.sol
    assert sol.n_segments == expected.n_segments > 10
    assert_scipys_interpolants(sol, expected, component_scale(reference))


@hjit
def lotka(t, y, p):
    return (p[0] * y[0] - p[1] * y[0] * y[1], -p[2] * y[1] + p[3] * y[0] * y[1])


def lotka_np(p):
    return lambda t, y: [p[0] * y[0] - p[1] * y[0] * y[1], -p[2] * y[1] + p[3] * y[0] * y[1]]


def lotka_jac_np(p):
    return lambda t, y: [[p[0] - p[1] * y[1], -p[1] * y[0]],
                         [p[3] * y[1], -p[2] + p[3] * y[0]]]


LOTKA_Y0 = np.array([[10.0, 5.0], [4.0, 2.0]])
LOTKA_P = np.array([[1.5, 1.0, 3.0, 1.0], [1.2, 0.8, 2.5, 1.1]])


#: Robertson's y0 falls through it within the span, from every object's start
THRESHOLD = 0.8 if SIMULATED else 0.45


@hjit
def first_below(t, y, p):
    return y[0] - THRESHOLD


@pytest.mark.parametrize("method", SCIPY_METHODS)
def test_terminal_event_ends_the_steps_and_the_solution_at_the_root(method):
    span = (0.0, 40.0 if SIMULATED else 1e3)
    event = Event(first_below, terminal=True, direction=-1)
    res = ours("robertson", method, span=span, events=[event], dense_output=True,
               t_eval="steps")
    for i in range(len(res.status)):
        reference = scipy_run("robertson", method, i, span=span, dense_output=True,
                              events=_first_below_np)
        assert res.status[i] == reference.status == 1
        obj = res[i]
        assert obj.t[-1] == obj.t_events[0][0]
        np.testing.assert_allclose(obj.t_events[0][0], reference.t_events[0][0], rtol=1e-9)
        assert abs(obj.y[0, -1] - THRESHOLD) < 1e-9
        assert obj.sol.ts[-1] == obj.t_events[0][0]
        # past the root the last step extrapolates, as scipy's
        grid = np.linspace(0.0, obj.t[-1] * 1.05, 41)
        close(obj.sol(grid), reference.sol(grid), component_scale(reference), 1e-10)


def _first_below_np(t, y):
    return y[0] - THRESHOLD


_first_below_np.terminal = True
_first_below_np.direction = -1


def rodas_reference(i, t_eval, span):
    _, scipy_form, y0, params, _, _, _ = PROBLEMS["robertson"]
    f, jac = scipy_form(params[i])
    return scipy_solve_ivp(f, span, y0[i], method="Radau", rtol=1e-12, atol=1e-16, jac=jac,
                           t_eval=t_eval)


def test_rodas5p_within_its_tolerance_and_continuous():
    """Rodas5P's own interpolant (Steinebach 2023, order 4): between the breakpoints within
    the tolerance of a tight reference, continuous at every step's end (its value there
    is the step's end state: x = 1 gives y_new), and the numbers t_eval gets."""
    span = (0.0, 40.0 if SIMULATED else 1e3)
    res = ours("robertson", "Rodas5P", span=span, dense_output=True, t_eval="steps")
    assert (res.status == 0).all()
    for i in range(len(res.status)):
        obj = res[i]
        ts = obj.sol.ts
        assert obj.sol.n_segments == res.nsteps[i] > 10
        np.testing.assert_array_equal(ts, obj.t)
        # midpoints of every step: the interpolant alone, against scipy's Radau at 1e-12
        middles = 0.5 * (ts[1:] + ts[:-1])
        reference = rodas_reference(i, middles, span)
        scale = np.abs(reference.y).max(axis=1, keepdims=True)
        # rtol 1e-6 with atol 1e-10: within ten times the local tolerance
        error = np.abs(obj.sol(middles) - reference.y) / (1e-6 * np.abs(reference.y) + 1e-10)
        assert error.max() < 10.0, error.max()
        assert np.abs(obj.sol(middles) - reference.y).max(axis=1).max() > 0  # not the states
        # at a breakpoint the earlier step's interpolant, just after it the later one's
        left = obj.sol(ts[1:-1])
        right = obj.sol(np.nextafter(ts[1:-1], np.inf))
        close(left, obj.y[:, 1:-1], scale, 1e-14)
        close(right, obj.y[:, 1:-1], scale, 1e-12)
    # the step records give what t_eval gets inside the same steps
    t_eval = np.linspace(*span, 37)
    direct = ours("robertson", "Rodas5P", span=span, t_eval=t_eval)
    np.testing.assert_allclose(res.sol(t_eval), direct.y, rtol=1e-15, atol=0)




@pytest.mark.parametrize("method", ("Radau", "BDF", "Rodas5P"))
def test_array_form_with_jac_gives_the_tuple_forms_solution(method):
    """The records' evaluation needs no Jacobian: an array-form fun (which has none without
    jac=) with jac= gives the dense output of the tuple form's run."""
    span = (0.0, 20.0 if SIMULATED else 200.0)
    y0, params = objects(ROBERTSON_Y0, ROBERTSON_P)
    options = {"method": method, "rtol": 1e-6, "atol": 1e-10, "params": params,
               "dense_output": True}
    res = solve_ivp(robertson_rows, span, y0, jac=robertson_jac_rows, **options)
    tuple_form = solve_ivp(robertson, span, y0, **options)
    np.testing.assert_array_equal(res.nsteps, tuple_form.nsteps)
    grid = np.linspace(*span, 51)
    close(res.sol(grid), tuple_form.sol(grid), 1.0, 1e-12)


@hjit
def blow_up(t, y, p):  # y' = p y^2: a singularity at t = 1 / (p y0)
    return (p[0] * y[0] * y[0],)


@pytest.mark.parametrize("method", ("Radau", "BDF", "Rodas5P"))
def test_a_failed_object_keeps_its_own_status_and_nan(method):
    """A NaN start (no step: NaN everywhere) and a singularity (its steps up to it kept)
    beside healthy objects, whose solutions are those of a run without them."""
    y0 = np.array([[1.0], [np.nan], [1.0], [0.5]])
    params = np.array([[-1.0], [-1.0], [1.0], [-2.0]])  # object 2 blows up at t = 1
    options = {"method": method, "rtol": 1e-6, "atol": 1e-9, "dense_output": True}
    res = solve_ivp(blow_up, (0.0, 3.0), y0, params=params, **options)
    assert list(res.status) == [0, -3, -1, 0]
    grid = np.linspace(0.0, 3.0, 13)
    values = res.sol(grid)
    assert np.isnan(values[1]).all()
    assert res[1].sol.n_segments == 0
    assert 0.9 < res[2].sol.t_max < 1.01 and res[2].sol.n_segments == res.nsteps[2] > 5
    alone = solve_ivp(blow_up, (0.0, 3.0), y0[[0, 3]], params=params[[0, 3]], **options)
    np.testing.assert_array_equal(values[[0, 3]], alone.sol(grid))
    # y' = -c y^2: y = y0 / (1 + c y0 t)
    exact = y0[[0, 3], 0, None] / (1.0 - params[[0, 3], 0, None] * y0[[0, 3], 0, None] * grid)
    np.testing.assert_allclose(values[[0, 3], 0], exact, rtol=1e-4)


@pytest.mark.parametrize("method", ("Radau", "BDF", "Rodas5P"))
def test_an_empty_span_is_constant_as_scipys(method):
    res = solve_ivp(robertson, (2.0, 2.0), ROBERTSON_Y0[0], params=ROBERTSON_P[0],
                    method=method, dense_output=True)
    np.testing.assert_array_equal(res.sol([1.0, 2.0, 3.0]), np.tile(ROBERTSON_Y0[0][:, None],
                                                                     (1, 3)))


@pytest.mark.parametrize(("method", "rows"), [("Radau", 4), ("BDF", 10), ("Rodas5P", 5)])
def test_step_records_over_the_memory_limit_are_refused_with_their_size(monkeypatch, method,
                                                                        rows):
    """Each method's record per step: y_old and its coefficients (Radau Q: 3 rows; Rodas5P
    y_new and 3; BDF D up to order 5, its order, step and end: 9), n numbers each."""
    # the counting pass fits (the work rows: 0.8 to 1.9 kB an object), the records do not
    # (few objects: the simulator runs a thread per object)
    monkeypatch.setattr(memory, "LIMIT", 6e4)
    y0 = np.repeat(ROBERTSON_Y0[:1], 20, axis=0)
    with pytest.raises(memory.OutputTooLargeError,
                       match=rf"20 objects x \d+ steps \(an interpolant of {rows} x 3 numbers "
                             r"per step\) need [\d.]+ [kM]B, more than the 60 kB allowed"):
        solve_ivp(robertson, (0.0, 40.0), y0, params=ROBERTSON_P[0], method=method,
                  rtol=1e-6, atol=1e-10, dense_output=True)
