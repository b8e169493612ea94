"""Reading debris catalogs: two-line element sets (TLE) to state vectors.

:func:`from_tle` parses a CelesTrak-style catalog (a name line then lines 1
and 2 per object, or bare pairs of lines) with the ``sgp4`` package and
returns each object's TEME state (km, km/s) at its own epoch. Malformed
entries are reported with their line numbers and skipped, so that one bad
entry never costs the rest of the catalog (unless ``strict=True``).
"""

import os
import warnings

import numpy as np
from astropy.time import Time
from sgp4.api import Satrec

__all__ = ["TLECatalog", "from_tle", "tle_checksum"]


def tle_checksum(line):
    """Modulo-10 checksum of the first 68 characters: digits count their value, '-' one."""
    return sum(int(c) if c.isdigit() else c == "-" for c in line[:68]) % 10


def _check_line(line, number):
    """What is wrong with a TLE line that claims to be line ``number`` (None if nothing)."""
    if len(line) != 69:
        return f"expected 69 characters, got {len(line)}"
    if line[0] != str(number) or line[1] != " ":
        return f"expected line {number} to start with '{number} '"
    if not line[68].isdigit():
        return "the checksum character is not a digit"
    if tle_checksum(line) != int(line[68]):
        return f"checksum {line[68]} does not match the computed {tle_checksum(line)}"
    return None


class TLECatalog:
    """States of the objects of a TLE catalog, each at its own epoch.

    ``names`` (list of str), ``satnums`` (N,) int, ``epochs`` (astropy ``Time``,
    UTC, N), ``r`` (N, 3) km and ``v`` (N, 3) km/s in TEME, and ``errors``: a
    list of ``(line_number, message)`` for the entries that were skipped.
    """

    def __init__(self, names, satellites, r, v, errors):
        self.names = names
        self.satellites = satellites
        self.satnums = np.array([s.satnum for s in satellites], dtype=np.int64)
        self.epochs = Time([s.jdsatepoch for s in satellites],
                           [s.jdsatepochF for s in satellites], format="jd", scale="utc")
        self.r = r
        self.v = v
        self.errors = errors

    def __len__(self):
        return len(self.names)

    def __repr__(self):
        span = f"{self.epochs.min().iso} .. {self.epochs.max().iso}" if len(self) else "-"
        return (f"TLECatalog({len(self)} objects, epochs {span}, "
                f"{len(self.errors)} skipped entries)")

    def states_at(self, epoch):
        """All objects propagated with SGP4 to one ``epoch`` (astropy ``Time``).

        Returns ``(r, v, ok)``: (N, 3) km and km/s in TEME, and a boolean mask
        of the objects SGP4 could propagate (the others are NaN rows).
        """
        epoch = Time(epoch, scale="utc")
        r = np.full((len(self), 3), np.nan)
        v = np.full((len(self), 3), np.nan)
        for i, sat in enumerate(self.satellites):
            error, ri, vi = sat.sgp4(epoch.jd1, epoch.jd2)
            if error == 0:
                r[i], v[i] = ri, vi
        return r, v, np.isfinite(r[:, 0])


def _read_lines(path_or_lines):
    if isinstance(path_or_lines, (str, os.PathLike)):
        try:
            with open(path_or_lines) as source:
                return source.read().splitlines()
        except OSError as error:
            raise ValueError(f"path_or_lines: cannot read {os.fspath(path_or_lines)!r}: "
                             f"{error.strerror}") from error
    return [str(line).rstrip("\r\n") for line in path_or_lines]


def _entries(lines):
    """Yield ``(line_number, name, line1, line2)`` per entry; ``name`` None if absent.

    A catalog that ends inside an entry yields ``(line_number, None, message, None)``.
    """
    i = 0
    while i < len(lines):
        if not lines[i].strip():
            i += 1
            continue
        if lines[i].startswith("1 "):
            name, first = None, i
        else:
            name, first = lines[i].strip(), i + 1
        if first + 1 >= len(lines):
            yield i + 1, None, "the catalog ends inside an entry", None
            return
        yield first + 1, name, lines[first].rstrip(), lines[first + 1].rstrip()
        i = first + 2


def from_tle(path_or_lines, strict=False):
    """Read a TLE catalog into a :class:`TLECatalog`.

    ``path_or_lines``: a path, or an iterable of lines (3 lines per object:
    name, line 1, line 2; the name line may be absent). Every entry is checked
    (length, line numbers, checksums, numbers sgp4 can parse, an SGP4 state at
    the epoch). A bad entry raises ``ValueError`` naming its line if
    ``strict``, else it is skipped, listed in ``errors`` and counted in one
    warning.
    """
    lines = _read_lines(path_or_lines)
    names, satellites, r, v, errors = [], [], [], [], []
    for number, name, line1, line2 in _entries(lines):
        problem = None
        if line2 is None:
            problem = (number, line1)
        else:
            for offset, (line, which) in enumerate(((line1, 1), (line2, 2))):
                message = _check_line(line, which)
                if message:
                    problem = (number + offset, message)
                    break
        if problem is None:
            try:
                sat = Satrec.twoline2rv(line1, line2)
                error, ri, vi = sat.sgp4(sat.jdsatepoch, sat.jdsatepochF)
            except (ValueError, IndexError) as exc:
                problem = (number, f"sgp4 cannot parse the entry: {exc}")
            else:
                if error != 0:
                    problem = (number, f"SGP4 error code {error} at the epoch")
        if problem is not None:
            if strict:
                raise ValueError(f"line {problem[0]}: {problem[1]}")
            errors.append(problem)
            continue
        names.append(name if name is not None else str(sat.satnum))
        satellites.append(sat)
        r.append(ri)
        v.append(vi)
    if not satellites:
        raise ValueError("path_or_lines: no valid TLE entry found"
                         + (f" ({len(errors)} malformed)" if errors else ""))
    if errors:
        warnings.warn(f"skipped {len(errors)} malformed TLE entries (first: line "
                      f"{errors[0][0]}: {errors[0][1]}); see .errors", stacklevel=2)
    return TLECatalog(names, satellites, np.array(r), np.array(v), errors)
