"""The lane loop (`hapsira_core.ivp.lanes`): W objects per core at once, bit-identical to the
per-object loop.

Each problem runs twice in one process, once with the per-object kernel and once with a
lane kernel of a given width (`build.lanes` pinned by monkeypatch: ``HAPSIRA_LANES`` is read
at import), and every output must be equal bit for bit: states, statuses, nfev, nsteps.
The ensembles have per-object parameters and spans (one integrated backward), an object
count that no width divides, and failing objects among them (a NaN initial state, a
parameter that overflows f) that get their own status while the others keep their bits.
Widths 2 and 3 keep the compile short; the host's own width runs on Van der Pol, 4 lanes
on the orbit workload, and the assembly of both attempts is checked for packed arithmetic.
"""

import math
import time
import types

import numba
import numpy as np
import pytest

from hapsira_core import settings
from hapsira_core.ivp import Event, build, lanes, solve_ivp
from hapsira_core.jit import hjit
from hapsira_core.targets import active as target
from hapsira_cowell.perturbations import J2_perturbation, two_body

HOST_LANES = hasattr(target, "lane_width")
host_only = pytest.mark.skipif(not HOST_LANES, reason="lanes are a host-target mode "
                               "(cpu, parallel); the refusal elsewhere is tested below")

FIELDS = ("y", "t", "status", "nfev", "nsteps", "njev", "nlu")


@hjit
def van_der_pol(t, y, p):
    return (y[1], p[0] * (1.0 - y[0] * y[0]) * y[1] - y[0])


@hjit
def lotka_volterra(t, y, p):
    return (p[0] * y[0] - p[1] * y[0] * y[1], -p[2] * y[1] + p[3] * y[0] * y[1])


@hjit
def lorenz(t, y, p):
    return (p[0] * (y[1] - y[0]), y[0] * (p[1] - y[2]) - y[1], y[0] * y[1] - p[2] * y[2])


@hjit
def crossing(t, y, p):
    return y[0]


@hjit
def van_der_pol_rows(t, y, p, dydt):
    dydt[0] = y[1]
    dydt[1] = p[0] * (1.0 - y[0] * y[0]) * y[1] - y[0]


def _ensemble(name, n, seed):
    """(fun, y0, params, t0, tf) of n objects with their own parameters and spans."""
    rng = np.random.default_rng(seed)
    if name == "van_der_pol":
        y0 = np.column_stack([rng.uniform(0.5, 2.5, n), rng.uniform(-1.0, 1.0, n)])
        return van_der_pol, y0, rng.uniform(0.5, 3.0, (n, 1)), 0.0, rng.uniform(5.0, 12.0, n)
    if name == "lotka_volterra":
        y0 = rng.uniform(1.0, 10.0, (n, 2))
        params = np.column_stack([rng.uniform(1.0, 2.0, n), rng.uniform(0.5, 1.5, n),
                                  rng.uniform(2.0, 4.0, n), rng.uniform(0.5, 1.5, n)])
        return lotka_volterra, y0, params, 0.0, rng.uniform(4.0, 9.0, n)
    y0 = rng.uniform(-10.0, 10.0, (n, 3)) + np.array([0.0, 0.0, 25.0])
    params = np.column_stack([rng.uniform(9.0, 11.0, n), rng.uniform(26.0, 30.0, n),
                              rng.uniform(2.4, 2.9, n)])
    return lorenz, y0, params, 0.0, rng.uniform(1.0, 3.0, n)


def _solve(monkeypatch, width, *args, **kwargs):
    monkeypatch.setattr(build, "lanes", lambda *a, **k: width)
    monkeypatch.setattr(settings, "LANES", width)  # a number: lanes at any object count
    result = solve_ivp(*args, **kwargs)
    monkeypatch.undo()
    return result


def _assert_same(lane, scalar, rows=slice(None)):
    """Every field of ``lane`` equal, bit for bit, to ``scalar``'s objects ``rows``."""
    for field in FIELDS:
        a, b = np.asarray(getattr(lane, field)), np.asarray(getattr(scalar, field))
        if b.ndim and b.shape[0] == np.asarray(scalar.status).shape[0]:
            b = b[rows]
        assert a.dtype == b.dtype and a.shape == b.shape, field
        assert a.tobytes() == b.tobytes(), f"{field} differs from the per-object loop"


CASES = [  # problem, method, width, explicit output times
    ("van_der_pol", "DOP853", 3, True),
    ("lotka_volterra", "RK45", 2, False),
    ("lorenz", "RK23", 2, True),  # sigma = 1e300 makes it stiff: max_steps ends it
]


@host_only
@pytest.mark.parametrize("name, method, width, outputs", CASES)
def test_ensembles_bit_identical_with_failures(monkeypatch, name, method, width, outputs):
    n = 11  # no width divides it: the last lanes run dry at different times
    fun, y0, params, t0, tf = _ensemble(name, n, seed=len(name))
    if name != "lorenz":  # (backward, Lorenz's flow expands volumes: it blows up)
        tf[4] = -tf[4]  # one object integrates backward
    y0[2, 0] = math.nan  # its own status: bad initial state
    params[7, 0] = 1e300  # f overflows in the first steps: its own failure status
    kwargs = {"method": method, "rtol": 1e-9, "atol": 1e-12, "params": params}
    if outputs:  # t0 itself among them: scipy's interpolant of the first step
        kwargs["t_eval"] = np.stack([np.linspace(0.0, t, 5) for t in tf])
    lane = _solve(monkeypatch, width, fun, (t0, tf), y0, **kwargs)
    scalar = _solve(monkeypatch, 0, fun, (t0, tf), y0, **kwargs)
    _assert_same(lane, scalar)
    status = np.asarray(scalar.status)
    assert status[2] == -3 and status[7] < 0 and (np.delete(status, [2, 7]) == 0).all()
    assert np.isnan(np.asarray(lane.y)[[2, 7]][..., -1]).all()
    # the others have the bits they have without the failing objects beside them
    keep = [i for i in range(n) if i not in (2, 7)]
    alone = dict(kwargs, params=params[keep])
    if outputs:
        alone["t_eval"] = kwargs["t_eval"][keep]
    others = _solve(monkeypatch, width, fun, (t0, tf[keep]), y0[keep], **alone)
    _assert_same(others, scalar, rows=keep)


