"""The JAX fronts inside jax.jit on XLA's buffers: the numpy calls' numbers, bit for bit.

``hapsira_cowell.propagation.jax.cowell`` and ``hapsira_core.jax.solve_ivp`` against
``hapsira_cowell.cowell`` and ``hapsira_core.ivp.solve_ivp``. On cpu/parallel
the kernel runs through the CPU handler (a numba cfunc on XLA's buffers).
Under the CUDA simulator there is no XLA GPU platform: the plain call must
raise the platform-mismatch error, and every other test runs the CUDA
launcher (the GPU path's frame decoding and launch) on XLA's CPU buffers
instead (``XlaKernel(..., simulator_on_cpu=True)``).
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from extras import need

jax = need("jax")
jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
from astropy import units as u  # noqa: E402

import hapsira_core.jax as hcj  # noqa: E402
import hapsira_cowell.propagation.jax as hj  # noqa: E402
from hapsira_core import ivp, settings
import hapsira_core.fronts.jax as front  # noqa: E402  (where run() finds xla_kernel)
from hapsira_core.fronts.jax import xla  # noqa: E402
from hapsira_core.jit import hjit  # noqa: E402
from hapsira_cowell import cowell  # noqa: E402
from hapsira_cowell.propagation.forms import orbit_call  # noqa: E402
from hapsira_cowell.models.events import AltitudeCrossEvent, NodeCrossEvent  # noqa: E402
from hapsira_cowell.models.perturbations import J2_perturbation, two_body  # noqa: E402
from reference import K_EARTH, R_EARTH, coe_to_rv, varied_orbits  # noqa: E402

SIM = settings.TARGET == "cuda" and settings.cuda_simulator_enabled()

_SIMULATED = {}


def _simulated_kernel(kernel, what):
    if id(kernel) not in _SIMULATED:
        _SIMULATED[id(kernel)] = (kernel, xla.XlaKernel(kernel, what, simulator_on_cpu=True))
    return _SIMULATED[id(kernel)][1]


@pytest.fixture(autouse=True)
def _launcher_under_simulator(monkeypatch):
    if SIM:
        monkeypatch.setattr(front, "xla_kernel", _simulated_kernel)


def xla_of(problem):
    """The XlaKernel that the JAX fronts use for ``problem``."""
    return (_simulated_kernel if SIM else xla.xla_kernel)(front.per_object_kernel(problem), "")


def assert_same(got, want, fields, rows=None):
    """Every field equal bit for bit (NaN where NaN); tuples of arrays field by field."""
    pick = (lambda a: a) if rows is None else (lambda a: a[rows])
    for field in fields:
        g, w = getattr(got, field), getattr(want, field)
        if isinstance(g, tuple):
            assert len(g) == len(w), field
            for a, b in zip(g, w):
                np.testing.assert_array_equal(np.asarray(a), pick(b), err_msg=field)
        else:
            np.testing.assert_array_equal(np.asarray(g), pick(w), err_msg=field)


# ============================================================================
# cowell
# ============================================================================

@hjit
def j2_scaled(t, rr, vv, k, p):
    """Two-body plus p[0] times Earth's J2 (per-object params)."""
    drr, dvv = two_body(t, rr, vv, k, p)
    a = J2_perturbation(t, rr, vv, k, p[0] * 1.08262668e-3, 6378.137)
    return drr, (dvv[0] + a[0], dvv[1] + a[1], dvv[2] + a[2])


# a terminal re-entry-like crossing (some objects stop, their rows go NaN)
# and a non-terminal one that occurs several times
EVENTS = (AltitudeCrossEvent(350.0, R_EARTH), NodeCrossEvent())
RECORDS = 4
ORBIT_FIELDS = ("rr", "vv", "status", "t_events", "n_events", "nfev", "nsteps")


def _orbits(n, seed):
    """n varied objects: named orbits and LEO orbits whose perigees (300-500 km)
    straddle the 350 km event; params scale J2 per object."""
    rng = np.random.default_rng(seed)
    named = varied_orbits(seed)
    states = [named[name] for name in ("leo", "sso", "eccentric", "molniya")]
    while len(states) < n:
        rp, ra = R_EARTH + rng.uniform(300, 500), R_EARTH + rng.uniform(700, 1500)
        a, ecc = (rp + ra) / 2, (ra - rp) / (ra + rp)
        states.append(coe_to_rv(K_EARTH, a * (1 - ecc ** 2), ecc, rng.uniform(0, np.pi),
                                *rng.uniform(0, 2 * np.pi, 3)))
    r0 = np.array([s[0] for s in states[:n]])
    v0 = np.array([s[1] for s in states[:n]])
    params = rng.uniform(0.5, 2.0, (n, 1))
    return r0, v0, params


