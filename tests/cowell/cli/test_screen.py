"""``hapsira-cowell screen``: the CSV equals the library's `screen` on the catalog's states,
the histogram is a PNG, the CDMs hold the CSV's approaches, bad thresholds and CDM options
are one line and exit 2."""

import csv
import os
import subprocess
import sys

import numpy as np
import pytest
from extras import need, needs
from reference import DATA_DIR

from hapsira_core import settings
from hapsira_cowell.cli import app as cli
from hapsira_cowell.cli.catalog import read_catalog
from hapsira_cowell.cli.screening import parse_distance
from hapsira_cowell.conjunctions import screen
from hapsira_cowell.constants import K_EARTH
from hapsira_cowell.inputs.tle import from_tle
from hapsira_cowell.outputs.cdm import read_cdm

SIMULATED = settings.TARGET == "cuda" and settings.cuda_simulator_enabled()
CLI_TARGET = "cpu" if SIMULATED else settings.TARGET  # the simulator is too slow for a catalog
IRIDIUM = DATA_DIR / "iridium-33-debris.tle"


def test_screen_writes_the_library_result_as_csv_and_a_histogram(tmp_path):
    need("ccsds_ndm")  # --cdm
    out, plot, cdm = tmp_path / "c.csv", tmp_path / "h.png", tmp_path / "cdm"
    # the test run's kernel cache (tests/conftest.py), so that the library's `screen`
    # below loads the kernels that the command compiled instead of compiling them again
    env = dict(os.environ, HAPSIRA_CACHE="1" if settings.CACHE else "0")
    done = subprocess.run([sys.executable, "-m", "hapsira_cowell.cli", "screen", str(IRIDIUM),
                           "--days", "0.25", "--threshold", "20km", "--out", str(out),
                           "--plot", str(plot), "--target", CLI_TARGET, "--cdm", str(cdm),
                           "--sigma", "100,1000,100,0.1,1,0.1", "--cdm-below", "15km"],
                          check=False, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "approaches" in done.stdout and f"wrote {out}" in done.stdout
    with open(out) as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) > 0
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert all(row["tca_utc"].startswith("20") and row["name_i"] for row in rows)
    miss = np.array([float(row["miss_km"]) for row in rows])
    assert np.all((miss > 0) & (miss < 20.0))
    # one CDM per approach below --cdm-below, the CSV's numbers in metres
    files = sorted(os.listdir(cdm))
    below = [row for row in rows if float(row["miss_km"]) < 15.0]
    assert len(files) == len(below) > 0 and f"{len(files)} CDMs in {cdm}" in done.stdout
    catalog = read_catalog(IRIDIUM)
    for row in below:
        i, j = int(row["i"]), int(row["j"])
        messages = [read_cdm(cdm / f) for f in files
                    if f.startswith(f"CDM_{catalog.numbers[i]}_{catalog.numbers[j]}_")]
        relatives = [m.body.relative_metadata_data for m in messages]
        same = [m for m, rel in zip(messages, relatives)
                if rel.miss_distance.value == float(row["miss_km"]) * 1e3]
        assert len(same) == 1  # this approach's, not the pair's other approaches'
        relative = same[0].body.relative_metadata_data
        vector = relative.relative_state_vector
        position = [vector.relative_position_r.value, vector.relative_position_t.value,
                    vector.relative_position_n.value]
        assert np.linalg.norm(position) == pytest.approx(relative.miss_distance.value,
                                                         abs=1e-2)
        for which, segment in zip((i, j), same[0].body.segment):
            assert segment.metadata.international_designator == catalog.ids[which]
            matrix = segment.data.covariance_matrix
            # --sigma's RTN variances grown along the orbit (the along-track most)
            assert matrix.ct_t.value > 1e6 and matrix.cr_r.value > 0
    if SIMULATED:
        return
    assert catalog.initial_ok.all()
    table = screen(K_EARTH, catalog.r0, catalog.v0, (0.0, 0.25 * 86400.0), 20.0)
    np.testing.assert_array_equal([int(row["i"]) for row in rows], table.i)
    np.testing.assert_array_equal([int(row["j"]) for row in rows], table.j)
    np.testing.assert_array_equal([float(row["tca_s"]) for row in rows], table.tca)
    np.testing.assert_array_equal(miss, table.miss)


