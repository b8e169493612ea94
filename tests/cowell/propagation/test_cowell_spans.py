"""cowell() with per-object times of flight and scipy's max_step / first_step (issue 27):
each object as the same call with its own row of tofs, and as scipy's solve_ivp."""

import numpy as np
import pytest
from extras import need
from astropy import units as u
from scipy.integrate import solve_ivp as scipy_solve_ivp

from hapsira_cowell import cowell
from reference import K_EARTH, relative_error, two_body_rhs, varied_orbits
from hapsira_core import settings

#: A real GPU fuses multiply-adds (the host targets and the simulator do not).
FMA = settings.TARGET == "cuda" and not settings.cuda_simulator_enabled()

ORBITS = varied_orbits(seed=1)
R0 = np.array([o[0] for o in ORBITS.values()])[:4]
V0 = np.array([o[1] for o in ORBITS.values()])[:4]

#: each object its own times: forward, backward, a short row padded with NaN
TOFS = np.array([[600.0, 3600.0, 7200.0],
                 [-500.0, -4000.0, np.nan],
                 [1000.0, np.nan, np.nan],
                 [0.0, 20000.0, 43200.0]])


def test_per_object_tofs_equal_each_object_alone_bit_for_bit():
    res = cowell(K_EARTH, R0, V0, TOFS)
    assert res.rr.shape == (4, 3, 3) and res.stm is None
    for i, row in enumerate(TOFS):
        own = row[~np.isnan(row)]
        alone = cowell(K_EARTH, R0[i], V0[i], own)
        assert res.status[i] == 0
        np.testing.assert_array_equal(res.rr[i, :own.size], alone.rr)
        np.testing.assert_array_equal(res.vv[i, :own.size], alone.vv)
        assert res.nsteps[i] == alone.nsteps and res.nfev[i] == alone.nfev
        assert np.isnan(res.rr[i, own.size:]).all()
    # the backward object went backward: 4000 s of a LEO-ish orbit moves it far
    assert np.linalg.norm(res.rr[1, 1] - R0[1]) > 1000.0


def test_per_object_tofs_with_stm_and_quantities():
    res = cowell(K_EARTH, R0 << u.km, V0 << u.km / u.s, TOFS << u.s, stm=True)
    plain = cowell(K_EARTH, R0, V0, TOFS)
    if FMA:  # the stm kernel fuses multiply-adds otherwise: rounding (3e-12 on an H100)
        np.testing.assert_allclose(res.rr.to_value(u.km), plain.rr, rtol=1e-10)
    else:
        np.testing.assert_array_equal(res.rr.to_value(u.km), plain.rr)
    assert res.stm.shape == (4, 3, 6, 6)
    np.testing.assert_array_equal(np.isnan(res.stm[:, :, 0, 0]), np.isnan(TOFS))
    # two-body flow is symplectic: det(Phi) = 1
    dets = np.linalg.det(res.stm[~np.isnan(TOFS)])
    np.testing.assert_allclose(dets, 1.0, atol=1e-8)


@pytest.mark.parametrize("max_step, first_step", [(300.0, None), (np.inf, 1.0),
                                                  (500.0, 20.0)])
def test_max_step_and_first_step_as_scipy(max_step, first_step):
    tofs = np.array([1000.0, 5000.0])
    res = cowell(K_EARTH, R0, V0, tofs, rtol=1e-10, atol=1e-12, max_step=max_step,
                 first_step=first_step)
    for i in range(len(R0)):
        ref = scipy_solve_ivp(two_body_rhs(K_EARTH), (0.0, tofs[-1]),
                              np.concatenate([R0[i], V0[i]]), method="DOP853", t_eval=tofs,
                              rtol=1e-10, atol=1e-12, max_step=max_step, first_step=first_step)
        steps = len(scipy_solve_ivp(two_body_rhs(K_EARTH), (0.0, tofs[-1]),
                                    np.concatenate([R0[i], V0[i]]), method="DOP853",
                                    rtol=1e-10, atol=1e-12, max_step=max_step,
                                    first_step=first_step).t) - 1
        assert res.nsteps[i] == steps
        assert relative_error(res.rr[i], ref.y[:3].T) < 1e-11
    if np.isfinite(max_step):
        assert res.nsteps.min() >= tofs[-1] / max_step