# the simulator runs kernels in Python: few objects, a short span there
N = 2 if SIM else 8
TOFS = np.array([120.0, 300.0]) if SIM else np.array([600.0, 3000.0, 7200.0])
R0, V0, PARAMS = _orbits(N, seed=3)


def numpy_cowell(r0, v0, tofs=TOFS, params=PARAMS, k=K_EARTH):
    return cowell(k, r0, v0, tofs, f=j2_scaled, params=params, events=EVENTS,
                  max_event_records=RECORDS)


def jax_cowell(r0, v0, tofs=TOFS, params=PARAMS, k=K_EARTH):
    return hj.cowell(k, r0, v0, tofs, f=j2_scaled, params=params, events=EVENTS,
                     max_event_records=RECORDS)


def cowell_kernel():
    return xla_of(orbit_call("cowell JAX", j2_scaled, j2_scaled, EVENTS, TOFS, None, None,
                             100_000, RECORDS).problem())


@pytest.fixture(scope="module")
def orbit_reference():
    res = numpy_cowell(R0, V0)
    if not SIM:  # the comparison covers stopped objects, events and plain ends
        assert set(res.status) == {0, 1}
        assert (res.n_events[:, 1] > 1).any()
    return res


def test_cowell_jit_equals_numpy(orbit_reference):
    res = jax.jit(lambda k, r0, v0, tofs, params: jax_cowell(r0, v0, tofs, params, k))(
        K_EARTH, R0, V0, TOFS, PARAMS)
    assert isinstance(res.rr, jax.Array)
    assert_same(res, orbit_reference, ORBIT_FIELDS)


def test_cowell_single_object_drops_the_object_axis(orbit_reference):
    res = jax_cowell(R0[1], V0[1], params=PARAMS[1])
    assert res.rr.shape == (TOFS.size, 3) and res.status.shape == ()
    assert res.t_events[0].shape == (RECORDS,) and res.n_events.shape == (2,)
    assert_same(res, orbit_reference, ORBIT_FIELDS, rows=1)


def test_cowell_vmap_batches_into_the_object_axis(orbit_reference):
    # a batch of 2 problems: this cloud and the same cloud reversed
    r0 = np.stack([R0, R0[::-1]])
    v0 = np.stack([V0, V0[::-1]])
    params = np.stack([PARAMS, PARAMS[::-1]])
    res = jax.jit(jax.vmap(lambda r, v, p: jax_cowell(r, v, params=p)))(r0, v0, params)
    assert res.rr.shape == (2, N, TOFS.size, 3)
    assert_same(jax.tree.map(lambda a: a[0], res), orbit_reference, ORBIT_FIELDS)
    assert_same(jax.tree.map(lambda a: a[1], res), orbit_reference, ORBIT_FIELDS,
                rows=slice(None, None, -1))


def test_cowell_vmap_over_single_objects_gm_and_times():
    # vmap over single objects gives the cloud call
    want = numpy_cowell(R0[:2], V0[:2], params=PARAMS[:2])
    res = jax.vmap(lambda r, v, p: jax_cowell(r, v, params=p))(R0[:2], V0[:2], PARAMS[:2])
    assert_same(res, want, ORBIT_FIELDS)
    # GM travels in the params rows: a batch of GMs is one call with more objects
    ks = np.array([K_EARTH, 1.01 * K_EARTH])
    res = jax.jit(jax.vmap(lambda k: jax_cowell(R0[:2], V0[:2], params=PARAMS[:2], k=k)))(ks)
    for b in range(2):
        assert_same(jax.tree.map(lambda a: a[b], res),
                    numpy_cowell(R0[:2], V0[:2], params=PARAMS[:2], k=ks[b]), ORBIT_FIELDS)
    # batched times are shared by the objects of a problem: problems run in turn
    tofs = np.stack([TOFS, TOFS * 0.75])
    res = jax.jit(jax.vmap(lambda t: jax_cowell(R0[:2], V0[:2], t, PARAMS[:2])))(tofs)
    for b in range(2):
        assert_same(jax.tree.map(lambda a: a[b], res),
                    numpy_cowell(R0[:2], V0[:2], tofs[b], PARAMS[:2]), ORBIT_FIELDS)