@pytest.mark.parametrize("text, km", [("5km", 5.0), ("500m", 0.5), ("2.5 KM", 2.5),
                                      (" 1e1 km", 10.0)])
def test_thresholds(text, km):
    assert parse_distance(text) == km


@pytest.mark.parametrize("bad, says", [
    ("5", "'5' has no unit"),  # km or m? refused as --tof 1 is (issue 51)
    ("5 parsecs", "'5 parsecs' has the unknown unit 'parsecs'"),
    ("-1km", "'-1km' must be positive"),
    ("0m", "'0m' must be positive"),
    ("1e999km", "'1e999km' is not a finite distance"),
    ("km", "cannot read 'km' as a distance"),
])
@pytest.mark.parametrize("joined", [True, False])
def test_bad_threshold_is_one_line_and_exit_2(bad, says, joined, capsys):
    flags = [f"--threshold={bad}"] if joined else ["--threshold", bad]
    assert cli.main(["screen", str(IRIDIUM), *flags]) == 2
    error = capsys.readouterr().err
    assert error == (f"hapsira-cowell: error: --threshold: {says}; expected a positive number "
                     "and a unit (km or m), e.g. 5km or 500m\n")


def test_a_bare_cdm_below_is_refused_naming_it(tmp_path, capsys):
    pytest.importorskip("ccsds_ndm", reason="the cdm extra (ccsds-ndm) checks first")
    assert cli.main(["screen", str(IRIDIUM), "--cdm", str(tmp_path / "cdm"), "--sigma",
                     "1,2,3", "--cdm-below", "1"]) == 2
    assert capsys.readouterr().err.startswith("hapsira-cowell: error: --cdm-below: '1' has "
                                              "no unit; expected a positive number and a unit")


CSV_STATES = "name,x,y,z,vx,vy,vz\nA,7000,0,0,0,7.5,0\nB,0,7000,0,-7.5,0,0\n"


