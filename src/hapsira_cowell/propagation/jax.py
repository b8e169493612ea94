"""``cowell()`` for JAX: the same solver inside ``jax.jit``, on XLA's own buffers.

Needs the ``jax`` extra (``pip install 'hapsira-cowell[jax]'``) and 64-bit
JAX (``jax.config.update("jax_enable_x64", True)``). It builds the same
:class:`~hapsira_core.ivp.Problem` as :func:`hapsira_cowell.cowell` and runs
it with :func:`hapsira_core.jax.run`. On ``HAPSIRA_TARGET=cpu`` or
``parallel`` it runs on JAX's CPU platform, on ``cuda`` on JAX's GPU
platform; see ``docs/jax.md``.
"""

# first: without JAX it raises an ImportError that names the extra to install
from hapsira_core.fronts.jax import (DerivativeError, concrete, is_jax, option, params_rows,
                                     real, require_x64, run)
from hapsira_core.fronts.jax.pytree import view

import jax.numpy as jnp  # noqa: E402  (after the import that explains a missing JAX)
import numpy as np  # noqa: E402
from hapsira_core.ivp import checks  # noqa: E402
from hapsira_core.ivp.call import refuse  # noqa: E402

from ..units import is_quantity  # noqa: E402
from . import results  # noqa: E402
# the numpy front's checks and its Problem: the orbit adapter the fronts share
from .forms import bounds_checked, call_options, check_states, check_units  # noqa: E402
from .forms import check_stm, orbit_call, step_options, tofs_end  # noqa: E402
from .forms import check_gm as _numpy_gm  # noqa: E402
from .forms import check_state as _numpy_state  # noqa: E402
from .forms import check_tofs as _numpy_tofs  # noqa: E402

__all__ = ["cowell", "CowellResult", "DerivativeError"]


#: `hapsira_cowell.CowellResult` of JAX arrays, a pytree (`hapsira_core.fronts.jax.pytree`).
CowellResult = view(results.CowellResult, __name__)


def _no_quantity(value, name, unit):
    if is_quantity(value):
        raise TypeError(f"{name}: expected plain numbers in {unit} (JAX arrays carry no "
                        f"units), got an astropy {type(value).__name__}")


def _state(value, name, unit):
    """One of r0, v0 as a float64 JAX array, (3,) or (N, 3); the numpy call's
    checks for anything but a JAX array (which may be traced)."""
    _no_quantity(value, name, unit)
    if not is_jax(value):
        return jnp.asarray(_numpy_state(value, name, unit))
    array = real(value, name)
    if array.ndim not in (1, 2) or array.shape[-1] != 3:
        raise ValueError(f"{name}: expected shape (3,) or (N, 3), got {array.shape}")
    return array


def _tofs(tofs, n_objects):
    """Concrete times checked by the numpy call (per-object ``(N, M)`` rows too);
    traced ones by shape only (the caller keeps them sorted away from 0 and of one
    sign), and ``(M,)`` only."""
    _no_quantity(tofs, "tofs", "s")
    values = concrete(tofs)
    if values is not None:
        return jnp.asarray(_numpy_tofs(values, n_objects))
    times = real(tofs, "tofs")
    times = times[None] if times.ndim == 0 else times
    if times.ndim != 1 or times.size == 0:
        raise ValueError(f"tofs: expected a non-empty 1-D array of times, got shape "
                         f"{times.shape} (per-object (N, M) rows must be concrete here: "
                         "each object's end is read from its row)")
    return times


def _gm(k):
    _no_quantity(k, "k", "km^3/s^2")
    value = concrete(k)
    if value is not None:
        return jnp.asarray(_numpy_gm(value))
    k = real(k, "k")
    if k.ndim != 0:
        raise ValueError(f"k: expected a scalar GM in km^3/s^2, got shape {k.shape}")
    return k


