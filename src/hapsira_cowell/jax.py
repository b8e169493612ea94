"""``cowell()`` for JAX: the same solver inside ``jax.jit``, on XLA's own buffers.

Needs the ``jax`` extra (``pip install 'hapsira-cowell[jax]'``) and 64-bit
JAX (``jax.config.update("jax_enable_x64", True)``). On ``HAPSIRA_TARGET=cpu``
or ``parallel`` it runs on JAX's CPU platform, on ``cuda`` on JAX's GPU
platform; see ``docs/jax.md``.
"""

import warnings
from typing import NamedTuple

import numpy as np

# first: without JAX it raises an ImportError that names the extra to install
from hapsira_core.xla import DerivativeError, xla_kernel

import jax  # noqa: E402  (after the import that explains a missing JAX)
import jax.numpy as jnp  # noqa: E402

from .events import Event
from .perturbations import two_body
from .units import is_quantity

__all__ = ["cowell", "CowellResult", "DerivativeError"]

EPS = np.finfo(np.float64).eps


class CowellResult(NamedTuple):
    """What :func:`cowell` returns: JAX arrays, a pytree (returnable from ``jax.jit``).

    Fields and shapes as :class:`hapsira_cowell.CowellResult`: ``rr``, ``vv``
    ``(N, M, 3)``; ``status``, ``nfev``, ``nsteps`` ``(N,)``; ``t_events``
    a tuple of one ``(N, C)`` array per event; ``n_events`` ``(N, E)``. For
    one object (``r0`` of shape ``(3,)``) the N axis is dropped.
    """

    rr: jax.Array
    vv: jax.Array
    status: jax.Array
    t_events: tuple
    n_events: jax.Array
    nfev: jax.Array
    nsteps: jax.Array


def _solver(f, events, records):
    """The adapter to :mod:`hapsira_cowell.cowell`: its kernel and how to call it.

    The one place that knows the numpy call's internals. It relies on
    ``cowell._kernel(f, event_functions)`` returning the ObjectKernel, whose
    arguments are (``cowell._ARGS``) ``r0 (N,3), v0 (N,3), tofs (M,),
    params (N|1,P), fconf (13,) = [k, rtol(6), atol(6)], iconf (2,) =
    [max_steps, n_events], ev_direction (E,), ev_max (E,), ev_consts (E,Q)``
    then the outputs ``rr, vv (N,M,3), info (N,3) = [status, nfev, nsteps],
    t_events (N,E,C), n_events (N,E), scratch (N,E,2)``; with no event E is 1
    and C is 1. Returns ``(XlaKernel, event arrays, output-only sizes)``.
    """
    from .cowell import _kernel

    kernel = _kernel(f, tuple(e.device_function for e in events))
    slots = max(len(events), 1)
    width = max([len(e.constants) for e in events] + [1])
    ev_direction = np.zeros(slots)
    ev_max = np.zeros(slots, dtype=np.int64)
    ev_consts = np.zeros((slots, width))
    for index, event in enumerate(events):
        ev_direction[index] = event.direction
        ev_max[index] = event.max_occurrences
        ev_consts[index, : len(event.constants)] = event.constants
    sizes = {"c": max(records, 1) if events else 1, "ninfo": 3, "two": 2}
    return (xla_kernel(kernel, "hapsira_cowell.jax.cowell kernel"),
            (ev_direction, ev_max, ev_consts), sizes)


def _concrete(value):
    """``value`` as a numpy array, or None when it is traced (inside jit/vmap)."""
    try:
        return np.asarray(value)
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        return None


def _no_quantity(value, name, unit):
    if is_quantity(value):
        raise TypeError(f"{name}: expected plain numbers in {unit} (JAX arrays carry no "
                        f"units), got an astropy {type(value).__name__}")


def _array(value, name, unit):
    _no_quantity(value, name, unit)
    try:
        return jnp.asarray(value, dtype=jnp.float64)
    except (TypeError, ValueError) as error:
        raise TypeError(f"{name}: expected real numbers, got {type(value).__name__}") from error


def _static(value, name):
    array = _concrete(value)
    if array is None:
        raise TypeError(f"{name}: expected concrete numbers (it fixes the compiled "
                        "program), got a traced value; pass it from outside jax.jit")
    return array


def _tolerance(value, name):
    array = np.asarray(_static(value, name), dtype=np.float64)
    if array.ndim == 0:
        array = np.full(6, float(array))
    if array.shape != (6,):
        raise ValueError(f"{name}: expected a scalar or 6 values (one per state component), "
                         f"got shape {array.shape}")
    if not np.all(np.isfinite(array)) or np.any(array < 0):
        raise ValueError(f"{name}: expected finite non-negative tolerances, got {value!r}")
    return array


def _positive_int(value, name, minimum):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name}: expected an integer >= {minimum}, got {value!r}")
    return int(value)


def _states(r0, v0):
    r0 = _array(r0, "r0", "km")
    v0 = _array(v0, "v0", "km/s")
    for name, array in (("r0", r0), ("v0", v0)):
        if array.ndim not in (1, 2) or array.shape[-1] != 3:
            raise ValueError(f"{name}: expected shape (3,) or (N, 3), got {array.shape}")
    if r0.ndim != v0.ndim:
        raise ValueError(f"r0, v0: shapes differ ({r0.shape} and {v0.shape})")
    single = r0.ndim == 1
    if single:
        r0, v0 = r0[None, :], v0[None, :]
    if r0.shape[0] != v0.shape[0]:
        raise ValueError(f"r0, v0: number of objects differs ({r0.shape[0]} and {v0.shape[0]})")
    return r0, v0, single


