"""The public `cowell()`: numpy arrays to `hapsira_cowell.propagation.propagator`, Dask arrays to
`hapsira_cowell.propagation.dask` (chunk by chunk on a cluster, docs/dask.md).

The choice of front is made here, above both, so that neither imports the other.
"""

import difflib
import functools
import inspect

from hapsira_core.fronts.dask import any_dask
from hapsira_core.ivp.call import refuse

from . import propagator

__all__ = ["cowell"]

#: What ``cowell`` does instead of the ``solve_ivp`` options it does not take.
SCIPY_OPTIONS = {
    "dense_output": "ask for the times you need in tofs (the interpolant is evaluated in "
                    "the kernel), e.g. tofs=np.linspace(0, tf, 1001); for a continuous "
                    "solution, sol(t), use hapsira_core.ivp.solve_ivp(..., dense_output=True) "
                    "on the 6-component state",
    "t_eval": "cowell's output times are tofs (s after the epoch, e.g. np.linspace(0, tf, "
              "1001))",
    "t_span": "cowell starts at 0 and ends at the last of tofs (negative tofs: backward)",
    "method": "cowell integrates with DOP853; for another method use hapsira_core.ivp."
              "solve_ivp(..., method=...) on the 6-component state",
    "args": "per-object numbers go in params=(N, P) rows, which f reads as p",
}


def _unknown_option(name):
    """The message for a keyword ``cowell`` does not take: what to do instead for scipy's
    options (`SCIPY_OPTIONS`), else the nearest of its own keywords."""
    if name in SCIPY_OPTIONS:
        return f"{name}: not an argument of cowell (solve_ivp's); {SCIPY_OPTIONS[name]}"
    known = list(inspect.signature(propagator.cowell).parameters)
    close = difflib.get_close_matches(name, known, n=1)
    return (f"cowell() got an unexpected keyword argument {name!r}"
            + (f"; did you mean {close[0]!r}?" if close else ""))


@functools.wraps(propagator.cowell)
def cowell(k, r0, v0, tofs, rtol=1e-11, atol=1e-12, *, f=None, params=None, events=(),
           max_steps=100_000, max_event_records=64, progress=False, stm=False,
           max_step=float("inf"), first_step=None, **unknown):
    if unknown:
        raise TypeError(_unknown_option(next(iter(unknown))))

    if any_dask(r0, v0, params):
        refuse("cowell Dask", progress=progress)  # what the Dask front does not take
        from .dask import cowell as front  # returns a DaskCowellResult
        return front(k, r0, v0, tofs, rtol, atol, f=f, params=params, events=events,
                     max_steps=max_steps, max_event_records=max_event_records, stm=stm,
                     max_step=max_step, first_step=first_step)
    return propagator.cowell(k, r0, v0, tofs, rtol, atol, f=f, params=params, events=events,
                             max_steps=max_steps, max_event_records=max_event_records,
                             progress=progress, stm=stm, max_step=max_step,
                             first_step=first_step)
