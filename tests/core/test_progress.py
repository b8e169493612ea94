"""progress=True on solve_ivp and cowell (issue 25): chunks of objects, a tqdm bar advanced
per chunk, the numbers bit for bit those of one call, on every target."""

import numpy as np
import pytest

from hapsira_core import settings
from hapsira_core.ivp import Event, api, build, solve_ivp
from hapsira_core.jit import hjit
from hapsira_cowell import cowell

from reference import K_EARTH


@hjit
def lotka(t, y, p):
    return (p[0] * y[0] - p[1] * y[0] * y[1], -p[2] * y[1] + p[3] * y[0] * y[1])


@hjit
def prey_at_two(t, y, p):
    return y[0] - 2.0


@hjit
def decay_told(t, y, p):  # importable: its kernel takes the disk cache's path
    return (-p[0] * y[0], -y[1])


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of 2 objects (the knobs lowered), and a count of the kernel calls."""
    monkeypatch.setattr(api, "PROGRESS_MIN_CHUNK", 1)
    monkeypatch.setattr(api, "PROGRESS_UPDATES", 3)
    monkeypatch.setattr(settings, "CUDA_CHUNK", 2)
    calls = []
    run = build.run

    def counted(kernel, arrays, *rest):
        calls.append(len(arrays[0]))
        return run(kernel, arrays, *rest)
    monkeypatch.setattr(build, "run", counted)
    return calls


def assert_same(a, b):
    for name in ("y", "status", "nfev", "nsteps", "n_events"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    for x, y in zip(a.t_events + a.y_events, b.t_events + b.y_events):
        np.testing.assert_array_equal(x, y)


def test_solve_ivp_progress_is_chunked_and_bit_identical(small_chunks, capsys):
    rng = np.random.default_rng(0)
    y0 = rng.uniform(1.0, 3.0, (5, 2))
    params = np.column_stack([rng.uniform(1.0, 1.5, 5), np.full(5, 1.0), np.full(5, 3.0),
                              np.full(5, 1.0)])
    options = dict(t_eval=np.linspace(0.0, 2.0, 4), params=params,
                   events=[Event(prey_at_two)])
    plain = solve_ivp(lotka, (0.0, 2.0), y0, **options)
    assert small_chunks == [5]
    del small_chunks[:]
    shown = solve_ivp(lotka, (0.0, 2.0), y0, **options, progress=True)
    assert small_chunks == [2, 2, 1]  # ceil(5 / 3) objects per call
    assert_same(plain, shown)
    assert "5/5" in capsys.readouterr().err  # the bar, on stderr
    # shared params (one row for every object) are handed whole to each chunk
    shared = dict(options, params=params[0])
    assert_same(solve_ivp(lotka, (0.0, 2.0), y0, **shared),
                solve_ivp(lotka, (0.0, 2.0), y0, **shared, progress=True))


def test_cowell_progress_is_bit_identical(small_chunks):
    rng = np.random.default_rng(1)
    r0 = np.column_stack([rng.uniform(6800.0, 7500.0, 4), np.zeros(4), np.zeros(4)])
    v0 = np.column_stack([np.zeros(4), rng.uniform(7.0, 7.6, 4), rng.uniform(0.0, 1.0, 4)])
    plain = cowell(K_EARTH, r0, v0, [300.0, 600.0])
    del small_chunks[:]
    shown = cowell(K_EARTH, r0, v0, [300.0, 600.0], progress=True)
    assert small_chunks == [2, 2]
    for name in ("rr", "vv", "status", "nfev", "nsteps"):
        np.testing.assert_array_equal(getattr(plain, name), getattr(shown, name))


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_progress_must_be_a_bool(value):
    with pytest.raises(ValueError, match="progress: expected True or False"):
        solve_ivp(lotka, (0.0, 1.0), [1.0, 1.0], params=[1.0, 1.0, 1.0, 1.0], progress=value)
    with pytest.raises(ValueError, match="progress: expected True or False"):
        cowell(K_EARTH, [7000.0, 0.0, 0.0], [0.0, 7.5, 0.0], [60.0], progress=value)


def test_a_long_compile_is_told_once_and_a_short_one_never(monkeypatch, caplog):
    import logging
    import time

    from hapsira_core import progress

    monkeypatch.setattr(progress, "NOTICE_AFTER", 0.05)
    with caplog.at_level(logging.WARNING, logger="hapsira"):
        with progress.compiling("the DOP853 solver for 3-component states"):
            time.sleep(0.4)
        told = [r.getMessage() for r in caplog.records if r.name == "hapsira"]
        assert len(told) == 1
        assert told[0].startswith("hapsira: compiling the DOP853 solver for 3-component states")
        assert settings.CACHE_DIR in told[0] or "HAPSIRA_CACHE=0" in told[0]
        caplog.clear()
        with progress.compiling("a kernel loaded from the cache"):
            pass
        time.sleep(0.2)  # past the notice's time: it was cancelled
        assert not [r for r in caplog.records if r.name == "hapsira"]


def test_a_first_call_that_compiles_says_what(monkeypatch, caplog, tmp_path):
    import logging

    from hapsira_core import progress

    monkeypatch.setattr(progress, "NOTICE_AFTER", 0.0)
    monkeypatch.setattr(build, "KERNELS", {})
    # the disk cache's path, where every target compiles a kernel eagerly (without a
    # cache a kernel compiles at its first launch: HAPSIRA_CACHE=0 tells nothing)
    monkeypatch.setattr(settings, "CACHE", True)
    monkeypatch.setattr(settings, "CACHE_DIR", str(tmp_path))
    with caplog.at_level(logging.WARNING, logger="hapsira"):
        res = solve_ivp(decay_told, (0.0, 1.0), np.array([[1.0, 2.0], [3.0, 4.0]]),
                        method="RK23", rtol=1e-8, atol=1e-10, params=[[0.5], [1.5]])
    np.testing.assert_allclose(res.y[:, 0, -1], [np.exp(-0.5), 3 * np.exp(-1.5)], rtol=1e-6)
    told = [r.getMessage() for r in caplog.records if r.name == "hapsira"]
    if settings.TARGET == "cuda" and settings.cuda_simulator_enabled():
        return  # the simulator compiles nothing: there is nothing to tell
    assert told and all("RK23 solver for 2-component states" in m for m in told), told
