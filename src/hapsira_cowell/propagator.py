"""``cowell()``: propagate one object or a cloud with DOP853 on the active target.

A thin layer on the core's `Problem`: the state
is ``(rr, vv)``, GM travels first in the params row (`.orbit_form`),
times of flight start at 0, and results come back in orbit units and shapes.
"""

import functools

import numpy as np
from astropy import units as u

from hapsira_core import ivp
from hapsira_core.kernels.errors import check_returns, is_real, is_state
from hapsira_core.ivp import checks
from hapsira_core.jit import is_device_array
from hapsira_core.kernels.kernel import Columns

from .events import Event
from .orbit_form import orbit_rhs
from .perturbations import two_body
from .units import is_quantity, to_value

__all__ = ["cowell", "CowellResult", "STATUS_MESSAGES"]

#: What each ``status`` code means.
STATUS_MESSAGES = {
    ivp.SUCCESS: "reached the last time of flight",
    ivp.TERMINATED: "stopped by a terminal event",
    ivp.STEP_TOO_SMALL: "step size fell below 10 ulp of t (a singularity, e.g. "
                        "a collision with the attractor's centre)",
    ivp.MAX_STEPS: "max_steps accepted steps were not enough",
    ivp.BAD_INITIAL_STATE: "initial state or its derivative is not finite "
                           "(NaN or inf input, or r = 0)",
}


class CowellResult(ivp.Statuses):
    """What `cowell()` returns.

    ``rr``, ``vv``: states at ``tofs``, ``(N, M, 3)`` km and km/s (NaN where
    the object had stopped); ``status``: ``(N,)`` codes, see
    `STATUS_MESSAGES`; ``t_events``: one ``(N, C)`` array of event times
    (s, NaN-padded) per event; ``n_events``: ``(N, E)`` occurrence counts;
    ``nfev``, ``nsteps``: ``(N,)`` work done. For a single object (``r0`` of
    shape ``(3,)``) the leading N axis is dropped everywhere.
    """

    MESSAGES = STATUS_MESSAGES

    def __init__(self, rr, vv, status, t_events, n_events, nfev, nsteps):
        self.rr = rr
        self.vv = vv
        self.status = status
        self.t_events = t_events
        self.n_events = n_events
        self.nfev = nfev
        self.nsteps = nsteps


def _state(value, name, unit):
    """One of r0, v0 as a float64 array, (3,) or (N, 3) (device arrays pass through)."""
    if is_device_array(value):
        shape = tuple(value.__cuda_array_interface__["shape"])
        dtype = np.dtype(value.__cuda_array_interface__["typestr"])
        if len(shape) != 2 or shape[1] != 3 or dtype != np.float64:
            raise ValueError(f"{name}: expected shape (N, 3) and float64 for a device "
                             f"array, got {shape} {dtype}")
        return value
    array = to_value(value, unit, name)
    if array.ndim not in (1, 2) or array.shape[-1] != 3:
        raise ValueError(f"{name}: expected shape (3,) or (N, 3), got {array.shape}")
    if not array.flags.c_contiguous or 0 in array.strides or array.dtype != np.float64:
        array = array.astype(np.float64, order="C")  # no stride-0 or strided views in kernels
    return array


def _states(r0, v0, state=_state):
    """r0, v0 as (N, 3) km, km/s, and whether one object was given.

    ``state(value, name, unit)`` converts and checks each one (the JAX front
    passes its own); the two are then checked against each other.
    """
    r0, v0 = state(r0, "r0", u.km), state(v0, "v0", u.km / u.s)
    single = getattr(r0, "ndim", 2) == 1
    if (getattr(v0, "ndim", 2) == 1) != single:
        raise ValueError(f"r0, v0: shapes differ ({r0.shape} and {v0.shape})")
    if single:
        r0, v0 = r0[None, :], v0[None, :]
    if r0.shape[0] != v0.shape[0]:
        raise ValueError(f"r0, v0: number of objects differs ({r0.shape[0]} and {v0.shape[0]})")
    return r0, v0, single


def _tofs(tofs):
    array = np.atleast_1d(to_value(tofs, u.s, "tofs"))
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"tofs: expected a non-empty 1-D array of times, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError("tofs: expected finite times, got NaN or inf")
    if np.any(array > 0) and np.any(array < 0):
        raise ValueError("tofs: expected times all of one sign (negative = backward), got both")
    if np.any(np.diff(np.abs(array)) < 0):
        raise ValueError("tofs: expected times sorted away from 0 (increasing, or decreasing "
                         "when backward)")
    return np.ascontiguousarray(array)


def _gm(k):
    """GM as a 0-d float64 array: positive and finite."""
    k = to_value(k, u.km ** 3 / u.s ** 2, "k")
    if k.ndim != 0 or not np.isfinite(k) or k <= 0:
        raise ValueError(f"k: expected a positive finite GM in km^3/s^2, got {k!r}")
    return k


