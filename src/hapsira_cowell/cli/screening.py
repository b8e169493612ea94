"""``hapsira-cowell screen``: conjunction screening of a catalog to CSV, a histogram and
CCSDS CDMs.

The work is `hapsira_cowell.conjunctions.screen`; this module reads the
catalog, drops the objects SGP4 could not place, writes one CSV line per
approach (with the objects' names and the TCA in UTC), and on request a
miss-distance histogram (matplotlib; with ``--pc`` beside it the probability against the
miss distance), each approach's probability of collision
(``--pc``: `hapsira_cowell.conjunctions.probability` on the covariance ``--sigma``
gives, propagated to the TCA, and the hard-body radius ``--hbr``) and one Conjunction
Data Message per approach (`hapsira_cowell.outputs.cdm`).
Objects that repeat an earlier object's state (one entry given twice) are screened
once, and the summary names them (`identical_line`).
"""

import csv
import math
import os
import re
import warnings

import numpy as np

from .inputs import UsageError

__all__ = ["DEFAULT_HBR", "check_cdm_catalog", "check_cdm_options", "describe",
           "encounters_of", "identical_line", "miss_histogram", "object_label",
           "omm_covariances", "parse_distance", "parse_sigma", "pc_filter", "probabilities",
           "run_screen", "write_cdm_files", "write_csv"]

#: ``--hbr``'s default, km: the combined hard-body radius of the validation cases of NASA
#: CARA's Pc2D_Foster (20 m); not a property of any catalog's objects.
DEFAULT_HBR = 0.020
#: Approaches the summary ranks by probability
RANKED = 5

_DISTANCE = re.compile(r"^\s*([+-]?)\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)"
                       r"\s*([A-Za-z]*)\s*$")
_DISTANCE_UNITS = {"km": 1.0, "m": 1e-3}


def parse_distance(text, name="--threshold"):
    """Kilometres in ``text``: a number and a unit, ``5km`` or ``500m``.

    A bare number is refused, as a duration without a unit is (`parse_duration`):
    ``5`` could be km or m. Anything else raises `UsageError` naming ``name``.
    """
    match = _DISTANCE.match(str(text))
    hint = "expected a positive number and a unit (km or m), e.g. 5km or 500m"
    if not match:
        raise UsageError(f"{name}: cannot read {text!r} as a distance; {hint}")
    unit = match.group(3).lower()
    if unit not in _DISTANCE_UNITS:
        what = "has no unit" if not unit else f"has the unknown unit {match.group(3)!r}"
        raise UsageError(f"{name}: {text!r} {what}; {hint}")
    value = float(match.group(1) + match.group(2)) * _DISTANCE_UNITS[unit]
    if not math.isfinite(value):
        raise UsageError(f"{name}: {text!r} is not a finite distance; {hint}")
    if not value > 0:
        raise UsageError(f"{name}: {text!r} must be positive; {hint}")
    return value


def _flags(pc, row):
    return " ".join(name for name, flag in (("repaired", pc.repaired[row]),
                                            ("long-encounter", pc.long_encounter[row]))
                    if flag)


def write_csv(path, table, names, epoch, pc=None):
    """One line per approach: indices and names, TCA (s after the epoch, and UTC when
    the epoch is known), miss (km), relative speed (km/s); with ``pc`` (a
    `hapsira_cowell.conjunctions.Probability`) its probability and flags
    (``repaired``, ``long-encounter``, separated by a space); a Monte Carlo one adds
    ``pc_low`` and ``pc_high``, its 95% interval."""
    interval = pc is not None and hasattr(pc, "interval")
    with open(path, "w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(["i", "j", "name_i", "name_j", "tca_s", "tca_utc", "miss_km",
                      "speed_km_s"] + ([] if pc is None else ["pc", "pc_flags"])
                     + (["pc_low", "pc_high"] if interval else []))
        utc = _utc(table.tca, epoch)
        for row in range(len(table)):
            i, j = int(table.i[row]), int(table.j[row])
            extra = [] if pc is None else [repr(float(pc.pc[row])), _flags(pc, row)]
            if interval:
                extra += [repr(float(x)) for x in pc.interval[row]]
            out.writerow([i, j, names[i], names[j], repr(float(table.tca[row])), utc[row],
                          repr(float(table.miss[row])), repr(float(table.speed[row]))]
                         + extra)


def _utc(seconds, epoch):
    if epoch is None or len(seconds) == 0:
        return [""] * len(seconds)
    from astropy import units as u

    return list((epoch + np.asarray(seconds) * u.s).utc.isot)