def test_cowell_twice_in_one_program(orbit_reference):
    @jax.jit
    def program(r0, v0):
        first = jax_cowell(r0, v0)
        # the second leg starts where the first ended (NaN for stopped objects:
        # they fail alone, with their own status)
        second = jax_cowell(first.rr[:, -1], first.vv[:, -1])
        independent = jax_cowell(r0[::-1], v0[::-1], params=PARAMS[::-1])
        return first, second, independent

    first, second, independent = program(R0, V0)
    assert_same(first, orbit_reference, ORBIT_FIELDS)
    assert_same(second, numpy_cowell(orbit_reference.rr[:, -1], orbit_reference.vv[:, -1]),
                ORBIT_FIELDS)
    assert_same(independent, orbit_reference, ORBIT_FIELDS, rows=slice(None, None, -1))


def test_cowell_no_copies_of_inputs_or_outputs():
    r0, v0, params = jnp.asarray(R0), jnp.asarray(V0), jnp.asarray(PARAMS)
    # r0 and v0 are joined into y0 and y split into rr, vv (the core's state is
    # (rr, vv)); GM joins the params rows: the program makes those, the call none
    def rows(r, v, p):
        res = jax_cowell(r, v, params=p)
        return jnp.concatenate([res.rr, res.vv], axis=2)

    y = jax.jit(rows)(r0, v0, params)
    kernel = cowell_kernel()
    names = [a.name for a in kernel.args]
    assert kernel.pointers[names.index("y")] == y.unsafe_buffer_pointer()


def test_cowell_bad_inputs_name_the_argument():
    with pytest.raises(TypeError, match="r0: expected plain numbers in km"):
        hj.cowell(K_EARTH, R0 << u.km, V0, TOFS)
    with pytest.raises(ValueError, match=r"r0: expected shape \(3,\) or \(N, 3\)"):
        hj.cowell(K_EARTH, R0[:, :2], V0, TOFS)
    with pytest.raises(ValueError, match=r"r0: expected shape \(3,\) or \(N, 3\)"):
        jax.jit(lambda r: hj.cowell(K_EARTH, r, V0, TOFS))(R0[:, :2])
    with pytest.raises(ValueError, match="r0, v0: number of objects differs"):
        hj.cowell(K_EARTH, jnp.asarray(R0), jnp.asarray(V0[:-1]), TOFS)
    with pytest.raises(ValueError, match="tofs: expected times sorted"):
        hj.cowell(K_EARTH, R0, V0, TOFS[::-1])
    with pytest.raises(ValueError, match="k: expected a positive"):
        hj.cowell(-1.0, R0, V0, TOFS)
    with pytest.raises(TypeError, match="rtol: expected concrete numbers"):
        jax.jit(lambda rtol: hj.cowell(K_EARTH, R0, V0, TOFS, rtol=rtol))(1e-9)
    with pytest.raises(ValueError, match="max_steps: expected an integer from 1 to"):
        hj.cowell(K_EARTH, R0, V0, TOFS, max_steps=0)
    with pytest.raises(TypeError, match="v0: expected real numbers, got complex"):
        hj.cowell(K_EARTH, R0, jnp.asarray(V0) * 1j, TOFS)


# ============================================================================
# solve_ivp
# ============================================================================

@hjit
def lotka(t, y, p):
    return (p[0] * y[0] - p[1] * y[0] * y[1], -p[2] * y[1] + p[3] * y[0] * y[1])


@hjit
def prey_level(t, y, p):
    return y[0] - 3.0


@hjit
def predator_level(t, y, p):
    return y[1] - 2.0


# a terminal event at the third upward crossing (some objects stop, some
# never get there) and a non-terminal one recorded fewer times than it occurs
IVP_EVENTS = (ivp.Event(prey_level, terminal=3, direction=1), ivp.Event(predator_level))
IVP_RECORDS = 3
IVP_FIELDS = ("t", "y", "status", "t_events", "y_events", "n_events", "nfev", "nsteps")
IVP_N = 2 if SIM else 6
SPAN = (0.0, 4.0) if SIM else (0.0, 10.0)
T_EVAL = np.linspace(*SPAN, 7)


def _ensemble(n_objects, seed=1):
    rng = np.random.default_rng(seed)
    y0 = rng.uniform(1.0, 10.0, (n_objects, 2))
    params = np.column_stack([rng.uniform(1.0, 2.0, n_objects), rng.uniform(0.5, 1.5, n_objects),
                              rng.uniform(2.0, 4.0, n_objects), rng.uniform(0.5, 1.5, n_objects)])
    return y0, params


