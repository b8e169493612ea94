"""``cowell()`` on Dask arrays: each chunk of objects propagated by a worker, results as Dask arrays.

`cowell` is what ``hapsira_cowell.cowell`` calls when ``r0``, ``v0``
or ``params`` is a Dask array; each task runs the numpy ``cowell()`` on its
chunk (`propagate_chunk`), on the worker's own target, so a chunk's
result is the single-process result for those objects, bit for bit. See
`hapsira_core.dask` for how functions reach the workers and
``docs/dask.md`` for clusters, GPUs and Zarr.
"""


from typing import ClassVar

import numpy as np
from astropy import units as u

from hapsira_core.fronts import dask as core
from hapsira_core.ivp import checks
from hapsira_core.kernels.kernel import Columns

from ..units import is_quantity, to_value
from .forms import (bounds_checked, call_options, check_gm, check_states, check_stm,
                    check_tofs, check_units, orbit_call, step_options, tofs_end)
from .results import CowellResult

__all__ = ["cowell", "DaskCowellResult", "propagate_chunk", "pack_call", "open_client",
           "close_client", "workers", "warm_up", "map_chunks"]


def propagate_chunk(blob, r0, v0, params=None, tofs=None):
    """One chunk on a worker: the blob's `Call` (`pack_call`) run on these objects.

    ``params``: the chunk's rows, or None for the blob's shared row; ``tofs``: the
    chunk's ``(k, M)`` times of flight, or None for the blob's shared ``(M,)``. Returns
    the arrays of the chunk's `CowellResult` as `_shapes` names them (``rr``, ``vv``,
    ``status``, ``t_events_0``..., ``n_events``, ``nfev``, ``nsteps``, with ``stm=True``
    ``stm``), numpy arrays.
    """
    call, spec = core.call_of(blob)
    r0, v0, _ = check_states(r0, v0)
    rows = checks.params(spec["rows"] if params is None else params, r0.shape[0])
    for event in call.events:
        event.check_params(rows)
    times = call.times if tofs is None else check_tofs(tofs, r0.shape[0])
    # GM first in every row, Phi(0) = I after each state with stm: as the numpy front
    rows = np.concatenate((np.full((rows.shape[0], 1), spec["k"]), rows), axis=1)
    y0 = Columns(r0, v0, *([np.ascontiguousarray(
        np.broadcast_to(np.eye(6).ravel(), (r0.shape[0], 36)))] if call.stm else []))
    raw = call.run(y0, rows, 0.0, tofs_end(times), times)
    arrays = CowellResult.from_kernel(raw).arrays()
    return tuple(arrays[name] for name in _shapes(call))


def _shapes(call):
    """`Call.shapes` of a cowell call: its chunks' arrays, by name."""
    m = call.times.shape[-1]
    return call.shapes(CowellResult, rr=(m, 3), vv=(m, 3), stm=(m, 6, 6))


def _propagate_rows(blob, r0, v0, *rows):
    """`propagate_chunk` as `cowell`'s task graph calls it: after the states come the
    chunk's params rows where the blob has no shared row, then its rows of times of
    flight where the blob has no shared ones."""
    call, spec = core.call_of(blob)
    rows = list(rows)
    params = rows.pop(0) if spec["rows"] is None else None
    tofs = rows.pop(0) if call.times.ndim == 2 else None
    return propagate_chunk(blob, r0, v0, params, tofs)


