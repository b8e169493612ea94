"""hapsira_cowell.jax.cowell inside jax.jit on XLA's CPU platform: the numpy call's numbers.

On cpu/parallel the kernel runs through the CPU handler (a numba cfunc on
XLA's buffers). Under the CUDA simulator there is no XLA GPU platform: the
plain call must raise the platform-mismatch error, and every other test
runs the CUDA launcher (the GPU path's frame decoding and launch) on XLA's
CPU buffers instead (``XlaKernel(..., simulator_on_cpu=True)``).
"""

import os
import subprocess
import sys

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
from astropy import units as u  # noqa: E402

import hapsira_cowell.jax as hj  # noqa: E402
from hapsira_core import settings, xla  # noqa: E402
from hapsira_core.jit import hjit  # noqa: E402
from hapsira_cowell import cowell  # noqa: E402
from hapsira_cowell.events import AltitudeCrossEvent, NodeCrossEvent  # noqa: E402
from hapsira_cowell.perturbations import J2_perturbation, two_body  # noqa: E402
from reference import K_EARTH, R_EARTH, coe_to_rv, varied_orbits  # noqa: E402

SIM = settings.TARGET == "cuda" and settings.cuda_simulator_enabled()


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


def _problem(n, seed):
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
R0, V0, PARAMS = _problem(N, seed=3)


def numpy_call(r0, v0, tofs=TOFS, params=PARAMS, k=K_EARTH):
    return cowell(k, r0, v0, tofs, f=j2_scaled, params=params, events=EVENTS,
                  max_event_records=RECORDS)


def jax_call(r0, v0, tofs=TOFS, params=PARAMS, k=K_EARTH):
    return hj.cowell(k, r0, v0, tofs, f=j2_scaled, params=params, events=EVENTS,
                     max_event_records=RECORDS)


def assert_same(got, want, rows=None):
    """Every field equal bit for bit (NaN where NaN)."""
    pick = (lambda a: a) if rows is None else (lambda a: a[rows])
    for field in ("rr", "vv", "status", "n_events", "nfev", "nsteps"):
        np.testing.assert_array_equal(np.asarray(getattr(got, field)),
                                      pick(getattr(want, field)), err_msg=field)
    assert len(got.t_events) == len(want.t_events)
    for g, w in zip(got.t_events, want.t_events):
        np.testing.assert_array_equal(np.asarray(g), pick(w), err_msg="t_events")


_SIMULATED = {}


def _simulated_kernel(kernel, what):
    if id(kernel) not in _SIMULATED:
        _SIMULATED[id(kernel)] = (kernel, xla.XlaKernel(kernel, what, simulator_on_cpu=True))
    return _SIMULATED[id(kernel)][1]


@pytest.fixture(autouse=True)
def _launcher_under_simulator(monkeypatch):
    if SIM:
        monkeypatch.setattr(hj, "xla_kernel", _simulated_kernel)


@pytest.fixture(scope="module")
def reference():
    res = numpy_call(R0, V0)
    if not SIM:  # the comparison covers stopped objects, events and plain ends
        assert set(res.status) == {0, 1}
        assert (res.n_events[:, 1] > 1).any()
    return res


def test_jit_equals_numpy(reference):
    res = jax.jit(lambda k, r0, v0, tofs, params: jax_call(r0, v0, tofs, params, k))(
        K_EARTH, R0, V0, TOFS, PARAMS)
    assert isinstance(res.rr, jax.Array)
    assert_same(res, reference)


def test_single_object_drops_the_object_axis(reference):
    res = jax_call(R0[1], V0[1], params=PARAMS[1])
    assert res.rr.shape == (TOFS.size, 3) and res.status.shape == ()
    assert res.t_events[0].shape == (RECORDS,) and res.n_events.shape == (2,)
    assert_same(res, reference, rows=1)


