"""``hapsira-cowell``: propagate a debris catalog from the command line.

::

    hapsira-cowell propagate CATALOG --tof 1d --every 10min --perturbations j2,drag \\
        --out result.npz [--target cpu|parallel|cuda] [--chunk 10000] [--format npz|csv|parquet]
    hapsira-cowell demo [--out demo.png] [--n 500]

See ``docs/cli.md`` for every option and the output formats.

The compilation target is fixed when ``hapsira_core`` is first imported, so
this module imports nothing of ``hapsira_core`` (nor ``cowell``) at module
level: :func:`main` sets ``HAPSIRA_TARGET`` first and imports afterwards. When
the package was already imported on another target (the ``hapsira_cowell``
package imports its solver, so ``python -m hapsira_cowell.cli`` and the
console script both do), :func:`main` runs the command in a child process
with the requested target and returns its exit status.
"""

import argparse
import csv
import math
import os
import re
import shutil
import sys
import tempfile
import time
import warnings
import zipfile

import numpy as np

__all__ = ["main", "parse_duration", "parse_perturbations", "build_rhs", "read_catalog",
           "demo_cloud", "UsageError", "K_EARTH", "R_EARTH", "PERTURBATIONS"]

PROG = "hapsira-cowell"
TARGETS = ("cpu", "parallel", "cuda")
FORMATS = ("npz", "csv", "parquet")

K_EARTH = 398600.4418  # km^3/s^2
R_EARTH = 6378.137  # km, WGS-84 equatorial radius

#: Perturbations selectable with ``--perturbations`` (two-body is always on).
PERTURBATIONS = {
    "j2": "Earth's oblateness, J2 = 1.08262668e-3, R = 6378.137 km",
    "j3": "Earth's third zonal harmonic, J3 = -2.5327e-6, R = 6378.137 km",
    "drag": "exponential atmosphere, 2.5e-10 kg/m^3 at 200 km altitude, scale height 40 km, "
            "at rest in the inertial frame; C_D and A/m per object",
}
#: Exponential atmosphere of ``drag``: density RHO0 (kg/km^3) at altitude H_RHO0 (km), scale
#: height H0 (km); the same model as the drag variant of the benchmarks.
RHO0 = 0.25  # kg/km^3 = 2.5e-10 kg/m^3
H_RHO0 = 200.0
H0 = 40.0

_UNITS = {"s": 1.0, "sec": 1.0, "min": 60.0, "h": 3600.0, "hr": 3600.0, "d": 86400.0,
          "day": 86400.0, "days": 86400.0}
_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*$")


class UsageError(Exception):
    """Bad input from the user: reported as one line on stderr, exit status 2."""


class _Parser(argparse.ArgumentParser):
    """argparse with errors on one line (no usage block) and exit status 2."""

    def error(self, message):
        raise UsageError(message)


# --------------------------------------------------------------------------- parsing

def parse_duration(text, name="duration"):
    """Seconds in ``text``: a number and a unit, ``30s``, ``90min``, ``6h``, ``1.5d``.

    Units: ``s``, ``min``, ``h``, ``d`` (also ``sec``, ``hr``, ``day``,
    ``days``). The result must be positive and finite; anything else raises
    :class:`UsageError` naming ``name``.
    """
    match = _DURATION.match(str(text))
    hint = "expected a positive number and a unit (s, min, h or d), e.g. 30s, 90min, 6h, 1.5d"
    if not match:
        raise UsageError(f"{name}: cannot read {text!r} as a duration; {hint}")
    number, unit = float(match.group(1)), match.group(2).lower()
    if unit == "m":
        raise UsageError(f"{name}: {text!r} is ambiguous; write minutes as 'min'")
    if unit not in _UNITS:
        what = "has no unit" if not unit else f"has the unknown unit {unit!r}"
        raise UsageError(f"{name}: {text!r} {what}; {hint}")
    seconds = number * _UNITS[unit]
    if not (seconds > 0 and math.isfinite(seconds)):
        raise UsageError(f"{name}: {text!r} is not a positive duration; {hint}")
    return seconds


