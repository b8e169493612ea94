"""TLE catalogs: the real debris clouds in ../shared/data, and broken ones made from them."""

import re
import warnings

import numpy as np
import pytest
from astropy import units as u
from astropy.time import Time
from sgp4.api import Satrec

from hapsira_cowell.inputs.tle import TLECatalog, TLEWarning, from_tle, tle_checksum
from reference import DATA_DIR as DATA  # ../shared/data beside the repository

COUNTS = {"fengyun-1c": 1918, "cosmos-2251": 641, "iridium-33": 119, "cosmos-1408": 10}
K = 398600.4418  # km^3/s^2


def path_of(name):
    return DATA / f"{name}-debris.tle"


def lines_of(name):
    return path_of(name).read_text().splitlines()


def with_checksum(line):
    """A line 1/2 whose column 69 is made right again after an edit."""
    return line[:68] + str(tle_checksum(line))


def edited(lines, index, new_line):
    out = list(lines)
    out[index] = new_line
    return out


def load_quietly(source, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TLEWarning)
        return from_tle(source, **kwargs)


# --------------------------------------------------------------------- real catalogs

@pytest.mark.parametrize("name", COUNTS)
def test_real_catalogs_load_whole(name):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a whole catalog loads without a warning
        cat = from_tle(path_of(name))
    n = COUNTS[name]
    assert isinstance(cat, TLECatalog)
    assert len(cat) == n and cat.errors == []
    assert cat.r.shape == cat.v.shape == (n, 3)
    assert cat.r.dtype == cat.v.dtype == np.float64
    assert cat.r.flags.c_contiguous and cat.v.flags.c_contiguous
    assert cat.satnums.shape == (n,) and cat.satnums.dtype.kind == "i"
    assert len(np.unique(cat.satnums)) == n
    assert cat.epochs.shape == (n,) and cat.epochs.scale == "utc"
    assert len(cat.names) == n
    assert all(isinstance(s, str) and s and s == s.strip() for s in cat.names)
    # every object's line 1 is on line 2, 5, 8, ... of the 3-line file
    np.testing.assert_array_equal(cat.line_numbers, 3 * np.arange(n) + 2)
    assert f"{n} objects" in repr(cat) and "0 skipped" in repr(cat)


@pytest.mark.parametrize("name", COUNTS)
def test_real_states_are_physical(name):
    cat = from_tle(path_of(name))
    r = np.linalg.norm(cat.r, axis=1)
    v = np.linalg.norm(cat.v, axis=1)
    energy = 0.5 * v ** 2 - K / r
    assert np.all(energy < 0)  # every object bound
    assert np.all(energy > -K / (2 * 6500.0)) and np.all(energy < -K / (2 * 9000.0))
    # LEO: radius 6500..9000 km, speed 6.5..8.5 km/s; the only exceptions are two
    # Fengyun-1C fragments thrown onto eccentric orbits (e = 0.138 and 0.107,
    # apogee heights 3140 and 2570 km), caught here near apogee
    outside = (r < 6500) | (r > 9000) | (v < 6.5) | (v > 8.5)
    expected = {30239, 37418} if name == "fengyun-1c" else set()
    assert set(cat.satnums[outside].tolist()) == expected
    assert r.min() > 6500 and v.max() < 8.5
    # the state is the one the elements describe: radius between perigee and apogee,
    # osculating semi-major axis and inclination close to SGP4's mean ones (J2
    # short-period terms: about 10 km and 0.01 deg)
    sats = cat.satellites
    a = np.array([s.a * s.radiusearthkm for s in sats])
    e = np.array([s.ecco for s in sats])
    assert np.all(r > a * (1 - e) - 10) and np.all(r < a * (1 + e) + 10)
    assert np.abs(1 / (2 / r - v ** 2 / K) - a).max() < 15
    h = np.cross(cat.r, cat.v)
    inc = np.degrees(np.arccos(h[:, 2] / np.linalg.norm(h, axis=1)))
    assert np.abs(inc - np.degrees([s.inclo for s in sats])).max() < 0.02


