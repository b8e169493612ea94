"""The whole suite runs on the target chosen by HAPSIRA_TARGET (ci/test-matrix runs each)."""

import os
import sys

import pytest

# Under HAPSIRA_LANES=auto a call of 1,024 objects or more whose lane kernel is not
# compiled yet starts its compile in a background process (20-30 CPU-s each on a 2-core
# box, outliving the test); tests turn it on where they test it
# (tests/core/ivp/test_lanes.py). Before hapsira_core reads it, and for the subprocesses
# that tests start. A value set outside is kept.
os.environ.setdefault("HAPSIRA_LANES_BACKGROUND", "0")

from hapsira_core import settings  # noqa: E402

# JAX takes 75% of a GPU's memory at its first array unless told otherwise. One test
# process of tests/cowell/propagation held 108 GB of an H200 from
# test_cowell_spans.py::test_jax_and_dask_fronts_take_step_sizes_and_per_object_tofs on
# (2026-11-29, benchmarks/investigations/gpu_memory_per_test.py), and a second one at
# -n 8 then ran out of memory. Before any test imports jax; a value set outside is kept.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

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
    # the site's build and the README's examples are the same on every target
    "tests/docs/test_site.py::test_every_page_renders_its_tables": ("parallel", "simulator"),
    "tests/docs/test_readme.py::test_readme_examples_run": ("parallel", "simulator"),
    # the README's first command: the same catalog run as test_app.py's (kept on parallel)
    "tests/docs/test_readme.py::test_readme_first_propagate_runs": ("parallel", "simulator"),
    # the command line's propagation and screening run under the simulator with
    # --target cpu (the simulator is far too slow for a catalog): the cpu stage's runs
    "tests/cowell/cli/test_app.py": ("simulator",),
    "tests/cowell/cli/test_screen.py": ("simulator",),
    # the command's own code (catalogs, writers, plots, CDMs) is the same for every
    # --target: on parallel the TLE catalog's run (j2 and drag, --target parallel, its
    # NPZ checked against SGP4) and the callbacks' compile errors stay; screening's
    # kernels on parallel are tests/cowell/propagation/test_conjunctions.py's
    "tests/cowell/cli/test_screen.py::test_screen_writes_the_library_result_as_csv_and_a_"
    "histogram": ("parallel",),
    "tests/cowell/cli/test_app.py::test_propagate_csv_states_to_csv": ("parallel",),
    "tests/cowell/cli/test_app.py::test_demo_writes_plots": ("parallel",),
    "tests/cowell/cli/test_app.py::test_default_catalog_backward_to_oem": ("parallel",),
}