@host_only
def test_max_steps_and_max_step_bit_identical(monkeypatch):
    fun, y0, params, t0, tf = _ensemble("van_der_pol", 7, seed=3)
    for kwargs in ({"max_steps": 9}, {"max_step": 0.05}, {"first_step": 1e-3}):
        kwargs.update(method="DOP853", rtol=1e-9, atol=1e-12, params=params)
        lane = _solve(monkeypatch, 3, fun, (t0, tf), y0, **kwargs)
        scalar = _solve(monkeypatch, 0, fun, (t0, tf), y0, **kwargs)
        _assert_same(lane, scalar)
    assert (np.asarray(lane.nsteps) > 0).all()


@host_only
def test_host_width_on_van_der_pol(monkeypatch):
    width = target.lane_width() or 4
    fun, y0, params, t0, tf = _ensemble("van_der_pol", 4 * width + 1, seed=5)
    kwargs = {"method": "DOP853", "rtol": 1e-10, "atol": 1e-12, "params": params}
    _assert_same(_solve(monkeypatch, width, fun, (t0, tf), y0, **kwargs),
                 _solve(monkeypatch, 0, fun, (t0, tf), y0, **kwargs))


@host_only
def test_orbit_workload_bit_identical(monkeypatch):
    import re

    from reference import K_EARTH, R_EARTH, coe_to_rv

    from hapsira_cowell import cowell

    rng = np.random.default_rng(7)
    states = [coe_to_rv(K_EARTH, R_EARTH + rng.uniform(300, 1200), rng.uniform(0, 0.02),
                        rng.uniform(0, math.pi), *rng.uniform(0, 2 * math.pi, 3))
              for _ in range(5)]
    r0 = np.array([s[0] for s in states])
    v0 = np.array([s[1] for s in states])
    tofs = np.linspace(0.0, 6 * 3600.0, 4)
    results = []
    for width in (4, 0):
        monkeypatch.setattr(build, "lanes", lambda *a, width=width, **k: width)
        monkeypatch.setattr(settings, "LANES", width)
        results.append(cowell(K_EARTH, r0, v0, tofs, f=_two_body_j2, rtol=1e-11))
        monkeypatch.undo()
    lane, scalar = results
    for field in ("rr", "vv", "status", "nfev", "nsteps"):
        assert np.asarray(getattr(lane, field)).tobytes() == \
            np.asarray(getattr(scalar, field)).tobytes(), field
    assert (np.asarray(scalar.status) == 0).all()
    from hapsira_core.targets import _host

    if _host.vector_doubles() >= 4:
        # f (two-body + J2: a square root, a division, x, y, z alike) packs across the
        # lanes too, compiled apart without the vectoriser (`_host.lane_compiler`): the
        # attempt that ran above, at 4 lanes, every multiplication on ymm registers
        spec = [s for s in build.KERNELS if s.lanes == 4 and s.n == 6]
        asm = _attempt_asm("DOP853", 6, spec[0].fun, 4)
        packed, scalar_ops = _packed(asm, "ymm")
        assert packed > 600 and scalar_ops == 0, (packed, scalar_ops)
        assert not re.search(r"\bv(div|sqrt)sd\b|\bvmulpd\b[^\n]*xmm", asm)


@hjit
def _two_body_j2(t, rr, vv, k, p):
    drr, dvv = two_body(t, rr, vv, k, p)
    a = J2_perturbation(t, rr, vv, k, 1.08262668e-3, 6378.137)
    return drr, (dvv[0] + a[0], dvv[1] + a[1], dvv[2] + a[2])


@host_only
def test_fallbacks_are_automatic(monkeypatch):
    """What the lane loop does not cover runs per object, with no error, under any width
    (events and step records it covers)."""
    monkeypatch.setattr(settings, "LANES", 4)
    event = Event(crossing)
    assert build.lanes("DOP853", van_der_pol) == 4
    assert build.lanes("DOP853", van_der_pol, (event.device_function,)) == 4  # events run
    assert build.lanes("DOP853", van_der_pol_rows) == 0  # array form (and so stm=True)
    assert build.lanes("Radau", van_der_pol) == 0  # implicit methods
    assert build.lanes("DOP853", van_der_pol, records=True) == 4  # dense_output, "steps"
    assert build.lanes("RK45", van_der_pol, jac=van_der_pol) == 0
    fun, y0, params, t0, _tf = _ensemble("van_der_pol", 5, seed=1)
    result = solve_ivp(fun, (t0, 5.0), y0, params=params, events=[event], dense_output=True)
    assert (np.asarray(result.status) == 0).all()
    monkeypatch.setattr(settings, "LANES", 0)
    assert build.lanes("DOP853", van_der_pol) == 0


def test_target_without_lanes(monkeypatch):
    """auto runs per object where a target has no lanes (cuda); a width is refused."""
    if HOST_LANES:  # the host targets: a stand-in target without lanes
        monkeypatch.setattr(build, "target", types.SimpleNamespace(NAME="cuda"))
    monkeypatch.setattr(settings, "LANES", "auto")
    assert build.lanes("DOP853", van_der_pol) == 0
    for forced in (4, "on"):
        monkeypatch.setattr(settings, "LANES", forced)
        with pytest.raises(ValueError,
                           match=f"HAPSIRA_LANES={forced}: the cuda target has no lane mode"):
            build.lanes("DOP853", van_der_pol)


