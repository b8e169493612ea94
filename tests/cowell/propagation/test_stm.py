"""``cowell(..., stm=True)``: the state transition matrix of an orbit, on every target.

Against central differences of cowell itself (all perturbed runs in one batch), for
two-body, two-body + J2 and the differentiable built-in perturbations together;
det(Phi) = 1 for two-body (a Hamiltonian flow); the states and accepted steps identical
to the call without ``stm``; NaN after an object stops, the others unaffected; the
argument checked; the JAX and Dask fronts giving the numpy front's matrices bit for bit.
"""

import numpy as np
import pytest
from extras import need
from astropy import units as u

from hapsira_core import settings
from hapsira_core.ivp import NotDifferentiable
from hapsira_core.jit import hjit
from hapsira_cowell import cowell
from hapsira_cowell.events import AltitudeCrossEvent
from hapsira_cowell.models.perturbations import (J2_EARTH, J3_EARTH, R_EARTH, J2_perturbation,
                                                 J3_perturbation, atmospheric_drag_exponential,
                                                 atmospheric_drag_us76, two_body)

SIMULATOR = settings.TARGET == "cuda"  # CI runs cuda under the simulator: short spans
#: A real GPU fuses multiply-adds, differently in the plain and the augmented kernel:
#: there the states agree to rounding, an edge accept/reject may move by one step.
FMA = SIMULATOR and not settings.cuda_simulator_enabled()
K = 398600.4418
R0 = np.array([[7000.0, 0.0, 0.0], [-2000.0, 7800.0, 1500.0]])
V0 = np.array([[0.0, 7.0, 3.2], [-6.0, -1.2, 4.0]])
#: one LEO orbit is about 5800 s; the simulator interprets every step in Python
TOFS = np.array([300.0, 600.0]) if SIMULATOR else np.array([1500.0, 3000.0, 5800.0])


@hjit
def j2(t, rr, vv, k, p):
    drr, dvv = two_body(t, rr, vv, k, p)
    a = J2_perturbation(t, rr, vv, k, J2_EARTH, R_EARTH)
    return drr, (dvv[0] + a[0], dvv[1] + a[1], dvv[2] + a[2])


@hjit
def perturbed(t, rr, vv, k, p):
    """J2, J3 and drag in an exponential atmosphere (p[0]: C_D, p[1]: A/m km^2/kg): a
    dense one (50 kg/km^3 at the surface, 60 km scale height), so that drag at 600 km is
    about 1e-6 km/s^2 and shows in the matrix."""
    drr, dvv = two_body(t, rr, vv, k, p)
    a = J2_perturbation(t, rr, vv, k, J2_EARTH, R_EARTH)
    b = J3_perturbation(t, rr, vv, k, J3_EARTH, R_EARTH)
    d = atmospheric_drag_exponential(t, rr, vv, k, R_EARTH, p[0], p[1], 60.0, 50.0)
    return drr, (dvv[0] + a[0] + b[0] + d[0], dvv[1] + a[1] + b[1] + d[1],
                 dvv[2] + a[2] + b[2] + d[2])


@hjit
def us76(t, rr, vv, k, p):
    drr, dvv = two_body(t, rr, vv, k, p)
    d = atmospheric_drag_us76(t, rr, vv, k, R_EARTH, 2.2, 1e-8)
    return drr, (dvv[0] + d[0], dvv[1] + d[1], dvv[2] + d[2])


FORCES = {"two_body": (None, None), "j2": (j2, None),
          "j2_j3_drag": (perturbed, np.array([2.2, 1e-5]))}


def differences(r0, v0, f, params, steps):
    """Central differences of cowell's states: ``(M, 6, 6)``, tight tolerances."""
    x0 = np.concatenate([r0, v0])
    rows = []
    for j in range(6):
        for sign in (1.0, -1.0):
            x = x0.copy()
            x[j] += sign * steps[j]
            rows.append(x)
    rows = np.array(rows)
    res = cowell(K, rows[:, :3], rows[:, 3:], TOFS, rtol=1e-13, atol=1e-15, f=f, params=params)
    assert np.all(res.status == 0)
    y = np.concatenate([res.rr, res.vv], axis=2)  # (12, M, 6)
    return np.stack([(y[2 * j] - y[2 * j + 1]) / (2.0 * steps[j]) for j in range(6)], axis=2)