#: Files of a method's own arithmetic (stiff methods and their dense output, the
#: variational equations, states beyond 32) and of the cache's logic (fingerprints and
#: damaged entries, the same on every target) run on ``parallel`` only the tests named
#: here: one comparison with scipy (or a reference) and one failing object per feature,
#: the cache's warm and concurrent runs. ``parallel`` runs cpu's compiled per-object
#: body, so their other tests would check the cpu stage's code again, at a kernel
#: compile (or a process of compiles) each. A name is a test function (all its
#: parametrizations left after REDUCED_METHODS) or one parametrization, ``name[id]``.
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
    # lanes run in parallel's prange (a lane group per iteration): the ensembles without
    # and with events and with step records (DOP853: REDUCED_METHODS), each with failing
    # objects and bit for bit against the per-object kernel, and auto's per-thread
    # threshold, plus the settings' checks (no compile); the joined lane kernel on chunks
    # of objects (parallel's own trampoline) and auto's rule for joined lane kernels.
    # Left to cpu: the packed-code assembly checks (`lanes.make_attempt` compiles the same
    # attempt on both host targets, and the joined one is the same entry on both), the
    # host width and max_steps runs (another width, the same loop), the fallback
    # decisions, a second function joining the same lane loop, and the two cowell orbit
    # workloads (cowell's f in the same lane loop; cowell on parallel is tested in
    # tests/cowell).
    "tests/core/ivp/test_lanes.py": (
        "test_ensembles_bit_identical_with_failures", "test_events_in_lanes_bit_identical",
        "test_step_records_in_lanes_bit_identical",
        "test_auto_compiles_lanes_only_where_it_pays",
        "test_auto_leaves_small_calls_to_the_per_object_kernel", "test_target_without_lanes",
        "test_setting", "test_bad_setting", "test_cache_key_has_width_and_cpu",
        "test_joined_lanes_on_chunks_of_objects",
        "test_auto_takes_joined_lanes_once_the_generic_lane_loop_is_ready"),
    # cowell's stm: the J2 + J3 + drag matrix against central differences, a failing
    # object, the JAX front inside jit and the Dask front bit for bit against the numpy
    # front's matrices (the JAX front's failing object and events: tests/core/fronts),
    # the argument checks. Left to cpu: two-body and J2 alone against differences,
    # det = 1, the same steps with and without stm, quantities in.
    "tests/cowell/propagation/test_stm.py": (
        "test_stm_matches_central_differences_of_cowell[j2_j3_drag]",
        "test_a_bad_object_fails_alone", "test_jax_stm_inside_jit",
        "test_jax_and_dask_fronts_give_the_numpy_matrices_bit_for_bit[dask]",
        "test_jax_and_dask_fronts_check_stm_as_the_numpy_call", "test_stm_must_be_a_bool",
        "test_a_table_lookup_is_named_as_not_differentiable", "test_dask_stm_to_zarr",
        "test_map_chunks_returns_each_chunk_s_matrices"),
    # scipy's ported tests on DOP853 (REDUCED_METHODS): the integration forward and
    # backward, events both ways, max_step, first_step, t_eval with and without dense
    # output, a failing max_step and non-finite initial states (failing objects), and
    # the refusals. Left to cpu: the other scipy problems (args, zero right-hand side,
    # duplicate timestamps, the LSODA problem's events, the time bounds, the error
    # estimate), each a kernel of the same per-object code.
    "tests/core/ivp/test_scipy_ported.py": (
        "test_ported_integration", "test_ported_integration_complex_is_refused_naming_y0",
        "test_ported_events_forward", "test_ported_events_backward", "test_ported_max_step",
        "test_ported_max_step_too_small_fails_as_scipys", "test_ported_first_step",
        "test_ported_t_eval", "test_ported_t_eval_outside_the_span_is_refused",
        "test_ported_t_eval_dense_output", "test_ported_empty_state_is_refused_naming_y0",
        "test_ported_infinite_span_without_terminal_event_is_refused_naming_t_span",
        "test_ported_initial_state_finiteness", "test_ported_initial_step_respects_max_step",
        "test_ported_coefficient_properties"),
    # the JAX front on parallel (its XLA handler around the prange loop): every test but
    # the array form of fun and the other methods (the same handler, another kernel
    # of cpu's per-object code; both on cpu)
    "tests/core/fronts/test_jax.py": tuple(
        "test_" + name for name in (
            "cowell_jit_equals_numpy", "cowell_single_object_drops_the_object_axis",
            "cowell_vmap_batches_into_the_object_axis",
            "cowell_vmap_over_single_objects_gm_and_times", "cowell_twice_in_one_program",
            "cowell_no_copies_of_inputs_or_outputs", "cowell_bad_inputs_name_the_argument",
            "solve_ivp_jit_equals_numpy", "solve_ivp_single_object_and_default_times",
            "solve_ivp_vmap_batches_into_the_object_axis",
            "solve_ivp_twice_in_one_program_and_traced_span",
            "solve_ivp_no_copies_of_inputs_or_outputs", "solve_ivp_bad_inputs_name_the_argument",
            "results_are_pytree_views_of_the_numpy_types", "a_traced_result_is_not_read",
            "derivatives_raise_a_clear_error",
            "platform_not_matching_the_target_is_a_clear_error",
            "buffers_of_other_shapes_are_refused_not_overrun",
            "packages_import_without_jax", "32_bit_jax_is_refused_with_the_fix",
            "a_warm_process_compiles_nothing_for_its_first_jax_call")),
    # explicit methods on batches: every test but the states of 9 and 32 (the tuple
    # shape at n = 2 here, the array shape in test_large_n.py) and a terminal event's
    # instant shared with another (the per-object event code; on cpu)
    "tests/core/ivp/test_solve_ivp.py": tuple(
        "test_" + name for name in (
            "lotka_volterra_ensemble_matches_scipy_object_by_object",
            "van_der_pol_with_per_object_mu_and_output_times",
            "one_component_backward_from_a_nonzero_start",
            "tuple_form_beyond_its_threshold_is_refused_naming_the_array_form",
            "events_match_scipy", "a_bad_object_fails_alone",
            "max_steps_and_object_results_read_like_scipy", "bad_arguments_name_themselves",
            "bad_initial_states_name_themselves",
            "args_as_scipys_are_the_params_row_shared_by_all_objects",
            "args_follow_the_params_columns", "args_that_are_not_numbers_point_to_params")),
    # constant Jacobians: Radau against scipy with one matrix per object (REDUCED_METHODS)
    # and the checks of jac; left to cpu: the shared and sparse matrices, the automatic
    # recognition's steps and Rodas5P's single evaluation (the same per-object code)
    "tests/core/ivp/test_constant_jacobian.py": (
        "test_one_matrix_per_object_gives_scipys_steps_and_counts",
        "test_the_source_decides_what_is_recognised", "test_a_bad_matrix_is_refused_naming_jac",
        "test_explicit_methods_warn_and_ignore_a_matrix_as_scipy"),
    # per-object times and stm through the fronts: the JAX front with stm and both
    # Dask runs; left to cpu: the JAX front without stm and with an infinite end (the
    # same handler and front code, other kernels)
    "tests/core/fronts/test_fronts_spans_stm.py": (
        "test_numpy_reference_is_not_vacuous", "test_stm_at_an_event_is_the_matrix_at_that_time",
        "test_jax_per_object_times_and_stm_equal_numpy[True]",
        "test_jax_per_object_spans_default_t_eval",
        "test_jax_bad_per_object_times_name_the_argument",
        "test_dask_per_object_times_and_stm_equal_numpy", "test_dask_stm_to_zarr",
        "test_dask_infinite_end_equals_numpy"),
    # Dask on parallel's workers: every test but the array form of fun (the same chunks
    # and workers, another kernel of cpu's per-object code; on cpu)
    "tests/core/fronts/test_dask.py": tuple(
        "test_" + name for name in (
            "cowell_dask_is_bit_identical_to_one_process",
            "cowell_dask_single_object_and_shared_params", "cowell_dask_bad_input_is_named",
            "solve_ivp_dask_ensemble_is_bit_identical",
            "solve_ivp_dask_dense_output_is_the_numpy_fronts",
            "outputs_over_the_memory_limit_complete_into_zarr", "solve_ivp_to_zarr",
            "size_check_refuses_with_the_promised_message", "memory_limit_values",
            "a_failing_chunk_is_retried", "a_worker_killed_mid_run_loses_no_object",
            "cli_zarr_output_here_and_on_the_cluster",
            "cli_local_cluster_is_sized_for_the_target")),
}
#: The same under the CUDA simulator (it runs the cuda target's kernels as Python: their
#: indexing, launches and memory; a real GPU runs every test, ci/gpu/run.sh).
ON_SIMULATOR_ONLY = {
    # the cache's logic is the same on every target, and under the simulator the cache
    # holds the kernel modules alone (nothing is compiled): warm runs, concurrent first
    # runs and a damaged module rebuilt keep the cuda target's use of it. Left to cpu and
    # parallel: edits, pruning and the command line, the other damages, unusable folders.
    "tests/core/kernels/test_disk_cache.py": (
        "test_warm_runs_load_the_kernel_and_give_the_same_numbers",
        "test_concurrent_first_runs_share_one_folder",
        "test_damaged_entries_are_rebuilt_with_a_warning[garbage-module]"),
}
NAMED_ONLY = {"parallel": ON_PARALLEL_ONLY, "simulator": ON_SIMULATOR_ONLY}


