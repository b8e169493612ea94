"""A generic solve loop joined to each user function in LLVM (`hapsira_core.targets._join`,
``HAPSIRA_JOIN``): the same numbers as the kernel compiled at once (explicit and implicit
methods, a Jacobian derived or given), the loop compiled once per form, a warm process
loading the joined kernel, an edit never served stale.

The host targets (cpu, parallel) join and share their joined kernels; cuda compiles every
kernel at once, which the last test checks.
"""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from hapsira_core import settings
from hapsira_core.ivp import Event, build, dense, solve_ivp
from hapsira_core.jit import hjit
from hapsira_core.kernels.errors import CallbackCompileError
from hapsira_core.targets import active as target

JOINS = hasattr(target, "JoinedKernel")
needs_join = pytest.mark.skipif(not JOINS, reason="only the host targets join kernels "
                                "(test_the_host_targets_join checks the others)")


@hjit
def lorenz(t, y, p):
    return (p[0] * (y[1] - y[0]), y[0] * (p[1] - y[2]) - y[1], y[0] * y[1] - p[2] * y[2])


@hjit
def crossing(t, y, p):
    return y[0] - 5.0


@hjit
def pendulum_rows(t, y, p, dydt):
    dydt[0] = y[1]
    dydt[1] = -p[0] * np.sin(y[0])


@hjit
def decay_two(t, y, p):
    return (-y[0], 1.0)  # two components for a one-component state


def _run(join, monkeypatch, call):
    """``call()`` with ``HAPSIRA_JOIN`` as given, its kernels built anew."""
    monkeypatch.setattr(settings, "JOIN", join)
    monkeypatch.setattr(build, "KERNELS", {})
    result = call()
    kinds = {type(k).__name__ for k in build.KERNELS.values()}
    return result, kinds


def _lorenz_call():
    rng = np.random.default_rng(3)
    y0 = rng.uniform(-15, 15, (40, 3))
    y0[7] = np.nan  # a failing object
    params = np.column_stack([rng.uniform(9, 11, 40), rng.uniform(20, 30, 40),
                              np.full(40, 8 / 3)])
    return solve_ivp(lorenz, (0.0, 4.0), y0, method="DOP853", t_eval=np.linspace(0, 4, 17),
                     rtol=1e-9, atol=1e-9, params=params,
                     events=[Event(crossing, direction=1)])


def _pendulum_call():
    rng = np.random.default_rng(5)
    y0 = np.column_stack([rng.uniform(-2, 2, 25), rng.uniform(-1, 1, 25)])
    return solve_ivp(pendulum_rows, (0.0, 10.0), y0, method="RK45", rtol=1e-8, atol=1e-10,
                     params=rng.uniform(0.5, 2.0, (25, 1)), dense_output=True)


@needs_join
@pytest.mark.parametrize("call", [_lorenz_call, _pendulum_call], ids=["tuple-events", "array-dense"])
def test_joined_kernels_give_the_numbers_of_kernels_compiled_at_once(monkeypatch, call):
    classic, classic_kinds = _run("off", monkeypatch, call)
    joined, joined_kinds = _run("on", monkeypatch, call)
    assert "JoinedKernel" in joined_kinds and "JoinedKernel" not in classic_kinds
    for field in ("y", "status", "nfev", "nsteps", "n_events"):
        a, b = getattr(classic, field), getattr(joined, field)
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), field
    for a, b in zip(classic.t_events, joined.t_events):
        assert a.tobytes() == b.tobytes()
    assert (classic.status < 0).sum() == (call is _lorenz_call)  # the NaN object alone
    assert (classic.status >= 0).sum() >= 24
    if call is _pendulum_call:
        times = np.linspace(0.3, 9.7, 11)
        assert np.array_equal(classic.sol(times), joined.sol(times))
        assert np.ptp(joined.y[:, 0, -1]) > 0.5  # varied objects, not one answer


@needs_join
def test_a_new_function_of_the_same_form_reuses_the_compiled_loop(monkeypatch):
    from hapsira_core.targets import _join

    monkeypatch.setattr(settings, "JOIN", "on")
    y0 = np.array([[1.0, 2.0, 3.0], [0.5, -1.0, 4.0]])
    first = solve_ivp(lorenz, (0.0, 1.0), y0, method="RK23", params=[10.0, 28.0, 8 / 3])

    def refuse(generic_kernel):
        raise AssertionError("the generic loop was compiled again")
    monkeypatch.setattr(_join, "_compile_generic", refuse)

    @hjit
    def scaled(t, y, p):
        return (2.0 * p[0] * (y[1] - y[0]), y[0] * (p[1] - y[2]) - y[1],
                y[0] * y[1] - p[2] * y[2])

    second = solve_ivp(scaled, (0.0, 1.0), y0, method="RK23", params=[5.0, 28.0, 8 / 3])
    # 2 * 5 == 10: the same system, the same numbers, through a function of its own
    assert second.y.tobytes() == first.y.tobytes()
    assert np.all(first.status == 0) and np.ptp(first.y[:, 0, -1]) > 0.1


