"""What the CCSDS message readers (`hapsira_cowell.inputs.cdm`, `hapsira_cowell.inputs.omm`)
share: the ``ccsds-ndm`` package (the ``cdm`` extra, GPL-3.0, imported only when a message
is read), where each message comes from, its values in km, and errors naming both."""

import os
import re

import numpy as np

#: The extra that installs ccsds-ndm
EXTRA = "cdm"
#: Units ccsds-ndm may carry, as factors to km, km/s, km^2, km^2/s, km^2/s^2
_TO_KM = {"km": 1.0, "m": 1e-3, "km/s": 1.0, "m/s": 1e-3, "km**2": 1.0, "m**2": 1e-6,
          "km**2/s": 1.0, "m**2/s": 1e-6, "km**2/s**2": 1.0, "m**2/s**2": 1e-6}
_DAY_OF_YEAR = re.compile(r"^(\d{4})-(\d{3})T(.*)$")


def library():
    """ccsds-ndm's reader and its CDM, OMM and combined-NDM types, or an ImportError
    naming the extra."""
    try:
        from ccsds_ndm.models.ndmxml4.ndmxml_4_0_0_cdm_1_0 import CdmType
        from ccsds_ndm.models.ndmxml4.ndmxml_4_0_0_ndm_4_0 import NdmType
        from ccsds_ndm.models.ndmxml4.ndmxml_4_0_0_omm_3_0 import OmmType
        from ccsds_ndm.ndm_io import NdmIo
    except ImportError as error:
        raise ImportError(f"reading CCSDS CDMs and OMMs needs the ccsds-ndm package, which "
                          f"is not installed: pip install 'hapsira-cowell[{EXTRA}]'") from error
    return NdmIo, {"CDM": CdmType, "OMM": OmmType}, NdmType


def sources(paths_or_texts):
    """``[(label, text)]``: each path read (the label its path), each text as it is (the
    label ``text <i>``, 1-based). One path or text, or a sequence of them."""
    if isinstance(paths_or_texts, (str, bytes, os.PathLike)):
        paths_or_texts = [paths_or_texts]
    found = []
    for index, item in enumerate(paths_or_texts, start=1):
        if isinstance(item, bytes):
            item = item.decode("utf-8", errors="replace")
        if isinstance(item, str) and ("\n" in item or item.lstrip().startswith(("CCSDS_", "<"))):
            found.append((f"text {index}", item))
            continue
        if not isinstance(item, (str, os.PathLike)):
            raise TypeError(f"paths_or_texts: item {index} is a {type(item).__name__}, "
                            "expected a path or a message's text")
        try:
            with open(item, encoding="utf-8-sig", errors="replace") as source:
                found.append((os.fspath(item), source.read()))
        except OSError as error:
            raise type(error)(error.errno, f"cannot read the message: {error.strerror}",
                              os.fspath(item)) from None
    return found


def messages(paths_or_texts, kind):
    """``[(label, message)]``: every ``kind`` (``CDM`` or ``OMM``) message of the sources,
    parsed by ccsds-ndm, in order; a combined NDM (XML ``<ndm>``) and concatenated KVN
    messages give each of theirs (labelled ``<source> #<i>``). ValueError naming the
    source for anything else."""
    NdmIo, types, NdmType = library()
    io = NdmIo()
    found = []
    for label, text in sources(paths_or_texts):
        parts = [text]
        if text.lstrip().startswith("CCSDS_"):  # KVN messages, one after another
            parts = [part for part in re.split(rf"(?m)^(?=\s*CCSDS_{kind}_VERS)", text)
                     if part.strip()]
        trees = []
        for number, part in enumerate(parts, start=1):
            where = label if len(parts) == 1 else f"{label} #{number}"
            try:
                tree = io.from_string(part)
            except Exception as error:  # ccsds-ndm raises ValueError, TypeError, ParserError
                raise ValueError(f"{where}: cannot be read as a CCSDS {kind}: "
                                 f"{_reason(error)}") from None
            if isinstance(tree, NdmType):
                inside = getattr(tree, kind.lower())
                if not inside:
                    raise ValueError(f"{where}: a combined NDM without a {kind}")
                trees += [(f"{where} #{i}", t) for i, t in enumerate(inside, start=1)]
            elif isinstance(tree, types[kind]):
                trees.append((where, tree))
            else:
                other = type(tree).__name__.removesuffix("Type").upper()
                raise ValueError(f"{where}: expected a CCSDS {kind}, got "
                                 f"{'an' if other[:1] in 'AEIOU' else 'a'} {other}")
        found += trees
    return found


def _reason(error):
    """ccsds-ndm's error in the message's words: its keyword names, not Python's."""
    text = str(error)
    missing = re.search(r"missing \d+ required keyword-only arguments?: (.*)$", text)
    if isinstance(error, TypeError) and missing:
        names = re.findall(r"'(\w+)'", missing.group(1))
        return "missing " + ", ".join(name.upper() for name in names)
    return text


def required(value, where, field):
    """``value`` unless it is None (a mandatory keyword the file lacks)."""
    if value is None:
        raise ValueError(f"{where}: {field} is missing")
    return value


def number(item, where, field, unit=None):
    """A ccsds-ndm number (a float, or a value with ``units``) in km units: ``unit`` is the
    standard's unit, used when the file gives none (a unit other than a length's, such
    as ``rev/day``, is taken as it is when it is the standard's)."""
    item = required(item, where, field)
    value = getattr(item, "value", item)
    units = getattr(item, "units", None)
    units = getattr(units, "value", units) or unit
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: {field} = {value!r} is not a number") from None
    if not np.isfinite(value):
        raise ValueError(f"{where}: {field} = {value} is not a finite number")
    if units is None or (units not in _TO_KM and units.lower() == str(unit).lower()):
        return value
    if units not in _TO_KM:
        raise ValueError(f"{where}: {field} is in {units!r}, expected one of {sorted(_TO_KM)}")
    return value * _TO_KM[units]


def covariance(matrix, axes, length, where):
    """The symmetric 6 x 6 covariance of a message's ``matrix`` (its lower triangle, the
    keywords ``C<axis>_<axis>`` of ``axes``, position axes first) in km units: ``length``
    is the standard's length unit (``"m"`` or ``"km"``), used where the file gives none."""
    P = np.empty((6, 6))
    for a in range(6):
        for b in range(a + 1):
            name = f"c{axes[a]}_{axes[b]}"
            unit = (f"{length}**2", f"{length}**2/s", f"{length}**2/s**2")[(a >= 3) + (b >= 3)]
            P[a, b] = P[b, a] = number(getattr(matrix, name, None), where, name.upper(), unit)
    return P


def utc(text, where, field):
    """A CCSDS time (``YYYY-MM-DDThh:mm:ss[.d][Z]`` or ``YYYY-DDDThh:mm:ss[.d][Z]``), UTC,
    as an astropy Time."""
    from astropy.time import Time

    text = str(required(text, where, field)).strip().removesuffix("Z")
    day_of_year = _DAY_OF_YEAR.match(text)
    try:
        if day_of_year:
            year, day, rest = day_of_year.groups()
            return Time(f"{year}:{day}:{rest}", format="yday", scale="utc")
        return Time(text, format="isot", scale="utc")
    except ValueError:
        raise ValueError(f"{where}: {field} = {text!r} is not a CCSDS time "
                         "(YYYY-MM-DDThh:mm:ss or YYYY-DDDThh:mm:ss)") from None


def text(value):
    """A keyword's text ('' for none; an enumeration's value)."""
    return "" if value is None else str(getattr(value, "value", value))
