"""``Orbit`` objects (hapsira, poliastro, or anything shaped like them) in, `cowell` out.

An orbit here is any object with ``r`` and ``v`` (astropy Quantities, the
state in the attractor's frame), ``attractor.k`` (GM as a Quantity) and
``epoch`` (an astropy ``Time``): hapsira's and poliastro's ``Orbit`` are.
`states_from_orbits` turns a list of them into `cowell`'s inputs at one
common epoch (or one per orbit); `propagate_orbits` propagates them from there and
returns an `OrbitsResult`: `cowell`'s result with the ``epoch`` beside it.
"""

import functools
import warnings

import numpy as np
from astropy import units as u
from astropy.time import Time

from hapsira_core.ivp.results import ATTRIBUTE, Field

from .results import CowellResult

__all__ = ["OrbitsResult", "propagate_orbits", "states_from_orbits"]


def _orbit_list(orbits):
    if all(hasattr(orbits, name) for name in ("r", "v", "epoch")):
        return [orbits]  # a single orbit
    try:
        return list(orbits)
    except TypeError:
        raise TypeError(f"orbits: expected an Orbit or a sequence of them (objects with r, v, "
                        f"attractor.k and epoch), got {type(orbits).__name__}") from None


def _read(orbit, index):
    """(k, r, v, epoch) of one orbit in km^3/s^2, km, km/s."""
    where = f"orbits[{index}]"
    for name in ("r", "v", "epoch", "attractor"):
        if not hasattr(orbit, name):
            raise TypeError(f"{where}: expected an Orbit (r, v, attractor.k, epoch), got "
                            f"{type(orbit).__name__!r} without {name!r}")
    if not hasattr(orbit.attractor, "k"):
        raise TypeError(f"{where}.attractor: expected a body with k (GM), got "
                        f"{type(orbit.attractor).__name__}")
    values = []
    for name, value, unit in (("attractor.k", orbit.attractor.k, u.km ** 3 / u.s ** 2),
                              ("r", orbit.r, u.km), ("v", orbit.v, u.km / u.s)):
        if not isinstance(value, u.Quantity):
            raise TypeError(f"{where}.{name}: expected an astropy Quantity in {unit} or a "
                            f"compatible unit, got {type(value).__name__}")
        try:
            values.append(np.asarray(value.to_value(unit), dtype=np.float64))
        except u.UnitConversionError:
            raise ValueError(f"{where}.{name}: expected a quantity in {unit} or a compatible "
                             f"unit, got {value.unit}") from None
    k, r, v = values
    if k.shape != () or r.shape != (3,) or v.shape != (3,):
        raise ValueError(f"{where}: expected a scalar k and 3-vectors r, v, got shapes "
                         f"{k.shape}, {r.shape}, {v.shape}")
    if not isinstance(orbit.epoch, Time) or not orbit.epoch.isscalar:
        raise TypeError(f"{where}.epoch: expected a single astropy Time, got "
                        f"{type(orbit.epoch).__name__}")
    return float(k), r, v, orbit.epoch


def _advance(k, r0, v0, offsets, f, params, rtol, atol):
    """States after ``offsets[i]`` seconds (either sign, 0 included), each object
    integrated to its own offset (one time of flight per object, ``(N, 1)``): its state
    is its last step's end, the same number whichever other objects share the call."""
    from .api import cowell
    from .forms import units_unchecked

    with units_unchecked():  # from Quantities: the units are known
        res = cowell(k, r0, v0, offsets[:, None], rtol, atol, f=f, params=params)
    return res.rr[:, 0], res.vv[:, 0], res.status


