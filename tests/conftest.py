"""The whole suite runs on the target chosen by HAPSIRA_TARGET (ci/test-matrix runs each)."""

import os
import sys

import pytest

from hapsira_core import settings

#: The stage this run is (the target is fixed at import): "cpu", "parallel", "cuda" on a
#: real GPU, or "simulator" for cuda under numba's CUDA simulator.
STAGE = ("simulator" if settings.TARGET == "cuda" and settings.cuda_simulator_enabled()
         else settings.TARGET)

if STAGE == "simulator":
    # numba's CUDA simulator runs a Python thread per GPU thread, and each device function
    # call takes a lock of the function's module; at Python's default 5 ms switch interval
    # the threads queue on it behind the GIL. Measured on the 2-core box, one process:
    # test_real_debris_equal_brute_force 338 s at 5 ms, 25 s at 0.05 ms, 22 s at 0.01 ms.
    sys.setswitchinterval(5e-5)

if STAGE == "parallel" and settings.CACHE and os.environ.get("PYTEST_XDIST_WORKER"):
    # On parallel each xdist worker keeps its own folder under the stage's (a worker, and
    # the command-line runs it starts, share it one at a time). With one folder for both
    # workers, a worker died of a segmentation fault inside the parallel kernel of
    # test_conjunctions.py::test_planted_encounters_are_found_with_tca_to_a_millisecond_and_
    # miss_to_a_metre (2026-11-27, fresh-clone run of .ci/run; the file passes alone, and
    # the cpu stage shares its folder without a crash in every run so far).
    settings.CACHE_DIR = os.path.join(settings.CACHE_DIR, os.environ["PYTEST_XDIST_WORKER"])
    os.environ["HAPSIRA_CACHE_DIR"] = settings.CACHE_DIR


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
#: Tests (node ids or their prefixes: a file, a test function) that run on cpu (and a
#: real GPU) but not in a reduced stage, with why. Every feature keeps tests on every
#: target; what is left out here is a second run of the same compiled code.
NOT_IN_REDUCED_STAGE = {
    # the docs' examples are checked as documentation; every feature they show has
    # its own tests on each target
    "tests/docs/test_examples.py::test_page_examples_run": ("parallel", "simulator"),
    # the command line's propagation and screening run under the simulator with
    # --target cpu (the simulator is far too slow for a catalog): the cpu stage's runs
    "tests/cowell/cli/test_app.py": ("simulator",),
    "tests/cowell/cli/test_screen.py": ("simulator",),
}


#: Files of a method's own arithmetic (stiff methods and their dense output, the
#: variational equations, states beyond 32) and of the cache's logic (fingerprints and
#: damaged entries, the same on every target) run on ``parallel`` only the tests named
#: here: one comparison with scipy (or a reference) and one failing object per feature,
#: the cache's warm and concurrent runs. ``parallel`` runs cpu's compiled per-object
#: body, so their other tests would check the cpu stage's code again, at a kernel
#: compile (or a process of compiles) each.
ON_PARALLEL_ONLY = {
    "tests/core/ivp/test_rodas.py": ("test_robertson_numbers", "test_dense_output_and_events"),
    "tests/core/ivp/test_radau.py": ("test_stiff_problems_match_scipy_step_for_step",
                                     "test_a_failing_object_fails_alone"),
    "tests/core/ivp/test_bdf.py": ("test_steps_counts_and_states_equal_scipy",
                                   "test_one_failing_object_leaves_the_others_as_scipy"),
    "tests/core/ivp/test_dense_implicit.py": ("test_sol_equals_scipys_odesolution",
                                              "test_a_failed_object_keeps_its_own_status_and_nan"),
    "tests/core/ivp/test_event_derivatives.py": (
        "test_van_der_pol_crossings_match_central_differences",
        "test_a_bad_object_gets_nan_and_the_others_are_unchanged"),
    "tests/core/ivp/test_stm.py": ("test_van_der_pol_stm_against_differences_and_the_same_steps",
                                   "test_the_jacobian_inside_a_kernel_is_the_lorenz_jacobian"),
    "tests/core/ivp/test_large_n.py": ("test_ten_bodies_n60_matches_scipy",
                                       "test_array_form_equals_tuple_form_bit_for_bit"),
    "tests/core/kernels/test_disk_cache.py": (
        "test_warm_runs_load_the_kernel_and_give_the_same_numbers",
        "test_concurrent_first_runs_share_one_folder"),
}


def _method(item):
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("method") if callspec else None


def _function(item):
    """``file::name`` of a test, without its parameters."""
    return item.nodeid.split("[")[0]


def pytest_collection_modifyitems(config, items):
    if STAGE not in ("parallel", "simulator"):
        return
    left_out = tuple(p for p, stages in NOT_IN_REDUCED_STAGE.items() if STAGE in stages)
    methods_of = {}
    for item in items:
        if _method(item) is not None:
            methods_of.setdefault(_function(item), []).append(_method(item))
    keep, drop = [], []
    for item in items:
        function, method = _function(item), _method(item)
        path, _, name = function.partition("::")
        if function.startswith(left_out) or (
                STAGE == "parallel" and name not in ON_PARALLEL_ONLY.get(path, (name,))):
            drop.append(item)
        elif method is None or method in REDUCED_METHODS:
            keep.append(item)
        else:
            methods = methods_of[function]
            chosen = any(m in REDUCED_METHODS for m in methods)
            (drop if chosen or method != methods[0] else keep).append(item)
    if STAGE == "parallel":  # a renamed test must not leave its file unrun there
        collected = {_function(item) for item in items}
        for path, names in ON_PARALLEL_ONLY.items():
            missing = [n for n in names if f"{path}::{n}" not in collected]
            if any(c.startswith(path + "::") for c in collected) and missing:
                raise pytest.UsageError(f"tests/conftest.py ON_PARALLEL_ONLY names tests "
                                        f"that {path} does not have: {missing}")
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
    return STAGE == "simulator"


@pytest.fixture(autouse=True, scope="session")
def _disk_cache_is_the_runs_own():
    # ci/test-matrix gives each target's stage a fresh HAPSIRA_CACHE_DIR that its
    # xdist workers share (on parallel, a folder each under it: see above), so a kernel
    # is compiled once per stage (per worker on parallel), not once per test module. Workers sharing a folder crashed only while numba named
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
