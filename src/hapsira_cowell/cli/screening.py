"""``hapsira-cowell screen``: conjunction screening of a catalog to CSV and a histogram.

The work is `hapsira_cowell.conjunctions.screen`; this module reads the
catalog, drops the objects SGP4 could not place, writes one CSV line per
approach (with the objects' names and the TCA in UTC), and on request a
miss-distance histogram (matplotlib).
"""

import csv
import math
import os
import re

import numpy as np

from .inputs import UsageError

__all__ = ["describe", "miss_histogram", "parse_distance", "run_screen", "write_csv"]

_DISTANCE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*(km|m)?\s*$")


def parse_distance(text, name="--threshold"):
    """Kilometres in ``text``: ``5km``, ``500m`` or a bare number of km."""
    match = _DISTANCE.match(str(text))
    if not match:
        raise UsageError(f"{name}: cannot read {text!r} as a distance; expected a number "
                         "and km or m, e.g. 5km or 500m")
    value = float(match.group(1)) * (1e-3 if match.group(2) == "m" else 1.0)
    if not (value > 0 and math.isfinite(value)):
        raise UsageError(f"{name}: {text!r} is not a positive distance")
    return value


def write_csv(path, table, names, epoch):
    """One line per approach: indices and names, TCA (s after the epoch, and UTC when
    the epoch is known), miss (km), relative speed (km/s)."""
    with open(path, "w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(["i", "j", "name_i", "name_j", "tca_s", "tca_utc", "miss_km",
                      "speed_km_s"])
        utc = _utc(table.tca, epoch)
        for row in range(len(table)):
            i, j = int(table.i[row]), int(table.j[row])
            out.writerow([i, j, names[i], names[j], repr(float(table.tca[row])), utc[row],
                          repr(float(table.miss[row])), repr(float(table.speed[row]))])


def _utc(seconds, epoch):
    if epoch is None or len(seconds) == 0:
        return [""] * len(seconds)
    from astropy import units as u

    return list((epoch + np.asarray(seconds) * u.s).utc.isot)


def miss_histogram(path, table, threshold, title=None):
    """A PNG histogram of the miss distances (km), bins of threshold / 20."""
    from .plots import _pyplot, _save

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.hist(table.miss, bins=np.linspace(0.0, threshold, 21), color="tab:blue",
            edgecolor="white")
    ax.set_xlabel("miss distance (km)")
    ax.set_ylabel("approaches")
    ax.set_title(title or f"{len(table)} approaches below {threshold:g} km")
    return _save(fig, path)


def run_screen(catalog, days, threshold, dt=None):
    """Screen the catalog's objects with a finite state for ``days`` days; returns the
    table with indices into the catalog's rows and the stats of `screen`."""
    from ..propagation.conjunctions import ConjunctionTable, screen
    from ..constants import K_EARTH

    rows = np.flatnonzero(catalog.initial_ok)
    if len(rows) < 2:
        raise UsageError("catalog: fewer than two objects with a state to screen")
    stats = {}
    table = screen(K_EARTH, catalog.r0[rows], catalog.v0[rows], (0.0, days * 86400.0),
                   threshold, dt=dt, stats=stats)
    table = ConjunctionTable(rows[table.i], rows[table.j], table.tca, table.miss, table.speed)
    return table, stats


def describe(table, stats, seconds):
    """Summary lines printed by the command line."""
    lines = [(f"{len(table)} approaches; {stats['windows']} windows of {stats['dt']:.1f} s, "
              f"{stats['grid_pairs']} grid pairs, {stats['candidates']} refined")]
    if len(table):
        lines.append(f"closest: objects {table.i[np.argmin(table.miss)]} and "
                     f"{table.j[np.argmin(table.miss)]}, {table.miss.min():.3f} km")
    lines.append(f"propagation {stats['propagate_s']:.2f} s, broad phase {stats['broad_s']:.2f} s, "
                 f"refinement {stats['narrow_s']:.2f} s; {seconds:.1f} s in all")
    return lines


def check_output(out, name="--out"):
    """``--out`` (or ``--plot``) checked before the run: its folder exists."""
    if out is None:
        return out
    folder = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(folder):
        raise UsageError(f"{name} {out!r}: the folder {folder!r} does not exist")
    return out
