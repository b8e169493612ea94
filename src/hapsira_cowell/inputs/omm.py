"""Reading CCSDS Orbit Mean-Elements Messages (CCSDS 502.0-B-3, KVN or XML) of SGP4 mean
elements into a catalog like a TLE catalog's (`hapsira_cowell.inputs.tle.TLECatalog`:
names, catalogue numbers, epochs, TEME states at each object's epoch and ``states_at``
for a common one), plus each object's covariance where the message has one. Read with
``ccsds-ndm`` (``pip install 'hapsira-cowell[cdm]'``); the elements are handed to
``sgp4`` exactly as a TLE's are, so an OMM made from a TLE gives the TLE's states.
"""

import numpy as np
from sgp4.api import WGS72, Satrec

from . import ndm
from .tle import TLECatalog, single_epoch

__all__ = ["COVARIANCE_FRAMES", "NO_COVARIANCE", "NO_STATE", "OMMCatalog", "read_omms"]

#: The covariance frames read: TEME (the elements' frame) as it is, RTN (also written
#: RSW) turned into TEME at the epoch
COVARIANCE_FRAMES = ("TEME", "RTN", "RSW")
#: `OMMCatalog.covariances_at`'s status of an object whose message has no covariance
NO_COVARIANCE = 2
#: `OMMCatalog.covariances_at`'s status of an object SGP4 gives no state at the epoch
#: (`states_at`'s ``ok`` False)
NO_STATE = 3
_COVARIANCE = ("x", "y", "z", "x_dot", "y_dot", "z_dot")
_DEG = np.pi / 180.0
_MINUTES_PER_DAY = 1440.0


class OMMCatalog(TLECatalog):
    """What `read_omms` returns: a `TLECatalog` (``names``, ``satnums``, ``epochs``,
    ``r``, ``v`` TEME at each epoch, ``satellites``, ``states_at``) of OMMs, plus:

    ``designators`` (N,): ``OBJECT_ID`` (the international designator, ``1997-051C``).
    ``sources`` (N,): each object's message (its file, ``#<i>`` for the i-th of a file
    holding several, or ``text <i>``). ``covariances`` (N, 6, 6): each object's covariance
    at its epoch in TEME, km and km/s (NaN where its message has none; one given in RTN is
    rotated with the TEME state at the epoch). ``covariance_frames`` (N,): the frame the
    message gave it in ('' where none). ``line_numbers``: each object's position in the
    input, 1-based; ``errors`` is empty (a bad message raises). `covariances_at` carries
    the covariances to the common epoch of `states_at`.
    """

    def __init__(self, names, satellites, r, v, designators, sources, covariances, frames):
        super().__init__(names, satellites, r, v, np.arange(1, len(names) + 1), [])
        self.designators = list(designators)
        self.sources = list(sources)
        self.covariances = np.asarray(covariances, dtype=np.float64).reshape(-1, 6, 6)
        self.covariance_frames = list(frames)

    def covariances_at(self, epoch, *, f=None, params=None, rtol=1e-11, atol=1e-12):
        """Each object's covariance carried from its own epoch to one common ``epoch``,
        the one of `states_at`: ``P = Phi P0 Phi^T``, ``Phi`` the state transition
        matrix of the motion from the object's epoch to ``epoch`` (backward where its
        epoch is later), from ``cowell(..., stm=True)`` with `screen`'s force model
        (two-body + J2, `hapsira_cowell.conjunctions.two_body_j2`) from its TEME state
        at its epoch (``r``, ``v``): the linear model `encounters` then carries the
        covariances on to each TCA with. The mean at ``epoch`` is SGP4's (`states_at`),
        which that path misses by kilometres after a day (drag, SGP4's theory), mostly
        along the orbit: the matrix is set in SGP4's state's RTN frame as it is in the
        path's (``from_rtn(r_sgp4, v_sgp4, to_rtn(r_path, v_path, Phi P0 Phi^T))``), so
        that an along-track error stays along the track.

        Parameters
        ----------
        epoch : astropy.time.Time or str
            A single time, as for `states_at`.
        f, params, rtol, atol :
            As for `encounters` (default `two_body_j2` and its tolerances).

        Returns
        -------
        P : ndarray, (N, 6, 6)
            TEME, km and km/s, at ``epoch``; an object at ``epoch`` keeps its
            ``covariances`` row as it is; NaN where its message has none or its
            propagation failed.
        status : ndarray of int64, (N,)
            0 where ``P`` was carried (or the object is at ``epoch``), `NO_COVARIANCE`
            (2) where its message has no covariance, `NO_STATE` (3) where SGP4 gives no
            state at ``epoch`` (`states_at`'s ``ok``), and ``cowell``'s negative codes
            (`hapsira_cowell.propagation.results.STATUS_MESSAGES`) where the
            propagation failed; one object's failure leaves the others alone.
        """
        from ..constants import K_EARTH
        from ..propagation.covariance import carry, from_rtn, to_rtn

        epoch = single_epoch(epoch)
        n = len(self)
        P = np.full((n, 6, 6), np.nan)
        status = np.full(n, NO_COVARIANCE, dtype=np.int64)
        given = np.isfinite(self.covariances).all(axis=(1, 2))
        tofs = (epoch - self.epochs).to_value("s") if n else np.empty(0)
        there = np.flatnonzero(given & (tofs == 0))  # cowell's times of flight are not 0
        P[there], status[there] = self.covariances[there], 0
        moving = np.flatnonzero(given & (tofs != 0))
        if moving.size:
            carried, r_path, v_path, done = carry(K_EARTH, self.r, self.v, self.covariances,
                                                  tofs, moving, f, params, rtol, atol)
            status[moving] = done
            r, v, ok = self.states_at(epoch)
            lost = moving[(done == 0) & ~ok[moving]]
            status[lost] = NO_STATE
            # NaN rows (a failed propagation, no SGP4 state) stay NaN
            P[moving] = from_rtn(r[moving], v[moving], to_rtn(r_path, v_path, carried))
        return P, status

    def __repr__(self):
        text = super().__repr__().replace("TLECatalog(", "OMMCatalog(", 1)
        given = int(np.isfinite(self.covariances[:, 0, 0]).sum())
        return text.replace(", 0 skipped entries)", f", {given} with covariance)")


