"""Reading debris catalogs: two-line element sets (TLE) to state vectors.

`from_tle()` parses a CelesTrak-style catalog (a name line then lines 1
and 2 per object, or bare pairs of lines) with the ``sgp4`` package and
returns each object's TEME state (km, km/s) at its own epoch. Malformed
entries are reported with their line numbers and skipped, so that one bad
entry never costs the rest of the catalog (unless ``strict=True``).
"""

import os
import re
import warnings

import numpy as np
from astropy.time import Time
from sgp4.api import Satrec, SatrecArray

__all__ = ["TLECatalog", "TLEWarning", "from_tle", "tle_checksum"]

#: A plain decimal number (no exponent, no '_', no 'nan'): what float() may see.
_DECIMAL = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)", re.ASCII)
#: The TLE "assumed decimal point" form of nddot and B*: mantissa digits, signed exponent.
_EXPONENTIAL = re.compile(r"[+-]?\d{1,5}[+-]\d", re.ASCII)
#: A catalog number: up to five digits, or Alpha-5 (a letter other than I and O, 4 digits).
_SATNUM = re.compile(r"\d{1,5}|[A-HJ-NP-Z]\d{4}", re.ASCII)

# Columns that must be blank (0-based) in line 1 and line 2.
_BLANKS = {1: (1, 8, 17, 32, 43, 52, 61, 63), 2: (1, 7, 16, 25, 33, 42, 51)}
# (name, first column, end column (0-based, exclusive), rule, lowest, highest).
_FIELDS = {
    1: (("catalog number", 2, 7, _SATNUM, None, None),
        ("epoch year", 18, 20, re.compile(r"\d\d", re.ASCII), None, None),
        ("epoch day", 20, 32, _DECIMAL, 1.0, 367.0),
        ("first derivative of the mean motion", 33, 43, _DECIMAL, None, None),
        ("second derivative of the mean motion", 44, 52, _EXPONENTIAL, None, None),
        ("B* drag term", 53, 61, _EXPONENTIAL, None, None)),
    2: (("catalog number", 2, 7, _SATNUM, None, None),
        ("inclination", 8, 16, _DECIMAL, 0.0, 180.0),
        ("right ascension of the ascending node", 17, 25, _DECIMAL, 0.0, 360.0),
        ("eccentricity", 26, 33, re.compile(r"\d{1,7}", re.ASCII), None, None),
        ("argument of perigee", 34, 42, _DECIMAL, 0.0, 360.0),
        ("mean anomaly", 43, 51, _DECIMAL, 0.0, 360.0),
        ("mean motion", 52, 63, _DECIMAL, 0.0, None),
        ("revolution number", 63, 68, re.compile(r"\d{0,5}", re.ASCII), None, None)),
}


class TLEWarning(UserWarning):
    """Issued by `from_tle` when it skipped malformed entries, and when
    catalog numbers repeat."""


_ASCII_DIGITS = "0123456789"


def tle_checksum(line):
    """Modulo-10 checksum of a TLE line's first 68 characters.

    The ASCII digits 0-9 count their value, '-' counts one, everything else
    zero (other scripts' digits too: a TLE is ASCII); the result is what
    column 69 of a valid line holds.
    """
    return sum(_ASCII_DIGITS.index(c) if c in _ASCII_DIGITS else c == "-"
               for c in line[:68]) % 10


def _field_at(number, column):
    """The name and columns (1-based) of the field of TLE line ``number`` at ``column``
    (0-based), or None between fields."""
    for name, start, end, *_ in _FIELDS[number]:
        if start <= column < end:
            return f"{name} (columns {start + 1}-{end})"
    return None


def _non_ascii(line, number):
    """What is wrong if TLE line ``number`` holds a non-ASCII character, else None.

    Python reads other scripts' digits (Arabic-Indic, fullwidth, ...) as
    numbers and sgp4 would then read another orbit: a TLE is ASCII, and a
    character outside it is a bad field, never a digit.
    """
    for column, char in enumerate(line):
        if not char.isascii():
            field = _field_at(number, column) or ("the checksum (column 69)" if column == 68
                                                  else f"column {column + 1}")
            return (f"line {number}: {field} holds the non-ASCII character {char!r} "
                    f"(U+{ord(char):04X}) in column {column + 1}; TLE fields are ASCII")
    return None