def pack_call(k, tofs, rtol=1e-11, atol=1e-12, *, f=None, params=None, events=(),
              max_steps=100_000, max_event_records=64, params_given=None,
              max_step=float("inf"), first_step=None, stm=False, n_objects=None):
    """The checked call (all but the per-object arrays) as one blob for the workers:
    the orbit's `Call` (`forms.orbit_call`), GM and the shared params row.

    ``params``: the shared row, or None when each chunk brings its own rows;
    ``params_given``: what the user gave (its width is checked here, before
    any chunk runs; default ``params``); ``stm``: each chunk returns its state
    transition matrices too (``f`` is differentiated here first, so that a
    function that cannot be is refused before any chunk runs); ``n_objects``: the
    number of objects, where ``(N, M)`` per-object times of flight are taken (the
    blob then has none: each chunk brings its rows). Returns ``(blob, tofs, events,
    max_event_records)`` as checked.
    """
    k = check_gm(k)
    tofs = check_tofs(tofs, n_objects, front="Dask")
    max_step, first_step = step_options(max_step, first_step, tofs)
    rtol, atol, f, events, max_steps, records = call_options(
        rtol, atol, f, events, max_steps, max_event_records,
        params if params_given is None else params_given, stacklevel=6)
    checked, checked_events = bounds_checked(f, events)
    call = orbit_call("cowell Dask", checked, f, checked_events, tofs, rtol, atol, max_steps,
                      records, stm=check_stm(stm), max_step=max_step, first_step=first_step)
    # f first: a function the workers cannot import is named as the user gave it
    blob = core.pack(f=f, **vars(call.without_objects()), k=float(k), rows=params)
    return blob, tofs, events, records


def _states(value, name, unit):
    if core.is_dask_array(value):
        return core.dask_rows(value, name, width=3)
    array = to_value(value, unit, name)
    if array.ndim not in (1, 2) or array.shape[-1] != 3:
        raise ValueError(f"{name}: expected shape (3,) or (N, 3), got {array.shape}")
    return (array[None, :] if array.ndim == 1 else array), array.ndim == 1


def cowell(k, r0, v0, tofs, rtol=1e-11, atol=1e-12, *, f=None, params=None, events=(),
           max_steps=100_000, max_event_records=64, stm=False, max_step=float("inf"),
           first_step=None):
    """``hapsira_cowell.cowell`` for Dask arrays ``r0``, ``v0`` and/or ``params``.

    Arguments as ``cowell()``; the per-object arrays are chunked along the
    object axis (the first Dask array's chunks; numpy arrays are cut the
    same way). Nothing is computed here: returns a `DaskCowellResult`
    whose fields are Dask arrays in km, km/s and s. Plain numbers are checked
    for units as by the numpy call (`UnitsWarning`), but Dask arrays of
    states are not (that would compute them), nor are the results.
    ``stm=True`` adds ``stm`` ``(N, M, 6, 6)``, each chunk's matrices integrated
    on its worker, bit for bit the numpy call's. Per-object times of flight
    ``tofs`` ``(N, M)`` (numpy rows, NaN-padded as for ``cowell()``) are cut into
    the objects' chunks, each chunk taking its own rows.
    """
    stm = check_stm(stm)
    plain = [not is_quantity(x) for x in (k, r0, v0, tofs)]
    r0, single = _states(r0, "r0", u.km)
    v0, single_v = _states(v0, "v0", u.km / u.s)
    if single != single_v:
        raise ValueError(f"r0, v0: shapes differ ({r0.shape} and {v0.shape})")
    n = r0.shape[0]
    if v0.shape[0] != n:
        raise ValueError(f"r0, v0: number of objects differs ({n} and {v0.shape[0]})")
    if core.is_dask_array(params):
        shared, per_object = core.dask_params(params, n)
    else:
        shared = checks.params(params, n)
        shared, per_object = (shared, None) if shared.shape[0] == 1 or n == 1 \
            else (None, shared)
    blob, tofs, events, records = pack_call(k, tofs, rtol, atol, f=f, params=shared,
                                            events=events, max_steps=max_steps,
                                            max_event_records=max_event_records,
                                            params_given=params, max_step=max_step,
                                            first_step=first_step, stm=stm, n_objects=n)
    check_units(k if plain[0] else None,
                r0 if plain[1] and not core.is_dask_array(r0) else None,
                v0 if plain[2] and not core.is_dask_array(v0) else None,
                tofs=tofs if plain[3] else None)
    arrays = core.object_arrays([r0, v0] + ([] if per_object is None else [per_object])
                                + ([tofs] if tofs.ndim == 2 else []))
    call, _ = core.call_of(blob)
    shapes = _shapes(call)
    fields = core.blocks(_propagate_rows, blob, arrays, list(shapes.values()), "hapsira-cowell")
    result = call.of_flat(DaskCowellResult, dict(zip(shapes, fields)), single)
    result.tofs = tofs
    return result