def format_duration(seconds):
    """``86400.0`` -> ``'1 d'``; the largest unit that gives a number >= 1."""
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= size:
            return f"{seconds / size:.4g} {unit}"
    return f"{seconds:.4g} s"


def parse_perturbations(text):
    """``"j2,drag"`` -> ``("j2", "drag")`` in a canonical order; ``"none"`` -> ``()``."""
    names = [part.strip().lower() for part in str(text).split(",") if part.strip()]
    if names in ([], ["none"]):
        return ()
    unknown = [n for n in names if n not in PERTURBATIONS]
    if unknown:
        raise UsageError(f"--perturbations: unknown perturbation {unknown[0]!r}; expected a "
                         f"comma-separated subset of {', '.join(PERTURBATIONS)} (or 'none')")
    return tuple(n for n in PERTURBATIONS if n in names)


def make_tofs(tof, every):
    """Output times: 0, every, 2 every, ..., and ``tof`` itself (s)."""
    count = int(math.floor(tof / every + 1e-9))
    tofs = every * np.arange(count + 1, dtype=np.float64)
    tofs = tofs[tofs < tof * (1 - 1e-12)]
    return np.append(tofs, tof)


# ------------------------------------------------------------------ right-hand sides

_RHS = {}


def build_rhs(perturbations):
    """The ``hjit`` right-hand side for a set of perturbation names (one per set, cached).

    Two-body plus the selected terms; ``drag`` reads the object's params row
    as ``p[0]`` = C_D, ``p[1]`` = A/m in km^2/kg. Imports ``hapsira_core``:
    call it only after the target is set.
    """
    key = tuple(n for n in PERTURBATIONS if n in perturbations)
    if key in _RHS:
        return _RHS[key]
    from hapsira_core.jit import TARGET, hjit
    from . import perturbations as pert

    terms = {
        "j2": "J2_perturbation(t, rr, vv, k, J2, R)",
        "j3": "J3_perturbation(t, rr, vv, k, J3, R)",
        "drag": "atmospheric_drag_exponential(t, rr, vv, k, R_RHO0, p[0], p[1], H0, RHO0)",
    }
    name = "rhs_" + "_".join(("two_body",) + key)
    lines = [f"def {name}(t, rr, vv, k, p):",
             "    drr, dvv = two_body(t, rr, vv, k, p)",
             "    ax = dvv[0]", "    ay = dvv[1]", "    az = dvv[2]"]
    for term in key:
        lines += [f"    a = {terms[term]}", "    ax += a[0]", "    ay += a[1]", "    az += a[2]"]
    lines.append("    return drr, (ax, ay, az)")
    namespace = {
        "two_body": pert.two_body, "J2": pert.J2_EARTH, "J3": pert.J3_EARTH, "R": R_EARTH,
        "R_RHO0": R_EARTH + H_RHO0, "H0": H0, "RHO0": RHO0,
    }
    for fn in ("J2_perturbation", "J3_perturbation", "atmospheric_drag_exponential"):
        if hasattr(pert, fn):
            namespace[fn] = getattr(pert, fn)
    exec(compile("\n".join(lines), f"<{PROG} right-hand side {'+'.join(key) or 'two-body'}>",
                 "exec"), namespace)
    # cache=False: numba cannot cache a function without a source file
    options = {} if TARGET == "cuda" else {"cache": False}
    _RHS[key] = hjit(namespace[name], **options)
    return _RHS[key]


# ------------------------------------------------------------------------- catalogs

class Catalog:
    """Initial states of the objects to propagate, all at one epoch.

    ``names`` (N,) str, ``r0``, ``v0`` (N, 3) km, km/s, ``c_d``, ``area_to_mass``
    (N,) (NaN: use the defaults; A/m in m^2/kg), ``epoch`` (astropy ``Time``
    or None), ``kind`` ('TLE' or 'CSV'), ``frame``, ``notes`` (lines for the
    summary), ``initial_ok`` (N,) bool.
    """

    def __init__(self, names, r0, v0, kind, frame, epoch=None, c_d=None, area_to_mass=None,
                 notes=()):
        n = len(names)
        self.names = list(names)
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


