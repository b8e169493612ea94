"""CCSDS Orbit Ephemeris Messages: states at output times written as OEM files, and read back.

Written and read with the `oem` package (``pip install 'hapsira-cowell[oem]'``).
Every value that goes into a header is checked first (one line of printable
text), so that no value can add keys of its own; what an OEM cannot hold (a
time that is not finite, two equal epochs, a leap second as the first or last
epoch) is refused with a `ValueError` naming the argument.
"""

import os
import re
import shutil
import tempfile
from collections import namedtuple

import numpy as np

__all__ = ["OemWriter", "write_oem", "read_oem", "OemEphemeris"]


def _oem():
    try:
        import oem
        from oem.components import EphemerisSegment, HeaderSection, MetaDataSection
    except ImportError:
        raise ValueError("the OEM format needs the oem package, which is not installed "
                         "(pip install 'hapsira-cowell[oem]')") from None
    return oem, HeaderSection, MetaDataSection, EphemerisSegment


def _oem_times(epoch, tofs):
    """Output times as scalar astropy Times that print to the nanosecond: the oem
    package writes a Time with its own precision, and astropy's default (ms)
    would move a LEO state by metres."""
    from astropy import units as u
    times = epoch.utc + np.asarray(tofs, dtype=np.float64) * u.s
    times.precision = 9
    return tuple(times)


def header_value(value, name):
    """``value`` as the text of an OEM header or metadata value, or `ValueError` naming
    ``name``: a KVN value is one line, so a newline (or another control character)
    would end it and start a key of its own."""
    text = str(value)
    bad = next((char for char in text if not char.isprintable()), None)
    if bad is not None:
        raise ValueError(f"{name}: {text!r} holds the non-printable character {bad!r} "
                         f"(U+{ord(bad):04X}); OEM header values are one line of printable "
                         "text")
    return text


def _leap_second(time):
    """Whether a scalar UTC Time falls in a leap second (its ISO text says second 60)."""
    return time.isot[17:19] == "60"


def _check_times(tofs, times, order):
    """`ValueError` for output times an OEM cannot hold: not finite, two equal (OEM
    epochs must increase), or a leap second at the start or the end (see below)."""
    tofs = np.asarray(tofs, dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(tofs))
    if bad.size:
        raise ValueError(f"tofs: time of flight {bad[0]} is {tofs[bad[0]]}; OEM states need "
                         "finite times")
    texts = [times[j].isot for j in order]
    for k in range(1, len(texts)):
        if texts[k] == texts[k - 1]:
            i, j = sorted((int(order[k - 1]), int(order[k])))
            raise ValueError(f"tofs: times of flight {i} and {j} ({tofs[i]:.17g} s and "
                             f"{tofs[j]:.17g} s) give the same OEM epoch {texts[k]}; OEM states "
                             "must be at increasing times, without repeats")
    for which, k in (("first", 0), ("last", -1)):
        if len(texts) and _leap_second(times[order[k]]):
            raise ValueError(_leap_message(f"epoch, tofs: the {which} output time",
                                           texts[k]))


def _leap_message(what, text):
    return (f"{what}, {text}, is in a leap second: it would be an OEM's START_TIME or "
            "STOP_TIME, which the oem package reads with Python's datetime (no second 60), "
            "so the file could not be read back; move the epoch or that time of flight off "
            "the leap second (states inside the span may fall in one)")


def _file_names(names, count):
    width = max(5, len(str(count)))
    slugs = (re.sub(r"[^A-Za-z0-9._-]+", "_", str(name)).strip("_.")[:48] or "object"
             for name in names)
    return [f"{i:0{width}d}-{slug}.oem" for i, slug in enumerate(slugs)]


