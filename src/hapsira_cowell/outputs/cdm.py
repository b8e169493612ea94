"""CCSDS Conjunction Data Messages (CCSDS 508.0-B-1): one per close approach, written with
the `ccsds-ndm` package (``pip install 'hapsira-cowell[cdm]'``; it is GPL-3.0 licensed,
which is why it is an extra, imported only here and by the readers of
`hapsira_cowell.inputs.cdm` and `hapsira_cowell.inputs.omm`).

A CDM holds the approach (TCA, miss distance, relative speed, relative position and
velocity of object 2 in object 1's RTN frame, the screening period and volume, and on
request the probability of collision and its method) and, for each object, its state at
the TCA and its 6 x 6 RTN covariance there: what
`hapsira_cowell.propagation.encounters.encounters` computes. The standard makes the
covariance mandatory, so a CDM needs each object's covariance at the epoch; a TLE
carries none, so the command line asks for one (``--sigma``: standard deviations in
RTN, written with ``COVARIANCE_METHOD = DEFAULT``).

Frames: a CDM's states are in EME2000, GCRF or ITRF. TLE states (TEME) are rotated to
GCRF at each TCA with astropy (``TEME`` to ``GCRS``); states given in GCRF or EME2000
are written as they are. The RTN covariances and relative state do not depend on
which of these inertial frames the states came in (their rotation, up to the slow
precession of TEME, is the same for position and velocity).
"""

import datetime
import os
import re
import tempfile

import numpy as np

__all__ = ["FRAMES", "FORMATS", "read_cdm", "write_cdms"]

#: Frames the states may come in, and the CDM REF_FRAME each is written in
FRAMES = {"TEME": "GCRF", "GCRF": "GCRF", "EME2000": "EME2000"}
#: File formats of `write_cdms` and their suffix
FORMATS = {"kvn": ".cdm", "xml": ".xml"}

_TEXT = re.compile(r"^[ -~]*$")
_FILE_PART = re.compile(r"[^A-Za-z0-9.-]+")


def _library():
    try:
        from ccsds_ndm.mapping import NDMFileFormats
        from ccsds_ndm.models.ndmxml4 import ndmxml_4_0_0_cdm_1_0 as cdm
        from ccsds_ndm.models.ndmxml4 import ndmxml_4_0_0_common_4_0 as common
        from ccsds_ndm.models.ndmxml4.ndmxml_4_0_0_master_4_0 import Cdm
        from ccsds_ndm.ndm_io import NdmIo
    except ImportError:
        raise ValueError("CDM output needs the ccsds-ndm package, which is not installed "
                         "(pip install 'hapsira-cowell[cdm]')") from None
    return cdm, common, Cdm, NdmIo, NDMFileFormats


def _text(value, name):
    value = str(value)
    if not _TEXT.match(value):
        raise ValueError(f"{name}: expected one line of printable ASCII text, got {value!r}")
    return value


def _gcrf(rr, vv, times):
    """TEME states at ``times`` (astropy Time, (K,)) rotated to GCRS, km and km/s."""
    from astropy import units as u
    from astropy.coordinates import GCRS, TEME, CartesianDifferential, CartesianRepresentation

    position = CartesianRepresentation(rr.T * u.km,
                                       differentials=CartesianDifferential(vv.T * u.km / u.s))
    gcrs = TEME(position, obstime=times).transform_to(GCRS(obstime=times))
    cartesian = gcrs.cartesian
    velocity = cartesian.differentials["s"]
    return (np.stack([cartesian.x.to_value(u.km), cartesian.y.to_value(u.km),
                      cartesian.z.to_value(u.km)], axis=1),
            np.stack([velocity.d_x.to_value(u.km / u.s), velocity.d_y.to_value(u.km / u.s),
                      velocity.d_z.to_value(u.km / u.s)], axis=1))


def _covariance(cdm, common, P):
    """The 21 CR_R .. CNDOT_NDOT entries of a 6 x 6 RTN covariance in km units, in m."""
    P = P * 1e6  # km^2, km^2/s, km^2/s^2 -> m^2, m^2/s, m^2/s^2
    axes = ("r", "t", "n", "rdot", "tdot", "ndot")
    units = {0: (cdm.M2Type, cdm.M2Units.M_2), 1: (cdm.M2SType, cdm.M2SUnits.M_2_S),
             2: (cdm.M2S2Type, cdm.M2S2Units.M_2_S_2)}
    entries = {}
    for a in range(6):
        for b in range(a + 1):
            kind, unit = units[(a >= 3) + (b >= 3)]
            entries[f"c{axes[a]}_{axes[b]}"] = kind(value=float(P[a, b]), units=unit)
    return cdm.CdmCovarianceMatrixType(**entries)