def states_from_orbits(orbits, epoch=None, *, f=None, params=None, rtol=1e-11, atol=1e-12):
    """`cowell`'s inputs for Orbit objects, all at one epoch: ``(k, r0, v0, epoch)``.

    Parameters
    ----------
    orbits : Orbit or sequence of Orbits
        hapsira or poliastro ``Orbit`` objects, or any objects with ``r``,
        ``v`` (Quantities), ``attractor.k`` (Quantity) and ``epoch``
        (astropy ``Time``). All must share one attractor (one GM).
    epoch : astropy.time.Time or str, or N of them, optional
        The common epoch (a str is read as UTC); default: the latest of the
        orbits' epochs, as the command line does with a TLE catalog. Or one
        epoch per orbit, a ``Time`` of shape ``(N,)`` (or N strings): orbit i
        is brought to ``epoch[i]`` (``Time([o.epoch for o in orbits])``: each
        its own, nothing propagated).
    f, params, rtol, atol
        How orbits at other epochs are brought to ``epoch``: propagated with
        `cowell` (forward or backward), by default two-body. A custom ``f``
        sees ``t`` counted from each orbit's own epoch, so pass one only for
        time-independent models. ``params`` as for `cowell`, one row per orbit.

    Returns
    -------
    k : float
        GM, km^3/s^2.
    r0, v0 : ndarray, (N, 3)
        Positions (km) and velocities (km/s) at ``epoch``, in the orbits'
        frame. An orbit that could not be brought there has NaN rows (and a
        warning says which): `cowell` then gives it a negative status alone.
    epoch : astropy.time.Time
        The common epoch, or the ``(N,)`` epochs given.
    """
    from ..units import to_value

    orbits = _orbit_list(orbits)
    items = [_read(orbit, i) for i, orbit in enumerate(orbits)]
    if not items:
        raise ValueError("orbits: expected at least one orbit, got none")
    ks = np.array([item[0] for item in items])
    if np.any(np.abs(ks - ks[0]) > 1e-12 * abs(ks[0])):
        other = int(np.flatnonzero(np.abs(ks - ks[0]) > 1e-12 * abs(ks[0]))[0])
        names = [getattr(orbits[i].attractor, "name", None) for i in (0, other)]
        named = f" ({names[0]} and {names[1]})" if all(names) else ""
        raise ValueError(f"orbits: expected one attractor for all, got GM {ks[0]} for orbits[0] "
                         f"and {ks[other]} for orbits[{other}] (km^3/s^2){named}: propagate "
                         f"each attractor's orbits in a call of their own")
    r0 = np.array([item[1] for item in items])
    v0 = np.array([item[2] for item in items])
    epochs = Time([item[3] for item in items])
    if epoch is None:
        epoch = epochs[int(np.argmax((epochs.tt - epochs[0].tt).to_value(u.s)))]
    elif not isinstance(epoch, Time):
        try:
            epoch = Time(epoch, scale="utc")
        except ValueError as error:
            raise ValueError(f"epoch: expected an astropy Time or a time string (UTC), got "
                             f"{epoch!r} ({error})") from None
    if not epoch.isscalar and epoch.shape != (len(items),):
        raise ValueError(f"epoch: expected a single time or one per orbit, shape "
                         f"({len(items)},), got shape {epoch.shape}")
    # in TT, i.e. SI seconds on the geoid, as the solver's t (a TDB difference would
    # differ by up to 3e-10 of the span)
    offsets = (epoch.tt - epochs.tt).to_value(u.s)
    if params is not None:
        params = to_value(params, u.one, "params")
        if params.ndim == 2 and params.shape[0] != len(items):
            raise ValueError(f"params: expected (P,) or ({len(items)}, P), got {params.shape}")
    r, v = r0.copy(), v0.copy()
    failed = []
    moving = np.flatnonzero(offsets != 0)
    if moving.size:
        rows = params if params is None or params.ndim == 1 else params[moving]
        r[moving], v[moving], status = _advance(ks[0], r0[moving], v0[moving], offsets[moving],
                                                f, rows, rtol, atol)
        failed += moving[status != 0].tolist()
    if failed:
        warnings.warn(f"{len(failed)} orbit(s) could not be propagated to {_told(epoch)} "
                      f"(orbits[{', '.join(map(str, sorted(failed)[:5]))}"
                      f"{', ...' if len(failed) > 5 else ''}]): their states are NaN",
                      RuntimeWarning, stacklevel=2)
        r[failed] = np.nan
        v[failed] = np.nan
    return float(ks[0]), r, v, epoch