def _check_line(line, number):
    """What is wrong with TLE line ``number`` (1 or 2), or None if nothing is."""
    if len(line) != 69:
        return f"line {number} has {len(line)} characters, expected 69"
    if line[:2] != f"{number} ":
        return f"expected line {number} to start with '{number} ', found {line[:2]!r}"
    problem = _non_ascii(line, number)
    if problem:
        return problem
    if line[68] not in _ASCII_DIGITS:
        return f"checksum character {line[68]!r} of line {number} is not a digit"
    if tle_checksum(line) != int(line[68]):
        return (f"checksum of line {number} fails: column 69 says {line[68]}, "
                f"the line sums to {tle_checksum(line)}")
    for column in _BLANKS[number]:
        if line[column] != " ":
            return (f"line {number}: expected a blank in column {column + 1}, "
                    f"found {line[column]!r} (fields out of place)")
    for name, start, end, rule, low, high in _FIELDS[number]:
        text = line[start:end].strip()
        if not rule.fullmatch(text):
            return (f"line {number}: {name} {line[start:end]!r} (columns {start + 1}-{end}) "
                    "is not a number in TLE format")
        if low is not None or high is not None:
            value = float(text)
            if (low is not None and value < low) or (high is not None and value > high) \
                    or (high is None and value <= low):
                return f"line {number}: {name} {text} is out of range"
    if number == 1:
        return _check_epoch_day(line)
    return None


def _check_epoch_day(line):
    """What is wrong with the epoch day of line 1 for its year, or None.

    Day 366 exists only in leap years, and sgp4 rolls a day past the end of
    the year silently into the next one: an epoch that no TLE producer writes.
    """
    two_digits, day = int(line[18:20]), float(line[20:32])
    year = 1900 + two_digits if two_digits >= 57 else 2000 + two_digits
    days = 366 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 365
    if day >= days + 1:
        return (f"line 1: epoch day {line[20:32].strip()} (columns 21-32) is past the end "
                f"of {year}, which has {days} days")
    return None


def _kind(line):
    """'1' or '2' for what looks like that TLE line, '?' for a long line that is
    neither (a TLE line mangled at its start), 'name' for anything else.

    A TLE line starts with its number and a blank, then the catalog number
    (columns 3-7) and, on line 1, the classification letter (on line 2 a
    blank): a name line may start ``1 `` or ``2 `` too (``1 KUZ DEB``). A long
    line (60 characters or more, where a name has 24) with such a start is
    taken as a TLE line whatever else it holds, so that its faults are reported.
    """
    if line[:2] in ("1 ", "2 ") and (len(line) >= 60 or (
            len(line) >= 8 and _SATNUM.fullmatch(line[2:7].lstrip())
            and (line[7] == " " if line[0] == "2" else "A" <= line[7] <= "Z"))):
        return line[0]
    return "?" if len(line) >= 60 else "name"


def _name(line):
    """An object's name from its name line (a Space-Track '0 ' prefix dropped)."""
    text = line.strip()
    return text[2:].strip() if text.startswith("0 ") else text


