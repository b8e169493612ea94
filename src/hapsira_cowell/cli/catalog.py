"""Catalogs of objects to propagate: TLE files, OMM files or CSVs of states, read into one
epoch.

`read_catalog` gives a `Catalog`: names, initial states (km, km/s), optional
per-object drag numbers and the common epoch. A TLE (or OMM) catalog's objects,
each at its own epoch, are brought to one epoch with SGP4 (the catalog's latest, or
the one asked for); an OMM catalog keeps its `OMMCatalog` (``omms``), whose
covariances ``--pc`` and ``--cdm`` carry to that epoch. `DEFAULT_CATALOG` is a small
real catalog shipped with the package: the 119 tracked fragments of Iridium 33
(CelesTrak, epochs of February 2025), what ``hapsira-cowell propagate`` runs without
a file.
"""

import csv
import math
import os
import stat
import warnings
from importlib import resources

import numpy as np

from .inputs import UsageError, format_duration

__all__ = ["Catalog", "read_catalog", "check_file", "file_kind", "DEFAULT_CATALOG",
           "MAX_INPUT_MB"]

#: The catalog shipped inside the package (a ``pathlib``-like resource path).
DEFAULT_CATALOG = resources.files("hapsira_cowell").joinpath("data", "iridium-33-debris.tle")

#: The largest catalog file read by default, MB (10^6 bytes): ``--max-input-mb``.
#: A file is read whole, and its lines take a few times its size in memory; the
#: full public catalog is about 5 MB of TLEs.
MAX_INPUT_MB = 256.0

_KINDS = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a pipe (FIFO)"), (stat.S_ISSOCK, "a socket"))


def check_file(path, max_mb=MAX_INPUT_MB):
    """`UsageError` unless ``path`` is a regular file of at most ``max_mb`` MB.

    A catalog is read whole: a device such as ``/dev/zero``, a pipe or a
    socket could be read without end, so only regular files are read, and
    their size is capped (``max_mb``, ``--max-input-mb`` on the command line;
    None: no cap) before anything is read.
    """
    label = os.fspath(path)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise UsageError(f"catalog {label!r}: no such file") from None
    except OSError as error:
        raise UsageError(f"catalog {label!r}: cannot read it: "
                         f"{error.strerror or error}") from None
    if stat.S_ISDIR(info.st_mode):
        raise UsageError(f"catalog {label!r}: is a folder, expected a file")
    if not stat.S_ISREG(info.st_mode):
        kind = next((name for test, name in _KINDS if test(info.st_mode)), "not a file")
        raise UsageError(f"catalog {label!r}: is {kind}, not a regular file; give a TLE "
                         "file or a CSV of state vectors")
    if max_mb is not None and info.st_size > max_mb * 1e6:
        raise UsageError(f"catalog {label!r}: {info.st_size / 1e6:,.0f} MB is more than "
                         f"--max-input-mb {max_mb:g}; raise --max-input-mb to read it")


class Catalog:
    """Initial states of the objects to propagate, all at one epoch.

    ``names`` (N,) str, ``r0``, ``v0`` (N, 3) km, km/s, ``c_d``, ``area_to_mass``
    (N,) (NaN: use the defaults; A/m in m^2/kg), ``epoch`` (astropy ``Time``
    or None), ``kind`` ('TLE', 'OMM' or 'CSV'), ``frame``, ``ids`` (N,) object
    identifiers (a TLE's or OMM's international designator, else the name), ``numbers``
    (N,) catalogue numbers as text (a TLE's or OMM's; else the row number), ``notes``
    (lines for the summary), ``initial_ok`` (N,) bool, ``omms`` (an OMM catalog's
    `hapsira_cowell.inputs.omm.OMMCatalog`, else None).
    """

    def __init__(self, names, r0, v0, kind, frame, epoch=None, c_d=None, area_to_mass=None,
                 notes=(), ids=None, numbers=None, omms=None):
        n = len(names)
        self.omms = omms
        self.names = list(names)
        self.ids = list(self.names if ids is None else ids)
        self.numbers = [str(x) for x in (range(1, n + 1) if numbers is None else numbers)]
        self.r0 = np.asarray(r0, dtype=np.float64).reshape(n, 3)
        self.v0 = np.asarray(v0, dtype=np.float64).reshape(n, 3)
        self.kind = kind
        self.frame = frame
        self.epoch = epoch
        self.c_d = np.full(n, np.nan) if c_d is None else np.asarray(c_d, dtype=np.float64)
        self.area_to_mass = (np.full(n, np.nan) if area_to_mass is None
                             else np.asarray(area_to_mass, dtype=np.float64))
        self.notes = list(notes)
        self.initial_ok = np.isfinite(self.r0).all(axis=1) & np.isfinite(self.v0).all(axis=1)

    def __len__(self):
        return len(self.names)


