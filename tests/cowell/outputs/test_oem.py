"""CCSDS OEM output (hapsira_cowell.cli.writers): orbits from elements with an astropy epoch,
propagated, written as OEM and read back with the oem package to well under a millimetre."""

import math
import os
import re

import numpy as np
import pytest
from extras import need
from astropy import units as u
from astropy.time import Time

from hapsira_core import settings
from hapsira_cowell import cowell
from hapsira_cowell.cli.catalog import Catalog
from hapsira_cowell.inputs.elements import from_classical
from hapsira_cowell.cli.writers import open_writer
from hapsira_cowell.outputs.oem import OemWriter, read_oem, write_oem
from reference import K_EARTH, R_EARTH

oem = need("oem")  # in the test extra: never skipped in CI

SIMULATED = settings.TARGET == "cuda" and settings.cuda_simulator_enabled()
EPOCH = Time("2025-03-01T06:30:12.345678912", scale="utc")
MM = 1e-6  # km


def cloud(n, seed=0):
    rng = np.random.default_rng(seed)
    return from_classical(K_EARTH, (R_EARTH + rng.uniform(400.0, 1500.0, n)) * u.km,
                          rng.uniform(0.0, 0.05, n), rng.uniform(0.0, 180.0, n) * u.deg,
                          *(rng.uniform(0.0, 360.0, (3, n)) * u.deg))


