"""Where the arrays live: one module or package per kind of input.

Each front converts its inputs, checks the call once (`hapsira_core.ivp.call.Call`,
which refuses what the front does not take from one table, `FEATURES`), runs the
call's `Problem` where its arrays live, and presents the result type of
`hapsira_core.ivp.results` (or a thin view of it) through ``call.result``:

* numpy arrays: `.numpy`;
* Dask arrays: `.dask`, chunk by chunk on a cluster (a view of the same result);
* JAX arrays inside ``jax.jit``: `.jax` (``hapsira_core.jax.solve_ivp``).

No front imports another; the choice between numpy and Dask is made here, by
the type of the inputs, for the public ``hapsira_core.ivp.solve_ivp``.
"""

import functools


def solve_ivp(fun, t_span, y0, method="DOP853", t_eval=None, rtol=1e-3, atol=1e-6, *,
              params=None, events=(), max_steps=100_000, max_event_records=64,
              progress=False, max_step=float("inf"), first_step=None, args=None,
              stm=False, jac=None, dense_output=False):
    # Dask arrays (chunked along the object axis) go to the Dask front, which
    # returns a `DaskIVPResult` (same fields, Dask arrays); docs/dask.md. What a front
    # does not take it refuses, naming itself (`hapsira_core.ivp.call.FEATURES`).
    # (it wears the numpy front's docstring: the end of this module.)
    from .dask import any_dask

    front = numpy_front
    if any_dask(y0, params):
        from .dask import solve_ivp as front
    return front(fun, t_span, y0, method, t_eval, rtol, atol, params=params, events=events,
                 max_steps=max_steps, max_event_records=max_event_records, progress=progress,
                 max_step=max_step, first_step=first_step, args=args, stm=stm, jac=jac,
                 dense_output=dense_output)


# Imported after the router is defined: the numpy front imports `hapsira_core.ivp`,
# whose __init__ imports the router from here (whichever of the two is imported first).
from .numpy import solve_ivp as numpy_front  # noqa: E402

functools.update_wrapper(solve_ivp, numpy_front)
