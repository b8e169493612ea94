"""Dask arrays in, Dask arrays out: one task per chunk of objects, the numpy call run on a worker.

Objects are independent, so a chunk's result is the single-process result
for those objects, bit for bit: each task calls the numpy front
(`hapsira_core.ivp.integrate`, ``hapsira_cowell.cowell``) on its chunk.

How the pieces fit:

* The call's description (functions, events, times, tolerances) travels as
  one pickled blob (`pack`) in which every ``hjit`` function is a
  reference by module and name, so that a worker imports it and compiles it
  for *its own* target (``HAPSIRA_TARGET`` of the worker: cpu, parallel or
  cuda), whatever the client's target is. A worker unpacks a blob once
  (`unpack` is memoised per process) and the kernel registry
  (`hapsira_core.ivp.build.KERNELS`) is per process, so a worker
  compiles each kernel once, at its first task, never per task.
* `blocks` makes the task graph: one task per chunk returns all the
  chunk's outputs at once; each output field is a Dask array picking its
  part, so computing several fields together runs each chunk once.
* Results (`DaskIVPResult` and ``hapsira_cowell.propagation.dask.DaskCowellResult``)
  compute to the numpy results, or stream to Zarr (`DaskResult.to_zarr`)
  chunk by chunk, so that outputs larger than memory never exist in RAM.

Nothing here imports Dask at module level: the numpy path never needs it.
"""

import dataclasses
import functools
import importlib
import io
import math
import os
import pickle
import sys
from typing import ClassVar

import numpy as np

from ..ivp.call import Arrays, Call
from ..ivp.results import TIMES, IVPResult

__all__ = ["any_dask", "is_dask_array", "pack", "unpack", "call_of", "blocks", "zarr_chunk_shape",
           "object_arrays", "DaskResult", "DaskIVPResult", "DaskBatchSolution", "solve_ivp",
           "worker_info",
           "RETRIES", "ZARR_CHUNK_BYTES"]

#: How often ``compute()``/``to_zarr()`` let Dask run a chunk again after it raised
#: (a worker that dies is handled by the scheduler anyway: its tasks run elsewhere).
RETRIES = 2
#: Largest Zarr chunk written, bytes: the object axis keeps the Dask chunks, the
#: time axis is split to stay below this (compressors refuse chunks over 2 GB).
ZARR_CHUNK_BYTES = 64 * 2 ** 20


def _dask_array_class():
    module = sys.modules.get("dask.array")
    return None if module is None else module.Array


def is_dask_array(value):
    """True for a ``dask.array.Array`` (never imports Dask)."""
    cls = _dask_array_class()
    return cls is not None and isinstance(value, cls)


def any_dask(*values):
    """True when any of ``values`` is a Dask array."""
    return _dask_array_class() is not None and any(is_dask_array(v) for v in values)


def _require_dask():
    try:
        import dask.array  # noqa: F401
    except ImportError:  # pragma: no cover - only without the extra
        raise ImportError("Dask arrays need the dask extra: pip install "
                          "'hapsira-cowell[dask]'") from None


# ------------------------------------------------------------ functions by reference

def _is_compiled(obj):
    """An ``hjit`` function: a numba dispatcher (cpu, cuda) or a simulator kernel."""
    return callable(obj) and not isinstance(obj, type) and hasattr(obj, "py_func")


def _place(obj):
    """``(module, qualname)`` when importing them gives ``obj`` itself, else None."""
    python = getattr(obj, "py_func", obj)
    module = getattr(obj, "__module__", None) or getattr(python, "__module__", None)
    qualname = getattr(obj, "__qualname__", None) or getattr(python, "__qualname__", None)
    if not module or not qualname or "<" in qualname or module == "__main__":
        return None
    target = sys.modules.get(module)
    for part in qualname.split("."):
        target = getattr(target, part, None)
    return (module, qualname) if target is obj else None