def _sniff(path):
    """'csv' or 'tle' from the first meaningful line of the file."""
    try:
        with open(path, encoding="utf-8-sig") as source:
            for line in source:
                stripped = line.strip()
                if not stripped or stripped.startswith("#"):
                    continue
                fields = {f.strip().lower() for f in stripped.split(",")}
                return "csv" if fields & set(_CSV_REQUIRED) else "tle"
    except UnicodeDecodeError:
        raise UsageError(f"catalog {os.fspath(path)!r}: not a text file (expected a TLE "
                         "catalog or a CSV of state vectors)") from None
    except OSError as error:
        raise UsageError(f"catalog {os.fspath(path)!r}: cannot read it: "
                         f"{error.strerror or error}") from None
    raise UsageError(f"catalog {os.fspath(path)!r}: the file is empty")


def _read_csv(path):
    label = os.path.basename(os.fspath(path))
    names, states, c_d, area_to_mass = [], [], [], []
    with open(path, encoding="utf-8-sig", newline="") as source:
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
    return Catalog(names, states[:, :3], states[:, 3:], "CSV", "as given (km, km/s)",
                   c_d=c_d, area_to_mass=area_to_mass)


def _read_tle(path):
    from .io import from_tle

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
    epoch = catalog.epochs.max()
    r0, v0, ok = catalog.states_at(epoch)
    spread = (epoch - catalog.epochs.min()).to_value("s")
    notes.append(f"SGP4 took the objects to the catalog's latest epoch, {epoch.utc.iso} UTC "
                 f"(epochs spread over {format_duration(spread) if spread > 0 else '0 s'})")
    if not ok.all():
        notes.append(f"SGP4 could not propagate {int((~ok).sum())} objects to that epoch "
                     "(decayed or diverged): their states are NaN, status -3")
    return Catalog(catalog.names, r0, v0, "TLE", "TEME", epoch=epoch, notes=notes)


def read_catalog(path):
    """A :class:`Catalog` from a TLE file or a CSV of state vectors (see docs/cli.md)."""
    kind = _sniff(path)
    try:
        return _read_csv(path) if kind == "csv" else _read_tle(path)
    except OSError as error:
        raise UsageError(f"catalog {os.fspath(path)!r}: cannot read it: "
                         f"{error.strerror or error}") from None


# --------------------------------------------------------------------------- output

def _isot(time):
    """ISO 8601 UTC text of an astropy Time, to the microsecond."""
    from astropy.time import Time
    return Time(time, precision=6).utc.isot


def _output_columns(epoch, tofs):
    """The ``utc`` column's text per output time (None without an epoch)."""
    if epoch is None:
        return None
    from astropy import units as u
    return _isot(epoch + tofs * u.s)


class _NpzWriter:
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


class _RowWriter:
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


def _check_output(out, fmt):
    """The output format; raises UsageError early for what would fail at the end."""
    if out is None:
        out = f"result.{fmt or 'npz'}"
    if fmt is None:
        suffix = os.path.splitext(out)[1].lower().lstrip(".")
        if suffix not in FORMATS:
            raise UsageError(f"--out {out!r}: cannot tell the format from the suffix; "
                             f"use .npz, .csv or .parquet, or --format")
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
    folder = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(folder):
        raise UsageError(f"--out {out!r}: the folder {folder!r} does not exist")
    if not os.access(folder, os.W_OK):
        raise UsageError(f"--out {out!r}: the folder {folder!r} is not writable")
    if os.path.isdir(out):
        raise UsageError(f"--out {out!r}: is a folder; give a file name")
    return out, fmt


def _check_plot_output(path, option):
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


# ---------------------------------------------------------------------- propagation

class RunResult:
    """What one propagation gives the summary and the plots: ``names``, ``tofs``,
    ``status``, ``reentry`` (s, NaN if none), ``rr`` (kept only when asked),
    ``seconds`` (propagation), ``compile_seconds``."""