_CSV_REQUIRED = ("name", "x", "y", "z", "vx", "vy", "vz")
_CSV_OPTIONAL = ("c_d", "area_to_mass")


def file_kind(path):
    """'csv', 'omm' or 'tle': what `read_catalog` reads ``path`` as."""
    return _sniff(path)


def _sniff(path):
    """'csv', 'omm' (a KVN OMM, or XML) or 'tle' from the first meaningful line of the
    file."""
    try:
        with open(path, encoding="utf-8-sig", errors="replace") as source:
            for line in source:
                stripped = line.strip()
                if not stripped or stripped.startswith("#"):
                    continue
                if stripped.startswith(("CCSDS_OMM_VERS", "<")):
                    return "omm"
                fields = {f.strip().lower() for f in stripped.split(",")}
                return "csv" if fields & set(_CSV_REQUIRED) else "tle"
    except OSError as error:
        raise UsageError(f"catalog {os.fspath(path)!r}: cannot read it: "
                         f"{error.strerror or error}") from None
    raise UsageError(f"catalog {os.fspath(path)!r}: the file is empty")


def _read_csv(path, epoch):
    label = os.path.basename(os.fspath(path))
    names, states, c_d, area_to_mass = [], [], [], []
    # as `hapsira_cowell.inputs.tle` reads a TLE catalog: bytes that are not UTF-8 (a
    # Latin-1 name) become U+FFFD, where they would refuse the whole file
    with open(path, encoding="utf-8-sig", errors="replace", newline="") as source:
        rows = csv.reader(line for line in source
                          if line.strip() and not line.lstrip().startswith("#"))
        header = [h.strip().lower() for h in next(rows)]
        missing = [c for c in _CSV_REQUIRED if c not in header]
        if missing:
            raise UsageError(f"catalog {label}: missing column(s) {', '.join(missing)}; "
                             f"expected a header with {','.join(_CSV_REQUIRED)} "
                             f"(optional: {', '.join(_CSV_OPTIONAL)})")
        index = {c: header.index(c) for c in _CSV_REQUIRED + _CSV_OPTIONAL if c in header}
        for number, row in enumerate(rows, start=2):
            if len(row) < len(header):
                raise UsageError(f"catalog {label}, data row {number - 1}: expected "
                                 f"{len(header)} fields, got {len(row)}")
            values = []
            for column in _CSV_REQUIRED[1:] + _CSV_OPTIONAL:
                if column not in index:
                    values.append(math.nan)
                    continue
                text = row[index[column]].strip()
                if column in _CSV_OPTIONAL and text == "":
                    values.append(math.nan)
                    continue
                try:
                    values.append(float(text))
                except ValueError:
                    raise UsageError(f"catalog {label}, data row {number - 1}: column "
                                     f"{column!r}: {text!r} is not a number") from None
            names.append(row[index["name"]].strip())
            states.append(values[:6])
            c_d.append(values[6])
            area_to_mass.append(values[7])
    if not names:
        raise UsageError(f"catalog {label}: no objects (a header but no rows)")
    states = np.array(states)
    notes = [] if epoch is None else [f"the states are taken to be at {epoch.utc.iso} UTC"]
    return Catalog(names, states[:, :3], states[:, 3:], "CSV", "as given (km, km/s)",
                   epoch=epoch, c_d=c_d, area_to_mass=area_to_mass, notes=notes)


def _designator(satrec):
    """'1997-051C' from a TLE's international designator field ('97051C'), or ''."""
    text = getattr(satrec, "intldesg", "").strip()
    if len(text) < 5 or not text[:5].isdigit():
        return ""
    year = int(text[:2])
    return f"{1900 + year if year >= 57 else 2000 + year}-{text[2:]}"


