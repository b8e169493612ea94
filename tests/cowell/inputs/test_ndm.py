"""CCSDS messages in (`hapsira_cowell.inputs.cdm.read_cdms`, `.inputs.omm.read_omms`):
CDMs of our own writer read back with every number in place and the same Pc, in KVN and
XML; OMMs made from the shipped catalog's TLEs give the TLEs' states; errors name the file
and the keyword; without ccsds-ndm, an ImportError names the extra."""

import re
import sys
from importlib import resources

import numpy as np
import pytest
from astropy import units as u
from astropy.time import Time
from extras import need

from hapsira_cowell.covariance import from_rtn, to_rtn
from hapsira_cowell.inputs.tle import from_tle
from cowell.propagation.test_probability import (CARA_C1, CARA_C2, CARA_PC, CARA_R1, CARA_R2,
                                                 CARA_V1, CARA_V2, geometries)

EPOCH = Time("2025-02-15T15:29:14.293248", scale="utc")
NAMES = ["FENGYUN 1C DEB", "COSMOS 2251 DEB", "IRIDIUM 33 DEB", "IRIDIUM 33"]
DESIGNATORS = ["1999-025ES", "1993-036A", "1997-051C", "1997-051C"]
NUMBERS = ["29701", "22675", "33871", "24946"]
HBR = 0.02  # km


def approaches():
    """CARA's Pc2D_Foster validation case 1 (approach 0, objects 0 and 1) and three random
    geometries at their TCA (objects 2-3, 1-3, 0-2), with 6 x 6 covariances whose
    position blocks are those of `probability`'s tests."""
    from hapsira_cowell.conjunctions import Encounters

    r1, v1, c1, r2, v2, c2, _ = geometries(3, seed=5)
    rr1, vv1 = np.vstack([CARA_R1, r1]), np.vstack([CARA_V1, v1])
    rr2, vv2 = np.vstack([CARA_R2, r2]), np.vstack([CARA_V2, v2])
    P1, P2 = np.zeros((4, 6, 6)), np.zeros((4, 6, 6))
    P1[:, :3, :3] = np.concatenate([[CARA_C1], c1])
    P2[:, :3, :3] = np.concatenate([[CARA_C2], c2])
    rng = np.random.default_rng(7)
    for P in (P1, P2):  # velocity blocks and correlations: a covariance all the same
        A = rng.normal(size=(4, 3, 3)) * 1e-4
        P[:, 3:, 3:] = A @ A.swapaxes(1, 2) + 1e-8 * np.eye(3)
        P[:, :3, :3] = 0.5 * (P[:, :3, :3] + P[:, :3, :3].swapaxes(1, 2))
    basis = np.stack([to_rtn(rr1, vv1, P1), to_rtn(rr2, vv2, P2)])
    relative = np.concatenate([rr2 - rr1, vv2 - vv1], axis=1)  # any numbers will do
    return Encounters(i=np.array([0, 2, 1, 0]), j=np.array([1, 3, 3, 2]),
                      tca=np.array([0.0, 100.25, 3600.5, 86000.0]),
                      miss=np.linalg.norm(rr2 - rr1, axis=1),
                      speed=np.linalg.norm(vv2 - vv1, axis=1), rr1=rr1, vv1=vv1, rr2=rr2,
                      vv2=vv2, P1=P1, P2=P2, P1_rtn=basis[0], P2_rtn=basis[1],
                      relative=relative, status=np.zeros((4, 2), dtype=np.int64))


def written(folder, fmt, frame="GCRF", method="foster"):
    from hapsira_cowell.outputs.cdm import write_cdms
    from hapsira_cowell.propagation.probability import CDM_METHODS

    enc = approaches()
    pc = enc.probability(HBR, method)
    paths = write_cdms(folder, enc, EPOCH, NAMES, designators=DESIGNATORS, numbers=NUMBERS,
                       frame=frame, fmt=fmt, pc=pc, pc_method=CDM_METHODS[method])
    return enc, pc, paths