def _progress(total, enabled, desc):
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, unit="obj", desc=desc, file=sys.stderr, dynamic_ncols=True,
                disable=None)  # None: off when stderr is not a terminal


def _info(message):
    print(f"{PROG}: {message}", file=sys.stderr, flush=True)


def propagate(catalog, tofs, perturbations, *, c_d=2.2, area_to_mass=0.01,
              reentry_altitude=100.0, chunk=10_000, writer=None, keep_states=False,
              progress=True, rtol=1e-11, atol=1e-12):
    """Propagate a :class:`Catalog` in chunks; hand each chunk to ``writer``.

    ``area_to_mass`` in m^2/kg (converted to km^2/kg for the solver); the
    catalog's own per-object values win where given. With ``drag``, a
    terminal :class:`~hapsira_cowell.events.AltitudeCrossEvent` stops an
    object when it descends through ``reentry_altitude`` (km).
    """
    from hapsira_core.jit import TARGET
    from .cowell import cowell
    from .events import AltitudeCrossEvent

    n = len(catalog)
    f = build_rhs(perturbations)
    params = np.column_stack([
        np.where(np.isnan(catalog.c_d), c_d, catalog.c_d),
        np.where(np.isnan(catalog.area_to_mass), area_to_mass, catalog.area_to_mass) * 1e-6,
    ])
    drag = "drag" in perturbations
    events = [AltitudeCrossEvent(reentry_altitude, R_EARTH)] if drag else []

    out = RunResult()
    out.names, out.tofs = catalog.names, tofs
    out.status = np.zeros(n, dtype=np.int64)
    out.reentry = np.full(n, np.nan)
    out.rr = np.empty((n, tofs.size, 3)) if keep_states else None

    # Compile first, on one object, so that the progress bar and the throughput
    # measure the propagation alone.
    start = time.perf_counter()
    _info(f"compiling the solver for target {TARGET} (two-body"
          f"{''.join(' + ' + p for p in perturbations)}; 15-30 s, once per run)")
    cowell(K_EARTH, np.array([R_EARTH + 500.0, 0.0, 0.0]), np.array([0.0, 7.6, 0.0]), [1.0],
           f=f, params=params[:1], events=events)
    out.compile_seconds = time.perf_counter() - start

    bar = _progress(n, progress, f"propagating ({TARGET})")
    start = time.perf_counter()
    try:
        for first in range(0, n, chunk):
            last = min(first + chunk, n)
            res = cowell(K_EARTH, catalog.r0[first:last], catalog.v0[first:last], tofs,
                         rtol, atol, f=f, params=params[first:last], events=events)
            reentry = (np.where(res.status == 1, res.t_events[0][:, 0], np.nan) if drag
                       else np.full(last - first, np.nan))
            out.status[first:last] = res.status
            out.reentry[first:last] = reentry
            if keep_states:
                out.rr[first:last] = res.rr
            if writer is not None:
                writer(first, last, res, reentry)
            if bar is not None:
                bar.update(last - first)
    finally:
        if bar is not None:
            bar.close()
    out.seconds = time.perf_counter() - start
    return out


def summary_lines(run, catalog, tof, wall_seconds):
    """The end-of-run summary: objects, outcomes by status, re-entries, timings."""
    from .cowell import STATUS_MESSAGES

    n = len(run.status)
    lines = [f"objects: {n} ({catalog.kind}, frame {catalog.frame}"
             + (f", epoch {catalog.epoch.utc.iso} UTC)" if catalog.epoch is not None else ")")]
    lines += [f"  {note}" for note in catalog.notes]
    done = int((run.status == 0).sum())
    lines.append(f"reached the end ({format_duration(tof)}): {done}")
    reentered = run.status == 1
    if reentered.any():
        times = run.reentry[reentered]
        lines.append(f"re-entries: {int(reentered.sum())} (first after "
                     f"{format_duration(float(np.nanmin(times)))}, last after "
                     f"{format_duration(float(np.nanmax(times)))})")
    else:
        lines.append("re-entries: 0")
    failed = np.unique(run.status[run.status < 0])
    if failed.size:
        lines.append(f"failures: {int((run.status < 0).sum())}")
        for code in failed:
            message = STATUS_MESSAGES.get(int(code), "unknown status")
            lines.append(f"  status {int(code)}: {int((run.status == code).sum())} ({message})")
    else:
        lines.append("failures: 0")
    object_days = n * tof / 86400.0
    rate = object_days / run.seconds if run.seconds > 0 else math.inf
    lines.append(f"wall time: {wall_seconds:.1f} s (compilation {run.compile_seconds:.1f} s, "
                 f"propagation {run.seconds:.2f} s)")
    lines.append(f"throughput: {rate:,.0f} object-days per second of propagation")
    return lines


