"""Per-object spans and output times of solve_ivp (issue 27 item 3): each object as
scipy's solve_ivp called with that object's own t_span and t_eval."""

import numpy as np
import pytest
from scipy.integrate import solve_ivp as scipy_solve_ivp

from hapsira_core.ivp import build, solve_ivp

from .test_solve_ivp import METHODS, lotka, lotka_ensemble, lotka_np

TOL = dict(rtol=1e-9, atol=1e-11)


def spans(n_objects):
    """Forward, backward and degenerate spans, each object its own."""
    t0 = np.array([0.0, 2.0, 1.0, 0.5, -1.0, 3.0])[:n_objects]
    tf = np.array([6.0, -1.5, 1.0, 4.0, 2.5, 0.0])[:n_objects]
    return t0, tf


def own_times(t0, tf, count):
    """A row of ``count`` times inside [t0, tf], sorted in its direction."""
    return np.linspace(t0, tf, count) if t0 != tf else np.full(count, t0)


def reference(params, y0, t0, tf, method, t_eval=None):
    return scipy_solve_ivp(lotka_np(params), (t0, tf), y0, method=method, t_eval=t_eval, **TOL)


def steps(params, y0, t0, tf, method):
    return len(reference(params, y0, t0, tf, method).t) - 1


@pytest.mark.parametrize("method", METHODS)
def test_per_object_spans_and_output_times_match_scipy_object_by_object(method, simulated):
    n_objects = 3 if simulated else 6
    y0, params = lotka_ensemble(n_objects, seed=3)
    t0, tf = spans(n_objects)
    counts = [5, 3, 2, 4, 1, 6][:n_objects]  # rows shorter than M: NaN-padded
    m = max(counts)
    t_eval = np.full((n_objects, m), np.nan)
    for i, count in enumerate(counts):
        t_eval[i, :count] = own_times(t0[i], tf[i], count)
    res = solve_ivp(lotka, (t0, tf), y0, method=method, t_eval=t_eval, params=params, **TOL)
    assert res.t.shape == (n_objects, m) and res.y.shape == (n_objects, 2, m)
    for i in range(n_objects):
        obj = res[i]
        assert obj.status == 0, obj.message
        np.testing.assert_array_equal(obj.t, t_eval[i, :counts[i]])
        assert obj.y.shape == (2, counts[i])
        assert np.isnan(res.y[i, :, counts[i]:]).all()
        if t0[i] == tf[i]:  # a degenerate span: the initial state, no step
            assert obj.nsteps == 0
            np.testing.assert_array_equal(obj.y, np.repeat(y0[i][:, None], counts[i], 1))
            continue
        expected = reference(params[i], y0[i], t0[i], tf[i], method, t_eval[i, :counts[i]])
        np.testing.assert_allclose(obj.y, expected.y, rtol=1e-12,
                                   atol=1e-12 * np.abs(expected.y).max())
        assert obj.nfev == expected.nfev
        assert obj.nsteps == steps(params[i], y0[i], t0[i], tf[i], method)


def test_default_t_eval_with_per_object_spans_is_each_objects_end_state(simulated):
    n_objects = 3 if simulated else 6
    y0, params = lotka_ensemble(n_objects, seed=4)
    t0, tf = spans(n_objects)
    res = solve_ivp(lotka, (t0, tf), y0, params=params, **TOL)
    np.testing.assert_array_equal(res.t, tf[:, None])
    for i in range(n_objects):
        expected = reference(params[i], y0[i], t0[i], tf[i], "DOP853")
        # scipy counts its no-op step over a degenerate span (t = [t0, t0]); ours takes none
        assert res[i].nsteps == (len(expected.t) - 1 if t0[i] != tf[i] else 0)
        np.testing.assert_array_equal(res[i].t, [tf[i]])
        np.testing.assert_allclose(res[i].y[:, 0], expected.y[:, -1], rtol=1e-12,
                                   atol=1e-12 * np.abs(expected.y).max())


def test_shared_start_per_object_end_and_shared_output_times(simulated):
    n_objects = 3 if simulated else 5
    y0, params = lotka_ensemble(n_objects, seed=5)
    tf = np.linspace(2.0, 4.0, n_objects)
    t_eval = np.array([0.0, 0.5, 2.0])
    res = solve_ivp(lotka, (0.0, tf), y0, t_eval=t_eval, params=params, **TOL)
    np.testing.assert_array_equal(res.t, t_eval)  # shared times stay (M,)
    for i in range(n_objects):
        expected = reference(params[i], y0[i], 0.0, tf[i], "DOP853", t_eval)
        np.testing.assert_allclose(res.y[i], expected.y, rtol=1e-12,
                                   atol=1e-12 * np.abs(expected.y).max())
        assert res[i].nsteps == steps(params[i], y0[i], 0.0, tf[i], "DOP853")