def block_errors(stm, fd):
    """The largest error of each 3 x 3 block (dr/dr0, dr/dv0, dv/dr0, dv/dv0) relative
    to the block's largest entry: the blocks differ in size by 1e7 (s vs 1/s)."""
    errors = []
    for i in (slice(0, 3), slice(3, 6)):
        for j in (slice(0, 3), slice(3, 6)):
            scale = np.abs(fd[:, i, j]).max()
            errors.append(np.abs(stm[:, i, j] - fd[:, i, j]).max() / scale)
    return max(errors)


@pytest.mark.parametrize("force", list(FORCES))
def test_stm_matches_central_differences_of_cowell(force):
    f, params = FORCES[force]
    res = cowell(K, R0[0], V0[0], TOFS, rtol=1e-13, atol=1e-15, f=f, params=params, stm=True)
    assert res.stm.shape == (TOFS.size, 6, 6)
    # 10 m and 1 cm/s: truncation (step / r)^2 ~ 1e-12, far above the integration noise
    fd = differences(R0[0], V0[0], f, params, [1e-2] * 3 + [1e-5] * 3)
    assert block_errors(res.stm, fd) < 1e-6


def test_two_body_stm_has_determinant_one():
    res = cowell(K, R0, V0, TOFS, rtol=1e-12, atol=1e-14, stm=True)
    assert res.stm.shape == (2, TOFS.size, 6, 6)
    np.testing.assert_allclose(np.linalg.det(res.stm), 1.0, rtol=0, atol=1e-9)


def test_states_and_steps_identical_with_and_without_stm():
    r0 = np.concatenate([R0, [[6500.0, 0.0, 0.0]]])
    v0 = np.concatenate([V0, [[0.0, 7.0, 0.0]]])  # falls: the altitude event stops it
    event = AltitudeCrossEvent(100.0, R_EARTH)
    kwargs = dict(f=j2, events=[event])
    plain = cowell(K, r0, v0, TOFS, **kwargs)
    both = cowell(K, r0, v0, TOFS, stm=True, **kwargs)
    for name in ("rr", "vv", "status", "nsteps", "n_events"):
        if FMA and name in ("rr", "vv"):  # measured on an H100: 3.1e-12
            np.testing.assert_allclose(getattr(both, name), getattr(plain, name), rtol=1e-10,
                                       err_msg=name)
        elif FMA and name == "nsteps":
            assert np.abs(both.nsteps - plain.nsteps).max() <= 1
        else:
            np.testing.assert_array_equal(getattr(both, name), getattr(plain, name),
                                          err_msg=name)
    # scipy's count on every target, whether the stages are kept (the augmented run's
    # array shape) or evaluated again (the GPU's tuple shape); where a step moves (FMA),
    # by that step's evaluations
    if FMA:
        assert np.abs(both.nfev - plain.nfev).max() <= 16
    else:
        np.testing.assert_array_equal(both.nfev, plain.nfev)
    if FMA:  # an H100: 4.4e-10 for an object falling through 100 km
        np.testing.assert_allclose(both.t_events[0], plain.t_events[0], rtol=1e-8)
    else:
        np.testing.assert_array_equal(both.t_events[0], plain.t_events[0])
    assert plain.stm is None
    # NaN exactly where the states are NaN
    np.testing.assert_array_equal(np.isnan(both.stm).all(axis=(2, 3)), np.isnan(both.rr[..., 0]))