def miss_histogram(path, table, threshold, title=None, pc=None, pc_above=None):
    """A PNG histogram of the miss distances (km), bins of threshold / 20; with ``pc``
    (a `hapsira_cowell.conjunctions.Probability` of the table's approaches) beside it
    each approach's probability against its miss distance, log scale
    (`plots.draw_probability_vs_miss`; ``pc_above``: ``--pc-above``, a dashed line)."""
    from .plots import _pyplot, _save, draw_probability_vs_miss

    plt = _pyplot()
    from matplotlib.ticker import MaxNLocator

    if pc is None:
        fig, ax = plt.subplots(figsize=(7, 4))
    else:
        fig, (ax, right) = plt.subplots(1, 2, figsize=(13, 4.5), layout="constrained")
        draw_probability_vs_miss(right, table.miss, pc.pc, pc.repaired | pc.long_encounter,
                                 pc_above, pc.method)
        right.set_xlim(0.0, threshold)
        right.set_title(f"probability of collision ({pc.method}, HBR {pc.hbr * 1e3:g} m)"
                        if hasattr(pc, "hbr") else "probability of collision")
    ax.hist(table.miss, bins=np.linspace(0.0, threshold, 21), color="tab:blue",
            edgecolor="white")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # counts: no 0.5 approaches
    ax.set_xlabel("miss distance (km)")
    ax.set_ylabel("approaches")
    ax.set_title(title or f"{len(table)} approaches below {threshold:g} km")
    return _save(fig, path)


def run_screen(catalog, days, threshold, dt=None):
    """Screen the catalog's objects with a finite state for ``days`` days; returns the
    table with indices into the catalog's rows and the stats of `screen`, whose
    ``identical`` (objects screened as an earlier one: `screen`'s warning, told by
    `describe` instead) holds catalog rows too."""
    from ..propagation.conjunctions import ConjunctionTable, IdenticalObjectsWarning, screen
    from ..constants import K_EARTH

    rows = np.flatnonzero(catalog.initial_ok)
    if len(rows) < 2:
        raise UsageError("catalog: fewer than two objects with a state to screen")
    stats = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IdenticalObjectsWarning)
        table = screen(K_EARTH, catalog.r0[rows], catalog.v0[rows], (0.0, days * 86400.0),
                       threshold, dt=dt, stats=stats)
    table = ConjunctionTable(rows[table.i], rows[table.j], table.tca, table.miss, table.speed)
    stats["identical"] = rows[stats["identical"]]
    return table, stats


def object_label(catalog, i):
    """How the summary names row ``i`` of ``catalog``: its name and a TLE's catalog
    number (``IRIDIUM 33 DEB (#33772)``), or a CSV's row (``A (row 0)``, as the CSV's
    ``i``, ``j``)."""
    where = f"#{catalog.numbers[i]}" if catalog.kind in ("TLE", "OMM") else f"row {i}"
    return f"{catalog.names[i]} ({where})"


def identical_line(identical, catalog=None, shown=5):
    """The summary's warning on the objects screened as an earlier one: ``identical``
    ``(M, 2)`` catalog rows ``(row, first row)`` (`run_screen`), each group named by its
    first object (`object_label`) with the rows of the CSV's ``i``, ``j``."""
    groups = {}
    for row, first in np.asarray(identical).reshape(-1, 2):
        groups.setdefault(int(first), []).append(int(row))
    listed = []
    for first, rows in list(groups.items())[:shown]:
        label = f"{object_label(catalog, first)}: " if catalog is not None else ""
        listed.append(f"{label}{'rows' if len(rows) > 1 else 'row'} "
                      f"{', '.join(map(str, rows))} = row {first}")
    more = f"; and {len(groups) - shown} more" if len(groups) > shown else ""
    return (f"warning: {len(identical)} object(s) repeat an earlier object's state (one "
            f"entry given twice?), screened once, as the first, and reported under its row "
            f"only: {'; '.join(listed)}{more}")


def _pair(table, k, catalog):
    i, j = int(table.i[k]), int(table.j[k])
    return (f"{object_label(catalog, i)} and {object_label(catalog, j)}"
            if catalog is not None else f"objects {i} and {j}")