def test_vmap_batches_into_the_object_axis(reference):
    # a batch of 2 problems: this cloud and the same cloud reversed
    r0 = np.stack([R0, R0[::-1]])
    v0 = np.stack([V0, V0[::-1]])
    params = np.stack([PARAMS, PARAMS[::-1]])
    res = jax.jit(jax.vmap(lambda r, v, p: jax_call(r, v, params=p)))(r0, v0, params)
    assert res.rr.shape == (2, N, TOFS.size, 3)
    assert_same(jax.tree.map(lambda a: a[0], res), reference)
    assert_same(jax.tree.map(lambda a: a[1], res), reference, rows=slice(None, None, -1))


def test_vmap_over_single_objects_and_over_times():
    # vmap over single objects gives the cloud call
    want = numpy_call(R0[:2], V0[:2], params=PARAMS[:2])
    res = jax.vmap(lambda r, v, p: jax_call(r, v, params=p))(R0[:2], V0[:2], PARAMS[:2])
    assert_same(res, want)
    # batched times are shared by the objects of a problem: problems run in turn
    tofs = np.stack([TOFS, TOFS * 0.75])
    res = jax.jit(jax.vmap(lambda t: jax_call(R0[:2], V0[:2], t, PARAMS[:2])))(tofs)
    for b in range(2):
        assert_same(jax.tree.map(lambda a: a[b], res),
                    numpy_call(R0[:2], V0[:2], tofs[b], PARAMS[:2]))


def test_twice_in_one_program(reference):
    @jax.jit
    def program(r0, v0):
        first = jax_call(r0, v0)
        # the second leg starts where the first ended (NaN for stopped objects:
        # they fail alone, with their own status)
        second = jax_call(first.rr[:, -1], first.vv[:, -1])
        independent = jax_call(r0[::-1], v0[::-1], params=PARAMS[::-1])
        return first, second, independent

    first, second, independent = program(R0, V0)
    assert_same(first, reference)
    assert_same(second, numpy_call(reference.rr[:, -1], reference.vv[:, -1]))
    assert_same(independent, reference, rows=slice(None, None, -1))


def test_no_copies_of_inputs_or_outputs():
    r0, v0 = jnp.asarray(R0), jnp.asarray(V0)
    rr = jax.jit(lambda r, v: jax_call(r, v).rr)(r0, v0)
    kernel = hj._solver(j2_scaled, EVENTS, RECORDS)[0]
    names = [a.name for a in kernel.args]
    # the kernel read the caller's arrays and wrote the array the caller got
    assert kernel.pointers[names.index("r0")] == r0.unsafe_buffer_pointer()
    assert kernel.pointers[names.index("v0")] == v0.unsafe_buffer_pointer()
    assert kernel.pointers[names.index("rr")] == rr.unsafe_buffer_pointer()


def test_derivatives_raise_a_clear_error():
    def loss(r0):
        return jnp.nansum(jax_call(r0, V0).rr)

    with pytest.raises(xla.DerivativeError, match="derivatives .* are not supported"):
        jax.grad(loss)(R0)
    with pytest.raises(NotImplementedError, match="not supported"):
        jax.jvp(lambda v: jax_call(R0, v).vv, (jnp.asarray(V0),), (jnp.ones((N, 3)),))
    # with no derivative flowing through the solver, other terms differentiate
    grad = jax.grad(lambda r: jnp.nansum(jax_call(jax.lax.stop_gradient(r), V0).rr)
                    + jnp.sum(r ** 2))(jnp.asarray(R0))
    np.testing.assert_allclose(grad, 2 * R0)