@needs_join
def test_a_function_returning_another_length_is_named(monkeypatch):
    monkeypatch.setattr(settings, "JOIN", "on")
    monkeypatch.setattr(settings, "DEBUG", False)
    with pytest.raises(CallbackCompileError, match="decay_two"):
        solve_ivp(decay_two, (0.0, 1.0), np.array([[1.0]]), method="RK45")


@needs_join
def test_the_generic_loop_is_left_to_the_join(monkeypatch):
    """What calls a stub in a per-object generic loop is neither optimised nor made
    machine code (the join optimises it once, the user's functions inlined); the kernel
    joined to it gives the numbers of the kernel compiled at once."""
    from numba.core import codegen

    from hapsira_core.targets import _join

    assert target.JoinedKernel.LOOP is _join.ObjectLoop
    monkeypatch.setattr(build, "KERNELS", {})
    monkeypatch.setattr(_join, "_GENERIC", {})
    monkeypatch.setattr(_join, "_read_generic", lambda name: None)  # compiled here
    read = _join._read
    monkeypatch.setattr(_join, "_read", lambda name: None if "_joined_" in name else read(name))
    made = []
    specific = codegen.JITCodeLibrary._finalize_specific
    monkeypatch.setattr(codegen.JITCodeLibrary, "_finalize_specific",
                        lambda self: made.append(self) or specific(self))
    compiled = []
    compile_generic = _join._compile_generic
    monkeypatch.setattr(_join, "_compile_generic",
                        lambda kernel: compiled.append(kernel) or compile_generic(kernel))

    def call():
        y0 = np.array([[1.0, 2.0, 3.0], [0.5, -1.0, 4.0]])
        return solve_ivp(lorenz, (0.0, 1.0), y0, method="RK45", params=[10.0, 28.0, 8 / 3],
                         rtol=1e-9, atol=1e-9)

    joined, _ = _run("on", monkeypatch, call)
    assert [type(k) for k in compiled] == [_join.ObjectLoop]

    def calls_stub(library):
        return any(f.is_declaration and f.name.startswith(_join.PREFIX)
                   for f in library._final_module.functions)

    assert made and not [library for library in made if calls_stub(library)]
    classic, _ = _run("off", monkeypatch, call)
    assert joined.y.tobytes() == classic.y.tobytes()


@hjit
def robertson(t, y, p):  # Robertson's kinetics, the rate constants per object in p
    return (-p[0] * y[0] + p[1] * y[1] * y[2],
            p[0] * y[0] - p[1] * y[1] * y[2] - p[2] * y[1] * y[1],
            p[2] * y[1] * y[1])


@hjit
def robertson_halved(t, y, p):  # robertson with p[0] halved: the same numbers at 2 p[0]
    return (-2.0 * p[0] * y[0] + p[1] * y[1] * y[2],
            2.0 * p[0] * y[0] - p[1] * y[1] * y[2] - p[2] * y[1] * y[1],
            p[2] * y[1] * y[1])


@hjit
def robertson_jac(t, y, p):  # row-major d f_i / d y_j
    return (-p[0], p[1] * y[2], p[1] * y[1],
            p[0], -p[1] * y[2] - 2.0 * p[2] * y[1], -p[1] * y[1],
            0.0, 2.0 * p[2] * y[1], 0.0)


@hjit
def robertson_jac_rows(t, y, p, J):
    for i in range(3):
        for j in range(3):
            J[i, j] = 0.0
    J[0, 0] = -p[0]
    J[0, 1] = p[1] * y[2]
    J[0, 2] = p[1] * y[1]
    J[1, 0] = p[0]
    J[1, 1] = -p[1] * y[2] - 2.0 * p[2] * y[1]
    J[1, 2] = -p[1] * y[1]
    J[2, 1] = 2.0 * p[2] * y[1]


@hjit
def quarter_gone(t, y, p):
    return y[0] - 0.75


RATES = np.array([[0.04, 1e4, 3e7], [0.08, 1e4, 3e7], [0.04, 3e4, 1e7], [0.02, 1e4, 6e7]])
#: scipy's constant jac= matrix path: Robertson's Jacobian near its quasi-steady state
#: y = (0.9, 3e-5, 0.1), the simplified Newton iterations' matrix for the whole run
ROBERTSON_MATRIX = np.array([[-0.04, 1e3, 0.3], [0.04, -2.8e3, -0.3], [0.0, 1.8e3, 0.0]])