def _told(epoch):
    """An epoch, or the first and last of per-object ones, as UTC text."""
    if epoch.isscalar:
        return epoch.utc.isot
    return f"{len(epoch)} epochs ({epoch[0].utc.isot} ... {epoch[-1].utc.isot})"


class OrbitsResult(CowellResult):
    """What `propagate_orbits` returns: `cowell`'s `CowellResult` (``rr``, ``vv``,
    ``status``, ``t_events``, ``n_events``, ``nfev``, ``nsteps``, ``stm``,
    ``success``, ``messages()``, ``res[i]``) plus ``epoch``.

    Unpacking as the tuple ``res, epoch = propagate_orbits(...)`` of earlier
    versions still works, with a `DeprecationWarning`; read ``res.epoch`` instead.
    """

    FIELDS = CowellResult.FIELDS + (Field(
        "epoch", ATTRIBUTE, "astropy ``Time``: the common epoch the times of flight count "
                            "from (``rr[i, j]`` is orbit i at ``epoch + tofs[j]``); with "
                            "per-object epochs a ``Time`` of shape ``(N,)``, orbit i's at "
                            "``epoch[i] + tofs[j]``"),)

    def __iter__(self):
        warnings.warn("propagate_orbits returns one OrbitsResult now: unpacking it as "
                      "(result, epoch) is deprecated; use res.epoch", DeprecationWarning,
                      stacklevel=2)
        return iter((self, self.epoch))

    def __repr__(self):
        return f"{super().__repr__()[:-1]}, epoch={_told(self.epoch)} UTC)"


@functools.cache
def _epoch_class(base):
    return type(f"{base.__name__}WithEpoch", (OrbitsResult, base), {})


def _with_epoch(result, epoch):
    """``result`` of `cowell` as an `OrbitsResult`: the numpy result's fields; a Dask
    result (params given as a Dask array) keeps its class, the epoch mixed in."""
    if type(result) is CowellResult:
        return OrbitsResult(single=result.single, epoch=epoch,
                            **{f.name: getattr(result, f.name) for f in CowellResult.FIELDS})
    result.__class__ = _epoch_class(type(result))
    result.epoch = epoch
    return result


def propagate_orbits(orbits, tofs, epoch=None, **cowell_kwargs):
    """Propagate Orbit objects with `cowell` from one common epoch, or one epoch each.

    `states_from_orbits` brings the orbits to ``epoch`` (default: their
    latest) with the same ``f``, ``params``, ``rtol`` and ``atol``; then
    ``cowell(k, r0, v0, tofs, **cowell_kwargs)`` runs from there. ``tofs``
    count from ``epoch``: the states of the result are at ``epoch + tofs``.
    ``epoch`` may be a ``Time`` of shape ``(N,)``, one per orbit (``tofs`` then
    count from each orbit's own, ``(M,)`` shared or ``(N, M)``); ``res.epoch`` is
    that array.

    Returns
    -------
    OrbitsResult
        `cowell`'s result (``res.rr``, ``res.vv``, ``res.status``, ...) with
        the common epoch as ``res.epoch``. (Unpacking it as ``res, epoch``,
        the tuple of earlier versions, still works but is deprecated.)
    """
    from .api import cowell
    from .forms import units_unchecked

    sync = {name: cowell_kwargs[name] for name in ("f", "params", "rtol", "atol")
            if name in cowell_kwargs}
    k, r0, v0, epoch = states_from_orbits(orbits, epoch, **sync)
    with units_unchecked():  # from Quantities: the units are known
        result = cowell(k, r0, v0, tofs, **cowell_kwargs)
    return _with_epoch(result, epoch)
