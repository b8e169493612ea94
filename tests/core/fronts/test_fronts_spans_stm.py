"""Per-object spans and output times (issue 27) and ``stm=True`` (issue 28, with the events'
total derivatives) on the JAX and Dask fronts of solve_ivp: the numpy front's numbers, bit
for bit (the same kernels)."""

import numpy as np
import pytest
from extras import need

from hapsira_core.ivp import Event, solve_ivp
from hapsira_core.jit import hjit

from ..ivp.test_solve_ivp import lotka_ensemble


@hjit
def lotka(t, y, p):
    return (p[0] * y[0] - p[1] * y[0] * y[1], -p[2] * y[1] + p[3] * y[0] * y[1])


@hjit
def prey_crosses(t, y, p):
    return y[0] - p[4]


N = 5
TOL = dict(rtol=1e-9, atol=1e-11)


def problem():
    """Five objects, each its own span (forward, backward, degenerate) and output row
    (NaN-padded), params with the event's level in p[4]."""
    y0, params = lotka_ensemble(N, seed=3)
    params = np.concatenate([params, np.full((N, 1), 2.0)], axis=1)
    t0 = np.array([0.0, 2.0, 1.0, 0.5, -1.0])
    tf = np.array([6.0, -1.5, 1.0, 4.0, 2.5])
    t_eval = np.full((N, 3), np.nan)
    for i, count in enumerate([3, 2, 1, 3, 2]):
        t_eval[i, :count] = np.linspace(t0[i], tf[i], count)
    return y0, params, t0, tf, t_eval


def numpy_reference(stm, t_eval="rows"):
    y0, params, t0, tf, rows = problem()
    times = rows if t_eval == "rows" else None
    return solve_ivp(lotka, (t0, tf), y0, t_eval=times, params=params, stm=stm,
                     events=[Event(prey_crosses)], **TOL)


def assert_same(got, want, stm):
    np.testing.assert_array_equal(np.asarray(got.t), want.t)
    np.testing.assert_array_equal(np.asarray(got.y), want.y)
    for name in ("status", "nfev", "nsteps", "n_events"):
        np.testing.assert_array_equal(np.asarray(getattr(got, name)), getattr(want, name))
    for a, b in zip(got.t_events, want.t_events):
        np.testing.assert_array_equal(np.asarray(a), b)
    if stm:
        np.testing.assert_array_equal(np.asarray(got.stm), want.stm)
        assert len(got.stm_events) == len(want.stm_events) == 1
        for a, b in zip(got.stm_events, want.stm_events):
            np.testing.assert_array_equal(np.asarray(a), b)
        # the events' total derivatives (issue 28): the same kernel after the run
        assert len(got.stm_events_total) == len(got.dt_events_dy0) == 1
        for name in ("stm_events_total", "dt_events_dy0"):
            for a, b in zip(getattr(got, name), getattr(want, name)):
                assert np.isfinite(b).any()
                np.testing.assert_array_equal(np.asarray(a), b, err_msg=name)


def test_numpy_reference_is_not_vacuous():
    res = numpy_reference(stm=True)
    assert res.t.shape == (N, 3) and res.stm.shape == (N, 2, 2, 3)
    assert (res.status == 0).all() and res.n_events.sum() >= 4
    # Phi(t0) = I for the degenerate span, a real flow elsewhere
    np.testing.assert_array_equal(res.stm[2, :, :, 0], np.eye(2))
    assert np.abs(res.stm[0, :, :, 2] - np.eye(2)).max() > 0.1
    # stm_events: Phi where each recorded event is, NaN beyond the count
    counts = res.n_events[:, 0]
    events = res.stm_events[0]
    assert events.shape[:2] == (N, 64) and events.shape[2:] == (2, 2)
    for i in range(N):
        assert np.isfinite(events[i, :counts[i]]).all()
        assert np.isnan(events[i, counts[i]:]).all()
    obj = res[0]
    assert len(obj.stm_events[0]) == counts[0] and obj.stm.shape == (2, 2, 3)


def test_stm_at_an_event_is_the_matrix_at_that_time():
    """Phi at an event equals Phi from a run whose output time is that event's time
    (the same interpolant; to rounding, since steps end differently)."""
    res = numpy_reference(stm=True)
    y0, params, t0, tf, _ = problem()
    i = int(np.argmax(res.n_events[:, 0]))
    t_event = res.t_events[0][i, 0]
    at = solve_ivp(lotka, (t0[i], tf[i]), y0[i], t_eval=[t_event], params=params[i],
                   stm=True, **TOL)
    np.testing.assert_allclose(res.stm_events[0][i, 0], at.stm[:, :, 0], rtol=1e-7,
                               atol=1e-9)


