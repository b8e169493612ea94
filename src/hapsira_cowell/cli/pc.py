"""``hapsira-cowell pc``: the probability of collision of the approaches of CCSDS CDMs,
ranked.

The CDMs (files, or folders of ``.cdm``, ``.kvn``, ``.xml`` and ``.txt`` files; KVN or
XML) are read with `hapsira_cowell.inputs.cdm.read_cdms` (ccsds-ndm, the ``cdm`` extra)
and each approach's probability comes from `hapsira_cowell.conjunctions.probability` on
the states and covariances at the TCA that the CDM gives. The hard-body radius is
``--hbr`` for every CDM where given, else each CDM's own (CARA's ``COMMENT HBR = 15
[m]``; a CDM has no keyword for it); a CDM without one needs ``--hbr``. The table, ranked
by Pc (highest first; NaN last), is printed and with ``--out`` written as CSV.
"""

import csv
import os
import warnings

import numpy as np

from .inputs import UsageError

__all__ = ["SUFFIXES", "SHOWN", "cdm_paths", "compute", "rank", "table_lines", "write_table"]

#: The files of a folder that are read as CDMs
SUFFIXES = (".cdm", ".kvn", ".xml", ".txt")
#: Rows of the printed table at most (all of them go to ``--out``)
SHOWN = 20


def cdm_paths(items):
    """The files of ``items`` (files, or folders whose `SUFFIXES` files are taken, sorted
    by name); `UsageError` naming the item that is neither or a folder without any."""
    paths = []
    for item in items:
        if os.path.isdir(item):
            found = sorted(os.path.join(item, name) for name in os.listdir(item)
                           if name.lower().endswith(SUFFIXES)
                           and os.path.isfile(os.path.join(item, name)))
            if not found:
                raise UsageError(f"CDM {item!r}: a folder without CDM files "
                                 f"({', '.join(SUFFIXES)})")
            paths += found
        elif os.path.isfile(item):
            paths.append(item)
        else:
            raise UsageError(f"CDM {item!r}: no such file or folder")
    return paths


def read(paths):
    """`read_cdms` of ``paths``, its errors as `UsageError` (they name the file and the
    keyword; without ccsds-ndm, the extra)."""
    try:
        from ..inputs.cdm import read_cdms

        return read_cdms(paths)
    except ImportError:
        raise UsageError("pc needs the ccsds-ndm package, which is not installed (pip "
                         "install 'hapsira-cowell[cdm]')") from None
    except (OSError, ValueError) as error:
        raise UsageError(str(error)) from None


def hard_body_radii(cdms, hbr):
    """The radius of each CDM (km) and where it comes from: ``hbr`` (``--hbr``, km) for
    all, else each CDM's own (`ConjunctionMessages.hbr`); `UsageError` naming the CDMs
    without one."""
    if hbr is not None:
        return np.full(len(cdms), hbr), ["--hbr"] * len(cdms)
    missing = [source for source, x in zip(cdms.sources, cdms.hbr) if np.isnan(x)]
    if missing:
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        raise UsageError(f"--hbr: needed: {', '.join(missing[:3])}{more} give no hard-body "
                         "radius (CCSDS CDMs have no keyword for it; CARA's give one in a "
                         "comment, COMMENT HBR = 20 [m])")
    return np.asarray(cdms.hbr, dtype=float), ["CDM"] * len(cdms)


def compute(cdms, hbr, method, samples=None, seed=None, hbr_shape="circle"):
    """Each CDM's `Probability` (``full=True``; ``hbr_shape`` kept on it), the warnings of
    `probability` left to its flags."""
    from ..propagation.probability import CovarianceRepairedWarning, LongEncounterWarning

    sampling = dict(samples=samples, seed=seed) if method == "monte_carlo" else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CovarianceRepairedWarning)
        warnings.simplefilter("ignore", LongEncounterWarning)
        try:
            result = cdms.probability(hbr, method, full=True, hbr_shape=hbr_shape,
                                      **sampling)
            result.hbr_shape = hbr_shape
            return result
        except ValueError as error:  # e.g. two objects of one CDM with equal velocities
            raise UsageError(str(error)) from None


def rank(pc):
    """Row order by probability, highest first, NaN last (ties in the files' order)."""
    return np.argsort(np.where(np.isnan(pc), -1.0, -pc), kind="stable")


def _flags(pc, row):
    return " ".join(name for name, flag in (("repaired", pc.repaired[row]),
                                            ("long-encounter", pc.long_encounter[row]))
                    if flag)


