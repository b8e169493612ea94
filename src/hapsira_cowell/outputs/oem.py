"""CCSDS Orbit Ephemeris Messages: states at output times written as OEM files, and read back.

Read with the `oem` package (``pip install 'hapsira-cowell[oem]'``), and written
byte for byte as it writes them, but with the numbers of many states formatted at
once in numpy (`_format_numbers`) instead of one Python call per number.
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

__all__ = ["OemEphemeris", "OemWriter", "as_epoch", "as_epochs", "read_oem", "write_oem"]


def _oem():
    try:
        import oem
        from oem.components import EphemerisSegment, HeaderSection, MetaDataSection
    except ImportError:
        raise ValueError("the OEM format needs the oem package, which is not installed "
                         "(pip install 'hapsira-cowell[oem]')") from None
    return oem, HeaderSection, MetaDataSection, EphemerisSegment


def _oem_times(epoch, tofs):
    """Output times as an astropy Time array that prints to the nanosecond: the oem
    package reads epochs to the nanosecond, and astropy's default text (ms)
    would move a LEO state by metres. Per-object epochs (``(N,)``): ``(N, M)``."""
    from astropy import units as u
    offsets = np.asarray(tofs, dtype=np.float64) * u.s
    utc = epoch.utc
    times = utc + offsets if utc.isscalar else utc[:, None] + offsets[None, :]
    times.precision = 9
    return times


def as_epoch(value, name="epoch"):
    """``value`` as a scalar astropy Time: whatever ``astropy.time.Time(value)`` takes
    (a Time, an ISO or other text astropy reads, a datetime), or `ValueError`
    naming ``name``."""
    from astropy.time import Time

    if isinstance(value, Time):
        time = value
    else:
        try:
            time = Time(value)
        except (ValueError, TypeError) as error:
            raise ValueError(f"{name}: {value!r} is not a time astropy reads ({error}); "
                             "expected an astropy Time, an ISO text such as "
                             "'2026-01-01T00:00:00' (UTC) or a datetime") from None
    if not time.isscalar:
        raise ValueError(f"{name}: expected a single time, got {time.size} of them")
    return time


def as_epochs(value, count, name="epoch"):
    """``value`` as a scalar astropy Time (`as_epoch`), or as ``count`` of them, one per
    object (a Time of shape ``(count,)``, or a sequence astropy reads as one): a
    `ValueError` naming ``name`` for any other shape."""
    from astropy.time import Time

    if isinstance(value, Time) and value.isscalar or isinstance(value, (str, bytes)) \
            or not (isinstance(value, Time) or np.ndim(value) >= 1):
        return as_epoch(value, name)
    if not isinstance(value, Time):
        try:
            value = Time(value)
        except (ValueError, TypeError) as error:
            raise ValueError(f"{name}: {value!r} are not times astropy reads ({error}); "
                             "expected one astropy Time, or one per object") from None
    if value.shape != (count,):
        raise ValueError(f"{name}: expected a single time or one per object, shape "
                         f"({count},), got shape {value.shape}")
    return value


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


def _leap_second(text):
    """Whether a UTC time's ISO text falls in a leap second (second 60)."""
    return text[17:19] == "60"


def _check_times(tofs, texts, order):
    """`ValueError` for output times an OEM cannot hold: not finite, two equal (OEM
    epochs must increase), or a leap second at the start or the end (see below)."""
    tofs = np.asarray(tofs, dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(tofs))
    if bad.size:
        raise ValueError(f"tofs: time of flight {bad[0]} is {tofs[bad[0]]}; OEM states need "
                         "finite times")
    texts = [texts[j] for j in order]
    for k in range(1, len(texts)):
        if texts[k] == texts[k - 1]:
            i, j = sorted((int(order[k - 1]), int(order[k])))
            raise ValueError(f"tofs: times of flight {i} and {j} ({tofs[i]:.17g} s and "
                             f"{tofs[j]:.17g} s) give the same OEM epoch {texts[k]}; OEM states "
                             "must be at increasing times, without repeats")
    for which, k in (("first", 0), ("last", -1)):
        if len(texts) and _leap_second(texts[k]):
            raise ValueError(_leap_message(f"epoch, tofs: the {which} output time",
                                           texts[k]))


def _leap_message(what, text):
    return (f"{what}, {text}, is in a leap second: it would be an OEM's START_TIME or "
            "STOP_TIME, which the oem package reads with Python's datetime (no second 60), "
            "so the file could not be read back; move the epoch or that time of flight off "
            "the leap second (states inside the span may fall in one)")


#: Bytes of one number as the oem package writes it (``format_float_scientific``,
#: ``f"{value:.14e}"``: 15 significant digits): sign, d.dddddddddddddd, e, sign and
#: two exponent digits (three from 1e100 on), padded with NUL bytes that are removed.
_WIDTH = 22
# 10^k in long double for the scale 10^(14-E) of exponents E of two digits, by table
# (numpy's long double power takes 20 times longer than the rest)
_SCALES = np.array([np.longdouble(10) ** k for k in range(14 - 99, 14 + 99 + 1)])
# the ASCII digits of 0 to 999, three each
_TRIPLES = np.array([b"%03d" % k for k in range(1000)], dtype="S3").view(np.uint8).reshape(1000, 3)
# Half-way cases are told apart in long double: where its scaled value is this close to
# a half (or long double is no wider than double), the number is formatted by Python.
_MARGIN = 0.02
_EXACT = np.finfo(np.longdouble).nmant >= 63


