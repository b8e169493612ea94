"""The result family of `hapsira_core.ivp.results`: each field defined once, and what
follows from the field lists (one object's result, ``res[i]``, ``repr``) the same for
the numpy result and its Dask view, on real solves checked against scipy."""

import numpy as np
import pytest
from extras import need
from scipy.integrate import solve_ivp as scipy_solve_ivp

from hapsira_core import settings
from hapsira_core.ivp import (
    STATUS_MESSAGES,
    Event,
    IVPResult,
    ObjectResult,
    Statuses,
    results,
    solve_ivp,
)
from hapsira_core.jit import hjit

SIM = settings.TARGET == "cuda" and settings.cuda_simulator_enabled()
N = 3 if SIM else 7


@hjit
def lotka(t, y, p):
    return (p[0] * y[0] - p[1] * y[0] * y[1], -p[2] * y[1] + p[3] * y[0] * y[1])


@hjit
def prey_level(t, y, p):
    return y[0] - p[4]


def lotka_np(p):
    """scipy's twin of `lotka`, and of `prey_level` (its events function)."""
    return (lambda t, y: [p[0] * y[0] - p[1] * y[0] * y[1], -p[2] * y[1] + p[3] * y[0] * y[1]],
            lambda t, y: y[0] - p[4])


def _problem(seed):
    """N varied objects (the last one's state NaN: it fails alone), per-object params
    (the event's level in p[4]) and per-object output times, rows padded with NaN."""
    rng = np.random.default_rng(seed)
    y0 = rng.uniform(1.0, 8.0, (N, 2))
    y0[-1, 0] = np.nan
    params = np.column_stack([rng.uniform(1.0, 2.0, N), rng.uniform(0.5, 1.5, N),
                              rng.uniform(2.0, 4.0, N), rng.uniform(0.5, 1.5, N),
                              rng.uniform(2.0, 4.0, N)])
    t_eval = np.sort(rng.uniform(0.0, 6.0, (N, 5)), axis=1)
    for i in range(N):
        t_eval[i, 5 - i % 3:] = np.nan  # rows of 5, 4 and 3 times
    return y0, params, t_eval


def _solve(y0, params, t_eval, **options):
    return solve_ivp(lotka, (0.0, 6.0), y0, t_eval=t_eval, rtol=1e-9, atol=1e-11,
                     params=params, events=[Event(prey_level)], max_event_records=4,
                     **options)


@pytest.fixture(scope="module")
def solved():
    y0, params, t_eval = _problem(seed=5)
    return y0, params, t_eval, _solve(y0, params, t_eval)


def test_each_object_is_scipys_solution(solved):
    y0, params, t_eval, res = solved
    assert len(res) == N and res.t.shape == (N, 5)
    for i in range(N - 1):
        obj = res[i]
        assert isinstance(obj, ObjectResult)
        kept = 5 - i % 3
        assert obj.t.tolist() == t_eval[i, :kept].tolist() and obj.y.shape == (2, kept)
        fun, event = lotka_np(params[i])
        ref = scipy_solve_ivp(fun, (0.0, 6.0), y0[i], method="DOP853", t_eval=obj.t,
                              rtol=1e-9, atol=1e-11, events=event)
        np.testing.assert_allclose(obj.y, ref.y, rtol=1e-9, atol=1e-11)
        occurred = len(ref.t_events[0])
        assert occurred > 0 and res.n_events[i, 0] == occurred
        assert obj.t_events[0].shape == (min(occurred, 4),)
        np.testing.assert_allclose(obj.t_events[0], ref.t_events[0][:4], rtol=1e-9)
        np.testing.assert_allclose(obj.y_events[0], ref.y_events[0][:4], rtol=1e-8)
        assert (obj.status, obj.message, obj.success) == (0, STATUS_MESSAGES[0], True)
        assert obj.nfev == ref.nfev
        assert type(obj.nfev) is int and type(obj.nsteps) is int and obj.njev == obj.nlu == 0
        np.testing.assert_array_equal(obj.n_events, res.n_events[i])
    bad = res[-1]  # the NaN state: its own status, NaN rows, the others untouched
    assert bad.status == -3 and not bad.success and bad.message == STATUS_MESSAGES[-3]
    assert np.isnan(bad.y).all() and bad.t_events[0].size == 0
    alone = _solve(y0[:-1], params[:-1], t_eval[:-1])
    for name, array in alone.arrays().items():
        np.testing.assert_array_equal(res.arrays()[name][:-1], array, err_msg=name)