def _parse(lines):
    """Split numbered lines into entries and leftovers, in file order.

    ``lines``: ``(line_number, text)`` of the non-blank lines. Yields
    ``("entry", name_or_None, (number1, line1), (number2, line2))`` for every
    line 1 directly followed by a line 2 (the name is the line before it if
    that is a name line nobody else claims), and ``("error", line_number,
    message)`` for the lines that fit no entry: one error per broken entry.
    """
    kinds = [_kind(text) for _, text in lines]
    i, n = 0, len(lines)
    leftover = []  # indices of lines since the last entry

    def broken(indices):
        """Errors for leftover lines: one per name line and per extra line 1 in them."""
        chunks = []
        for j in indices:
            starts = kinds[j] == "name" or (kinds[j] == "1" and chunks and any(
                kinds[k] == "1" for k in chunks[-1]))
            if starts or not chunks:
                chunks.append([])
            chunks[-1].append(j)
        for chunk in chunks:
            tle = [j for j in chunk if kinds[j] != "name"]
            if not tle:
                number, text = lines[chunk[0]]
                yield ("error", number,
                       f"name line {_name(text)!r} is not followed by lines 1 and 2")
                continue
            first = tle[0]
            number, text = lines[first]
            if kinds[first] == "1":
                if first + 1 == n:
                    yield ("error", number,
                           "the catalog ends inside an entry (line 1 without its line 2)")
                else:
                    after, text_after = lines[first + 1]
                    found = "a line 1" if kinds[first + 1] == "1" else (
                        "a name line" if kinds[first + 1] == "name" else
                        f"a line starting {text_after[:2]!r}")
                    yield ("error", number, f"line 1 is not followed by its line 2 (line "
                                            f"{after} is {found}; line 2 missing?)")
            elif kinds[first] == "2":
                yield ("error", number,
                       "expected line 1 (starting '1 '), found a line 2 (lines out of order "
                       "or line 1 missing)")
            else:
                yield ("error", number,
                       f"expected line 1 (starting '1 '), found a line starting {text[:2]!r}")

    while i < n:
        if kinds[i] == "1" and i + 1 < n and kinds[i + 1] == "2":
            name = None
            if leftover and kinds[leftover[-1]] == "name" and leftover[-1] == i - 1:
                name = _name(lines[leftover.pop()][1])
            yield from broken(leftover)
            leftover = []
            yield "entry", name, lines[i], lines[i + 1]
            i += 2
        else:
            leftover.append(i)
            i += 1
    yield from broken(leftover)


def _read_lines(path_or_lines):
    """The catalog's lines (line ends and a leading byte-order mark removed)."""
    lines = _raw_lines(path_or_lines)
    if lines and lines[0].startswith("\ufeff"):
        lines[0] = lines[0][1:]  # a BOM (Windows editors write one) is not part of a name
    return lines


def _raw_lines(path_or_lines):
    if isinstance(path_or_lines, str) and "\n" in path_or_lines:
        return path_or_lines.splitlines()  # the text of a catalog, not a path
    if isinstance(path_or_lines, (str, os.PathLike)):
        try:
            # bytes that are not UTF-8 become U+FFFD: the entry is then reported as
            # holding a non-ASCII character instead of failing the whole file
            with open(path_or_lines, encoding="utf-8", errors="replace") as source:
                return source.read().splitlines()
        except OSError as error:
            raise type(error)(error.errno, f"cannot read the TLE catalog: {error.strerror}",
                              os.fspath(path_or_lines)) from None
    lines = []
    for index, line in enumerate(path_or_lines):
        if isinstance(line, bytes):
            line = line.decode("utf-8", errors="replace")
        if not isinstance(line, str):
            raise TypeError(f"path_or_lines: item {index} is a {type(line).__name__}, "
                            "expected str lines (or pass a path)")
        lines.append(line.rstrip("\r\n"))
    return lines


def _duplicates(satellites, line_numbers, shown=5):
    """A warning's text naming catalog numbers that more than one entry carries, or None.

    Both entries are kept (two element sets of one object, or a number reused
    by mistake: only the user can tell), but results keyed by catalog number
    would silently merge them.
    """
    lines = {}
    for sat, line in zip(satellites, line_numbers):
        lines.setdefault(sat.satnum, []).append(line)
    repeated = {n: at for n, at in lines.items() if len(at) > 1}
    if not repeated:
        return None
    listed = "; ".join(f"{n} (lines {', '.join(map(str, at))})"
                       for n, at in list(repeated.items())[:shown])
    more = f"; and {len(repeated) - shown} more" if len(repeated) > shown else ""
    return (f"{len(repeated)} catalog number(s) appear in more than one entry, all kept: "
            f"{listed}{more}")