class OemWriter:
    """CCSDS OEM: one file per object (an OEM describes one object) in a folder.

    Each object's segment holds its states up to where it stopped (re-entry or
    failure; in time order, also for backward propagation); an object with no
    state gets no file (listed in ``skipped``). Files are written to a
    temporary folder beside ``folder`` and moved there by `close`.

    Everything that can be checked before the states exist is checked here
    (`ValueError`, a `ValueError`, naming the argument): header values
    (``frame``, ``center``, ``originator``, each name and id) are one line of
    printable text; times of flight are finite and give distinct epochs; the
    first and last output times are not in a leap second; ``folder`` is not
    a file, and is empty unless ``overwrite``, so that the files of two runs
    never mix (with ``overwrite``, `close` removes the ``*.oem`` files already
    there and keeps the others).
    """

    def __init__(self, folder, names, epoch, tofs, frame, ids=None, center="EARTH",
                 originator="hapsira-cowell", overwrite=False):
        if epoch is None:
            raise ValueError("the OEM format needs the epoch of the states: a TLE catalog "
                             "has one; give a CSV catalog's with --epoch")
        self.oem, self.Header, self.Meta, self.Segment = _oem()
        from astropy.time import Time
        self.folder = os.fspath(folder)
        self.names = [header_value(name, f"names[{i}] (OBJECT_NAME)")
                      for i, name in enumerate(names)]
        self.ids = self.names if ids is None else [
            header_value(value, f"ids[{i}] (OBJECT_ID)") for i, value in enumerate(ids)]
        self.files = _file_names(self.names, len(self.names))
        self.frame = header_value(frame, "frame (REF_FRAME)")
        self.center = header_value(center, "center (CENTER_NAME)")
        self.originator = header_value(originator, "originator (ORIGINATOR)")
        for value, name in ((self.frame, "frame (REF_FRAME)"),
                            (self.center, "center (CENTER_NAME)")):
            if not value.strip():
                raise ValueError(f"{name}: empty; expected e.g. GCRF, TEME (frame) or "
                                 "EARTH (center)")
        self.overwrite = overwrite
        if os.path.exists(self.folder):
            if not os.path.isdir(self.folder):
                raise ValueError(f"{self.folder!r}: is a file; the OEM writer fills a folder "
                                 "with one file per object")
            if os.listdir(self.folder) and not overwrite:
                raise ValueError(f"{self.folder!r}: the folder is not empty; the files of "
                                 "another run would mix with these (give a new or empty "
                                 "folder, or overwrite=True to replace its .oem files)")
        self.order = np.argsort(np.asarray(tofs), kind="stable")  # OEM rows go forward
        if not np.isfinite(np.asarray(tofs, dtype=np.float64)).all():
            _check_times(tofs, (), self.order)  # names the time before astropy sees NaN
        self.times = _oem_times(epoch, tofs)
        _check_times(tofs, self.times, self.order)
        self.created = Time.now().utc.isot
        parent = os.path.dirname(os.path.abspath(folder))
        self.partial = tempfile.mkdtemp(prefix=".hapsira-cowell-oem-", dir=parent)
        self.written, self.skipped = [], []

    def write(self, start, stop, res, reentry=None):
        for i in range(start, stop):
            rr, vv = np.asarray(res.rr[i - start]), np.asarray(res.vv[i - start])
            self._write_one(i, rr, vv)

    def _write_one(self, i, rr, vv):
        finite = np.isfinite(rr).all(axis=1) & np.isfinite(vv).all(axis=1)
        keep = self.order[finite[self.order]]
        if keep.size == 0:
            self.skipped.append(self.names[i])
            return
        times = tuple(self.times[j] for j in keep)
        for which, time in (("first", times[0]), ("last", times[-1])):
            if _leap_second(time):  # an object that stopped right at a leap second
                raise ValueError(_leap_message(f"object {i} ({self.names[i]!r}): its {which} "
                                               "state's time", time.isot))
        header = self.Header({"CCSDS_OEM_VERS": "2.0", "CREATION_DATE": self.created,
                              "ORIGINATOR": self.originator})
        meta = self.Meta({
            "OBJECT_NAME": str(self.names[i]) or "UNNAMED", "OBJECT_ID": str(self.ids[i]),
            "CENTER_NAME": self.center, "REF_FRAME": self.frame, "TIME_SYSTEM": "UTC",
            "START_TIME": times[0].isot, "STOP_TIME": times[-1].isot,
        })
        columns = [rr[keep, axis].tolist() for axis in range(3)]
        columns += [vv[keep, axis].tolist() for axis in range(3)]
        message = self.oem.OrbitEphemerisMessage(header, [self.Segment(meta, (times, *columns))])
        message.save_as(os.path.join(self.partial, self.files[i]), file_format="kvn")
        self.written.append(self.files[i])

    def close(self):
        try:
            if not os.path.exists(self.folder):
                os.replace(self.partial, self.folder)
                return
            if self.overwrite:  # another run's files go: the folder holds one run
                for name in os.listdir(self.folder):
                    path = os.path.join(self.folder, name)
                    if name.endswith(".oem") and os.path.isfile(path):
                        os.remove(path)
            for name in self.written:
                os.replace(os.path.join(self.partial, name), os.path.join(self.folder, name))
        finally:
            self.abort()

    def abort(self):
        shutil.rmtree(self.partial, ignore_errors=True)