@pytest.mark.parametrize("fmt", ["kvn", "xml"])
def test_our_cdms_read_back_with_every_number_in_place_and_the_same_pc(tmp_path, fmt):
    need("ccsds_ndm")
    from hapsira_cowell.inputs.cdm import read_cdms

    enc, pc, paths = written(tmp_path, fmt)
    assert pc[0] == pytest.approx(CARA_PC, rel=1e-9)  # the case is CARA's
    cdms = read_cdms(paths)
    assert len(cdms) == 4 and cdms.sources == paths and cdms.frame == ["GCRF"] * 4
    for column in ("rr1", "vv1", "rr2", "vv2"):
        np.testing.assert_array_equal(getattr(cdms, column), getattr(enc, column))
    for column in ("P1_rtn", "P2_rtn"):  # written in m^2, read in km^2: a rounding apart
        np.testing.assert_allclose(getattr(cdms, column), getattr(enc, column), rtol=1e-15,
                                   atol=1e-15 * np.abs(getattr(enc, column)).max())
    for column in ("P1", "P2"):  # RTN and back: rotations' rounding
        expected = getattr(enc, column)
        np.testing.assert_allclose(getattr(cdms, column), expected, rtol=0,
                                   atol=1e-13 * np.abs(expected).max())
    np.testing.assert_allclose(cdms.miss, enc.miss, rtol=1e-15)
    np.testing.assert_allclose(cdms.speed, enc.speed, rtol=1e-15)
    np.testing.assert_allclose(cdms.relative, enc.relative, rtol=1e-15, atol=1e-18)
    tca = EPOCH + enc.tca * u.s
    assert np.abs((cdms.tca - tca).to_value(u.s)).max() < 1e-6
    for row, (a, b) in enumerate(zip(enc.i, enc.j)):
        assert list(cdms.numbers[row]) == [NUMBERS[a], NUMBERS[b]]
        assert list(cdms.names[row]) == [NAMES[a], NAMES[b]]
        assert list(cdms.designators[row]) == [DESIGNATORS[a], DESIGNATORS[b]]
    assert (cdms.catalogs == "SATCAT").all() and (cdms.covariance_methods == "DEFAULT").all()
    assert cdms.originators == ["HAPSIRA-COWELL"] * 4
    assert cdms.message_ids[0] == "HAPSIRA-COWELL_29701_22675_20250215T152914.293248"
    np.testing.assert_array_equal(cdms.pc, pc)  # the file's, as written
    assert cdms.pc_method == ["FOSTER-1992"] * 4
    ours = cdms.probability(HBR)  # and ours from what was read
    np.testing.assert_allclose(ours, pc, rtol=1e-12)
    full = cdms.probability(HBR, method="chan", full=True)
    np.testing.assert_allclose(full.pc, enc.probability(HBR, "chan"), rtol=1e-12)


def test_teme_states_written_in_gcrf_give_the_same_pc(tmp_path):
    """The writer turns TEME into GCRF at each TCA: another frame, the same approach."""
    need("ccsds_ndm")
    from hapsira_cowell.inputs.cdm import read_cdms

    enc, pc, paths = written(tmp_path, "kvn", frame="TEME")
    cdms = read_cdms(paths)
    assert cdms.frame == ["GCRF"] * 4
    assert np.abs(cdms.rr1 - enc.rr1).max() > 1.0  # rotated: kilometres at 7000 km
    np.testing.assert_allclose(np.linalg.norm(cdms.rr1, axis=1),
                               np.linalg.norm(enc.rr1, axis=1), rtol=1e-13)
    np.testing.assert_allclose(cdms.probability(HBR), pc, rtol=1e-6)


def test_texts_concatenated_messages_and_a_combined_ndm(tmp_path):
    need("ccsds_ndm")
    from hapsira_cowell.inputs.cdm import read_cdms

    _, pc, paths = written(tmp_path, "kvn")
    texts = [open(p).read() for p in paths]
    both = tmp_path / "two.cdm"
    both.write_text(texts[0] + "\n" + texts[1])
    cdms = read_cdms([both, texts[2]])
    assert cdms.sources == [f"{both} #1", f"{both} #2", "text 2"]
    np.testing.assert_array_equal(cdms.pc, pc[:3])
    _, _, xml = written(tmp_path, "xml")
    bodies = [re.sub(r"^<\?xml[^>]*>\s*", "", open(p).read()) for p in xml[:2]]
    ndm = tmp_path / "combined.xml"
    ndm.write_text('<?xml version="1.0" encoding="UTF-8"?>\n<ndm>\n' + "".join(bodies)
                   + "</ndm>\n")
    cdms = read_cdms(ndm)
    assert cdms.sources == [f"{ndm} #1", f"{ndm} #2"]
    np.testing.assert_array_equal(cdms.pc, pc[:2])