def _read_tle(path, epoch):
    from ..inputs.tle import from_tle

    label = os.path.basename(os.fspath(path))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            catalog = from_tle(path)
        except ValueError as error:
            message = str(error).removeprefix("path_or_lines: ")
            raise UsageError(f"catalog {label}: not a TLE catalog or a CSV of state vectors "
                             f"({message})") from None
    notes = []
    if catalog.errors:
        line, problem = catalog.errors[0]
        notes.append(f"skipped {len(catalog.errors)} malformed TLE entries "
                     f"(first: line {line}: {problem})")
    for warning in caught:
        if "malformed TLE" not in str(warning.message):
            notes.append(f"warning: {warning.message}")
    epoch, r0, v0, took, failed = _sgp4_states(catalog, epoch)
    notes += [took] + failed
    ids = [_designator(s) or name for s, name in zip(catalog.satellites, catalog.names)]
    return Catalog(catalog.names, r0, v0, "TLE", "TEME", epoch=epoch, notes=notes, ids=ids,
                   numbers=catalog.satnums)


def _sgp4_states(catalog, epoch):
    """A TLE or OMM catalog's states at ``epoch`` (None: its latest) through SGP4:
    ``(epoch, r0, v0, took, failed)``, ``took`` the note saying where they went and
    ``failed`` a note on the objects SGP4 could not bring there (empty: none)."""
    if epoch is None:
        epoch = catalog.epochs.max()
        where = f"the catalog's latest epoch, {epoch.utc.iso} UTC"
    else:
        where = f"{epoch.utc.iso} UTC"
    r0, v0, ok = catalog.states_at(epoch)
    spread = (catalog.epochs.max() - catalog.epochs.min()).to_value("s")
    took = (f"SGP4 took the objects to {where} "
            f"(epochs spread over {format_duration(spread) if spread > 0 else '0 s'})")
    failed = [] if ok.all() else [
        f"SGP4 could not propagate {int((~ok).sum())} objects to that epoch "
        "(decayed or diverged): their states are NaN, status -3"]
    return epoch, r0, v0, took, failed


def _read_omm(path, epoch):
    label = os.path.basename(os.fspath(path))
    try:
        from ..inputs.omm import read_omms

        catalog = read_omms(path)
    except ImportError:
        raise UsageError(f"catalog {label}: an OMM file needs the ccsds-ndm package, which "
                         "is not installed (pip install 'hapsira-cowell[cdm]')") from None
    except ValueError as error:
        raise UsageError(f"catalog {label}: not an OMM file of SGP4 elements "
                         f"({str(error).replace(os.fspath(path) + ': ', '')})") from None
    epoch, r0, v0, took, failed = _sgp4_states(catalog, epoch)
    given = int(np.isfinite(catalog.covariances).all(axis=(1, 2)).sum())
    notes = [f"{took}; {given} of {len(catalog)} OMMs carry a covariance"] + failed
    ids = [d or name for d, name in zip(catalog.designators, catalog.names)]
    return Catalog(catalog.names, r0, v0, "OMM", "TEME", epoch=epoch, notes=notes, ids=ids,
                   numbers=catalog.satnums, omms=catalog)


def read_catalog(path=None, epoch=None, max_mb=MAX_INPUT_MB):
    """A `Catalog` from a TLE file, an OMM file (KVN or XML, with ccsds-ndm) or a CSV of
    state vectors (see docs/cli.md).

    ``path`` None reads `DEFAULT_CATALOG`. ``epoch`` (astropy ``Time`` or an
    ISO string, UTC): for a TLE or OMM catalog the epoch SGP4 brings every object to
    (default: the catalog's latest); for a CSV, the epoch of its states (default
    none: results then carry times of flight only). ``max_mb``: the largest
    file read (`check_file`; None: no cap). Raises `UsageError` (a
    `ValueError`) naming the file for anything unreadable.
    """
    if path is None:
        with resources.as_file(DEFAULT_CATALOG) as default:
            return read_catalog(default, epoch, max_mb)
    check_file(path, max_mb)
    if epoch is not None:
        epoch = _epoch(epoch)
    kind = _sniff(path)
    try:
        read = {"csv": _read_csv, "omm": _read_omm}.get(kind, _read_tle)
        return read(path, epoch)
    except OSError as error:
        raise UsageError(f"catalog {os.fspath(path)!r}: cannot read it: "
                         f"{error.strerror or error}") from None


def _epoch(value):
    from astropy.time import Time

    try:
        epoch = value if isinstance(value, Time) else Time(value, scale="utc")
    except ValueError:
        raise UsageError(f"epoch (--epoch): cannot read {value!r} as a time; expected ISO 8601 UTC, "
                         "e.g. 2025-02-15T12:00:00") from None
    if not epoch.isscalar:
        raise UsageError(f"epoch (--epoch): expected a single time, got shape {epoch.shape}")
    return epoch