def _recipe(obj):
    """``(maker, args)`` when a factory made ``obj`` (`hapsira_core.jit.factory`,
    `hapsira_core.jit.remember`) and makes the same object again: a worker
    calls the factory (memoised there too) instead of importing ``obj``."""
    from ..kernels import cache
    recipe = cache._RECIPES.get(id(obj))
    if recipe is None:
        return None
    maker, args = recipe
    try:
        same = maker(*args) is obj  # ids are reused: check that the record is obj's
    except Exception:  # noqa: BLE001 - a stale record is no recipe
        return None
    return (maker, tuple(args)) if same else None


class NotImportableError(TypeError):
    """An ``hjit`` function that Dask workers could not import."""


class _Pickler(pickle.Pickler):
    def persistent_id(self, obj):
        if not _is_compiled(obj):
            return None
        recipe = _recipe(obj)
        if recipe is not None:
            return ("made",) + recipe
        place = _place(obj)
        if place is None:
            python = getattr(obj, "py_func", obj)
            raise NotImportableError(
                f"{getattr(python, '__qualname__', obj)!r} (module "
                f"{getattr(python, '__module__', '?')!r}) cannot be imported by Dask workers, "
                "which import hjit functions by module and name so that each worker compiles "
                "them once for its own target: define it at the top level of a module on "
                "the workers' Python path (not in __main__, a notebook or inside a "
                "function), or, for a function made by a factory, record how with "
                "hapsira_core.jit.remember(function, factory, args)")
        return ("hjit",) + place


class _Unpickler(pickle.Unpickler):
    def persistent_load(self, pid):
        if pid[0] == "made":
            return pid[1](*pid[2])
        _, module, qualname = pid
        target = importlib.import_module(module)
        for part in qualname.split("."):
            target = getattr(target, part)
        return target


def pack(**fields):
    """One blob (bytes) holding ``fields``, ``hjit`` functions by reference.

    A field that cannot be sent is named in the error.
    """
    for name, value in fields.items():
        try:
            _Pickler(io.BytesIO(), protocol=pickle.HIGHEST_PROTOCOL).dump(value)
        except NotImportableError as error:
            raise NotImportableError(f"{name}: {error}") from None
        except (pickle.PicklingError, TypeError, AttributeError) as error:
            raise TypeError(f"{name}: cannot be sent to Dask workers ({error})") from None
    buffer = io.BytesIO()
    _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(fields)
    return buffer.getvalue()


@functools.lru_cache(maxsize=16)
def unpack(blob):
    """The fields of `pack`, once per process and blob (same objects every task)."""
    return _Unpickler(io.BytesIO(blob)).load()


# ------------------------------------------------------------------ inputs as chunks

def _check_dask_real(value, name):
    if value.dtype.kind not in "iuf":
        raise TypeError(f"{name}: expected real numbers, got a Dask array of dtype "
                        f"{value.dtype}")
    if any(math.isnan(c) for chunks in value.chunks for c in chunks):
        raise ValueError(f"{name}: the Dask array's chunk sizes are unknown; call "
                         f"{name}.compute_chunk_sizes() first")


def dask_rows(value, name, width=None, max_width=None):
    """A Dask ``(n,)`` or ``(N, n)`` array checked without computing it: ``(array
    as (N, n), single)``. ``width``: the n required; ``max_width``: its maximum."""
    _check_dask_real(value, name)
    if value.ndim not in (1, 2) or value.shape[-1] == 0:
        raise ValueError(f"{name}: expected shape (n,) or (N, n) with n >= 1, got "
                         f"{value.shape}")
    if width is not None and value.shape[-1] != width:
        raise ValueError(f"{name}: expected shape ({width},) or (N, {width}), got {value.shape}")
    if max_width is not None and value.shape[-1] > max_width:
        raise ValueError(f"{name}: states of {value.shape[-1]} components are not "
                         f"supported (at most {max_width})")
    single = value.ndim == 1
    return (value[None, :] if single else value), single