# the CUDA simulator runs kernels as Python on numpy scalars, which warn where r = 0
# makes inf * 0 (the compiled targets give the same NaN silently)
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_a_bad_object_fails_alone():
    r0 = np.concatenate([R0[:1], [[0.0, 0.0, 0.0]], R0[1:]])
    v0 = np.concatenate([V0[:1], [[1.0, 0.0, 0.0]], V0[1:]])
    res = cowell(K, r0, v0, TOFS, f=j2, stm=True)
    assert list(res.status) == [0, -3, 0]
    assert np.isnan(res.stm[1]).all()
    alone = cowell(K, R0, V0, TOFS, f=j2, stm=True)
    np.testing.assert_array_equal(res.stm[[0, 2]], alone.stm)


def test_quantities_in_give_plain_matrices():
    res = cowell(K * u.km ** 3 / u.s ** 2, R0[0] * u.km, V0[0] * u.km / u.s, TOFS * u.s,
                 stm=True)
    assert res.rr.unit == u.km and not isinstance(res.stm, u.Quantity)
    np.testing.assert_array_equal(res.stm, cowell(K, R0[0], V0[0], TOFS, stm=True).stm)


@pytest.mark.parametrize("stm", [1, "yes", None, np.array([True])])
def test_stm_must_be_a_bool(stm):
    with pytest.raises(TypeError, match="stm: expected True or False"):
        cowell(K, R0, V0, TOFS, stm=stm)


def test_a_table_lookup_is_named_as_not_differentiable():
    with pytest.raises(NotDifferentiable, match="density_us76"):
        cowell(K, R0, V0, TOFS, f=us76, stm=True)


def _front(name, monkeypatch):
    """``cowell`` of the JAX or Dask front, as a function of numpy arguments returning a
    numpy-like result (the JAX kernel under the CUDA simulator: its XLA launcher)."""
    if name == "jax":
        jax = need("jax")
        jax.config.update("jax_enable_x64", True)
        import hapsira_core.fronts.jax as fronts_jax
        from hapsira_cowell.jax import cowell as jax_cowell

        from . import test_fronts_agree
        if test_fronts_agree.SIM:
            monkeypatch.setattr(fronts_jax, "xla_kernel", test_fronts_agree._simulated_kernel)
        return jax_cowell
    da = need("dask.array")

    def dask_cowell(k, r0, v0, tofs, **kwargs):
        lazy = cowell(k, da.from_array(r0, chunks=(2, 3) if np.ndim(r0) == 2 else -1), v0, tofs,
                      **kwargs)
        return lazy.compute(retries=0, scheduler="synchronous")
    return dask_cowell


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize("front", ["jax", "dask"])
def test_jax_and_dask_fronts_give_the_numpy_matrices_bit_for_bit(front, monkeypatch):
    """One kernel for every front: states, statuses, event times and Phi identical,
    with an event, per-object params, a falling object stopped by the event and a bad
    object (r = 0) failing alone."""
    run = _front(front, monkeypatch)
    # the simulator runs the derivative code on Python floats, where r = 0 raises
    # ZeroDivisionError instead of giving inf: a NaN state fails the object there
    bad = np.nan if SIMULATOR and settings.cuda_simulator_enabled() else 0.0
    r0 = np.concatenate([R0, [[6500.0, 0.0, 0.0], [bad, 0.0, 0.0]]])
    v0 = np.concatenate([V0, [[0.0, 7.0, 0.0], [1.0, 0.0, 0.0]]])
    params = np.array([[2.2, 1e-5], [2.0, 2e-5], [2.2, 0.0], [2.2, 1e-5]])
    kwargs = dict(f=perturbed, params=params, events=[AltitudeCrossEvent(100.0, R_EARTH)],
                  stm=True)
    want = cowell(K, r0, v0, TOFS, **kwargs)
    assert list(want.status) == [0, 0, 1, -3]
    assert np.isfinite(want.stm[:2]).all() and np.isnan(want.stm[3]).all()
    got = run(K, r0, v0, TOFS, **kwargs)
    assert np.asarray(got.stm).shape == (4, TOFS.size, 6, 6)
    for name in ("rr", "vv", "status", "nsteps", "nfev", "n_events", "stm"):
        np.testing.assert_array_equal(np.asarray(getattr(got, name)), getattr(want, name),
                                      err_msg=name)
    np.testing.assert_array_equal(np.asarray(got.t_events[0]), want.t_events[0])
    # one object: the N axis dropped, as the numpy call
    one = run(K, R0[0], V0[0], TOFS, stm=True)
    np.testing.assert_array_equal(np.asarray(one.stm), cowell(K, R0[0], V0[0], TOFS,
                                                              stm=True).stm)
    assert run(K, R0, V0, TOFS).stm is None