def _satellite(message, where):
    """The message's object as an sgp4 Satrec, with its name and designator."""
    segment = ndm.required(message.body, where, "body").segment
    meta = ndm.required(segment.metadata, where, "metadata")
    data = ndm.required(segment.data, where, "data")
    expected = {"CENTER_NAME": ("EARTH", meta.center_name), "REF_FRAME": ("TEME", meta.ref_frame),
                "TIME_SYSTEM": ("UTC", meta.time_system),
                "MEAN_ELEMENT_THEORY": ("SGP4", meta.mean_element_theory)}
    for field, (wanted, value) in expected.items():
        value = ndm.text(ndm.required(value, where, field)).strip().upper()
        if value != wanted:
            raise ValueError(f"{where}: {field} = {value}: SGP4 mean elements are read "
                             f"({field} = {wanted})")
    elements = ndm.required(data.mean_elements, where, "mean elements (EPOCH ..)")
    tle = ndm.required(data.tle_parameters, where,
                       "TLE parameters (NORAD_CAT_ID, BSTAR, MEAN_MOTION_DOT ..)")
    if elements.mean_motion is None and elements.semi_major_axis is not None:
        raise ValueError(f"{where}: MEAN_MOTION is missing (SEMI_MAJOR_AXIS is given: "
                         "SGP4 elements give the mean motion)")
    fields = ((elements, "MEAN_MOTION", "rev/day"), (elements, "ECCENTRICITY", None),
                 *((elements, angle, "deg") for angle in (
                     "INCLINATION", "RA_OF_ASC_NODE", "ARG_OF_PERICENTER", "MEAN_ANOMALY")),
                 (tle, "BSTAR", "1/ER"), (tle, "MEAN_MOTION_DOT", "rev/day**2"))
    if tle.bstar is None:
        raise ValueError(f"{where}: BSTAR is missing" + (
            " (BTERM is given: SGP4-XP elements, which SGP4 cannot propagate)"
            if tle.bterm is not None else ""))
    epoch = ndm.utc(elements.epoch, where, "EPOCH")
    values = {field: ndm.number(getattr(owner, field.lower()), where, field, unit)
              for owner, field, unit in fields}
    values["MEAN_MOTION_DDOT"] = (0.0 if tle.mean_motion_ddot is None else
                                  ndm.number(tle.mean_motion_ddot, where, "MEAN_MOTION_DDOT",
                                             "rev/day**3"))
    number = int(ndm.required(tle.norad_cat_id, where, "NORAD_CAT_ID"))
    unit = 2.0 * np.pi / _MINUTES_PER_DAY  # rev/day -> rad/min, as sgp4 reads a TLE
    sat = Satrec()
    sat.sgp4init(WGS72, "i", number, (epoch.jd1 - 2433281.5) + epoch.jd2,
                 values["BSTAR"], values["MEAN_MOTION_DOT"] * unit / _MINUTES_PER_DAY,
                 values["MEAN_MOTION_DDOT"] * unit / _MINUTES_PER_DAY ** 2,
                 values["ECCENTRICITY"], values["ARG_OF_PERICENTER"] * _DEG,
                 values["INCLINATION"] * _DEG, values["MEAN_ANOMALY"] * _DEG,
                 values["MEAN_MOTION"] * unit, values["RA_OF_ASC_NODE"] * _DEG)
    # the epoch as a TLE's: midnight's Julian date and the day's fraction, from the text
    # (sgp4init's days since 1949 are a microsecond off in float)
    midnight = np.floor(epoch.jd1 + epoch.jd2 - 0.5) + 0.5
    sat.jdsatepoch, sat.jdsatepochF = midnight, (epoch.jd1 - midnight) + epoch.jd2
    designator = ndm.text(meta.object_id)
    sat.intldesg = designator[2:].replace("-", "")  # as sgp4 keeps a TLE's
    sat.classification = ndm.text(tle.classification_type) or "U"
    sat.ephtype = int(tle.ephemeris_type or 0)
    sat.elnum = int(tle.element_set_no or 0)
    sat.revnum = int(tle.rev_at_epoch or 0)
    name = ndm.text(ndm.required(meta.object_name, where, "OBJECT_NAME")).strip()
    return sat, name or str(number), designator, data.covariance_matrix