def _format_numbers(values):
    """``f"{value:.14e}"`` of each finite float64 in ``values`` (1-D), as an (n, 22) uint8
    array of ASCII padded with NUL bytes, the same text as Python's.

    The 15 digits are the scaled value ``|x| 10^(14-E)`` rounded: computed in long
    double (64-bit mantissa on x86: 1e-4 of error at 1e15), which gives Python's
    correctly rounded digits except within ``_MARGIN`` of a half; those numbers (about
    4 %), exponents of three digits and platforms whose long double is a double are
    formatted by Python itself.
    """
    values = np.asarray(values, dtype=np.float64)
    out = np.zeros((values.size, _WIDTH), dtype=np.uint8)
    magnitude = np.abs(values)
    nonzero = magnitude > 0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        exponent = np.where(nonzero, np.floor(np.log10(np.where(nonzero, magnitude, 1.0))), 0)
        exponent = exponent.astype(np.int64)
        ten = np.longdouble(10)
        scale = _SCALES[np.clip(99 - exponent, 0, _SCALES.size - 1)]
        scaled = magnitude.astype(np.longdouble) * scale
        low = nonzero & (scaled < 1e14)  # log10 rounded up across a power of ten
        exponent[low] -= 1
        scaled[low] *= ten
        high = scaled >= 1e15
        exponent[high] += 1
        scaled[high] /= ten
        slow = ~np.isfinite(scaled) | (np.abs(exponent) >= 99)  # 99: 9.99..e99 carries
        if not _EXACT:
            slow[:] = True
        scaled[slow] = 0
        whole = scaled.astype(np.int64)  # floor (scaled >= 0); long double's floor is slow
        fraction = (scaled - whole.astype(np.longdouble)).astype(np.float64)
    slow |= np.abs(fraction - 0.5) < _MARGIN
    digits = whole.astype(np.float64) + (fraction > 0.5)  # < 2^53: exact in doubles
    digits[slow] = 0
    carry = digits >= 1e15  # 9.99...95 rounds up to the next power of ten
    digits[carry] = 1e14
    exponent[carry] += 1
    # the 15 digits into columns 2-16, three at a time by table, in doubles (exact on
    # integers < 2^53, and faster than int64 division); then the first moves to 1
    # and the point takes its place
    for end in range(17, 2, -3):
        quotient = np.floor(digits / 1000.0)
        out[:, end - 3:end] = _TRIPLES[(digits - quotient * 1000.0).astype(np.intp)]
        digits = quotient
    out[:, 1] = out[:, 2]
    out[:, 2] = ord(".")
    out[:, 0] = np.where(np.signbit(values), ord("-"), 0)
    out[:, 17] = ord("e")
    out[:, 18] = np.where(exponent < 0, ord("-"), ord("+"))
    power = np.abs(exponent)
    out[:, 19] = power // 10 % 10 + ord("0")
    out[:, 20] = power % 10 + ord("0")
    where = np.flatnonzero(slow)
    if where.size:
        texts = np.array([b"%.14e" % value for value in values[where].tolist()],
                         dtype=f"S{_WIDTH}")
        out[where] = texts.view(np.uint8).reshape(-1, _WIDTH)
    return out