Y0, P = _ensemble(IVP_N)
RTOL, ATOL = 1e-8, np.array([1e-10, 1e-9])


def numpy_ivp(y0=Y0, params=P, t_eval=T_EVAL, span=SPAN):
    return ivp.solve_ivp(lotka, span, y0, t_eval=t_eval, rtol=RTOL, atol=ATOL, params=params,
                         events=IVP_EVENTS, max_event_records=IVP_RECORDS)


def jax_ivp(y0=Y0, params=P, t_eval=T_EVAL, span=SPAN):
    return hcj.solve_ivp(lotka, span, y0, t_eval=t_eval, rtol=RTOL, atol=ATOL, params=params,
                         events=IVP_EVENTS, max_event_records=IVP_RECORDS)


def ivp_kernel():
    problem = ivp.Problem("DOP853", lotka, 2, IVP_EVENTS, T_EVAL, 100_000, IVP_RECORDS,
                          IVP_RECORDS, [])
    return xla_of(problem)


@pytest.fixture(scope="module")
def ivp_reference():
    res = numpy_ivp()
    if not SIM:  # stopped objects, objects reaching tf, records cut short
        assert set(res.status) == {0, 1}
        assert (res.n_events[:, 1] > IVP_RECORDS).any()
    return res


def test_solve_ivp_jit_equals_numpy(ivp_reference):
    res = jax.jit(lambda y0, p, t: jax_ivp(y0, p, t))(Y0, P, T_EVAL)
    assert isinstance(res.y, jax.Array)
    assert res.y.shape == (IVP_N, 2, T_EVAL.size)
    assert res.y_events[0].shape == (IVP_N, IVP_RECORDS, 2)
    assert_same(res, ivp_reference, IVP_FIELDS)


@pytest.mark.skipif(settings.TARGET != "cuda", reason="HAPSIRA_CUDA_FETCH is the GPU's")
def test_fetching_kernel_inside_jit_equals_numpy(ivp_reference, monkeypatch):
    """HAPSIRA_CUDA_FETCH: XLA's launch gives the fetching kernel its counter and one thread
    per object (`hapsira_core.targets.cuda.xla`): the numpy call's numbers, bit for bit."""
    from hapsira_core.ivp import build

    monkeypatch.setattr(settings, "CUDA_FETCH", True)
    monkeypatch.setattr(build, "KERNELS", {})  # the kernels built again, fetching
    res = jax.jit(lambda y0, p, t: jax_ivp(y0, p, t))(Y0, P, T_EVAL)
    assert ivp_kernel().kernel.fetch
    assert_same(res, ivp_reference, IVP_FIELDS)


def test_solve_ivp_single_object_and_default_times(ivp_reference):
    res = jax_ivp(Y0[1], P[1])
    assert res.y.shape == (2, T_EVAL.size) and res.status.shape == ()
    assert res.t_events[0].shape == (IVP_RECORDS,) and res.y_events[1].shape == (IVP_RECORDS, 2)
    assert_same(res, ivp_reference, IVP_FIELDS[1:], rows=1)
    # t_eval=None: the end of the span only, as the numpy call
    res = jax.jit(lambda y0: jax_ivp(y0, t_eval=None))(Y0)
    assert_same(res, numpy_ivp(t_eval=None), IVP_FIELDS)


def test_solve_ivp_vmap_batches_into_the_object_axis(ivp_reference):
    # y0 batched (this ensemble, then reversed), params per object but not batched
    y0 = np.stack([Y0, Y0[::-1]])
    res = jax.jit(jax.vmap(lambda y: jax_ivp(y, P)))(y0)
    assert res.y.shape == (2, IVP_N, 2, T_EVAL.size)
    assert_same(jax.tree.map(lambda a: a[0], res), ivp_reference, IVP_FIELDS[1:])
    assert_same(jax.tree.map(lambda a: a[1], res), numpy_ivp(Y0[::-1], P), IVP_FIELDS[1:])
    # vmap over single objects gives the ensemble call
    res = jax.vmap(lambda y, p: jax_ivp(y, p))(Y0, P)
    assert_same(res, ivp_reference, IVP_FIELDS[1:])
    # batched output times are shared by a problem's objects: problems run in turn
    times = np.stack([T_EVAL, np.linspace(SPAN[0], SPAN[1] / 2, T_EVAL.size)])
    res = jax.jit(jax.vmap(lambda t: jax_ivp(Y0[:2], P[:2], t)))(times)
    for b in range(2):
        assert_same(jax.tree.map(lambda a: a[b], res), numpy_ivp(Y0[:2], P[:2], times[b]),
                    IVP_FIELDS)