@pytest.mark.parametrize("kwargs, match", [
    (dict(max_step=0.0), r"^max_step: must be positive"),
    (dict(max_step="1"), r"^max_step: expected"),
    (dict(first_step=-1.0), r"^first_step: must be positive"),
    (dict(first_step=2000.0), r"^first_step: exceeds the time span"),
    (dict(tofs=np.array([[100.0, 200.0], [300.0, 400.0]])), r"^tofs: expected shape .*\(4, M\)"),
    (dict(tofs=np.array([[100.0, -200.0]] * 4)), r"^tofs: expected each row's times all of "
                                                 r"one sign .*object 0"),
    (dict(tofs=np.array([[100.0, 50.0]] + [[1.0, 2.0]] * 3)), r"^tofs: .*sorted .*object 0"),
    (dict(tofs=np.array([[1.0, 2.0], [np.nan, 2.0], [1.0, 2.0], [1.0, 2.0]])),
     r"^tofs: expected at least one time .*object 1"),
    (dict(tofs=np.array([[1.0, 2.0], [1.0, np.inf], [1.0, 2.0], [1.0, 2.0]])),
     r"^tofs: expected finite times .*object 1"),
])
def test_bad_step_sizes_and_tofs_name_the_argument(kwargs, match):
    kwargs.setdefault("tofs", np.array([1000.0]))
    with pytest.raises((ValueError, TypeError), match=match):
        cowell(K_EARTH, R0, V0, **kwargs)


def test_max_step_quantity_in_minutes():
    tofs = np.array([3000.0])
    a = cowell(K_EARTH, R0, V0, tofs, max_step=5 * u.min)
    b = cowell(K_EARTH, R0, V0, tofs, max_step=300.0)
    np.testing.assert_array_equal(a.rr, b.rr)
    assert a.nsteps.min() >= 10


def test_jax_and_dask_fronts_take_step_sizes_and_per_object_tofs(monkeypatch):
    """The JAX and Dask fronts: (N, M) rows (concrete on JAX, numpy on Dask) and max_step
    as the numpy call, bit for bit."""
    numpy = cowell(K_EARTH, R0, V0, TOFS, max_step=400.0)
    jax = need("jax")
    jax.config.update("jax_enable_x64", True)
    import hapsira_core.fronts.jax as front
    from hapsira_cowell.propagation.jax import cowell as jax_cowell
    from core.fronts import test_jax
    if test_jax.SIM:
        monkeypatch.setattr(front, "xla_kernel", test_jax._simulated_kernel)
    got = jax_cowell(K_EARTH, R0, V0, TOFS, max_step=400.0)
    np.testing.assert_array_equal(np.asarray(got.rr), numpy.rr)
    np.testing.assert_array_equal(np.asarray(got.nsteps), numpy.nsteps)
    da = need("dask.array")
    import dask
    shared = np.array([1000.0, 5000.0])
    with dask.config.set(scheduler="synchronous"):
        lazy = cowell(K_EARTH, da.from_array(R0, chunks=2), V0, shared, max_step=400.0)
        np.testing.assert_array_equal(lazy.compute().rr,
                                      cowell(K_EARTH, R0, V0, shared, max_step=400.0).rr)
        # (N, M) rows cut into the objects' chunks (2 and 2), with per-object params
        # and stm: each chunk its own rows, bit for bit the numpy call
        rows = np.linspace(1.0, 1.1, 4)[:, None] * np.array([[0.0, 0.0]])
        lazy = cowell(K_EARTH, da.from_array(R0, chunks=2), V0, TOFS, max_step=400.0,
                      params=rows, stm=True)
        assert lazy.rr.chunks[0] == (2, 2) and lazy.tofs.shape == TOFS.shape
        got = lazy.compute()
    same = cowell(K_EARTH, R0, V0, TOFS, max_step=400.0, params=rows, stm=True)
    for field in ("rr", "vv", "stm", "status", "nsteps", "nfev"):
        np.testing.assert_array_equal(getattr(got, field), getattr(same, field))
    with pytest.raises(ValueError, match=r"^tofs: expected shape \(M,\) or \(4, M\)"):
        cowell(K_EARTH, da.from_array(R0, chunks=2), V0, TOFS[:3])
    with pytest.raises(ValueError, match=r"^max_step: must be positive"):
        cowell(K_EARTH, da.from_array(R0, chunks=2), V0, shared, max_step=-1.0)