def test_platform_not_matching_the_target_is_a_clear_error(monkeypatch):
    if SIM:
        monkeypatch.setattr(hj, "xla_kernel", xla.xla_kernel)  # the real registration
        with pytest.raises(jax.errors.JaxRuntimeError,
                           match="HAPSIRA_TARGET=cuda under the CUDA simulator"):
            jax_call(R0, V0)
        with pytest.raises(jax.errors.JaxRuntimeError, match="has no XLA platform"):
            jax.jit(lambda r: jax_call(r, V0))(R0)
        return
    # The handler the kernel registered for the GPU platform, here registered on
    # the CPU under another name, refuses and says what to do.
    kernel = hj._solver(j2_scaled, EVENTS, RECORDS)[0]
    refusal = kernel._handlers[1]
    jax.ffi.register_ffi_target("hapsira_test_refusal", jax.ffi.pycapsule(refusal.address),
                                platform="cpu")
    call = jax.ffi.ffi_call("hapsira_test_refusal", jax.ShapeDtypeStruct((N, 3), np.float64))
    with pytest.raises(jax.errors.JaxRuntimeError,
                       match=f"HAPSIRA_TARGET={settings.TARGET} and runs on JAX's CPU "
                             "platform, but this program runs on a GPU"):
        jax.jit(call)(R0)


def test_buffers_of_other_shapes_are_refused_not_overrun():
    kernel = hj._solver(j2_scaled, EVENTS, RECORDS)[0]
    inputs = [R0, V0, TOFS, PARAMS, np.r_[K_EARTH, np.full(6, 1e-11), np.full(6, 1e-12)],
              np.array([1000, 2]), np.array([-1.0, 0.0]), np.array([1, 0]), np.zeros((2, 2))]
    m = TOFS.size
    good = [(N, m, 3), (N, m, 3), (N, 3), (N, 2, RECORDS), (N, 2), (N, 2, 2)]
    bad = [(N, m + 5, 3)] + good[1:]  # more output times than tofs: would overrun
    outputs = [jax.ShapeDtypeStruct(shape, a.dtype) for shape, a in zip(bad, kernel.outputs)]
    with pytest.raises(jax.errors.JaxRuntimeError, match="do not agree"):
        jax.ffi.ffi_call(kernel.name, outputs)(*[jnp.asarray(x) for x in inputs])


def test_bad_inputs_name_the_argument():
    with pytest.raises(TypeError, match="r0: expected plain numbers in km"):
        hj.cowell(K_EARTH, R0 << u.km, V0, TOFS)
    with pytest.raises(ValueError, match=r"r0: expected shape \(3,\) or \(N, 3\)"):
        hj.cowell(K_EARTH, R0[:, :2], V0, TOFS)
    with pytest.raises(ValueError, match="tofs: expected times sorted"):
        hj.cowell(K_EARTH, R0, V0, TOFS[::-1])
    with pytest.raises(ValueError, match="k: expected a positive"):
        hj.cowell(-1.0, R0, V0, TOFS)
    with pytest.raises(TypeError, match="rtol: expected concrete numbers"):
        jax.jit(lambda rtol: hj.cowell(K_EARTH, R0, V0, TOFS, rtol=rtol))(1e-9)


def _python(code, **env):
    environment = dict(os.environ, **env)
    environment["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(__file__)] + environment.get("PYTHONPATH", "").split(os.pathsep))
    return subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True,
                          text=True, timeout=300)


def test_packages_import_without_jax():
    done = _python(
        "import sys\n"
        "sys.modules['jax'] = None  # as if JAX were not installed\n"
        "import hapsira_core, hapsira_core.jit, hapsira_cowell, hapsira_cowell.cowell\n"
        "try:\n"
        "    import hapsira_cowell.jax\n"
        "except ImportError as error:\n"
        "    print('refused:', error)\n")
    assert done.returncode == 0, done.stderr
    assert "refused: hapsira's JAX layer needs JAX: pip install 'hapsira-cowell[jax]'" \
        in done.stdout


def test_32_bit_jax_is_refused_with_the_fix():
    done = _python(
        "import jax, numpy as np\n"
        "import hapsira_cowell.jax as hj\n"
        "try:\n"
        "    hj.cowell(398600.4418, [7000.0, 0, 0], [0, 7.5, 0], [60.0])\n"
        "except RuntimeError as error:\n"
        "    print('refused:', error)\n", JAX_ENABLE_X64="0")
    assert done.returncode == 0, done.stderr
    assert "jax.config.update('jax_enable_x64', True)" in done.stdout