def single_epoch(epoch):
    """``epoch`` (astropy ``Time`` of any scale, or a str read as UTC) as one UTC time."""
    epoch = Time(epoch, scale="utc") if not isinstance(epoch, Time) else epoch.utc
    if not epoch.isscalar:
        raise ValueError(f"epoch: expected a single time, got shape {epoch.shape}")
    return epoch


class TLECatalog:
    """The objects of a TLE catalog, each with its SGP4 state at its own epoch.

    Attributes
    ----------
    names : list of str
        Object names, stripped (the catalog number where the file has no name lines).
    satnums : ndarray of int64, (N,)
        NORAD catalog numbers (Alpha-5 numbers as sgp4 decodes them).
    epochs : astropy.time.Time, (N,)
        Each object's TLE epoch, UTC.
    r : ndarray, (N, 3)
        Positions at ``epochs``, km, TEME (true equator, mean equinox of date).
    v : ndarray, (N, 3)
        Velocities at ``epochs``, km/s, TEME.
    line_numbers : ndarray of int64, (N,)
        1-based line in the source where each object's line 1 is.
    satellites : list of sgp4.api.Satrec
        The parsed element sets, for propagating further with SGP4.
    errors : list of (int, str)
        ``(line_number, message)`` of each skipped entry, 1-based, in file order.
    """

    def __init__(self, names, satellites, r, v, line_numbers, errors):
        self.names = list(names)
        self.satellites = list(satellites)
        self.satnums = np.array([s.satnum for s in satellites], dtype=np.int64)
        self.epochs = Time(np.array([s.jdsatepoch for s in satellites], dtype=float),
                           np.array([s.jdsatepochF for s in satellites], dtype=float),
                           format="jd", scale="utc")
        self.r = np.asarray(r, dtype=np.float64).reshape(-1, 3)
        self.v = np.asarray(v, dtype=np.float64).reshape(-1, 3)
        self.line_numbers = np.asarray(line_numbers, dtype=np.int64)
        self.errors = list(errors)

    def __len__(self):
        return len(self.names)

    def __repr__(self):
        if not len(self):
            return f"TLECatalog(0 objects, {len(self.errors)} skipped entries)"
        first, last = self.epochs.min().utc.iso[:19], self.epochs.max().utc.iso[:19]
        shown = ", ".join(repr(n) for n in self.names[:2]) + (", ..." if len(self) > 2 else "")
        skipped = (f"{len(self.errors)} skipped entries (first: line {self.errors[0][0]})"
                   if self.errors else "0 skipped entries")
        return (f"TLECatalog({len(self)} objects [{shown}], epochs {first} .. {last} UTC, "
                f"TEME km, km/s at each object's epoch, {skipped})")

    def states_at(self, epoch):
        """Every object propagated with SGP4 to one common ``epoch``.

        Parameters
        ----------
        epoch : astropy.time.Time or str
            A single time (any scale; converted to UTC; a str is read as UTC).

        Returns
        -------
        r, v : ndarray, (N, 3)
            TEME positions (km) and velocities (km/s) at ``epoch``; NaN rows
            where SGP4 failed.
        ok : ndarray of bool, (N,)
            True where SGP4 gave a state (False: SGP4 error code, e.g. the
            object decayed or its elements diverged, that far from its epoch).
        """
        epoch = single_epoch(epoch)
        if not len(self):
            return np.empty((0, 3)), np.empty((0, 3)), np.empty(0, dtype=bool)
        jd1, jd2 = np.array([epoch.jd1]), np.array([epoch.jd2])
        codes, r, v = SatrecArray(self.satellites).sgp4(jd1, jd2)
        r, v = np.ascontiguousarray(r[:, 0]), np.ascontiguousarray(v[:, 0])
        ok = (codes[:, 0] == 0) & np.isfinite(r).all(axis=1) & np.isfinite(v).all(axis=1)
        r[~ok] = np.nan
        v[~ok] = np.nan
        return r, v, ok