def test_states_equal_direct_sgp4_at_each_epoch():
    lines = lines_of("iridium-33")
    cat = from_tle(path_of("iridium-33"))
    for i in range(len(cat)):
        sat = Satrec.twoline2rv(lines[3 * i + 1], lines[3 * i + 2])
        error, r, v = sat.sgp4(sat.jdsatepoch, sat.jdsatepochF)
        assert error == 0
        np.testing.assert_allclose(cat.r[i], r, rtol=0, atol=1e-9)
        np.testing.assert_allclose(cat.v[i], v, rtol=0, atol=1e-12)
        assert cat.satnums[i] == int(lines[3 * i + 1][2:7])
        assert cat.names[i] == lines[3 * i].strip()
    # object 2 of the file, written out: at its epoch it is crossing the equator
    # (mean anomaly 289.06 deg + perigee argument 71.20 deg = 360.26 deg)
    assert cat.names[1] == "IRIDIUM 33 DEB" and cat.satnums[1] == 33773
    np.testing.assert_allclose(cat.r[1], [-7066.6536, -941.3622, 0.0111], atol=1e-3)


@pytest.mark.parametrize("name", ["cosmos-2251", "cosmos-1408"])
def test_epochs_are_the_epoch_fields(name):
    """Epoch = columns 19-32 of line 1 (YYDDD.DDDDDDDD, UTC), decoded here independently."""
    lines = lines_of(name)
    cat = from_tle(path_of(name))
    for i, line1 in enumerate(lines[1::3]):
        year = 2000 + int(line1[18:20])  # all these epochs are in 2025
        day = float(line1[20:32])
        expected = Time(f"{year}-01-01T00:00:00", scale="utc") + (day - 1) * u.day
        assert abs((cat.epochs[i] - expected).to_value(u.s)) < 1e-5
    assert cat.epochs.min().utc.iso >= "2025-01-01" and cat.epochs.max().utc.iso < "2025-03-01"


def test_epoch_of_one_object_written_out():
    cat = from_tle(path_of("iridium-33"))
    # line 1 of object 2: epoch field 25046.62629564 = 2025, day 46 (15 February)
    # + 0.62629564 day = 54111.943 s
    assert cat.epochs[1].isot == "2025-02-15T15:01:51.943"
    assert abs(cat.epochs[1].jd - (2460721.5 + 0.62629564)) < 1e-9


def test_checksum_rule():
    for name in COUNTS:
        for line in lines_of(name):
            if line[:2] in ("1 ", "2 "):
                assert tle_checksum(line) == int(line[68])
    assert tle_checksum("1 -" + "0" * 65) == 2  # '1' and '-' count one each
    assert tle_checksum("2 " + "9" * 3 + "+.ABC" + " " * 58 + "X") == (2 + 27) % 10
    assert tle_checksum("1 " + "0" * 66 + "7") == 1  # column 69 itself is not counted


# ------------------------------------------------------------------------ inputs

def test_path_str_text_lines_and_file_object_agree():
    path = path_of("cosmos-1408")
    ref = from_tle(path)
    text = path.read_text()
    with open(path) as handle:
        from_handle = from_tle(handle)
    for cat in (from_tle(str(path)), from_tle(text), from_tle(text.splitlines()),
                from_tle(text.splitlines(keepends=True)), from_tle(iter(text.splitlines())),
                from_handle):
        assert cat.names == ref.names
        np.testing.assert_array_equal(cat.r, ref.r)
        np.testing.assert_array_equal(cat.v, ref.v)
        np.testing.assert_array_equal(cat.satnums, ref.satnums)


def test_list_of_lines():
    lines = lines_of("iridium-33")[:9]  # first three objects
    cat = from_tle(lines)
    assert len(cat) == 3 and cat.errors == []
    assert cat.names == ["IRIDIUM 33", "IRIDIUM 33 DEB", "IRIDIUM 33 DEB"]
    np.testing.assert_array_equal(cat.satnums, [24946, 33773, 33775])
    np.testing.assert_array_equal(cat.r, from_tle(path_of("iridium-33")).r[:3])


def test_two_line_file_without_names(tmp_path):
    lines = lines_of("cosmos-2251")
    bare = tmp_path / "bare.tle"
    bare.write_text("\n".join(line for i, line in enumerate(lines) if i % 3) + "\n")
    cat = from_tle(bare)
    ref = from_tle(path_of("cosmos-2251"))
    assert len(cat) == 641 and cat.errors == []
    assert cat.names == [str(n) for n in ref.satnums]
    np.testing.assert_array_equal(cat.r, ref.r)
    np.testing.assert_array_equal(cat.v, ref.v)
    np.testing.assert_array_equal(cat.line_numbers, 2 * np.arange(641) + 1)


