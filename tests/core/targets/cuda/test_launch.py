"""How the cuda target splits a call into launches (the other targets make one call)."""

import numpy as np
import pytest

from hapsira_core import settings
from hapsira_cowell import cowell
from hapsira_core.jit import ObjectKernel, hjit

from reference import K_EARTH, varied_orbits

pytestmark = pytest.mark.skipif(settings.TARGET != "cuda", reason="launches exist on cuda only")


@hjit
def _lotka(t, y, p):
    return (p[0] * y[0] - p[1] * y[0] * y[1], -p[2] * y[1] + p[3] * y[0] * y[1])


@hjit
def _ring(t, y, p, dydt):
    """The array form (any n): a damped ring of coupled coordinates."""
    n = y.shape[0]
    for i in range(n):
        dydt[i] = p[0] * (y[i - 1] - 2.0 * y[i] + y[(i + 1) % n]) - p[1] * y[i]


class _Context:
    def __init__(self, free):
        self.free = free

    def get_memory_info(self):
        return self.free, self.free


def test_chunks_shrink_to_fit_the_free_memory(monkeypatch):
    """Many output times per object: a chunk takes at most a quarter of the free memory."""
    from numba import cuda

    states = list(varied_orbits(9).values())
    r0 = np.array([s[0] for s in states])
    v0 = np.array([s[1] for s in states])
    tofs = np.linspace(60.0, 600.0, 30)  # ten minutes: the simulator interprets each step
    whole = cowell(K_EARTH, r0, v0, tofs)
    # rr and vv alone take 2 * 30 * 3 * 8 bytes per object: with this much
    # free memory a chunk holds at most 3 objects
    monkeypatch.setattr(cuda, "current_context", lambda: _Context(4 * 1440 * 3))
    launches = []
    original = ObjectKernel._copy_back

    def counting(self, arrays, device, stream, start, stop, *rest):
        launches.append((start, stop))
        return original(self, arrays, device, stream, start, stop, *rest)

    monkeypatch.setattr(ObjectKernel, "_copy_back", counting)
    split = cowell(K_EARTH, r0, v0, tofs)
    assert len(r0) > 3
    assert max(stop - start for start, stop in launches) <= 3
    assert sum(stop - start for start, stop in launches) == len(r0)
    np.testing.assert_array_equal(split.status, whole.status)
    np.testing.assert_array_equal(split.rr, whole.rr)
    np.testing.assert_array_equal(split.vv, whole.vv)


def test_kernel_time_counts_overlapping_chunks_once():
    """Chunks on two streams overlap: their kernel time is the union of their intervals."""
    from hapsira_core.targets.cuda.launch import _busy_seconds

    assert _busy_seconds([(0.0, 16.0), (12.5, 30.0), (29.0, 31.0), (40.0, 41.5)]) == 0.0325
    assert _busy_seconds([(3.0, 4.0), (0.0, 10.0)]) == 0.01
    assert _busy_seconds([]) == 0.0