@pytest.mark.parametrize("raw, expected", [("auto", "auto"), ("off", 0), ("0", 0), ("4", 4),
                                           (" 8 ", 8), ("AUTO", "auto"), ("on", "on"),
                                           ("yes", "on")])
def test_setting(monkeypatch, raw, expected):
    monkeypatch.setenv("HAPSIRA_LANES", raw)
    assert settings._lanes("HAPSIRA_LANES", "auto") == expected


@pytest.mark.parametrize("raw", ["x", "65", "-2", "4.5", ""])
def test_bad_setting(monkeypatch, raw):
    monkeypatch.setenv("HAPSIRA_LANES", raw)
    with pytest.raises(ValueError,
                       match="HAPSIRA_LANES=.*expected 'auto', 'on', 'off' or a lane width"):
        settings._lanes("HAPSIRA_LANES", "auto")


@host_only
def test_cache_key_has_width_and_cpu(monkeypatch):
    import llvmlite.binding as llvm
    from numba.core import codegen, config

    from hapsira_core.targets import _host

    options = target.lane_code_options(4)
    assert 4 in options and (config.CPU_NAME or llvm.get_host_cpu_name()) in options
    assert (config.CPU_FEATURES or codegen.get_host_cpu_features()) in options
    keys = {build.KernelSpec("DOP853", 2, van_der_pol, lanes=w).recipe()[0] for w in (0, 2, 4)}
    assert len(keys) == 3
    # code for another CPU (NUMBA_CPU_NAME, NUMBA_CPU_FEATURES, read by numba at compile):
    # an AVX2 one gets auto's 4 lanes and its own key, an AVX-512 one 8
    host = _host.cpu_features()
    spec = build.KernelSpec("DOP853", 2, van_der_pol, lanes=4)
    found = {}
    for name, features, doubles in (("znver3", "+avx,+avx2,+fma,+sse2,-avx512f", 4),
                                    ("skylake-avx512", "+avx,+avx2,+avx512f,+sse2", 8),
                                    ("x86-64", "+sse2,-avx", 2)):
        monkeypatch.setattr(config, "CPU_NAME", name)
        monkeypatch.setattr(config, "CPU_FEATURES", features)
        monkeypatch.setattr(settings, "LANES", "auto")
        assert _host.cpu_features() == (name, features)
        assert _host.vector_doubles() == doubles == _host.lane_width()
        found[name] = spec.recipe()[0]
        monkeypatch.undo()
    assert _host.cpu_features() == host
    found["host"] = spec.recipe()[0]
    assert len(set(found.values())) == 4, found


def _attempt_asm(method, n, fun, width, events=(), records=False):
    """The assembly of the lanes' attempt (`lanes.make_attempt`) for the lane loop's
    argument types: the function that the lane kernel calls, compiled as it compiles it
    (with `_host.lane_compiler`'s vectoriser); ``events``: its event functions;
    ``records``: the attempt of a kernel with step records."""
    from numba import types

    f64 = types.float64
    signature = (types.Array(f64, 3, "C"), types.Array(f64, 2, "C"),
                 types.UniTuple(types.Array(f64, 1, "A"), width),
                 types.Array(types.int64, 2, "C"), types.Array(f64, 2, "C"), types.int64,
                 types.Array(f64, 2, "C"), types.Array(f64, 1, "C"), types.Array(f64, 2, "C"))
    attempt = lanes.make_attempt(method, n, fun, width, tuple(events), records)
    attempt.compile(signature)
    return attempt.inspect_asm(signature)


def _packed(asm, register):
    """Counts of packed multiplications on ``register`` and of scalar ones."""
    import re

    return (len(re.findall(rf"\bvmulpd\b[^\n]*{register}", asm)),
            len(re.findall(r"\bvmulsd\b", asm)))


@host_only
@pytest.mark.parametrize("with_events, records", [(False, False), (True, False),
                                                   (True, True)])
def test_attempt_is_packed_vector_code(with_events, records):
    """The lanes' attempt on Van der Pol at the host's width compiles to packed
    instructions (4 float64 per ymm with AVX2, 8 per zmm with AVX-512, or per two ymm
    where LLVM prefers 256-bit vectors on an AVX-512 CPU: on an Emerald Rapids host the
    8 lanes' attempt had 440 ymm and no zmm multiplications), the step control after it
    included, and so do the event checks at each step's end (two events, one with a
    direction) and the stores of step records: no scalar multiplication, division or
    square root."""
    import re

    from hapsira_core.targets import _host

    register = {8: "[yz]mm", 4: "ymm"}.get(_host.vector_doubles())
    if register is None:
        pytest.skip("no AVX on this host")
    events = (Event(crossing).device_function,
              Event(rising_velocity, direction=1).device_function) if with_events else ()
    asm = _attempt_asm("DOP853", 2, van_der_pol, _host.vector_doubles(), events, records)
    packed, scalar = _packed(asm, register)
    assert packed > 150, packed
    assert not re.search(r"\bv(mul|div|sqrt)sd\b", asm)


@host_only
def test_a_failed_lane_compile_leaves_the_vectoriser_off(monkeypatch):
    """A compile with the lanes' vectoriser (`_host.lane_compiler`) that fails or is
    interrupted while the vectoriser is on (here in lowering) turns it back off: left on,
    every later compile of the process packed the user's ``f`` within one lane, and a
    joined lane kernel then ran 25% slower (docs/log.md, "a lane compile that fails")."""
    from numba.core import lowering

    from hapsira_core.targets import _host

    def interrupted(self):
        raise KeyboardInterrupt

    before = numba.core.config.SLP_VECTORIZE
    monkeypatch.setattr(lowering.Lower, "lower", interrupted)
    failing = numba.njit(pipeline_class=_host.lane_compiler())(lambda x: 2.0 * x)
    with pytest.raises(KeyboardInterrupt):
        failing(1.0)
    assert numba.core.config.SLP_VECTORIZE == before
    monkeypatch.undo()
    compiled = numba.njit(pipeline_class=_host.lane_compiler())(lambda x: 3.0 * x)
    assert compiled(1.0) == 3.0 and numba.core.config.SLP_VECTORIZE == before


