"""``solve_ivp`` on numpy arrays: the numpy front.

It checks the call (`hapsira_core.ivp.call.Call`, the one check every front
shares), runs its `Problem` on the numpy arrays and returns an
`hapsira_core.ivp.results.IVPResult`. The public
``hapsira_core.ivp.solve_ivp`` is the router of `hapsira_core.fronts`, which
sends Dask arrays to the Dask front and everything else here.
"""

import math

import numpy as np

from ..ivp.api import check_output
from ..ivp.call import Call
from ..ivp.layout import INFO

__all__ = ["solve_ivp"]


def solve_ivp(fun, t_span, y0, method="DOP853", t_eval=None, rtol=1e-3, atol=1e-6, *,
              params=None, events=(), max_steps=100_000, max_event_records=64,
              progress=False, max_step=math.inf, first_step=None, args=None, stm=False,
              jac=None, dense_output=False):
    """Integrate ``dy/dt = fun(t, y, p)`` for one object or N, as ``scipy.integrate.solve_ivp``.

    Parameters
    ----------
    fun : hjit function
        ``fun(t, y, p) -> tuple of n floats`` (``y`` a tuple of n floats; n up
        to `hapsira_core.ivp.state.TUPLE_MAX_N`) or ``fun(t, y, p, dydt)``,
        which fills the 1-D array ``dydt`` and returns nothing (``y`` a 1-D
        array; any n, compiled in the same time whatever n is); ``p`` the
        object's params row. The form chooses the state's shape
        (`hapsira_core.ivp.state`).
    t_span : (t0, tf)
        Shared by all objects; ``tf < t0`` integrates backward. Or per object:
        ``t0`` and ``tf`` arrays of shape ``(N,)`` (a number beside an array is
        shared), each object integrated over its own span, in its own direction;
        ``t0 == tf`` gives that object its initial state. NaN and infinite
        times are refused up front (naming the object). Data: new spans never
        recompile.
    y0 : array_like, (n,) or (N, n)
        Initial states (any n >= 1; above ``TUPLE_MAX_N`` with the array form of ``fun``).
    method : "DOP853", "RK45" or "RK23"
        scipy's explicit methods, with scipy's error estimate, step-size
        control, first step and dense output.
    t_eval : array_like, (M,) or (N, M), or "steps", optional
        Output times within ``t_span``, sorted in the direction of
        integration, none repeated (as scipy); default ``[tf]`` (with per-object spans, each object's
        own ``tf``: ``t`` of shape ``(N, 1)``). ``"steps"``: every accepted
        step, as scipy's ``t_eval=None`` gives them (``res[i].t``, ``res[i].y``
        the object's t0, each step's end and a terminal event's time last;
        ``res.t`` ``(N, S + 1)`` and ``res.y`` NaN-padded to the most steps S
        of any object). Not the default: a million objects' steps rarely fit in
        memory. The kernel runs twice (a first pass counts the steps, then the
        size is checked against the memory limit: `hapsira_core.ivp.dense`). ``(N, M)``: one row per object,
        within its own span and sorted in its own direction, none repeated; a
        row shorter than M is padded with trailing NaN (its states there are
        NaN, and ``res[i]`` leaves them out). Then ``res.t`` is ``(N, M)``.
    rtol, atol : float or (n,)
        Tolerances as in scipy (rtol below 100 eps is raised to it, with a
        warning).
    params : array_like, (P,) or (N, P), optional
        Numbers handed to ``fun`` and events as ``p`` (shared or one row per
        object); new values never recompile.
    events : Event or sequence of Event
        Zeros of ``g(t, y, p)``, as scipy's events (``y`` as ``fun`` gets it).
    max_steps : int
        Accepted steps allowed per object (status -2 beyond).
    max_event_records : int
        Occurrences of each event whose time and state are kept (C).
    progress : bool
        Show a tqdm progress bar on stderr (``pip install 'hapsira-cowell[progress]'``),
        for runs of minutes: the objects are solved in chunks (about 100, of at least
        `hapsira_core.ivp.api.PROGRESS_MIN_CHUNK` objects), the bar advancing after
        each. The results are the same, bit for bit, as without it.
    max_step : float
        scipy's: the largest step size (default inf, no cap); it caps the
        automatic first step too. One number shared by all objects.
    first_step : float, optional
        scipy's: the first step size, at most ``|tf - t0|``, instead of the
        automatic choice (which costs one evaluation of ``fun``). Shared by all objects.
    args : tuple of numbers, optional
        scipy's ``args``: numbers shared by all objects, appended to each object's
        params row (``p[P:]`` after ``P`` params columns; ``p[0:]`` without params),
        so ``fun(t, y, p)`` and the events read them there. New values never recompile.
    stm : bool
        Also integrate the state transition matrix ``Phi = d y(t) / d y0``
        (the variational equations ``dPhi/dt = J(t, y) Phi``, ``Phi(t0) = I``,
        with J the automatic Jacobian of ``fun``: `hapsira_core.ivp.jacobian`;
        tuple form only): ``res.stm`` ``(N, n, n, M)``, ``res.stm[i, :, :, j]``
        the matrix of object i at ``t[j]``. The error control takes the state
        alone, so that the accepted steps and the states are those of the same
        call without ``stm``. Events get ``y`` with the matrix after the state
        (n + n * n numbers, an array); ``res.stm_events`` holds the matrix at each
        recorded event, one ``(N, C, n, n)`` per event (Phi at t_event, that time
        held fixed: `hapsira_core.ivp.sensitivities.matrices`);
        ``res.stm_events_total`` the same with the event's time moving with y0,
        d y(t_event(y0)) / d y0, and ``res.dt_events_dy0`` one ``(N, C, n)`` per
        event, d t_event / d y0 (`hapsira_core.ivp.event_derivatives`: each
        event's ``g`` is differentiated too, and refused by name where it cannot be).
    jac : hjit function or array_like, optional
        The Jacobian d fun / d y for the implicit methods (Radau, BDF, Rodas5P;
        the explicit ones warn and ignore it, as scipy's). None: the automatic
        derivative of a tuple-form ``fun``. An hjit function ``jac(t, y, p) ->``
        flat row-major tuple of n * n floats, or ``jac(t, y, p, J)`` filling the
        n x n array ``J``. Or, as scipy takes it, a constant matrix: ``(n, n)`` (a
        scipy sparse matrix is made dense) or one per object ``(N, n, n)``, handed
        to the kernel as the last n * n columns of each params row (``p[P:]``
        stays as described under ``args``). A constant Jacobian, given so or
        recognised from the source (``fun`` affine in ``y`` with coefficients
        free of ``t``, or a ``jac`` that reads neither ``t`` nor ``y``:
        `hapsira_core.ivp.sensitivities.constant_jacobian`), is evaluated once
        and kept, as scipy keeps a constant ``jac``: ``njev`` 0 for a matrix
        given (scipy's count), 1 for one recognised.
    dense_output : bool
        scipy's: keep every step's interpolant (the same as scipy's: RK45's 4
        coefficient states, RK23's 3, DOP853's 7 and ``y_old``; Radau's
        collocation polynomial (3), BDF's differences up to its order with the
        order, step and end (9 rows), Rodas5P's own interpolant (4)) so that
        ``res[i].sol(t)`` is object i's continuous solution, as scipy's
        ``OdeSolution``, and ``res.sol(t)`` all objects' (``(N, n, len(t))``).
        Every step then builds its interpolant, as in scipy (``nfev`` as
        scipy's: DOP853 3 more per step). The kernel runs twice (a first pass
        counts the steps; the records' size, steps x coefficients x objects,
        is checked against the memory limit before the second: `hapsira_core.ivp.dense`).

    Returns
    -------
    IVPResult
        (`hapsira_core.ivp.results`; this is the numpy front: the public
        ``hapsira_core.ivp.solve_ivp`` routes Dask arrays to the Dask front first,
        `hapsira_core.fronts`.)
    """
    call, y0, rows = Call.check("numpy", fun, t_span, y0, method, t_eval, rtol, atol,
                                params=params, events=events, max_steps=max_steps,
                                max_event_records=max_event_records, progress=progress,
                                max_step=max_step, first_step=first_step, args=args, stm=stm,
                                jac=jac, dense_output=dense_output)
    y0, rows = call.inputs(y0, rows)
    return call.result(call.run(y0, rows), rows)


