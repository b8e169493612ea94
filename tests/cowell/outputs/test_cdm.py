"""CCSDS Conjunction Data Messages (`hapsira_cowell.outputs.cdm`): approaches written as KVN
and XML and read back with ccsds-ndm, every number in its place and unit; TEME states
rotated to GCRF; the argument checks."""

import os

import numpy as np
import pytest
from extras import need
from astropy import units as u
from astropy.time import Time

pytest.importorskip("ccsds_ndm", reason="the cdm extra (ccsds-ndm) is not installed")

from hapsira_cowell.outputs.cdm import read_cdm, write_cdms  # noqa: E402
from hapsira_cowell.propagation.encounters import Encounters  # noqa: E402

need("ccsds_ndm")  # in the test extra: never skipped in CI

EPOCH = Time("2025-02-15T15:29:14.293248", scale="utc")
AXES = ("r", "t", "n", "rdot", "tdot", "ndot")


def synthetic(seed=0):
    """Two approaches between objects 0-2 and 1-2 with random, plausible numbers."""
    rng = np.random.default_rng(seed)

    def states():
        r = rng.normal(size=(2, 3))
        r *= rng.uniform(6700, 7500, (2, 1)) / np.linalg.norm(r, axis=1, keepdims=True)
        v = np.cross(r, rng.normal(size=(2, 3)))
        return r, v * 7.5 / np.linalg.norm(v, axis=1, keepdims=True)

    def covariances():
        A = rng.normal(size=(2, 6, 6)) * np.array([0.3, 1, 0.1, 3e-4, 3e-4, 1e-4])[:, None]
        return A @ A.swapaxes(1, 2)

    rr1, vv1 = states()
    rr2, vv2 = states()
    P1, P2 = covariances(), covariances()
    return Encounters(i=np.array([0, 1]), j=np.array([2, 2]), tca=np.array([100.25, 3600.5]),
                      miss=np.array([0.75, 4.2]), speed=np.array([11.9, 0.01]),
                      rr1=rr1, vv1=vv1, rr2=rr2, vv2=vv2, P1=P1, P2=P2, P1_rtn=P1,
                      P2_rtn=P2, relative=rng.normal(size=(2, 6)),
                      status=np.zeros((2, 2), dtype=np.int64))


NAMES = ["FENGYUN 1C DEB", "COSMOS 2251 DEB", "IRIDIUM 33 DEB"]
DESIGNATORS = ["1999-025ES", "1993-036A", "1997-051C"]
NUMBERS = ["29701", "22675", "33871"]


@pytest.mark.parametrize("fmt, suffix", [("kvn", ".cdm"), ("xml", ".xml")])
def test_every_number_read_back_in_place_and_unit(tmp_path, fmt, suffix):
    enc = synthetic()
    paths = write_cdms(tmp_path, enc, EPOCH, NAMES, designators=DESIGNATORS, numbers=NUMBERS,
                       frame="GCRF", screen=(0.0, 86400.0), threshold=5.0,
                       originator="TEST-ORG", fmt=fmt)
    assert len(paths) == 2 and sorted(os.listdir(tmp_path)) == sorted(
        os.path.basename(p) for p in paths)
    assert os.path.basename(paths[0]) == f"CDM_29701_33871_20250215T153054.543248{suffix}"
    for row, path in enumerate(paths):
        cdm = read_cdm(path)
        assert cdm.header.originator == "TEST-ORG"
        rel = cdm.body.relative_metadata_data
        tca = (EPOCH + enc.tca[row] * u.s).utc
        assert abs((Time(rel.tca.rstrip("Z"), scale="utc") - tca).to_value(u.s)) < 1e-6
        assert rel.miss_distance.units.value == "m"
        assert rel.miss_distance.value == pytest.approx(enc.miss[row] * 1e3, rel=1e-15)
        assert rel.relative_speed.value == pytest.approx(enc.speed[row] * 1e3, rel=1e-15)
        vector = rel.relative_state_vector
        got = [getattr(vector, f"relative_{kind}_{axis}").value
               for kind in ("position", "velocity") for axis in "rtn"]
        np.testing.assert_allclose(got, enc.relative[row] * 1e3, rtol=1e-15)
        assert rel.screen_volume_x.value == 5000.0
        assert rel.start_screen_period.startswith("2025-02-15T15:29:14.293248")
        assert rel.stop_screen_period.startswith("2025-02-16T15:29:14.293248")
        objects = (enc.i[row], enc.j[row])
        for which, segment in enumerate(cdm.body.segment):
            meta, data = segment.metadata, segment.data
            index = objects[which]
            assert meta.object_value.value == f"OBJECT{which + 1}"
            assert (meta.object_designator, meta.object_name, meta.international_designator) \
                == (NUMBERS[index], NAMES[index], DESIGNATORS[index])
            assert meta.ref_frame.value == "GCRF" and meta.covariance_method.value == "DEFAULT"
            rr, vv = (enc.rr1, enc.vv1) if which == 0 else (enc.rr2, enc.vv2)
            state = data.state_vector
            np.testing.assert_allclose([state.x.value, state.y.value, state.z.value], rr[row],
                                       rtol=1e-15)
            np.testing.assert_allclose([state.x_dot.value, state.y_dot.value,
                                        state.z_dot.value], vv[row], rtol=1e-15)
            P = (enc.P1_rtn if which == 0 else enc.P2_rtn)[row] * 1e6
            matrix = data.covariance_matrix
            for a in range(6):
                for b in range(a + 1):
                    entry = getattr(matrix, f"c{AXES[a]}_{AXES[b]}")
                    assert entry.value == pytest.approx(P[a, b], rel=1e-15, abs=0)
                    assert entry.units.value == ("m**2", "m**2/s", "m**2/s**2")[
                        (a >= 3) + (b >= 3)]