def test_objects_in_eme2000_and_gcrf_are_put_in_gcrf(tmp_path):
    need("ccsds_ndm")
    import erfa
    from hapsira_cowell.inputs.cdm import read_cdms

    _, _, paths = written(tmp_path, "kvn")
    text = open(paths[0]).read()
    first = text.index("REF_FRAME")
    mixed = text[:first] + text[first:].replace("GCRF", "EME2000", 1)
    same = text.replace("= GCRF", "= EME2000")
    cdms = read_cdms([mixed, same, text])
    assert cdms.frame == ["GCRF", "EME2000", "GCRF"]
    np.testing.assert_array_equal(cdms.rr1[1], cdms.rr1[2])  # one frame: as written
    bias = erfa.bp00(2451545.0, 0.0)[0].T
    np.testing.assert_allclose(cdms.rr1[0], bias @ cdms.rr1[2], rtol=1e-15)
    np.testing.assert_array_equal(cdms.rr2[0], cdms.rr2[2])
    assert 0.1 < np.linalg.norm(cdms.rr1[0] - cdms.rr1[2]) * 1e3 < 1.0  # m: the bias


def test_a_comment_hbr_is_the_cdms_hard_body_radius(tmp_path):
    """CARA's ``COMMENT HBR = 15 [m]`` after the relative metadata (KVN; ccsds-ndm files
    it with object 1's metadata), one in the relative metadata of an XML CDM in km, none:
    ``hbr`` 0.015, 0.02 km and NaN; ``probability()`` takes them, and refuses to guess one
    for a CDM without it, naming the message."""
    need("ccsds_ndm")
    from hapsira_cowell.inputs.cdm import read_cdms

    enc, _, (kvn, *_) = written(tmp_path, "kvn")
    text = open(kvn).read()
    object1 = text.index("OBJECT ")
    cara = text[:object1] + "COMMENT HBR = 15 [m]\n" + text[object1:]
    xml = open(written(tmp_path, "xml")[2][0]).read()
    at = xml.index("<TCA>")
    xml = xml[:at] + "<COMMENT>HBR = 0.02 [km]</COMMENT>" + xml[at:]
    cdms = read_cdms([cara, xml, text])
    np.testing.assert_array_equal(cdms.hbr[:2], [0.015, 0.02])
    assert np.isnan(cdms.hbr[2])
    with pytest.raises(ValueError, match=r"^hbr: text 3 give no hard-body radius"):
        cdms.probability()
    both = read_cdms([cara, xml])
    first = [enc.probability(radius)[0] for radius in (0.015, 0.02)]  # both approach 0
    np.testing.assert_allclose(both.probability(), first, rtol=1e-12)
    with pytest.raises(ValueError, match=r"^text 1: COMMENT HBR = 15 \[ft\]: expected a "
                                         r"positive hard-body radius in m or km"):
        read_cdms(cara.replace("[m]\nOBJECT ", "[ft]\nOBJECT ", 1))


def _without(text, keyword):
    return "\n".join(line for line in text.splitlines() if not line.startswith(keyword))


def test_errors_name_the_file_and_the_keyword(tmp_path):
    need("ccsds_ndm")
    from hapsira_cowell.inputs.cdm import read_cdms

    _, _, (path, *_) = written(tmp_path, "kvn")
    text = open(path).read()

    def read(content, name="bad.cdm"):
        target = tmp_path / name
        target.write_text(content)
        return read_cdms(target)

    where = re.escape(str(tmp_path / "bad.cdm"))
    with pytest.raises(ValueError, match=rf"^{where}: MISS_DISTANCE is missing$"):
        read(_without(text, "MISS_DISTANCE"))
    with pytest.raises(ValueError, match=rf"^{where}: OBJECT2: CN_N is missing$"):
        read(text[:text.rindex("CN_N")] + text[text.rindex("CN_N"):].split("\n", 1)[1])
    with pytest.raises(ValueError, match=rf"^{where}: TCA = '20250215' is not a CCSDS time"):
        read(re.sub(r"(?m)^TCA .*$", "TCA = 20250215", text))
    with pytest.raises(ValueError, match=rf"^{where}: OBJECT1 REF_FRAME = ITRF: states are "
                                         r"read in GCRF or EME2000 \(inertial\), not ITRF"):
        read(text.replace("= GCRF", "= ITRF"))
    with pytest.raises(ValueError, match=rf"^{where}: cannot be read as a CCSDS CDM: "):
        read("not a message\n")
    with pytest.raises(ValueError, match=rf"^{where}: cannot be read as a CCSDS CDM: "
                                         r".*abc"):
        read(re.sub(r"(?m)^(MISS_DISTANCE *= )\S+", r"\1abc", text))
    xml = open(written(tmp_path, "xml")[2][0]).read()
    with pytest.raises(ValueError, match=r"bad.xml: cannot be read as a CCSDS CDM: missing X$"):
        read(re.sub(r"\s*<X [^\n]*", "", xml), "bad.xml")
    with pytest.raises(FileNotFoundError, match="missing.cdm"):
        read_cdms(tmp_path / "missing.cdm")
    with pytest.raises(ValueError, match=r"^text 1: expected a CCSDS CDM, got an OMM$"):
        read_cdms(omm_text(_catalog().satellites[0], "X", "kvn"))