def states_at(fun, t_span, y0, t_eval, *, method="DOP853", rtol=1e-3, atol=1e-6,
              params=None, on_device=False, out=None):
    """The states ``(N, M, n)`` at the output times ``t_eval`` and the statuses ``(N,)``
    of `solve_ivp` with these arguments (no events, sensitivities or dense output), for a
    caller whose next kernel reads the states: with ``on_device`` (a target with memory
    of its own) they stay there, a device array (`hapsira_core.ivp.api.Problem.run`),
    and only the statuses cross to the host. ``out``: a C-ordered float64 ``(N, M, n)``
    array (the target's with ``on_device``) the states are written to and returned as,
    for a caller that samples chunk after chunk: its pages are faulted in once, not
    each chunk. Checked as `solve_ivp` checks them; the same kernel and numbers.
    `hapsira_cowell.conjunctions.screen` samples a cloud so."""
    call, y0, rows = Call.check("numpy", fun, t_span, y0, method, t_eval, rtol, atol,
                                params=params)
    y0, rows = call.inputs(y0, rows)
    if out is not None:
        check_output(out, (y0.shape[0], call.times.shape[-1], call.width), np.float64, "out",
                     on_host=not on_device)
    raw = call.run(y0, rows, on_device=("y",) if on_device else (),
                   into=None if out is None else {"y": out})
    return raw["y"], raw["info"][:, INFO.status]
