"""``python -m benchmarks``: the list, the result names, missing peers. Nothing here runs a
benchmark or compiles a kernel, and no timing is asserted."""

import ast
import importlib.util
import json
import os
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the repository's root, for the benchmarks package alone
try:
    from benchmarks import front
finally:
    sys.path.remove(str(ROOT))

RESULTS = ROOT / "benchmarks" / "results"
NO_GPU = {"cpu": "AMD EPYC 7R13 Processor", "cores": 2, "cpus": 2, "gpus": []}


def test_list_names_every_benchmark_with_what_it_measures_and_its_peers(capsys):
    assert front.main(["--list"]) == 0
    listing = capsys.readouterr().out
    for name, bench in front.BENCHMARKS.items():
        line = next(line for line in listing.splitlines() if re.match(rf"[* ] {name}\s", line))
        assert bench.measures in line
        assert f"peers: {front.peer_names(bench)}; script: benchmarks/{bench.script}" in listing
    assert set(front.HEADLINE) <= set(front.BENCHMARKS)
    assert {"cpu_vs_peers", "ensembles", "stiff", "screening", "gpu_user_f"} <= set(front.HEADLINE)


@pytest.mark.parametrize("name", sorted(front.BENCHMARKS))
def test_each_benchmark_is_an_existing_script_and_function(name):
    bench = front.BENCHMARKS[name]
    tree = ast.parse(Path(bench.path).read_text())
    functions = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
    assert bench.function in functions and "main" in functions
    # the flags the front door passes are the script's own
    options = {node.args[0].value for node in ast.walk(tree)
               if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument"
               and node.args and isinstance(node.args[0], ast.Constant)}
    if any(isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_platform"
           for node in ast.walk(tree)):
        options.add("--platform")  # harness.add_platform declares it
    everyone = {p.name for p in bench.peers}
    for quick in (False, True):
        for have in (set(), everyone):
            for gpu in (False, True):
                args, _ = bench.arguments(quick, have, gpu, "/tmp/x.json")
                assert {a for a in args if a.startswith("--")} <= options
                assert "/tmp/x.json" in args  # the result goes where the front door reads it


def test_every_script_is_a_benchmark_a_tool_a_helper_or_an_investigation():
    """A script under benchmarks/ is registered in the front door, or listed as what it
    is: a shared module, a tool run by hand, a one-off study."""
    scripts = {path.name for path in (ROOT / "benchmarks").glob("*.py")}
    registered = {bench.script for bench in front.BENCHMARKS.values()}
    listed = [registered, set(front.HELPERS), set(front.TOOLS)]
    assert sum(map(len, listed)) == len(set().union(*listed)), "a script listed twice"
    assert scripts == set().union(*listed), (
        "register each script in front.BENCHMARKS, or list it in front.HELPERS or "
        f"front.TOOLS: unlisted {sorted(scripts - set().union(*listed))}, "
        f"listed but absent {sorted(set().union(*listed) - scripts)}")
    studies = {path.name for path in (ROOT / "benchmarks" / "investigations").glob("*.py")}
    assert studies == set(front.INVESTIGATIONS)
    for script in studies:
        assert front.first_line(str(ROOT / "benchmarks" / "investigations" / script))
    listing = front.listing()
    for script in [*front.TOOLS, *front.INVESTIGATIONS]:
        assert script in listing


@pytest.mark.parametrize("machine, gpu, slug", [
    (NO_GPU, False, "amd-epyc-2c"),
    ({"cpu": "Intel(R) Xeon(R) Platinum 8480+ CPU @ 2.00GHz", "cores": 16, "gpus": []}, False,
     "intel-xeon-16c"),
    ({"cpu": "AMD EPYC 9654 96-Core Processor", "cores": 16,
      "gpus": [{"name": "NVIDIA H100 80GB HBM3"}]}, True, "nvidia-h100"),
    ({"cpu": "AMD EPYC 9654 96-Core Processor", "cores": 16,
      "gpus": [{"name": "NVIDIA H100 80GB HBM3"}]}, False, "amd-epyc-16c"),
    ({"cpu": "x", "cores": 32, "gpus": [{"name": "NVIDIA H200"}] * 2}, True, "nvidia-h200-x2"),
    ({"cpu": "", "cores": 4, "gpus": [{"name": "NVIDIA A100-SXM4-80GB"}]}, True, "nvidia-a100"),
])
def test_result_name_is_benchmark_machine_date(machine, gpu, slug):
    assert front.result_name("stiff", machine, "2026-12-03", gpu) == f"stiff_{slug}_2026-12-03.json"


def test_result_name_of_today_matches_the_pattern():
    name = front.result_name("cpu_vs_peers", NO_GPU)
    assert re.fullmatch(r"cpu_vs_peers_amd-epyc-2c_\d{4}-\d{2}-\d{2}\.json", name)


@pytest.fixture
def without(monkeypatch):
    """Make modules look uninstalled to the front door (as if their import failed)."""
    def hide(*modules):
        real = importlib.util.find_spec

        def find_spec(name, *args, **kwargs):
            if name.split(".")[0] in modules:
                return None
            return real(name, *args, **kwargs)
        monkeypatch.setattr(front.importlib.util, "find_spec", find_spec)
    return hide