def test_without_ccsds_ndm_the_error_names_the_extra(monkeypatch):
    from hapsira_cowell.inputs.cdm import read_cdms
    from hapsira_cowell.inputs.omm import read_omms

    for name in ["ccsds_ndm"] + [m for m in sys.modules if m.startswith("ccsds_ndm.")]:
        monkeypatch.setitem(sys.modules, name, None)  # importing any of it fails
    for read in (read_cdms, read_omms):
        with pytest.raises(ImportError, match=re.escape("pip install 'hapsira-cowell[cdm]'")):
            read("CCSDS_CDM_VERS = 1.0\n")


# OMMs

def _catalog(count=6):
    catalog = resources.files("hapsira_cowell").joinpath("data", "iridium-33-debris.tle")
    lines = catalog.read_text().splitlines()[:3 * count]
    return from_tle(lines)


def omm_text(sat, name, fmt, P=None, frame=None):
    """An OMM of ``sat``'s TLE elements (sgp4's own export of them), written by ccsds-ndm."""
    from ccsds_ndm.mapping import NDMFileFormats
    from ccsds_ndm.models.ndmxml4 import ndmxml_4_0_0_common_4_0 as common
    from ccsds_ndm.models.ndmxml4 import ndmxml_4_0_0_omm_3_0 as omm
    from ccsds_ndm.models.ndmxml4.ndmxml_4_0_0_master_4_0 import Omm
    from ccsds_ndm.ndm_io import NdmIo
    from sgp4 import exporter

    f = exporter.export_omm(sat, name)
    epoch = Time(sat.jdsatepoch, sat.jdsatepochF, format="jd", scale="utc")
    epoch.precision = 6
    f["EPOCH"] = epoch.isot  # rounded to the microsecond (sgp4's export cuts it)
    covariance = None
    if P is not None:
        axes = ("x", "y", "z", "x_dot", "y_dot", "z_dot")
        kinds = (common.PositionCovarianceType, common.PositionVelocityCovarianceType,
                 common.VelocityCovarianceType)
        covariance = common.OpmCovarianceMatrixType(cov_ref_frame=frame, **{
            f"c{axes[a]}_{axes[b]}": kinds[(a >= 3) + (b >= 3)](value=float(P[a, b]))
            for a in range(6) for b in range(a + 1)})
    message = Omm(
        header=common.OdmHeader(creation_date="2025-02-16T00:00:00", originator="TEST"),
        body=omm.OmmBody(segment=omm.OmmSegment(
            metadata=omm.OmmMetadata(object_name=f["OBJECT_NAME"], object_id=f["OBJECT_ID"],
                                     center_name="EARTH", ref_frame="TEME", time_system="UTC",
                                     mean_element_theory="SGP4"),
            data=omm.OmmData(
                mean_elements=omm.MeanElementsType(
                    epoch=f["EPOCH"], mean_motion=omm.RevType(value=f["MEAN_MOTION"]),
                    eccentricity=f["ECCENTRICITY"],
                    inclination=common.InclinationType(value=f["INCLINATION"]),
                    ra_of_asc_node=common.AngleType(value=f["RA_OF_ASC_NODE"]),
                    arg_of_pericenter=common.AngleType(value=f["ARG_OF_PERICENTER"]),
                    mean_anomaly=common.AngleType(value=f["MEAN_ANOMALY"])),
                tle_parameters=omm.TleParametersType(
                    ephemeris_type=f["EPHEMERIS_TYPE"],
                    classification_type=f["CLASSIFICATION_TYPE"],
                    norad_cat_id=f["NORAD_CAT_ID"], element_set_no=f["ELEMENT_SET_NO"],
                    rev_at_epoch=f["REV_AT_EPOCH"], bstar=omm.BStarType(value=f["BSTAR"]),
                    mean_motion_dot=omm.DRevType(value=f["MEAN_MOTION_DOT"]),
                    mean_motion_ddot=omm.DdRevType(value=f["MEAN_MOTION_DDOT"])),
                covariance_matrix=covariance))))
    return NdmIo().to_string(message, getattr(NDMFileFormats, fmt.upper()))