def call_options(rtol, atol, f, events, max_steps, max_event_records, params_given,
                 stacklevel=5):
    """What every front of ``cowell`` (numpy, JAX, Dask) checks the same way, once.

    Call after the states, ``tofs`` and the params rows are checked;
    ``params_given``: the params as the user gave them (a numpy, JAX or Dask
    array, or None), whose width is checked against what ``f`` and the events
    read. Returns ``(rtol, atol, f, events, max_steps, records)`` with the
    numpy front's messages on every front; ``f`` and the events come back as
    given (each front that compiles applies `bounds_checked`).
    """
    rtol = checks.relative_tolerance(rtol, 6, stacklevel)
    atol = checks.tolerance(atol, "atol", 6)
    max_steps = checks.integer(max_steps, "max_steps", 1)
    records = checks.integer(max_event_records, "max_event_records", 0)
    events = checks.event_list(events, Event)
    f = two_body if f is None else f
    if not callable(f):
        raise ValueError(f"f: expected an hjit function, got {type(f).__name__}")
    checks.params_width(checks.columns_given(params_given), [f] + [e.g for e in events],
                        position=4)
    return rtol, atol, f, events, max_steps, records


def bounds_checked(f, events):
    """``f`` and the events' ``g`` bounds-checked where they index ``p`` at run time
    (`hapsira_core.ivp.checks.bounds_checked`); after the width checks, which
    name the user's functions."""
    return checks.bounds_checked(f, 4), checks.bounds_checked_events(events, 4)


def _diagnose(f, events, y0, params, t0):
    """After a failed kernel: do ``f`` and the events' ``g`` return what they should?"""
    rr, vv = tuple(float(v) for v in y0[0, :3]), tuple(float(v) for v in y0[0, 3:])
    sample = (t0, rr, vv, float(params[0, 0]), params[0, 1:])
    check_returns(f, sample, lambda r: isinstance(r, tuple) and len(r) == 2
                  and all(is_state(part, 3) for part in r),
                  "(drr, dvv): two tuples of 3 floats")
    for event in events:
        check_returns(event.g, sample, is_real, "a float (the event function's value)")


def _problem(f, events, tofs, max_steps, records):
    """The core's `Problem` of an orbit propagation.

    DOP853 on ``y = (rr, vv)`` with GM first in the params row, output at
    ``tofs``, no event states kept; shared with the JAX front
    (`hapsira_cowell.jax`), which runs it on XLA's buffers.
    """
    return ivp.Problem("DOP853", orbit_rhs(f), 6, events, tofs, max_steps, records, 0,
                       [f] + [e.g for e in events], functools.partial(_diagnose, f, events))


def cowell(k, r0, v0, tofs, rtol=1e-11, atol=1e-12, *, f=None, params=None, events=(),
           max_steps=100_000, max_event_records=64):
    """Propagate objects with Cowell's method: DOP853 on ``f`` (default two-body).

    Parameters
    ----------
    k : float or Quantity
        GM of the attractor, km^3/s^2.
    r0, v0 : array_like or Quantity, (3,) or (N, 3)
        Initial positions (km) and velocities (km/s) at t = 0. On the cuda
        target, (N, 3) float64 device arrays are used in place.
    tofs : array_like, Quantity or TimeDelta, (M,)
        Times of flight (s) at which states are returned; sorted away from
        zero and all of one sign (negative: backward propagation).
    rtol, atol : float or (6,)
        Relative and absolute tolerances as in ``scipy.integrate.solve_ivp``
        (rtol below 100 eps is raised to it, with a warning).
    f : hjit function, optional
        ``f(t, rr, vv, k, p) -> (drr, dvv)``; default
        `two_body()`.
    params : array_like, (P,) or (N, P), optional
        Numbers handed to ``f`` and events as the row ``p`` (shared or one row
        per object). Changing them never recompiles.
    events : sequence of `Event`
    max_steps : int
        Accepted steps allowed per object (status -2 when exceeded).
    max_event_records : int
        Occurrences of each event whose times are kept (C).

    Returns
    -------
    CowellResult
        Quantities (km, km/s, s) if any of ``r0``, ``v0``, ``tofs`` was one.
        (This is the numpy front; the public ``hapsira_cowell.cowell``
        (`hapsira_cowell.api`) sends Dask arrays to `hapsira_cowell.dask` first,
        which returns a `hapsira_cowell.dask.DaskCowellResult`.)
    """
    quantities = any(is_quantity(x) for x in (r0, v0, tofs))
    k = _gm(k)
    r0, v0, single = _states(r0, v0)
    n = r0.shape[0]
    tofs = _tofs(tofs)
    rows = checks.params(params, n)
    rtol, atol, f, events, max_steps, records = call_options(
        rtol, atol, f, events, max_steps, max_event_records, params)
    for event in events:
        event.check_params(rows[:, :checks.columns_given(params)])
    params = rows
    f, events = bounds_checked(f, events)
    # GM first in every row: k is data, never a compile-time constant
    params = np.concatenate((np.full((params.shape[0], 1), float(k)), params), axis=1)
    y0 = Columns(r0, v0)  # joined where the kernel reads them (on cuda: on the GPU, by chunk)

    raw = _problem(f, events, tofs, max_steps, records).run(y0, params, 0.0, float(tofs[-1]),
                                                            rtol, atol)
    y = raw["y"]
    rr, vv = y[:, :, :3], y[:, :, 3:]
    t_events = [raw["t_events"][:, e] for e in range(len(events))]
    n_events = raw["n_events"]
    info = raw["info"]
    status, nfev, nsteps = info[:, 0], info[:, 1], info[:, 2]
    if quantities:
        rr = rr << u.km
        vv = vv << (u.km / u.s)
        t_events = [t << u.s for t in t_events]
    if single:
        rr, vv, status, nfev, nsteps = rr[0], vv[0], status[0], nfev[0], nsteps[0]
        t_events = [t[0] for t in t_events]
        n_events = n_events[0]
    return CowellResult(rr, vv, status, t_events, n_events, nfev, nsteps)