# ------------------------------------------------------------------------ JAX


@pytest.fixture
def jax_solve(monkeypatch):
    jax = need("jax")
    jax.config.update("jax_enable_x64", True)
    from . import test_jax  # its launcher under the CUDA simulator
    if test_jax.SIM:
        import hapsira_core.fronts.jax as front
        monkeypatch.setattr(front, "xla_kernel", test_jax._simulated_kernel)
    from hapsira_core.jax import solve_ivp as jax_solve_ivp
    return jax, jax_solve_ivp


@pytest.mark.parametrize("stm", [False, True])
def test_jax_per_object_times_and_stm_equal_numpy(jax_solve, stm):
    jax, jax_solve_ivp = jax_solve
    import jax.numpy as jnp
    y0, params, t0, tf, rows = problem()
    want = numpy_reference(stm)

    def call(t0, tf, y0, rows, params):
        return jax_solve_ivp(lotka, (t0, tf), y0, t_eval=rows, params=params, stm=stm,
                             events=[Event(prey_crosses)], **TOL)

    args = [jnp.asarray(a) for a in (t0, tf, y0, rows, params)]
    assert_same(call(*args), want, stm)  # concrete: checked as the numpy call
    assert_same(jax.jit(call)(*args), want, stm)  # traced spans and rows


def test_jax_per_object_spans_default_t_eval(jax_solve):
    _, jax_solve_ivp = jax_solve
    y0, params, t0, tf, _ = problem()
    want = numpy_reference(False, t_eval=None)
    got = jax_solve_ivp(lotka, (t0, tf), y0, params=params, events=[Event(prey_crosses)],
                        **TOL)
    assert want.t.shape == (N, 1)
    assert_same(got, want, False)


def test_jax_bad_per_object_times_name_the_argument(jax_solve):
    _, jax_solve_ivp = jax_solve
    y0, params, t0, tf, rows = problem()
    rows = rows.copy()
    rows[1, 0] = 10.0
    with pytest.raises(ValueError, match=r"^t_eval: .*own t_span \(object 1"):
        jax_solve_ivp(lotka, (t0, tf), y0, t_eval=rows, params=params, **TOL)
    with pytest.raises(ValueError, match=r"^t_span: expected .*arrays of shape \(5,\)"):
        jax_solve_ivp(lotka, (t0[:3], tf[:3]), y0, params=params, **TOL)
    with pytest.raises(TypeError, match=r"^stm: expected True or False"):
        jax_solve_ivp(lotka, (0.0, 1.0), y0, params=params, stm=1, **TOL)
    for times, match in repeated_times():
        with pytest.raises(ValueError, match=match):
            jax_solve_ivp(lotka, (t0, tf), y0, t_eval=times, params=params, **TOL)


def repeated_times():
    """Output times with a time repeated, which scipy refuses ("not properly sorted"), and
    the message each front refuses them with: one object's row (object 1 runs backward)
    and times shared by all objects."""
    _, _, t0, tf, rows = problem()
    rows[1, :2] = [0.5, 0.5]
    shared = np.array([1.0, 1.0])  # inside every object's span, 1.0 twice
    return [(rows, r"^t_eval: .*sorted .*, none repeated .*\(object 1"),
            (shared, r"^t_eval: .*sorted .*, none repeated .*\(object 0")]


# ------------------------------------------------------------------------ Dask

@pytest.fixture
def da():
    dask = need("dask")
    import dask.array as da
    with dask.config.set(scheduler="synchronous"):
        yield da


def test_dask_repeated_output_times_are_refused(da):
    y0, params, t0, tf, _ = problem()
    for times, match in repeated_times():
        with pytest.raises(ValueError, match=match):
            solve_ivp(lotka, (t0, tf), da.from_array(y0, chunks=2), t_eval=times,
                      params=params, **TOL)


@pytest.mark.parametrize("stm", [False, True])
def test_dask_per_object_times_and_stm_equal_numpy(da, stm):
    y0, params, t0, tf, rows = problem()
    want = numpy_reference(stm)
    lazy = solve_ivp(lotka, (t0, tf), da.from_array(y0, chunks=2), t_eval=rows,
                     params=da.from_array(params, chunks=3), stm=stm,
                     events=[Event(prey_crosses)], **TOL)
    assert lazy.y.shape == want.y.shape and lazy.y.chunks[0] == (2, 2, 1)
    assert_same(lazy.compute(), want, stm)
    one = lazy[3]  # object 3 alone: its own times and matrices
    np.testing.assert_array_equal(one.t, want[3].t)
    np.testing.assert_array_equal(one.y, want[3].y)
    if stm:
        np.testing.assert_array_equal(one.stm, want[3].stm)
        np.testing.assert_array_equal(one.dt_events_dy0[0], want[3].dt_events_dy0[0])
        np.testing.assert_array_equal(lazy.stm[1:2].compute(), want.stm[1:2])


