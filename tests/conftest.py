"""The whole suite runs on the target chosen by HAPSIRA_TARGET (ci/test-matrix runs each)."""

import os

import pytest

from hapsira_core import settings


#: On ``parallel`` and under the CUDA simulator, a test parametrized by ``method`` runs
#: for these methods only (or, where it has none of them, for its first). ``parallel``
#: runs cpu's compiled per-object body in a prange over objects, and the simulator runs
#: the cuda target's kernels as Python (it proves the target layer's indexing, launches
#: and memory, never the GPU's arithmetic); the cpu stage checks every method against
#: scipy, and a real GPU (ci/gpu/run.sh) runs every method. Each method is kernels to
#: compile on parallel and interpreted steps under the simulator, and CI must finish
#: within its limit (README, ci/test-matrix). One explicit and one implicit method keep
#: both kinds of kernel layout (an implicit one has Jacobian work arrays).
REDUCED_METHODS = ("DOP853", "Radau")
#: Tests that run on cpu (and a real GPU) but not in the reduced stages, with why: the
#: docs' examples are checked as documentation; every feature they show has its own
#: tests on each target.
NOT_IN_REDUCED_STAGES = ("tests/docs/test_examples.py::test_page_examples_run",)


def reduced_stage():
    """True on ``parallel`` and on cuda under the simulator (see REDUCED_METHODS)."""
    return settings.TARGET == "parallel" or (
        settings.TARGET == "cuda" and settings.cuda_simulator_enabled())


def pytest_collection_modifyitems(config, items):
    if not reduced_stage():
        return
    methods_of = {}
    for item in items:
        callspec = getattr(item, "callspec", None)
        method = callspec.params.get("method") if callspec else None
        if method is not None:
            methods_of.setdefault(item.nodeid.split("[")[0], []).append(method)
    keep, drop = [], []
    for item in items:
        function = item.nodeid.split("[")[0]
        callspec = getattr(item, "callspec", None)
        method = callspec.params.get("method") if callspec else None
        if function in NOT_IN_REDUCED_STAGES:
            drop.append(item)
        elif method is None or method in REDUCED_METHODS:
            keep.append(item)
        else:
            methods = methods_of[function]
            chosen = any(m in REDUCED_METHODS for m in methods)
            (drop if chosen or method != methods[0] else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_report_header(config):
    sim = " (CUDA simulator)" if settings.cuda_simulator_enabled() else ""
    return f"hapsira target: {settings.TARGET}{sim}"


@pytest.fixture(scope="session")
def target():
    return settings.TARGET


@pytest.fixture(scope="session")
def simulated():
    """True under numba's CUDA simulator: keep object counts small there."""
    return settings.TARGET == "cuda" and settings.cuda_simulator_enabled()


@pytest.fixture(autouse=True, scope="session")
def _disk_cache_is_the_runs_own():
    # ci/test-matrix gives each target's stage a fresh HAPSIRA_CACHE_DIR that its
    # xdist workers share, so a kernel is compiled once per stage, not once per test
    # module and worker. Workers sharing a folder crashed only while numba named
    # functions by a per-process counter (fixed in 33a04c9; kept by
    # tests/core/kernels/test_disk_cache.py::test_concurrent_first_runs_share_one_folder).
    # Never the user's own cache: a run must start cold and leave nothing behind.
    if settings.CACHE:
        assert os.environ.get("HAPSIRA_CACHE_DIR"), (
            "HAPSIRA_CACHE=1 in tests needs HAPSIRA_CACHE_DIR set to a folder of this run "
            "(ci/test-matrix makes one); or run with HAPSIRA_CACHE=0")


# Seconds per test file (setup, call and teardown summed; under xdist the controller
# receives every worker's reports), printed after the run: CI's time is mostly kernel
# compilation, which --durations spreads over the first test of each kernel.
_FILE_SECONDS = {}


def pytest_runtest_logreport(report):
    path = report.nodeid.split("::")[0]
    _FILE_SECONDS[path] = _FILE_SECONDS.get(path, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter):
    if not _FILE_SECONDS:
        return
    slowest = sorted(_FILE_SECONDS.items(), key=lambda item: -item[1])[:20]
    terminalreporter.write_sep("-", f"slowest test files (seconds; all files "
                                    f"{sum(_FILE_SECONDS.values()):.0f} s)")
    for path, seconds in slowest:
        terminalreporter.write_line(f"{seconds:8.1f}  {path}")
