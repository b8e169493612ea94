"""Result files: npz, csv, parquet, Zarr and CCSDS OEM, written chunk by chunk as batches finish.

Each writer takes a propagation's results one chunk of objects at a time (a
``res`` with ``rr``, ``vv`` (n, M, 3), ``status``, ``nsteps``) so that a
catalog larger than memory can be written; files appear complete or not at
all. A Zarr store (`ZarrWriter`, ``pip install "hapsira-cowell[dask]"``) is
the format for catalogs whose states do not fit in memory: chunked and
compressed on disk, read back lazily by zarr or Dask. `write_oem` and
`read_oem` exchange ephemerides with other tools (Orekit,
GMAT, STK) as CCSDS Orbit Ephemeris Messages through the ``oem`` package
(``pip install "hapsira-cowell[oem]"``).
"""

import csv
import math
import os
import re
import shutil
import tempfile
import zipfile
from collections import namedtuple

import numpy as np

from .inputs import UsageError

__all__ = ["FORMATS", "NpzWriter", "RowWriter", "ZarrWriter", "OemWriter", "open_writer", "write_oem",
           "read_oem", "OemEphemeris", "output_times", "isot", "check_output",
           "check_plot_output"]

FORMATS = ("npz", "csv", "parquet", "zarr", "oem")


def isot(time):
    """ISO 8601 UTC text of an astropy Time, to the microsecond."""
    from astropy.time import Time
    return Time(time, precision=6).utc.isot


def output_times(epoch, tofs):
    """The ``utc`` column's text per output time (None without an epoch)."""
    if epoch is None:
        return None
    from astropy import units as u
    return isot(epoch + tofs * u.s)


