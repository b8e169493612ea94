"""TLE catalogs: the real debris clouds in ../shared/data, and broken ones made from them."""

import numpy as np
import pytest
from sgp4.api import Satrec

from hapsira_cowell.io import from_tle, tle_checksum
from reference import DATA_DIR as DATA
COUNTS = {"fengyun-1c": 1918, "cosmos-2251": 641, "iridium-33": 119, "cosmos-1408": 10}


def lines_of(name):
    return (DATA / f"{name}-debris.tle").read_text().splitlines()


@pytest.mark.parametrize("name", COUNTS)
def test_real_catalogs_load_whole_and_sane(name):
    cat = from_tle(DATA / f"{name}-debris.tle")
    assert len(cat) == COUNTS[name] and cat.errors == []
    assert cat.r.shape == cat.v.shape == (COUNTS[name], 3)
    r = np.linalg.norm(cat.r, axis=1)
    v = np.linalg.norm(cat.v, axis=1)
    # LEO debris, some of it on eccentric orbits (Fengyun-1C: apogees near 3100 km)
    assert np.all((r > 6500) & (r < 9600)) and np.all((v > 6.0) & (v < 8.5))
    assert np.all(0.5 * v ** 2 - 398600.4418 / r < 0)  # all bound orbits
    assert all(n == n.strip() and n for n in cat.names)


def test_state_and_epoch_equal_direct_sgp4():
    lines = lines_of("iridium-33")
    cat = from_tle(lines)
    sat = Satrec.twoline2rv(lines[4], lines[5])
    _, r, v = sat.sgp4(sat.jdsatepoch, sat.jdsatepochF)
    np.testing.assert_allclose(cat.r[1], r, atol=1e-9)
    np.testing.assert_allclose(cat.v[1], v, atol=1e-12)
    # epoch field of line 1: 25046.62629564 = 2025, day 46.62629564
    assert cat.epochs[1].utc.isot.startswith("2025-02-15T15:0")
    assert abs(cat.epochs[1].jd - (2460676.5 + 45.62629564)) < 1e-8
    assert cat.names[1] == "IRIDIUM 33 DEB" and cat.satnums[1] == 33773


def corrupt(lines, index, new_line):
    broken = list(lines)
    broken[index] = new_line
    return broken


def test_bad_entries_are_skipped_and_reported_by_line():
    lines = lines_of("iridium-33")
    flipped = lines[4][:20] + str((int(lines[4][20]) + 1) % 10) + lines[4][21:]
    broken = corrupt(lines, 4, flipped)  # object 2, line 1: checksum fails
    broken = corrupt(broken, 8, lines[8][:60])  # object 3, line 2: truncated
    broken[10], broken[11] = broken[11], broken[10]  # object 4: lines swapped
    with pytest.warns(UserWarning, match="skipped 3 malformed"):
        cat = from_tle(broken)
    assert len(cat) == 116
    assert [line for line, _ in cat.errors] == [5, 9, 11]
    assert "checksum" in cat.errors[0][1] and "69 characters" in cat.errors[1][1]
    assert "start with '1 '" in cat.errors[2][1]
    good = from_tle(lines)
    keep = [i for i in range(119) if i not in (1, 2, 3)]
    np.testing.assert_array_equal(cat.r, good.r[keep])


def test_strict_raises_naming_the_line():
    lines = lines_of("cosmos-1408")
    with pytest.raises(ValueError, match="line 9: expected 69 characters"):
        from_tle(corrupt(lines, 8, lines[8][:50]), strict=True)


def test_two_line_files_without_names():
    lines = [line for i, line in enumerate(lines_of("cosmos-1408")) if i % 3]
    cat = from_tle(lines)
    assert len(cat) == 10 and cat.names[0] == str(cat.satnums[0])


def test_unreadable_and_empty_inputs():
    with pytest.raises(ValueError, match="cannot read"):
        from_tle(DATA / "no-such-catalog.tle")
    with pytest.raises(ValueError, match="no valid TLE entry"):
        from_tle([])
    with pytest.raises(ValueError, match="ends inside an entry"):
        from_tle(lines_of("cosmos-1408")[:2], strict=True)


def test_checksum_rule():
    line = lines_of("iridium-33")[1]
    assert tle_checksum(line) == int(line[68])
    assert tle_checksum("1 -" + "0" * 65) == 2  # '1' and '-' each count one


def test_states_at_a_common_epoch():
    cat = from_tle(DATA / "cosmos-1408-debris.tle")
    r, v, ok = cat.states_at(cat.epochs.max())
    assert ok.all()
    latest = int(np.argmax(cat.epochs.jd))
    np.testing.assert_allclose(r[latest], cat.r[latest], atol=1e-6)
    assert np.linalg.norm(r[0] - cat.r[0]) > 100  # others moved on