def test_one_object_is_the_batch_row_without_its_axis(solved):
    y0, params, t_eval, _ = solved
    batch = _solve(y0[:2], params[:2], t_eval[0], stm=True)
    one = _solve(y0[1], params[1], t_eval[0], stm=True)
    assert one.single and len(one) == 1 and one.y.shape == (2, 5)
    assert one.stm.shape == (2, 2, 5) and one.stm_events[0].shape == (4, 2, 2)
    assert set(one.arrays()) == set(batch.arrays())
    for name, array in one.arrays().items():
        want = batch.arrays()[name]
        np.testing.assert_array_equal(array, want if name == "t" else want[1], err_msg=name)
    assert vars(one[0]).keys() == vars(batch[1]).keys()
    np.testing.assert_array_equal(one[-1].stm, batch[1].stm)
    assert one[0].stm.shape == (2, 2, 5) and one.messages() == STATUS_MESSAGES[0]
    with pytest.raises(IndexError, match=r"res\[1\]: the result holds 1 object"):
        one[1]


def test_indexing_is_by_object_only(solved):
    res = solved[3]
    assert repr(res) == f"IVPResult(objects={N}, status counts={{-3: 1, 0: {N - 1}}})"
    assert repr(res[-2]) == repr(res[N - 2])
    np.testing.assert_array_equal(res[-2].y, res[N - 2].y)
    for wrong in (N, -N - 1):
        with pytest.raises(IndexError, match=f"holds {N} object"):
            res[wrong]
    for wrong in ("y", 1.0, True, slice(0, 2)):
        with pytest.raises(TypeError, match="res\\[i\\]: expected an object's index"):
            res[wrong]


def test_fields_are_defined_once():
    names = [f.name for f in IVPResult.FIELDS]
    assert len(set(names)) == len(names) and Statuses is results.BatchResult
    for field in IVPResult.FIELDS:  # the documentation is generated from the list
        assert f"``{field.name}``: {field.doc}" in IVPResult.__doc__
    with pytest.raises(TypeError, match="IVPResult: no field 'rr'"):
        IVPResult(rr=1)
    with pytest.raises(TypeError, match="field 't' given twice"):
        IVPResult(np.zeros(1), t=np.zeros(1))
    with pytest.raises(TypeError, match=f"{len(names)} fields"):
        IVPResult(*range(len(names) + 1))


def test_dask_view_is_the_same_result_computed_later(solved):
    dask = need("dask")
    da = need("dask.array")
    from hapsira_core.dask import DaskIVPResult

    y0, params, t_eval, res = solved
    assert DaskIVPResult.FIELDS is IVPResult.FIELDS
    with dask.config.set(scheduler="synchronous"):
        lazy = _solve(da.from_array(y0, chunks=2), params, t_eval)
        assert isinstance(lazy, DaskIVPResult) and len(lazy) == N
        assert repr(lazy) == (f"DaskIVPResult(objects={N}, chunks={(N + 1) // 2}, Dask "
                              "arrays: .compute() or .to_zarr(path))")
        assert lazy.messages() == res.messages()
        for i in (0, N - 1, -1):
            got, want = lazy[i], res[i]
            assert vars(got).keys() == vars(want).keys()
            np.testing.assert_array_equal(got.y, want.y)
            np.testing.assert_array_equal(got.t_events[0], want.t_events[0])
            assert (got.nfev, got.status, got.message) == (want.nfev, want.status,
                                                           want.message)
        done = lazy.compute()
        assert type(done) is IVPResult and type(lazy.persist()) is DaskIVPResult
        for name, array in res.arrays().items():
            np.testing.assert_array_equal(done.arrays()[name], array, err_msg=name)
        one = _solve(da.from_array(y0[1], chunks=2), params[1], t_eval[1, :4])
        assert len(one) == 1 and one[0].t.tolist() == res[1].t.tolist()