def ranked_lines(table, pc, catalog=None, shown=RANKED):
    """The summary's approaches of highest probability, highest first (NaN last)."""
    order = np.argsort(np.where(np.isnan(pc.pc), -1.0, -pc.pc), kind="stable")[:shown]
    shape = getattr(pc, "hbr_shape", "circle")
    region = "" if shape == "circle" else f" {shape.replace('_', ' ')}"
    lines = [f"highest Pc ({pc.method}, HBR {pc.hbr * 1e3:g} m{region}):"]
    if hasattr(pc, "interval"):
        lines[0] = (f"highest Pc ({pc.method}, {getattr(pc, 'per_approach', pc.samples)} "
                    f"samples per approach, seed "
                    f"{pc.seed}, HBR {pc.hbr * 1e3:g} m; 95% intervals):")
    utc = _utc(table.tca[order], getattr(catalog, "epoch", None))
    for rank, (k, when) in enumerate(zip(order, utc), 1):
        flags = _flags(pc, k)
        when = f"{when} UTC" if when else f"{table.tca[k]:.1f} s"
        interval = (f" ({pc.interval[k, 0]:.3g} .. {pc.interval[k, 1]:.3g})"
                    if hasattr(pc, "interval") else "")
        lines.append(f"  {rank}. Pc {pc.pc[k]:.3g}{interval}, {table.miss[k]:.3f} km at {when}: "
                     f"{_pair(table, k, catalog)}" + (f" [{flags}]" if flags else ""))
    for name, flag, what in (("repaired", pc.repaired, "projected covariance repaired by "
                              "eigenvalue clipping"),
                             ("long-encounter", pc.long_encounter, "short-encounter "
                              "assumption doubtful" + (
                                  "; monte_carlo_epoch does not make it"
                                  if pc.method == "monte_carlo_epoch" else ""))):
        if flag.any():
            lines.append(f"warning: {int(flag.sum())} approach(es) flagged {name} in the "
                         f"CSV's pc_flags ({what})")
    return lines


def describe(table, stats, seconds, catalog=None, pc=None):
    """Summary lines printed by the command line; with ``catalog``, the closest pair
    named by its objects' names and numbers (`object_label`), else by row; objects
    screened as an earlier one (`identical_line`); with ``pc``, the approaches of highest
    probability, ranked (`ranked_lines`)."""
    lines = [(f"{len(table)} approaches; {stats['windows']} windows of {stats['dt']:.1f} s, "
              f"{stats['grid_pairs']} grid pairs, {stats['candidates']} refined")]
    if len(stats.get("identical", ())):
        lines.append(identical_line(stats["identical"], catalog))
    if len(table):
        k = int(np.argmin(table.miss))
        i, j = int(table.i[k]), int(table.j[k])
        pair = (f"{object_label(catalog, i)} and {object_label(catalog, j)}"
                if catalog is not None else f"objects {i} and {j}")
        utc = _utc(table.tca[k:k + 1], getattr(catalog, "epoch", None))[0]
        when = f" at {utc} UTC" if utc else f" at {table.tca[k]:.1f} s"
        lines.append(f"closest: {pair}, {table.miss[k]:.3f} km{when}")
    if pc is not None:
        if "pc_above" in stats:
            lines.append(f"{len(table)} of {stats['pc_screened']} approaches with Pc >= "
                         f"{stats['pc_above']:g}")
        if len(table):
            lines.extend(ranked_lines(table, pc, catalog))
    lines.append(f"propagation {stats['propagate_s']:.2f} s, broad phase {stats['broad_s']:.2f} s, "
                 f"refinement {stats['narrow_s']:.2f} s"
                 + (f", Pc {stats['pc_s']:.2f} s" if "pc_s" in stats else "")
                 + (f", CDMs {stats['cdm_s']:.2f} s" if "cdm_s" in stats else "")
                 + f"; {seconds:.1f} s in all")
    return lines


def check_output(out, name="--out"):
    """``--out`` (or ``--plot``) checked before the run: its folder exists."""
    if out is None:
        return out
    folder = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(folder):
        raise UsageError(f"{name} {out!r}: the folder {folder!r} does not exist")
    return out


def parse_sigma(text, name="--sigma"):
    """Standard deviations ``(6,)`` in km and km/s from ``R,T,N`` (m) or
    ``R,T,N,RDOT,TDOT,NDOT`` (m and m/s); velocity 0 when left out."""
    parts = [x.strip() for x in str(text).split(",")]
    try:
        values = [float(x) for x in parts]
    except ValueError:
        raise UsageError(f"{name}: cannot read {text!r}; expected 3 or 6 numbers separated "
                         "by commas (R,T,N in m, then RDOT,TDOT,NDOT in m/s), e.g. "
                         "100,1000,100") from None
    if len(values) not in (3, 6):
        raise UsageError(f"{name}: expected 3 or 6 numbers (R,T,N in m[, RDOT,TDOT,NDOT "
                         f"in m/s]), got {len(values)}")
    if not all(math.isfinite(x) and x >= 0 for x in values) or not any(values[:3]):
        raise UsageError(f"{name}: expected finite standard deviations >= 0, not all "
                         f"positions 0, got {text!r}")
    return np.array(values + [0.0] * (6 - len(values))) * 1e-3