class NpzWriter:
    """An .npz written chunk by chunk: big arrays go to memory-mapped .npy files in a
    temporary folder beside the output, zipped (uncompressed) when done."""

    def __init__(self, path, names, tofs, meta):
        self.path = path
        n, m = len(names), tofs.size
        self.folder = tempfile.mkdtemp(prefix=".hapsira-cowell-", dir=os.path.dirname(
            os.path.abspath(path)))
        self.big = {}
        for key, shape, dtype in (("rr", (n, m, 3), np.float64), ("vv", (n, m, 3), np.float64),
                                  ("status", (n,), np.int64), ("reentry", (n,), np.float64),
                                  ("nsteps", (n,), np.int64)):
            self.big[key] = np.lib.format.open_memmap(
                os.path.join(self.folder, key + ".npy"), mode="w+", dtype=dtype, shape=shape)
        self.small = dict(meta, names=np.array(names, dtype=str), tofs=tofs)

    def write(self, start, stop, res, reentry):
        self.big["rr"][start:stop] = res.rr
        self.big["vv"][start:stop] = res.vv
        self.big["status"][start:stop] = res.status
        self.big["reentry"][start:stop] = reentry
        self.big["nsteps"][start:stop] = res.nsteps

    def close(self):
        partial = self.path + ".partial"
        try:
            with zipfile.ZipFile(partial, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
                for key, array in self.small.items():
                    with archive.open(key + ".npy", "w", force_zip64=True) as member:
                        np.lib.format.write_array(member, np.asarray(array),
                                                  allow_pickle=False)
                for key, array in self.big.items():
                    array.flush()
                    archive.write(os.path.join(self.folder, key + ".npy"), key + ".npy")
            self.big.clear()
            os.replace(partial, self.path)
        finally:
            self.abort()

    def abort(self):
        self.big.clear()
        shutil.rmtree(self.folder, ignore_errors=True)
        if os.path.exists(self.path + ".partial"):
            os.remove(self.path + ".partial")


class RowWriter:
    """csv or parquet: one row per object and output time."""

    COLUMNS = ("name", "t", "utc", "x", "y", "z", "vx", "vy", "vz", "status", "reentry")

    def __init__(self, path, fmt, tofs, utc):
        self.path, self.fmt, self.tofs, self.utc = path, fmt, tofs, utc
        self.partial = path + ".partial"
        self.columns = [c for c in self.COLUMNS if c != "utc" or utc is not None]
        if fmt == "csv":
            self.file = open(self.partial, "w", newline="")
            self.csv = csv.writer(self.file)
            self.csv.writerow(self.columns)
            self.t_text = [f"{t:.3f}" for t in tofs]
        else:
            import pyarrow as pa
            import pyarrow.parquet as pq
            self.pa = pa
            fields = [pa.field("name", pa.string()), pa.field("t", pa.float64())]
            if utc is not None:
                fields.append(pa.field("utc", pa.string()))
            fields += [pa.field(c, pa.float64()) for c in ("x", "y", "z", "vx", "vy", "vz")]
            fields += [pa.field("status", pa.int64()), pa.field("reentry", pa.float64())]
            self.schema = pa.schema(fields)
            self.writer = pq.ParquetWriter(self.partial, self.schema)

    def write(self, names, res, reentry):
        m = self.tofs.size
        if self.fmt == "parquet":
            n = len(names)
            columns = {"name": np.repeat(np.array(names, dtype=object), m),
                       "t": np.tile(self.tofs, n)}
            if self.utc is not None:
                columns["utc"] = np.tile(np.asarray(self.utc, dtype=object), n)
            for axis, key in enumerate(("x", "y", "z")):
                columns[key] = res.rr[:, :, axis].ravel()
                columns["v" + key] = res.vv[:, :, axis].ravel()
            columns["status"] = np.repeat(res.status.astype(np.int64), m)
            columns["reentry"] = np.repeat(reentry, m)
            table = self.pa.table({f.name: columns[f.name] for f in self.schema},
                                  schema=self.schema)
            self.writer.write_table(table)
            return
        for i, name in enumerate(names):
            status = str(int(res.status[i]))
            t_reentry = "" if math.isnan(reentry[i]) else f"{reentry[i]:.3f}"
            rr, vv = res.rr[i], res.vv[i]
            for j in range(m):
                row = [name, self.t_text[j]]
                if self.utc is not None:
                    row.append(self.utc[j])
                row += [f"{x:.6f}" for x in rr[j]] + [f"{x:.9f}" for x in vv[j]]
                row += [status, t_reentry]
                self.csv.writerow(row)

    def close(self):
        if self.fmt == "csv":
            self.file.close()
        else:
            self.writer.close()
        os.replace(self.partial, self.path)

    def abort(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - best effort while failing anyway
            pass
        for path in (self.partial, self.path):
            if os.path.exists(path):
                os.remove(path)


# ------------------------------------------------------------------------------ Zarr

def _zarr():
    try:
        import zarr
    except ImportError:
        raise UsageError("the Zarr format needs zarr >= 3 (Python >= 3.11), which is not "
                         "installed (pip install 'hapsira-cowell[dask]')") from None
    if int(zarr.__version__.split(".")[0]) < 3:
        raise UsageError(f"the Zarr format needs zarr >= 3, found {zarr.__version__} "
                         "(pip install 'hapsira-cowell[dask]')")
    return zarr


def is_zarr_store(path):
    """True for a folder holding a Zarr group or array (v2 or v3 metadata)."""
    return os.path.isdir(path) and any(
        os.path.exists(os.path.join(path, name)) for name in ("zarr.json", ".zgroup", ".zarray"))


class ZarrWriter:
    """A Zarr group (a folder) written chunk by chunk: ``rr``, ``vv`` (n, M, 3) km and
    km/s, ``status``, ``reentry``, ``nsteps`` (n,), ``names``, ``tofs``, and the run's
    metadata as attributes. Each write of `propagate`'s ``chunk`` objects fills
    whole Zarr chunks (the time axis is cut where a chunk would pass 64 MiB).
    Written to ``<path>.partial`` and moved to ``path`` by `close`, replacing a Zarr
    store there, so that a store appears complete or not at all."""

    def __init__(self, path, names, tofs, meta, chunk=10_000):
        from hapsira_core.dask import zarr_chunk_shape

        zarr = _zarr()
        self.path, self.partial = path, path + ".partial"
        shutil.rmtree(self.partial, ignore_errors=True)
        n, m = len(names), tofs.size
        rows = max(1, min(chunk, n))
        group = zarr.open_group(self.partial, mode="w")
        attrs = {key: np.asarray(value).tolist() for key, value in meta.items()
                 if np.ndim(value) == 0}
        attrs.update({"units": {"rr": "km", "vv": "km/s", "tofs": "s", "reentry": "s"},
                      "producer": "hapsira-cowell propagate"})
        group.attrs.update(attrs)
        self.arrays = {}
        for key, shape, dtype in (("rr", (n, m, 3), np.float64), ("vv", (n, m, 3), np.float64),
                                  ("status", (n,), np.int64), ("reentry", (n,), np.float64),
                                  ("nsteps", (n,), np.int64)):
            self.arrays[key] = group.create_array(
                key, shape=shape, dtype=dtype,
                chunks=zarr_chunk_shape(shape, np.dtype(dtype).itemsize, rows),
                fill_value=np.nan if dtype == np.float64 else 0)
        group.create_array("names", shape=(n,), dtype=str, chunks=(rows,))[:] = \
            np.array(names, dtype=str)
        group.create_array("tofs", data=np.asarray(tofs, dtype=np.float64))
        for key, value in meta.items():  # per-object metadata (initial_ok)
            if np.ndim(value) == 1 and len(value) == n:
                group.create_array(key, data=np.asarray(value), chunks=(rows,))

    def write(self, start, stop, res, reentry):
        self.arrays["rr"][start:stop] = np.asarray(res.rr)
        self.arrays["vv"][start:stop] = np.asarray(res.vv)
        self.arrays["status"][start:stop] = res.status
        self.arrays["reentry"][start:stop] = reentry
        self.arrays["nsteps"][start:stop] = res.nsteps

    def close(self):
        if is_zarr_store(self.path):
            shutil.rmtree(self.path)
        os.replace(self.partial, self.path)

    def abort(self):
        shutil.rmtree(self.partial, ignore_errors=True)


# ------------------------------------------------------------------------------- OEM

def _oem():
    try:
        import oem
        from oem.components import EphemerisSegment, HeaderSection, MetaDataSection
    except ImportError:
        raise UsageError("the OEM format needs the oem package, which is not installed "
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


def _header_value(value, name):
    """``value`` as the text of an OEM header or metadata value, or `UsageError` naming
    ``name``: a KVN value is one line, so a newline (or another control character)
    would end it and start a key of its own."""
    text = str(value)
    bad = next((char for char in text if not char.isprintable()), None)
    if bad is not None:
        raise UsageError(f"{name}: {text!r} holds the non-printable character {bad!r} "
                         f"(U+{ord(bad):04X}); OEM header values are one line of printable "
                         "text")
    return text


def _leap_second(time):
    """Whether a scalar UTC Time falls in a leap second (its ISO text says second 60)."""
    return time.isot[17:19] == "60"


def _check_times(tofs, times, order):
    """`UsageError` for output times an OEM cannot hold: not finite, two equal (OEM
    epochs must increase), or a leap second at the start or the end (see below)."""
    tofs = np.asarray(tofs, dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(tofs))
    if bad.size:
        raise UsageError(f"tofs: time of flight {bad[0]} is {tofs[bad[0]]}; OEM states need "
                         "finite times")
    texts = [times[j].isot for j in order]
    for k in range(1, len(texts)):
        if texts[k] == texts[k - 1]:
            i, j = sorted((int(order[k - 1]), int(order[k])))
            raise UsageError(f"tofs: times of flight {i} and {j} ({tofs[i]:.17g} s and "
                             f"{tofs[j]:.17g} s) give the same OEM epoch {texts[k]}; OEM states "
                             "must be at increasing times, without repeats")
    for which, k in (("first", 0), ("last", -1)):
        if len(texts) and _leap_second(times[order[k]]):
            raise UsageError(_leap_message(f"epoch, tofs: the {which} output time",
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
    (`UsageError`, a `ValueError`, naming the argument): header values
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
            raise UsageError("the OEM format needs the epoch of the states: a TLE catalog "
                             "has one; give a CSV catalog's with --epoch")
        self.oem, self.Header, self.Meta, self.Segment = _oem()
        from astropy.time import Time
        self.folder = os.fspath(folder)
        self.names = [_header_value(name, f"names[{i}] (OBJECT_NAME)")
                      for i, name in enumerate(names)]
        self.ids = self.names if ids is None else [
            _header_value(value, f"ids[{i}] (OBJECT_ID)") for i, value in enumerate(ids)]
        self.files = _file_names(self.names, len(self.names))
        self.frame = _header_value(frame, "frame (REF_FRAME)")
        self.center = _header_value(center, "center (CENTER_NAME)")
        self.originator = _header_value(originator, "originator (ORIGINATOR)")
        for value, name in ((self.frame, "frame (REF_FRAME)"),
                            (self.center, "center (CENTER_NAME)")):
            if not value.strip():
                raise UsageError(f"{name}: empty; expected e.g. GCRF, TEME (frame) or "
                                 "EARTH (center)")
        self.overwrite = overwrite
        if os.path.exists(self.folder):
            if not os.path.isdir(self.folder):
                raise UsageError(f"{self.folder!r}: is a file; the OEM writer fills a folder "
                                 "with one file per object")
            if os.listdir(self.folder) and not overwrite:
                raise UsageError(f"{self.folder!r}: the folder is not empty; the files of "
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
                raise UsageError(_leap_message(f"object {i} ({self.names[i]!r}): its {which} "
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

    from .units import to_value

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


# ----------------------------------------------------------------------- command line

def open_writer(path, fmt, catalog, tofs, perturbations=(), frame=None, chunk=10_000,
                overwrite=False):
    """``(sink, write)``: the writer of ``fmt`` for a `hapsira_cowell.catalog.Catalog`'s run.

    ``write(first, last, res, reentry)`` takes each chunk (the ``writer`` of
    `hapsira_cowell.batch.propagate`); ``sink.close()`` completes the file(s),
    ``sink.abort()`` removes them. ``frame``: the OEM ``REF_FRAME`` of a CSV
    catalog's states (a TLE catalog's are TEME). ``chunk``: objects per write (the
    Zarr store's chunks follow it). ``overwrite``: OEM into a folder that is not
    empty, replacing its ``*.oem`` files (``--force``; see `OemWriter`).
    """
    names = catalog.names
    if fmt == "oem":
        frame = catalog.frame if catalog.kind == "TLE" else frame
        if frame is None:
            raise UsageError("--format oem: give the frame of a CSV catalog's states with "
                             "--frame, e.g. GCRF or EME2000")
        try:
            sink = OemWriter(path, names, catalog.epoch, tofs, frame, ids=catalog.ids,
                             overwrite=overwrite)
        except UsageError as error:  # a name, an id, a time: say it is OEM's need
            raise UsageError(f"--format oem: {error}") from None
        return sink, sink.write
    if fmt in ("npz", "zarr"):
        meta = {"epoch": np.array(isot(catalog.epoch) if catalog.epoch is not None else ""),
                "frame": np.array(catalog.frame),
                "perturbations": np.array(",".join(perturbations) or "none"),
                "initial_ok": catalog.initial_ok}
        sink = (NpzWriter(path, names, tofs, meta) if fmt == "npz"
                else ZarrWriter(path, names, tofs, meta, chunk))
        return sink, sink.write
    sink = RowWriter(path, fmt, tofs, output_times(catalog.epoch, tofs))

    def write(first, last, res, reentry):
        sink.write(names[first:last], res, reentry)
    return sink, write


def check_plot_output(path, option):
    """`UsageError` now for a plot that could not be written at the end."""
    if path is None:
        return
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UsageError(f"{option} needs matplotlib, which is not installed "
                         "(pip install 'hapsira-cowell[cli]')") from None
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UsageError(f"{option} {path!r}: the folder {folder!r} does not exist")
    _probe_folder(path, folder, option)


def _probe_folder(out, folder, option="--out"):
    """`UsageError` unless files and folders can be made in ``folder`` (the writers make
    ``<out>.partial`` and temporary folders there): ``os.access`` says yes to root
    for /proc, and for a read-only file system."""
    try:
        probe = tempfile.mkdtemp(prefix=".hapsira-cowell-probe-", dir=folder)
    except OSError as error:
        raise UsageError(f"{option} {out!r}: cannot write in the folder {folder!r}: "
                         f"{error.strerror or error}") from None
    try:
        with open(os.path.join(probe, "probe"), "wb") as file:
            file.write(b"x")
    except OSError as error:
        raise UsageError(f"{option} {out!r}: cannot write in the folder {folder!r}: "
                         f"{error.strerror or error}") from None
    finally:
        shutil.rmtree(probe, ignore_errors=True)


def check_output(out, fmt, force=False):
    """``(out, fmt)`` for ``--out`` and ``--format``; `UsageError` early for what would
    fail at the end (unknown format, missing library, folder that does not exist or
    cannot be written in, an OEM folder holding files without ``force``)."""
    if out is None:
        out = "result-oem" if fmt == "oem" else f"result.{fmt or 'npz'}"
    if fmt is None:
        suffix = os.path.splitext(out.rstrip("/" + os.sep))[1].lower().lstrip(".")
        if suffix not in FORMATS:
            raise UsageError(f"--out {out!r}: cannot tell the format from the suffix; "
                             f"use .npz, .csv, .parquet, .zarr or .oem, or --format")
        fmt = suffix
    if fmt not in FORMATS:
        raise UsageError(f"--format: unknown format {fmt!r}; expected one of "
                         f"{', '.join(FORMATS)}")
    if fmt == "parquet":
        try:
            import pyarrow  # noqa: F401
            import pyarrow.parquet  # noqa: F401
        except ImportError:
            raise UsageError("--format parquet needs pyarrow, which is not installed "
                             "(pip install pyarrow), or use --format npz or csv") from None
    if fmt == "oem":
        try:
            _oem()
        except UsageError as error:
            raise UsageError(f"--format oem: {error}") from None
    if fmt == "zarr":
        try:
            _zarr()
        except UsageError as error:
            raise UsageError(f"--format zarr: {error}") from None
        out = out.rstrip("/" + os.sep) or out
    folder = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(folder):
        raise UsageError(f"--out {out!r}: the folder {folder!r} does not exist")
    if not os.access(folder, os.W_OK):
        raise UsageError(f"--out {out!r}: the folder {folder!r} is not writable")
    _probe_folder(out, folder)
    if fmt == "oem":
        if os.path.exists(out) and not os.path.isdir(out):
            raise UsageError(f"--out {out!r}: is a file; the OEM format writes a folder "
                             "with one file per object")
        if os.path.isdir(out) and not force:
            entries = len(os.listdir(out))
            if entries:
                raise UsageError(f"--out {out!r}: the folder is not empty ({entries} "
                                 "entries); the OEM files of another run would mix with "
                                 "these: give a new or empty folder, or --force to replace "
                                 "its .oem files")
    elif fmt == "zarr":
        if os.path.exists(out) and not is_zarr_store(out):
            raise UsageError(f"--out {out!r}: exists and is not a Zarr store; the Zarr "
                             "format writes a folder (an existing store is replaced)")
    elif os.path.isdir(out):
        raise UsageError(f"--out {out!r}: is a folder; give a file name")
    return out, fmt
