"""``hapsira-cowell screen``: the CSV equals the library's `screen` on the catalog's states,
the histogram is a PNG, bad thresholds are one line and exit 2."""

import csv
import os
import subprocess
import sys

import numpy as np
import pytest
from reference import DATA_DIR

from hapsira_core import settings
from hapsira_cowell.cli import app as cli
from hapsira_cowell.cli.catalog import read_catalog
from hapsira_cowell.cli.screening import parse_distance
from hapsira_cowell.conjunctions import screen
from hapsira_cowell.constants import K_EARTH

SIMULATED = settings.TARGET == "cuda" and settings.cuda_simulator_enabled()
CLI_TARGET = "cpu" if SIMULATED else settings.TARGET  # the simulator is too slow for a catalog
IRIDIUM = DATA_DIR / "iridium-33-debris.tle"


def test_screen_writes_the_library_result_as_csv_and_a_histogram(tmp_path):
    out, plot = tmp_path / "c.csv", tmp_path / "h.png"
    env = dict(os.environ, HAPSIRA_CACHE="0")
    done = subprocess.run([sys.executable, "-m", "hapsira_cowell.cli", "screen", str(IRIDIUM),
                           "--days", "0.25", "--threshold", "20km", "--out", str(out),
                           "--plot", str(plot), "--target", CLI_TARGET], check=False, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "approaches" in done.stdout and f"wrote {out}" in done.stdout
    with open(out) as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) > 0
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert all(row["tca_utc"].startswith("20") and row["name_i"] for row in rows)
    miss = np.array([float(row["miss_km"]) for row in rows])
    assert np.all((miss > 0) & (miss < 20.0))
    if SIMULATED:
        return
    catalog = read_catalog(IRIDIUM)
    assert catalog.initial_ok.all()
    table = screen(K_EARTH, catalog.r0, catalog.v0, (0.0, 0.25 * 86400.0), 20.0)
    np.testing.assert_array_equal([int(row["i"]) for row in rows], table.i)
    np.testing.assert_array_equal([int(row["j"]) for row in rows], table.j)
    np.testing.assert_array_equal([float(row["tca_s"]) for row in rows], table.tca)
    np.testing.assert_array_equal(miss, table.miss)


@pytest.mark.parametrize("text, km", [("5km", 5.0), ("500m", 0.5), ("2.5", 2.5), (" 1e1 km", 10.0)])
def test_thresholds(text, km):
    assert parse_distance(text) == km


@pytest.mark.parametrize("bad", ["5 parsecs", "-1km", "0m", "km"])
def test_bad_threshold_is_one_line_and_exit_2(bad, capsys):
    assert cli.main(["screen", str(IRIDIUM), f"--threshold={bad}"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("hapsira-cowell: error: --threshold") and error.count("\n") == 1