def parse_probability(text, name="--pc-above"):
    """A probability from ``text``: a number between 0 and 1."""
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{name}: cannot read {text!r} as a probability; expected a number "
                         "between 0 and 1, e.g. 1e-7") from None
    if not 0.0 <= value <= 1.0:
        raise UsageError(f"{name}: {text!r} is not between 0 and 1")
    return value


def parse_count(text, name="--pc-samples"):
    """A whole number >= 1 from ``text`` (``1000000``, ``1e6``, ``1_000_000``)."""
    try:
        value = float(str(text).replace("_", ""))
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 1 and value == int(value)):
        raise UsageError(f"{name}: {text!r} is not a whole number >= 1; expected e.g. "
                         "100000 or 1e6")
    return int(value)


def parse_seed(text, name="--pc-seed"):
    """A seed of numpy's random numbers: a whole number >= 0."""
    try:
        value = int(str(text).strip())
    except ValueError:
        value = -1
    if value < 0:
        raise UsageError(f"{name}: {text!r} is not a whole number >= 0")
    return value


def fresh_seed():
    """A seed for a run not given one, from fresh entropy (said in the summary, so that
    the run can be repeated)."""
    return int(np.random.SeedSequence().entropy % 2 ** 63)


#: The ``--pc-method``s that sample, with ``--pc-samples`` and ``--pc-seed``
SAMPLED = ("monte_carlo", "monte_carlo_epoch")


def check_pc_options(args):
    """``--pc``'s options checked before the catalog is read: ``--pc`` needs ``--sigma``
    (parsed here) unless the catalog is an OMM file (``args.omm``: its own
    covariances); ``--hbr``, ``--pc-method`` and ``--pc-above`` need ``--pc``;
    ``--pc-samples`` and ``--pc-seed`` need ``--pc-method monte_carlo`` or
    ``monte_carlo_epoch`` (without ``--pc-seed``, a fresh seed is drawn here, for the
    summary to print)."""
    sampling = (("--pc-samples", args.pc_samples), ("--pc-seed", args.pc_seed))
    if not args.pc:
        for flag, value in (("--hbr", args.hbr), ("--pc-above", args.pc_above),
                            ("--pc-method", None if args.pc_method == "foster"
                             else args.pc_method),
                            ("--hbr-shape", None if args.hbr_shape == "circle"
                             else args.hbr_shape)) + sampling:
            if value is not None:
                raise UsageError(f"{flag}: only used with --pc")
        return
    if args.hbr_shape != "circle" and args.pc_method != "foster":
        raise UsageError(f"--hbr-shape {args.hbr_shape}: integrated by --pc-method foster "
                         f"only, got --pc-method {args.pc_method}")
    if args.pc_method not in SAMPLED:
        for flag, value in sampling:
            if value is not None:
                raise UsageError(f"{flag}: only used with --pc-method monte_carlo or "
                                 f"monte_carlo_epoch, got --pc-method {args.pc_method}")
    else:
        from ..propagation.monte_carlo import SAMPLES
        from ..propagation.probability import EPOCH_SAMPLES

        default = EPOCH_SAMPLES if args.pc_method == "monte_carlo_epoch" else SAMPLES
        args.pc_samples = (default if args.pc_samples is None
                           else parse_count(args.pc_samples, "--pc-samples"))
        if args.pc_method == "monte_carlo_epoch" and args.pc_samples < 2:
            raise UsageError(f"--pc-samples: {args.pc_samples} clone pairs; "
                             "monte_carlo_epoch needs at least 2")
        args.pc_seed = (fresh_seed() if args.pc_seed is None else parse_seed(args.pc_seed, "--pc-seed"))
    if args.sigma is None and not getattr(args, "omm", False):
        raise UsageError("--pc: the probability needs each object's covariance and a TLE "
                         "has none; give one with --sigma R,T,N[,RDOT,TDOT,NDOT] (m, m/s)")
    args.hbr = DEFAULT_HBR if args.hbr is None else parse_distance(args.hbr, "--hbr")
    if args.pc_above is not None:
        args.pc_above = parse_probability(args.pc_above)
    if args.cdm is not None and args.pc_method == "max":
        raise UsageError("--pc-method max: the largest probability over the covariance's "
                         "size is not a CDM's COLLISION_PROBABILITY; use foster or chan with "
                         "--cdm")