def test_teme_states_are_rotated_to_gcrf(tmp_path):
    enc = synthetic(seed=1)
    paths = write_cdms(tmp_path, enc, EPOCH, NAMES, frame="TEME")
    for row, path in enumerate(paths):
        state = read_cdm(path).body.segment[0].data.state_vector
        r = np.array([state.x.value, state.y.value, state.z.value])
        v = np.array([state.x_dot.value, state.y_dot.value, state.z_dot.value])
        assert read_cdm(path).body.segment[0].metadata.ref_frame.value == "GCRF"
        # a rotation: lengths kept; by the precession and nutation since J2000 (25 years:
        # about 0.35 degrees), not nothing and not more than a degree. The velocity has
        # the slowly turning frame's omega x r too (astropy differentiates the rotation):
        # precession's 50"/year at 7000 km is 2e-8 km/s, measured 1.7e-8
        assert np.linalg.norm(r) == pytest.approx(np.linalg.norm(enc.rr1[row]), rel=1e-12)
        assert np.linalg.norm(v) == pytest.approx(np.linalg.norm(enc.vv1[row]), abs=5e-8)
        angle = np.degrees(np.arccos(r @ enc.rr1[row] / np.linalg.norm(r) ** 2))
        assert 0.05 < angle < 1.0
        assert read_cdm(path).body.segment[0].metadata.object_designator == str(enc.i[row])


def test_a_folder_that_cannot_be_written_is_refused_first():
    """/proc: os.access says yes to root there; the approaches were rotated and built, and
    the first file's OSError came at the end."""
    if not os.path.isdir("/proc/self"):
        pytest.skip("no /proc here")
    with pytest.raises(ValueError, match=r"^folder: cannot write in '/proc': "):
        write_cdms("/proc", synthetic(), EPOCH, NAMES, frame="TEME")


def test_bad_arguments_are_named(tmp_path):
    enc = synthetic()
    with pytest.raises(ValueError, match="frame: a CDM's states are in EME2000, GCRF or ITRF"):
        write_cdms(tmp_path, enc, EPOCH, NAMES, frame="ITRS")
    with pytest.raises(ValueError, match="fmt: expected one of"):
        write_cdms(tmp_path, enc, EPOCH, NAMES, fmt="json")
    with pytest.raises(ValueError, match="folder: .* is not an existing folder"):
        write_cdms(tmp_path / "missing", enc, EPOCH, NAMES)
    with pytest.raises(ValueError, match="covariance_method: expected CALCULATED or DEFAULT"):
        write_cdms(tmp_path, enc, EPOCH, NAMES, covariance_method="GUESSED")
    with pytest.raises(ValueError, match="names: expected one line of printable ASCII"):
        write_cdms(tmp_path, enc, EPOCH, ["A", "B\nCOMMENT = injected", "C"])
    with pytest.raises(ValueError, match="designators, numbers: expected one per name"):
        write_cdms(tmp_path, enc, EPOCH, NAMES, numbers=["1"])
    # objects 0 to 2 need three names: an IndexError at the second approach once
    with pytest.raises(ValueError, match=r"^names: expected one name per object of enc "
                                         r"\(indexed by enc.i and enc.j, up to 2\): 3 needed, "
                                         r"2 given$"):
        write_cdms(tmp_path, enc, EPOCH, NAMES[:2])
    enc.status[1, 0] = -3
    with pytest.raises(ValueError, match=r"enc: the objects of approach 1 did not reach"):
        write_cdms(tmp_path, enc, EPOCH, NAMES)
    assert os.listdir(tmp_path) == []