def _tofs(tofs):
    tofs = _array(tofs, "tofs", "s")
    if tofs.ndim == 0:
        tofs = tofs[None]
    if tofs.ndim != 1 or tofs.size == 0:
        raise ValueError(f"tofs: expected a non-empty 1-D array of times, got shape {tofs.shape}")
    values = _concrete(tofs)
    if values is not None:  # traced times are the caller's to keep valid
        if not np.all(np.isfinite(values)):
            raise ValueError("tofs: expected finite times, got NaN or inf")
        if np.any(values > 0) and np.any(values < 0):
            raise ValueError("tofs: expected times all of one sign (negative = backward), "
                             "got both")
        if np.any(np.diff(np.abs(values)) < 0):
            raise ValueError("tofs: expected times sorted away from 0 (increasing, or "
                             "decreasing when backward)")
    return tofs


def _params(params, n):
    if params is None:
        return jnp.zeros((1, 1))
    array = _array(params, "params", "the units f expects")
    if array.ndim == 1:
        array = array[None, :]
    if array.ndim != 2 or array.shape[0] not in (1, n):
        raise ValueError(f"params: expected shape (P,) or ({n}, P), got {np.shape(params)}")
    if array.shape[1] == 0:
        array = jnp.zeros((array.shape[0], 1))
    return array


def _gm(k):
    k = _array(k, "k", "km^3/s^2")
    if k.ndim != 0:
        raise ValueError(f"k: expected a scalar GM in km^3/s^2, got shape {k.shape}")
    value = _concrete(k)
    if value is not None and (not np.isfinite(value) or value <= 0):
        raise ValueError(f"k: expected a positive finite GM in km^3/s^2, got {float(value)!r}")
    return k


def cowell(k, r0, v0, tofs, rtol=1e-11, atol=1e-12, *, f=None, params=None, events=(),
           max_steps=100_000, max_event_records=64):
    """:func:`hapsira_cowell.cowell` on JAX arrays, usable inside ``jax.jit``.

    Same arguments, semantics and numbers as the numpy call, in km, km/s, s
    (no Quantities). ``k``, ``r0``, ``v0``, ``tofs`` and ``params`` may be
    traced; ``rtol``, ``atol``, ``f``, ``events``, ``max_steps`` and
    ``max_event_records`` fix the compiled program and must be concrete.
    Traced ``tofs`` are not checked (sorted away from 0, one sign): keep them
    valid. ``jax.vmap`` over a leading axis of ``r0``/``v0``/``params`` runs
    the batch as one call with more objects; ``jax.grad`` raises
    :class:`~hapsira_core.xla.DerivativeError`.

    Returns
    -------
    CowellResult
        A named tuple of JAX arrays.
    """
    f = two_body if f is None else f
    if not callable(f):
        raise ValueError(f"f: expected an hjit function, got {type(f).__name__}")
    events = tuple(events)
    for index, event in enumerate(events):
        if not isinstance(event, Event):
            raise ValueError(f"events[{index}]: expected an hapsira_cowell.events.Event, "
                             f"got {type(event).__name__}")
    rtol = _tolerance(rtol, "rtol")
    atol = _tolerance(atol, "atol")
    if np.any(rtol < 100 * EPS):
        warnings.warn(f"rtol below 100 * eps; using rtol = max(rtol, {100 * EPS})",
                      stacklevel=2)
        rtol = np.maximum(rtol, 100 * EPS)
    max_steps = _positive_int(max_steps, "max_steps", 1)
    records = _positive_int(max_event_records, "max_event_records", 0)
    if not jax.config.jax_enable_x64:
        raise RuntimeError("hapsira_cowell.jax.cowell computes in float64, which JAX "
                           "disables by default: call jax.config.update('jax_enable_x64', "
                           "True) at start-up (or set JAX_ENABLE_X64=1)")
    k = _gm(k)
    r0, v0, single = _states(r0, v0)
    n = r0.shape[0]
    tofs = _tofs(tofs)
    params = _params(params, n)

    kernel, event_arrays, sizes = _solver(f, events, records)
    fconf = jnp.concatenate([k[None], jnp.asarray(rtol), jnp.asarray(atol)])
    iconf = np.array([max_steps, len(events)], dtype=np.int64)
    rr, vv, info, t_events, n_events, _ = kernel(
        r0, v0, tofs, params, fconf, iconf, *event_arrays, n=n, sizes=sizes)

    t_events = tuple(t_events[:, e, :records] for e in range(len(events)))
    n_events = n_events[:, :len(events)]
    status, nfev, nsteps = info[:, 0], info[:, 1], info[:, 2]
    if single:
        rr, vv, status, nfev, nsteps = rr[0], vv[0], status[0], nfev[0], nsteps[0]
        t_events = tuple(t[0] for t in t_events)
        n_events = n_events[0]
    return CowellResult(rr, vv, status, t_events, n_events, nfev, nsteps)
