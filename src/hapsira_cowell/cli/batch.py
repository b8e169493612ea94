"""The batch driver: a catalog propagated in chunks of objects, each chunk handed to a writer.

`propagate` is what ``hapsira-cowell propagate`` runs: the named force model
(`hapsira_cowell.models`), per-object drag numbers, a terminal re-entry event
with drag, chunks of ``chunk`` objects so that memory stays bounded whatever
the catalog's size, a progress bar, and the timings of compilation and
propagation apart; with a Dask ``client`` the chunks run on the cluster's
workers (`hapsira_cowell.propagation.dask.map_chunks`) and come back here in order.
`summary_lines` is the end-of-run report.
"""

import math
import sys
import time

import numpy as np

from ..constants import K_EARTH, R_EARTH
from .inputs import format_duration
from .models import build_rhs

__all__ = ["RunResult", "propagate", "summary_lines", "compile_notice"]

PROG = "hapsira-cowell"


class RunResult:
    """What one propagation gives the summary and the plots: ``names``, ``tofs``,
    ``status``, ``reentry`` (s, NaN if none), ``rr`` (kept only when asked),
    ``seconds`` (propagation, writing left out), ``write_seconds`` (in the
    ``writer``), ``compile_seconds``, ``workers`` (the Dask
    workers' `hapsira_core.dask.worker_info`, None without a cluster)."""


def _progress(total, enabled, desc):
    """The bar of `hapsira_core.progress` (the library's ``progress=True`` too), or None
    without tqdm; off when stderr is not a terminal."""
    if not enabled:
        return None
    from hapsira_core.progress import bar
    return bar(total, desc, required=False, disable=None)


_NOTIFIED = set()  # (target, model) pairs this process has announced compiling


def compile_notice(model, stream=None):
    """Say on stderr, once per process and model, that kernels are being compiled.

    The first solver call compiles the kernels for the active target (numba),
    during which nothing else shows; later calls, and later processes through the
    on-disk cache (``HAPSIRA_CACHE``), reuse them; the run's summary says how long
    the compile took. Returns whether it printed.
    """
    from hapsira_core.jit import TARGET

    key = (TARGET, model)
    if key in _NOTIFIED:
        return False
    _NOTIFIED.add(key)
    print(f"{PROG}: compiling kernels for target {TARGET} ({model}; once, cached for "
          "later runs: the summary gives the time it took)...", file=stream or sys.stderr,
          flush=True)
    return True


def _kernel_ready(f, events):
    """Whether cowell's kernel for ``f`` and ``events`` is compiled or cached on disk."""
    from hapsira_core.ivp import build

    from ..propagation.forms import orbit_rhs

    kernel = build.kernel("DOP853", 6, orbit_rhs(f), tuple(e.device_function for e in events))
    return kernel.on_disk()


def _local_chunks(cowell, catalog, tofs, params, chunk, options):
    """``(first, last, CowellResult)`` per chunk, propagated in this process."""
    n = len(catalog)
    for first in range(0, n, chunk):
        last = min(first + chunk, n)
        yield first, last, cowell(K_EARTH, catalog.r0[first:last], catalog.v0[first:last],
                                  tofs, params=params[first:last], **options)