def _close_encounters():
    """`synthetic`'s approaches with object 2 a few hundred metres from object 1 and
    covariances in each object's own RTN frame as well."""
    from hapsira_cowell.covariance import to_rtn

    enc = synthetic(seed=3)
    offset = np.cross(enc.vv2 - enc.vv1, [[0.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
    enc.rr2 = enc.rr1 + 0.3 * offset / np.linalg.norm(offset, axis=1, keepdims=True)
    enc.P1_rtn, enc.P2_rtn = to_rtn(enc.rr1, enc.vv1, enc.P1), to_rtn(enc.rr2, enc.vv2, enc.P2)
    return enc


@pytest.mark.parametrize("fmt", ["kvn", "xml"])
def test_collision_probability_read_back_and_recomputed_from_the_cdm(tmp_path, fmt):
    """The writer's Pc is the CDM's COLLISION_PROBABILITY, and the Pc of the states and
    RTN covariances read back from the CDM equals it."""
    from hapsira_cowell.conjunctions import probability
    from hapsira_cowell.covariance import from_rtn

    enc = _close_encounters()
    pc = enc.probability(0.02)
    assert np.all(pc > 1e-8)
    paths = write_cdms(tmp_path, enc, EPOCH, NAMES, frame="GCRF", fmt=fmt, pc=pc,
                       pc_method="FOSTER-1992")
    for row, path in enumerate(paths):
        cdm = read_cdm(path)
        rel = cdm.body.relative_metadata_data
        assert rel.collision_probability == pytest.approx(pc[row], rel=1e-15)
        assert rel.collision_probability_method == "FOSTER-1992"
        states, covariances = [], []
        for segment in cdm.body.segment:
            state, matrix = segment.data.state_vector, segment.data.covariance_matrix
            r = np.array([state.x.value, state.y.value, state.z.value])
            v = np.array([state.x_dot.value, state.y_dot.value, state.z_dot.value])
            P = np.zeros((6, 6))
            for a in range(6):
                for b in range(a + 1):
                    P[a, b] = P[b, a] = getattr(matrix, f"c{AXES[a]}_{AXES[b]}").value * 1e-6
            states.append((r, v))
            covariances.append(from_rtn(r, v, P))
        again = probability(states[0][0], states[0][1], covariances[0], states[1][0],
                            states[1][1], covariances[1], 0.02)
        assert float(again) == pytest.approx(pc[row], rel=1e-9)


def test_without_pc_no_probability_is_written_and_bad_pc_is_named(tmp_path):
    enc = _close_encounters()
    path = write_cdms(tmp_path, enc, EPOCH, NAMES, frame="GCRF")[0]
    rel = read_cdm(path).body.relative_metadata_data
    assert rel.collision_probability is None and rel.collision_probability_method is None
    with pytest.raises(ValueError, match=r"pc: expected one probability per approach \(2\)"):
        write_cdms(tmp_path, enc, EPOCH, NAMES, frame="GCRF", pc=[0.1], pc_method="X")
    with pytest.raises(ValueError, match="pc_method: expected the method's name"):
        write_cdms(tmp_path, enc, EPOCH, NAMES, frame="GCRF", pc=[0.1, 0.2])
    with pytest.raises(ValueError, match="pc: expected probabilities between 0 and 1"):
        write_cdms(tmp_path, enc, EPOCH, NAMES, frame="GCRF", pc=[0.1, 2.0], pc_method="X")
