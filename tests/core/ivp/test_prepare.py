"""Kernels of one call compiled side by side in worker processes (`hapsira_core.ivp.prepare`).

Each compiling run is a new Python process with its own cache folder. The kernels are
the smallest there are (one line each), so that a worker's compile costs seconds; the
screen's own kernels are checked in tests/cowell/propagation/test_conjunctions.py.
"""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from hapsira_core import settings
from hapsira_core.ivp import Event
from hapsira_core.jit import Arg, ObjectKernel, hjit
from hapsira_core.ivp import prepare

SIMULATED = settings.TARGET == "cuda" and settings.cuda_simulator_enabled()

KERNELS = textwrap.dedent("""
    import numpy as np
    from hapsira_core.jit import Arg, ObjectKernel, hjit

    ARGS = [Arg("x", np.float64, ("one",)), Arg("out", np.float64, ("one",), output=True)]

    @hjit
    def double(x, out):
        out[0] = 2.0 * x[0] + {offset}

    @hjit
    def square(x, out):
        out[0] = x[0] * x[0] + {offset}

    @hjit
    def broken(x, out):
        out[0] = x[0] + "a string"

    DOUBLE = ObjectKernel(double, ARGS)
    SQUARE = ObjectKernel(square, ARGS)
    BROKEN = ObjectKernel(broken, ARGS)
""")

SCRIPT = textwrap.dedent("""
    import logging, sys
    sys.setswitchinterval(5e-5)  # for the CUDA simulator's threads (tests/conftest.py)
    import numpy as np
    from hapsira_core.ivp import prepare
    import user_kernels

    logging.basicConfig(stream=sys.stderr)
    names = sys.argv[1].split(",")
    if sys.argv[2] == "prepare":
        print("workers compiled", prepare.prepare(
            [prepare.named("user_kernels", name) for name in names]))
    print("on disk", [getattr(user_kernels, name).on_disk() for name in names])
    for name in names:
        out = np.zeros((3, 1))
        try:
            getattr(user_kernels, name)(np.array([[1.0], [2.0], [3.0]]), out)
            print(name, out[:, 0].tolist())
        except Exception as error:
            print(name, "raised", type(error).__name__, str(error).splitlines()[0])
""")


