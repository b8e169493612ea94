"""Plots of propagation results and benchmark files (matplotlib, Agg backend).

Each function writes one PNG and returns its path. ``res`` may be a
`CowellResult` (its first event taken as the re-entry
event), the result of the command line's ``propagate``, an ``.npz`` written by
``hapsira-cowell propagate`` (opened with ``numpy.load``), or anything with
``rr`` ((N, M, 3) km), ``status`` and optionally ``reentry`` ((N,) s, NaN for
none).
"""

import json
import os
import warnings
from pathlib import Path

import numpy as np

from ..constants import OMEGA_EARTH  # rad/s, for the ground tracks

__all__ = ["altitude_vs_time", "draw_probability_vs_miss", "ground_tracks",
           "probability_vs_miss", "throughput", "benchmark_points"]


def _pyplot():
    import matplotlib
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    return plt


def _field(res, name, default=None):
    if isinstance(res, dict) or hasattr(res, "files"):  # dict or NpzFile
        return res[name] if name in res else default
    return getattr(res, name, default)


def _states(res):
    rr = np.asarray(getattr(_field(res, "rr"), "value", _field(res, "rr")), dtype=float)
    if rr.ndim == 2:
        rr = rr[None]
    status = np.atleast_1d(np.asarray(_field(res, "status", np.zeros(rr.shape[0], int))))
    reentry = _field(res, "reentry")
    if reentry is None:
        t_events = _field(res, "t_events") or []
        if len(t_events):
            first = np.asarray(getattr(t_events[0], "value", t_events[0]), dtype=float)
            first = first.reshape(rr.shape[0], -1)[:, 0]
            reentry = np.where(status == 1, first, np.nan)
        else:
            reentry = np.full(rr.shape[0], np.nan)
    reentry = np.atleast_1d(np.asarray(reentry, dtype=float))
    return rr, status, reentry


def _time_axis(tofs):
    span = float(np.max(np.abs(tofs))) if np.size(tofs) else 0.0
    if span >= 2 * 86400:
        return 86400.0, "time of flight (days)"
    if span >= 3 * 3600:
        return 3600.0, "time of flight (h)"
    if span >= 180:
        return 60.0, "time of flight (min)"
    return 1.0, "time of flight (s)"


def _save(fig, path):
    path = os.fspath(path)
    fig.savefig(path, dpi=120)
    _pyplot().close(fig)
    return path


def _evenly(indices, count):
    """At most ``count`` of ``indices``, evenly picked."""
    if indices.size <= count:
        return indices
    return indices[np.unique(np.linspace(0, indices.size - 1, count).astype(int))]


#: From this many objects in orbit at the end on, `altitude_vs_time` draws their median
#: and a 5-95% band instead of one grey line each (hundreds of lines make a grey band).
BAND_FROM = 20


def _label(names, i):
    return str(names[i]) if names is not None else f"object {i}"