def write_oem(path, epoch, tofs, rr, vv, *, frame, names=None, ids=None, center="EARTH",
              overwrite=False):
    """Write states as CCSDS OEM files; return the paths written.

    Parameters
    ----------
    path : str or os.PathLike
        For one object (``rr`` of shape ``(M, 3)``) the file; for N objects a
        folder (created if missing) that gets one file per object,
        ``00000-NAME.oem``, ... (an OEM describes a single object).
    epoch : astropy.time.Time
        The time of ``tofs = 0`` (any scale; the files are in UTC).
    tofs : (M,) array, Quantity or TimeDelta
        Times of flight of the states, s (as given to `cowell`).
    rr, vv : (M, 3) or (N, M, 3) arrays or Quantities
        Positions (km) and velocities (km/s), e.g. a `CowellResult`'s. Rows
        with NaN (after an object stopped) are left out.
    frame : str
        The OEM ``REF_FRAME`` of the states, e.g. ``"TEME"`` (TLE catalogs),
        ``"GCRF"``, ``"EME2000"``: required, since the solver does not know it.
    names, ids : sequences of str, optional
        ``OBJECT_NAME`` and ``OBJECT_ID`` per object (default ``OBJECT i``
        and the name).
    center : str
        ``CENTER_NAME``, default ``"EARTH"``.
    overwrite : bool
        For N objects: write into a folder that is not empty, replacing the
        ``*.oem`` files there (other files are kept). Without it such a folder
        is refused, so that the files of two runs never mix. A single
        object's file is always replaced.

    Returns
    -------
    list of str
        The files written.

    Raises
    ------
    ValueError
        Naming the argument: header values (``frame``, ``center``, a name or
        an id) that are not one line of printable text (a newline would start
        a header key of its own); a time of flight that is not finite; two
        times of flight that give the same epoch (OEM epochs increase); a
        first or last output time in a leap second (the ``oem`` package reads
        ``START_TIME`` and ``STOP_TIME`` with Python's datetime, which has no
        second 60; states inside the span may fall in one); a folder that is
        not empty, without ``overwrite``.

    Notes
    -----
    Epochs are written to the nanosecond and numbers with 15 significant
    digits, so reading the files back (`read_oem`) gives the states to well
    under a millimetre.
    """
    from astropy import units as u
    from astropy.time import Time

    from ..units import to_value

    if not isinstance(epoch, Time) or not epoch.isscalar:
        raise TypeError(f"epoch: expected a single astropy Time, got {type(epoch).__name__}")
    tofs = np.atleast_1d(to_value(tofs, u.s, "tofs"))
    rr, vv = to_value(rr, u.km, "rr"), to_value(vv, u.km / u.s, "vv")
    single = rr.ndim == 2
    rr, vv = (rr[None], vv[None]) if single else (rr, vv)
    if rr.ndim != 3 or rr.shape[1:] != (tofs.size, 3) or vv.shape != rr.shape:
        raise ValueError(f"rr, vv: expected shape (M, 3) or (N, M, 3) with M = {tofs.size} "
                         f"times of flight, got {rr.shape} and {vv.shape}")
    n = rr.shape[0]
    names = [f"OBJECT {i}" for i in range(n)] if names is None else list(names)
    if len(names) != n:
        raise ValueError(f"names: expected {n} names, got {len(names)}")
    if ids is not None and len(ids) != n:
        raise ValueError(f"ids: expected {n} ids, got {len(ids)}")
    path = os.fspath(path)
    if not single:
        return _write_oem_files(path, names, epoch, tofs, rr, vv, frame, ids, center,
                                overwrite)
    scratch = tempfile.mkdtemp(prefix=".hapsira-cowell-", dir=os.path.dirname(
        os.path.abspath(path)))
    try:
        folder = os.path.join(scratch, "out")
        written = _write_oem_files(folder, names, epoch, tofs, rr, vv, frame, ids, center)
        if not written:
            raise ValueError("rr, vv: the object has no finite state to write")
        os.replace(written[0], path)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return [path]


def _write_oem_files(folder, names, epoch, tofs, rr, vv, frame, ids, center, overwrite=False):
    writer = OemWriter(folder, names, epoch, tofs, frame, ids=ids, center=center,
                       overwrite=overwrite)
    try:
        for i in range(len(names)):
            writer._write_one(i, rr[i], vv[i])
        writer.close()
    except BaseException:
        writer.abort()
        raise
    return [os.path.join(folder, name) for name in writer.written]


#: One object's ephemeris read back from an OEM file.
OemEphemeris = namedtuple("OemEphemeris", "name id frame center times r v")


def read_oem(path):
    """The ephemerides in an OEM file, or in every ``*.oem`` file of a folder.

    Returns an `OemEphemeris` (``name``, ``id``, ``frame``, ``center``,
    ``times`` as an astropy Time, ``r`` (M, 3) km, ``v`` (M, 3) km/s) for a
    file, a list of them (in file-name order) for a folder. Reads with the
    ``oem`` package, so any valid OEM (KVN or XML) is accepted.
    """
    from astropy.time import Time

    oem = _oem()[0]
    path = os.fspath(path)
    if os.path.isdir(path):
        return [read_oem(os.path.join(path, name)) for name in sorted(os.listdir(path))
                if name.endswith(".oem")]
    message = oem.OrbitEphemerisMessage.open(path)
    segments = list(message)
    meta = segments[0].metadata
    states = [state for segment in segments for state in segment.states]
    times = Time([s.epoch for s in states])
    return OemEphemeris(meta["OBJECT_NAME"], meta["OBJECT_ID"], meta["REF_FRAME"],
                        meta["CENTER_NAME"], times,
                        np.array([s.position for s in states], dtype=np.float64),
                        np.array([s.velocity for s in states], dtype=np.float64))