def test_jax_stm_inside_jit(monkeypatch):
    jax_cowell = _front("jax", monkeypatch)
    import jax

    @jax.jit
    def matrices(r0):
        return jax_cowell(K, r0, V0, TOFS, f=j2, stm=True).stm

    np.testing.assert_array_equal(np.asarray(matrices(R0)), cowell(K, R0, V0, TOFS, f=j2,
                                                                   stm=True).stm)


@pytest.mark.parametrize("front", ["jax", "dask"])
def test_jax_and_dask_fronts_check_stm_as_the_numpy_call(front, monkeypatch):
    run = _front(front, monkeypatch)
    with pytest.raises(TypeError, match="stm: expected True or False"):
        run(K, R0, V0, TOFS, stm=1)
    # the Dask front differentiates f on the client, before any chunk runs
    with pytest.raises(NotDifferentiable, match="density_us76"):
        run(K, R0, V0, TOFS, f=us76, stm=True)


def test_dask_stm_to_zarr(tmp_path):
    da = need("dask.array")
    zarr = need("zarr")
    lazy = cowell(K, da.from_array(R0, chunks=(1, 3)), V0, TOFS, stm=True)
    lazy.to_zarr(tmp_path / "out.zarr", scheduler="synchronous")
    group = zarr.open_group(tmp_path / "out.zarr", mode="r")
    np.testing.assert_array_equal(group["stm"][:], cowell(K, R0, V0, TOFS, stm=True).stm)


class _SynchronousClient:
    """What `map_chunks` asks of a Dask client, run here in order."""

    class _Done:
        def __init__(self, value):
            self.value = value

        def result(self):
            return self.value

        def release(self):
            pass

    def scheduler_info(self):
        return {"workers": {"here": {}}}

    def submit(self, function, *args, pure=True, retries=0):
        return self._Done(function(*args))


def test_map_chunks_returns_each_chunk_s_matrices():
    """The chunks that a batch run yields (`propagation.dask.map_chunks`) carry Phi
    when the packed call asks for it, equal to the numpy call's; without it, none."""
    need("distributed")
    from hapsira_cowell.propagation import dask as on_cluster

    params = np.zeros((len(R0), 0))
    want = cowell(K, R0, V0, TOFS, f=j2, stm=True)
    for stm in (True, False):
        blob, *_ = on_cluster.pack_call(K, TOFS, f=j2, stm=stm)
        chunks = list(on_cluster.map_chunks(_SynchronousClient(), blob, R0, V0, params, 1))
        assert [(first, last) for first, last, _ in chunks] == [(0, 1), (1, 2)]
        for first, last, res in chunks:
            np.testing.assert_array_equal(res.rr, want.rr[first:last])
            if stm:
                np.testing.assert_array_equal(res.stm, want.stm[first:last])
            else:
                assert res.stm is None


@pytest.mark.skipif(settings.TARGET != "cuda", reason="device arrays exist on the cuda target only")
def test_device_arrays_with_stm(monkeypatch):
    """Device states beside the host identity block (`Columns` joins them by chunk)."""
    from numba import cuda

    host = cowell(K, R0, V0, TOFS, stm=True)
    monkeypatch.setattr(settings, "CUDA_CHUNK", 1)
    res = cowell(K, cuda.to_device(R0), cuda.to_device(V0), TOFS, stm=True)
    np.testing.assert_array_equal(res.rr, host.rr)
    np.testing.assert_array_equal(res.stm, host.stm)