def test_blank_lines_and_space_track_names():
    lines = lines_of("cosmos-1408")[:6]
    spaced = ["", "0 " + lines[0], lines[1], lines[2], "   ", "", lines[3], lines[4], lines[5], ""]
    cat = from_tle(spaced)
    assert cat.names == ["COSMOS 1408 DEB", "COSMOS 1408 DEB"] and cat.errors == []
    np.testing.assert_array_equal(cat.line_numbers, [3, 8])


def test_alpha5_catalog_number_names_the_object():
    line1, line2 = lines_of("cosmos-1408")[1:3]
    line1 = with_checksum(line1[:2] + "A1234" + line1[7:])
    line2 = with_checksum(line2[:2] + "A1234" + line2[7:])
    cat = from_tle([line1, line2])
    assert cat.names == ["A1234"] and cat.satnums[0] == 101234


# ---------------------------------------------------------------- malformed entries

def test_bad_entries_are_skipped_and_reported_by_line(tmp_path):
    lines = lines_of("iridium-33")
    # object 2 (file lines 4-6): flip a digit of line 1's epoch, checksum now fails
    flipped = lines[4][:25] + str((int(lines[4][25]) + 1) % 10) + lines[4][26:]
    broken = edited(lines, 4, flipped)
    broken = edited(broken, 8, lines[8][:60])  # object 3: line 2 (file line 9) truncated
    broken[10], broken[11] = broken[11], broken[10]  # object 4: line 2 before line 1
    path = tmp_path / "broken.tle"
    path.write_text("\n".join(broken) + "\n")
    with pytest.warns(TLEWarning, match=r"skipped 3 malformed TLE entries of 119 \(first: line 5"):
        cat = from_tle(path)
    assert len(cat) == 116
    assert [line for line, _ in cat.errors] == [5, 9, 11]
    assert "checksum of line 1 fails" in cat.errors[0][1]
    assert "has 60 characters, expected 69" in cat.errors[1][1]
    assert "expected line 1" in cat.errors[2][1] and "found a line 2" in cat.errors[2][1]
    good = from_tle(path_of("iridium-33"))
    keep = [i for i in range(119) if i not in (1, 2, 3)]
    np.testing.assert_array_equal(cat.r, good.r[keep])
    np.testing.assert_array_equal(cat.v, good.v[keep])
    np.testing.assert_array_equal(cat.satnums, good.satnums[keep])
    assert cat.names == [good.names[i] for i in keep]
    assert "116 objects" in repr(cat) and "3 skipped entries (first: line 5)" in repr(cat)


def test_missing_line_keeps_the_next_object_and_its_name():
    lines = lines_of("iridium-33")
    # drop line 2 of object 2 (file line 6): object 3's name line (file line 7) follows
    broken = lines[:5] + lines[6:]
    cat = load_quietly(broken)
    assert len(cat) == 118
    assert cat.errors == [(5, cat.errors[0][1])]
    assert "line 1 is not followed by its line 2" in cat.errors[0][1]
    good = from_tle(lines)
    assert cat.names[1] == good.names[2] and cat.satnums[1] == good.satnums[2]
    np.testing.assert_array_equal(cat.r[1:], good.r[2:])
    # drop a whole object but its name (file lines 5 and 6): the orphan name is reported
    cat = load_quietly(lines[:4] + lines[6:])
    assert len(cat) == 118 and [e[0] for e in cat.errors] == [4]
    assert "not followed by lines 1 and 2" in cat.errors[0][1]
    # drop line 1 of the last object: its line 2 is left over
    cat = load_quietly(lines[:-2] + lines[-1:])
    assert len(cat) == 118 and [e[0] for e in cat.errors] == [356]


CHECKED = [
    # (line index in the Cosmos 1408 file, edit, file line reported, words of the message)
    (1, lambda s: s[:20] + "X" + s[21:], 2, "epoch day"),
    (2, lambda s: s[:9] + "8X" + s[11:], 3, "inclination"),
    (2, lambda s: s[:52] + "AB" + s[54:], 3, "mean motion"),
    (2, lambda s: s[:8] + "190.0000" + s[16:], 3, "inclination 190.0000 is out of range"),
    (1, lambda s: s[:53] + " 1e5-3  " + s[61:], 2, "B* drag term"),
    (1, lambda s: s[:17] + "7" + s[18:], 2, "blank in column 18"),
    (2, lambda s: s[:2] + "99999" + s[7:], 3, "catalog number '99999' of line 2 differs"),
    (2, lambda s: s[:26] + "9912685" + s[33:], 2, "SGP4 error code"),
]


