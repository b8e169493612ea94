"""``cowell()`` on numpy arrays (the numpy front): DOP853 on the active target, `CowellResult`.

A thin layer on the core's `Problem` through the orbit adapter (`.forms`): the
state is ``(rr, vv)``, GM travels first in the params row, times of flight
start at 0, and results come back in orbit units and shapes.
"""

import contextlib

import numpy as np

from hapsira_core import targets
from hapsira_core.ivp import checks
from hapsira_core.ivp.layout import INFO
from hapsira_core.kernels.kernel import Columns
from hapsira_core.progress import check as check_progress

from ..units import is_quantity
from .forms import (bounds_checked, call_options, check_gm, check_states, check_stm,
                    check_tofs, UnitsCheck, orbit_call, step_options, warn_if_all_failed)
from .results import STATUS_MESSAGES, CowellResult  # their documented path

__all__ = ["cowell", "CowellResult", "STATUS_MESSAGES"]


def cowell(k, r0, v0, tofs, rtol=1e-11, atol=1e-12, *, f=None, params=None, events=(),
           max_steps=100_000, max_event_records=64, progress=False, stm=False,
           max_step=np.inf, first_step=None):
    """Propagate objects with Cowell's method: DOP853 on ``f`` (default two-body).

    Parameters
    ----------
    k : float or Quantity
        GM of the attractor, km^3/s^2.
    r0, v0 : array_like or Quantity, (3,) or (N, 3)
        Initial positions (km) and velocities (km/s) at t = 0. On the cuda
        target, (N, 3) float64 device arrays are used in place.
    tofs : array_like, Quantity or TimeDelta, (M,) or (N, M)
        Times of flight (s) at which states are returned; sorted away from
        zero and all of one sign (negative: backward propagation). ``(N, M)``:
        one row per object, each its own times (and direction), a row shorter
        than M padded with trailing NaN (its states there are NaN); each object
        is integrated to the last time of its row.
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
    progress : bool
        Show a tqdm progress bar on stderr (``pip install 'hapsira-cowell[progress]'``),
        for runs of minutes: the objects are propagated in chunks (about 100), the
        bar advancing after each; the results are the same, bit for bit, as without.
    stm : bool
        Also integrate the state transition matrix ``Phi(t) = d(rr, vv)(t) / d(r0, v0)``
        (the variational equations with the automatic Jacobian of ``f``:
        `hapsira_core.ivp.jacobian`; ``f`` must be differentiable from its source,
        e.g. `two_body`, `J2_perturbation`, `J3_perturbation`,
        `atmospheric_drag_exponential`; `atmospheric_drag_us76`'s table lookup
        is not): ``res.stm`` ``(N, M, 6, 6)``, in km and s units (blocks
        dr/dr0, dr/dv0 [s], dv/dr0 [1/s], dv/dv0), plain numbers even where
        the states are Quantities. The error control takes the state alone: the
        states and accepted steps are those of the call without ``stm``. See
        `hapsira_cowell.covariance` and docs/covariance.md.
    max_step : float or Quantity
        scipy's: the largest step size, s (default inf, no cap); it caps the
        automatic first step too. Shared by all objects; new values never recompile.
    first_step : float or Quantity, optional
        scipy's: the first step size, s, at most the shortest object's last
        ``|tof|``, instead of the automatic choice. Shared by all objects.

    Returns
    -------
    CowellResult
        Quantities (km, km/s, s) if any of ``r0``, ``v0``, ``tofs`` was one.
        (This is the numpy front; the public ``hapsira_cowell.cowell``
        (`hapsira_cowell.propagation.api`) sends Dask arrays to
        `hapsira_cowell.propagation.dask` first, which returns a
        `hapsira_cowell.propagation.dask.DaskCowellResult`.)

    Warns
    -----
    UnitsWarning
        A plain-number ``k``, ``r0`` or ``v0`` outside what any solar-system
        orbit has (``k`` above 1e12 km^3/s^2: m^3/s^2?; ``|r0|`` beyond
        ``1e9 km * cbrt(k / K_EARTH)`` or within ``1 km * cbrt(k / K_EARTH)``
        of the centre; ``|v0|`` above 1e3 km/s: m/s?), plain-number ``tofs``
        all within 366 s and 1% of the shortest orbital period (days?), and
        every object failing in flight; see docs/guide.md#units.
    """
    progress = check_progress(progress)
    stm = check_stm(stm)
    quantities = any(is_quantity(x) for x in (r0, v0, tofs))
    plain = [not is_quantity(x) for x in (k, r0, v0, tofs)]
    k = check_gm(k)
    r0, v0, single = check_states(r0, v0)
    n = r0.shape[0]
    tofs = check_tofs(tofs, n)
    # plain numbers only, and not a device array (that would be a copy to the host);
    # on the GPU decided while the objects propagate and warned after (`UnitsCheck`),
    # once the first kernel is queued
    background = getattr(targets.active, "HOST_WAITS", False)
    started = getattr(targets.active, "kernels_started", None) if background else None
    with started() if started is not None else contextlib.nullcontext() as after:
        units = UnitsCheck(k if plain[0] else None,
                           r0 if plain[1] and isinstance(r0, np.ndarray) else None,
                           v0 if plain[2] and isinstance(v0, np.ndarray) else None,
                           tofs=tofs if plain[3] else None, background=background,
                           after=after)
        if not units.background:
            units.finish()
        try:  # the warnings also when a later check or the propagation raises
            max_step, first_step = step_options(max_step, first_step, tofs)
            rows = checks.params(params, n)
            rtol, atol, f, events, max_steps, records = call_options(
                rtol, atol, f, events, max_steps, max_event_records, params)
            for event in events:
                event.check_params(rows[:, :checks.columns_given(params)])
            params = rows
            user_f = f
            f, events = bounds_checked(f, events)
            # GM first in every row: k is data, never a compile-time constant
            params = np.concatenate((np.full((params.shape[0], 1), float(k)), params), axis=1)
            call = orbit_call("cowell", f, user_f, events, tofs, rtol, atol, max_steps,
                              records, stm=stm, single=single, max_step=max_step,
                              first_step=first_step, progress=progress)
            # joined where the kernel reads them (on cuda: on the GPU, by chunk); with stm
            # Phi(0) = I after each state
            y0 = Columns(r0, v0, *([np.ascontiguousarray(
                np.broadcast_to(np.eye(6).ravel(), (n, 36)))] if stm else []))
            raw = call.run(y0, params)
        finally:
            units.finish()
    warn_if_all_failed(raw["info"][:, INFO.status])
    return CowellResult.from_kernel(raw, call.single, quantities)
