"""Params reads at a computed index, guarded where a target cannot raise (a GPU).

The rewrite is checked on its source, in plain Python, and compiled on the
active target; the last test runs the public call on every target: a named
error on the host and the simulator, the failing object alone on a GPU.
"""

import math

import numpy as np
import pytest
from scipy.integrate import solve_ivp as scipy_solve_ivp

from hapsira_core import settings
from hapsira_core.ivp import solve_ivp
from hapsira_core.ivp.checks import ParamsIndexError, guarded_reads_twin, read_or_nan
from hapsira_core.jit import hjit
from hapsira_core.kernels import guard
from hapsira_core.targets import active

SCALE = 2.0


def decay_at_computed_index(t, y, p):
    k = int(p[0])
    rate = p[k] * SCALE + p[-1] * 0.0
    return (-rate * y[0] + 0.0 * p[1:][0],)


decay = hjit(decay_at_computed_index)


def test_only_computed_reads_of_the_row_are_rewritten():
    source, guarded = guard.guarded_source(decay_at_computed_index, 2)
    assert guarded == 2  # p[k], p[-1]: computed or not, an index that is not a plain int
    assert f"{guard.READ}(p, k)" in source and f"{guard.READ}(p, -1)" in source
    # constant subscripts and slices are left to the width check
    assert "int(p[0])" in source and "p[1:][0]" in source
    assert guard.guarded_source(decay_at_computed_index, 1)[1] == 0  # y is not guarded


def test_the_plain_python_twin_reads_nan_past_either_end():
    def read(row, i):
        j = i + len(row) if i < 0 else i
        return row[j] if 0 <= j < len(row) else math.nan

    twin = guard.guarded_function(decay_at_computed_index, 2, read)
    y = (3.0,)
    in_range = np.array([1.0, 0.5, 7.0])
    assert twin(0.0, y, in_range) == decay_at_computed_index(0.0, y, in_range)
    assert math.isnan(twin(0.0, y, np.array([5.0, 0.5]))[0])
    assert math.isnan(twin(0.0, y, np.array([-9.0, 0.5]))[0])
    with pytest.raises(IndexError):
        decay_at_computed_index(0.0, y, np.array([5.0, 0.5]))


def test_a_function_without_source_is_refused_by_name():
    namespace = {}
    exec("def made(t, y, p):\n    return (p[int(p[0])],)\n", namespace)
    with pytest.raises(guard.SourceUnavailable, match="made"):
        guard.guarded_source(namespace["made"], 2)