@pytest.mark.parametrize("flags, message", [
    (["--cdm", "{tmp}/cdm"], "--cdm: a CDM carries each object's covariance"),
    (["--cdm", "{tmp}/cdm", "--sigma", "1,2"], "--sigma: expected 3 or 6 numbers"),
    (["--cdm", "{tmp}/cdm", "--sigma", "1,x,2"], "--sigma: cannot read '1,x,2'"),
    (["--cdm", "{tmp}/cdm", "--sigma", "0,0,0,1,1,1"], "--sigma: expected finite standard"),
    (["--sigma", "1,2,3"], "--sigma: only used with --cdm DIR"),
    (["--cdm-below", "1km"], "--cdm-below: only used with --cdm DIR"),
    (["--cdm", "{tmp}/no/cdm", "--sigma", "1,2,3"], "--cdm '{tmp}/no/cdm': the folder"),
    (["--cdm", "{tmp}/cdm", "--sigma", "1,2,3", "--cdm-below", "far"], "--cdm-below: cannot"),
    # the catalog's epoch and frame are checked once ccsds-ndm is found
    (["--pc"], "--pc: the probability needs each object's covariance"),
    (["--hbr", "10m"], "--hbr: only used with --pc"),
    (["--pc-above", "1e-4"], "--pc-above: only used with --pc"),
    (["--pc-method", "chan"], "--pc-method: only used with --pc"),
    (["--pc", "--sigma", "1,2,3", "--hbr", "-1m"], "--hbr: '-1m' must be positive"),
    (["--pc", "--sigma", "1,2,3", "--hbr", "10"], "--hbr: '10' has no unit"),
    (["--pc", "--sigma", "1,2,3", "--pc-above", "often"], "--pc-above: cannot read 'often'"),
    (["--pc", "--sigma", "1,2,3", "--pc-above", "2"], "--pc-above: '2' is not between 0 and 1"),
    (["--pc", "--sigma", "1,2,3", "--pc-method", "max", "--cdm", "{tmp}/cdm"],
     "--pc-method max: the largest probability over the covariance's size is not"),
    (["--pc-samples", "1000"], "--pc-samples: only used with --pc"),
    (["--pc-seed", "7"], "--pc-seed: only used with --pc"),
    (["--pc", "--sigma", "1,2,3", "--pc-samples", "1000"],
     "--pc-samples: only used with --pc-method monte_carlo or monte_carlo_epoch, got "
     "--pc-method foster"),
    (["--pc", "--sigma", "1,2,3", "--pc-method", "chan", "--pc-seed", "7"],
     "--pc-seed: only used with --pc-method monte_carlo or monte_carlo_epoch, got "
     "--pc-method chan"),
    (["--pc", "--sigma", "1,2,3", "--pc-method", "monte_carlo", "--pc-samples", "0"],
     "--pc-samples: '0' is not a whole number >= 1"),
    (["--pc", "--sigma", "1,2,3", "--pc-method", "monte_carlo", "--pc-samples", "2.5"],
     "--pc-samples: '2.5' is not a whole number >= 1"),
    (["--pc", "--sigma", "1,2,3", "--pc-method", "monte_carlo", "--pc-seed", "-3"],
     "--pc-seed: '-3' is not a whole number >= 0"),
    (["--pc", "--sigma", "1,2,3", "--pc-method", "monte_carlo", "--pc-seed", "x"],
     "--pc-seed: 'x' is not a whole number >= 0"),
    (["--hbr-shape", "square"], "--hbr-shape: only used with --pc"),
    (["--pc", "--sigma", "1,2,3", "--hbr-shape", "square", "--pc-method", "chan"],
     "--hbr-shape square: integrated by --pc-method foster only, got --pc-method chan"),
    (["--pc", "--sigma", "1,2,3", "--pc-method", "monte_carlo_epoch", "--pc-samples", "1"],
     "--pc-samples: 1 clone pairs; monte_carlo_epoch needs at least 2"),
    (["--pc", "--sigma", "1,2,3", "--pc-method", "monte_carlo_epoch", "--hbr-shape", "square"],
     "--hbr-shape square: integrated by --pc-method foster only, got --pc-method "
     "monte_carlo_epoch"),
    (["--pc", "--sigma", "1,2,3", "--pc-method", "montecarlo"],
     "argument --pc-method: invalid choice: 'montecarlo'"),
    pytest.param(["--cdm", "{tmp}/cdm", "--sigma", "1,2,3", "--frame", "GCRF"],
                 "--frame GCRF: a TLE catalog's states are TEME", marks=needs("ccsds_ndm")),
    pytest.param(["{csv}", "--cdm", "{tmp}/cdm", "--sigma", "1,2,3", "--epoch", "2025-01-01"],
                 "--cdm: say the frame of the CSV catalog's states with --frame",
                 marks=needs("ccsds_ndm")),
    pytest.param(["{csv}", "--cdm", "{tmp}/cdm", "--sigma", "1,2,3", "--frame", "GCRF"],
                 "--cdm: a CDM's times are UTC; give the CSV catalog's epoch with --epoch",
                 marks=needs("ccsds_ndm")),
])
def test_bad_cdm_options_are_one_line_and_exit_2(flags, message, tmp_path, capsys):
    (tmp_path / "states.csv").write_text(CSV_STATES)
    flags = [f.format(tmp=tmp_path, csv=tmp_path / "states.csv") for f in flags]
    catalog = [] if flags[0].endswith(".csv") else [str(IRIDIUM)]
    assert cli.main(["screen", *catalog, *flags]) == 2
    error = capsys.readouterr().err
    assert error.startswith("hapsira-cowell: error: " + message.format(tmp=tmp_path)), error
    assert error.count("\n") == 1
    assert not (tmp_path / "cdm").exists()