# ------------------------------------------------------------------------- commands

def _propagate_command(args, started):
    catalog = read_catalog(args.catalog)
    tofs = make_tofs(args.tof, args.every)
    names = catalog.names
    meta = {
        "epoch": np.array(_isot(catalog.epoch) if catalog.epoch is not None else ""),
        "frame": np.array(catalog.frame),
        "perturbations": np.array(",".join(args.perturbations) or "none"),
        "initial_ok": catalog.initial_ok,
    }
    if args.format == "npz":
        sink = _NpzWriter(args.out, names, tofs, meta)
        write = sink.write
    else:
        sink = _RowWriter(args.out, args.format, tofs, _output_columns(catalog.epoch, tofs))
        def write(first, last, res, reentry):  # noqa: E306
            sink.write(names[first:last], res, reentry)
    try:
        run = propagate(catalog, tofs, args.perturbations, c_d=args.drag_coefficient,
                        area_to_mass=args.area_to_mass, reentry_altitude=args.reentry_altitude,
                        chunk=args.chunk, writer=write, keep_states=args.plot is not None,
                        progress=not args.no_progress)
        sink.close()
    except BaseException:
        sink.abort()
        raise
    if args.plot:
        from .plots import altitude_vs_time
        altitude_vs_time(run, tofs, R_EARTH, args.plot, reentry_altitude=args.reentry_altitude,
                         title=f"{os.path.basename(args.catalog)}: "
                               f"{'two-body' if not args.perturbations else ' + '.join(args.perturbations)}")
    for line in summary_lines(run, catalog, args.tof, time.perf_counter() - started):
        print(line)
    print(f"wrote {args.out} ({args.format})" + (f" and {args.plot}" if args.plot else ""))
    return 0


def demo_cloud(n, seed=0, low_fraction=0.04):
    """A synthetic LEO debris cloud: ``(names, r0, v0, area_to_mass)`` (km, km/s, m^2/kg).

    Perigees 300-1200 km, eccentricities below 0.02, any inclination, A/m
    log-uniform in 0.005-0.1 m^2/kg; about ``low_fraction`` of the objects
    (at least 3) are fragments on near-circular orbits at 120-180 km with A/m
    0.02-0.1 m^2/kg, which re-enter within a day under ``drag``.
    """
    rng = np.random.default_rng(seed)
    u = rng.random((n, 7))
    low = np.zeros(n, dtype=bool)
    low[: min(n, max(3, int(round(low_fraction * n))))] = True
    rng.shuffle(low)
    perigee = np.where(low, 120.0 + 60.0 * u[:, 0], 300.0 + 900.0 * u[:, 0])
    ecc = np.where(low, 0.001 * u[:, 1], 0.02 * u[:, 1])
    rp = R_EARTH + perigee
    p = rp * (1 + ecc)
    inc = np.arccos(2 * u[:, 2] - 1)
    raan, argp, nu = 2 * math.pi * u[:, 3:6].T
    r_pqw = np.stack([np.cos(nu), np.sin(nu), np.zeros(n)], -1) \
        * (p / (1 + ecc * np.cos(nu)))[:, None]
    v_pqw = np.stack([-np.sin(nu), ecc + np.cos(nu), np.zeros(n)], -1) \
        * np.sqrt(K_EARTH / p)[:, None]
    cO, sO, ci, si = np.cos(raan), np.sin(raan), np.cos(inc), np.sin(inc)
    cw, sw = np.cos(argp), np.sin(argp)
    rot = np.stack([
        np.stack([cO * cw - sO * sw * ci, -cO * sw - sO * cw * ci, sO * si], -1),
        np.stack([sO * cw + cO * sw * ci, -sO * sw + cO * cw * ci, -cO * si], -1),
        np.stack([sw * si, cw * si, ci], -1),
    ], 1)
    r0 = np.einsum("nij,nj->ni", rot, r_pqw)
    v0 = np.einsum("nij,nj->ni", rot, v_pqw)
    area_to_mass = np.where(low, 0.02 * 5 ** u[:, 6], 0.005 * 20 ** u[:, 6])
    names = [f"DEMO {i:05d}" + (" LOW" if low[i] else "") for i in range(n)]
    return names, r0, v0, area_to_mass