def test_solve_ivp_twice_in_one_program_and_traced_span(ivp_reference):
    @jax.jit
    def program(y0, tf):
        first = jax_ivp(y0)
        # the second leg starts where the first ended, over a traced span
        # (NaN for stopped objects: they fail alone, with their own status)
        second = jax_ivp(first.y[:, :, -1], t_eval=None, span=(SPAN[1], tf))
        return first, second

    first, second = program(Y0, SPAN[1] + 1.5)
    assert_same(first, ivp_reference, IVP_FIELDS)
    want = numpy_ivp(ivp_reference.y[:, :, -1], t_eval=None, span=(SPAN[1], SPAN[1] + 1.5))
    assert_same(second, want, IVP_FIELDS)
    assert (np.asarray(second.status) == -3).sum() == (ivp_reference.status == 1).sum()


def test_solve_ivp_other_methods_backward_and_one_component():
    @hjit
    def decay(t, y, p):
        return (-p[0] * y[0] + 0.3 * t,)

    y0 = np.array([[1.7], [-0.4], [2.5]])
    params = np.array([[0.8], [0.3], [1.5]])
    t_eval = np.array([3.0, 2.5, 1.0, -0.5])
    want = ivp.solve_ivp(decay, (3.0, -0.5), y0, method="RK23", t_eval=t_eval, rtol=1e-6,
                         atol=1e-9, params=params)
    res = jax.jit(lambda t0, y: hcj.solve_ivp(decay, (t0, -0.5), y, method="RK23",
                                               t_eval=t_eval, rtol=1e-6, atol=1e-9,
                                               params=params))(3.0, y0)
    assert_same(res, want, IVP_FIELDS)


def test_solve_ivp_no_copies_of_inputs_or_outputs():
    y0, params, t_eval = jnp.asarray(Y0), jnp.asarray(P), jnp.asarray(T_EVAL)
    # y (N, n, M) is the kernel's (N, M, n) transposed: turned back, XLA
    # hands over the kernel's own buffer
    rows = jax.jit(lambda y, p, t: jnp.swapaxes(jax_ivp(y, p, t).y, 1, 2))(y0, params, t_eval)
    kernel = ivp_kernel()
    names = [a.name for a in kernel.args]
    # the kernel read the caller's arrays and wrote the array the caller got
    assert kernel.pointers[names.index("y0")] == y0.unsafe_buffer_pointer()
    assert kernel.pointers[names.index("params")] == params.unsafe_buffer_pointer()
    assert kernel.pointers[names.index("t_eval")] == t_eval.unsafe_buffer_pointer()
    assert kernel.pointers[names.index("y")] == rows.unsafe_buffer_pointer()


def test_solve_ivp_bad_inputs_name_the_argument():
    with pytest.raises(TypeError, match="y0: expected real numbers, got complex"):
        hcj.solve_ivp(lotka, SPAN, jnp.asarray(Y0) * 1j)
    with pytest.raises(TypeError, match="y0: expected real numbers, got booleans"):
        jax.jit(lambda y: hcj.solve_ivp(lotka, SPAN, y))(Y0 > 3)
    with pytest.raises(ValueError, match=r"y0: expected shape \(n,\) or \(N, n\)"):
        jax.jit(lambda y: hcj.solve_ivp(lotka, SPAN, y))(Y0[None])
    with pytest.raises(ValueError, match="t_eval: expected times within t_span"):
        hcj.solve_ivp(lotka, SPAN, Y0, t_eval=jnp.asarray(T_EVAL) + 1.0)
    with pytest.raises(ValueError, match="t_span: expected two real numbers"):
        hcj.solve_ivp(lotka, (0.0, 1.0, 2.0), Y0)
    with pytest.raises(ValueError, match="t_span: an infinite tf needs a terminal event"):
        jax.jit(lambda t: hcj.solve_ivp(lotka, (0.0, np.inf), Y0, t_eval=t, params=P))(T_EVAL)
    with pytest.raises(ValueError, match="t_span: expected a finite t0"):
        jax.jit(lambda t: hcj.solve_ivp(lotka, (np.nan, 1.0), Y0, t_eval=t))(T_EVAL)
    with pytest.raises(ValueError, match=rf"params: expected shape \(P,\) or \({IVP_N}, P\), "
                                         rf"got \({IVP_N + 1}, 4\)"):
        jax.jit(lambda y, p: hcj.solve_ivp(lotka, SPAN, y, params=p))(Y0, np.vstack([P, P[:1]]))
    with pytest.raises(TypeError, match="atol: expected concrete numbers"):
        jax.jit(lambda atol: hcj.solve_ivp(lotka, SPAN, Y0, atol=atol))(1e-9)
    with pytest.raises(ValueError, match="method"):
        hcj.solve_ivp(lotka, SPAN, Y0, method="LSODA")
    with pytest.raises(ValueError, match="events"):
        hcj.solve_ivp(lotka, SPAN, Y0, events=[prey_level])