def cowell(k, r0, v0, tofs, rtol=1e-11, atol=1e-12, *, f=None, params=None, events=(),
           max_steps=100_000, max_event_records=64, stm=False, max_step=float("inf"),
           first_step=None, progress=False):
    """:func:`hapsira_cowell.cowell` on JAX arrays, usable inside ``jax.jit``.

    Same arguments, semantics and numbers as the numpy call, in km, km/s, s
    (no Quantities). ``k``, ``r0``, ``v0``, ``tofs`` and ``params`` may be
    traced; ``rtol``, ``atol``, ``f``, ``events``, ``max_steps`` and
    ``max_event_records`` fix the compiled program and must be concrete.
    Traced ``tofs`` are not checked (sorted away from 0, one sign): keep them
    valid; per-object ``(N, M)`` rows are taken when concrete. ``max_step`` and
    ``first_step`` as in the numpy call (concrete numbers). ``stm=True`` (concrete:
    it fixes the program) adds ``stm`` ``(N, M, 6, 6)``, bit for bit the numpy
    call's (the same kernel). ``jax.vmap`` over a leading axis of ``k``/``r0``/``v0``/``params``
    runs the batch as one call with more objects; ``jax.grad`` raises
    :class:`~hapsira_core.fronts.jax.xla.DerivativeError`; ``progress=True`` is refused
    (`hapsira_core.ivp.call.FEATURES`). Concrete ``k``,
    ``r0``, ``v0`` are checked for units as by the numpy call
    (`UnitsWarning`); traced ones and the results are not.

    Returns
    -------
    CowellResult
        `hapsira_cowell.CowellResult`'s fields as JAX arrays, a pytree.
    """
    refuse("cowell JAX", progress=progress)
    stm = check_stm(stm)
    require_x64("hapsira_cowell.propagation.jax.cowell")
    # the order of the numpy call's checks
    k = _gm(k)
    r0, v0, single = check_states(r0, v0, state=_state)
    n = r0.shape[0]
    tofs = _tofs(tofs, n)
    known = concrete(tofs)
    max_step, first_step = checks.step_sizes(
        option(max_step, "max_step"), None if first_step is None else
        option(first_step, "first_step")) if known is None else step_options(
        option(max_step, "max_step"), None if first_step is None else
        option(first_step, "first_step"), known)
    rows = params_rows(params, n)
    rtol, atol, f, events, max_steps, records = call_options(
        option(rtol, "rtol"), option(atol, "atol"), f, events, max_steps, max_event_records,
        params, stacklevel=4)
    # concrete values only, as the numpy call (traced ones cannot be looked at)
    check_units(concrete(k), concrete(r0), concrete(v0), stacklevel=3, tofs=known)
    concrete_rows = concrete(rows)
    if concrete_rows is not None:
        for event in events:
            event.check_params(np.asarray(concrete_rows)[:, :checks.columns_given(params)])
    user_f = f
    f, events = bounds_checked(f, events)
    call = orbit_call("cowell JAX", f, user_f, events, tofs, rtol, atol, max_steps, records,
                      stm=stm, single=single, max_step=max_step, first_step=first_step,
                      end=tofs[-1] if known is None else tofs_end(known))  # per-object rows: each its own
    # GM first in every row, as the numpy call: a traced or vmapped k is data
    params = jnp.concatenate((jnp.broadcast_to(k, (rows.shape[0], 1)), rows), axis=1)
    y0 = jnp.concatenate((r0, v0), axis=1)
    if stm:  # as the numpy call: Phi(0) = I after each state
        y0 = jnp.concatenate((y0, jnp.broadcast_to(jnp.eye(6).ravel(), (y0.shape[0], 36))),
                             axis=1)
    raw = run(call.problem(), y0, params, call.t0, call.tf, call.rtol, call.atol,
              "hapsira_cowell.propagation.jax.cowell kernel")
    return CowellResult.from_kernel(raw, call.single)