def test_the_summary_names_the_closest_pair_by_name_and_number():
    """Issue 51 item 7: 'closest: objects 3 and 7' named catalog rows."""
    from astropy import units as u

    from hapsira_cowell.cli.catalog import Catalog
    from hapsira_cowell.cli.screening import describe
    from hapsira_cowell.propagation.conjunctions import ConjunctionTable

    catalog = read_catalog(IRIDIUM)
    table = ConjunctionTable(np.array([0, 3]), np.array([5, 7]), np.array([60.0, 120.0]),
                             np.array([2.5, 0.125]), np.array([10.0, 11.0]))
    stats = dict(windows=4, dt=30.0, grid_pairs=9, candidates=2, propagate_s=0.5,
                 broad_s=0.25, narrow_s=0.125)
    closest = describe(table, stats, 1.0, catalog)[1]
    utc = (catalog.epoch + 120.0 * u.s).utc.isot
    assert closest == (f"closest: {catalog.names[3]} (#{catalog.numbers[3]}) and "
                       f"{catalog.names[7]} (#{catalog.numbers[7]}), 0.125 km at {utc} UTC")
    assert catalog.numbers[3] != "4" and catalog.numbers[3].isdigit()  # not a row number
    states = Catalog(["A", "B", "C"], np.ones((3, 3)), np.ones((3, 3)), "CSV", "GCRF")
    table = ConjunctionTable(np.array([1]), np.array([2]), np.array([60.0]),
                             np.array([0.5]), np.array([10.0]))
    assert describe(table, stats, 1.0, states)[1] == ("closest: B (row 1) and C (row 2), "
                                                      "0.500 km at 60.0 s")


def test_the_histogram_counts_on_integer_ticks(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib", reason="plots need the cli extra (matplotlib)")
    from hapsira_cowell.cli import plots
    from hapsira_cowell.cli.screening import miss_histogram
    from hapsira_cowell.propagation.conjunctions import ConjunctionTable

    figures = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: figures.append(fig) or path)
    miss = np.array([0.5, 1.2, 3.3])  # 1 approach per bin at most: matplotlib drew 0.2 steps
    table = ConjunctionTable(np.zeros(3, int), np.ones(3, int), np.arange(3.0), miss,
                             np.ones(3))
    miss_histogram(tmp_path / "h.png", table, 5.0)
    ticks = figures[0].axes[0].get_yticks()
    assert len(ticks) >= 2 and np.all(ticks == np.round(ticks)), ticks


def test_the_plot_with_pc_draws_each_probability_against_its_miss(tmp_path, monkeypatch):
    """--plot with --pc: beside the histogram, each approach's Pc (log scale) against its
    miss distance; flagged ones apart, a Pc of 0 on the axis' floor, NaN ones counted,
    --pc-above a dashed line."""
    pytest.importorskip("matplotlib", reason="plots need the cli extra (matplotlib)")
    from hapsira_cowell.cli import plots
    from hapsira_cowell.cli.screening import miss_histogram
    from hapsira_cowell.conjunctions import Probability
    from hapsira_cowell.propagation.conjunctions import ConjunctionTable

    figures = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: figures.append(fig) or path)
    miss = np.array([0.5, 1.2, 3.3, 4.0, 2.2])
    pc = np.array([3e-4, 2e-7, 0.0, np.nan, 5e-2])
    flags = np.array([False, False, False, False, True])
    table = ConjunctionTable(np.zeros(5, int), np.ones(5, int), np.arange(5.0), miss,
                             np.ones(5))
    result = Probability(pc=pc, method="foster", repaired=flags,
                         long_encounter=np.zeros(5, bool), hbr=0.02)
    miss_histogram(tmp_path / "h.png", table, 5.0, pc=result, pc_above=1e-6)
    left, right = figures[0].axes
    assert left.get_xlabel() == right.get_xlabel() == "miss distance (km)"
    assert right.get_yscale() == "log" and right.get_ylim()[0] <= 2e-8
    points = {c.get_label(): c.get_offsets() for c in right.collections}
    np.testing.assert_array_equal(points["Pc (2)"], [[0.5, 3e-4], [1.2, 2e-7]])
    np.testing.assert_array_equal(points["flagged (repaired covariance or long encounter) (1)"],
                                  [[2.2, 5e-2]])
    np.testing.assert_array_equal(points["Pc = 0 (1)"], [[3.3, right.get_ylim()[0]]])
    labels = [t.get_text() for t in right.get_legend().get_texts()]
    assert "no Pc (1: no state at the TCA)" in labels and "--pc-above 1e-06" in labels
    assert "HBR 20 m" in right.get_title()