def _rows(cdms, pc, hbr, where):
    """The table's rows in rank order, as dicts of text (the CSV's columns)."""
    tca = cdms.tca.utc
    tca.precision = 3
    utc = tca.isot
    sampled = hasattr(pc, "interval")
    out = []
    for place, k in enumerate(rank(pc.pc), 1):
        row = dict(rank=str(place), pc=repr(float(pc.pc[k])), method=pc.method,
                   hbr_m=f"{hbr[k] * 1e3:g}", hbr_from=where[k],
                   hbr_shape=getattr(pc, "hbr_shape", "circle"),
                   cdm_pc="" if np.isnan(cdms.pc[k]) else repr(float(cdms.pc[k])),
                   cdm_pc_method=cdms.pc_method[k], miss_m=f"{cdms.miss[k] * 1e3:.3f}",
                   tca_utc=utc[k], number_1=cdms.numbers[k, 0], name_1=cdms.names[k, 0],
                   number_2=cdms.numbers[k, 1], name_2=cdms.names[k, 1],
                   pc_flags=_flags(pc, k), source=cdms.sources[k])
        if sampled:
            row["pc_low"], row["pc_high"] = (repr(float(x)) for x in pc.interval[k])
        out.append(row)
    return out


def write_table(path, cdms, pc, hbr, where):
    """The ranked table as CSV: ``rank, pc, method, hbr_m, hbr_from (--hbr or CDM),
    hbr_shape, cdm_pc,
    cdm_pc_method (the file's own), miss_m, tca_utc, number_1, name_1, number_2, name_2,
    pc_flags, source`` and, for Monte Carlo, ``pc_low, pc_high`` (95%)."""
    rows = _rows(cdms, pc, hbr, where)
    columns = ["rank", "pc", "method", "hbr_m", "hbr_from", "hbr_shape", "cdm_pc",
               "cdm_pc_method",
               "miss_m", "tca_utc", "number_1", "name_1", "number_2", "name_2", "pc_flags",
               "source"] + (["pc_low", "pc_high"] if hasattr(pc, "interval") else [])
    with open(path, "w", newline="") as handle:
        out = csv.DictWriter(handle, columns)
        out.writeheader()
        out.writerows(rows)


def table_lines(cdms, pc, hbr, where, shown=SHOWN):
    """The printed table: a heading, then one line per CDM in rank order (at most
    ``shown``): rank, our Pc (a Monte Carlo one with its 95% interval), the file's own and
    its method, the miss (m), the TCA (UTC), the objects (catalogue number and name) and
    the flags."""
    rows = _rows(cdms, pc, hbr, where)
    radii = sorted({row["hbr_m"] for row in rows}, key=float)
    radius = (f"HBR {radii[0]} m" if len(radii) == 1 else
              f"HBR {radii[0]} to {radii[-1]} m")
    radius += " (--hbr)" if where and where[0] == "--hbr" else " (the CDMs' own)"
    shape = getattr(pc, "hbr_shape", "circle")
    method = pc.method if shape == "circle" else f"{pc.method} ({shape.replace('_', ' ')})"
    head = f"{len(rows)} CDM{'s' if len(rows) != 1 else ''}, Pc by {method}, {radius}"
    if hasattr(pc, "interval"):
        head += f", {pc.samples} samples each, seed {pc.seed}; 95% intervals"
    lines = [head + ":",
             f"{'#':>3} {'Pc':>9} {'CDM Pc':>9} {'CDM method':<12} {'miss m':>10}  "
             f"{'TCA (UTC)':<23}  objects"]
    for row in rows[:shown]:
        own = f"{float(row['cdm_pc']):9.3g}" if row["cdm_pc"] else f"{'-':>9}"
        interval = (f" ({float(row['pc_low']):.3g} .. {float(row['pc_high']):.3g})"
                    if "pc_low" in row else "")
        flags = f" [{row['pc_flags']}]" if row["pc_flags"] else ""
        lines.append(f"{row['rank']:>3} {float(row['pc']):9.3g} {own} "
                     f"{row['cdm_pc_method'] or '-':<12} {row['miss_m']:>10}  "
                     f"{row['tca_utc']:<23}  {row['number_1']} {row['name_1']} / "
                     f"{row['number_2']} {row['name_2']}{interval}{flags}")
    if len(rows) > shown:
        lines.append(f"... and {len(rows) - shown} more (all of them with --out)")
    for name, flag, what in (("repaired", pc.repaired, "projected covariance repaired by "
                              "eigenvalue clipping"),
                             ("long-encounter", pc.long_encounter, "short-encounter "
                              "assumption doubtful")):
        if flag.any():
            lines.append(f"warning: {int(flag.sum())} CDM(s) flagged {name} ({what})")
    return lines