def _robertson_call(method, jac=None, fun=robertson, rates=RATES, steps=False, events=False):
    """``steps``: every step (``t_eval="steps"``, scipy's None) and ``dense_output``."""
    y0 = np.array([[1.0, 0.0, 0.0], [0.9, 0.1, 0.0], [1.0, 0.0, 0.0], [0.8, 0.0, 0.2]])
    return solve_ivp(fun, (0.0, 40.0), y0, method=method, params=rates, jac=jac,
                     t_eval="steps" if steps else np.linspace(0.0, 40.0, 9), dense_output=steps,
                     rtol=1e-6, atol=1e-10,
                     events=[Event(quarter_gone, direction=-1)] if events else None)


STIFF = {  # method, jac=, steps (t_eval="steps", dense_output=True), events
    "Radau-derived-events": ("Radau", None, False, True),
    "BDF-derived-steps": ("BDF", None, True, False),
    "Rodas5P-derived": ("Rodas5P", None, False, False),
    "Radau-jac": ("Radau", robertson_jac, False, False),
    "BDF-jac-matrix": ("BDF", ROBERTSON_MATRIX, False, False),
    "Rodas5P-jac-rows": ("Rodas5P", robertson_jac_rows, False, False),
}


@needs_join
@pytest.mark.parametrize("case", list(STIFF))
def test_joined_implicit_kernels_give_the_numbers_of_kernels_compiled_at_once(monkeypatch,
                                                                                 case):
    method, jac, steps, events = STIFF[case]

    def call():
        return _robertson_call(method, jac, steps=steps, events=events)
    joined, joined_kinds = _run("on", monkeypatch, call)
    times = np.linspace(0.0, 40.0, 13)
    if steps:  # the dense output's kernel, compiled after the joined one calls BDF's
        # interpolant as the joined kernel does, each its own (`_join.join`: private)
        monkeypatch.setattr(dense, "KERNELS", {})
        joined_sol = joined.sol(times)
    classic, classic_kinds = _run("off", monkeypatch, call)
    assert joined_kinds == {"JoinedKernel"} and "JoinedKernel" not in classic_kinds
    for field in ("t", "y", "status", "nfev", "nsteps", "njev", "nlu", "n_events"):
        a, b = getattr(classic, field), getattr(joined, field)
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), field
    for a, b in zip(classic.t_events, joined.t_events):
        assert a.tobytes() == b.tobytes()
    if steps:
        assert classic.sol(times).tobytes() == joined_sol.tobytes()
        assert np.all(np.isfinite(joined_sol)) and np.ptp(joined_sol[:, 0, -1]) > 0.01
    # stiff runs that worked, each object its own: real numbers to compare
    assert np.all(joined.status == 0) and np.all(joined.njev > 0 if jac is not ROBERTSON_MATRIX
                                                  else joined.njev == 0)
    assert np.all(joined.nlu > 0) and len(set(joined.nsteps.tolist())) > 1
    # y: (N, n, M); with steps, each object's last state after its own steps
    final = joined.y[:, :, -1] if not steps else joined.y[np.arange(4), :, joined.nsteps]
    np.testing.assert_allclose(final.sum(axis=1), [1.0] * 4, rtol=1e-6)  # mass conserved
    assert np.all(final[:, 2] > 0.01)  # a product formed, the stiff part at work
    if events:  # (N, C): one crossing each where a quarter of y0 is gone by t = 40
        crossings = joined.t_events[0][~np.isnan(joined.t_events[0])]
        assert len(crossings) >= 2 and np.all((crossings > 0.0) & (crossings < 40.0))


@needs_join
@pytest.mark.parametrize("method", ["Radau", "BDF", "Rodas5P"])
def test_a_new_stiff_function_compiles_alone_with_its_jacobian(monkeypatch, method):
    from hapsira_core.targets import _join

    monkeypatch.setattr(settings, "JOIN", "on")
    monkeypatch.setattr(build, "KERNELS", {})
    first = _robertson_call(method)

    def refuse(generic_kernel):
        raise AssertionError("the generic loop was compiled again")
    monkeypatch.setattr(_join, "_compile_generic", refuse)
    # the new function joined here, never loaded from an earlier run's joined entry
    read = _join._read
    monkeypatch.setattr(_join, "_read", lambda name: None if "_joined_" in name else read(name))
    joined = []
    original = _join.join
    monkeypatch.setattr(_join, "join", lambda code, functions, *rest: joined.append(
        functions) or original(code, functions, *rest))
    halved = RATES * [0.5, 1.0, 1.0]
    second = _robertson_call(method, fun=robertson_halved, rates=halved)
    # the new function and the Jacobian derived from it, joined to the loop compiled once
    (functions,) = joined
    assert functions["fun"] is robertson_halved
    assert [type(k).__name__ for k in build.KERNELS.values()] == ["JoinedKernel"] * 2
    assert set(functions) == {"fun", "jac_t" if method == "Rodas5P" else "jac"}
    # 2 * (p[0] / 2) == p[0]: the same system, the same numbers, through the new function
    for field in ("y", "nfev", "njev", "nlu", "status"):
        assert getattr(second, field).tobytes() == getattr(first, field).tobytes(), field
    assert np.all(first.status == 0) and np.ptp(first.y[:, 0, -1]) > 0.01