def test_a_missing_peer_is_skipped_with_a_line_naming_it(without, capsys):
    without("heyoka")
    step = front.plan("cpu_vs_peers", True, "/tmp/x.json")
    said = capsys.readouterr().out
    assert step.skip is None
    assert "heyoka" in step.skipped and "heyoka not installed" in step.skipped["heyoka"]
    assert "cpu_vs_peers: peer heyoka skipped: heyoka not installed" in said
    assert step.command[step.command.index("--n-heyoka") + 1] == "0"


def test_a_gpu_peer_left_out_of_the_command(without, capsys):
    without("diffrax", "cubie")
    step = front.plan("gpu_user_f", True, "/tmp/x.json", gpu=True)
    assert set(step.skipped) == {"diffrax", "CuBIE"}
    assert step.command[step.command.index("--peers") + 1] == ""
    assert "peer CuBIE skipped: cubie not installed" in capsys.readouterr().out


def test_headline_without_any_peer_or_gpu_is_no_error(without, monkeypatch, capsys):
    without("heyoka", "diffrax", "CyRK", "cubie", "cascade")
    monkeypatch.setattr(front, "has_gpu", lambda machine: False)
    monkeypatch.setattr(front.harness, "machine", lambda: dict(
        NO_GPU, load_average=0.0, src_digest="0" * 12))
    assert front.main(["headline", "--quick", "--dry-run"]) == 0
    said = capsys.readouterr().out
    for peer in ("heyoka", "CyRK", "cascade", "diffrax", "CuBIE"):
        assert f"peer {peer} skipped" in said
    assert "gpu_user_f: skipped: needs an NVIDIA GPU" in said
    assert "screening.py --n 1000" in said and "--cascade" not in said


def test_a_missing_required_peer_skips_the_benchmark(without, capsys):
    without("scipy")
    assert front.plan("stiff", True, "/tmp/x.json").skip.startswith("needs scipy")


SAMPLES = {"cpu_vs_peers": "cpu_vs_scipy.json", "ensembles": "ensembles.json",
           "stiff": "stiff_2core_radau_quiet.json", "screening": "screening_cascade_2core.json",
           "gpu_user_f": "gpu_user_f.json", "cold_start": "cold_start_amd2_2026-12-02.json",
           "lanes": "lanes_2core_znver4.json", "stm_cost": "stm_cost_2core.json",
           "reference": "h100_core.json", "latency": "latency_2core.json",
           "state_size": "h200_state_size_peers_small.json",
           "jax_vs_diffrax": "jax_vs_diffrax_cpu.json", "dask_overhead": "dask_overhead_2core.json",
           "gravity": "gravity_2core.json", "oem_write": "oem_write_2core-after.json",
           "foreign": "h100_foreign.json", "gpu_peers": "gpu_peers_cudasim_quick.json",
           "probability": "probability_2core_2026-12-07.json"}


def test_every_benchmark_has_a_sample_result():
    assert set(SAMPLES) == set(front.BENCHMARKS)


@pytest.mark.parametrize("name", sorted(front.BENCHMARKS))
def test_the_summary_reads_ours_and_the_peers_from_the_script_s_record(name):
    record = json.loads((RESULTS / SAMPLES[name]).read_text())
    summary = front.BENCHMARKS[name].summary(record)
    rows = [label for group in summary["groups"].values() for label in group]
    assert any(label.startswith("hapsira") for label in rows)
    if front.BENCHMARKS[name].peers:
        assert any(not label.startswith("hapsira") for label in rows)


def test_plot_draws_an_existing_result_without_running_it(tmp_path, capsys, monkeypatch):
    # pyplot imported first: on a new machine its font cache is built with fc-list
    pytest.importorskip("matplotlib.pyplot")
    monkeypatch.setattr(front.subprocess, "run", None)  # nothing runs
    png = tmp_path / "stiff.png"
    assert front.main(["--plot", str(RESULTS / "stiff_2core_radau_quiet.json"),
                       "--png", str(png)]) == 0  # the benchmark, from the file's name
    assert png.stat().st_size > 0 and f"plotted to {png}" in capsys.readouterr().out
    png = tmp_path / "cpu.png"
    assert front.main(["cpu_vs_peers", "--plot", str(RESULTS / "cpu_vs_scipy.json"),
                       "--png", str(png), "--title", "x"]) == 0
    assert png.stat().st_size > 0


def test_plot_of_a_record_of_no_known_benchmark_is_an_error(tmp_path, capsys):
    record = tmp_path / "mystery.json"
    record.write_text("{}")
    with pytest.raises(SystemExit):
        front.main(["--plot", str(record)])
    assert "which benchmark" in capsys.readouterr().err


@pytest.mark.parametrize("png", sorted((ROOT / "docs" / "img").glob("bench_*.png")))
def test_the_docs_plots_are_embedded_and_their_results_exist(png):
    """Each plot of docs/img/bench_*.png is on docs/benchmarks.md beside a link to its JSON."""
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    assert f"img/{png.name}" in page
    source = re.search(rf"img/{re.escape(png.name)}\)[^\n]*\n+[^\n]*?results/([\w.-]+\.json)",
                       page)
    assert source and (RESULTS / source.group(1)).exists()


def test_the_plot_is_written(tmp_path):
    pytest.importorskip("matplotlib")
    summary = {"metric": "us per object", "groups": {"a": {"hapsira cpu": 1.0, "scipy": 300.0}}}
    path = front.plot(summary, str(tmp_path / "x.png"), "x")
    assert path and os.path.getsize(path) > 0