def test_an_entry_given_twice_is_screened_once_and_named(tmp_path, capsys):
    """Review finding: a catalog entry given twice gave hundreds of rows of miss 0 (the
    refinement's steps), without a word. The CSV is the catalog's without the copy, and
    the summary names the copy by its object and rows (the CSV's i, j)."""
    with open(DATA_DIR / "fengyun-1c-debris.tle") as handle:
        lines = handle.read().splitlines()
    entries = [lines[x:x + 3] for x in range(0, 90, 3)]  # 30 objects: name, line 1, line 2
    assert all(entry[1].startswith("1 ") for entry in entries)
    tables = []
    for name, listed in (("plain", entries), ("twice", entries + [entries[6]])):
        path, out = tmp_path / f"{name}.tle", tmp_path / f"{name}.csv"
        path.write_text("\n".join(line for entry in listed for line in entry) + "\n")
        assert cli.main(["screen", str(path), "--days", str(1800 / 86400), "--threshold",
                         "100km", "--out", str(out)]) == 0
        with open(out) as handle:
            tables.append(list(csv.reader(handle)))
        printed = capsys.readouterr()
        assert "IdenticalObjectsWarning" not in printed.err  # told once, in the summary
    assert tables[1] == tables[0] and len(tables[0]) > 1  # a header and approaches
    number = entries[6][1][2:7].strip()
    assert f"{entries[6][0].strip()} (#{number}): row 30 = row 6" in printed.out
    assert printed.out.count("warning: 1 object(s) repeat an earlier object's state (one "
                             "entry given twice?), screened once, as the first, and "
                             "reported under its row only: ") == 1


def _fengyun(tmp_path, count=80):
    with open(DATA_DIR / "fengyun-1c-debris.tle") as handle:
        lines = handle.read().splitlines()
    path = tmp_path / "fengyun.tle"
    path.write_text("\n".join(lines[:3 * count]) + "\n")
    return path