@pytest.fixture
def project(tmp_path):
    (tmp_path / "user_kernels.py").write_text(KERNELS.format(offset=0.25))

    def run(names, mode="prepare", cache="1", folder="cache"):
        env = dict(os.environ, HAPSIRA_CACHE=cache, HAPSIRA_CACHE_DIR=str(tmp_path / folder),
                   PYTHONPATH=str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        done = subprocess.run([sys.executable, "-c", SCRIPT, ",".join(names), mode], env=env,
                              cwd=tmp_path, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip().splitlines(), done.stderr

    return run


@pytest.mark.skipif(SIMULATED, reason="the CUDA simulator compiles nothing: no workers")
def test_workers_fill_the_cache_that_this_and_the_next_process_load(project):
    lines, stderr = project(["DOUBLE", "SQUARE"])
    assert lines[0] == "workers compiled 2"
    assert lines[1] == "on disk [True, True]"  # loaded here from what the workers wrote
    assert lines[2:] == ["DOUBLE [2.25, 4.25, 6.25]", "SQUARE [1.25, 4.25, 9.25]"]
    assert "compiling 2 kernels side by side on 2 cores" in stderr or prepare.workers() != 2
    # the next process finds them on disk: no worker, the same numbers
    again, _ = project(["DOUBLE", "SQUARE"])
    assert again == ["workers compiled 0", "on disk [True, True]"] + lines[2:]
    # compiled in one process without workers: the same numbers
    alone, _ = project(["DOUBLE", "SQUARE"], mode="in-process", folder="other")
    assert alone[1:] == lines[2:]


@pytest.mark.skipif(SIMULATED, reason="the CUDA simulator compiles nothing: no workers")
def test_a_worker_failure_is_the_error_of_the_in_process_compile(project):
    lines, stderr = project(["DOUBLE", "BROKEN"])
    assert lines[:3] == ["workers compiled 1", "on disk [True, False]",
                         "DOUBLE [2.25, 4.25, 6.25]"]
    assert lines[3].startswith("BROKEN raised TypingError")
    assert "in a worker process failed" in stderr  # logged, not hidden
    alone, _ = project(["DOUBLE", "BROKEN"], mode="in-process", folder="other")
    assert alone[1:] == lines[2:]  # the same error, in the same words
    plain, _ = project(["BROKEN"], mode="in-process", cache="0", folder="none")
    assert plain[1] == lines[3]


@hjit
def _double(x, out):
    out[0] = 2.0 * x[0]


_ARGS = [Arg("x", np.float64, ("one",)), Arg("out", np.float64, ("one",), output=True)]
FIRST = ObjectKernel(_double, _ARGS)
SECOND = ObjectKernel(_double, _ARGS[:1] + [Arg("y", np.float64, ("one",), output=True)])


@pytest.fixture
def no_workers(monkeypatch):
    """Fail the test if a worker process starts."""
    def refuse(*args, **kwargs):
        raise AssertionError("a worker process started")
    monkeypatch.setattr(prepare.subprocess, "run", refuse)
    monkeypatch.setattr(prepare, "workers", lambda: 2)


@pytest.mark.parametrize("case", ["cache off", "one core", "one kernel", "not importable"])
def test_what_stays_in_this_process(case, no_workers, monkeypatch, tmp_path):
    monkeypatch.setattr(settings, "CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(settings, "CACHE", True)
    needs = [prepare.named(__name__, "FIRST"), prepare.named(__name__, "SECOND")]
    assert all(need.source is not None for need in needs)
    if case == "cache off":
        monkeypatch.setattr(settings, "CACHE", False)
    elif case == "one core":
        monkeypatch.setattr(prepare, "workers", lambda: 1)
    elif case == "one kernel":
        needs = needs[:1]
    else:  # a lambda or a closure: nothing for a new process to import
        needs = [prepare.Need(FIRST), prepare.Need(SECOND)]
    assert prepare.prepare(needs) == 0


def test_a_solver_kernel_is_rebuilt_by_import_and_a_lambda_is_not():
    need = prepare.solver(_rhs, 2, "RK23", events=[Event(_g)], event_states=True, objects=4)
    namespace = {}
    exec(need.source, namespace)
    assert namespace["kernel"] is need.kernel  # the worker's source makes the same kernel
    # (4 objects: under HAPSIRA_LANES=auto a lane kernel runs its per-object kernel)
    assert need.runs().description == "the RK23 solver for 2-component states"
    assert prepare.solver(hjit(lambda t, y, p: (y[1], -y[0])), 2, "RK23").source is None


@hjit
def _rhs(t, y, p):
    return (y[1], -y[0])


@hjit
def _g(t, y, p):
    return y[0]


def test_every_kernel_a_call_may_run_and_chains_that_share_a_loop():
    """`every`: under ``HAPSIRA_LANES=auto`` on a host target a solver's lane kernel and
    its per-object twin, each rebuilt by its source in a new process; `_chains`: kernels
    that share a generic loop not compiled yet are one worker's (no loop compiled twice)."""
    from hapsira_core.targets import active

    first = prepare.solver(_rhs, 2, "RK23")
    found = prepare.every(first)
    lanes = hasattr(first.kernel, "scalar") and settings.LANES == "auto"
    assert [need.kernel for need in found] == (
        [first.kernel, first.kernel.scalar] if lanes else [first.kernel])
    for need in found:
        namespace = {}
        exec(need.source, namespace)
        assert namespace["kernel"] is need.kernel and need.objects is None
        assert need.runs() is need.kernel  # the kernel itself, whatever auto would run
    if not hasattr(active, "JoinedKernel") or settings.JOIN != "on":
        return
    other = prepare.every(prepare.solver(_other, 2, "RK23"))
    named = prepare.named(__name__, "FIRST")
    chains = prepare._chains(found + other + [named])
    # (their loops are in no cache: the test run's folder holds no RK23 loop for n = 2
    # whose form is this one, or the kernels' own generic_ready says so)
    from hapsira_core.targets import _join
    fresh = [need for need in found if not _join.generic_ready(need.kernel.generic_key)]
    expected = sorted([2] * len(fresh) + [1] * (2 * (len(found) - len(fresh)) + 1))
    assert sorted(len(chain) for chain in chains) == expected
    for chain in chains:  # one loop per chain
        assert len({getattr(need.kernel, "generic_key", id(need)) for need in chain}) == 1


@hjit
def _other(t, y, p):
    return (-y[1], y[0])