@pytest.mark.parametrize("index, edit, line, words", CHECKED)
def test_fields_are_checked_beyond_the_checksum(index, edit, line, words):
    """Edits that keep the checksum right (it is recomputed) are still caught."""
    lines = lines_of("cosmos-1408")
    broken = edited(lines, index, with_checksum(edit(lines[index])))
    with pytest.warns(TLEWarning, match="skipped 1 malformed"):
        cat = from_tle(broken)
    assert len(cat) == 9 and len(cat.errors) == 1
    assert cat.errors[0][0] == line and words in cat.errors[0][1]
    np.testing.assert_array_equal(cat.r, from_tle(lines).r[1:])
    with pytest.raises(ValueError, match=f"^line {line}: .*{words}"):
        from_tle(broken, strict=True)


@pytest.mark.parametrize("epoch, words", [
    ("23366.50000000", "epoch day 366.50000000 (columns 21-32) is past the end of 2023, "
                       "which has 365 days"),
    ("24367.00000000", "past the end of 2024, which has 366 days"),
    ("00366.99999999", None),  # 2000 is a leap year (divisible by 400)
    ("24366.50000000", None),
])
def test_an_epoch_day_past_the_end_of_its_year_is_malformed(epoch, words):
    """sgp4 would roll day 366 of a common year silently into the next year."""
    lines = lines_of("cosmos-1408")
    broken = edited(lines, 1, with_checksum(lines[1][:18] + epoch + lines[1][32:]))
    if words is None:
        cat = from_tle(broken[:3])
        year = 2000 if epoch.startswith("00") else 2024
        assert cat.epochs[0].utc.isot.startswith(f"{year}-12-31T")
        return
    with pytest.warns(TLEWarning, match="skipped 1 malformed"):
        cat = from_tle(broken)
    assert len(cat) == 9 and cat.errors[0][0] == 2 and words in cat.errors[0][1]
    with pytest.raises(ValueError, match=f"^line 2: line 1: .*{re.escape(words)}"):
        from_tle(broken, strict=True)


def test_strict_raises_naming_the_first_bad_line():
    lines = lines_of("cosmos-1408")
    broken = edited(lines, 8, lines[8][:50])
    broken = edited(broken, 13, lines[13].replace(" ", "  ", 1))
    with pytest.raises(ValueError, match=r"^line 9: line 2 has 50 characters, expected 69$"):
        from_tle(broken, strict=True)
    cat = load_quietly(broken)  # without strict: both reported, 8 objects left
    assert len(cat) == 8 and [e[0] for e in cat.errors] == [9, 14]
    with pytest.raises(ValueError, match="line 2: the catalog ends inside an entry"):
        from_tle(lines[:2], strict=True)


def test_unreadable_paths_raise_naming_the_path(tmp_path):
    missing = DATA / "no-such-catalog.tle"
    with pytest.raises(FileNotFoundError, match="no-such-catalog.tle") as info:
        from_tle(missing)
    assert "cannot read the TLE catalog" in str(info.value)
    with pytest.raises(OSError, match=str(tmp_path)):
        from_tle(tmp_path)  # a directory


def test_empty_or_hopeless_catalogs_raise(tmp_path):
    with pytest.raises(ValueError, match="no valid TLE entry"):
        from_tle([])
    empty = tmp_path / "empty.tle"
    empty.write_text("\n\n  \n")
    with pytest.raises(ValueError, match="no valid TLE entry"):
        from_tle(empty)
    lines = lines_of("cosmos-1408")[:6]
    with pytest.raises(ValueError, match=r"no valid TLE entry found \(2 malformed; first: line 2"):
        from_tle([line[:-1] for line in lines])
    with pytest.raises(TypeError, match="item 1"):
        from_tle([lines[0], 42])


# ------------------------------------------------------------------- common epoch