@host_only
def test_auto_leaves_small_calls_to_the_per_object_kernel(monkeypatch):
    """Under auto a call below AUTO_LANES_MIN_OBJECTS never compiles the lane kernel
    (it compiles twice as long); at or above AUTO_LANES_COMPILE_OBJECTS it runs."""
    from hapsira_core.targets import _host, _join

    calls = []
    monkeypatch.setattr(settings, "LANES", "auto")
    for lane_kernel in (_host.LaneKernel, _join.JoinedLaneKernel):  # at once or joined
        monkeypatch.setattr(lane_kernel, "compile", lambda self: calls.append(self) or
                            (_ for _ in ()).throw(RuntimeError("lane kernel compiled")))
    monkeypatch.setattr(_host, "AUTO_LANES_MIN_OBJECTS", 3)
    monkeypatch.setattr(_host, "AUTO_LANES_COMPILE_OBJECTS", 1)
    y0 = np.array([[1.0, 0.5], [0.3, -0.2]])
    res = solve_ivp(van_der_pol, (0.0, 2.0), y0, params=np.array([[1.0], [2.0]]))
    assert calls == [] and list(res.status) == [0, 0]
    with pytest.raises(RuntimeError, match="lane kernel compiled"):
        solve_ivp(van_der_pol, (0.0, 2.0), np.vstack([y0, y0]),
                  params=np.array([[1.0], [2.0], [1.0], [2.0]]))
    assert len(calls) == 1