def _demo_command(args, started):
    names, r0, v0, area_to_mass = demo_cloud(args.n, args.seed)
    catalog = Catalog(names, r0, v0, "synthetic demo cloud", "inertial, Earth-centred",
                      area_to_mass=area_to_mass,
                      notes=[f"{sum(' LOW' in s for s in names)} fragments start at "
                             "120-180 km and should re-enter within the day"])
    tof = 86400.0
    tofs = make_tofs(tof, 120.0)
    perturbations = ("j2", "drag")
    run = propagate(catalog, tofs, perturbations, keep_states=True,
                    progress=not args.no_progress)
    from .plots import altitude_vs_time, ground_tracks
    altitude_vs_time(run, tofs, R_EARTH, args.out, reentry_altitude=100.0,
                     title=f"demo: {args.n} synthetic debris, two-body + J2 + drag, 1 day")
    stem, suffix = os.path.splitext(args.out)
    tracks = f"{stem}-tracks{suffix or '.png'}"
    ground_tracks(run, tofs, tracks, hours=3.0,
                  title="demo: ground tracks over the first 3 h (longitude 0 on the x axis at t = 0)")
    for line in summary_lines(run, catalog, tof, time.perf_counter() - started):
        print(line)
    print(f"wrote {args.out} and {tracks}")
    return 0


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _finite_float(allow_zero):
    """An argparse type: a finite number > 0 (or >= 0 with ``allow_zero``)."""
    expected = "a number >= 0" if allow_zero else "a positive number"

    def parse(text):
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and (value > 0 or (allow_zero and value == 0))):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value
    return parse


_positive_float = _finite_float(allow_zero=False)
_non_negative_float = _finite_float(allow_zero=True)


