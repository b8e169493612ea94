"""cowell() on the plain two-body problem against scipy's DOP853, on the active target."""

import warnings

import numpy as np
import pytest
from astropy import units as u
from astropy.time import TimeDelta

from hapsira_cowell import cowell
from reference import K_EARTH, Reference, relative_error, two_body_rhs, varied_orbits

ORBITS = varied_orbits(seed=1)
NAMES = list(ORBITS)
R0 = np.array([ORBITS[n][0] for n in NAMES])
V0 = np.array([ORBITS[n][1] for n in NAMES])


def check_against_scipy(res, tofs, rtol=1e-11, atol=1e-12, names=NAMES, r0=R0, v0=V0):
    same_steps = 0
    for i, name in enumerate(names):
        ref = Reference(two_body_rhs(K_EARTH), r0[i], v0[i], tofs, rtol, atol)
        assert res.status[i] == 0, name
        assert relative_error(res.rr[i], ref.rr) < 1e-9, name
        assert relative_error(res.vv[i], ref.vv) < 1e-9, name
        same_steps += res.nsteps[i] == ref.nsteps
        assert abs(res.nsteps[i] - ref.nsteps) <= 1, (name, res.nsteps[i], ref.nsteps)
    assert same_steps >= 0.9 * len(names)


def test_varied_orbits_forward_match_scipy():
    tofs = np.array([0.0, 600.0, 3600.0, 20000.0, 43200.0, 86400.0])
    res = cowell(K_EARTH, R0, V0, tofs)
    assert res.rr.shape == (len(NAMES), tofs.size, 3)
    assert res.status.shape == res.nfev.shape == res.nsteps.shape == (len(NAMES),)
    check_against_scipy(res, tofs)
    # the first output is the initial state itself
    np.testing.assert_array_equal(res.rr[:, 0], R0)
    np.testing.assert_array_equal(res.vv[:, 0], V0)
    # more accepted steps for the LEO than for the GEO object over a day
    assert res.nsteps[NAMES.index("leo")] > 3 * res.nsteps[NAMES.index("geo")]


def test_backward_match_scipy_and_return_to_start():
    tofs = -np.array([1000.0, 7000.0, 30000.0])
    res = cowell(K_EARTH, R0, V0, tofs)
    check_against_scipy(res, tofs)
    back = cowell(K_EARTH, res.rr[:, -1], res.vv[:, -1], np.array([30000.0]))
    assert relative_error(back.rr[:, 0], R0) < 1e-9


def test_tolerances_per_component_and_loose():
    tofs = np.array([5000.0, 40000.0])
    rtol = np.array([1e-9, 1e-9, 1e-9, 1e-8, 1e-8, 1e-8])
    res = cowell(K_EARTH, R0, V0, tofs, rtol=rtol, atol=1e-10)
    check_against_scipy(res, tofs, rtol=rtol, atol=1e-10)
    tight = cowell(K_EARTH, R0, V0, tofs)
    assert np.all(res.nsteps < tight.nsteps)


def test_single_object_drops_object_axis():
    tofs = np.linspace(0.0, 5400.0, 4)
    res = cowell(K_EARTH, R0[0], V0[0], tofs)
    assert res.rr.shape == (4, 3) and res.vv.shape == (4, 3)
    assert np.ndim(res.status) == 0 and res.status == 0
    ref = Reference(two_body_rhs(K_EARTH), R0[0], V0[0], tofs)
    assert relative_error(res.rr, ref.rr) < 1e-9
    assert res.nsteps == ref.nsteps


def test_zero_time_of_flight_returns_initial_state():
    res = cowell(K_EARTH, R0, V0, np.zeros(2))
    np.testing.assert_array_equal(res.rr[:, 1], R0)
    assert np.all(res.status == 0) and np.all(res.nsteps == 0)


def test_repeated_output_times():
    tofs = np.array([100.0, 100.0, 2000.0])
    res = cowell(K_EARTH, R0[:2], V0[:2], tofs)
    np.testing.assert_array_equal(res.rr[:, 0], res.rr[:, 1])
    check_against_scipy(res, tofs, names=NAMES[:2], r0=R0[:2], v0=V0[:2])


def test_quantities_in_quantities_out():
    tofs = np.array([0.1, 0.5])
    plain = cowell(K_EARTH, R0, V0, tofs * 86400.0)
    res = cowell(K_EARTH * u.km ** 3 / u.s ** 2, (R0 * 1000) << u.m, (V0 * 3600) << u.km / u.h,
                 TimeDelta(tofs, format="jd"))
    assert res.rr.unit == u.km and res.vv.unit == u.km / u.s
    # unit conversion rounds the inputs in the last bit; a day amplifies that to ~1e-12
    np.testing.assert_allclose(res.rr.value, plain.rr, rtol=1e-10)
    np.testing.assert_allclose(res.vv.value, plain.vv, rtol=1e-10)
    same = cowell(K_EARTH, R0 << u.km, V0 << u.km / u.s, (tofs * 86400.0) << u.s)
    np.testing.assert_array_equal(same.rr.value, plain.rr)
    np.testing.assert_array_equal(res.status, plain.status)


