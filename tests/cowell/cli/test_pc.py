"""``hapsira-cowell pc``: NASA CARA's 53 real conjunctions, as CDMs in CARA's layout (their
hard-body radius in a ``COMMENT HBR``), ranked with CARA's published Pc; our own XML CDMs
with ``--hbr`` give the Pc they carry; Monte Carlo is the library's draw for draw; bad
inputs are one line naming the option or the file, exit 2."""

import csv

import numpy as np
import pytest
from extras import need

from hapsira_cowell.cli import app as cli
from cowell.propagation.test_probability import CONJUNCTIONS

_AXES = ("R", "T", "N", "RDOT", "TDOT", "NDOT")


def _cara_rows():
    with open(CONJUNCTIONS) as handle:
        return list(csv.DictReader(handle))


def _time(day, clock):
    return f"{day[:4]}-{day[4:6]}-{day[6:]}T{clock[:2]}:{clock[2:4]}:{clock[4:]}.000"


def _cara_cdm(row, hbr=True):
    """A KVN CDM in the layout of CARA's ``DataFiles/PcTestCaseCDMs`` (the relative
    metadata's ``COMMENT HBR = 15 [m]``) holding one of its conjunctions: the CSV's states
    (EME2000, km, km/s) and RTN position covariances (m^2), the velocity rows 0 (the CSV
    has the position blocks only, all that the 2D Pc uses), the objects' numbers and the
    TCA of the file's name."""
    primary, _, secondary, day, clock, made, made_clock = row["conjunction_id"].split("_")
    r1, r2 = (np.array([float(row[f"{x}_{k}"]) for x in "xyz"]) for k in (1, 2))
    lines = ["CCSDS_CDM_VERS = 1.0", f"CREATION_DATE = {_time(made, made_clock)}",
             "ORIGINATOR = CARA", f"MESSAGE_ID = {row['conjunction_id']}",
             f"TCA = {_time(day, clock)}",
             f"MISS_DISTANCE = {np.linalg.norm(r2 - r1) * 1e3:.1f} [m]"]
    lines += [f"COMMENT HBR = {row['hbr_m']} [m]"] if hbr else []
    for k, number in ((1, primary), (2, secondary)):
        lines += [f"OBJECT = OBJECT{k}", f"OBJECT_DESIGNATOR = {number}",
                  "CATALOG_NAME = SATCAT", f"OBJECT_NAME = OBJECT {int(number)}",
                  "INTERNATIONAL_DESIGNATOR = UNKNOWN", "EPHEMERIS_NAME = NONE",
                  "COVARIANCE_METHOD = CALCULATED", "MANEUVERABLE = N/A",
                  "REF_FRAME = EME2000"]
        lines += [f"{x.upper()} = {row[f'{x}_{k}']} [km]" for x in "xyz"]
        lines += [f"{x.upper()}_DOT = {row[f'{x}_dot_{k}']} [km/s]" for x in "xyz"]
        for a in range(6):
            for b in range(a + 1):
                name = f"C{_AXES[a]}_{_AXES[b]}"
                unit = ("m**2", "m**2/s", "m**2/s**2")[(a >= 3) + (b >= 3)]
                value = row[f"{name.lower()}_{k}"] if a < 3 else "0.0"
                lines.append(f"{name} = {value} [{unit}]")
    return "\n".join(lines) + "\n"


def _cara_folder(folder, rows, hbr=True):
    folder.mkdir()
    for row in rows:
        (folder / f"{row['conjunction_id']}.cdm").write_text(_cara_cdm(row, hbr))
    return folder


def _table(path):
    with open(path) as handle:
        return list(csv.DictReader(handle))