# ============================================================================
# the results: views of the numpy result types
# ============================================================================

def _same_object(got, want):
    """Two `ObjectResult` s equal attribute by attribute, arrays bit for bit."""
    assert vars(got).keys() == vars(want).keys()
    for name, value in vars(want).items():
        if isinstance(value, list):
            assert len(getattr(got, name)) == len(value), name
            for a, b in zip(getattr(got, name), value):
                np.testing.assert_array_equal(a, b, err_msg=name)
        elif isinstance(value, np.ndarray):
            np.testing.assert_array_equal(getattr(got, name), value, err_msg=name)
        else:
            assert getattr(got, name) == value, name


def test_results_are_pytree_views_of_the_numpy_types(ivp_reference, orbit_reference):
    from hapsira_cowell.propagation.results import CowellResult
    for view, base in ((hcj.IVPResult, ivp.IVPResult), (hj.CowellResult, CowellResult)):
        assert issubclass(view, base) and view.FIELDS is base.FIELDS
    res = jax.jit(lambda y0: jax_ivp(y0))(Y0)
    assert type(res) is hcj.IVPResult
    # the pytree's paths are the field names, one definition with the numpy type's
    paths = {jax.tree_util.keystr(path[:1])
             for path, _ in jax.tree_util.tree_flatten_with_path(res)[0]}
    assert paths == {f".{name}" for name in ivp_reference.arrays()
                     if not name.startswith(("t_events_", "y_events_"))} | {
        ".t_events", ".y_events"}
    assert repr(res) == repr(ivp_reference) and len(res) == len(ivp_reference) == IVP_N
    np.testing.assert_array_equal(res.success, ivp_reference.success)
    assert res.messages() == ivp_reference.messages()
    assert res.njev.shape == (IVP_N,) and res.stm is None
    for i in range(IVP_N):
        _same_object(res[i], ivp_reference[i])
    orbits = jax_cowell(R0, V0)
    assert type(orbits) is hj.CowellResult and repr(orbits) == repr(orbit_reference)
    for i in (0, N - 1, -1):
        _same_object(orbits[i], orbit_reference[i])
    one = jax_ivp(Y0[1], P[1])
    assert len(one) == 1 and repr(one) == repr(numpy_ivp(Y0[1], P[1]))
    _same_object(one[0], ivp_reference[1])


def test_a_traced_result_is_not_read():
    seen = {}

    @jax.jit
    def program(y0):
        res = jax_ivp(y0)
        seen["repr"] = repr(res)
        with pytest.raises(TypeError, match="outside jax.jit"):
            res[0]
        return res.success

    assert np.asarray(program(Y0)).shape == (IVP_N,)
    assert seen["repr"] == f"IVPResult(objects={IVP_N}, traced)"


# ============================================================================
# both: derivatives, platforms, buffers, installs
# ============================================================================

def test_derivatives_raise_a_clear_error():
    def loss(r0):
        return jnp.nansum(jax_cowell(r0, V0).rr)

    with pytest.raises(xla.DerivativeError, match="derivatives .* are not supported"):
        jax.grad(loss)(R0)
    with pytest.raises(NotImplementedError, match="not supported"):
        jax.jvp(lambda v: jax_cowell(R0, v).vv, (jnp.asarray(V0),), (jnp.ones((N, 3)),))
    with pytest.raises(xla.DerivativeError, match="derivatives .* are not supported"):
        jax.grad(lambda p: jnp.nansum(jax_ivp(Y0, p).y))(P)
    # with no derivative flowing through the solver, other terms differentiate
    grad = jax.grad(lambda y: jnp.nansum(jax_ivp(jax.lax.stop_gradient(y)).y)
                    + jnp.sum(y ** 2))(jnp.asarray(Y0))
    np.testing.assert_allclose(grad, 2 * Y0)


