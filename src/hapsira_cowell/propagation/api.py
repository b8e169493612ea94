"""The public `cowell()`: numpy arrays to `hapsira_cowell.propagation.propagator`, Dask arrays to
`hapsira_cowell.propagation.dask` (chunk by chunk on a cluster, docs/dask.md).

The choice of front is made here, above both, so that neither imports the other.
"""

import functools

from hapsira_core.fronts.dask import any_dask

from . import propagator

__all__ = ["cowell"]


@functools.wraps(propagator.cowell)
def cowell(k, r0, v0, tofs, rtol=1e-11, atol=1e-12, *, f=None, params=None, events=(),
           max_steps=100_000, max_event_records=64, progress=False, stm=False,
           max_step=float("inf"), first_step=None):
    from hapsira_core.progress import check

    if any_dask(r0, v0, params):
        if check(progress):
            raise ValueError("progress: not for Dask arrays, which are computed later "
                             "(use distributed.progress on the result's arrays)")
        from .dask import cowell as front  # returns a DaskCowellResult
        return front(k, r0, v0, tofs, rtol, atol, f=f, params=params, events=events,
                     max_steps=max_steps, max_event_records=max_event_records, stm=stm,
                     max_step=max_step, first_step=first_step)
    return propagator.cowell(k, r0, v0, tofs, rtol, atol, f=f, params=params, events=events,
                             max_steps=max_steps, max_event_records=max_event_records,
                             progress=progress, stm=stm, max_step=max_step,
                             first_step=first_step)