@pytest.mark.parametrize("fmt", ["kvn", "xml"])
def test_omms_of_the_shipped_catalog_give_its_tle_states(tmp_path, fmt):
    need("ccsds_ndm")
    from hapsira_cowell.inputs.omm import OMMCatalog, read_omms

    tle = _catalog()
    sigma = np.array([0.1, 1.0, 0.1, 1e-4, 1e-3, 1e-4])
    files = []
    for index, (sat, name) in enumerate(zip(tle.satellites, tle.names)):
        P = np.diag(sigma ** 2) if index % 2 == 0 else None
        files.append(tmp_path / f"{index}.omm")
        files[-1].write_text(omm_text(sat, name, fmt, P, "RTN" if index % 4 == 0 else "TEME"))
    catalog = read_omms(files)
    assert isinstance(catalog, OMMCatalog) and len(catalog) == len(tle)
    assert catalog.names == tle.names
    np.testing.assert_array_equal(catalog.satnums, tle.satnums)
    assert catalog.designators == ["1997-051" + s.intldesg[5:] for s in tle.satellites]
    assert catalog.sources == [str(f) for f in files]
    assert np.abs((catalog.epochs - tle.epochs).to_value(u.s)).max() < 1e-6
    np.testing.assert_allclose(catalog.r, tle.r, rtol=0, atol=1e-9)  # km
    np.testing.assert_allclose(catalog.v, tle.v, rtol=0, atol=1e-12)  # km/s
    later = tle.epochs.max() + 2 * u.day  # and SGP4 takes them on alike
    for ours, theirs in zip(catalog.states_at(later), tle.states_at(later)):
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-8)
    assert catalog.covariance_frames == ["RTN", "", "TEME", "", "RTN", ""]
    np.testing.assert_allclose(catalog.covariances[0],
                               from_rtn(tle.r[0], tle.v[0], np.diag(sigma ** 2)), rtol=1e-9)
    np.testing.assert_array_equal(catalog.covariances[2], np.diag(sigma ** 2))
    assert np.isnan(catalog.covariances[1]).all()
    assert "OMMCatalog(6 objects" in repr(catalog) and "3 with covariance" in repr(catalog)


def test_omm_errors_name_the_file_and_the_keyword(tmp_path):
    need("ccsds_ndm")
    from hapsira_cowell.inputs.omm import read_omms

    tle = _catalog(1)
    text = omm_text(tle.satellites[0], tle.names[0], "kvn", np.eye(6), "TEME")
    path = tmp_path / "one.omm"

    def read(content):
        path.write_text(content)
        return read_omms(path)

    where = re.escape(str(path))
    with pytest.raises(ValueError, match=rf"^{where}: REF_FRAME = GCRF: SGP4 mean elements "
                                         r"are read \(REF_FRAME = TEME\)$"):
        read(text.replace("= TEME", "= GCRF", 1))
    with pytest.raises(ValueError, match=rf"^{where}: MEAN_ELEMENT_THEORY = DSST"):
        read(text.replace("= SGP4", "= DSST"))
    with pytest.raises(ValueError, match=rf"^{where}: MEAN_MOTION is missing$"):
        read(_without(text, "MEAN_MOTION "))
    with pytest.raises(ValueError, match=rf"^{where}: COV_REF_FRAME = TNW: covariances are "
                                         r"read in TEME, RTN, RSW$"):
        read(re.sub(r"(?m)^COV_REF_FRAME .*$", "COV_REF_FRAME = TNW", text))
    with pytest.raises(ValueError, match=rf"^{where}: expected a CCSDS OMM, got a"):
        read(open(written(tmp_path, "kvn")[2][0]).read())
    assert len(read(text + "\n" + text)) == 2