def test_the_compiled_twin_fails_only_the_object_that_reads_past(simulated):
    """On the active target's compiler (the GPU's on a GPU): the third object's row
    names column 5 of 2; the others are the unguarded function's numbers, bit for bit."""
    twin = guarded_reads_twin(decay, 2)
    twin.hapsira_checked_twin = True  # as `checks.bounds_checked` marks it: not guarded again
    y0 = np.array([[1.0], [2.0], [3.0]])
    params = np.array([[1.0, 0.5], [1.0, 1.5], [5.0, 0.5]])
    got = solve_ivp(twin, (0.0, 1.0), y0, params=params, rtol=1e-10, atol=1e-12)
    assert got.status.tolist() == [0, 0, -3]
    assert np.all(np.isnan(got.y[2]))
    want = solve_ivp(decay, (0.0, 1.0), y0[:2], params=params[:2], rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(got.y[:2], want.y)
    np.testing.assert_array_equal(got.nsteps[:2], want.nsteps)
    assert read_or_nan is not None


def test_a_twin_is_not_checked_again():
    """A twin's reads look computed too; checking it again made a factory recipe
    that named itself (a RecursionError building the kernel on a GPU)."""
    from hapsira_core.ivp.checks import bounds_checked
    once = bounds_checked(decay, 2)
    assert bounds_checked(once, 2) is once
    assert (once is decay) == (not active.BOUNDS_CHECKS
                               and not getattr(active, "GUARDED_READS", False))


def test_a_read_past_the_row_never_goes_unnoticed_on_any_target():
    """The public call: raises ParamsIndexError where the target can check (cpu,
    parallel, the simulator); on a GPU the object stops alone with NaN rows."""
    y0 = np.array([[1.0], [2.0], [3.0]])
    params = np.array([[1.0, 0.5], [1.0, 1.5], [5.0, 0.5]])
    if getattr(active, "GUARDED_READS", False):
        res = solve_ivp(decay, (0.0, 1.0), y0, params=params, rtol=1e-10, atol=1e-12)
        assert res.status.tolist()[2] == -3 and np.all(np.isnan(res.y[2]))
        assert res.status.tolist()[:2] == [0, 0]
    else:
        assert active.BOUNDS_CHECKS or settings.cuda_simulator_enabled()
        with pytest.raises(ParamsIndexError, match="decay_at_computed_index"):
            solve_ivp(decay, (0.0, 1.0), y0, params=params, rtol=1e-10, atol=1e-12)
    # in range: scipy's numbers
    res = solve_ivp(decay, (0.0, 1.0), y0[:2], params=params[:2], rtol=1e-10, atol=1e-12)
    for i in range(2):
        rate = params[i, 1] * SCALE
        want = scipy_solve_ivp(lambda t, y: -rate * y, (0.0, 1.0), y0[i], method="DOP853",
                               rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(res.y[i, 0, -1], want.y[0, -1], rtol=1e-12)
        assert res.nsteps[i] == len(want.t) - 1


@hjit
def rate_at(p, column):
    return p[int(p[column])]


@hjit
def decay_through_a_helper(t, y, p):
    return (-rate_at(p, 0) * y[0],)


def test_a_read_past_the_row_inside_a_helper_is_caught_too():
    """The helper receives p by name and reads it at a computed index; its own
    compilation had no checks (status 0 and garbage on cpu and parallel)."""
    y0 = np.array([[1.0], [2.0], [3.0]])
    params = np.array([[1.0, 0.5], [1.0, 1.5], [5.0, 0.5]])
    if getattr(active, "GUARDED_READS", False):
        res = solve_ivp(decay_through_a_helper, (0.0, 1.0), y0, params=params)
        assert res.status.tolist()[:2] == [0, 0] and res.status[2] == -3
        assert np.all(np.isnan(res.y[2]))
    else:
        with pytest.raises(ParamsIndexError, match="decay_through_a_helper"):
            solve_ivp(decay_through_a_helper, (0.0, 1.0), y0, params=params)
    res = solve_ivp(decay_through_a_helper, (0.0, 1.0), y0[:2], params=params[:2],
                    rtol=1e-10, atol=1e-12)
    want = solve_ivp(decay, (0.0, 1.0), y0[:2], params=params[:2] * [1.0, 1.0 / SCALE],
                     rtol=1e-10, atol=1e-12)
    assert res.status.tolist() == [0, 0]
    np.testing.assert_allclose(res.y, want.y, rtol=1e-13)


def fill_with_shift(t, y, p, dydt):
    k = int(p[0])
    for i in range(y.shape[0]):
        dydt[i + k] = -y[i]
    dydt[0] += 0.0


fill = hjit(fill_with_shift)


def test_stores_into_dydt_are_guarded_in_the_array_form():
    source, guarded = guard.guarded_source(fill_with_shift, 2, output=3)
    assert guarded == 2  # the two stores (p[0] is a constant subscript)
    assert f"{guard.STORE}(dydt, i + k, -y[i])" in source
    assert source.count(f"{guard.POISON}(dydt, {guard.FLAG})") == 1

    def read(row, i):
        return row[i] if 0 <= i < len(row) else math.nan

    def store(row, i, value):
        if 0 <= i < len(row):
            row[i] = value
            return False
        return True

    def poison(row, flag):
        if flag:
            row[:] = math.nan

    twin = guard.guarded_function(fill_with_shift, 2, read, output=3, store=store,
                                  poison=poison)
    y = np.array([1.0, 2.0, 3.0])
    for shift, want in ((0.0, -y), (1.0, np.full(3, np.nan))):
        dydt = np.zeros(3)
        twin(0.0, y, np.array([shift]), dydt)
        np.testing.assert_array_equal(dydt, want)


def test_the_compiled_store_guard_fails_only_the_object_that_writes_past():
    """On the active target's compiler (the GPU's on a GPU): the second object's shift
    puts every store one past dydt's end; the first is the unguarded function's numbers."""
    twin = guarded_reads_twin(fill, 2, 3)
    twin.hapsira_checked_twin = True
    y0 = np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]])
    got = solve_ivp(twin, (0.0, 1.0), y0, params=[[0.0], [1.0]], rtol=1e-10, atol=1e-12)
    assert got.status.tolist() == [0, -3]
    assert np.all(np.isnan(got.y[1]))
    np.testing.assert_allclose(got.y[0, :, -1], y0[0] * math.exp(-1.0), rtol=1e-9)