def test_screen_pc_is_the_library_probability_ranked_filtered_and_in_the_cdms(tmp_path,
                                                                             capsys):
    """--pc: the CSV's pc column is `encounters` + `probability` of the library on the
    catalog's states with --sigma's covariance and --hbr; the summary ranks the approaches
    by it; --pc-above keeps those at or above; each CDM carries the CSV's Pc."""
    from hapsira_cowell.conjunctions import ConjunctionTable, encounters
    from hapsira_cowell.covariance import from_rtn

    path = _fengyun(tmp_path)
    out, png = tmp_path / "all.csv", tmp_path / "pc.png"
    flags = ["screen", str(path), "--days", str(1800 / 86400), "--threshold", "100km",
             "--sigma", "5000,30000,5000", "--pc", "--hbr", "50m"]
    assert cli.main([*flags, "--out", str(out), "--plot", str(png)]) == 0
    printed = capsys.readouterr().out
    assert f"wrote {out} and {png}" in printed  # --plot with --pc: Pc against miss beside
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with open(out) as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) > 3
    pc = np.array([float(row["pc"]) for row in rows])
    catalog = read_catalog(path)
    assert catalog.initial_ok.all()
    table = ConjunctionTable(*(np.array([float(row[c]) for row in rows]) for c in
                               ("i", "j", "tca_s", "miss_km", "speed_km_s")))
    sigma = np.array([5000.0, 30000.0, 5000.0, 0, 0, 0]) * 1e-3
    enc = encounters(K_EARTH, catalog.r0, catalog.v0, table,
                     from_rtn(catalog.r0, catalog.v0, np.diag(sigma ** 2)))
    np.testing.assert_allclose(pc, enc.probability(0.05), rtol=1e-12, atol=1e-300)
    assert pc.max() > 0
    # the summary: the highest probabilities first, named
    ranked = [line for line in printed.splitlines() if line.startswith("  ") and "Pc " in line]
    assert "highest Pc (foster, HBR 50 m):" in printed
    values = [float(line.split("Pc ")[1].split(",")[0]) for line in ranked]
    assert len(values) == min(5, len(rows)) and values == sorted(values, reverse=True)
    assert values[0] == pytest.approx(pc.max(), rel=1e-2)
    # --pc-above: the rows at or above, in the same order
    above = float(np.sort(pc)[-2])
    kept = tmp_path / "above.csv"
    assert cli.main([*flags, "--out", str(kept), "--pc-above", repr(above)]) == 0
    assert f"2 of {len(rows)} approaches with Pc >= {above:g}" in capsys.readouterr().out
    with open(kept) as handle:
        assert list(csv.DictReader(handle)) == [row for row, p in zip(rows, pc) if p >= above]
    # --hbr-shape: the library's square of side 2 --hbr
    square = tmp_path / "square.csv"
    assert cli.main([*flags, "--out", str(square), "--hbr-shape", "square"]) == 0
    assert "highest Pc (foster, HBR 50 m square):" in capsys.readouterr().out
    with open(square) as handle:
        np.testing.assert_allclose([float(row["pc"]) for row in csv.DictReader(handle)],
                                   enc.probability(0.05, hbr_shape="square"), rtol=1e-12,
                                   atol=1e-300)
    if not need_cdm():
        return
    cdm = tmp_path / "cdm"
    assert cli.main([*flags, "--out", str(tmp_path / "c.csv"), "--cdm", str(cdm),
                     "--pc-method", "chan"]) == 0
    with open(tmp_path / "c.csv") as handle:
        chan = list(csv.DictReader(handle))
    files = sorted(os.listdir(cdm))
    assert len(files) == len(rows)
    for name in files:
        message = read_cdm(cdm / name)
        rel = message.body.relative_metadata_data
        numbers = [s.metadata.object_designator for s in message.body.segment]
        i, j = (catalog.numbers.index(x) for x in numbers)
        assert rel.collision_probability_method == "CHAN-1997"
        same = [float(row["pc"]) for row in chan if (row["i"], row["j"]) == (str(i), str(j))
                and abs(float(row["miss_km"]) * 1e3 - rel.miss_distance.value) < 1e-6]
        assert same == [rel.collision_probability]


def _csv_encounters(path, out):
    """The rows of the screen's CSV ``out`` of the catalog ``path`` (more than 3), its pc
    columns, and the library's `encounters` of its approaches with the covariance of
    ``--sigma 20000,60000,20000``."""
    from hapsira_cowell.conjunctions import ConjunctionTable, encounters
    from hapsira_cowell.covariance import from_rtn

    with open(out) as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) > 3
    column = {c: np.array([float(row[c]) for row in rows]) for c in ("pc", "pc_low", "pc_high")}
    catalog = read_catalog(path)
    table = ConjunctionTable(*(np.array([float(row[c]) for row in rows]) for c in
                               ("i", "j", "tca_s", "miss_km", "speed_km_s")))
    sigma = np.array([20000.0, 60000.0, 20000.0, 0, 0, 0]) * 1e-3
    return rows, column, encounters(K_EARTH, catalog.r0, catalog.v0, table,
                                    from_rtn(catalog.r0, catalog.v0, np.diag(sigma ** 2)))


