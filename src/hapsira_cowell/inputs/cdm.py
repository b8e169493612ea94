"""Reading CCSDS Conjunction Data Messages (CCSDS 508.0-B-1, KVN or XML) into arrays: both
objects' states and covariances at the TCA, who they are, and the message's own
probability of collision, so that `ConjunctionMessages.probability` starts from what an
operator receives (docs/screening.md). Read with ``ccsds-ndm`` (``pip install
'hapsira-cowell[cdm]'``).

Frames: a CDM's states are in EME2000, GCRF or ITRF. Inertial states (GCRF, EME2000) are
read as they are, the frame named per message in `ConjunctionMessages.frame`; where the
two objects of one message are in different ones, the EME2000 state is rotated to GCRF by
the IAU 2006 frame bias (``erfa.bp00``, under 0.1 arcsecond). ITRF (Earth-fixed) states
are refused: the probability needs both objects in one inertial frame, and turning ITRF
into one takes Earth orientation data the message does not carry.

Covariances: a CDM gives each object's 6 x 6 covariance in its own RTN frame (m, m/s);
`ConjunctionMessages` holds them as given (``P1_rtn``, ``P2_rtn``, km and km/s) and in the
inertial frame of the states (``P1``, ``P2``, `hapsira_cowell.covariance.from_rtn`: the
RTN velocity components are the inertial velocity along R, T, N, as the writer
`hapsira_cowell.outputs.cdm.write_cdms` has them). Drag and radiation-pressure rows of
an extended covariance are not read.

Hard-body radius: a CDM (CCSDS 508.0-B-1) has no keyword for it. NASA CARA's CDMs give
the combined radius in a comment of the relative metadata, ``COMMENT HBR = 15 [m]``;
`ConjunctionMessages.hbr` holds it where a message has one (a comment ``HBR = <number>``
with the unit ``[m]`` or ``[km]``, metres without one, in the header's, the relative
metadata's or, where a KVN reader files a comment before ``OBJECT = OBJECT1`` there,
object 1's metadata's comments), NaN elsewhere.
"""

import re

import numpy as np

from ..constants import K_EARTH
from . import ndm

__all__ = ["FRAMES", "ConjunctionMessages", "read_cdms"]

#: The frames whose states are read (inertial); ITRF is refused
FRAMES = ("GCRF", "EME2000")
_AXES = ("r", "t", "n", "rdot", "tdot", "ndot")
_HBR = re.compile(r"^\s*HBR\s*=\s*(\S+)\s*(?:\[\s*([A-Za-z]+)\s*\])?\s*$", re.I)
_HBR_UNITS = {"m": 1e-3, "km": 1.0}
_STATE = (("x", "X", "km"), ("y", "Y", "km"), ("z", "Z", "km"), ("x_dot", "X_DOT", "km/s"),
          ("y_dot", "Y_DOT", "km/s"), ("z_dot", "Z_DOT", "km/s"))


class ConjunctionMessages:
    """What `read_cdms` returns: one row per message, in the order read.

    ``sources`` (K,): each message's file (``<path> #<i>`` for the i-th of a file holding
    several; ``text <i>`` for a text). ``message_ids``, ``originators``,
    ``creation_dates`` (K,): the header's. ``tca``: astropy Time (K,), UTC. ``miss`` (K,)
    km, ``speed`` (K,) km/s (NaN where not given), ``relative`` (K, 6): object 2's
    position and velocity minus object 1's along object 1's R, T, N axes, km and km/s (NaN
    where not given). ``pc`` (K,): the message's ``COLLISION_PROBABILITY`` (NaN where none),
    ``pc_method`` (K,) its method ('' where none). ``frame`` (K,): the frame of the states
    (`FRAMES`). ``rr1``, ``vv1``, ``rr2``, ``vv2`` (K, 3): the objects' states at the TCA,
    km and km/s. ``P1``, ``P2`` (K, 6, 6): their covariances in ``frame``, ``P1_rtn``,
    ``P2_rtn`` in each object's RTN frame, km and km/s. Who the objects are, (K, 2) string
    arrays, column 0 object 1: ``numbers`` (``OBJECT_DESIGNATOR``, the catalogue number),
    ``names`` (``OBJECT_NAME``), ``designators`` (``INTERNATIONAL_DESIGNATOR``),
    ``catalogs`` (``CATALOG_NAME``), ``covariance_methods`` (``COVARIANCE_METHOD``).
    ``hbr`` (K,): the combined hard-body radius a message's comment gives (CARA's
    ``COMMENT HBR = 15 [m]``), km, NaN where it gives none.
    """

    def __init__(self, **columns):
        self.__dict__.update(columns)

    def __len__(self):
        return len(self.sources)

    def __repr__(self):
        if not len(self):
            return "ConjunctionMessages(0 messages)"
        pairs = ", ".join(f"{a} / {b}" for a, b in self.names[:2])
        more = ", ..." if len(self) > 2 else ""
        return (f"ConjunctionMessages({len(self)} messages [{pairs}{more}], TCA "
                f"{self.tca.min().iso[:19]} .. {self.tca.max().iso[:19]} UTC, "
                f"{'/'.join(sorted(set(self.frame)))} km, km/s)")

    def probability(self, hbr=None, method="foster", *, full=False, k=K_EARTH, samples=None,
                    seed=None, hbr_shape="circle"):
        """Our probability of collision of each message's approach from its states and
        covariances (`hapsira_cowell.conjunctions.probability`; ``hbr`` the combined
        hard-body radius, km, a number or one per message; None: each message's own,
        ``self.hbr``, which every message must then give); the message's own Pc is
        ``pc``."""
        from ..propagation.probability import probability

        if hbr is None:
            missing = [source for source, x in zip(self.sources, self.hbr) if np.isnan(x)]
            if missing:
                more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
                raise ValueError(f"hbr: {', '.join(missing[:3])}{more} give no hard-body "
                                 "radius (a comment 'HBR = 20 [m]', as CARA's CDMs have); "
                                 "give hbr (km)")
            hbr = self.hbr
        return probability(self.rr1, self.vv1, self.P1, self.rr2, self.vv2, self.P2, hbr,
                           method, full=full, k=k, samples=samples, seed=seed,
                           hbr_shape=hbr_shape)