def test_states_at_a_common_epoch():
    cat = from_tle(path_of("cosmos-1408"))
    epoch = cat.epochs.max()
    r, v, ok = cat.states_at(epoch)
    assert r.shape == v.shape == (10, 3) and ok.dtype == bool and ok.all()
    latest = int(np.argmax(cat.epochs.jd))
    np.testing.assert_allclose(r[latest], cat.r[latest], rtol=0, atol=1e-6)
    for i, sat in enumerate(cat.satellites):
        _, ri, vi = sat.sgp4(epoch.jd1, epoch.jd2)
        np.testing.assert_allclose(r[i], ri, rtol=0, atol=1e-9)
        np.testing.assert_allclose(v[i], vi, rtol=0, atol=1e-12)
    moved = np.linalg.norm(r - cat.r, axis=1)
    assert moved[latest] < 1e-6 and np.all(np.delete(moved, latest) > 100)
    # the same instant given in another scale, or as an ISO string (UTC)
    r_tt, _, _ = cat.states_at(epoch.tt)
    np.testing.assert_allclose(r_tt, r, rtol=0, atol=1e-6)
    r_iso, _, _ = cat.states_at(epoch.isot)
    np.testing.assert_allclose(r_iso, r, rtol=0, atol=1e-2)  # isot keeps milliseconds
    with pytest.raises(ValueError, match="single time"):
        cat.states_at(cat.epochs)


def test_states_at_flags_objects_sgp4_cannot_reach():
    cat = from_tle(path_of("cosmos-1408"))
    # 30 days on, fragment 51435 (perigee near 280 km) has decayed in SGP4 (error 6)
    r, v, ok = cat.states_at(cat.epochs.max() + 30 * u.day)
    assert cat.satnums[~ok].tolist() == [51435]
    assert np.isnan(r[~ok]).all() and np.isnan(v[~ok]).all()
    assert np.isfinite(r[ok]).all() and np.isfinite(v[ok]).all()


# ------------------------------------------------------- characters outside ASCII (issue 14)

# a digit of another script with the value of the ASCII one: Python's int() and float()
# read them, so before they were rejected sgp4 read another orbit
OTHER_DIGITS = {"Arabic-Indic": 0x0660, "fullwidth": 0xFF10, "Devanagari": 0x0966}


@pytest.mark.parametrize("script", OTHER_DIGITS)
@pytest.mark.parametrize("index, column, field", [
    (2, 10, "inclination"),  # Iridium 33 line 2 '86.3914': the 3
    (1, 20, "epoch day"),  # line 1 '25046.63678585': the 0
    (2, 60, "mean motion"),
])
def test_a_digit_of_another_script_is_a_bad_field(script, index, column, field):
    lines = lines_of("iridium-33")
    line = lines[index]
    digit = line[column]
    assert digit.isdigit() and digit.isascii()
    other = chr(OTHER_DIGITS[script] + int(digit))
    assert int(other) == int(digit)  # what Python makes of it
    changed = line[:column] + other + line[column + 1:]
    assert len(changed) == 69
    with pytest.warns(TLEWarning, match="skipped 1 malformed TLE entries of 119"):
        cat = from_tle(edited(lines, index, changed))
    assert len(cat) == 118 and cat.errors[0][0] == index + 1
    message = cat.errors[0][1]
    assert field in message and repr(other) in message and "non-ASCII" in message
    assert f"column {column + 1}" in message
    good = from_tle(lines)
    np.testing.assert_array_equal(cat.r, good.r[1:])
    with pytest.raises(ValueError, match=f"^line {index + 1}: line {index}: {field}"):
        from_tle(edited(lines, index, changed), strict=True)


def test_checksum_counts_only_ascii_digits():
    line = lines_of("iridium-33")[1]
    assert tle_checksum(line) == int(line[68])
    fullwidth = line.replace("97051C", "\uff19\uff17051C")  # the 9 and the 7 of the designator
    assert tle_checksum(fullwidth) == (int(line[68]) - 16) % 10
    assert tle_checksum("1 ²²²" + line[5:]) == tle_checksum("1 " + "   " + line[5:])


@pytest.mark.parametrize("index, column", [(1, 30), (2, 68), (2, 5), (1, 63)])
def test_a_superscript_anywhere_skips_its_entry_alone(index, column):
    """'²' is a digit to str.isdigit() but not to int(): it used to abort the whole file."""
    lines = lines_of("iridium-33")
    line = lines[3 * 40 + index]  # object 41
    changed = line[:column] + "\u00b2" + line[column + 1:]
    broken = edited(lines, 3 * 40 + index, changed)
    with pytest.warns(TLEWarning, match="skipped 1 malformed"):
        cat = from_tle(broken)
    assert len(cat) == 118
    assert cat.errors == [(3 * 40 + index + 1, cat.errors[0][1])]
    assert "'\u00b2'" in cat.errors[0][1] and f"column {column + 1}" in cat.errors[0][1]
    if column == 68:
        assert "checksum" in cat.errors[0][1]
    good = from_tle(lines)
    keep = [i for i in range(119) if i != 40]
    np.testing.assert_array_equal(cat.r, good.r[keep])
    with pytest.raises(ValueError, match=f"^line {3 * 40 + index + 1}: .*non-ASCII"):
        from_tle(broken, strict=True)