def test_dask_stm_to_zarr(da, tmp_path):
    need("zarr")
    y0, params, t0, tf, rows = problem()
    want = numpy_reference(True)
    lazy = solve_ivp(lotka, (t0, tf), da.from_array(y0, chunks=2), t_eval=rows,
                     params=params, stm=True, events=[Event(prey_crosses)], **TOL)
    group = lazy.to_zarr(tmp_path / "out.zarr")
    np.testing.assert_array_equal(group["stm"][:], want.stm)
    np.testing.assert_array_equal(group["stm_events_0"][:], want.stm_events[0])
    np.testing.assert_array_equal(group["stm_events_total_0"][:], want.stm_events_total[0])
    np.testing.assert_array_equal(group["dt_events_dy0_0"][:], want.dt_events_dy0[0])


# ------------------------------------------------------- an infinite end (issue 27 item 5)

def infinite_problem():
    """Oscillators stopped by a terminal event, ends +inf, -inf and finite mixed; one
    that never stops (its level out of reach) ends at max_steps."""
    from ..ivp.test_infinite_span import falls, problem
    y0, params = problem(4, seed=8)
    params[3, 1] = 10.0
    tf = np.array([np.inf, 3.0, -np.inf, np.inf])
    rows = np.array([np.linspace(0.0, 1.5, 4), np.linspace(0.0, 3.0, 4),
                     np.linspace(0.0, -1.5, 4), [0.0, 1.0, 1e6, np.nan]])
    return y0, params, tf, rows, falls()


def infinite_reference():
    from ..ivp.test_infinite_span import oscillator
    y0, params, tf, rows, event = infinite_problem()
    want = solve_ivp(oscillator, (np.zeros(4), tf), y0, t_eval=rows, params=params,
                     events=event, max_steps=300, **TOL)
    assert want.status.tolist()[2:] == [1, -2] and want.status[0] == 1
    return want


def test_jax_infinite_end_equals_numpy(jax_solve):
    jax, jax_solve_ivp = jax_solve
    import jax.numpy as jnp

    from ..ivp.test_infinite_span import oscillator
    y0, params, tf, rows, event = infinite_problem()
    want = infinite_reference()

    def call(tf, y0, rows, params):
        return jax_solve_ivp(oscillator, (jnp.zeros(4), tf), y0, t_eval=rows, params=params,
                             events=event, max_steps=300, **TOL)

    args = [jnp.asarray(a) for a in (tf, y0, rows, params)]
    assert_same(call(*args), want, False)  # concrete: checked as the numpy call
    assert_same(jax.jit(call)(*args), want, False)  # traced: max_steps guards
    with pytest.raises(ValueError, match=r"^t_eval: the default output time"):
        jax_solve_ivp(oscillator, (0.0, np.inf), y0, params=params, events=event)
    with pytest.raises(ValueError, match=r"^t_eval: the default output time"):  # inside jit
        jax.jit(lambda y: jax_solve_ivp(oscillator, (0.0, np.inf), y, params=params,
                                        events=event))(y0)
    with pytest.raises(ValueError, match=r"^t_span: an infinite tf needs a terminal event"):
        jax_solve_ivp(oscillator, (0.0, -np.inf), y0, t_eval=[-1.0], params=params)


def test_dask_infinite_end_equals_numpy(da):
    from ..ivp.test_infinite_span import oscillator
    y0, params, tf, rows, event = infinite_problem()
    want = infinite_reference()
    lazy = solve_ivp(oscillator, (np.zeros(4), tf), da.from_array(y0, chunks=3), t_eval=rows,
                     params=params, events=event, max_steps=300, **TOL)
    assert_same(lazy.compute(), want, False)
    shared = solve_ivp(oscillator, (0.0, np.inf), da.from_array(y0[:3], chunks=2),
                       t_eval=[0.0, 0.5], params=params[:3], events=event, **TOL).compute()
    alone = solve_ivp(oscillator, (0.0, np.inf), y0[:3], t_eval=[0.0, 0.5],
                      params=params[:3], events=event, **TOL)
    assert_same(shared, alone, False)
    with pytest.raises(ValueError, match=r"^t_eval: the default output time"):
        solve_ivp(oscillator, (0.0, np.inf), da.from_array(y0, chunks=2), params=params,
                  events=event)