def _covariance(matrix, where):
    """The 6 x 6 covariance of an OMM (km units) and its frame."""
    frame = ndm.text(matrix.cov_ref_frame).strip().upper() or "TEME"
    if frame not in COVARIANCE_FRAMES:
        raise ValueError(f"{where}: COV_REF_FRAME = {frame}: covariances are read in "
                         f"{', '.join(COVARIANCE_FRAMES)}")
    return ndm.covariance(matrix, _COVARIANCE, "km", where), frame


def read_omms(paths_or_texts):
    """Read CCSDS OMMs of SGP4 mean elements (KVN or XML) into an `OMMCatalog`.

    Parameters
    ----------
    paths_or_texts : str, path, or sequence of them
        Files, or messages' texts (a str holding a newline or starting ``CCSDS_`` or
        ``<``). A file may hold one OMM, several KVN OMMs one after another, or an XML
        combined NDM (``<ndm>``) of OMMs, as CelesTrak serves them.

    Returns
    -------
    OMMCatalog
        Names (``OBJECT_NAME``), catalogue numbers (``NORAD_CAT_ID``), designators
        (``OBJECT_ID``), epochs (UTC), TEME states at each epoch (km, km/s, from ``sgp4``,
        initialised with the message's elements as from a TLE), and covariances where
        given.

    Raises
    ------
    ImportError
        ccsds-ndm is not installed (``pip install 'hapsira-cowell[cdm]'``).
    OSError
        A file cannot be read (the message names it).
    ValueError
        A file that is not an OMM; an OMM that is not SGP4 mean elements in TEME, UTC,
        about the Earth; a missing or non-numeric element or TLE parameter; a covariance
        in another frame than `COVARIANCE_FRAMES`; elements SGP4 cannot propagate at
        their epoch: the message names the file (and the message within it) and the
        keyword.
    """
    from ..propagation.covariance import from_rtn

    names, satellites, r, v, designators, where_from, covariances, frames = (
        [] for _ in range(8))
    for where, message in ndm.messages(paths_or_texts, "OMM"):
        sat, name, designator, matrix = _satellite(message, where)
        code, ri, vi = sat.sgp4(sat.jdsatepoch, sat.jdsatepochF)
        if code != 0 or not np.all(np.isfinite(ri + vi)):
            raise ValueError(f"{where}: SGP4 error code {code} at the epoch (elements it "
                             "cannot propagate)")
        P, frame = np.full((6, 6), np.nan), ""
        if matrix is not None:
            P, frame = _covariance(matrix, where)
            if frame != "TEME":
                P = from_rtn(np.array(ri), np.array(vi), P)
        names.append(name)
        satellites.append(sat)
        r.append(ri)
        v.append(vi)
        designators.append(designator)
        where_from.append(where)
        covariances.append(P)
        frames.append(frame)
    if not satellites:
        raise ValueError("paths_or_texts: no OMM given")
    return OMMCatalog(names, satellites, r, v, designators, where_from, covariances, frames)