def test_elements_to_oem_and_back(tmp_path):
    """The issue's script: 1000 orbits from elements with an astropy epoch, propagated,
    written as OEM, read back with the oem package equal to 1 mm."""
    n = 20 if SIMULATED else 1000
    r0, v0 = cloud(n)
    tofs = np.linspace(0.0, 5400.0 if SIMULATED else 86400.0, 7)
    res = cowell(K_EARTH, r0, v0, tofs)
    assert np.all(res.status == 0)
    names = [f"SAT {i}" for i in range(n)]
    paths = write_oem(tmp_path / "oem", EPOCH, tofs, res.rr, res.vv, frame="GCRF",
                      names=names, ids=[f"2025-{i:03d}A" for i in range(n)])
    assert len(paths) == n and sorted(os.listdir(tmp_path)) == ["oem"]  # no leftovers
    back = read_oem(tmp_path / "oem")
    assert [e.name for e in back] == names
    expected_times = EPOCH + tofs * u.s
    for i in range(0, n, max(1, n // 50)):
        # the oem package itself reads each file
        message = oem.OrbitEphemerisMessage.open(paths[i])
        states = list(message.states)
        assert len(states) == tofs.size
        positions = np.array([s.position for s in states])
        velocities = np.array([s.velocity for s in states])
        assert np.abs(positions - res.rr[i]).max() < MM
        assert np.abs(velocities - res.vv[i]).max() < MM  # km/s: 1 mm/s
        seconds = np.array([(s.epoch - expected_times[j]).to_value(u.s)
                            for j, s in enumerate(states)])
        assert np.abs(seconds).max() < 1e-8  # epochs to the nanosecond
        segment = next(iter(message))
        assert segment.metadata["REF_FRAME"] == "GCRF"
        assert segment.metadata["CENTER_NAME"] == "EARTH"
        assert segment.metadata["TIME_SYSTEM"] == "UTC"
        assert segment.metadata["OBJECT_ID"] == f"2025-{i:03d}A"
        assert np.abs(back[i].r - res.rr[i]).max() < MM
        assert back[i].frame == "GCRF" and back[i].times.shape == (tofs.size,)
    # the files are usable ephemerides: the oem package interpolates between states
    fine = np.arange(0.0, 1801.0, 60.0)
    dense = cowell(K_EARTH, r0[0], v0[0], fine)
    path = write_oem(tmp_path / "fine.oem", EPOCH, fine, dense.rr, dense.vv, frame="GCRF")[0]
    sampled = oem.OrbitEphemerisMessage.open(path)(EPOCH + 1010.0 * u.s)
    exact = cowell(K_EARTH, r0[0], v0[0], [1010.0])
    assert np.linalg.norm(sampled.position - exact.rr[0]) < 1e-3  # km


def test_single_object_file_quantities_and_stopped_rows(tmp_path):
    r0, v0 = cloud(2, seed=1)
    tofs = -np.array([0.0, 600.0, 1200.0, 1800.0])  # backward: rows go forward in time
    res = cowell(K_EARTH, r0, v0, tofs)
    rr, vv = res.rr.copy(), res.vv.copy()
    rr[1, 2:] = vv[1, 2:] = np.nan  # object 1 stopped after its second row
    path = tmp_path / "one.oem"
    assert write_oem(path, EPOCH.tt, tofs * u.s, rr[0] * u.km, (vv[0] * 1000) * u.m / u.s,
                     frame="EME2000") == [str(path)]
    assert sorted(os.listdir(tmp_path)) == ["one.oem"]
    back = read_oem(path)
    assert back.name == "OBJECT 0" and back.frame == "EME2000"
    np.testing.assert_allclose(back.r, rr[0][::-1], rtol=0, atol=MM)
    np.testing.assert_allclose(back.v, vv[0][::-1], rtol=0, atol=MM)
    assert np.all(np.diff((back.times - EPOCH).to_value(u.s)) > 0)
    paths = write_oem(tmp_path / "two", EPOCH, tofs, rr, vv, frame="TEME", names=["a", "b/c"])
    assert [os.path.basename(p) for p in paths] == ["00000-a.oem", "00001-b_c.oem"]
    assert read_oem(paths[1]).r.shape == (2, 3)  # the finite rows only


def test_chunked_writer_skips_objects_without_a_state(tmp_path):
    r0, v0 = cloud(3, seed=2)
    r0[1] = np.nan
    tofs = np.array([0.0, 60.0])
    res = cowell(K_EARTH, r0, v0, tofs)
    catalog = Catalog(["x", "nan", "z"], r0, v0, "TLE", "TEME", epoch=EPOCH,
                      ids=["1997-051C", "?", "1997-051D"])
    folder = tmp_path / "out"
    folder.mkdir()  # with overwrite, a folder's .oem files are replaced, others kept
    (folder / "keep.txt").write_text("mine")
    (folder / "00001-other-run.oem").write_text("another run's file")
    with pytest.raises(ValueError, match="the folder is not empty; the files of another run"):
        open_writer(str(folder), "oem", catalog, tofs)
    sink, write = open_writer(str(folder), "oem", catalog, tofs, overwrite=True)
    write(0, 2, type(res)(res.rr[:2], res.vv[:2], res.status[:2], [], None, None, None), None)
    write(2, 3, type(res)(res.rr[2:], res.vv[2:], res.status[2:], [], None, None, None), None)
    sink.close()
    assert sorted(os.listdir(folder)) == ["00000-x.oem", "00002-z.oem", "keep.txt"]
    assert sink.skipped == ["nan"]
    assert [e.id for e in read_oem(folder)] == ["1997-051C", "1997-051D"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # temporary folder gone


def test_bad_oem_arguments_are_named(tmp_path):
    tofs = np.array([0.0, 60.0])
    rr = np.ones((2, 3)) * 7000.0
    with pytest.raises(TypeError, match="frame"):
        write_oem(tmp_path / "x.oem", EPOCH, tofs, rr, rr)
    with pytest.raises(ValueError, match="epoch: 'yesterday' is not a time astropy reads"):
        write_oem(tmp_path / "x.oem", "yesterday", tofs, rr, rr, frame="GCRF")
    with pytest.raises(ValueError, match=r"epoch: expected a single time or one per object, "
                                         r"shape \(1,\), got shape \(2,\)"):
        write_oem(tmp_path / "x.oem", Time(["2025-01-01", "2025-01-02"]), tofs, rr, rr,
                  frame="GCRF")
    with pytest.raises(ValueError, match=r"rr, vv: expected shape \(M, 3\) or \(N, M, 3\)"):
        write_oem(tmp_path / "x.oem", EPOCH, tofs, rr[:1], rr[:1], frame="GCRF")
    with pytest.raises(ValueError, match="names: expected 2 names, got 1"):
        write_oem(tmp_path / "x", EPOCH, tofs, rr[None].repeat(2, 0), rr[None].repeat(2, 0),
                  frame="GCRF", names=["a"])
    with pytest.raises(ValueError, match="no finite state"):
        write_oem(tmp_path / "x.oem", EPOCH, tofs, rr * math.nan, rr, frame="GCRF")
    with pytest.raises(ValueError, match="OEM format needs the epoch"):
        OemWriter(str(tmp_path / "y"), ["a"], None, tofs, "GCRF")
    assert sorted(os.listdir(tmp_path)) == []  # nothing left behind


@pytest.mark.parametrize("argument, value, words", [
    ("frame", "GCRF\nCENTER_NAME = MARS", "frame (REF_FRAME): 'GCRF\\nCENTER_NAME = MARS' "
                                           "holds the non-printable character '\\n'"),
    ("frame", "  ", "frame (REF_FRAME): empty"),
    ("center", "EARTH\r", "center (CENTER_NAME)"),
    ("names", ["a", "b\x00"], "names[1] (OBJECT_NAME)"),
    ("names", ["a", "b\u2028c"], "names[1] (OBJECT_NAME)"),
    ("ids", ["1997-051C", "x\ty"], "ids[1] (OBJECT_ID)"),
])
def test_header_values_are_one_printable_line(tmp_path, argument, value, words):
    """A newline in a header value wrote a header key of its own."""
    tofs = np.array([0.0, 60.0])
    rr = np.full((2, 2, 3), 7000.0)
    kwargs = {"frame": "GCRF", argument: value}
    with pytest.raises(ValueError) as error:
        write_oem(tmp_path / "out", EPOCH, tofs, rr, rr, **kwargs)
    assert words in str(error.value)
    assert words.endswith("empty") or "one line of printable text" in str(error.value)
    assert os.listdir(tmp_path) == []
    assert write_oem(tmp_path / "x.oem", EPOCH, tofs, rr[0], rr[0], frame="GCRF",
                     names=["Ünïcode 3"]) == [str(tmp_path / "x.oem")]
    assert read_oem(tmp_path / "x.oem").name == "Ünïcode 3"  # printable, not ASCII: kept


def test_times_an_oem_cannot_hold_are_named(tmp_path):
    """NaN and repeated times gave "Malformed data section." (or a strptime error), a
    leap second at the start or end "second must be in 0..59"."""
    rr = np.full((3, 3), 7000.0)
    for tofs, words in (([0.0, math.nan, 60.0], "tofs: time of flight 1 is nan"),
                        ([0.0, 60.0, 60.0], "tofs: times of flight 1 and 2 (60 s and 60 s) "
                                            "give the same OEM epoch"),
                        ([60.0, 0.0, 60.0 + 1e-13], "times of flight 0 and 2")):
        with pytest.raises(ValueError, match=re.escape(words)):
            write_oem(tmp_path / "x.oem", EPOCH, np.array(tofs), rr, rr, frame="GCRF")
    # 2016-12-31T23:59:60 UTC is a leap second: fine inside the span (astropy and the oem
    # package's data lines know it), refused as START_TIME or STOP_TIME (datetime does not)
    before = Time("2016-12-31T23:59:59", scale="utc")
    paths = write_oem(tmp_path / "x.oem", before, np.array([0.0, 1.0, 2.0]), rr, rr,
                      frame="GCRF")
    back = read_oem(paths[0])
    assert list(back.times.utc.isot) == ["2016-12-31T23:59:59.000", "2016-12-31T23:59:60.000",
                                         "2017-01-01T00:00:00.000"]
    for epoch, tofs, which in ((Time("2016-12-31T23:59:60", scale="utc"), [0.0, 1.0, 2.0],
                                "first"), (before, [-2.0, -1.0, 1.0], "last")):
        with pytest.raises(ValueError, match=f"epoch, tofs: the {which} output time, "
                                             "2016-12-31T23:59:60.000000000, is in a leap "
                                             "second: .*no second 60"):
            write_oem(tmp_path / "y.oem", epoch, np.array(tofs), rr, rr, frame="GCRF")
    assert sorted(os.listdir(tmp_path)) == ["x.oem"]


def test_a_folder_holding_files_is_refused_without_overwrite(tmp_path):
    """Another run's files were left beside the new ones."""
    tofs = np.array([0.0, 60.0])
    rr = np.full((2, 2, 3), 7000.0)
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "00005-old.oem").write_text("another run's file")
    with pytest.raises(ValueError, match="not empty.*overwrite=True"):
        write_oem(folder, EPOCH, tofs, rr, rr, frame="GCRF")
    assert os.listdir(folder) == ["00005-old.oem"]
    paths = write_oem(folder, EPOCH, tofs, rr, rr, frame="GCRF", overwrite=True)
    assert sorted(os.listdir(folder)) == ["00000-OBJECT_0.oem", "00001-OBJECT_1.oem"]
    assert len(paths) == 2 and sorted(os.listdir(tmp_path)) == ["out"]
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="is a file"):
        write_oem(tmp_path / "file", EPOCH, tofs, rr, rr, frame="GCRF")


def test_epoch_is_anything_astropy_time_reads(tmp_path):
    """Issue 25 item 9: an ISO text or a datetime is an epoch, as for astropy's Time."""
    import datetime

    tofs = np.array([0.0, 60.0])
    rr = np.array([[7000.0, 0.0, 0.0], [6999.0, 450.0, 0.0]])
    vv = np.array([[0.0, 7.5, 0.0], [-0.48, 7.49, 0.0]])
    for name, epoch in (("iso", "2025-03-01T06:30:12.5"),
                        ("datetime", datetime.datetime(2025, 3, 1, 6, 30, 12, 500000)),
                        ("time", Time("2025-03-01T06:30:12.5", scale="utc"))):
        path = tmp_path / f"{name}.oem"
        write_oem(path, epoch, tofs, rr, vv, frame="GCRF")
        back = read_oem(path)
        assert back.times[0].utc.isot == "2025-03-01T06:30:12.500"
        np.testing.assert_array_equal(back.r, rr)


def _oem_package_text(epoch, tofs, rr, vv, name, created):
    """What the oem package itself writes for these states (the writer before issue 25),
    its numbers as ``f"{x:.14e}"``: oem before 0.4.5 (pyproject.toml allows oem>=0.4)
    writes positive numbers with a sign, ``f"{x:+.14e}"``, dropped here."""
    from oem.components import EphemerisSegment, HeaderSection, MetaDataSection

    times = epoch.utc + tofs * u.s
    times.precision = 9
    times = tuple(times)
    header = HeaderSection({"CCSDS_OEM_VERS": "2.0", "CREATION_DATE": created,
                            "ORIGINATOR": "hapsira-cowell"})
    meta = MetaDataSection({"OBJECT_NAME": name, "OBJECT_ID": name, "CENTER_NAME": "EARTH",
                            "REF_FRAME": "GCRF", "TIME_SYSTEM": "UTC",
                            "START_TIME": times[0].isot, "STOP_TIME": times[-1].isot})
    columns = [rr[:, axis].tolist() for axis in range(3)] + [vv[:, axis].tolist()
                                                             for axis in range(3)]
    path = "package.oem"
    oem.OrbitEphemerisMessage(header, [EphemerisSegment(meta, (times, *columns))]).save_as(
        path, file_format="kvn")
    with open(path) as file:
        return re.sub(r"(?<= )\+(?=\d)", "", file.read())  # a number's sign, not its exponent's


def test_fast_writer_writes_what_the_oem_package_writes(tmp_path, monkeypatch):
    """Issue 25 item 5: the numbers are formatted all at once (not one Python call each),
    and the files are, byte for byte, what the oem package's own writer gives; the oem
    package reads them back to its 15 digits."""
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(3)
    n, m = 4, 9
    tofs = np.sort(rng.uniform(0.0, 86400.0, m))
    rr = rng.uniform(-8000.0, 8000.0, (n, m, 3))
    vv = rng.uniform(-8.0, 8.0, (n, m, 3))
    # numbers of every kind the formatter treats apart: zeros, -0, powers of ten, what
    # rounds up to one, exact halves, tiny and huge exponents
    rr[0, :, 0] = [0.0, -0.0, 1.0, 1e3, 9.9999999999999995, 999999999999999.5,
                   1234567890123455.0, 1e-5, 5e-324]
    vv[0, :, 0] = [1e100, -9.999999999999999e99, 2.5e-100, 0.5, 7.5e-3, 1e15, 1e-300,
                   1.5e308, -1e-99]
    rr[2, 5:] = np.nan  # stopped: its rows are left out
    monkeypatch.setattr(OemWriter, "BLOCK_STATES", 2 * m)  # blocks of two objects
    paths = write_oem(tmp_path / "out", EPOCH, tofs, rr, vv, frame="GCRF")
    for i, path in enumerate(paths):
        text = open(path).read()
        created = re.search(r"CREATION_DATE = (\S+)", text).group(1)
        rows = np.isfinite(rr[i]).all(axis=1)
        assert text == _oem_package_text(EPOCH, tofs[rows], rr[i][rows], vv[i][rows],
                                         f"OBJECT {i}", created)
        back = oem.OrbitEphemerisMessage.open(path)
        states = [s for segment in back for s in segment.states]
        assert len(states) == rows.sum()
        np.testing.assert_allclose([s.position for s in states], rr[i][rows], rtol=1e-14)
        np.testing.assert_allclose([s.velocity for s in states], vv[i][rows], rtol=1e-14)


def test_number_formatting_is_pythons():
    """Every number as ``f"{x:.14e}"``, also next to halves and across powers of ten."""
    from hapsira_cowell.outputs.oem import _format_numbers

    rng = np.random.default_rng(5)
    values = np.concatenate([
        rng.uniform(-8000.0, 8000.0, 20000),
        rng.normal(size=20000) * 10.0 ** rng.integers(-150, 150, 20000),
        rng.integers(0, 2**53, 20000).astype(float),  # exact halves at the 16th digit
        rng.integers(-10**6, 10**6, 20000) / 1024.0,
        np.nextafter(10.0 ** np.arange(-20, 20), np.inf),
        np.nextafter(10.0 ** np.arange(-20, 20), -np.inf)])
    text = [bytes(row).replace(b"\0", b"").decode() for row in _format_numbers(values)]
    assert text == [f"{x:.14e}" for x in values.tolist()]