def test_platform_not_matching_the_target_is_a_clear_error(monkeypatch):
    if SIM:
        monkeypatch.setattr(front, "xla_kernel", xla.xla_kernel)  # the real registration
        with pytest.raises(jax.errors.JaxRuntimeError,
                           match="HAPSIRA_TARGET=cuda under the CUDA simulator"):
            jax_cowell(R0, V0)
        with pytest.raises(jax.errors.JaxRuntimeError, match="has no XLA platform"):
            jax.jit(lambda r: jax_cowell(r, V0))(R0)
        with pytest.raises(jax.errors.JaxRuntimeError,
                           match="solve_ivp kernel cannot run here: HAPSIRA_TARGET=cuda"):
            jax.jit(lambda y: jax_ivp(y))(Y0)
        return
    if settings.TARGET == "cuda":  # a real GPU: the kernel called with inputs on the CPU
        cpu = jax.devices("cpu")[0]
        with pytest.raises(jax.errors.JaxRuntimeError,
                           match="HAPSIRA_TARGET=cuda and runs on JAX's GPU platform, but this "
                                 "program runs on the CPU"):
            jax.block_until_ready(jax.jit(lambda y: jax_ivp(y))(jax.device_put(Y0, cpu)))
        return
    # The handler the kernel registered for the GPU platform, here registered on
    # the CPU under another name, refuses and says what to do.
    refusal = ivp_kernel()._handlers[1]
    jax.ffi.register_ffi_target("hapsira_test_refusal", jax.ffi.pycapsule(refusal.address),
                                platform="cpu")
    call = jax.ffi.ffi_call("hapsira_test_refusal", jax.ShapeDtypeStruct((N, 3), np.float64))
    with pytest.raises(jax.errors.JaxRuntimeError,
                       match=f"HAPSIRA_TARGET={settings.TARGET} and runs on JAX's CPU "
                             "platform, but this program runs on a GPU"):
        jax.jit(call)(R0)


def test_buffers_of_other_shapes_are_refused_not_overrun():
    problem = ivp.Problem("DOP853", lotka, 2, IVP_EVENTS, T_EVAL, 100_000, IVP_RECORDS,
                          IVP_RECORDS, [])
    kernel = xla_of(problem)
    inputs = [Y0, *problem.shared_inputs(*SPAN, np.full(2, RTOL), ATOL)]
    inputs.insert(2, P)  # y0, t_eval, params, shared rows
    shapes = [shape for shape, _ in problem.output_shapes(IVP_N).values()]
    shapes[0] = (IVP_N, T_EVAL.size + 5, 2)  # more output times than t_eval: would overrun
    outputs = [jax.ShapeDtypeStruct(shape, a.dtype) for shape, a in zip(shapes, kernel.outputs)]
    with pytest.raises(jax.errors.JaxRuntimeError, match="do not agree"):
        # blocked on: a GPU reports the handler's error when the call has run
        jax.block_until_ready(
            jax.ffi.ffi_call(kernel.name, outputs)(*[jnp.asarray(x) for x in inputs]))


def _python(code, **env):
    environment = dict(os.environ, **env)
    environment["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(os.path.dirname(os.path.dirname(__file__)))]  # tests/: reference.py
        + environment.get("PYTHONPATH", "").split(os.pathsep))
    return subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True,
                          text=True, timeout=300)


def test_packages_import_without_jax():
    done = _python(
        "import sys\n"
        "sys.modules['jax'] = None  # as if JAX were not installed\n"
        "import hapsira_core, hapsira_core.jit, hapsira_core.ivp, hapsira_cowell\n"
        "import hapsira_cowell.propagation.propagator\n"
        "for name in ('hapsira_cowell.propagation.jax', 'hapsira_core.jax'):\n"
        "    try:\n"
        "        __import__(name)\n"
        "    except ImportError as error:\n"
        "        print(name, 'refused:', error)\n")
    assert done.returncode == 0, done.stderr
    for name in ("hapsira_cowell.propagation.jax", "hapsira_core.jax"):
        assert f"{name} refused: hapsira's JAX layer needs JAX: pip install " \
               "'hapsira-cowell[jax]'" in done.stdout


def test_32_bit_jax_is_refused_with_the_fix():
    # before any kernel is built: no compile in the child process
    done = _python(
        "import hapsira_cowell.propagation.jax as hj, hapsira_core.jax as hcj\n"
        "from hapsira_cowell.models.perturbations import two_body\n"
        "for call in (lambda: hj.cowell(398600.4418, [7000.0, 0, 0], [0, 7.5, 0], [60.0]),\n"
        "             lambda: hcj.solve_ivp(two_body, (0.0, 1.0), [1.0])):\n"
        "    try:\n"
        "        call()\n"
        "    except RuntimeError as error:\n"
        "        print('refused:', error)\n", JAX_ENABLE_X64="0")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("jax.config.update('jax_enable_x64', True)") == 2, done.stdout