def from_tle(path_or_lines, strict=False):
    """Read a two-line element catalog into a `TLECatalog`.

    Parameters
    ----------
    path_or_lines : str, os.PathLike or iterable of str
        A path to a catalog file, the text of one (a str holding newlines), or
        its lines. Each object is a name line followed by lines 1 and 2
        (CelesTrak style; a Space-Track ``0 `` prefix is dropped), or just
        lines 1 and 2, the object then being named by its catalog number.
        Blank lines are ignored.
    strict : bool
        Raise on the first malformed entry instead of skipping it.

    Returns
    -------
    TLECatalog
        Names, catalog numbers, epochs (UTC) and the TEME state of every
        object at its own epoch (``r`` km, ``v`` km/s, from ``sgp4``), plus
        ``errors``: ``(line_number, message)`` for each entry skipped.

    Raises
    ------
    OSError
        The path cannot be read (the message names it).
    ValueError
        The catalog holds no valid entry; or, with ``strict``, an entry is
        malformed: ``"line N: <what is wrong>"``.

    Notes
    -----
    Every entry is checked: line lengths (69), line numbers, that lines 1
    and 2 are ASCII (another script's digit, e.g. Arabic-Indic or fullwidth,
    is a bad field, not a digit), the modulo-10 checksum of each line
    (`tle_checksum()`), blanks between fields, that each numeric field
    parses and is in range, that both lines carry the same catalog number,
    and that SGP4 gives a finite state at the epoch (error code 0). Without
    ``strict``, a bad entry is skipped and recorded in ``errors`` under the
    1-based line number of its offending line, and one `TLEWarning` says how
    many were skipped. A UTF-8 byte-order mark at the start is dropped.
    Catalog numbers carried by more than one entry are kept, with a
    `TLEWarning` naming them and their lines.
    """
    lines = [(number, text.rstrip()) for number, text in
             enumerate(_read_lines(path_or_lines), start=1) if text.strip()]
    names, satellites, r, v, numbers, errors = [], [], [], [], [], []
    for item in _parse(lines):
        if item[0] == "error":
            problem = item[1:]
        else:
            _, name, (number1, line1), (number2, line2) = item
            problem = None
            for number, line, which in ((number1, line1, 1), (number2, line2, 2)):
                message = _check_line(line, which)
                if message:
                    problem = (number, message)
                    break
            if problem is None and line1[2:7] != line2[2:7]:
                problem = (number2, f"catalog number {line2[2:7].strip()!r} of line 2 differs "
                                    f"from {line1[2:7].strip()!r} of line 1 on line {number1}")
            if problem is None:
                try:
                    sat = Satrec.twoline2rv(line1, line2)
                    code, ri, vi = sat.sgp4(sat.jdsatepoch, sat.jdsatepochF)
                except (ValueError, IndexError, RuntimeError) as exc:
                    problem = (number1, f"sgp4 cannot read the entry: {exc}")
                else:
                    if code != 0 or sat.error != 0:
                        problem = (number1, f"SGP4 error code {code or sat.error} at the "
                                            "epoch (elements it cannot propagate)")
                    elif not np.all(np.isfinite(ri + vi)):
                        problem = (number1, "SGP4 gives a non-finite state at the epoch")
        if problem is not None:
            if strict:
                raise ValueError(f"line {problem[0]}: {problem[1]}")
            errors.append(problem)
            continue
        if name is None:
            field = line1[2:7].strip()
            name = field if field[0].isalpha() else str(int(field))
        names.append(name)
        satellites.append(sat)
        r.append(ri)
        v.append(vi)
        numbers.append(number1)
    if not satellites:
        detail = (f" ({len(errors)} malformed; first: line {errors[0][0]}: {errors[0][1]})"
                  if errors else "")
        raise ValueError(f"path_or_lines: no valid TLE entry found{detail}")
    if errors:
        warnings.warn(f"skipped {len(errors)} malformed TLE entries of {len(errors) + len(names)} "
                      f"(first: line {errors[0][0]}: {errors[0][1]}); see .errors",
                      TLEWarning, stacklevel=2)
    duplicates = _duplicates(satellites, numbers)
    if duplicates:
        warnings.warn(duplicates, TLEWarning, stacklevel=2)
    return TLECatalog(names, satellites, r, v, numbers, errors)