def propagate(catalog, tofs, perturbations, *, c_d=2.2, area_to_mass=0.01,
              reentry_altitude=100.0, chunk=10_000, writer=None, keep_states=False,
              progress=True, rtol=1e-11, atol=1e-12, client=None):
    """Propagate a `hapsira_cowell.catalog.Catalog` in chunks; hand each chunk to ``writer``.

    ``perturbations``: names from `hapsira_cowell.models.PERTURBATIONS`.
    ``area_to_mass`` in m^2/kg (converted to km^2/kg for the solver); the
    catalog's own per-object values win where given. With ``drag``, a
    terminal `hapsira_cowell.models.events.AltitudeCrossEvent` stops an object when it
    descends through ``reentry_altitude`` (km). ``writer(first, last, res,
    reentry)`` receives each chunk's `CowellResult` and re-entry times (s,
    NaN for none). ``client``: a ``distributed.Client`` whose workers propagate the
    chunks (each on its own target; see `hapsira_cowell.propagation.dask.open_client`).
    Returns a `RunResult`.
    """
    from hapsira_core.jit import TARGET

    from ..propagation.api import cowell
    from ..propagation.forms import units_unchecked
    from ..models.events import AltitudeCrossEvent

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
    out.workers = None
    model = "two-body" + "".join(" + " + p for p in perturbations)

    # Compile first, on one object, so that the progress bar and the throughput
    # measure the propagation alone.
    start = time.perf_counter()
    if client is None:
        if not _kernel_ready(f, events):
            compile_notice(model)
        with units_unchecked():  # a 1 s flight of our own, not the user's days as s
            cowell(K_EARTH, np.array([R_EARTH + 500.0, 0.0, 0.0]), np.array([0.0, 7.6, 0.0]),
                   [math.copysign(1.0, tofs[-1])], f=f, params=params[:1], events=events)
        chunks = _local_chunks(cowell, catalog, tofs, params, chunk, dict(
            rtol=rtol, atol=atol, f=f, events=events))
        where = TARGET
    else:
        from ..propagation import dask as on_cluster
        blob = on_cluster.pack_call(K_EARTH, tofs, rtol, atol, f=f, events=events,
                                    params_given=params)[0]
        print(f"{PROG}: compiling kernels on the Dask workers ({model}; once per worker "
              "process, unless cached)...", file=sys.stderr, flush=True)
        if n:
            on_cluster.warm_up(client, blob, catalog.r0, catalog.v0, params)
        out.workers = on_cluster.workers(client)
        if client.dashboard_link:
            print(f"{PROG}: Dask dashboard at {client.dashboard_link}", file=sys.stderr,
                  flush=True)
        chunks = on_cluster.map_chunks(client, blob, catalog.r0, catalog.v0, params, chunk)
        targets = sorted({w["target"] for w in out.workers.values()})
        where = f"{len(out.workers)} Dask workers, {'/'.join(targets)}"
    out.compile_seconds = time.perf_counter() - start

    bar = _progress(n, progress, f"propagating ({where})")
    out.write_seconds = 0.0
    start = time.perf_counter()
    try:
        for first, last, res in chunks:
            reentry = (np.where(res.status == 1, res.t_events[0][:, 0], np.nan) if drag
                       else np.full(last - first, np.nan))
            out.status[first:last] = res.status
            out.reentry[first:last] = reentry
            if keep_states:
                out.rr[first:last] = res.rr
            if writer is not None:  # timed apart: the rate is the propagation's
                written = time.perf_counter()
                writer(first, last, res, reentry)
                out.write_seconds += time.perf_counter() - written
            if bar is not None:
                bar.update(last - first)
    finally:
        if bar is not None:
            bar.close()
    out.seconds = time.perf_counter() - start - out.write_seconds
    return out


def summary_lines(run, catalog, tof, wall_seconds):
    """The end-of-run summary: objects, outcomes by status, re-entries, timings."""
    from ..propagation.results import STATUS_MESSAGES

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
                     f"{format_duration(float(np.nanmin(np.abs(times))))}, last after "
                     f"{format_duration(float(np.nanmax(np.abs(times))))})")
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
    object_days = n * abs(tof) / 86400.0
    rate = object_days / run.seconds if run.seconds > 0 else math.inf
    if getattr(run, "workers", None):
        targets = sorted({w["target"] for w in run.workers.values()})
        lines.append(f"Dask workers: {len(run.workers)} (target {', '.join(targets)})")
    writing = getattr(run, "write_seconds", 0.0)
    lines.append(f"wall time: {wall_seconds:.1f} s (compilation {run.compile_seconds:.1f} s, "
                 f"propagation {run.seconds:.2f} s, writing {writing:.2f} s)")
    lines.append(f"throughput: {rate:,.0f} object-days per second of propagation "
                 "(writing not counted)")
    return lines
