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
import shutil
import tempfile
import zipfile

import numpy as np

from ..outputs.oem import OemWriter, _oem
from .inputs import UsageError

__all__ = ["FORMATS", "NpzWriter", "RowWriter", "ZarrWriter", "open_writer", "output_times",
           "isot", "check_output", "check_plot_output"]

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
        frame = catalog.frame if catalog.kind in ("TLE", "OMM") else frame
        if frame is None:
            raise UsageError("--format oem: give the frame of a CSV catalog's states with "
                             "--frame, e.g. GCRF or EME2000")
        try:
            sink = OemWriter(path, names, catalog.epoch, tofs, frame, ids=catalog.ids,
                             overwrite=overwrite)
        except ValueError as error:  # a name, an id, a time: say it is OEM's need
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
        except ValueError as error:
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