def check_cdm_options(args):
    """The CDM and Pc options checked before the catalog is read: ``--cdm`` and ``--pc``
    need ``--sigma``; the other CDM options need ``--cdm`` (`check_pc_options`); the
    folder's parent exists; ccsds-ndm is installed."""
    if args.sigma is not None and args.cdm is None and not args.pc:
        raise UsageError("--sigma: only used with --cdm DIR or --pc")
    check_pc_options(args)
    if args.sigma is not None:
        args.sigma = parse_sigma(args.sigma)
    if args.cdm is None:
        for flag, value in (("--cdm-below", args.cdm_below), ("--frame", args.frame)):
            if value is not None:
                raise UsageError(f"{flag}: only used with --cdm DIR")
        return
    if args.sigma is None and not getattr(args, "omm", False):
        raise UsageError("--cdm: a CDM carries each object's covariance and a TLE has "
                         "none; give one with --sigma R,T,N[,RDOT,TDOT,NDOT] (m, m/s)")
    args.cdm_below = (args.threshold if args.cdm_below is None
                      else parse_distance(args.cdm_below, "--cdm-below"))
    if os.path.exists(args.cdm) and not os.path.isdir(args.cdm):
        raise UsageError(f"--cdm {args.cdm!r}: exists and is not a folder")
    check_output(args.cdm, "--cdm")  # its parent folder exists
    try:
        import ccsds_ndm  # noqa: F401
    except ImportError:
        raise UsageError("--cdm needs the ccsds-ndm package, which is not installed "
                         "(pip install 'hapsira-cowell[cdm]')") from None


def check_cdm_catalog(args, catalog):
    """What a CDM needs of the catalog: an epoch and a frame."""
    if catalog.epoch is None:
        raise UsageError("--cdm: a CDM's times are UTC; give the CSV catalog's epoch with "
                         "--epoch")
    if catalog.kind in ("TLE", "OMM"):
        if args.frame not in (None, "TEME"):
            raise UsageError(f"--frame {args.frame}: a {catalog.kind} catalog's states are "
                             "TEME")
        args.frame = "TEME"
    elif args.frame is None:
        raise UsageError("--cdm: say the frame of the CSV catalog's states with --frame "
                         "TEME, GCRF or EME2000")


def omm_covariances(args, catalog):
    """Without ``--sigma``, an OMM catalog's covariances at its epoch for ``--pc`` and
    ``--cdm`` (`hapsira_cowell.inputs.omm.OMMCatalog.covariances_at`), kept as
    ``catalog.covariances``; `UsageError` naming the objects to screen that have none
    there (none in their OMM, or a failed propagation), before anything is screened."""
    if args.sigma is not None or catalog.omms is None or not (args.pc or args.cdm):
        return
    from ..propagation.results import STATUS_MESSAGES

    def refuse(missing, why):
        first = int(missing[0])
        raise UsageError(f"{'--pc' if args.pc else '--cdm'}: {missing.size} of the OMM "
                         f"file's objects have no covariance at the epoch (first: "
                         f"{object_label(catalog, first)}, {why(first)}); give every "
                         "object one with --sigma R,T,N[,RDOT,TDOT,NDOT] (m, m/s)")

    given = np.isfinite(catalog.omms.covariances).all(axis=(1, 2))
    missing = np.flatnonzero(catalog.initial_ok & ~given)
    if missing.size:  # said before anything is propagated
        refuse(missing, lambda first: "its OMM has none")
    P, status = catalog.omms.covariances_at(catalog.epoch)
    failed = np.flatnonzero(catalog.initial_ok & (status != 0))
    if failed.size:
        refuse(failed, lambda first: "its propagation to the epoch failed: "
               f"{STATUS_MESSAGES.get(int(status[first]), status[first])}")
    catalog.covariances = P