def dask_params(value, n_objects):
    """params given as a Dask array: ``(shared (1, P) numpy row or None, per-object
    (N, P) Dask array or None)``; a shared row is small and computed here."""
    _check_dask_real(value, "params")
    if value.ndim == 1 or (value.ndim == 2 and value.shape[0] == 1 and n_objects != 1):
        from ..ivp import checks
        return checks.params(value.compute(), n_objects), None
    if value.ndim != 2 or value.shape[0] != n_objects:
        raise ValueError(f"params: expected shape (P,) or ({n_objects}, P), got {value.shape}")
    if value.shape[1] == 0:
        return np.zeros((1, 1)), None
    return None, value


def object_arrays(arrays):
    """``arrays`` ((N, k) numpy or Dask, one at least Dask) as Dask arrays with the
    same chunks along the object axis (the first Dask array's) and one chunk
    across. Numpy arrays are cut into those chunks."""
    import dask.array as da
    first = next(a for a in arrays if is_dask_array(a))
    out = []
    for array in arrays:
        chunks = (first.chunks[0], (array.shape[1],))
        if is_dask_array(array):
            out.append(array if array.chunks == chunks else array.rechunk(chunks))
        else:
            out.append(da.from_array(np.asarray(array), chunks=chunks))
    return out


# ---------------------------------------------------------------------- task graph

def _field(raw, index, trailing):
    """Output ``index`` of a chunk's task; its shape is checked (a mismatch would
    otherwise go unnoticed by Dask and misplace rows)."""
    block = raw[index]
    if block.shape[1:] != trailing:
        raise RuntimeError(f"hapsira dask: output {index} of a chunk has shape {block.shape}, "
                           f"expected (n, *{trailing})")
    return block


def blocks(task, blob, arrays, outputs, name, keep_raw=False):
    """Dask arrays of the outputs of ``task(blob, *chunks)`` over the object chunks.

    ``arrays``: Dask arrays ``(N, k)`` aligned by `object_arrays`;
    ``task`` returns a tuple of arrays, one per ``outputs`` entry
    ``(trailing shape, dtype)``, each with the chunk's objects first (and may
    return more after them: outputs whose shape differs from chunk to chunk,
    such as dense output's step records). ``keep_raw``: also return the
    chunks' tasks themselves (a Dask array with one block per chunk, each the
    task's tuple), for those further outputs.
    """
    import dask.array as da
    raw = da.map_blocks(task, blob, *arrays, dtype=object, drop_axis=1,
                        meta=np.empty((0,), dtype=object), token=name)
    fields = []
    for index, (trailing, dtype) in enumerate(outputs):
        trailing = tuple(trailing)
        fields.append(raw.map_blocks(
            _field, index=index, trailing=trailing, dtype=dtype,
            chunks=(raw.chunks[0],) + tuple((d,) for d in trailing),
            new_axis=list(range(1, 1 + len(trailing))) or None,
            meta=np.empty((0,) * (1 + len(trailing)), dtype=dtype), token=f"{name}-out{index}"))
    return (fields, raw) if keep_raw else fields


# ------------------------------------------------------------------------- results