def test_stm_kernels_interleave_their_working_rows_across_objects(monkeypatch):
    """``stm=True``'s variational equations keep their work rows ``(rows, n, N)`` on cuda
    (a warp's loads coalesce; `build.interleaves_work`, HAPSIRA_CUDA_INTERLEAVE=auto):
    object i reads column i of one whole buffer per stream, so chunks of fewer objects
    than the buffer (the last one here: 3, 3, 1) and a single object give the numbers
    of one launch, bit for bit. A user's array-form fun and the implicit methods keep
    per-object rows."""
    from hapsira_core.ivp import build, sensitivities, solve_ivp
    from hapsira_core.targets.cuda import launch

    assert settings.CUDA_INTERLEAVE == "auto"  # the default
    stm_fun = sensitivities.variational(_lotka, _lotka, 2)
    for method, fun, expected in (("DOP853", stm_fun, True), ("RK45", stm_fun, True),
                                  ("RK23", stm_fun, True), ("DOP853", _ring, False),
                                  ("Radau", stm_fun, False), ("BDF", stm_fun, False)):
        assert build.interleaves_work(method, fun) is expected
        work = [a for a in build.arguments(interleave_work=expected) if a.name == "work"][0]
        assert work.interleaved is expected
    kernel = build.kernel("DOP853", 6, stm_fun, ())
    assert "work[:, :, i]" in kernel._source() and "y[i]" in kernel._source()
    assert "work[i]" in build.kernel("DOP853", 40, _ring, ())._source()
    assert launch.interleaved_shape(
        [a for a in kernel.args if a.name == "work"][0], (7, 37, 6)) == (37, 6, 7)
    rng = np.random.default_rng(4)
    y0 = rng.uniform(1.0, 3.0, (7, 2))
    params = rng.uniform(0.5, 1.5, (7, 4))
    kwargs = dict(t_eval=np.linspace(0.0, 2.0, 3), rtol=1e-8, atol=1e-10, params=params,
                  stm=True)
    whole = solve_ivp(_lotka, (0.0, 2.0), y0, **kwargs)
    assert (whole.status == 0).all() and np.isfinite(whole.stm).all()
    monkeypatch.setattr(settings, "CUDA_CHUNK", 3)
    chunked = solve_ivp(_lotka, (0.0, 2.0), y0, **kwargs)
    np.testing.assert_array_equal(chunked.stm, whole.stm)
    np.testing.assert_array_equal(chunked.y, whole.y)
    one = solve_ivp(_lotka, (0.0, 2.0), y0[6], **dict(kwargs, params=params[6]))
    np.testing.assert_array_equal(one.stm, whole.stm[6])


@hjit
def _van_der_pol(t, y, p):
    return (y[1], p[0] * (1.0 - y[0] * y[0]) * y[1] - y[0])