def _frame_bias():
    """The rotation of EME2000 (mean equator and equinox of J2000) vectors into GCRF."""
    import erfa

    bias, _, _ = erfa.bp00(2451545.0, 0.0)  # GCRS -> mean J2000, constant
    return bias.T


def _object(segment, where):
    """One object's metadata, state (km, km/s) and RTN covariance (km units)."""
    meta, data = segment.metadata, segment.data
    label = ndm.text(meta.object_value) or "OBJECT"
    at = f"{where}: {label}"
    frame = ndm.text(ndm.required(meta.ref_frame, at, "REF_FRAME"))
    if frame not in FRAMES:
        raise ValueError(f"{at} REF_FRAME = {frame}: states are read in "
                         f"{' or '.join(FRAMES)} (inertial), not {frame}"
                         + (" (Earth-fixed: turning it inertial needs Earth orientation "
                            "data)" if frame == "ITRF" else ""))
    vector = ndm.required(data.state_vector, at, "state vector (X .. Z_DOT)")
    state = np.array([ndm.number(getattr(vector, name), at, field, unit)
                      for name, field, unit in _STATE])
    matrix = ndm.required(data.covariance_matrix, at, "covariance matrix (CR_R .. CNDOT_NDOT)")
    P = ndm.covariance(matrix, _AXES, "m", at)
    who = [ndm.text(meta.object_designator), ndm.text(meta.object_name),
           ndm.text(meta.international_designator), ndm.text(meta.catalog_name),
           ndm.text(meta.covariance_method)]
    if not who[0]:
        raise ValueError(f"{at}: OBJECT_DESIGNATOR is missing")
    return frame, state, P, who


def _hbr(message, segments, where):
    """The combined hard-body radius (km) of a comment ``HBR = <number> [m]`` of the
    header, the relative metadata or object 1's metadata (`_HBR`), NaN without one."""
    places = [message.header, message.body.relative_metadata_data, segments[0].metadata]
    for comment in (line for place in places for line in (getattr(place, "comment", None)
                                                          or [])):
        match = _HBR.match(str(comment))
        if not match:
            continue
        unit = (match.group(2) or "m").lower()
        try:
            value = float(match.group(1))
        except ValueError:
            value = float("nan")
        if unit not in _HBR_UNITS or not (np.isfinite(value) and value > 0):
            raise ValueError(f"{where}: COMMENT {str(comment).strip()}: expected a positive "
                             "hard-body radius in m or km, e.g. HBR = 20 [m]")
        return value * _HBR_UNITS[unit]
    return float("nan")