SCRIPT = textwrap.dedent("""
    import json
    import numpy as np
    from hapsira_core.ivp import solve_ivp
    from hapsira_core.targets import _join
    from user_rhs import oscillator

    joins = []
    original = _join.join
    _join.join = lambda *a, **k: joins.append(1) or original(*a, **k)
    y0 = np.array([[1.0, 0.0], [0.5, 0.3], [2.0, -1.0]])
    res = solve_ivp(oscillator, (0.0, 5.0), y0, method="RK23", rtol=1e-10, atol=1e-12,
                    params=[[1.0], [2.0], [0.5]])
    print(json.dumps({"y": res.y[:, :, -1].tolist(), "joined_here": len(joins)}))
""")

MODULE = textwrap.dedent("""
    from hapsira_core.jit import hjit
    import user_constants

    @hjit
    def oscillator(t, y, p):
        return (y[1], -p[0] * y[0] - user_constants.DAMPING * y[1])
""")


def _expected(damping):
    from scipy.integrate import solve_ivp as scipy_solve_ivp
    return np.array([scipy_solve_ivp(lambda t, y: [y[1], -k * y[0] - damping * y[1]], (0.0, 5.0),
                                     y0, method="RK23", rtol=1e-10, atol=1e-12).y[:, -1]
                     for y0, k in (([1.0, 0.0], 1.0), ([0.5, 0.3], 2.0), ([2.0, -1.0], 0.5))])


@needs_join
def test_warm_processes_load_the_joined_kernel_and_an_edit_is_never_stale(tmp_path):
    (tmp_path / "user_rhs.py").write_text(MODULE)
    (tmp_path / "run.py").write_text(SCRIPT)
    env = dict(os.environ, HAPSIRA_JOIN="1", HAPSIRA_CACHE="1",
               HAPSIRA_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=os.pathsep.join([str(tmp_path)] + sys.path))

    def run(damping, target=settings.TARGET):
        (tmp_path / "user_constants.py").write_text(f"DAMPING = {damping!r}\n")
        done = subprocess.run([sys.executable, str(tmp_path / "run.py")], cwd=tmp_path,
                              env=dict(env, HAPSIRA_TARGET=target), capture_output=True,
                              text=True, timeout=900)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    cold, warm = run(0.1), run(0.1)
    assert cold["joined_here"] == 1 and warm["joined_here"] == 0
    assert cold["y"] == warm["y"]
    # the other host target loads the same joined kernel (one loop, one CPU): same bits
    other = run(0.1, "parallel" if settings.TARGET == "cpu" else "cpu")
    assert other["joined_here"] == 0 and other["y"] == cold["y"]
    np.testing.assert_allclose(cold["y"], _expected(0.1), rtol=1e-7, atol=1e-9)
    edited = run(0.4)  # a constant the function reads from another module
    assert edited["joined_here"] == 1
    np.testing.assert_allclose(edited["y"], _expected(0.4), rtol=1e-7, atol=1e-9)
    # a damaged entry is rebuilt, with the right numbers
    for name in os.listdir(tmp_path / "cache"):
        if name.startswith("hapsira_kernel_joined_") and name.endswith(".bin"):
            (tmp_path / "cache" / name).write_bytes(b"not an object")
    damaged = run(0.4)
    assert damaged["joined_here"] == 1 and damaged["y"] == edited["y"]


def test_the_host_targets_join():
    assert JOINS == (settings.TARGET in ("cpu", "parallel"))
    spec = build.KernelSpec("DOP853", 3, lorenz)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(settings, "JOIN", "on")
        # the kernels other targets run are compiled at once, whatever the setting
        assert spec.joins() == JOINS
        assert build.KernelSpec("Radau", 3, lorenz).joins() == JOINS
        assert build.KernelSpec("DOP853", 3, lorenz, lanes=4).joins() == JOINS  # lanes too