def _method(item):
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("method") if callspec else None


def _function(item):
    """``file::name`` of a test, without its parameters."""
    return item.nodeid.split("[")[0]


def pytest_collection_modifyitems(config, items):
    # HAPSIRA_TEST_FULL=1: the full list on every stage (as cpu and a real GPU run it)
    if STAGE not in ("parallel", "simulator") or os.environ.get("HAPSIRA_TEST_FULL") == "1":
        return
    left_out = tuple(p for p, stages in NOT_IN_REDUCED_STAGE.items() if STAGE in stages)
    methods_of = {}
    for item in items:
        if _method(item) is not None:
            methods_of.setdefault(_function(item), []).append(_method(item))
    only = NAMED_ONLY[STAGE]
    keep, drop = [], []
    for item in items:
        function, method = _function(item), _method(item)
        path, _, name = function.partition("::")
        names = only.get(path)
        if function.startswith(left_out) or (
                names is not None and name not in names and item.name not in names):
            drop.append(item)
        elif method is None or method in REDUCED_METHODS:
            keep.append(item)
        else:
            methods = methods_of[function]
            chosen = any(m in REDUCED_METHODS for m in methods)
            (drop if chosen or method != methods[0] else keep).append(item)
    # a renamed test (or parametrization) must not leave its file unrun there
    collected = {_function(item) for item in items} | {item.nodeid for item in items}
    for path, names in only.items():
        missing = [n for n in names if f"{path}::{n}" not in collected]
        if any(c.startswith(path + "::") for c in collected) and missing:
            raise pytest.UsageError(f"tests/conftest.py: the {STAGE} stage's names of "
                                    f"{path} are not tests there: {missing}")
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
    # ci/test-matrix gives the run one fresh HAPSIRA_CACHE_DIR that every stage and
    # xdist worker shares, so a kernel is compiled once per run, not once per test
    # module, worker or stage (cpu and parallel share their joined kernels). Workers
    # sharing a folder crashed only while numba named functions by a per-process
    # counter (fixed in 33a04c9; kept by
    # tests/core/kernels/test_disk_cache.py::test_concurrent_first_runs_share_one_folder
    # and, for the parallel target's prange functions,
    # tests/core/kernels/test_disk_cache.py::test_prange_function_names_come_from_content).
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
    ranked = sorted(_FILE_SECONDS.items(), key=lambda item: -item[1])
    terminalreporter.write_sep("-", f"slowest test files (seconds; all files "
                                    f"{sum(_FILE_SECONDS.values()):.0f} s)")
    for path, seconds in ranked[:20]:
        terminalreporter.write_line(f"{seconds:8.1f}  {path}")
    # every file's seconds, for ci/test-matrix's summary of all stages at the end
    # (HAPSIRA_TEST_FILE_TIMES: a file it names; the controller alone writes it)
    out = os.environ.get("HAPSIRA_TEST_FILE_TIMES")
    if out and not os.environ.get("PYTEST_XDIST_WORKER"):
        with open(out, "w") as handle:
            handle.writelines(f"{seconds:.1f} {path}\n" for path, seconds in ranked)
