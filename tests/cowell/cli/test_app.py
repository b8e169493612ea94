"""The hapsira-cowell command line, its plots, and the compile-error helper.

The CLI runs in subprocesses, each compiling the solver once (15-30 s) or loading it
from the test run's kernel cache: the tests are few and each checks a lot. They use
the target of the environment they run in, except cuda under numba's simulator, where
they use the cpu target (the simulator runs the solver in Python, far too slowly).
"""

import ast
import inspect
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hapsira_core import settings
from hapsira_core.jit import hjit
from hapsira_cowell import STATUS_MESSAGES, cowell
from hapsira_cowell.cli import app as cli, inputs, models, writers
from hapsira_core.kernels.errors import CallbackCompileError, user_function_error
from hapsira_cowell.models.events import Event
from hapsira_cowell.models.perturbations import two_body

from extras import need
from reference import DATA_DIR  # ../shared/data beside the repository (or HAPSIRA_TEST_DATA)

SIMULATED = settings.TARGET == "cuda" and settings.cuda_simulator_enabled()
CLI_TARGET = "cpu" if SIMULATED else settings.TARGET
IRIDIUM = DATA_DIR / "iridium-33-debris.tle"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def run_cli(*args, cwd, timeout=600, cache=True):
    """The command line in a subprocess. ``cache``: the test run's kernel cache (the
    folder that ci/test-matrix gives the stage, or the worker's on parallel), so that
    runs of the same kernels compile them once (each run compiled them, 15-30 s, before
    2026-11-29); ``False``: none, every kernel compiled in the run."""
    use = cache and settings.CACHE  # (tests/conftest.py: CACHE needs the run's own folder)
    env = dict(os.environ, HAPSIRA_CACHE="1" if use else "0")
    return subprocess.run([sys.executable, "-m", "hapsira_cowell.cli", *map(str, args)],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def assert_ok(done):
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    assert "Traceback" not in done.stderr
    assert "UnitsWarning" not in done.stderr  # (the compile warm-up drew one: issue 51)


def assert_png(path, min_bytes=20_000):
    data = Path(path).read_bytes()
    assert data[:8] == PNG_SIGNATURE
    assert len(data) > min_bytes  # a real plot, not an empty canvas


# ------------------------------------------------------------- end to end (subprocess)

def test_propagate_tle_catalog_to_npz(tmp_path):
    out, plot = tmp_path / "result.npz", tmp_path / "altitude.png"
    done = run_cli("propagate", IRIDIUM, "--tof", "1d", "--every", "6h",
                   "--perturbations", "j2,drag", "--out", out, "--plot", plot,
                   "--target", CLI_TARGET, cwd=tmp_path)
    assert_ok(done)
    assert "objects: 119" in done.stdout and "throughput:" in done.stdout

    with np.load(out, allow_pickle=False) as result:
        data = {key: result[key] for key in result.files}
    n, m = 119, 5
    np.testing.assert_array_equal(data["tofs"], [0.0, 21600.0, 43200.0, 64800.0, 86400.0])
    assert data["names"].shape == (n,) and data["names"][0] == "IRIDIUM 33"
    assert data["rr"].shape == data["vv"].shape == (n, m, 3)
    assert data["status"].shape == data["reentry"].shape == data["nsteps"].shape == (n,)
    assert data["frame"] == "TEME" and data["perturbations"] == "j2,drag"
    assert set(data["status"].tolist()) <= set(STATUS_MESSAGES)
    # every object: whole rows of numbers, then (after a stop) whole rows of NaN
    for rr, vv, status, reentry in zip(data["rr"], data["vv"], data["status"],
                                       data["reentry"]):
        finite = np.isfinite(rr).all(axis=1)
        assert np.array_equal(finite, np.isfinite(rr).any(axis=1))
        assert np.array_equal(finite, np.isfinite(vv).all(axis=1))
        assert np.array_equal(finite, np.arange(m) < finite.sum())
        if status == 0:
            assert finite.all() and np.isnan(reentry)
        elif status == 1:
            assert 0 < reentry <= 86400.0
    done_objects = data["status"] == 0
    assert done_objects.sum() > 100  # Iridium 33 debris: 500-1000 km, all stay up for a day
    r = np.linalg.norm(data["rr"][done_objects], axis=-1)
    assert np.all((r > 6378.137 + 100) & (r < 6378.137 + 2000))

    # the start is every object's SGP4 state at the catalog's latest epoch
    from astropy.time import Time
    from hapsira_cowell.inputs.tle import from_tle
    catalog = from_tle(IRIDIUM)
    r0, v0, ok = catalog.states_at(catalog.epochs.max())
    assert abs((Time(str(data["epoch"]), scale="utc") - catalog.epochs.max()).sec) < 1e-5
    assert list(data["names"]) == catalog.names
    np.testing.assert_allclose(data["rr"][ok, 0], r0[ok], rtol=1e-12)
    np.testing.assert_allclose(data["vv"][ok, 0], v0[ok], rtol=1e-12)
    assert_png(plot)


def test_propagate_csv_states_to_csv(tmp_path):
    catalog = tmp_path / "states.csv"
    catalog.write_text(
        "# a comment line\n"
        "name,x,y,z,vx,vy,vz,area_to_mass\n"
        "high,7000.0,0.0,0.0,0.0,7.546,0.0,\n"
        "\"low, fragment\",6528.137,0.0,0.0,0.0,0.0,7.814,0.1\n"
        "broken,nan,0.0,0.0,0.0,7.5,0.0,\n")
    out = tmp_path / "out.csv"
    done = run_cli("propagate", catalog, "--tof", "6h", "--every", "2h", "--perturbations",
                   "drag,j2", "--format", "csv", "--out", out, "--target", CLI_TARGET,
                   cwd=tmp_path)
    assert_ok(done)
    import csv
    with open(out, newline="") as source:
        rows = list(csv.DictReader(source))
    assert list(rows[0]) == ["name", "t", "x", "y", "z", "vx", "vy", "vz", "status",
                             "reentry"]  # no utc column: a CSV catalog has no epoch
    assert len(rows) == 3 * 4  # one row per object and time: 0, 2, 4, 6 h
    by_name = {}
    for row in rows:
        by_name.setdefault(row["name"], []).append(row)
    assert [float(r["t"]) for r in by_name["high"]] == [0.0, 7200.0, 14400.0, 21600.0]
    assert float(by_name["high"][0]["x"]) == 7000.0 and float(by_name["high"][0]["vy"]) == 7.546
    assert {r["status"] for r in by_name["high"]} == {"0"}
    # 150 km with 0.1 m^2/kg: re-enters within hours; NaN rows after it
    low = by_name["low, fragment"]
    assert {r["status"] for r in low} == {"1"}
    assert 0 < float(low[0]["reentry"]) < 21600.0
    assert np.isnan(float(low[-1]["x"]))
    assert {r["status"] for r in by_name["broken"]} == {"-3"}
    assert "status -3: 1" in done.stdout and "re-entries: 1" in done.stdout


def test_demo_writes_plots(tmp_path):
    out = tmp_path / "demo.png"
    done = run_cli("demo", "--n", "60", "--out", out, "--target", CLI_TARGET, cwd=tmp_path)
    assert_ok(done)
    assert "objects: 60" in done.stdout
    reentries = int(done.stdout.split("re-entries: ")[1].split()[0])
    assert reentries >= 3  # the demo's low fragments come down within the day
    assert_png(out)
    assert_png(tmp_path / "demo-tracks.png")


BAD_INPUTS = {
    "unknown perturbation": (["--perturbations", "j2,foo"], "'foo'"),
    "unreadable file": (["--catalog", "missing.tle"], "missing.tle"),
    "bad duration": (["--tof", "1x"], "'1x'"),
    "negative duration": (["--every", "-10min"], "--every"),
    "unknown format": (["--format", "xlsx"], "'xlsx'"),
    "not a catalog": (["--catalog", "garbage.txt"], "garbage.txt"),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_is_one_line_and_exit_2(tmp_path, case):
    extra, expected = BAD_INPUTS[case]
    (tmp_path / "garbage.txt").write_text("this is\nnot a catalog\nof anything\n")
    catalog = str(IRIDIUM)
    if extra[0] == "--catalog":
        catalog, extra = extra[1], extra[2:]
    done = run_cli("propagate", catalog, *extra, "--out", "out.npz", "--target", CLI_TARGET,
                   cwd=tmp_path, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("hapsira-cowell: error: ") and expected in lines[0]
    assert done.stdout == ""
    assert not (tmp_path / "out.npz").exists()


# ------------------------------------------------------------------- in process, fast

def test_durations_and_perturbations():
    assert inputs.parse_duration("1d") == 86400.0
    assert inputs.parse_duration("1.5d") == 129600.0
    assert inputs.parse_duration("6h") == 21600.0
    assert inputs.parse_duration("90min") == 5400.0
    assert inputs.parse_duration("30s") == 30.0
    for bad in ("", "1", "1x", "0s", "-1h", "10m", "d", "nan d", "1e999s"):
        with pytest.raises(inputs.UsageError):
            inputs.parse_duration(bad)
    assert models.parse_perturbations("drag, J2") == ("j2", "drag")
    assert models.parse_perturbations("none") == ()
    with pytest.raises(inputs.UsageError, match="'j4'"):
        models.parse_perturbations("j2,j4")
    np.testing.assert_array_equal(inputs.make_tofs(86400.0, 21600.0),
                                  [0, 21600, 43200, 64800, 86400])
    np.testing.assert_array_equal(inputs.make_tofs(100.0, 30.0), [0, 30, 60, 90, 100])
    np.testing.assert_array_equal(inputs.make_tofs(100.0, 500.0), [0, 100])


@pytest.mark.parametrize("option, good, bad", [
    ("--drag-coefficient", ["2.2", "1e-3"], ["0", "-2", "nan", "inf", "x"]),
    ("--area-to-mass", ["0.01"], ["0", "-0.01", "1e999"]),
    ("--reentry-altitude", ["0", "120.5"], ["-1", "nan", "km"]),
])
def test_number_options_name_the_bound(option, good, bad):
    parser = cli.build_parser()
    dest = option[2:].replace("-", "_")
    for text in good:
        args = parser.parse_args(["propagate", "x.tle", option, text])
        assert getattr(args, dest) == float(text)
    expected = ">= 0" if option == "--reentry-altitude" else "positive"
    for text in bad:
        with pytest.raises(inputs.UsageError) as error:
            parser.parse_args(["propagate", "x.tle", option, text])
        message = str(error.value)
        assert option in message and expected in message and repr(text) in message


def test_a_catalog_is_read_as_the_library_reads_it(tmp_path):
    """A name line with a byte that is not UTF-8 (Latin-1) and starting ``1 `` costs
    nothing: the catalog is read as `from_tle` reads it (it used to be refused whole, as
    not a text file), and the name is a name, not a TLE line 1; a CSV's name too."""
    from hapsira_cowell.cli.catalog import read_catalog
    from hapsira_cowell.inputs.tle import from_tle

    lines = (DATA_DIR / "cosmos-1408-debris.tle").read_text().splitlines()[:6]
    path = tmp_path / "latin1.tle"
    path.write_bytes(("\n".join(lines[:3]) + "\n").encode("ascii") + b"1 KUZ DEB \xb2\n"
                     + ("\n".join(lines[4:6]) + "\n").encode("ascii"))
    catalog = read_catalog(path)
    assert catalog.names == ["COSMOS 1408 DEB", "1 KUZ DEB \ufffd"] == from_tle(path).names
    assert list(catalog.numbers) == ["49527", "49537"] and catalog.initial_ok.all()
    assert not any("skipped" in note for note in catalog.notes)
    states = tmp_path / "latin1.csv"
    states.write_bytes(b"name,x,y,z,vx,vy,vz\nD\xe9bris,7000.0,0.0,0.0,0.0,7.546,0.0\n")
    catalog = read_catalog(states)
    assert catalog.names == ["D\ufffdbris"] and catalog.r0.tolist() == [[7000.0, 0.0, 0.0]]


def _fake_chunks():
    """Two chunks of a (3 objects, 2 times) result: what the writers receive."""
    from types import SimpleNamespace
    rr = np.arange(18.0).reshape(3, 2, 3) + 7000.0
    vv = np.arange(18.0).reshape(3, 2, 3) / 10.0
    rr[2, 1] = vv[2, 1] = np.nan
    status = np.array([0, 0, 1])
    reentry = np.array([np.nan, np.nan, 30.0])
    chunks = []
    for first, last in ((0, 2), (2, 3)):
        res = SimpleNamespace(rr=rr[first:last], vv=vv[first:last], status=status[first:last],
                              nsteps=np.full(last - first, 7))
        chunks.append((first, last, res, reentry[first:last]))
    return ["a", "b, c", "d"], rr, vv, status, reentry, chunks


@pytest.mark.parametrize("fmt", ["npz", "csv", "parquet"])
def test_writers_chunk_by_chunk(tmp_path, fmt):
    from astropy.time import Time
    names, rr, vv, status, reentry, chunks = _fake_chunks()
    tofs = np.array([0.0, 60.0])
    path = str(tmp_path / f"out.{fmt}")
    epoch = Time("2025-02-15T15:28:59.424", scale="utc")
    if fmt == "npz":
        sink = writers.NpzWriter(path, names, tofs, {"epoch": np.array("e")})
        for first, last, res, t_reentry in chunks:
            sink.write(first, last, res, t_reentry)
    else:
        sink = writers.RowWriter(path, fmt, tofs, writers.output_times(epoch, tofs))
        for first, last, res, t_reentry in chunks:
            sink.write(names[first:last], res, t_reentry)
    sink.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"out.{fmt}"]  # no leftovers
    if fmt == "npz":
        with np.load(path, allow_pickle=False) as data:
            np.testing.assert_array_equal(data["rr"], rr)
            np.testing.assert_array_equal(data["vv"], vv)
            np.testing.assert_array_equal(data["reentry"], reentry)
            assert list(data["names"]) == names and data["epoch"] == "e"
            assert data["status"].tolist() == [0, 0, 1] and data["nsteps"].tolist() == [7] * 3
        return
    if fmt == "csv":
        import csv
        with open(path, newline="") as source:
            rows = list(csv.DictReader(source))
        values = np.array([[float(r[c]) for c in ("x", "y", "z", "vx", "vy", "vz")]
                           for r in rows])
        tol = 1e-9
    else:
        import pyarrow.parquet as pq
        table = pq.read_table(path).to_pydict()
        rows = [dict(zip(table, values)) for values in zip(*table.values())]
        values = np.array([[r[c] for c in ("x", "y", "z", "vx", "vy", "vz")] for r in rows])
        tol = 0.0
    assert [r["name"] for r in rows] == ["a", "a", "b, c", "b, c", "d", "d"]
    assert [float(r["t"]) for r in rows] == [0.0, 60.0] * 3
    assert rows[1]["utc"] == "2025-02-15T15:29:59.424000"
    assert [int(r["status"]) for r in rows] == [0, 0, 0, 0, 1, 1]
    assert float(rows[4]["reentry"]) == 30.0
    np.testing.assert_allclose(values, np.concatenate([rr, vv], -1).reshape(6, 6), rtol=tol,
                               atol=tol)


def test_cli_imports_no_solver_at_module_level():
    # the target is fixed when hapsira_core is imported: main() must set it first
    tree = ast.parse(Path(cli.__file__).read_text())
    for node in tree.body:
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [("." * node.level) + (node.module or "")]
        else:
            continue
        assert not any(n.startswith(("hapsira_core", "hapsira_cowell", ".")) for n in names), names


def test_built_right_hand_side_matches_perturbations():
    from hapsira_cowell.models.perturbations import (J2_EARTH, J2_perturbation,
                                              atmospheric_drag_exponential)
    f = models.build_rhs(("drag", "j2"))
    assert models.build_rhs(("j2", "drag")) is f  # one function per set: compiled once
    if settings.TARGET == "cuda":
        return  # device functions cannot be called from the host
    rr, vv, p = (6600.0, 100.0, 300.0), (0.1, 7.7, 0.2), np.array([2.2, 1e-8])
    drr, dvv = f(0.0, rr, vv, 398600.4418, p)
    expected = np.array(two_body(0.0, rr, vv, 398600.4418, p)[1]) \
        + J2_perturbation(0.0, rr, vv, 398600.4418, J2_EARTH, 6378.137) \
        + atmospheric_drag_exponential(0.0, rr, vv, 398600.4418, 6378.137 + models.H_RHO0,
                                       2.2, 1e-8, models.H0, models.RHO0)
    assert drr == vv
    np.testing.assert_allclose(dvv, expected, rtol=1e-14)


def test_throughput_plot_reads_benchmark_files(tmp_path):
    from hapsira_cowell.cli.plots import benchmark_points, throughput
    bench = {"name": "box", "target": "cuda", "runs": [
        {"variant": "j2", "n_objects": 1000, "seconds": 0.01,
         "peers": {"scipy": {"n_objects": 1000, "seconds": 50.0}}},
        {"variant": "j2", "n_objects": 10000, "seconds": 0.02,
         "peers": {"scipy": {"n_objects": 10000, "seconds": 500.0}}}]}
    points = benchmark_points(bench, "file")
    assert points == {"hapsira cuda (box), j2": [(1000, 1e5), (10000, 5e5)],
                      "scipy, j2": [(1000, 20.0), (10000, 20.0)]}
    path = tmp_path / "bench.json"
    path.write_text(__import__("json").dumps(bench))
    assert_png(throughput([path], tmp_path / "throughput.png"))


# ---------------------------------------------------------- compile errors in callbacks

@hjit
def broken_rhs(t, rr, vv, k, p):
    drr, dvv = two_body(t, rr, vv, k, p)
    bad = rr[0] + "km"  # a number plus a string: numba cannot type this
    return drr, (dvv[0] + bad, dvv[1], dvv[2])


@hjit
def broken_event(t, rr, vv, k, p):
    return rr.altitude  # tuples have no such attribute


def _line_of(function, text):
    lines, first = inspect.getsourcelines(function.py_func)
    return first + next(i for i, line in enumerate(lines) if text in line)


@pytest.mark.skipif(SIMULATED, reason="the CUDA simulator runs Python: nothing is compiled")
@pytest.mark.parametrize("which", ["f", "event"])
def test_user_function_error_names_the_callback_and_line(which, monkeypatch):
    monkeypatch.setattr(settings, "DEBUG", True)  # numba's exception stays the cause
    f, events = (broken_rhs, []) if which == "f" else (two_body, [Event(broken_event)])
    user = broken_rhs if which == "f" else broken_event
    offending = 'bad = rr[0] + "km"' if which == "f" else "return rr.altitude"
    functions = [f] + [e.g for e in events]
    try:
        cowell(398600.4418, np.array([7000.0, 0.0, 0.0]), np.array([0.0, 7.5, 0.0]), [60.0],
               f=f, events=events)
    except Exception as exc:  # noqa: BLE001 - numba's TypingError (or LoweringError)
        raised = exc
    else:
        pytest.fail("the broken callback compiled")
    # cowell() may already raise the helper's error from numba's: test the helper on numba's
    numba_error = raised.__cause__ if isinstance(raised, CallbackCompileError) else raised
    assert type(numba_error).__module__.startswith("numba")
    error = user_function_error(numba_error, functions)
    numba_message = str(numba_error)
    assert user_function_error(error, functions) is error  # idempotent
    assert isinstance(error, CallbackCompileError) and isinstance(error, TypeError)
    name = user.py_func.__name__
    head = (f"user function '{name}' ({inspect.getsourcefile(user.py_func)}:"
            f"{_line_of(user, offending)}) does not compile: {offending}")
    assert str(error).splitlines()[0].startswith(head), str(error).splitlines()[0]
    assert error.function == name and error.source_line.startswith(offending)
    # numba's own explanation follows
    assert "numba says:" in str(error) and error.detail in str(error)
    explanation = "No implementation of function" if which == "f" else \
        "Unknown attribute 'altitude'"
    assert explanation in error.detail and explanation in numba_message


def test_user_function_error_leaves_other_errors_alone():
    exc = ValueError("r0: expected shape (3,) or (N, 3)")
    assert user_function_error(exc, [broken_rhs, None]) is exc


# ------------------------------------------------- environment, --version, --tof (issue 14/15)

CONSOLE_SCRIPT = "import sys; from hapsira_cowell.cli import main; sys.exit(main())"
BAD_ENVIRONMENTS = {
    "unknown target": ({"HAPSIRA_TARGET": "bogus"}, "HAPSIRA_TARGET='bogus' is not valid"),
    # no device visible: numba finds no GPU even on a machine that has one
    "cuda without a GPU": ({"HAPSIRA_TARGET": "cuda", "NUMBA_ENABLE_CUDASIM": "0",
                            "CUDA_VISIBLE_DEVICES": ""}, "needs a CUDA GPU"),
}


@pytest.mark.parametrize("case", list(BAD_ENVIRONMENTS))
@pytest.mark.parametrize("args", [["--help"], ["--version"], ["propagate", "--tof", "1h"],
                                  ["demo", "--n", "3"]])
@pytest.mark.parametrize("entry", ["module", "console script"])
def test_bad_environment_is_one_line_and_exit_2(tmp_path, case, args, entry):
    env_update, expected = BAD_ENVIRONMENTS[case]
    env = dict(os.environ, HAPSIRA_CACHE="0", **env_update)
    start = ["-m", "hapsira_cowell.cli"] if entry == "module" else ["-c", CONSOLE_SCRIPT]
    done = subprocess.run([sys.executable, *start, *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("hapsira-cowell: error: ") and expected in lines[0]
    assert done.stdout == "" and list(tmp_path.iterdir()) == []


def test_version_and_the_package_imports_no_solver():
    from hapsira_cowell import __version__
    done = subprocess.run([sys.executable, "-m", "hapsira_cowell.cli", "--version"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout == f"hapsira-cowell {__version__}\n"
    # importing the package (and its command line) leaves the target open ...
    probe = ("import sys, hapsira_cowell, hapsira_cowell.cli, hapsira_cowell.inputs.tle; "
             "print('hapsira_core' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, HAPSIRA_TARGET="bogus"))
    assert done.returncode == 0 and done.stdout == "False\n", done.stderr
    # ... and `from hapsira_cowell import cowell` is the routing function, however imported
    # first (numpy to the propagator, Dask arrays to the Dask front)
    probe = ("import hapsira_cowell.propagation.propagator as m, sys; "
             "from hapsira_cowell import cowell; "
             "import hapsira_cowell.propagation.api as api; "
             "print(callable(cowell), cowell is api.cowell, cowell.__wrapped__ is m.cowell)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=120)
    assert done.stdout == "True True True\n", done.stderr
    assert callable(cowell) and cowell.__module__ == "hapsira_cowell.propagation.propagator"


def test_negative_tof_is_backward_and_bad_ones_name_tof(tmp_path, capsys):
    from hapsira_cowell.cli.inputs import parse_duration
    assert parse_duration("-1.5d", "--tof", allow_negative=True) == -129600.0
    assert cli._join_negative_values(["propagate", "--tof", "-1d", "--every", "-2h", "-x"]) \
        == ["propagate", "--tof=-1d", "--every=-2h", "-x"]
    np.testing.assert_array_equal(inputs.make_tofs(-100.0, 30.0), [0, -30, -60, -90, -100])
    out = str(tmp_path / "out.npz")
    for bad, words in (("-1x", "'-1x'"), ("-", "'-'"), ("-0d", "'-0d'"), ("--", "--tof")):
        assert cli.main(["propagate", "--tof", bad, "--out", out]) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and "--tof" in lines[0] and words in lines[0], lines
    assert not (tmp_path / "out.npz").exists()


@pytest.mark.parametrize("flags, says", [
    (["--every", "-10min"], "--every: '-10min' must be positive; expected a positive number "
                            "and a unit (s, min, h or d), e.g. 30s, 90min, 6h, 1.5d"),
    (["--every=-2h"], "--every: '-2h' must be positive;"),
    (["--every", "0s"], "--every: '0s' must be positive;"),
    (["--every", "1e999s"], "--every: '1e999s' is not a finite duration;"),
    (["--every", "10"], "--every: '10' has no unit;"),
    (["--tof", "-0d"], "--tof: '-0d' must not be zero; expected a number and a unit (s, min, "
                       "h or d), e.g. 1d, or -1d to propagate backward"),
])
def test_durations_that_must_be_positive_say_so(flags, says, tmp_path, capsys):
    """Issue 51 item 3: ``--every -10min`` said 'cannot read'."""
    assert cli.main(["propagate", *flags, "--out", str(tmp_path / "out.npz")]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"hapsira-cowell: error: {says}") and error.count("\n") == 1
    assert inputs.parse_duration("- 1d", "--tof", allow_negative=True) == -86400.0


def test_oem_of_a_csv_catalog_needs_its_epoch_and_frame(tmp_path, capsys):
    need("oem")
    catalog = tmp_path / "states.csv"
    catalog.write_text("name,x,y,z,vx,vy,vz\na,7000.0,0.0,0.0,0.0,7.546,0.0\n")
    out = str(tmp_path / "oem")
    for extra, words in (([], "--frame"), (["--frame", "GCRF"], "needs the epoch"),
                         (["--frame", "GCRF", "--epoch", "yesterday"], "--epoch")):
        assert cli.main(["propagate", str(catalog), "--format", "oem", "--out", out,
                         *extra]) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and words in lines[0], lines
    assert sorted(p.name for p in tmp_path.iterdir()) == ["states.csv"]


def test_default_catalog_backward_to_oem(tmp_path):
    """No catalog: the embedded Iridium 33 debris, propagated an hour back, as OEM files."""
    need("oem")
    from astropy import units as u
    from hapsira_cowell.cli.catalog import DEFAULT_CATALOG
    from hapsira_cowell.inputs.tle import from_tle
    from hapsira_cowell.outputs.oem import read_oem
    from reference import Reference, two_body_rhs

    assert DEFAULT_CATALOG.read_text() == IRIDIUM.read_text()  # the shipped file, unchanged
    out = tmp_path / "oem"
    out.mkdir()  # with --force: another run's .oem files go, other files stay
    (out / "00200-OTHER-RUN.oem").write_text("another run's file")
    (out / "notes.txt").write_text("mine")
    done = run_cli("propagate", "--tof", "-1h", "--every", "30min", "--perturbations", "none",
                   "--format", "oem", "--out", out, "--force", "--target", CLI_TARGET,
                   cwd=tmp_path, cache=False)  # (cold: the compile notice below)
    assert_ok(done)
    assert not (out / "00200-OTHER-RUN.oem").exists() and (out / "notes.txt").exists()
    (out / "notes.txt").unlink()
    assert "objects: 119 (TLE, frame TEME" in done.stdout
    assert "reached the end (-1 h): 119" in done.stdout
    assert "wrote " in done.stdout and "(oem, 119 files)" in done.stdout
    assert f"compiling kernels for target {CLI_TARGET}" in done.stderr
    ephemerides = read_oem(out)
    catalog = from_tle(IRIDIUM)
    epoch = catalog.epochs.max()
    r0, v0, ok = catalog.states_at(epoch)
    assert ok.all() and len(ephemerides) == 119
    assert [e.name for e in ephemerides] == catalog.names
    assert ephemerides[0].id == "1997-051C" and ephemerides[0].frame == "TEME"
    for i in (0, 50, 118):
        e = ephemerides[i]
        np.testing.assert_allclose((e.times - epoch).to_value(u.s), [-3600.0, -1800.0, 0.0],
                                   atol=1e-6)
        np.testing.assert_allclose(e.r[-1], r0[i], rtol=1e-12)  # the start, at the epoch
        ref = Reference(two_body_rhs(398600.4418), r0[i], v0[i], np.array([-1800.0, -3600.0]))
        np.testing.assert_allclose(e.r[:2][::-1], ref.rr, rtol=1e-9)


# ----------------------- refused before any propagation, in bounded memory (issue 26)

@pytest.fixture
def no_propagation(monkeypatch):
    """Fail the test if a command gets as far as propagating."""
    from hapsira_cowell.cli import batch

    def propagate(*args, **kwargs):
        raise AssertionError("the command propagated; it should have stopped before")
    monkeypatch.setattr(batch, "propagate", propagate)


def one_line_naming(capsys, *words):
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("hapsira-cowell: error: "), lines
    for word in words:
        assert word in lines[0], lines
    return lines[0]


@pytest.mark.parametrize("source", ["/dev/zero", "fifo"])
def test_a_catalog_that_is_not_a_regular_file_is_refused_unread(tmp_path, source):
    """/dev/zero was read without end (8.8 GB and growing, then MemoryError); a FIFO
    blocked. Subprocess with a timeout: before the fix this hung instead of failing."""
    if source == "fifo":
        if not hasattr(os, "mkfifo"):
            pytest.skip("no FIFOs here")
        os.mkfifo(tmp_path / "fifo")
    elif not os.path.exists(source):
        pytest.skip(f"no {source} here")
    done = run_cli("propagate", source, "--out", "out.npz", cwd=tmp_path, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hapsira-cowell: error: catalog "), lines
    assert source in lines[0] and "not a regular file" in lines[0]
    assert done.stdout == "" and not (tmp_path / "out.npz").exists()


def test_a_catalog_over_the_size_cap_is_refused_unread(tmp_path, capsys, no_propagation):
    big = tmp_path / "big.tle"
    with open(big, "wb") as file:
        file.truncate(300_000_000)  # sparse: 300 MB that take no disk
    out = str(tmp_path / "out.npz")
    assert cli.main(["propagate", str(big), "--out", out]) == 2
    one_line_naming(capsys, "big.tle", "300 MB", "--max-input-mb 256")
    small = tmp_path / "small.tle"
    small.write_bytes(IRIDIUM.read_bytes())  # 30 kB
    assert cli.main(["propagate", str(small), "--max-input-mb", "0.01", "--out", out]) == 2
    one_line_naming(capsys, "small.tle", "--max-input-mb 0.01")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.tle", "small.tle"]


def test_outputs_too_large_for_memory_are_refused_before_allocating(tmp_path, capsys,
                                                                    monkeypatch,
                                                                    no_propagation):
    """--every 1e-9s --tof 1d asked numpy for 629 TiB of output times (a traceback)."""
    out = str(tmp_path / "out.npz")
    assert cli.main(["propagate", "--every", "1e-9s", "--tof", "1d", "--out", out]) == 2
    one_line_naming(capsys, "--every", "--tof", "86,400,000,000,002 output times", "TB")
    monkeypatch.setenv("HAPSIRA_MEMORY_LIMIT", "100MB")
    assert cli.main(["propagate", "--every", "1s", "--tof", "1d", "--out", out]) == 2
    one_line_naming(capsys, "--every 1 s over --tof 1 d", "HAPSIRA_MEMORY_LIMIT")
    assert cli.main(["propagate", "--every", "1min", "--tof", "30d", "--out", out,
                     "--chunk", "1", "--plot", str(tmp_path / "p.png")]) == 2
    one_line_naming(capsys, "--plot", "119 objects")
    assert list(tmp_path.iterdir()) == []
    assert cli.output_memory(119, 145, 10_000, "npz", None) < 2e6  # the default run


def test_an_output_folder_that_cannot_be_written_is_refused_first(tmp_path, monkeypatch,
                                                                   capsys, no_propagation):
    """--out /proc/x.npz got past the checks (os.access says yes to root there)."""
    if not os.path.isdir("/proc/self"):
        pytest.skip("no /proc here")
    monkeypatch.chdir(tmp_path)
    for out in ("/proc/x.npz", "/proc/x.csv"):
        assert cli.main(["propagate", "--out", out]) == 2
        one_line_naming(capsys, f"--out {out!r}", "cannot write in the folder '/proc'")
    assert cli.main(["propagate", "--out", "/dev/null/x.npz"]) == 2  # not a folder
    one_line_naming(capsys, "--out '/dev/null/x.npz'", "does not exist")
    assert cli.main(["propagate", "--plot", "/proc/x.png"]) == 2  # drawn after propagating
    one_line_naming(capsys, "--plot '/proc/x.png'", "cannot write in the folder '/proc'")
    assert list(tmp_path.iterdir()) == []  # the probes are gone
    need("oem")  # last: --format oem is refused first where the oem package is missing
    assert cli.main(["propagate", "--out", "/proc/oem", "--format", "oem"]) == 2
    one_line_naming(capsys, "--out '/proc/oem'", "cannot write in the folder '/proc'")
    assert list(tmp_path.iterdir()) == []


def test_oem_into_a_folder_with_files_needs_force(tmp_path, capsys, no_propagation):
    need("oem")
    out = tmp_path / "oem"
    out.mkdir()
    (out / "00000-OTHER-RUN.oem").write_text("another run's file")
    assert cli.main(["propagate", "--format", "oem", "--out", str(out)]) == 2
    one_line_naming(capsys, f"--out {str(out)!r}", "not empty", "--force")
    assert os.listdir(out) == ["00000-OTHER-RUN.oem"]


def test_oem_header_values_from_the_command_line_are_checked(tmp_path, capsys,
                                                              no_propagation):
    """A newline in --frame or in a CSV name became a header key of its own."""
    need("oem")
    catalog = tmp_path / "states.csv"
    catalog.write_text("name,x,y,z,vx,vy,vz\na,7000.0,0.0,0.0,0.0,7.546,0.0\n")
    out = str(tmp_path / "oem")
    common = ["propagate", str(catalog), "--format", "oem", "--out", out, "--epoch",
              "2025-01-01"]
    assert cli.main([*common, "--frame", "GCRF\nCENTER_NAME = MARS"]) == 2
    one_line_naming(capsys, "--frame", "'\\n'")
    catalog.write_text('name,x,y,z,vx,vy,vz\n"a\nOBJECT_ID = X",7000.0,0.0,0.0,0.0,7.546,0.0\n')
    assert cli.main([*common, "--frame", "GCRF"]) == 2
    one_line_naming(capsys, "--format oem", "names[0] (OBJECT_NAME)", "'\\n'")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["states.csv"]


def test_summary_counts_writing_apart_from_propagation():
    """Issue 25 item 5: the rate is the propagation's alone; the writers' time (OEM's
    was 20 times the propagation's) is printed on its own."""
    import time

    from hapsira_cowell.cli import batch
    from hapsira_cowell.cli.catalog import Catalog

    r0 = np.array([[7000.0, 0.0, 0.0], [0.0, 7100.0, 0.0], [0.0, 0.0, 7200.0]])
    v0 = np.array([[0.0, 7.5, 0.0], [0.0, 0.0, 7.4], [7.3, 0.0, 0.0]])
    catalog = Catalog(["a", "b", "c"], r0, v0, "CSV", "GCRF")
    tofs = np.array([600.0, 1200.0])

    def slow_writer(first, last, res, reentry):
        time.sleep(0.3)

    start = time.perf_counter()
    run = batch.propagate(catalog, tofs, [], chunk=1, writer=slow_writer, progress=False)
    wall = time.perf_counter() - start
    assert run.write_seconds >= 0.9
    # the sleeps are not propagation (whatever the target's speed: the simulator
    # propagates these three objects in about a second)
    assert run.seconds + run.write_seconds <= wall + 1e-3
    lines = batch.summary_lines(run, catalog, tofs[-1], 2.0)
    assert lines[-2] == (f"wall time: 2.0 s (compilation {run.compile_seconds:.1f} s, "
                         f"propagation {run.seconds:.2f} s, writing "
                         f"{run.write_seconds:.2f} s)")
    rate = 3 * 1200.0 / 86400.0 / run.seconds
    assert lines[-1] == (f"throughput: {rate:,.0f} object-days per second of propagation "
                         "(writing not counted)")


def test_the_compile_warm_up_draws_no_units_warning():
    """Issue 51 item 1: the warm-up's own 1 s flight drew 'tofs: ... it looks like days,
    hours or minutes' on every run; a catalog's own flight that short still draws it."""
    import warnings

    from hapsira_cowell import UnitsWarning
    from hapsira_cowell.cli import batch
    from hapsira_cowell.cli.catalog import Catalog

    catalog = Catalog(["a", "b"], np.array([[7000.0, 0.0, 0.0], [0.0, 7100.0, 0.0]]),
                      np.array([[0.0, 7.5, 0.0], [0.0, 0.0, 7.4]]), "CSV", "GCRF")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = batch.propagate(catalog, np.array([0.0, 600.0, 1200.0]), [], progress=False)
    assert run.status.tolist() == [0, 0]
    assert [str(w.message) for w in caught if issubclass(w.category, UnitsWarning)] == []
    with pytest.warns(UnitsWarning, match="tofs: the longest time of flight is 2 s"):
        batch.propagate(catalog, np.array([0.0, 1.0, 2.0]), [], progress=False)


def test_many_objects_in_orbit_are_a_median_and_a_band(tmp_path, monkeypatch):
    """Issue 51 item 7: hundreds of grey lines made a grey band; the plot draws their
    median and 5-95% band, and names the lowest and the highest object."""
    pytest.importorskip("matplotlib", reason="plots need the cli extra (matplotlib)")
    from hapsira_cowell.cli import plots

    figures = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: figures.append(fig) or path)
    n, tofs = 200, np.linspace(0.0, 86400.0, 25)
    heights = np.linspace(400.0, 1200.0, n)  # object i at a constant altitude
    rr = np.zeros((n, tofs.size, 3))
    rr[..., 0] = (6378.0 + heights)[:, None]
    names = [f"DEB {i}" for i in range(n)]
    res = dict(rr=rr, status=np.zeros(n, int), reentry=np.full(n, np.nan), names=names)
    plots.altitude_vs_time(res, tofs, 6378.0, tmp_path / "a.png", reentry_altitude=100.0)
    ax = figures[0].axes[0]
    labels = [text.get_text() for text in ax.get_legend().get_texts()]
    assert labels[:4] == ["in orbit at the end (200): 5-95% of altitudes", "median",
                          "lowest: DEB 0", "highest: DEB 199"]
    median = ax.get_lines()[0].get_ydata()
    np.testing.assert_allclose(median, np.median(heights))
    assert len(ax.get_lines()) <= 5  # median, two named objects, re-entry altitude
    # a few objects keep their own lines
    few = dict(res, rr=rr[:5], status=np.zeros(5, int), reentry=np.full(5, np.nan))
    plots.altitude_vs_time(few, tofs, 6378.0, tmp_path / "b.png")
    assert len(figures[1].axes[0].get_lines()) == 5