class DaskCowellResult(core.DaskResult, CowellResult):
    """`hapsira_cowell.CowellResult` with Dask arrays (km, km/s, s; no Quantities).

    Fields and shapes as the numpy result, plus ``tofs`` (numpy). Nothing is
    computed until asked: `compute` (the numpy result), `persist`,
    `to_zarr` (stream to a Zarr store), ``res[i]`` (object i alone), or
    ``dask.compute`` on fields, together, so that each chunk runs once.
    """

    BASE = CowellResult
    PRODUCER: ClassVar[dict] = {"producer": "hapsira_cowell.cowell",
                "units": {"rr": "km", "vv": "km/s", "tofs": "s", "t_events_*": "s"}}

    def _rebuild(self, lazy):
        result = super()._rebuild(lazy)
        result.tofs = self.tofs
        return result

    def _fields(self):
        return dict(self.arrays(), tofs=self.tofs)


# ---------------------------------------------------------------- the batch driver

def open_client(scheduler):
    """A ``distributed.Client`` for ``hapsira-cowell propagate --scheduler``.

    ``scheduler``: a scheduler's address (``tcp://host:8786``; its workers
    keep their own ``HAPSIRA_TARGET``), or ``"local"``: worker processes on
    this machine with this process's environment, sized for the target: one
    single-threaded worker per core on ``cpu``, one worker on ``parallel``
    (numba's threads use the cores) and under the CUDA simulator, one per GPU
    on ``cuda`` (dask-cuda's ``LocalCUDACluster``). Closing the client closes
    a local cluster.
    """
    import logging

    import distributed

    if scheduler != "local":
        return distributed.Client(scheduler, timeout="30s")
    from hapsira_core.targets import active
    cluster = active.local_dask_cluster(processes=True, threads_per_worker=1,
                                        silence_logs=logging.ERROR)
    client = distributed.Client(cluster)
    client._hapsira_cluster = cluster  # closed with the client by close_client()
    return client


def close_client(client):
    """Close a client of `open_client` (and the local cluster it started)."""
    cluster = getattr(client, "_hapsira_cluster", None)
    client.close()
    if cluster is not None:
        cluster.close()


def workers(client):
    """``{address: worker_info()}`` of the cluster's workers (target, kernels)."""
    return client.run(core.worker_info)


def warm_up(client, blob, r0, v0, params):
    """Compile the kernel on every worker now (one object each), so that timings and
    progress measure propagation alone."""
    import distributed
    futures = [client.submit(propagate_chunk, blob, r0[:1], v0[:1], params[:1], pure=False,
                             workers=[address], allow_other_workers=False)
               for address in client.scheduler_info()["workers"]]
    distributed.wait(futures)
    for future in futures:
        future.result()  # a compile error is raised here, in the user's terms


def map_chunks(client, blob, r0, v0, params, chunk, retries=core.RETRIES):
    """Yield ``(first, last, CowellResult)`` for chunks of objects run on the cluster, in
    order. A few chunks per worker are in flight at a time, so that the results
    held here stay bounded whatever the catalog's size; a chunk that raises is
    run again up to ``retries`` times, one whose worker died runs elsewhere."""
    from collections import deque

    n = r0.shape[0]
    window = 2 * max(1, len(client.scheduler_info()["workers"]))
    starts = iter(range(0, n, chunk))
    pending = deque()

    def submit():
        first = next(starts, None)
        if first is None:
            return
        last = min(first + chunk, n)
        pending.append((first, last, client.submit(
            propagate_chunk, blob, r0[first:last], v0[first:last], params[first:last],
            pure=False, retries=retries)))

    for _ in range(window):
        submit()
    while pending:
        first, last, future = pending.popleft()
        values = future.result()
        future.release()
        submit()
        call, _ = core.call_of(blob)
        yield first, last, call.of_flat(CowellResult, dict(zip(_shapes(call), values)), False)