def altitude_vs_time(res, tofs, R, path, reentry_altitude=None, max_lines=300,
                     max_reentries=40, title=None):
    """Altitude ``|r| - R`` (km) of each object against time, re-entries marked.

    Objects that stayed in orbit are thin grey lines (at most ``max_lines`` of
    them, evenly picked); from `BAND_FROM` of them on, their median altitude and
    the band of the 5th to 95th percentiles instead, with the lowest and the
    highest object (by mean altitude) drawn and named. Objects that re-entered
    (status 1) are coloured lines
    (at most ``max_reentries``) ending at a cross at their re-entry time, on ``reentry_altitude`` (km;
    drawn as a dashed line) when given. Objects that failed (status < 0) are
    drawn in red up to their failure.
    """
    plt = _pyplot()
    rr, status, reentry = _states(res)
    names = _field(res, "names")
    tofs = np.asarray(getattr(tofs, "value", tofs), dtype=float)
    scale, xlabel = _time_axis(tofs)
    t = tofs / scale
    altitude = np.linalg.norm(rr, axis=-1) - R

    fig, ax = plt.subplots(figsize=(11, 5.5), layout="constrained")
    stayed = np.flatnonzero(status == 0)
    if stayed.size >= BAND_FROM:
        alts = altitude[stayed]
        with warnings.catch_warnings():  # a time where no object has a number: a gap
            warnings.simplefilter("ignore", RuntimeWarning)
            low, median, high = np.nanpercentile(alts, [5, 50, 95], axis=0)
            mean = np.nanmean(alts, axis=1)
        ax.fill_between(t, low, high, color="0.7", alpha=0.5, lw=0,
                        label=f"in orbit at the end ({stayed.size}): 5-95% of altitudes")
        ax.plot(t, median, color="0.2", lw=1.4, label="median")
        if np.isfinite(mean).any():
            for which, k, colour in (("lowest", np.nanargmin(mean), "tab:blue"),
                                     ("highest", np.nanargmax(mean), "tab:green")):
                i = stayed[k]
                ax.plot(t, altitude[i], color=colour, lw=0.9,
                        label=f"{which}: {_label(names, i)}")
    else:
        shown = _evenly(stayed, max_lines)
        for k, i in enumerate(shown):
            ax.plot(t, altitude[i], color="0.55", lw=0.5, alpha=0.5,
                    label=(f"in orbit at the end ({stayed.size}"
                           + (f", {shown.size} shown" if shown.size < stayed.size else "")
                           + ")") if k == 0 else None)
    all_down = np.flatnonzero(status == 1)
    down = _evenly(all_down, max_reentries)
    colours = plt.cm.plasma(np.linspace(0.0, 0.85, max(down.size, 1)))
    for k, i in enumerate(down):
        ok = np.isfinite(altitude[i])
        times, alts = t[ok], altitude[i][ok]
        if np.isfinite(reentry[i]) and reentry_altitude is not None:
            times = np.append(times, reentry[i] / scale)
            alts = np.append(alts, reentry_altitude)
        ax.plot(times, alts, color=colours[k], lw=1.2,
                label=(f"re-entered ({all_down.size}"
                       + (f", {down.size} shown" if down.size < all_down.size else "") + ")")
                if k == 0 else None)
    if down.size and reentry_altitude is not None:
        ax.plot(reentry[down] / scale, np.full(down.size, reentry_altitude), "x", color="k",
                ms=7, mew=1.5, label="re-entry time", zorder=5)
    failed = np.flatnonzero(status < 0)
    for k, i in enumerate(failed):
        ax.plot(t, altitude[i], color="tab:red", lw=1.0,
                label=f"failed, status < 0 ({failed.size})" if k == 0 else None)
    if reentry_altitude is not None:
        ax.axhline(reentry_altitude, color="k", ls="--", lw=0.8,
                   label=f"re-entry altitude ({reentry_altitude:g} km)")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"altitude above a sphere of R = {R:.10g} km (km)")
    ax.set_xlim(t[0], t[-1])
    if scale == 3600.0 and t[-1] - t[0] <= 48:
        ax.xaxis.set_major_locator(_pyplot().MultipleLocator(3 if t[-1] - t[0] <= 24 else 6))
    ax.set_ylim(bottom=0.0)
    ax.grid(alpha=0.3)
    ax.set_title(title or f"altitude of {status.size} objects")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    return _save(fig, path)