def test_bytes_that_are_not_utf8_skip_their_entry(tmp_path):
    lines = lines_of("cosmos-1408")
    data = ("\n".join(lines) + "\n").encode("ascii")
    at = data.index(lines[4].encode()) + 30  # object 2, line 1
    path = tmp_path / "latin1.tle"
    path.write_bytes(data[:at] + b"\xb2" + data[at + 1:])  # Latin-1 superscript two
    cat = load_quietly(path)
    assert len(cat) == 9 and [e[0] for e in cat.errors] == [5]
    assert "U+FFFD" in cat.errors[0][1]


def test_names_that_start_like_a_tle_line_are_names(tmp_path):
    """``1 KUZ DEB`` is a name: a TLE line is told by its number, a blank and the catalog
    number (line 1: then the classification letter), not by its first two characters."""
    lines = lines_of("cosmos-1408")
    renamed = edited(edited(lines, 3, "1 KUZ DEB"), 6, "2 DEB")
    cat = from_tle(renamed)
    good = from_tle(lines)
    assert cat.errors == [] and len(cat) == 10
    assert cat.names[:4] == ["COSMOS 1408 DEB", "1 KUZ DEB", "2 DEB", "COSMOS 1408 DEB"]
    np.testing.assert_array_equal(cat.satnums, good.satnums)
    np.testing.assert_array_equal(cat.r, good.r)
    # a byte that is not UTF-8 in such a name (Latin-1 superscript two): read, as U+FFFD
    path = tmp_path / "latin1-name.tle"
    path.write_bytes(("\n".join(renamed[:3]) + "\n").encode("ascii") + b"1 KUZ DEB \xb2\n"
                     + ("\n".join(renamed[4:6]) + "\n").encode("ascii"))
    cat = from_tle(path)
    assert cat.errors == [] and cat.names == ["COSMOS 1408 DEB", "1 KUZ DEB \ufffd"]
    np.testing.assert_array_equal(cat.r, good.r[:2])


def test_non_ascii_names_are_kept():
    lines = lines_of("cosmos-1408")
    cat = from_tle(edited(lines, 0, "COSMOS 1408 DEB \u00b2 \u00e9"))
    assert cat.names[0] == "COSMOS 1408 DEB \u00b2 \u00e9" and cat.errors == []


def test_byte_order_mark_is_not_part_of_the_first_name(tmp_path):
    lines = lines_of("cosmos-1408")
    path = tmp_path / "bom.tle"
    path.write_text("\r\n".join(lines) + "\r\n", encoding="utf-8-sig")
    assert path.read_bytes()[:3] == b"\xef\xbb\xbf"
    expected = from_tle(lines).names
    assert expected[0] == lines[0].strip()
    for source in (path, str(path), "\ufeff" + "\n".join(lines),
                   ["\ufeff" + lines[0]] + lines[1:],
                   [("\ufeff" + line if i == 0 else line).encode() for i, line in enumerate(lines)]):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert from_tle(source).names == expected
    # a file of bare pairs: the mark would sit before line 1's '1 '
    bare = [line for line in lines if line[:2] in ("1 ", "2 ")]
    cat = from_tle(["\ufeff" + bare[0]] + bare[1:])
    assert len(cat) == 10 and cat.errors == []


def test_repeated_catalog_numbers_are_named_in_a_warning():
    lines = lines_of("cosmos-1408")
    repeated = lines + lines[3:6] + lines[12:15]  # objects 2 and 5 again, at the end
    with pytest.warns(TLEWarning) as caught:
        cat = from_tle(repeated)
    assert len(cat) == 12 and cat.errors == []  # both copies kept
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1
    first, fifth = from_tle(lines).satnums[[1, 4]]
    assert f"{first} (lines 5, 32)" in messages[0] and f"{fifth} (lines 14, 35)" in messages[0]
    assert messages[0].startswith("2 catalog number(s) appear in more than one entry")
    np.testing.assert_array_equal(cat.r[10], cat.r[1])