def encounters_of(catalog, table, sigma):
    """`hapsira_cowell.propagation.encounters.encounters` of the table's approaches (its
    ``i``, ``j`` catalog rows), with ``sigma``'s RTN covariance at the epoch (None: the
    catalog's ``covariances`` at the epoch, `omm_covariances`)."""
    from ..constants import K_EARTH
    from ..propagation.conjunctions import ConjunctionTable
    from ..propagation.covariance import from_rtn
    from ..propagation.encounters import encounters

    rows = np.flatnonzero(catalog.initial_ok)
    local = ConjunctionTable(np.searchsorted(rows, table.i), np.searchsorted(rows, table.j),
                             table.tca, table.miss, table.speed)
    r0, v0 = catalog.r0[rows], catalog.v0[rows]
    P0 = (catalog.covariances[rows] if sigma is None
          else from_rtn(r0, v0, np.diag(sigma ** 2)))
    enc = encounters(K_EARTH, r0, v0, local, P0)
    enc.i, enc.j = rows[enc.i], rows[enc.j]  # catalog rows, as the table's
    return enc


def _table_rows(table, keep):
    """The approaches ``keep`` of a `ConjunctionTable`, in its order."""
    from ..propagation.conjunctions import ConjunctionTable

    return ConjunctionTable(*(table[name][keep] for name in ("i", "j", "tca", "miss",
                                                              "speed")))


def _rows(enc, keep):
    """The approaches ``keep`` of an `Encounters` or `Probability`."""
    columns = {name: value[keep] if isinstance(value, np.ndarray) else value
               for name, value in vars(enc).items()}
    return type(enc)(**columns)


def probabilities(args, catalog, table, stats):
    """Every approach's states at its TCA (`encounters_of`) and its probability of
    collision (``args.pc_method``, ``args.hbr``), the warnings of
    `hapsira_cowell.conjunctions.probability` left to the summary's flags."""
    import time

    from ..propagation.probability import CovarianceRepairedWarning, LongEncounterWarning

    started = time.perf_counter()
    enc = encounters_of(catalog, table, args.sigma)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CovarianceRepairedWarning)
        warnings.simplefilter("ignore", LongEncounterWarning)
        sampling = (dict(samples=args.pc_samples, seed=args.pc_seed)
                    if args.pc_method in SAMPLED else {})
        pc = enc.probability(args.hbr, args.pc_method, full=True, hbr_shape=args.hbr_shape,
                             **sampling)
    pc.hbr = args.hbr
    pc.hbr_shape = args.hbr_shape
    if sampling:
        pc.seed = args.pc_seed
        pc.per_approach = args.pc_samples
    stats["pc_s"] = time.perf_counter() - started
    return enc, pc


def pc_filter(args, table, enc, pc, stats):
    """The approaches with a probability of at least ``args.pc_above`` (all without it)."""
    if args.pc_above is None:
        return table, enc, pc
    keep = pc.pc >= args.pc_above
    stats["pc_above"], stats["pc_screened"] = args.pc_above, len(table)
    return _table_rows(table, keep), _rows(enc, keep), _rows(pc, keep)


def write_cdm_files(args, catalog, table, stats, enc=None, pc=None):
    """One CDM per approach below ``args.cdm_below`` in ``args.cdm``; the number written.
    The two objects are propagated again to the TCA with their state transition
    matrices (`encounters_of`; ``enc``: that done already for every approach of the
    table), so the CDM's covariances are ``--sigma``'s RTN matrix at the epoch carried to
    the TCA; with ``pc`` (`probabilities`) each CDM carries its COLLISION_PROBABILITY."""
    import time

    from ..outputs.cdm import write_cdms
    from ..propagation.probability import CDM_METHODS

    started = time.perf_counter()
    keep = table.miss < args.cdm_below
    if enc is None:
        enc = encounters_of(catalog, _table_rows(table, keep), args.sigma)
    else:
        enc = _rows(enc, keep)
    os.makedirs(args.cdm, exist_ok=True)
    # a CDM's values are printable ASCII: other characters of a CSV's names become '?'
    printable = [re.sub(r"[^ -~]", "?", x) for x in catalog.names]
    paths = write_cdms(args.cdm, enc, catalog.epoch, printable,
                       designators=[re.sub(r"[^ -~]", "?", x) for x in catalog.ids],
                       numbers=[re.sub(r"[^ -~]", "?", x) for x in catalog.numbers],
                       frame=args.frame,
                       screen=(0.0, args.days * 86400.0), threshold=args.threshold,
                       originator=args.originator, fmt=args.cdm_format,
                       pc=None if pc is None else pc.pc[keep],
                       pc_method=None if pc is None else CDM_METHODS[pc.method],
                       covariance_method="DEFAULT" if args.sigma is not None
                       else "CALCULATED")
    stats["cdm_s"] = time.perf_counter() - started
    return len(paths)