WARM_JAX = """
import json
import numpy as np
import jax
jax.config.update("jax_enable_x64", True)
from numba.core import event
from hapsira_cowell import cowell
from hapsira_cowell.propagation.forms import call_options, orbit_call
from hapsira_cowell.propagation.jax import cowell as jax_cowell

compiled = []


class Compiles(event.Listener):
    def on_start(self, ev):
        pass

    def on_end(self, ev):
        compiled.append(str(ev.data.get("dispatcher")))


r0 = np.array([[7000.0, 300.0, -200.0], [6800.0, -1000.0, 900.0]])
v0 = np.array([[0.2, 7.4, 1.1], [-1.0, 7.2, 2.0]])
tofs = np.array([600.0, 1800.0])
_, _, f, events, max_steps, records = call_options(1e-11, 1e-12, None, (), 100_000, 64, None)
kernel = orbit_call("cowell", f, f, events, tofs, None, None, max_steps, records).problem().kernel
# the kernel the JAX front runs: the per-object one (a lane kernel's .scalar, HAPSIRA_LANES)
kernel = getattr(kernel, "scalar", kernel)
on_disk = kernel.on_disk()
with event.install_listener("numba:compile", Compiles()):
    res = jax.jit(lambda r, v: jax_cowell(398600.4418, r, v, tofs))(r0, v0)
    rr = np.asarray(res.rr)
# a joined kernel (HAPSIRA_JOIN) is its entry's address and the cached trampoline calling it
dispatcher = kernel._compiled[1] if isinstance(kernel._compiled, tuple) else kernel._compiled
hits = getattr(dispatcher, "stats", None)
print(json.dumps({"on_disk": on_disk, "compiled": compiled, "rr": rr.tolist(),
                  "numpy": np.asarray(cowell(398600.4418, r0, v0, tofs).rr).tolist(),
                  "hits": None if hits is None else sum(hits.cache_hits.values())}))
"""


@pytest.mark.skipif(settings.TARGET == "cuda", reason="the host targets' XLA handler; the "
                    "simulator caches nothing, and a GPU's run of this is not checked here")
def test_a_warm_process_compiles_nothing_for_its_first_jax_call(tmp_path):
    # The second process loads the numpy front's kernel (parallel: its prange loop)
    # and the XLA handler from the disk cache: numba compiles nothing at all.
    def run():
        done = _python(WARM_JAX, HAPSIRA_CACHE="1", HAPSIRA_CACHE_DIR=str(tmp_path))
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    cold, warm = run(), run()
    assert not cold["on_disk"] and cold["compiled"]
    assert warm["on_disk"] and warm["compiled"] == []
    if settings.TARGET == "cpu":  # the numpy front's own kernel, a hit of numba's cache
        assert warm["hits"] == 1
    assert warm["rr"] == cold["rr"] == warm["numpy"]
    entries = sorted(p.name for p in tmp_path.glob("hapsira_kernel_*.py"))
    assert [e.split("_")[2] for e in entries].count("xla") == 1, entries


@hjit
def lotka_array_form(t, y, p, dydt):
    dydt[0] = p[0] * y[0] - p[1] * y[0] * y[1]
    dydt[1] = -p[2] * y[1] + p[3] * y[0] * y[1]


def test_array_form_of_fun_inside_jit_equals_the_numpy_front():
    """fun(t, y, p, dydt) (any state size) inside jax.jit: the numpy front's numbers."""
    y0 = np.array([[10.0, 5.0], [8.0, 4.0]])
    params = np.array([[1.5, 1.0, 3.0, 1.0], [1.2, 0.9, 2.5, 1.1]])
    t_eval = np.linspace(0.0, 5.0, 6)
    want = ivp.solve_ivp(lotka_array_form, (0.0, 5.0), y0, t_eval=t_eval, rtol=1e-8,
                         atol=1e-10, params=params)
    got = jax.jit(lambda y0, params: hcj.solve_ivp(
        lotka_array_form, (0.0, 5.0), y0, t_eval=t_eval, rtol=1e-8, atol=1e-10,
        params=params).y)(jnp.asarray(y0), jnp.asarray(params))
    np.testing.assert_array_equal(np.asarray(got), want.y)