@host_only
def test_auto_compiles_lanes_only_where_it_pays(monkeypatch, tmp_path):
    """auto, lane kernels compiled at once (``HAPSIRA_JOIN=0``): the per-object kernel
    until the lane kernel is compiled (in this process or in the disk cache) or the call
    is large enough to pay for its compile (per thread on parallel); ``on`` compiles it at
    any size. The same bits either way. (Joined lane kernels:
    `test_auto_takes_joined_lanes_once_the_generic_lane_loop_is_ready`.)"""
    from hapsira_core.targets import _host

    monkeypatch.setattr(settings, "JOIN", "off")
    monkeypatch.setattr(settings, "CACHE", True)
    monkeypatch.setattr(settings, "CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(build, "KERNELS", {})
    monkeypatch.setattr(build.target, "lane_width", lambda: 2)  # (a short compile)
    monkeypatch.setattr(_host, "AUTO_LANES_MIN_OBJECTS", 4)
    monkeypatch.setattr(_host, "AUTO_LANES_COMPILE_OBJECTS", 50)
    built = []
    compile_lanes = _host.LaneKernel.compile
    monkeypatch.setattr(_host.LaneKernel, "compile",
                        lambda self: built.append(self) or compile_lanes(self))
    fun, y0, params, t0, tf = _ensemble("van_der_pol", 9, seed=11)
    kwargs = {"method": "DOP853", "rtol": 1e-9, "atol": 1e-12, "params": params}
    monkeypatch.setattr(settings, "LANES", "auto")
    per_object = solve_ivp(fun, (t0, tf), y0, **kwargs)
    assert built == []  # 9 objects, nothing compiled: the per-object kernel ran
    (spec, lane), = [(s, k) for s, k in build.KERNELS.items() if s.lanes]
    assert spec.lanes == 2 and lane._compiled is None
    threads = numba.get_num_threads() if lane.PARALLEL else 1
    assert [lane.runs_lanes(n) for n in (3, 9, 50 * threads - 1, 50 * threads)] == \
        [False, False, False, True]
    monkeypatch.setattr(settings, "LANES", "on")
    assert lane.runs_lanes(1)
    forced = solve_ivp(fun, (t0, tf), y0, **kwargs)
    assert built == [lane] and lane._compiled is not None
    _assert_same(forced, per_object)
    monkeypatch.setattr(settings, "LANES", "auto")
    assert [lane.runs_lanes(n) for n in (3, 4, 9)] == [False, True, True]  # compiled now
    # a new process: the lane kernel is in the disk cache, so auto runs it on 9 objects
    fresh = spec.build()
    assert fresh._compiled is None and fresh.on_disk() and fresh.runs_lanes(9)
    assert not fresh.runs_lanes(3)
    monkeypatch.setattr(settings, "CACHE_DIR", str(tmp_path / "empty"))
    assert not spec.build().runs_lanes(9)
    monkeypatch.setattr(settings, "CACHE_DIR", str(tmp_path))
    again = solve_ivp(fun, (t0, tf), y0, **kwargs)
    assert len(built) == 2  # the lane kernel ran (compiled once, called twice)
    _assert_same(again, per_object)
    assert (np.asarray(per_object.status) == 0).all()


@hjit
def rising_velocity(t, y, p):
    return y[1] - 0.5


@hjit
def prey_equals_predators(t, y, p):
    return y[0] - y[1]


@hjit
def prey_level(t, y, p):
    return y[0] - 3.0


@hjit
def z_level(t, y, p):
    return y[2] - 25.0


def _event_fields_same(lane, scalar, rows=slice(None)):
    """t_events, y_events and n_events of ``lane`` equal, bit for bit, to ``scalar``'s
    (NaN where not reached, at the same places)."""
    for field in ("t_events", "y_events", "n_events"):
        a, b = getattr(lane, field), getattr(scalar, field)
        a, b = (a, b) if isinstance(b, list) else ([a], [b])
        assert len(a) == len(b), field
        for x, y in zip(a, b):
            x, y = np.asarray(x), np.asarray(y)[rows]
            assert x.shape == y.shape and x.tobytes() == y.tobytes(), field


EVENT_CASES = [  # problem, method, width, explicit output times, events
    ("van_der_pol", "DOP853", 3, True,
     lambda: [Event(crossing, direction=-1), Event(rising_velocity, direction=1),
              Event(crossing, terminal=2)]),
    ("lotka_volterra", "RK45", 2, False,
     lambda: [Event(prey_equals_predators), Event(prey_level, terminal=2, direction=1)]),
    ("lorenz", "RK23", 2, True,
     lambda: [Event(crossing, direction=-1), Event(z_level, terminal=4, direction=1)]),
]


@host_only
@pytest.mark.parametrize("name, method, width, outputs, events", EVENT_CASES)
def test_events_in_lanes_bit_identical(monkeypatch, name, method, width, outputs, events):
    """Events run in the lane kernel (checked in its attempt, located lane by lane), with
    the per-object loop's numbers: states, statuses (TERMINATED at the terminal
    occurrence), counts, event times, states and counts; failing objects (a NaN initial
    state, an overflowing f) keep their own status beside them."""
    n = 11
    fun, y0, params, t0, tf = _ensemble(name, n, seed=len(name) + 1)
    if name != "lorenz":
        tf[4] = -tf[4]  # one object integrates backward: the directions turn
    y0[2, 0] = math.nan
    params[7, 0] = 1e300
    kwargs = {"method": method, "rtol": 1e-9, "atol": 1e-12, "params": params,
              "events": events()}
    if outputs:
        kwargs["t_eval"] = np.stack([np.linspace(0.0, t, 5) for t in tf])
    lane = _solve(monkeypatch, width, fun, (t0, tf), y0, **kwargs)
    (kernel,) = [k for s, k in build.KERNELS.items() if s.lanes == width
                 and s.method == method and len(s.event_functions) == len(kwargs["events"])]
    assert kernel._compiled is not None  # the lane kernel ran, events and all
    scalar = _solve(monkeypatch, 0, fun, (t0, tf), y0, **kwargs)
    _assert_same(lane, scalar)
    _event_fields_same(lane, scalar)
    status = np.asarray(scalar.status)
    assert status[2] == -3 and status[7] < 0
    others = np.delete(status, [2, 7])
    assert ((others == 0) | (others == 1)).all() and (others == 1).any()  # some terminated
    counts = np.asarray(scalar.n_events)
    assert (np.delete(counts, [2, 7], axis=0).sum(axis=0) > 0).all()  # every event occurs
    assert (counts[2] == 0).all()  # no step: no event
    keep = [i for i in range(n) if i not in (2, 7)]
    alone = dict(kwargs, params=params[keep])
    if outputs:
        alone["t_eval"] = kwargs["t_eval"][keep]
    others = _solve(monkeypatch, width, fun, (t0, tf[keep]), y0[keep], **alone)
    _assert_same(others, scalar, rows=keep)
    _event_fields_same(others, scalar, rows=keep)


@host_only
def test_orbit_workload_with_events_bit_identical(monkeypatch):
    """cowell's LEO workload in 2 lanes with its own events: the ascending node (counted)
    and a descent through an altitude that stops the object at its second occurrence;
    the same bits as the per-object loop."""
    from reference import K_EARTH, R_EARTH, coe_to_rv

    from hapsira_cowell import cowell
    from hapsira_cowell.models.events import AltitudeCrossEvent, NodeCrossEvent

    rng = np.random.default_rng(11)
    states = [coe_to_rv(K_EARTH, R_EARTH + rng.uniform(300, 1200), rng.uniform(0.01, 0.05),
                        rng.uniform(0.1, math.pi - 0.1), *rng.uniform(0, 2 * math.pi, 3))
              for _ in range(7)]
    r0 = np.array([s[0] for s in states])
    v0 = np.array([s[1] for s in states])
    r0[3, 0] = math.nan  # a failing object among them
    tofs = np.linspace(0.0, 6 * 3600.0, 4)
    radii = np.linalg.norm(np.array([s[0] for s in states]), axis=1)
    altitude = float(np.median(radii)) - R_EARTH  # crossed downward by the eccentric ones
    results = []
    for width in (2, 0):
        events = [NodeCrossEvent(direction=1),
                  AltitudeCrossEvent(altitude, R_EARTH, terminal=2, direction=-1)]
        monkeypatch.setattr(build, "lanes", lambda *a, width=width, **k: width)
        monkeypatch.setattr(settings, "LANES", width)
        results.append(cowell(K_EARTH, r0, v0, tofs, f=_two_body_j2, rtol=1e-11,
                              events=events))
        monkeypatch.undo()
    lane, scalar = results
    assert [s.lanes for s in build.KERNELS if s.event_functions and s.n == 6].count(2) == 1
    for field in ("rr", "vv", "status", "nfev", "nsteps", "n_events"):
        assert np.asarray(getattr(lane, field)).tobytes() == \
            np.asarray(getattr(scalar, field)).tobytes(), field
    assert len(lane.t_events) == 2
    for a, b in zip(lane.t_events, scalar.t_events):
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes()
    status = np.asarray(scalar.status)
    assert status[3] == -3 and (np.delete(status, 3) >= 0).all() and (status == 1).any()
    counts = np.asarray(scalar.n_events)
    assert counts[:, 0].sum() >= 6 and counts[:, 1].max() == 2


RECORD_CASES = [  # problem, method, width, solve_ivp's options, events
    ("van_der_pol", "DOP853", 3, {"dense_output": True, "t_eval": "steps"},
     lambda: [Event(crossing), Event(crossing, terminal=2, direction=-1)]),
    ("lotka_volterra", "RK45", 2, {"dense_output": True}, lambda: []),
    ("lorenz", "RK23", 2, {"t_eval": "steps"}, lambda: [Event(z_level, terminal=3)]),
]


@host_only
@pytest.mark.parametrize("name, method, width, options, events", RECORD_CASES)
def test_step_records_in_lanes_bit_identical(monkeypatch, name, method, width, options,
                                             events):
    """Step records (``dense_output=True``, ``t_eval="steps"``) run in the lane kernel:
    each moved lane's step recorded after the attempt from the stages it stored, the
    others' by the per-object code, with the per-object loop's numbers: the steps, their
    interpolants, ``sol(t)``, the states per step, nfev (the interpolants' evaluations
    counted), and with events a terminal root as the last breakpoint."""
    n = 11
    fun, y0, params, t0, tf = _ensemble(name, n, seed=len(name) + 2)
    if name != "lorenz":
        tf[4] = -tf[4]
    y0[2, 0] = math.nan
    params[7, 0] = 1e300
    kwargs = dict(options, method=method, rtol=1e-9, atol=1e-12, params=params,
                  events=events())
    lane = _solve(monkeypatch, width, fun, (t0, tf), y0, **kwargs)
    (kernel,) = [k for s, k in build.KERNELS.items() if s.lanes == width and s.records
                 and s.method == method]
    assert kernel._compiled is not None  # the lane kernel ran
    scalar = _solve(monkeypatch, 0, fun, (t0, tf), y0, **kwargs)
    _assert_same(lane, scalar)
    if kwargs["events"]:
        _event_fields_same(lane, scalar)
    status = np.asarray(scalar.status)
    assert status[2] == -3 and status[7] < 0 and (np.asarray(scalar.nsteps)[[0, 1]] > 20).all()
    if options.get("dense_output"):
        a, b = lane.sol._records, scalar.sol._records
        for k, field in ((3, "steps"), (4, "dense"), (5, "info")):
            assert np.asarray(a[k]).tobytes() == np.asarray(b[k]).tobytes(), field
        assert np.isfinite(np.asarray(a[4])[0, :10]).all()  # (recorded, not NaN)
        times = np.linspace(0.0, 3.0, 13)
        assert np.asarray(lane.sol(times)).tobytes() == np.asarray(scalar.sol(times)).tobytes()
    if options.get("t_eval") == "steps":
        assert np.isfinite(np.asarray(scalar.t)[0, :20]).all()


# --- joined lane kernels: the generic lane loop joined to each f (HAPSIRA_JOIN) ---

JOINED_CASES = [  # problem, method, width, solve_ivp's options, events
    ("van_der_pol", "DOP853", 2, {}, lambda: []),
    ("lotka_volterra", "RK45", 2, {"dense_output": True},
     lambda: [Event(prey_equals_predators), Event(prey_level, terminal=2, direction=1)]),
]


def _attempt_packing(asm):
    """(packed multiplications, scalar ones) of the lanes' attempt in ``asm``: the
    function ``lanes.attempt``, or None where LLVM inlined it into the lane loop."""
    import re

    names = set(re.findall(r"^(\S*lanes7attempt\S*):", asm, re.M))
    if not names:
        return None
    (name,) = names
    body = asm[asm.index(f"\n{name}:"):]
    body = body[:body.index(".Lfunc_end")]
    return len(re.findall(r"\bv?mulpd\b", body)), len(re.findall(r"\bv?mulsd\b", body))


@host_only
@pytest.mark.parametrize("name, method, width, options, events", JOINED_CASES)
def test_joined_lanes_equal_lanes_compiled_at_once(monkeypatch, name, method, width, options,
                                                   events):
    """The generic lane loop joined to f (and to each event function) gives the bits of the
    lane kernel compiled at once: states, statuses, counts, events, step records; its
    attempt is the same packed code (the same count of packed multiplications, within 3%,
    and no scalar one where that has none)."""
    import re

    from hapsira_core.targets import _host

    from hapsira_core.targets import _join

    # both compiled here, in memory: their assembly
    monkeypatch.setattr(settings, "CACHE", False)
    monkeypatch.setattr(_join, "_JOINED", {})
    n = 11
    fun, y0, params, t0, tf = _ensemble(name, n, seed=len(name) + 3)
    tf[4] = -tf[4]
    y0[2, 0] = math.nan
    params[7, 0] = 1e300
    kwargs = dict(options, method=method, rtol=1e-9, atol=1e-12, params=params,
                  events=events(), t_eval=np.stack([np.linspace(0.0, t, 5) for t in tf]))
    results, kernels, specs = {}, {}, {}
    for join in ("off", "on"):
        monkeypatch.setattr(settings, "JOIN", join)
        monkeypatch.setattr(build, "KERNELS", {})
        monkeypatch.setattr(build, "lanes", lambda *a, **k: width)
        monkeypatch.setattr(settings, "LANES", width)
        results[join] = solve_ivp(fun, (t0, tf), y0, **kwargs)
        (specs[join], kernels[join]), = [(s, k) for s, k in build.KERNELS.items() if s.lanes]
        assert kernels[join]._compiled is not None  # the lane kernel ran
    assert type(kernels["off"]).__name__ == "LaneKernel"
    assert isinstance(kernels["on"], _join.JoinedLaneKernel)
    once, joined = results["off"], results["on"]
    _assert_same(joined, once)
    if kwargs["events"]:
        _event_fields_same(joined, once)
    if options.get("dense_output"):
        for k in (3, 4, 5):
            assert np.asarray(joined.sol._records[k]).tobytes() == \
                np.asarray(once.sol._records[k]).tobytes()
    status = np.asarray(once.status)
    assert status[2] == -3 and status[7] < 0 and (np.delete(status, [2, 7]) >= 0).all()
    assert np.ptp(np.asarray(once.y)[[0, 1, 3], 1, 0]) > 0.01  # varied objects
    # the attempt that the kernel compiled at once calls: its own compiled code
    spec = specs["off"]
    at_once = _attempt_packing(_attempt_asm(method, spec.n, spec.fun, width,
                                            spec.event_functions, spec.records))
    asm = kernels["on"]._library.get_asm_str()
    joined = _attempt_packing(asm)
    assert at_once[0] > 20
    if joined is None:  # inlined into the lane loop (a narrow attempt): at least its packing
        assert len(re.findall(r"\bv?mulpd\b", asm)) >= 0.97 * at_once[0]
    else:
        packed, scalar = joined
        assert abs(packed - at_once[0]) <= 0.03 * at_once[0] and scalar <= at_once[1], \
            (joined, at_once)


@host_only
def test_a_second_function_reuses_the_generic_lane_loop(monkeypatch):
    """A new f of the same form (method, n, width, events) joins the generic lane loop
    that the first one compiled: nothing of the loop compiled again, the same numbers
    as the first f where both compute the same system."""
    from hapsira_core.targets import _host, _join

    monkeypatch.setattr(settings, "JOIN", "on")
    # (as in a new process with no cache: the first function compiles the loop)
    monkeypatch.setattr(settings, "CACHE", False)
    monkeypatch.setattr(_join, "_GENERIC", {})
    monkeypatch.setattr(_join, "_JOINED", {})
    monkeypatch.setattr(build, "KERNELS", {})
    monkeypatch.setattr(build, "lanes", lambda *a, **k: 2)
    monkeypatch.setattr(settings, "LANES", 2)
    fun, y0, params, t0, tf = _ensemble("van_der_pol", 5, seed=4)
    kwargs = {"method": "DOP853", "rtol": 1e-9, "atol": 1e-12}
    first = solve_ivp(fun, (t0, tf), y0, params=params, **kwargs)

    @hjit
    def doubled(t, y, p):  # 2 (p[0] / 2) == p[0]: the same numbers through a new function
        return (y[1], 2.0 * p[0] * (1.0 - y[0] * y[0]) * y[1] - y[0])

    def refuse(generic_kernel):
        raise AssertionError("the generic lane loop was compiled again")

    (first_kernel,) = [k for s, k in build.KERNELS.items() if s.lanes]
    assert first_kernel._compiled is not None and list(_join._GENERIC) == \
        [first_kernel.generic_key]
    monkeypatch.setattr(_join, "_compile_generic", refuse)
    second = solve_ivp(doubled, (t0, tf), y0, params=params / 2, **kwargs)
    (kernel,) = [k for s, k in build.KERNELS.items() if s.lanes and s.fun is doubled]
    assert isinstance(kernel, _join.JoinedLaneKernel) and kernel._compiled is not None
    _assert_same(second, first)
    assert (np.asarray(first.status) == 0).all() and np.ptp(np.asarray(first.y)[:, -1, 0]) > 0.1


@host_only
def test_joined_lanes_on_chunks_of_objects(monkeypatch):
    """More objects than a chunk of the parallel target (16): each chunk's rows are run
    by the joined entry (`hapsira_core.targets._host.prange_over_chunks`), shared rows
    (one t_eval row) whole; the per-object kernel's bits, chunk borders and all."""
    from hapsira_core.targets import _join

    monkeypatch.setattr(settings, "JOIN", "on")
    fun, y0, params, t0, tf = _ensemble("van_der_pol", 53, seed=9)
    y0[20, 1] = math.nan  # a failure in the second chunk
    kwargs = {"method": "DOP853", "rtol": 1e-9, "atol": 1e-12, "params": params,
              "t_eval": np.linspace(0.0, 4.0, 6)}
    ran = []  # the kernels that ran the lanes (whatever earlier tests built)
    run = _join.JoinedLaneKernel._run
    monkeypatch.setattr(_join.JoinedLaneKernel, "_run", lambda self, compiled, arrays:
                        ran.append(type(self).__name__) or run(self, compiled, arrays))
    lane = _solve(monkeypatch, 2, fun, (t0, tf), y0, **kwargs)
    assert ran == ["JoinedLaneKernel"]
    monkeypatch.setattr(settings, "JOIN", "on")
    scalar = _solve(monkeypatch, 0, fun, (t0, tf), y0, **kwargs)
    _assert_same(lane, scalar)
    status = np.asarray(scalar.status)
    assert status[20] == -3 and (np.delete(status, 20) == 0).all()


@host_only
def test_auto_takes_joined_lanes_once_the_generic_lane_loop_is_ready(monkeypatch, tmp_path):
    """auto with joined lane kernels: the per-object kernel until the generic lane loop of
    the form is compiled (in this process or in the disk cache) or the call pays for its
    compile; then lanes for every call of at least AUTO_LANES_MIN_OBJECTS, a new function
    included (its join is a few seconds). The same bits either way."""
    from hapsira_core.targets import _host, _join

    monkeypatch.setattr(settings, "CACHE", True)
    monkeypatch.setattr(settings, "CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(settings, "JOIN", "on")
    monkeypatch.setattr(build, "KERNELS", {})
    # (as in a new process: no generic loop nor joined kernel compiled yet)
    monkeypatch.setattr(_join, "_GENERIC", {})
    monkeypatch.setattr(_join, "_JOINED", {})
    monkeypatch.setattr(build.target, "lane_width", lambda: 2)
    monkeypatch.setattr(_host, "AUTO_LANES_MIN_OBJECTS", 4)
    monkeypatch.setattr(_host, "AUTO_LANES_COMPILE_OBJECTS", 50)
    fun, y0, params, t0, tf = _ensemble("van_der_pol", 9, seed=12)
    kwargs = {"method": "DOP853", "rtol": 1e-9, "atol": 1e-12, "params": params}
    monkeypatch.setattr(settings, "LANES", "auto")
    per_object = solve_ivp(fun, (t0, tf), y0, **kwargs)
    (spec, lane), = [(s, k) for s, k in build.KERNELS.items() if s.lanes]
    assert isinstance(lane, _join.JoinedLaneKernel) and lane._compiled is None
    threads = numba.get_num_threads() if lane.PARALLEL else 1
    assert [lane.runs_lanes(n) for n in (9, 50 * threads - 1, 50 * threads)] == \
        [False, False, True]
    monkeypatch.setattr(settings, "LANES", "on")  # the first function compiles the loop
    _assert_same(solve_ivp(fun, (t0, tf), y0, **kwargs), per_object)
    assert lane._compiled is not None

    @hjit
    def other(t, y, p):  # a new function of the same form
        return (y[1], p[0] * (1.0 - y[0] * y[0]) * y[1] - y[0])

    monkeypatch.setattr(settings, "LANES", "auto")
    monkeypatch.setattr(_join, "_compile_generic", lambda generic_kernel: (_ for _ in ()).throw(
        AssertionError("the generic lane loop was compiled again")))
    again = solve_ivp(other, (t0, tf), y0, **kwargs)  # 9 objects: lanes, joined here
    (other_spec, new), = [(s, k) for s, k in build.KERNELS.items() if s.lanes and s.fun is other]
    assert new._compiled is not None and [new.runs_lanes(n) for n in (3, 4)] == [False, True]
    _assert_same(again, per_object)
    # a new process: the generic lane loop is in the disk cache (so lanes on 9 objects,
    # for f, whose joined kernel is there too, and for a function defined in the test,
    # which is never cached), or it is not (another cache folder: per object)
    monkeypatch.setattr(_join, "_GENERIC", {})
    assert other_spec.build().recipe is None
    assert spec.build().runs_lanes(9) and other_spec.build().runs_lanes(9)
    monkeypatch.setattr(settings, "CACHE_DIR", str(tmp_path / "empty"))
    assert not spec.build().runs_lanes(9) and not other_spec.build().runs_lanes(9)
    assert (np.asarray(per_object.status) == 0).all()


@host_only
def test_auto_compiles_lanes_in_the_background_for_later_calls(monkeypatch, tmp_path, caplog):
    """auto with ``HAPSIRA_LANES_BACKGROUND``: a call of at least AUTO_LANES_MIN_OBJECTS
    objects whose lane kernel is not ready runs per object, then starts its compile in one
    worker process (told once; a worker that fails is logged and changes nothing); calls
    while it runs run per object and start no other; once it has ended, calls run the lane
    kernel from the disk cache, with the same bits. A kernel a new process cannot import
    is never compiled so."""
    import logging
    import sys

    from hapsira_core.ivp import compile_worker as worker
    from hapsira_core.targets import _host, _join

    monkeypatch.setattr(settings, "CACHE", True)
    monkeypatch.setattr(settings, "CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(settings, "LANES", "auto")
    monkeypatch.setattr(settings, "LANES_BACKGROUND", True)
    monkeypatch.setattr(build, "KERNELS", {})
    # (as in a new process: nothing compiled, no background compile started yet)
    monkeypatch.setattr(_join, "_GENERIC", {})
    monkeypatch.setattr(_join, "_JOINED", {})
    monkeypatch.setattr(worker, "_BACKGROUND_STARTED", set())
    monkeypatch.setattr(worker, "_background", None)
    monkeypatch.setattr(_host, "AUTO_LANES_MIN_OBJECTS", 4)
    started = []
    popen = worker.subprocess.Popen
    monkeypatch.setattr(worker.subprocess, "Popen",
                        lambda command, **kw: started.append(command) or popen(command, **kw))
    caplog.set_level(logging.WARNING, logger="hapsira")
    fun, y0, params, t0, tf = _ensemble("van_der_pol", 9, seed=13)
    kwargs = {"method": "RK23", "rtol": 1e-6, "atol": 1e-9, "params": params}

    def log(words):
        return [r.getMessage() for r in caplog.records if words in r.getMessage()]

    # a worker that fails: logged, the call's result as without it
    real = worker._COMMAND
    monkeypatch.setattr(worker, "_COMMAND", [sys.executable, "-c", "raise SystemExit('boom')"])
    solve_ivp(fun, (t0, tf[:3]), y0[:3], **{**kwargs, "params": params[:3]})
    assert started == []  # 3 objects: too few to start anything
    per_object = solve_ivp(fun, (t0, tf), y0, **kwargs)
    (spec, lane), = [(s, k) for s, k in build.KERNELS.items() if s.lanes]
    assert lane._compiled is None and len(started) == 1
    assert len(log("in the background")) == 1
    worker._background[0].wait(60)
    for _ in range(600):  # (the watching thread logs it)
        if log("failed"):
            break
        time.sleep(0.05)
    assert "boom" in log("failed")[0] and "background worker" in log("failed")[0]
    _assert_same(solve_ivp(fun, (t0, tf), y0, **kwargs), per_object)
    assert len(started) == 1 and lane._compiled is None  # once per kernel and process

    # the real worker, as in a new process
    monkeypatch.setattr(worker, "_COMMAND", real)
    monkeypatch.setattr(worker, "_BACKGROUND_STARTED", set())
    _assert_same(solve_ivp(fun, (t0, tf), y0, **kwargs), per_object)
    assert len(started) == 2 and lane.background.running() and not lane.runs_lanes(9)
    _assert_same(solve_ivp(fun, (t0, tf), y0, **kwargs), per_object)
    assert len(started) == 2 and lane._compiled is None  # while it runs: per object
    assert worker._background[0].wait(600) == 0
    assert lane.runs_lanes(9) and not lane.runs_lanes(3)
    _assert_same(solve_ivp(fun, (t0, tf), y0, **kwargs), per_object)
    assert lane._compiled is not None and len(started) == 2  # loaded from the disk cache
    assert len(log("in the background")) == 2

    # a function defined here (a lambda) cannot be imported by a new process
    made = build.kernel("RK23", 2, hjit(lambda t, y, p: (y[1], -y[0])), ())
    assert made.background is None