def test_caras_53_cdms_ranked_with_their_own_hbr_give_caras_pc(tmp_path, capsys):
    """The 53 conjunctions of CARA's PcTestCaseCDMs as CDMs with their HBR comments: the
    table is every CDM, ranked, each Pc CARA's ``Pc2D_NoAdj`` (its Pc2D of the CDM's states
    as given, as ours) to 5e-8, 51 of them to CARA's "loose" 1e-8 (the two between are the
    ill-conditioned thin ellipses of test_probability); the objects and radii are the
    CDMs'; the printed table shows the first 20."""
    need("ccsds_ndm")
    rows = _cara_rows()
    folder = _cara_folder(tmp_path / "cara", rows)
    out = tmp_path / "ranked.csv"
    assert cli.main(["pc", str(folder), "--out", str(out)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "53 CDMs, Pc by foster, HBR 2 to 26 m (the CDMs' own):"
    table = _table(out)
    assert [row["rank"] for row in table] == [str(k) for k in range(1, 54)]
    pc = np.array([float(row["pc"]) for row in table])
    assert np.all(np.diff(pc) <= 0) and pc[0] > 2e-2 and pc[-1] < 1e-160
    cara = {row["conjunction_id"]: row for row in rows}
    expected = np.array([float(cara[row["source"].split("/")[-1][:-4]]["pc2d_noadj"])
                         for row in table])
    error = np.abs(pc / expected - 1)
    assert error.max() <= 5e-8 and np.count_nonzero(error <= 1e-8) >= 51, np.sort(error)[-3:]
    first = table[0]
    source = cara[first["source"].split("/")[-1][:-4]]
    assert (first["number_1"], first["number_2"]) == ("000025994", "000037558")
    assert first["hbr_m"] == "15" == source["hbr_m"] and first["hbr_from"] == "CDM"
    assert first["tca_utc"] == "2021-03-24T15:10:47.000" and first["method"] == "foster"
    assert printed[2].split()[:2] == ["1", f"{pc[0]:.3g}"] and "000037558" in printed[2]
    assert printed[22] == "... and 33 more (all of them with --out)"
    slow = sum(row["pc_flags"] == "long-encounter" for row in table)
    assert printed[23:] == [f"warning: {slow} CDM(s) flagged long-encounter (short-encounter "
                            "assumption doubtful)", f"wrote {out}"] and slow > 0


def test_hbr_overrides_the_cdms_and_is_needed_without_one(tmp_path, capsys):
    """--hbr is every CDM's radius; a CDM without an HBR comment needs it, the error naming
    the file."""
    need("ccsds_ndm")
    from hapsira_cowell.conjunctions import probability
    from hapsira_cowell.inputs.cdm import read_cdms

    rows = _cara_rows()[:6]
    folder = _cara_folder(tmp_path / "cara", rows, hbr=False)
    assert cli.main(["pc", str(folder)]) == 2
    error = capsys.readouterr().err
    first = sorted(folder.iterdir())[0]
    assert error.startswith(f"hapsira-cowell: error: --hbr: needed: {first}, ")
    assert "and 3 more give no hard-body radius" in error and error.count("\n") == 1
    out = tmp_path / "t.csv"
    assert cli.main(["pc", str(folder), "--hbr", "30m", "--out", str(out)]) == 0
    assert "6 CDMs, Pc by foster, HBR 30 m (--hbr):" in capsys.readouterr().out
    table = _table(out)
    cdms = read_cdms([row["source"] for row in table])
    expected = probability(cdms.rr1, cdms.vv1, cdms.P1, cdms.rr2, cdms.vv2, cdms.P2, 0.03)
    np.testing.assert_allclose([float(row["pc"]) for row in table], expected, rtol=1e-14)
    assert {row["hbr_m"] for row in table} == {"30"} and {row["hbr_from"] for row in table} == {
        "--hbr"}


def test_hbr_shape_is_the_librarys_square(tmp_path, capsys):
    """--hbr-shape square and square_equal_area: the library's squares of each CDM's own
    radius, the shape in the heading and the CSV."""
    need("ccsds_ndm")
    from hapsira_cowell.inputs.cdm import read_cdms

    folder = _cara_folder(tmp_path / "cara", _cara_rows()[:8])
    out = tmp_path / "t.csv"
    for shape in ("square", "square_equal_area"):
        assert cli.main(["pc", str(folder), "--hbr-shape", shape, "--out", str(out)]) == 0
        assert (f"8 CDMs, Pc by foster ({shape.replace('_', ' ')}), HBR "
                in capsys.readouterr().out)
        table = _table(out)
        cdms = read_cdms([row["source"] for row in table])
        np.testing.assert_allclose([float(row["pc"]) for row in table],
                                   cdms.probability(hbr_shape=shape), rtol=1e-14)
        assert {row["hbr_shape"] for row in table} == {shape}


def test_our_xml_cdms_give_the_pc_they_carry(tmp_path, capsys):
    """CDMs written by `write_cdms` in XML (CARA's Omitron case and three random
    geometries, with FOSTER-1992 Pc): the table's Pc equal the files' own to 1e-12, with
    --hbr 20m as they were written, and with the radius an XML comment of the relative
    metadata gives (``HBR = 0.02 [km]``)."""
    need("ccsds_ndm")
    from cowell.inputs.test_ndm import NAMES, NUMBERS, written

    folder = tmp_path / "xml"
    folder.mkdir()
    enc, pc, paths = written(folder, "xml")
    out = tmp_path / "t.csv"
    assert cli.main(["pc", *map(str, paths), "--hbr", "20m", "--out", str(out)]) == 0
    table = _table(out)
    assert len(table) == 4
    ours = np.array([float(row["pc"]) for row in table])
    np.testing.assert_allclose(ours, [float(row["cdm_pc"]) for row in table], rtol=1e-12)
    np.testing.assert_allclose(ours, np.sort(pc)[::-1], rtol=1e-12)
    assert {row["cdm_pc_method"] for row in table} == {"FOSTER-1992"}
    k = int(np.argmax(pc))
    assert (table[0]["number_1"], table[0]["name_1"]) == (NUMBERS[enc.i[k]], NAMES[enc.i[k]])
    assert (table[0]["number_2"], table[0]["name_2"]) == (NUMBERS[enc.j[k]], NAMES[enc.j[k]])
    for path in paths:
        text = path.read_text() if hasattr(path, "read_text") else open(path).read()
        at = text.index("<TCA>")
        with open(path, "w") as handle:
            handle.write(text[:at] + "<COMMENT>HBR = 0.02 [km]</COMMENT>" + text[at:])
    capsys.readouterr()
    assert cli.main(["pc", str(folder), "--out", str(out)]) == 0
    assert "4 CDMs, Pc by foster, HBR 20 m (the CDMs' own):" in capsys.readouterr().out
    np.testing.assert_allclose([float(row["pc"]) for row in _table(out)], ours, rtol=1e-14)


def test_monte_carlo_is_the_librarys_draw_for_draw(tmp_path, capsys):
    """--method monte_carlo --samples --seed: the library's Monte Carlo of the CDMs read,
    with the seed printed; for the two CDMs of highest Pc it is CARA's Pc2D (position
    errors only: the 2D model sampled) within 4 binomial standard deviations (the 95%
    interval misses one of two about one time in ten)."""
    need("ccsds_ndm")
    from hapsira_cowell.inputs.cdm import read_cdms

    rows = sorted(_cara_rows(), key=lambda row: -float(row["pc2d"]))[:2]
    folder = _cara_folder(tmp_path / "cara", rows)
    out = tmp_path / "mc.csv"
    assert cli.main(["pc", str(folder), "--method", "monte_carlo", "--samples", "200000",
                     "--seed", "11", "--out", str(out)]) == 0
    assert ("2 CDMs, Pc by monte_carlo, HBR 6 to 15 m (the CDMs' own), 200000 samples "
            "each, seed 11; 95% intervals:") in capsys.readouterr().out
    table = _table(out)
    cdms = read_cdms(sorted(map(str, folder.iterdir())))
    mc = cdms.probability(None, "monte_carlo", samples=200000, seed=11, full=True)
    order = np.argsort(-mc.pc, kind="stable")
    np.testing.assert_array_equal([float(row["pc"]) for row in table], mc.pc[order])
    np.testing.assert_array_equal([[float(row["pc_low"]), float(row["pc_high"])]
                                   for row in table], mc.interval[order])
    cara = {row["conjunction_id"]: float(row["pc2d"]) for row in rows}
    for row in table:
        expected = cara[row["source"].split("/")[-1][:-4]]
        spread = np.sqrt(expected * (1 - expected) / 200000)
        assert abs(float(row["pc"]) - expected) <= 4 * spread
        assert float(row["pc_low"]) < float(row["pc"]) < float(row["pc_high"])


@pytest.mark.parametrize("flags, message", [
    (["{cara}", "--hbr", "20"], "--hbr: '20' has no unit"),
    (["{cara}", "--seed", "3"], "--seed: only used with --method monte_carlo, got --method "
                                "foster"),
    (["{cara}", "--method", "chan", "--samples", "10"], "--samples: only used with --method "
                                                        "monte_carlo, got --method chan"),
    (["{cara}", "--method", "monte_carlo", "--samples", "0"], "--samples: '0' is not a whole "
                                                              "number >= 1"),
    (["{cara}", "--method", "monte_carlo", "--seed", "-1"], "--seed: '-1' is not a whole "
                                                            "number >= 0"),
    (["{cara}", "--method", "fast"], "argument --method: invalid choice: 'fast'"),
    (["{cara}", "--hbr-shape", "square", "--method", "max"],
     "--hbr-shape square: integrated by --method foster only, got --method max"),
    (["{cara}", "--hbr-shape", "box"], "argument --hbr-shape: invalid choice: 'box'"),
    (["{tmp}/none.cdm"], "CDM '{tmp}/none.cdm': no such file or folder"),
    (["{tmp}/empty"], "CDM '{tmp}/empty': a folder without CDM files (.cdm, .kvn, .xml, "
                      ".txt)"),
    (["{tmp}/empty/x.txt"], "CDM '{tmp}/empty/x.txt': no such file or folder"),
    (["{tmp}/not.cdm"], "{tmp}/not.cdm: cannot be read as a CCSDS CDM"),
    (["{cara}", "--out", "{tmp}/no/t.csv"], "--out '{tmp}/no/t.csv': the folder"),
])
def test_bad_inputs_are_one_line_and_exit_2(flags, message, tmp_path, capsys):
    need("ccsds_ndm")
    folder = _cara_folder(tmp_path / "cara", _cara_rows()[:1])
    (tmp_path / "empty").mkdir()
    (tmp_path / "not.cdm").write_text("hello\n")
    flags = [f.format(tmp=tmp_path, cara=folder) for f in flags]
    assert cli.main(["pc", *flags]) == 2
    error = capsys.readouterr().err
    assert error.startswith("hapsira-cowell: error: " + message.format(tmp=tmp_path)), error
    assert error.count("\n") == 1


def test_without_ccsds_ndm_the_error_names_the_extra(tmp_path, monkeypatch, capsys):
    import sys

    folder = tmp_path / "cara"
    folder.mkdir()
    (folder / "a.cdm").write_text(_cara_cdm(_cara_rows()[0]))
    monkeypatch.setitem(sys.modules, "ccsds_ndm", None)
    for name in [m for m in sys.modules if m.startswith("ccsds_ndm.")]:
        monkeypatch.setitem(sys.modules, name, None)
    assert cli.main(["pc", str(folder)]) == 2
    assert capsys.readouterr().err == ("hapsira-cowell: error: pc needs the ccsds-ndm "
                                       "package, which is not installed (pip install "
                                       "'hapsira-cowell[cdm]')\n")