def ground_tracks(res, tofs, path, max_objects=10, hours=None, gmst0=0.0, title=None):
    """Ground tracks (geocentric latitude, Earth-fixed longitude) of a few objects.

    Longitude ``atan2(y, x) - gmst0 - OMEGA_EARTH t`` (rad; ``gmst0``: the
    Greenwich sidereal angle at t = 0, 0 for synthetic clouds), latitude
    ``asin(z / r)``, over the first ``hours`` (all times if None), for up to
    ``max_objects`` objects: up to half of them objects that re-entered
    (status 1) within that window, earliest first, then the others; starts
    are circles, the last state before a re-entry a cross. The states should be dense in time (a few minutes
    apart) for smooth tracks; ``rr`` in an inertial frame whose z axis is the
    Earth's rotation axis (TEME, GCRS, J2000 to within precession).
    """
    plt = _pyplot()
    rr, status, reentry = _states(res)
    tofs = np.asarray(getattr(tofs, "value", tofs), dtype=float)
    names = _field(res, "names")
    end = tofs[-1] if hours is None else min(tofs[-1], tofs[0] + 3600.0 * hours)
    window = tofs <= end
    tofs, rr = tofs[window], rr[:, window]
    down = np.flatnonzero((status == 1) & (reentry <= end))
    down = down[np.argsort(reentry[down], kind="stable")]
    others = np.flatnonzero(~np.isin(np.arange(status.size), down))
    half = min(down.size, max_objects // 2)
    chosen = np.concatenate([down[:half], others, down[half:]])[:max_objects]
    fig, ax = plt.subplots(figsize=(10, 5.4), layout="constrained")
    colours = plt.cm.tab10(np.arange(chosen.size) % 10)
    for k, i in enumerate(chosen):
        r = np.linalg.norm(rr[i], axis=-1)
        ok = np.isfinite(r)
        if not ok.any():
            continue
        lon = np.degrees(np.arctan2(rr[i, ok, 1], rr[i, ok, 0]) - gmst0 - OMEGA_EARTH * tofs[ok])
        lon = (lon + 180.0) % 360.0 - 180.0
        lat = np.degrees(np.arcsin(rr[i, ok, 2] / r[ok]))
        jumps = np.flatnonzero(np.abs(np.diff(lon)) > 180.0) + 1  # break at the date line
        for part, (lo, la) in enumerate(zip(np.split(lon, jumps), np.split(lat, jumps))):
            name = str(names[i]) if names is not None else f"object {i}"
            if i in down:
                name += f" (re-entered after {reentry[i] / 3600.0:.1f} h)"
            elif status[i] < 0:
                name += f" (failed, status {int(status[i])})"
            ax.plot(lo, la, color=colours[k], lw=0.9, label=name if part == 0 else None)
        ax.plot(lon[0], lat[0], "o", color=colours[k], ms=4)
        if i in down:
            ax.plot(lon[-1], lat[-1], "x", color="k", ms=8, mew=2)
    ax.plot([], [], "o", color="0.3", ms=4, label="start")
    if np.isin(chosen, down).any():
        ax.plot([], [], "x", color="k", ms=8, mew=2, label="last state before re-entry")
    ax.set_xlim(-180, 180)
    ax.set_ylim(-90, 90)
    ax.set_xticks(np.arange(-180, 181, 60))
    ax.set_yticks(np.arange(-90, 91, 30))
    ax.set_xlabel("longitude (deg, Earth-fixed)")
    ax.set_ylabel("geocentric latitude (deg)")
    ax.grid(alpha=0.3)
    span = (tofs[-1] - tofs[0]) / 3600.0
    ax.set_title(title or f"ground tracks over the first {span:.3g} h")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8)
    return _save(fig, path)


def draw_probability_vs_miss(ax, miss, pc, flagged=None, floor=None, method=None):
    """On ``ax``: each approach's probability of collision (log scale) against its miss
    distance (km). Approaches flagged (``flagged``, bool: a repaired covariance or a long
    encounter) are drawn apart; a probability of 0 (below the smallest double) sits on
    the axis' floor as a down triangle; NaN ones (no TCA state) are counted in the
    legend only; ``floor`` (e.g. ``--pc-above``) is a dashed line."""
    miss = np.asarray(miss, dtype=float)
    pc = np.asarray(pc, dtype=float)
    flagged = np.zeros(pc.shape, bool) if flagged is None else np.asarray(flagged, bool)
    positive = pc > 0
    low = float(pc[positive].min()) if positive.any() else 1e-10
    if floor is not None and floor > 0:
        low = min(low, floor)
    bottom = 10.0 ** np.floor(np.log10(low) - 1.0)
    for keep, style, label in (
            (positive & ~flagged, dict(marker="o", color="tab:blue"), "Pc"),
            (positive & flagged, dict(marker="s", color="tab:orange"),
             "flagged (repaired covariance or long encounter)")):
        if keep.any():
            ax.scatter(miss[keep], pc[keep], s=14, alpha=0.8, label=f"{label} ({keep.sum()})",
                       **style)
    zero = pc == 0
    if zero.any():
        ax.scatter(miss[zero], np.full(zero.sum(), bottom), marker="v", s=18, color="0.4",
                   label=f"Pc = 0 ({zero.sum()})", clip_on=False)
    missing = np.isnan(pc)
    if missing.any():
        ax.plot([], [], " ", label=f"no Pc ({missing.sum()}: no state at the TCA)")
    if floor is not None and floor > 0:
        ax.axhline(floor, color="k", ls="--", lw=0.8, label=f"--pc-above {floor:g}")
    ax.set_yscale("log")
    ax.set_ylim(bottom, 1.5)
    ax.set_xlabel("miss distance (km)")
    ax.set_ylabel("probability of collision" + (f" ({method})" if method else ""))
    ax.grid(alpha=0.3, which="both")
    if len(pc):
        ax.legend(loc="lower left", fontsize=8)
    return ax