def test_rtol_below_floor_warns_and_is_raised():
    with pytest.warns(UserWarning, match="rtol"):
        res = cowell(K_EARTH, R0[0], V0[0], [600.0], rtol=1e-16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        floor = cowell(K_EARTH, R0[0], V0[0], [600.0], rtol=100 * np.finfo(float).eps)
    np.testing.assert_array_equal(res.rr, floor.rr)


def test_bad_objects_fail_alone():
    tofs = np.array([500.0, 3000.0, 20000.0])
    good = cowell(K_EARTH, R0, V0, tofs)
    r0 = np.vstack([R0[:2], [[np.nan, 1.0, 2.0]], [[0.0, 0.0, 0.0]],
                    [[7000.0, 0.0, 0.0]], R0[2:]])
    v0 = np.vstack([V0[:2], [[0.0, 7.5, 0.0]], [[0.0, 7.5, 0.0]],
                    [[0.0, 0.0, 0.0]], V0[2:]])  # row 4 falls straight into the centre
    res = cowell(K_EARTH, r0, v0, tofs)
    assert list(res.status[2:5]) == [-3, -3, -1]
    assert np.all(np.isnan(res.rr[2:4])) and np.all(np.isnan(res.rr[4, 1:]))
    # the radial fall reaches r = 0 after ~1030 s: the first output, before it, is valid
    assert np.isfinite(res.rr[4, 0]).all() and 0 < np.linalg.norm(res.rr[4, 0]) < 7000
    keep = [0, 1] + list(range(5, r0.shape[0]))
    np.testing.assert_array_equal(res.rr[keep], good.rr)
    np.testing.assert_array_equal(res.status[keep], good.status)
    assert res.messages()[2].startswith("initial state")


def test_max_steps_stops_only_objects_that_need_more():
    tofs = np.array([86400.0])
    res = cowell(K_EARTH, R0, V0, tofs, max_steps=200)
    needs = cowell(K_EARTH, R0, V0, tofs).nsteps
    np.testing.assert_array_equal(res.status == -2, needs > 200)
    assert np.all(res.nsteps[needs > 200] == 200)
    assert np.all(np.isnan(res.rr[needs > 200]))
    assert (needs > 200).any() and (needs <= 200).any()


def test_many_objects_each_equal_to_alone():
    rng = np.random.default_rng(7)
    n = 40
    r0 = np.repeat(R0, 7, axis=0)[:n] * rng.uniform(0.99, 1.01, (n, 1))
    v0 = np.repeat(V0, 7, axis=0)[:n] * rng.uniform(0.99, 1.01, (n, 1))
    tofs = np.array([3600.0, 7200.0])
    res = cowell(K_EARTH, r0, v0, tofs)
    for i in rng.choice(n, 5, replace=False):
        alone = cowell(K_EARTH, r0[i], v0[i], tofs)
        np.testing.assert_array_equal(res.rr[i], alone.rr)
        assert res.nsteps[i] == alone.nsteps


@pytest.mark.skipif(__import__("hapsira_core").settings.TARGET != "cuda",
                    reason="device arrays exist on the cuda target only")
def test_device_arrays_are_used_in_place(monkeypatch):
    from numba import cuda

    from hapsira_core import settings
    tofs = np.array([1000.0, 5000.0])
    host = cowell(K_EARTH, R0, V0, tofs)
    res = cowell(K_EARTH, cuda.to_device(R0), cuda.to_device(V0), tofs)
    np.testing.assert_array_equal(res.rr, host.rr)
    # chunks of two: each stream's buffers (the joined states, the outputs) reused
    assert len(R0) > 4
    monkeypatch.setattr(settings, "CUDA_CHUNK", 2)
    chunked = cowell(K_EARTH, cuda.to_device(R0), cuda.to_device(V0), tofs)
    np.testing.assert_array_equal(chunked.rr, host.rr)
    np.testing.assert_array_equal(chunked.vv, host.vv)
    # (the simulator's device arrays take the host path: same check, same message)
    with pytest.raises(ValueError, match=r"r0: expected shape .*\(N, 3\)"):
        cowell(K_EARTH, cuda.to_device(R0[:, :2].copy()), cuda.to_device(V0), tofs)