def test_screen_pc_monte_carlo_epoch_is_the_librarys_with_its_seed(tmp_path, capsys):
    """--pc-method monte_carlo_epoch: the CSV's pc, pc_low and pc_high are the library's
    Monte Carlo from the epoch (`Encounters.probability`, its default windows) with
    --pc-samples clone pairs and --pc-seed; the summary says them."""
    path = _fengyun(tmp_path)
    flags = ["screen", str(path), "--days", str(1800 / 86400), "--threshold", "100km",
             "--sigma", "20000,60000,20000", "--pc", "--hbr", "5km", "--pc-method",
             "monte_carlo_epoch", "--pc-samples", "300", "--pc-seed", "5"]
    out = tmp_path / "epoch.csv"
    assert cli.main([*flags, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert ("highest Pc (monte_carlo_epoch, 300 samples per approach, seed 5, HBR 5000 m; "
            "95% intervals):") in printed
    rows, column, enc = _csv_encounters(path, out)
    epoch = enc.probability(5.0, "monte_carlo_epoch", samples=300, seed=5, full=True)
    np.testing.assert_array_equal(column["pc"], epoch.pc)
    np.testing.assert_array_equal(np.stack([column["pc_low"], column["pc_high"]], 1),
                                  epoch.interval)
    assert np.all(epoch.hits == np.round(column["pc"] * 300)) and epoch.hits.sum() >= 3


def test_screen_pc_monte_carlo_is_the_library_sampling_with_its_seed(tmp_path, capsys):
    """--pc-method monte_carlo: the CSV's pc, pc_low and pc_high are the library's Monte
    Carlo probability and 95% interval with --pc-samples and --pc-seed (the same draws);
    the summary says the samples and the seed, which repeats the run; the CDMs carry the
    Pc as MONTE-CARLO."""
    path = _fengyun(tmp_path)
    flags = ["screen", str(path), "--days", str(1800 / 86400), "--threshold", "100km",
             "--sigma", "20000,60000,20000", "--pc", "--hbr", "5km", "--pc-method",
             "monte_carlo", "--pc-samples", "20000"]
    out = tmp_path / "mc.csv"
    assert cli.main([*flags, "--out", str(out), "--pc-seed", "7"]) == 0
    printed = capsys.readouterr().out
    assert ("highest Pc (monte_carlo, 20000 samples per approach, seed 7, HBR 5000 m; 95% "
            "intervals):") in printed
    rows, column, enc = _csv_encounters(path, out)
    with pytest.warns(UserWarning):  # a long encounter among them, as the CSV's flags say
        mc = enc.probability(5.0, "monte_carlo", samples=20000, seed=7, full=True)
        foster = enc.probability(5.0)
    np.testing.assert_array_equal(column["pc"], mc.pc)
    np.testing.assert_array_equal(np.stack([column["pc_low"], column["pc_high"]], 1),
                                  mc.interval)
    assert np.all(mc.hits == np.round(column["pc"] * 20000)) and mc.hits.max() >= 50
    assert np.all((column["pc_low"] <= column["pc"]) & (column["pc"] <= column["pc_high"]))
    # the covariances at the TCA have velocity blocks, which tilt the samples' encounter
    # planes: Monte Carlo is not Foster's model here, only near it where the hits are many
    many = mc.hits >= 50
    assert many.sum() >= 3
    np.testing.assert_allclose(mc.pc[many], foster[many], rtol=0.3)
    # the seed repeats the run; without it, a fresh one is drawn and said
    again = tmp_path / "again.csv"
    assert cli.main([*flags, "--out", str(again), "--pc-seed", "7"]) == 0
    assert again.read_text() == out.read_text()
    capsys.readouterr()
    assert cli.main([*flags, "--out", str(tmp_path / "fresh.csv")]) == 0
    seed = int(capsys.readouterr().out.split("per approach, seed ")[1].split(",")[0])
    assert cli.main([*flags, "--out", str(again), "--pc-seed", str(seed)]) == 0
    assert again.read_text() == (tmp_path / "fresh.csv").read_text()
    if not need_cdm():
        return
    cdm = tmp_path / "cdm"
    assert cli.main([*flags, "--out", str(again), "--pc-seed", "7", "--cdm", str(cdm)]) == 0
    files = sorted(os.listdir(cdm))
    assert len(files) == len(rows)
    for name in files:
        rel = read_cdm(cdm / name).body.relative_metadata_data
        assert rel.collision_probability_method == "MONTE-CARLO"
        same = [float(row["pc"]) for row in rows
                if abs(float(row["miss_km"]) * 1e3 - rel.miss_distance.value) < 1e-6]
        assert same == [rel.collision_probability]


def need_cdm():
    try:
        import ccsds_ndm  # noqa: F401
    except ImportError:
        return False
    return True


def _fengyun_omms(tmp_path, count=80, without=()):
    """The first ``count`` Fengyun 1C objects as one KVN file of OMMs, each with a
    covariance of 5 km, 30 km, 5 km along R, T, N at its epoch (none for ``without``)."""
    from cowell.inputs.test_ndm import omm_text

    tle = from_tle((DATA_DIR / "fengyun-1c-debris.tle").read_text().splitlines()[:3 * count])
    P = np.diag(np.array([5.0, 30.0, 5.0, 0.0, 0.0, 0.0]) ** 2)
    path = tmp_path / f"fengyun-{count}-{len(without)}.omm"
    path.write_text("\n".join(omm_text(s, n, "kvn", None if k in without else P, "RTN")
                              for k, (s, n) in enumerate(zip(tle.satellites, tle.names))))
    return path


def test_screen_pc_of_an_omm_file_uses_its_covariances(tmp_path, capsys):
    """--pc on an OMM file without --sigma: the CSV's pc column is the library's route,
    `OMMCatalog.covariances_at` the catalog's epoch, `encounters`, `probability`; an object
    without a covariance is named, exit 2, before anything is screened."""
    need("ccsds_ndm")
    from hapsira_cowell.conjunctions import ConjunctionTable, encounters
    from hapsira_cowell.inputs.omm import read_omms

    path = _fengyun_omms(tmp_path)
    out = tmp_path / "omm.csv"
    flags = ["screen", str(path), "--days", str(1800 / 86400), "--threshold", "100km",
             "--pc", "--hbr", "50m", "--target", CLI_TARGET]
    assert cli.main([*flags, "--out", str(out)]) == 0
    assert "highest Pc (foster, HBR 50 m):" in capsys.readouterr().out
    with open(out) as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) > 3
    omms = read_omms(path)
    pc = np.array([float(row["pc"]) for row in rows])
    assert pc.max() > 0 and np.isfinite(pc).all()
    assert [row["name_i"] for row in rows] == [omms.names[int(row["i"])] for row in rows]
    # an object without a covariance: named, exit 2, before anything is propagated
    missing = _fengyun_omms(tmp_path, 4, without=(2,))
    assert cli.main(["screen", str(missing), "--pc", "--out", str(tmp_path / "x.csv"),
                     "--target", CLI_TARGET]) == 2
    message = capsys.readouterr().err
    assert "--pc: 1 of the OMM file's objects have no covariance at the epoch" in message
    assert f"{omms.names[2]} (#{omms.satnums[2]}), its OMM has none" in message
    assert not (tmp_path / "x.csv").exists()
    epoch = omms.epochs.max()
    r, v, ok = omms.states_at(epoch)
    P, status = omms.covariances_at(epoch)
    assert ok.all() and (status == 0).all()
    table = ConjunctionTable(*(np.array([float(row[c]) for row in rows]) for c in
                               ("i", "j", "tca_s", "miss_km", "speed_km_s")))
    enc = encounters(K_EARTH, r, v, table, P)
    np.testing.assert_allclose(pc, enc.probability(0.05), rtol=1e-12, atol=1e-300)
    # --cdm: the OMMs' covariances at each TCA, COVARIANCE_METHOD = CALCULATED
    cdm = tmp_path / "cdm"
    assert cli.main([*flags, "--out", str(tmp_path / "c.csv"), "--cdm", str(cdm)]) == 0
    first = int(np.argmin(table.tca))
    names = [f for f in os.listdir(cdm) if f.startswith(
        f"CDM_{omms.satnums[int(table.i[first])]}_{omms.satnums[int(table.j[first])]}_")]
    message = read_cdm(cdm / sorted(names)[0])
    assert len(os.listdir(cdm)) == len(rows)
    segment = message.body.segment[0]
    assert segment.metadata.covariance_method.value == "CALCULATED"
    ct_t = segment.data.covariance_matrix.ct_t.value  # m^2
    assert [float(row["tca_s"]) for row in rows].count(table.tca[first]) == 1
    np.testing.assert_allclose(ct_t, enc.P1_rtn[first, 1, 1] * 1e6, rtol=1e-9)