def read_cdms(paths_or_texts):
    """Read CCSDS CDMs (KVN or XML, one or several per file) into `ConjunctionMessages`.

    Parameters
    ----------
    paths_or_texts : str, path, or sequence of them
        Files, or messages' texts (a str holding a newline or starting ``CCSDS_`` or
        ``<``). A file may hold one CDM, several KVN CDMs one after another, or an XML
        combined NDM (``<ndm>``) of CDMs.

    Returns
    -------
    ConjunctionMessages
        One row per CDM: states, covariances (RTN as given and inertial), TCA, miss
        distance, the objects' numbers and names, the message's own Pc and hard-body
        radius (where a comment gives it).

    Raises
    ------
    ImportError
        ccsds-ndm is not installed (``pip install 'hapsira-cowell[cdm]'``).
    OSError
        A file cannot be read (the message names it).
    ValueError
        A file that is not a CDM, or a CDM without a value the reader needs (TCA,
        MISS_DISTANCE, an object's state, covariance or OBJECT_DESIGNATOR), with a
        value that is not a number, or with states in ITRF (`FRAMES`): the message
        names the file (and the message within it) and the keyword.
    """
    from ..propagation.covariance import from_rtn

    rows = []
    for where, message in ndm.messages(paths_or_texts, "CDM"):
        header = message.header
        body = ndm.required(message.body, where, "body")
        rel = ndm.required(body.relative_metadata_data, where, "relative metadata (TCA ..)")
        segments = list(body.segment or [])
        if len(segments) != 2:
            raise ValueError(f"{where}: expected two objects (OBJECT1, OBJECT2), got "
                             f"{len(segments)}")
        objects = [_object(segment, where) for segment in segments]
        vector = rel.relative_state_vector
        relative = np.full(6, np.nan)
        if vector is not None:
            relative = np.array([ndm.number(getattr(vector, f"relative_{kind}_{axis}"), where,
                                            f"RELATIVE_{kind.upper()}_{axis.upper()}", unit)
                                 for kind, unit in (("position", "m"), ("velocity", "m/s"))
                                 for axis in "rtn"])
        pc = rel.collision_probability
        rows.append(dict(
            sources=where, message_ids=ndm.text(header.message_id),
            originators=ndm.text(header.originator),
            creation_dates=ndm.text(header.creation_date),
            tca=ndm.utc(rel.tca, where, "TCA"),
            miss=ndm.number(rel.miss_distance, where, "MISS_DISTANCE", "m"),
            speed=(np.nan if rel.relative_speed is None else
                   ndm.number(rel.relative_speed, where, "RELATIVE_SPEED", "m/s")),
            relative=relative,
            pc=np.nan if pc is None else ndm.number(pc, where, "COLLISION_PROBABILITY"),
            pc_method=ndm.text(rel.collision_probability_method),
            hbr=_hbr(message, segments, where), objects=objects))
    if not rows:
        raise ValueError("paths_or_texts: no CDM given")
    bias = _frame_bias()
    frames, states, P_rtn = [], [], []
    for row in rows:
        (frame1, state1, P1, _), (frame2, state2, P2, _) = row["objects"]
        if frame1 != frame2:  # one frame for both: the EME2000 one rotated to GCRF
            state1, state2 = ((np.concatenate([bias @ s[:3], bias @ s[3:]])
                               if f == "EME2000" else s)
                              for s, f in ((state1, frame1), (state2, frame2)))
            frame1 = "GCRF"
        frames.append(frame1)
        states.append((state1, state2))
        P_rtn.append((P1, P2))
    states, P_rtn = np.array(states), np.array(P_rtn)  # (K, 2, 6), (K, 2, 6, 6)
    P = from_rtn(states[..., :3].reshape(-1, 3), states[..., 3:].reshape(-1, 3),
                 P_rtn.reshape(-1, 6, 6)).reshape(P_rtn.shape)
    from astropy.time import Time

    who = np.array([[obj[3] for obj in row["objects"]] for row in rows])  # (K, 2, 5)
    column = {name: [row[name] for row in rows] for name in rows[0] if name != "objects"}
    return ConjunctionMessages(
        sources=column["sources"], message_ids=column["message_ids"],
        originators=column["originators"], creation_dates=column["creation_dates"],
        tca=Time(column["tca"]), miss=np.array(column["miss"]),
        speed=np.array(column["speed"]), relative=np.array(column["relative"]),
        pc=np.array(column["pc"]), pc_method=column["pc_method"], frame=frames,
        rr1=states[:, 0, :3], vv1=states[:, 0, 3:], rr2=states[:, 1, :3],
        vv2=states[:, 1, 3:], P1=P[:, 0], P2=P[:, 1], P1_rtn=P_rtn[:, 0], P2_rtn=P_rtn[:, 1],
        numbers=who[..., 0], names=who[..., 1], designators=who[..., 2],
        catalogs=who[..., 3], covariance_methods=who[..., 4], hbr=np.array(column["hbr"]))