def _data_lines(epochs, rr, vv):
    """The data lines of objects: ``epochs`` (M,) the times' ISO text as bytes (NUL-
    padded ``S`` array), or (N, M), each object's own; ``rr``, ``vv`` (N, M, 3) with
    finite values (others are formatted as 0). Returns (N, M, W) uint8: a line per
    state, NUL-padded.

    The oem package formats each number in a Python call of its own, which made
    writing 50 times slower than propagating (issue 25); here every number of a
    block of objects is formatted at once."""
    n, m = rr.shape[:2]
    numbers = np.concatenate((rr, vv), axis=2)
    numbers = np.where(np.isfinite(numbers), numbers, 0.0)
    width = epochs.dtype.itemsize
    lines = np.zeros((n, m, width + 6 * (1 + _WIDTH) + 1), dtype=np.uint8)
    lines[:, :, :width] = epochs.view(np.uint8).reshape(-1, m, width)
    fields = lines[:, :, width:-1].reshape(n, m, 6, 1 + _WIDTH)
    fields[..., 0] = ord(" ")
    fields[..., 1:] = _format_numbers(numbers.reshape(-1)).reshape(n, m, 6, _WIDTH)
    lines[:, :, -1] = ord("\n")
    return lines


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

    #: States whose numbers are formatted together (about 0.5 kB of memory each).
    BLOCK_STATES = 1 << 16

    def __init__(self, folder, names, epoch, tofs, frame, ids=None, center="EARTH",
                 originator="hapsira-cowell", overwrite=False):
        if epoch is None:
            raise ValueError("the OEM format needs the epoch of the states: a TLE catalog "
                             "has one; give a CSV catalog's with --epoch")
        _oem()  # installed, or a ValueError that says how
        from astropy.time import Time
        epoch = as_epochs(epoch, len(names))  # one, or one per object
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
        #: each output time's UTC text to the nanosecond, as the oem package writes epochs:
        #: one row shared by all objects, or one per object (per-object epochs)
        self.texts = np.array(_oem_times(epoch, tofs).isot, dtype=object).reshape(
            -1, np.size(tofs))
        for i, row in enumerate(self.texts):
            try:
                _check_times(tofs, row, self.order)
            except ValueError as error:
                if len(self.texts) == 1:
                    raise
                raise ValueError(f"{error} (object {i}, epoch {epoch[i].utc.isot})") from None
        self.epochs = np.array([[text.encode() for text in row] for row in self.texts],
                               dtype=bytes)
        self.created = Time.now().utc.isot
        parent = os.path.dirname(os.path.abspath(folder))
        self.partial = tempfile.mkdtemp(prefix=".hapsira-cowell-oem-", dir=parent)
        self.written, self.skipped = [], []

    def write(self, start, stop, res, reentry=None):
        self.write_states(start, np.asarray(res.rr), np.asarray(res.vv))

    def write_states(self, start, rr, vv):
        """Write objects ``start``, ``start + 1``, ... from their states ``rr``, ``vv``
        (n, M, 3), formatting the numbers of up to `BLOCK_STATES` states at once."""
        step = max(1, self.BLOCK_STATES // max(len(self.texts), 1))
        for first in range(0, rr.shape[0], step):
            last = min(first + step, rr.shape[0])
            lines = _data_lines(self._rows(start + first, start + last), rr[first:last],
                                vv[first:last])
            for j in range(first, last):
                self._write_one(start + j, rr[j], vv[j], lines[j - first])

    def _rows(self, start, stop):
        """The epochs' text of objects ``start:stop``: the shared row, or theirs."""
        return self.epochs if len(self.epochs) == 1 else self.epochs[start:stop]

    def _write_one(self, i, rr, vv, lines=None):
        finite = np.isfinite(rr).all(axis=1) & np.isfinite(vv).all(axis=1)
        keep = self.order[finite[self.order]]
        if keep.size == 0:
            self.skipped.append(self.names[i])
            return
        texts = self.texts[0 if len(self.texts) == 1 else i]
        first, last = texts[keep[0]], texts[keep[-1]]
        for which, text in (("first", first), ("last", last)):
            if _leap_second(text):  # an object that stopped right at a leap second
                raise ValueError(_leap_message(f"object {i} ({self.names[i]!r}): its {which} "
                                               "state's time", text))
        if lines is None:
            lines = _data_lines(self._rows(i, i + 1)[-1], rr[None], vv[None])[0]
        with open(os.path.join(self.partial, self.files[i]), "wb") as file:
            file.write(self._header(i, first, last).encode())
            file.write(lines[keep].tobytes().translate(None, b"\0") + b"\n")
        self.written.append(self.files[i])

    def _header(self, i, first, last):
        """The header and metadata of object ``i``'s OEM, as the oem package writes them
        (`OrbitEphemerisMessage.save_as`, KVN): every value was checked at `__init__`."""
        fields = (("OBJECT_NAME", str(self.names[i]) or "UNNAMED"),
                  ("OBJECT_ID", str(self.ids[i])), ("CENTER_NAME", self.center),
                  ("REF_FRAME", self.frame), ("TIME_SYSTEM", "UTC"),
                  ("START_TIME", first), ("STOP_TIME", last))
        return (f"CCSDS_OEM_VERS = 2.0\nCREATION_DATE = {self.created}\n"
                f"ORIGINATOR = {self.originator}\n\nMETA_START\n"
                + "".join(f"{key} = {value}\n" for key, value in fields) + "META_STOP\n\n")

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
    epoch : astropy.time.Time, str or datetime, or N of them
        The time of ``tofs = 0``: anything ``astropy.time.Time(epoch)`` reads,
        e.g. ``"2026-01-01T00:00:00"`` (UTC unless a Time says otherwise; any
        scale, the files are in UTC). Or one per object, a ``Time`` of shape
        ``(N,)`` (a per-object `propagate_orbits` result's ``res.epoch``): object
        i's states are at ``epoch[i] + tofs``.
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
        not empty, without ``overwrite``; an ``epoch`` that astropy's `Time`
        does not read.

    Notes
    -----
    Epochs are written to the nanosecond and numbers with 15 significant
    digits, so reading the files back (`read_oem`) gives the states to well
    under a millimetre.
    """
    from astropy import units as u

    from ..units import to_value

    tofs = np.atleast_1d(to_value(tofs, u.s, "tofs"))
    rr, vv = to_value(rr, u.km, "rr"), to_value(vv, u.km / u.s, "vv")
    single = rr.ndim == 2
    epoch = as_epochs(epoch, 1 if single else rr.shape[0])
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
        writer.write_states(0, rr, vv)
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