def _probe(folder):
    """ValueError unless a file can be made in ``folder`` (``os.access`` says yes to root
    for /proc and on a read-only file system): before the work, not at its first file."""
    try:
        handle, probe = tempfile.mkstemp(prefix=".hapsira-cowell-probe-", dir=folder)
    except OSError as error:
        raise ValueError(f"folder: cannot write in {os.fspath(folder)!r}: "
                         f"{error.strerror or error}") from None
    os.close(handle)
    os.remove(probe)


def write_cdms(folder, enc, epoch, names, *, designators=None, numbers=None, frame="TEME",
               screen=None, threshold=None, originator="HAPSIRA-COWELL",
               covariance_method="DEFAULT", gravity_model="EARTH J2 (TWO-BODY + J2)",
               fmt="kvn", t0=0.0, pc=None, pc_method=None):
    """One CDM file per approach of ``enc`` in ``folder``; returns their paths.

    Parameters
    ----------
    folder : str or path
        An existing folder that files can be written in (checked first). Files are
        named ``CDM_<object 1>_<object 2>_<TCA>`` plus the format's suffix (`FORMATS`).
    enc : Encounters
        `hapsira_cowell.propagation.encounters.encounters`' result (km, km/s).
    epoch : astropy Time
        The time of ``t0``, the zero of ``enc.tca``'s axis.
    names : sequence of str
        Each object's name (indexed by ``enc.i``, ``enc.j``: one for every object up to
        the highest index).
    designators, numbers : sequence of str, optional
        Each object's international designator (``1997-051C``) and catalogue number
        (``OBJECT_DESIGNATOR``, e.g. a NORAD number); default: unknown / the index.
    frame : str
        The frame of ``enc``'s states: ``TEME`` (rotated to GCRF), ``GCRF`` or
        ``EME2000`` (`FRAMES`).
    screen : (start, stop), optional
        The screening span, s on the axis of ``tca`` (START/STOP_SCREEN_PERIOD).
    threshold : float, optional
        The screening radius, km: a spherical volume (an RTN ellipsoid of equal axes).
    originator, covariance_method, gravity_model : str
        Header and metadata values (``covariance_method``: ``CALCULATED`` or
        ``DEFAULT``).
    fmt : str
        ``kvn`` (key = value text) or ``xml``.
    pc : array_like, optional
        Each approach's probability of collision (``COLLISION_PROBABILITY``; none
        written where NaN), e.g. ``enc.probability(hbr)``.
    pc_method : str, optional
        Its ``COLLISION_PROBABILITY_METHOD`` (SANA's names: ``FOSTER-1992``,
        ``CHAN-1997``, ...; `hapsira_cowell.propagation.probability.CDM_METHODS`); needed
        with ``pc``.
    """
    from astropy import units as u

    cdm, common, Cdm, NdmIo, NDMFileFormats = _library()
    if fmt not in FORMATS:
        raise ValueError(f"fmt: expected one of {sorted(FORMATS)}, got {fmt!r}")
    if frame not in FRAMES:
        raise ValueError(f"frame: a CDM's states are in EME2000, GCRF or ITRF; expected "
                         f"states in one of {sorted(FRAMES)}, got {frame!r}")
    if not os.path.isdir(folder):
        raise ValueError(f"folder: {folder!r} is not an existing folder")
    _probe(folder)
    method = str(covariance_method).upper()
    if method not in ("CALCULATED", "DEFAULT"):
        raise ValueError(f"covariance_method: expected CALCULATED or DEFAULT, got "
                         f"{covariance_method!r}")
    if pc is not None:
        pc = np.asarray(pc, dtype=np.float64).reshape(-1)
        if pc.shape[0] != len(enc):
            raise ValueError(f"pc: expected one probability per approach ({len(enc)}), got "
                             f"{pc.shape[0]}")
        if np.any(pc[np.isfinite(pc)] < 0) or np.any(pc[np.isfinite(pc)] > 1):
            raise ValueError("pc: expected probabilities between 0 and 1")
        if pc_method is None:
            raise ValueError("pc_method: expected the method's name (e.g. FOSTER-1992) with pc")
        pc_method = _text(pc_method, "pc_method")
    originator = _text(originator, "originator")
    gravity_model = _text(gravity_model, "gravity_model")
    n_objects = len(names)
    names = [_text(x, "names") for x in names]
    designators = ["UNKNOWN"] * n_objects if designators is None else [
        _text(x, "designators") or "UNKNOWN" for x in designators]
    numbers = [str(x) for x in range(n_objects)] if numbers is None else [
        _text(x, "numbers") for x in numbers]
    if len(designators) != n_objects or len(numbers) != n_objects:
        raise ValueError(f"designators, numbers: expected one per name ({n_objects})")
    if len(enc) == 0:
        return []
    needed = int(max(np.max(enc.i), np.max(enc.j))) + 1
    if n_objects < needed:
        raise ValueError(f"names: expected one name per object of enc (indexed by enc.i and "
                         f"enc.j, up to {needed - 1}): {needed} needed, {n_objects} given")
    bad = np.flatnonzero((enc.status != 0).any(axis=1))
    if bad.size:
        raise ValueError(f"enc: the objects of approach {bad[0]} did not reach its TCA "
                         f"(status {enc.status[bad[0]].tolist()}); {bad.size} such approaches")
    utc = epoch.utc
    times = utc + (np.asarray(enc.tca) - t0) * u.s
    rr1, vv1, rr2, vv2 = enc.rr1, enc.vv1, enc.rr2, enc.vv2
    if frame == "TEME":
        rr1, vv1 = _gcrf(rr1, vv1, times)
        rr2, vv2 = _gcrf(rr2, vv2, times)
    times.precision = 6
    tca_text = list(times.isot)
    period = [None, None]
    if screen is not None:
        edges = utc + (np.asarray(screen, dtype=np.float64) - t0) * u.s
        edges.precision = 6
        period = list(edges.isot)
    created = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    io, kind = NdmIo(), getattr(NDMFileFormats, fmt.upper())
    m, ms = common.LengthUnits.M, cdm.DvUnits.M_S
    km, kms = common.PositionUnits.KM, common.VelocityUnits.KM_S
    volume = {}
    if threshold is not None:
        volume = dict(screen_volume_frame=cdm.ScreenVolumeFrameType.RTN,
                      screen_volume_shape=cdm.ScreenVolumeShapeType.ELLIPSOID,
                      **{f"screen_volume_{a}": common.LengthTypeUo(value=threshold * 1e3,
                                                                   units=m) for a in "xyz"})

    def probability(row):
        if pc is None or not np.isfinite(pc[row]):
            return {}
        return dict(collision_probability=float(pc[row]),
                    collision_probability_method=pc_method)

    paths = []
    for row in range(len(enc)):
        objects = (int(enc.i[row]), int(enc.j[row]))
        rel = enc.relative[row] * 1e3  # km, km/s -> m, m/s
        relative = cdm.RelativeMetadataData(
            tca=tca_text[row] + "Z",
            miss_distance=common.LengthTypeUo(value=float(enc.miss[row]) * 1e3, units=m),
            relative_speed=cdm.DvType(value=float(enc.speed[row]) * 1e3, units=ms),
            relative_state_vector=cdm.RelativeStateVectorType(
                **{f"relative_position_{a}": common.LengthTypeUo(value=float(rel[c]), units=m)
                   for c, a in enumerate("rtn")},
                **{f"relative_velocity_{a}": cdm.DvType(value=float(rel[3 + c]), units=ms)
                   for c, a in enumerate("rtn")}),
            start_screen_period=None if period[0] is None else period[0] + "Z",
            stop_screen_period=None if period[1] is None else period[1] + "Z",
            **volume, **probability(row))
        segments = []
        for which, (index, rr, vv, P) in enumerate(
                ((objects[0], rr1[row], vv1[row], enc.P1_rtn[row]),
                 (objects[1], rr2[row], vv2[row], enc.P2_rtn[row]))):
            metadata = cdm.CdmMetadata(
                object_value=(cdm.ObjectType.OBJECT1, cdm.ObjectType.OBJECT2)[which],
                object_designator=numbers[index], catalog_name="SATCAT",
                object_name=names[index] or numbers[index],
                international_designator=designators[index], ephemeris_name="NONE",
                covariance_method=getattr(cdm.CovarianceMethodType, method),
                maneuverable=cdm.ManeuverableType.N_A, ref_frame=getattr(
                    cdm.ReferenceFrameType, FRAMES[frame]),
                gravity_model=gravity_model, atmospheric_model="NONE",
                n_body_perturbations="NONE", solar_rad_pressure=common.YesNoType.NO,
                earth_tides=common.YesNoType.NO, intrack_thrust=common.YesNoType.NO)
            state = cdm.CdmStateVectorType(
                **{a: common.PositionTypeUr(value=float(rr[c]), units=km)
                   for c, a in enumerate("xyz")},
                **{f"{a}_dot": common.VelocityTypeUr(value=float(vv[c]), units=kms)
                   for c, a in enumerate("xyz")})
            segments.append(cdm.CdmSegment(metadata=metadata, data=cdm.CdmData(
                state_vector=state, covariance_matrix=_covariance(cdm, common, P))))
        stamp = tca_text[row].replace("-", "").replace(":", "")
        label = "_".join(_FILE_PART.sub("-", numbers[x]) for x in objects)
        message = Cdm(  # the root element (the KVN writer dispatches on it)
            header=cdm.CdmHeader(creation_date=created, originator=originator,
                                 message_id=f"{originator}_{label}_{stamp}"),
            body=cdm.CdmBody(relative_metadata_data=relative, segment=segments))
        path = os.path.join(folder, f"CDM_{label}_{stamp}{FORMATS[fmt]}")
        io.to_file(message, kind, path)
        paths.append(path)
    return paths


def read_cdm(path):
    """A CDM file read back with ccsds-ndm: its object tree (``CdmType``)."""
    NdmIo = _library()[3]
    return NdmIo().from_path(path)