def build_parser():
    parser = _Parser(prog=PROG, description="Cowell orbit propagation (DOP853) of debris "
                     "catalogs on cpu, parallel cpu or CUDA GPUs.")
    commands = parser.add_subparsers(dest="command", metavar="{propagate,demo}",
                                     parser_class=_Parser)
    commands.required = True
    target_help = ("compilation target for this run (default: $HAPSIRA_TARGET, else cpu)")

    p = commands.add_parser("propagate", help="propagate a TLE catalog or a CSV of states",
                            description="Propagate every object of CATALOG (a TLE file or a "
                            "CSV with columns name,x,y,z,vx,vy,vz in km and km/s) and write "
                            "the states at regular times. See docs/cli.md.")
    p.add_argument("catalog", metavar="CATALOG", help="TLE file or CSV of state vectors")
    p.add_argument("--tof", default="1d", help="time of flight, e.g. 1d, 6h, 90min, 30s, 1.5d "
                   "(default 1d)")
    p.add_argument("--every", default="10min", help="output interval (default 10min); the "
                   "last output is at --tof")
    p.add_argument("--perturbations", default="j2",
                   help=f"comma-separated subset of {', '.join(PERTURBATIONS)}, or none "
                   "(default j2); two-body is always included")
    p.add_argument("--out", default=None, help="output file (default result.npz, or "
                   "result.csv / result.parquet with --format)")
    p.add_argument("--format", default=None, help="npz, csv or parquet (default: from the "
                   "suffix of --out)")
    p.add_argument("--target", choices=TARGETS, default=None, help=target_help)
    p.add_argument("--chunk", type=_positive_int, default=10_000,
                   help="objects per solver call (default 10000)")
    p.add_argument("--area-to-mass", type=_positive_float, default=0.01,
                   help="area-to-mass ratio for drag, m^2/kg (default 0.01); a CSV catalog's "
                   "area_to_mass column wins where given")
    p.add_argument("--drag-coefficient", type=_positive_float, default=2.2,
                   help="drag coefficient C_D (default 2.2); a CSV catalog's c_d column wins")
    p.add_argument("--reentry-altitude", type=_non_negative_float, default=100.0,
                   help="with drag, stop an object descending through this altitude, km "
                   "(default 100)")
    p.add_argument("--plot", default=None, metavar="PNG",
                   help="also write an altitude-vs-time plot (needs matplotlib)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")

    d = commands.add_parser("demo", help="propagate a synthetic debris cloud and plot it",
                            description="Propagate a synthetic LEO debris cloud (made in "
                            "code, a few fragments low enough to re-enter) for 1 day with "
                            "J2 and drag, print the summary and plot altitudes and ground "
                            "tracks.")
    d.add_argument("--out", default="demo.png", help="altitude plot (default demo.png); the "
                   "ground tracks go to <stem>-tracks.png beside it")
    d.add_argument("--n", type=_positive_int, default=500, help="objects (default 500)")
    d.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    d.add_argument("--target", choices=TARGETS, default=None, help=target_help)
    d.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


def _validate(args):
    if args.command == "propagate":
        args.tof = parse_duration(args.tof, "--tof")
        args.every = parse_duration(args.every, "--every")
        args.perturbations = parse_perturbations(args.perturbations)
        args.out, args.format = _check_output(args.out, args.format)
        _check_plot_output(args.plot, "--plot")
        if not os.path.exists(args.catalog):
            raise UsageError(f"catalog {args.catalog!r}: no such file")
        if os.path.isdir(args.catalog):
            raise UsageError(f"catalog {args.catalog!r}: is a folder, expected a file")
    else:
        _check_plot_output(args.out, "--out")


_RERUN = "HAPSIRA_CLI_RERUN"
_CHILD = """\
import sys
try:
    import hapsira_core
except (ValueError, RuntimeError) as error:
    print(f"{prog}: error: {{error}}", file=sys.stderr)
    sys.exit(2)
from hapsira_cowell.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _select_target(target, argv):
    """Set HAPSIRA_TARGET before hapsira_core is imported; return an exit status if this
    run went to a fresh process (the target was already fixed here), else None."""
    if target is None:
        return None
    settings = sys.modules.get("hapsira_core.settings")
    if settings is None:
        os.environ["HAPSIRA_TARGET"] = target
        return None
    if settings.TARGET == target:
        return None
    if os.environ.get(_RERUN) == target:
        raise UsageError(f"--target {target}: this process is already set up for "
                         f"{settings.TARGET} and running again did not help")
    # A child process rather than exec: main() may be called from a user's own
    # Python process, which must survive it.
    import subprocess
    env = dict(os.environ, HAPSIRA_TARGET=target, **{_RERUN: target})
    command = [sys.executable, "-c", _CHILD.format(prog=PROG), *argv]
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        return subprocess.call(command, env=env)
    except KeyboardInterrupt:
        return 130


def main(argv=None):
    """Entry point of the ``hapsira-cowell`` console script; returns the exit status."""
    started = time.perf_counter()
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        _validate(args)
        status = _select_target(args.target, argv)
        if status is not None:
            return status
        try:
            import hapsira_core  # noqa: F401  (reads HAPSIRA_TARGET, checks a GPU for cuda)
        except (ValueError, RuntimeError) as error:
            raise UsageError(str(error)) from None
        if args.command == "propagate":
            return _propagate_command(args, started)
        return _demo_command(args, started)
    except UsageError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