def test_fetching_threads_give_the_numbers_of_one_thread_per_object(monkeypatch):
    """HAPSIRA_CUDA_FETCH: fewer threads than objects, each taking objects from a
    per-chunk counter, give each object's numbers bit for bit. Van der Pol with mu from
    0.1 to 8 (10 to 40 steps under the simulator's tolerances here), one object with a NaN
    mu (status -3, NaN rows), N not a multiple of the block and two chunks, the second
    short. Under the simulator: blocks of 4, one resident block (its occupancy), so every
    thread solves several objects; on a GPU 200003 objects in 128-thread blocks, a quarter
    of the GPU's resident blocks (fetching whatever the kernel's occupancy)."""
    from hapsira_core.ivp import build, solve_ivp
    from hapsira_core.targets.cuda import SIMULATOR, launch

    monkeypatch.setattr(settings, "CUDA_FETCH", False)  # whatever the environment says
    monkeypatch.setattr(build, "KERNELS", {})
    n = 13 if SIMULATOR else 200_003
    if SIMULATOR:
        monkeypatch.setattr(settings, "CUDA_BLOCK", 4)
        monkeypatch.setattr(settings, "CUDA_CHUNK", 8)
    rng = np.random.default_rng(11)
    y0 = rng.uniform(-2.0, 2.0, (n, 2))
    mu = rng.uniform(0.1, 8.0, (n, 1))
    mu[5] = np.nan
    kwargs = dict(t_eval=np.linspace(0.0, 6.0, 4), params=mu, rtol=1e-6, atol=1e-8)
    plain = solve_ivp(_van_der_pol, (0.0, 6.0), y0, **kwargs)
    assert not any(k.fetch for k in build.KERNELS.values())

    monkeypatch.setattr(settings, "CUDA_FETCH", True)
    monkeypatch.setattr(build, "KERNELS", {})  # the kernels built again, fetching
    resident = []
    real = launch.ObjectKernel.resident_blocks

    def fewer(self, kernel, arrays, block):
        resident.append(real(self, kernel, arrays, block))
        return max(1, resident[-1] // (1 if SIMULATOR else 4))

    monkeypatch.setattr(launch.ObjectKernel, "resident_blocks", fewer)
    fetched = solve_ivp(_van_der_pol, (0.0, 6.0), y0, **kwargs)
    (kernel,) = build.KERNELS.values()
    assert kernel.fetch and "cuda.atomic.add(hapsira_taken, 0, 1)" in kernel._source()
    assert len(kernel._signature()) == len(kernel.args) + 1  # and the counter
    assert len(resident) == 1  # occupancy asked once per call
    if SIMULATOR:
        assert resident == [1]
    else:
        assert resident[0] // 4 * 128 < settings.CUDA_CHUNK  # threads took several objects

    assert plain.status[5] == fetched.status[5] == -3
    assert np.isnan(fetched.y[5]).all()
    ok = np.arange(n) != 5
    assert (plain.status[ok] == 0).all()
    assert plain.nsteps[ok].min() < plain.nsteps[ok].max() / 2  # objects of very unequal lengths
    for field in ("y", "t", "status", "nfev", "nsteps"):
        np.testing.assert_array_equal(getattr(fetched, field), getattr(plain, field),
                                      err_msg=field)


def test_prefault_touches_every_chunk_of_every_output_and_lets_each_copy_go():
    """`_Prefault` writes each chunk's rows of the host outputs (read-only and empty
    arrays left alone) and releases each chunk's copy back, in order."""
    from hapsira_core.targets.cuda.launch import _Prefault

    y, info = np.full((10, 1, 6), np.nan), np.full((10, 5), -1, np.int64)
    frozen = np.ones(10)
    frozen.flags.writeable = False
    prefault = _Prefault([y, info, frozen, np.empty((0, 3))], [(0, 4), (4, 8), (8, 10)])
    assert (y != 0).all()  # nothing touched before it starts
    prefault.start()
    for number in range(3):
        prefault.wait(number)
    assert (y == 0).all() and (info == 0).all() and (frozen == 1).all()
    idle = _Prefault([frozen], [(0, 4), (4, 8), (8, 10)])  # nothing to touch: no thread,
    idle.wait(2)  # nothing to wait for, not even a start


def test_a_thread_keeps_its_chunk_buffers_for_its_next_call(monkeypatch):
    """The second call of the same shapes allocates no chunk buffer (`_Pool`), gives the
    same results bit for bit, and a set above `POOL_BYTES` is not kept."""
    from numba import cuda

    from hapsira_core.targets.cuda import launch

    states = list(varied_orbits(5).values())
    r0 = np.array([s[0] for s in states])
    v0 = np.array([s[1] for s in states])
    tofs = np.array([120.0, 300.0])
    first = cowell(K_EARTH, r0, v0, tofs)
    allocated = []
    real = cuda.device_array

    def counting(*args, **kwargs):
        allocated.append(args[0] if args else kwargs.get("shape"))
        return real(*args, **kwargs)

    monkeypatch.setattr(cuda, "device_array", counting)
    again = cowell(K_EARTH, r0, v0, tofs)
    chunk_rows = [shape for shape in allocated
                  if isinstance(shape, tuple) and shape and shape[0] == len(r0)]
    assert chunk_rows == []  # all from the pool
    for name in ("rr", "vv", "status", "nsteps"):
        np.testing.assert_array_equal(getattr(again, name), getattr(first, name))
    monkeypatch.setattr(launch, "POOL_BYTES", 0)
    cowell(K_EARTH, r0, v0, tofs)  # keeps nothing
    allocated.clear()
    cowell(K_EARTH, r0, v0, tofs)
    assert any(isinstance(shape, tuple) and shape and shape[0] == len(r0)
               for shape in allocated)


def test_calls_with_and_without_touching_the_outputs_first_agree(monkeypatch):
    """`_Prefault` in a launch of several chunks (forced on for these few objects, whose
    outputs are below `PREFAULT_MIN_BYTES`) changes no result."""
    from hapsira_core.targets.cuda import launch

    states = list(varied_orbits(7).values())
    r0 = np.array([s[0] for s in states])
    v0 = np.array([s[1] for s in states])
    tofs = np.array([60.0, 240.0])
    monkeypatch.setattr(settings, "CUDA_CHUNK", 3)  # three chunks on two streams
    monkeypatch.setattr(launch, "PREFAULT", False)
    plain = cowell(K_EARTH, r0, v0, tofs)
    monkeypatch.setattr(launch, "PREFAULT", True)
    monkeypatch.setattr(launch, "PREFAULT_MIN_BYTES", 0)
    started = []
    real = launch._Prefault.__init__

    def counting(self, *args):
        started.append(args[1:])
        real(self, *args)

    monkeypatch.setattr(launch._Prefault, "__init__", counting)
    touched = cowell(K_EARTH, r0, v0, tofs)
    assert started == [([(0, 3), (3, 6)],)]  # (six orbits)
    for name in ("rr", "vv", "status", "nsteps", "nfev"):
        np.testing.assert_array_equal(getattr(touched, name), getattr(plain, name))


def test_packed_inputs_change_no_result(monkeypatch):
    """Shared inputs and fetch counters sent to the GPU in one buffer (`_Packed`) give the
    results of inputs sent one by one, bit for bit, in launches of several chunks."""
    from hapsira_core.targets.cuda import launch

    states = (list(varied_orbits(11).values()) + list(varied_orbits(12).values()))[:11]
    r0 = np.array([s[0] for s in states])
    v0 = np.array([s[1] for s in states])
    tofs = np.array([60.0, 240.0])
    monkeypatch.setattr(settings, "CUDA_CHUNK", 4)
    monkeypatch.setattr(launch, "PACKED_MAX_BYTES", 0)
    packed = []
    real = launch._Packed.__init__

    def counting(self, arrays, stream):
        packed.append(sorted(map(str, arrays)))
        real(self, arrays, stream)

    monkeypatch.setattr(launch._Packed, "__init__", counting)
    plain = cowell(K_EARTH, r0, v0, tofs)
    assert packed[-1] in ([], [launch.FETCH_COUNTER])  # nothing shared was packed
    monkeypatch.setattr(launch, "PACKED_MAX_BYTES", 1 << 16)
    together = cowell(K_EARTH, r0, v0, tofs)
    assert len(packed[-1]) >= 3  # the tolerances, the output times, the parameters
    for name in ("rr", "vv", "status", "nsteps", "nfev", "t_events"):
        np.testing.assert_array_equal(getattr(together, name), getattr(plain, name),
                                      err_msg=name)


def test_a_call_signals_its_first_kernel():
    """`kernels_started`: a call inside the block runs its callbacks once the first
    kernel is queued (what `cowell`'s units check waits for), a callback added later
    runs at once, and the block's end runs them where no kernel came."""
    from hapsira_core.ivp import solve_ivp
    from hapsira_core.targets.cuda import launch

    rng = np.random.default_rng(8)
    y0, params = rng.uniform(1.0, 3.0, (5, 2)), rng.uniform(0.5, 1.5, (5, 4))
    ran, seen = [], []
    original = ObjectKernel._copy_back

    def copies(self, arrays, device, stream, start, stop, number, *rest):
        seen.append(list(ran))  # (each copy back comes after its kernel is queued)
        return original(self, arrays, device, stream, start, stop, number, *rest)

    with launch.kernels_started() as started:
        started.then(lambda: ran.append("first"))
        assert ran == []
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(ObjectKernel, "_copy_back", copies)
            solve_ivp(_lotka, (0.0, 0.5), y0, params=params)
        assert seen and all(s == ["first"] for s in seen)
        started.then(lambda: ran.append("late"))
        assert ran == ["first", "late"]
    with launch.kernels_started() as idle:
        idle.then(lambda: ran.append("end"))
    assert ran == ["first", "late", "end"]


def test_blocks_of_columns_are_joined_on_the_device():
    """`device_join` (cowell's positions and velocities, with the STM's identity a third
    block): the blocks side by side, into a new array or the one given."""
    from numba import cuda

    from hapsira_core.targets.cuda.launch import device_join

    rng = np.random.default_rng(21)
    blocks = [rng.standard_normal((9, 3)), rng.standard_normal((9, 3)),
              rng.standard_normal((9, 5))]
    for count in (1, 2, 3):
        on_device = [cuda.to_device(b) for b in blocks[:count]]
        np.testing.assert_array_equal(device_join(on_device).copy_to_host(),
                                      np.hstack(blocks[:count]))
    out = cuda.to_device(np.full((9, 6), np.nan))
    device_join([cuda.to_device(b) for b in blocks[:2]], out=out)
    np.testing.assert_array_equal(out.copy_to_host(), np.hstack(blocks[:2]))