def test_shared_span_with_per_object_output_times():
    y0, params = lotka_ensemble(2, seed=6)
    t_eval = np.array([[0.0, 1.0, 3.0], [2.5, 2.75, np.nan]])
    res = solve_ivp(lotka, (0.0, 3.0), y0, t_eval=t_eval, params=params, **TOL)
    for i in range(2):
        times = t_eval[i][~np.isnan(t_eval[i])]
        expected = reference(params[i], y0[i], 0.0, 3.0, "DOP853", times)
        np.testing.assert_allclose(res[i].y, expected.y, rtol=1e-12,
                                   atol=1e-12 * np.abs(expected.y).max())


def test_new_spans_and_output_times_are_data_not_kernels():
    y0, params = lotka_ensemble(3, seed=7)
    solve_ivp(lotka, (0.0, 1.0), y0, params=params)  # the shared form builds the kernel
    before = len(build.KERNELS)
    solve_ivp(lotka, (np.zeros(3), np.array([1.0, -1.0, 2.0])), y0, params=params)
    solve_ivp(lotka, (np.ones(3), np.array([2.0, 3.0, 0.0])), y0, params=params,
              t_eval=np.array([[1.0, 2.0], [1.5, np.nan], [0.5, 0.0]]))
    assert len(build.KERNELS) == before


def test_one_object_with_a_row_of_times():
    y0, params = lotka_ensemble(1, seed=8)
    res = solve_ivp(lotka, ([0.0], [2.0]), y0[0], t_eval=[[0.5, 2.0]], params=params[0], **TOL)
    np.testing.assert_array_equal(res.t, [0.5, 2.0])
    expected = reference(params[0], y0[0], 0.0, 2.0, "DOP853", [0.5, 2.0])
    np.testing.assert_allclose(res.y, expected.y, rtol=1e-12, atol=1e-12 * expected.y.max())


Y0 = np.ones((3, 2))
BAD = [
    (dict(t_span=(np.zeros(2), np.ones(2))), r"t_span: expected .* shape \(3,\)"),
    (dict(t_span=(np.zeros((3, 1)), np.ones(3))), r"t_span: expected .* shape \(3,\)"),
    (dict(t_span=(np.zeros(3), np.array([1.0, np.nan, 1.0]))), r"t_span: .*finite.*object 1"),
    (dict(t_span=(np.array([0.0, 0.0, np.inf]), np.ones(3))), r"t_span: .*finite t0.*object 2"),
    (dict(t_span=(np.zeros(3), np.array([1.0, 1.0, np.inf])), t_eval=[0.5]),
     r"t_span: an infinite tf needs a terminal event"),
    (dict(t_span=(0.0, np.ones(3)), t_eval=np.ones((2, 1))), r"t_eval: expected shape .*\(3, M\)"),
    (dict(t_span=(0.0, np.ones(3)), t_eval=np.ones((3, 1, 1))), r"t_eval: expected shape"),
    (dict(t_span=(0.0, np.array([1.0, 2.0, 3.0])), t_eval=[0.5, 1.5]),
     r"t_eval: .*within its own t_span \(object 0"),
    (dict(t_span=(0.0, 1.0), t_eval=[[0.0, 1.0], [1.0, 0.5], [0.0, 0.5]]),
     r"t_eval: .*sorted .*object 1"),
    # a repeated time, as scipy refuses it: backward, in one row and in the shared times
    (dict(t_span=(np.zeros(3), np.array([1.0, -1.0, 1.0])),
          t_eval=[[0.0, 1.0], [-0.5, -0.5], [0.0, 1.0]]),
     r"t_eval: .*sorted .*, none repeated .*object 1"),
    (dict(t_span=(1.0, 0.0), t_eval=[1.0, 0.5, 0.5]), r"t_eval: .*sorted .*, none repeated"),
    (dict(t_span=(np.zeros(3), np.array([1.0, -1.0, 1.0])), t_eval=[[0, 1], [0, -2], [0, 1]]),
     r"t_eval: .*within its own t_span \(object 1"),
    (dict(t_span=(0.0, 1.0), t_eval=[[0.0, np.nan, 1.0], [0, 1, 1], [0, 1, 1]]),
     r"t_eval: expected NaN only as trailing padding .*object 0"),
    (dict(t_span=(0.0, 1.0), t_eval=[[0.0, np.inf], [0, 1], [0, 1]]), r"t_eval: .*finite"),
    (dict(t_span=(np.zeros(3), np.array([1.0, 0.0, 2.0])), first_step=0.5),
     r"first_step: exceeds the time span"),
]


@pytest.mark.parametrize("kwargs, match", BAD)
def test_bad_spans_and_output_times_name_the_argument(kwargs, match):
    with pytest.raises(ValueError, match=match):
        solve_ivp(lotka, y0=Y0, params=np.ones(4), **kwargs)


# The JAX and Dask fronts take per-object times too: tests/core/fronts/test_fronts_spans_stm.py