def probability_vs_miss(path, miss, pc, flagged=None, floor=None, method=None, title=None):
    """A PNG of each approach's probability of collision (log scale) against its miss
    distance (km): `draw_probability_vs_miss` on one figure."""
    fig, ax = _pyplot().subplots(figsize=(7, 4.5), layout="constrained")
    draw_probability_vs_miss(ax, miss, pc, flagged, floor, method)
    ax.set_title(title or f"{len(np.asarray(pc))} approaches")
    return _save(fig, path)


def benchmark_points(data, name):
    """``{series: [(n_objects, object_days_per_s), ...]}`` from one benchmark JSON.

    Every dict with ``n_objects`` and ``seconds`` is a point (anywhere in the
    file). Its rate is ``1e6 / us_per_object_day`` when given, else
    ``n_objects / seconds`` (one day of flight). Its series is ``name`` (or
    the file's ``name`` field), its ``target``, and the ``variant`` or
    ``label`` of the entry, or, inside a ``peers`` dict, the peer's key.
    """
    series = {}
    base = data.get("name", name) if isinstance(data, dict) else name
    target = data.get("target") if isinstance(data, dict) else None

    def visit(node, context, variant):
        if isinstance(node, list):
            for value in node:
                visit(value, context, variant)
            return
        if not isinstance(node, dict):
            return
        variant = node.get("variant", node.get("label", variant))
        n, seconds = node.get("n_objects"), node.get("seconds")
        if isinstance(n, (int, float)) and isinstance(seconds, (int, float)) and seconds > 0:
            us = node.get("us_per_object_day")
            rate = 1e6 / us if isinstance(us, (int, float)) and us > 0 else n / seconds
            label = context or (f"hapsira {target} ({base})" if target else base)
            tag = str(variant).strip("_") if variant else ""
            if tag and tag not in label:
                label += f", {tag}"
            series.setdefault(label, []).append((n, rate))
        for key, value in node.items():
            if key == "peers" and isinstance(value, dict):
                for peer, entry in value.items():
                    visit(entry, peer, variant)
            elif isinstance(value, (dict, list)):
                visit(value, context, variant)

    visit(data, None, None)
    return {label: sorted(points) for label, points in series.items()}


def throughput(results_json_paths, path, title=None):
    """Throughput (object-days of flight per second) against the number of objects.

    Reads benchmark JSON files (see `benchmark_points()`: any dict with
    ``n_objects`` and ``seconds``, peers included) and draws one line per
    series, log-log.
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 5.5), layout="constrained")
    markers = "osD^v<>ph*"
    found = []  # (file stem, label, points)
    for file in results_json_paths:
        file = Path(file)
        with open(file) as source:
            data = json.load(source)
        found += [(file.stem, label, points)
                  for label, points in benchmark_points(data, file.stem).items()]
    labels = [label for _, label, _ in found]
    count = 0
    for stem, label, points in found:
        if labels.count(label) > 1:  # the same series name in several files
            label = f"{label} [{stem}]"
        n, rate = np.array(points, dtype=float).T
        ax.plot(n, rate, marker=markers[count % len(markers)], ms=5, lw=1.2, label=label)
        count += 1
    if count == 0:
        plt.close(fig)
        raise ValueError("throughput: no entries with n_objects and seconds in "
                         + ", ".join(os.fspath(p) for p in results_json_paths))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("objects propagated together")
    ax.set_ylabel("throughput (object-days per second)")
    ax.grid(alpha=0.35, which="major")
    ax.grid(alpha=0.1, which="minor")
    ax.set_title(title or "propagation throughput (one day of flight per object)")
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return _save(fig, path)
