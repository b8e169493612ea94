"""The whole suite runs on the target chosen by HAPSIRA_TARGET (ci/test-matrix runs each)."""

import os

import pytest

from hapsira_core import settings


#: On ``parallel``, a test parametrized by ``method`` runs for these methods only (or,
#: where it has none of them, for its first): that target runs cpu's compiled per-object
#: body in a prange over objects, the cpu stage checks every method against scipy, and
#: each method is kernels to compile in a stage whose time is mostly compilation (CI
#: must finish within its limit: README, ci/test-matrix). One explicit and one implicit
#: method keep both kinds of kernel layout (an implicit one has Jacobian work arrays).
PARALLEL_METHODS = ("DOP853", "Radau")
#: Tests that run on cpu and cuda but not parallel, with why: the docs' examples are
#: checked as documentation; every feature they show has its own tests on each target.
NOT_ON_PARALLEL = ("tests/docs/test_examples.py::test_page_examples_run",)


def pytest_collection_modifyitems(config, items):
    if settings.TARGET != "parallel":
        return
    by_function = {}
    for item in items:
        by_function.setdefault(item.nodeid.split("[")[0], []).append(item)
    keep, drop = [], []
    for item in items:
        function = item.nodeid.split("[")[0]
        method = getattr(item, "callspec", None) and item.callspec.params.get("method")
        if function in NOT_ON_PARALLEL:
            drop.append(item)
        elif method is None or method in PARALLEL_METHODS:
            keep.append(item)
        else:
            methods = [sibling.callspec.params.get("method") for sibling in by_function[function]]
            first = next((m for m in methods if m is not None), None)
            chosen = any(m in PARALLEL_METHODS for m in methods)
            (drop if chosen or method != first else keep).append(item)
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