def zarr_chunk_shape(shape, itemsize, rows):
    """A Zarr chunk for an array of ``shape``: ``rows`` objects (the chunks as
    computed), later axes cut, outermost first, until a chunk holds at most
    `ZARR_CHUNK_BYTES` (compressors refuse chunks over 2 GB)."""
    target = [max(1, rows)] + [max(1, d) for d in shape[1:]]
    for axis in range(1, len(shape)):
        others = itemsize * math.prod(target[:axis] + target[axis + 1:])
        if others * target[axis] <= ZARR_CHUNK_BYTES:
            break
        target[axis] = max(1, ZARR_CHUNK_BYTES // others)
    return tuple(target)


def _zarr_chunks(array):
    """``array`` rechunked as written to Zarr: object chunks made regular (Zarr
    needs that), later axes as `zarr_chunk_shape`. Unchanged chunks cost
    nothing (no rechunk task)."""
    rows = array.chunks[0]
    regular = all(c == rows[0] for c in rows[:-1]) and rows[-1] <= rows[0]
    shape = zarr_chunk_shape(array.shape, array.dtype.itemsize,
                             rows[0] if regular else max(rows))
    return array.rechunk(shape)


class DaskResult:
    """The Dask view of a result type (mixed in before it): the same fields as Dask
    arrays, computed when asked (`compute`, `persist`, `to_zarr`, ``res[i]``, or
    ``dask.compute`` on fields together, so that each chunk runs once)."""

    #: The result class this one is a view of (what `compute` returns).
    BASE = None
    #: Zarr group attributes besides the fields' documentation (`to_zarr`).
    PRODUCER: ClassVar[dict] = {}

    def _fields(self):
        """``{name: array}``: what `to_zarr` writes, as the result shows it."""
        return self.arrays()

    def _attrs(self):
        return {**self.PRODUCER, "fields": {f.name: f.doc for f in self.FIELDS},
                "status_messages": {str(k): v for k, v in self.MESSAGES.items()}}

    def _numpy(self, computed, single=None):
        """The numpy result from computed `arrays`."""
        return self.with_arrays(computed, self.BASE, single)

    def _rebuild(self, lazy):
        """This result with other Dask arrays (persisted ones)."""
        return self.with_arrays(lazy)

    def _summary(self):
        n = self.status.shape[0] if self.status.ndim else 1
        chunks = len(self.status.chunks[0]) if self.status.ndim else 1
        return f"objects={n}, chunks={chunks}, Dask arrays: .compute() or .to_zarr(path)"

    def _object(self, i):
        """Object ``i`` of the numpy result, its row computed alone."""
        import dask
        if i is None:
            return self.compute()[0]
        rows = {name: array if field.role == TIMES and array.ndim == 1 else
                array[i:i + 1] for name, field, array in self._flat()}
        return self._numpy(dask.compute(rows)[0], single=False)[0]

    def compute(self, retries=RETRIES, **kwargs):
        """The numpy result (every chunk run once; ``retries``: reruns of a chunk that
        raised); ``kwargs`` go to ``dask.compute``."""
        import dask
        lazy = self.arrays()
        values = dask.compute(*lazy.values(), retries=retries, **kwargs)
        return self._numpy(dict(zip(lazy, values)))

    def persist(self, retries=RETRIES, **kwargs):
        """The same result with its chunks computed and kept on the workers."""
        import dask
        lazy = self.arrays()
        values = dask.persist(*lazy.values(), retries=retries, **kwargs)
        return self._rebuild(dict(zip(lazy, values)))

    def to_zarr(self, store, *, overwrite=False, retries=RETRIES, compute=True,
                storage_options=None, **kwargs):
        """Write every field to a Zarr group at ``store``, chunk by chunk on the workers.

        ``store``: a path or URL (``storage_options`` go to fsspec) that every
        worker can write to. Arrays are named as the result's fields
        (``t_events`` per event as ``t_events_0``, ...), with the fields'
        documentation, units and status messages in the group's attributes. Each
        chunk of objects is computed once and written as it finishes, so the
        result never has to fit in memory. ``overwrite``: replace an existing
        group (else it is an error). ``compute=False`` returns the Dask object
        that writes when computed; ``kwargs`` go to ``dask.compute``.
        """
        import dask
        import dask.array as da
        try:
            import zarr
        except ImportError:
            raise ImportError("Zarr output needs zarr >= 3 (Python >= 3.11): pip install "
                              "'hapsira-cowell[dask]'") from None
        if not isinstance(store, (str, os.PathLike)):
            raise TypeError(f"store: expected a path or URL, got {type(store).__name__}")
        store = os.fspath(store)
        group = zarr.open_group(store, mode="w" if overwrite else "w-",
                                storage_options=storage_options)
        group.attrs.update(self._attrs())
        writes = []
        for name, array in self._fields().items():
            if not is_dask_array(array):
                group.create_array(name, data=np.asarray(array))
                continue
            if array.ndim == 0:  # one object's status, nfev...: one number
                group.create_array(name, data=np.asarray(array.compute(retries=retries)))
                continue
            if 0 in array.shape:
                group.create_array(name, shape=array.shape, dtype=array.dtype)
                continue
            writes.append(da.to_zarr(_zarr_chunks(array), store, component=name, mode="w",
                                     storage_options=storage_options, compute=False))
        if not compute:
            return writes
        dask.compute(*writes, retries=retries, **kwargs)
        return group


class DaskIVPResult(DaskResult, IVPResult):
    """`hapsira_core.ivp.IVPResult` with Dask arrays: the same fields and
    shapes (``t`` stays numpy), computed when asked (`compute`,
    `to_zarr`, ``res[i]``, or ``dask.compute`` on the fields). With
    ``dense_output=True``, ``sol`` is a `DaskBatchSolution`: each chunk's step
    records stay with the chunk (on its worker once persisted)."""

    BASE = IVPResult
    PRODUCER: ClassVar[dict] = {"producer": "hapsira_core.ivp.solve_ivp"}

    def compute(self, retries=RETRIES, **kwargs):
        if not isinstance(self.sol, DaskBatchSolution):
            return super().compute(retries=retries, **kwargs)
        import dask
        lazy = self.arrays()  # the fields and the step records in one pass over the chunks
        *values, chunks = dask.compute(*lazy.values(), self.sol.chunk_tasks(),
                                       retries=retries, **kwargs)
        result = self._numpy(dict(zip(lazy, values)))
        result.set_dense(self.sol.joined(chunks))
        return result

    def persist(self, retries=RETRIES, **kwargs):
        if not isinstance(self.sol, DaskBatchSolution):
            return super().persist(retries=retries, **kwargs)
        import dask
        lazy = self.arrays()
        *values, raw = dask.persist(*lazy.values(), self.sol.raw, retries=retries, **kwargs)
        result = self._rebuild(dict(zip(lazy, values)))
        result.sol = self.sol.with_raw(raw)
        return result

    def _object(self, i):
        one = super()._object(i)
        if isinstance(self.sol, DaskBatchSolution):
            one.sol = self.sol.object(0 if i is None else i)
        return one


class DaskBatchSolution:
    """``res.sol`` of `solve_ivp` on Dask arrays with ``dense_output=True``.

    ``sol(t)`` is a Dask array ``(N, n, len(t))`` (``(N, n)`` for a number),
    chunked as the objects, each chunk evaluated where its step records are
    (`hapsira_core.ivp.dense.evaluate`: the numpy front's interpolants, so the
    numbers are the numpy call's, bit for bit); ``sol.object(i)`` computes object
    i's chunk and returns its `hapsira_core.ivp.dense.DenseSolution`. The records
    are never gathered in one place unless the result is computed
    (`DaskIVPResult.compute`); a chunk's records are as large as the numpy front
    makes them for its objects (its memory check runs on the worker). Evaluated
    output larger than memory streams to Zarr as any Dask array:
    ``res.sol(t).to_zarr(path)``. Persist the result (``res.persist()``) to keep
    the records on the workers; otherwise every ``sol(t)`` integrates again.
    """

    def __init__(self, raw, blob, first, single):
        self.raw, self._blob, self._first, self.single = raw, blob, first, single

    def with_raw(self, raw):
        return DaskBatchSolution(raw, self._blob, self._first, self.single)

    def chunk_tasks(self):
        """One Dask delayed per chunk: the chunk task's tuple."""
        return list(self.raw.to_delayed().ravel())

    def joined(self, chunks):
        """The numpy front's records ``(method, n, fun, steps, dense, info)`` of all
        objects from the computed chunk tuples (steps padded with NaN to the longest)."""
        return _joined_records(self._blob, self._first, chunks)

    def __call__(self, t):
        from ..ivp.dense import times
        values, scalar = times(t)
        spec = unpack(self._blob)
        n = spec["n"]
        y = self.raw.map_blocks(_evaluate_chunk, self._blob, self._first, values,
                                dtype=np.float64, new_axis=[1, 2],
                                chunks=(self.raw.chunks[0], (n,), (values.size,)),
                                meta=np.empty((0, 0, 0)), token="hapsira-sol")
        if scalar:
            y = y[..., 0]
        return y[0] if self.single else y

    def object(self, i):
        from ..ivp.dense import DenseSolution
        rows = self.raw.chunks[0]
        i = int(i)
        if not 0 <= i < sum(rows):
            raise IndexError(f"i: object {i} of {sum(rows)}")
        chunk = int(np.searchsorted(np.cumsum(rows), i, side="right"))
        start = int(sum(rows[:chunk]))
        values = self.chunk_tasks()[chunk].compute()
        return DenseSolution(_joined_records(self._blob, self._first, [values]), i - start)

    def __repr__(self):
        return (f"DaskBatchSolution(objects={sum(self.raw.chunks[0])}, "
                f"chunks={len(self.raw.chunks[0])})")


def _joined_records(blob, first, chunks):
    spec = unpack(blob)
    info = [c[first] for c in chunks]
    steps = [c[first + 1] for c in chunks]
    dense = [c[first + 2] for c in chunks]
    s = max(x.shape[1] for x in steps)
    d = max(x.shape[1] for x in dense)

    def padded(x, size):
        pad = [(0, 0)] * x.ndim
        pad[1] = (0, size - x.shape[1])
        return np.pad(x, pad, constant_values=np.nan)

    return (spec["method"], spec["n"], spec["fun"],
            np.concatenate([padded(x, s) for x in steps]),
            np.concatenate([padded(x, d) for x in dense]), np.concatenate(info))


def _evaluate_chunk(values, blob, first, t):
    """A chunk's dense output at ``t``: ``(k, n, len(t))``."""
    from ..ivp.dense import evaluate
    spec = unpack(blob)
    return evaluate((spec["method"], spec["n"], spec["fun"], values[first + 1],
                     values[first + 2], values[first]), t)


# ----------------------------------------------------------------------- solve_ivp

class DaskArrays(Arrays):
    """`hapsira_core.ivp.call.Arrays` for Dask arrays, checked without computing them;
    params come back as ``(shared (1, P) row or None, per-object (N, P) rows or None)``."""

    def states(self, y0):
        return dask_rows(y0, "y0") if is_dask_array(y0) else super().states(y0)

    def params(self, params, n_objects, stacklevel):
        if is_dask_array(params):
            return dask_params(params, n_objects)
        shared = super().params(params, n_objects, stacklevel + 1)
        return (shared, None) if shared.shape[0] == 1 or n_objects == 1 else (None, shared)


ARRAYS = DaskArrays()


@functools.lru_cache(maxsize=16)
def call_of(blob):
    """The `Call` of a blob (``pack(**vars(call), ...)``) and the blob's other fields, a
    dict; once per process and blob."""
    spec = dict(unpack(blob))
    names = {field.name for field in dataclasses.fields(Call)}
    return Call(**{name: spec.pop(name) for name in names}), spec


def _solve_block(blob, y0, *rows):
    """One chunk of `solve_ivp`, on a worker: the call run on its objects (numpy).

    ``rows``: the chunk's per-object inputs that the blob names in
    ``spec["per_object"]``, in that order: ``params`` ``(k, P)``, ``span``
    ``(k, 2)`` (t0, tf) and ``t_eval`` ``(k, M)``. Returns the result's arrays as
    `Call.shapes` names them, then with dense output the step records (``info``,
    ``steps``, ``dense``: their length is the chunk's)."""
    from ..ivp import checks
    call, spec = call_of(blob)
    given = dict(zip(spec["per_object"], rows))
    y0, _ = checks.states(y0)
    params, columns = spec["rows"], None
    if "params" in given:
        params, columns = checks.params(given["params"], y0.shape[0]), given["params"].shape[-1]
    t0, tf = call.t0, call.tf
    if "span" in given:
        t0 = np.ascontiguousarray(given["span"][:, 0])
        tf = np.ascontiguousarray(given["span"][:, 1])
    times = given.get("t_eval", call.times)
    y0, params = call.inputs(y0, params, columns=columns)
    raw = call.run(y0, params, t0, tf, times)
    arrays = call.result(raw, params, times=times).arrays()
    fields = tuple(arrays[name] for name in call.shapes())
    if call.dense_output:
        return fields + (raw["info"], raw["steps"], raw["dense"])
    return fields


def solve_ivp(fun, t_span, y0, method="DOP853", t_eval=None, rtol=1e-3, atol=1e-6, *,
              params=None, events=(), max_steps=100_000, max_event_records=64,
              progress=False, max_step=float("inf"), first_step=None, args=None, stm=False,
              jac=None, dense_output=False):
    """`hapsira_core.ivp.solve_ivp` with Dask arrays (``y0`` and/or ``params``).

    Arguments are checked here (`hapsira_core.ivp.call.Call`, the Dask arrays without
    computing them); each chunk of objects is then solved by a worker, on the worker's
    target, with the same `Call` (sent as it is: the blob). Per-object spans (``(N,)``
    t0 and tf) and output times (``t_eval`` ``(N, M)``) are numpy arrays, cut into the
    chunks of ``y0``; ``stm=True`` adds ``stm`` ``(N, n, n, M)`` and ``stm_events``
    (one ``(N, C, n, n)`` per event) as in the numpy front; ``dense_output=True`` makes
    ``res.sol`` a `DaskBatchSolution`. ``jac``, ``progress`` and ``t_eval="steps"`` are
    refused, naming this front (`hapsira_core.ivp.call.FEATURES`). Returns a
    `DaskIVPResult`.
    """
    _require_dask()
    call, y0, (shared, per_object) = Call.check(
        "Dask", fun, t_span, y0, method, t_eval, rtol, atol, params=params, events=events,
        max_steps=max_steps, max_event_records=max_event_records, progress=progress,
        max_step=max_step, first_step=first_step, args=args, stm=stm, jac=jac,
        dense_output=dense_output, arrays=ARRAYS)
    # per-object inputs travel with their chunk of objects, shared ones in the blob
    names, arrays = [], [y0]
    if per_object is not None:
        names.append("params")
        arrays.append(per_object)
    if np.ndim(call.t0) == 1:
        names.append("span")
        arrays.append(np.stack([call.t0, call.tf], axis=1))
    if call.times.ndim == 2:
        names.append("t_eval")
        arrays.append(call.times)
    blob = pack(**vars(call.without_objects()), rows=shared, per_object=tuple(names))
    shapes = call.shapes()
    fields, raw = blocks(_solve_block, blob, object_arrays(arrays), list(shapes.values()),
                         "hapsira-solve_ivp", keep_raw=True)
    result = call.of_flat(DaskIVPResult, dict(zip(shapes, fields)), call.single, t=call.times)
    if call.dense_output:
        result.sol = DaskBatchSolution(raw, blob, len(shapes), call.single)
    return result


# ------------------------------------------------------------------------ workers

def worker_info():
    """This process's target and kernels: ``{"pid", "target", "kernels", "compiled"}``.

    Run it on every worker with ``client.run(hapsira_core.dask.worker_info)``:
    ``compiled`` counts the solver kernels compiled in that process, which
    stays at one per problem however many chunks the worker ran.
    """
    from ..ivp import build
    from ..jit import TARGET
    return {"pid": os.getpid(), "target": TARGET, "kernels": len(build.KERNELS),
            "compiled": sum(k._compiled is not None for k in build.KERNELS.values())}
