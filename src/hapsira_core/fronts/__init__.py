"""Where the arrays live: one module or package per kind of input.

Each front converts its inputs, calls the shared checks (`hapsira_core.ivp.checks`)
and the one core (`hapsira_core.ivp.api`: `Problem`, `integrate`), and presents the
result type of `hapsira_core.ivp.results` (or a thin view of it):

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
    # returns a `DaskIVPResult` (same fields, Dask arrays); docs/dask.md.
    # (it wears the numpy front's docstring: the end of this module.)
    from .dask import any_dask
    from ..progress import check

    if any_dask(y0, params):
        if jac is not None:
            raise NotImplementedError("jac: not on the Dask front yet; compute the arrays "
                                      "first (numpy) to pass jac=")
        if isinstance(t_eval, str):
            raise NotImplementedError("t_eval=\"steps\": not on the Dask front yet (each "
                                      "chunk's number of steps differs); use "
                                      "dense_output=True and evaluate res.sol(t), or compute "
                                      "the arrays first (numpy)")
        if check(progress):
            raise ValueError("progress: not for Dask arrays, which are computed later "
                             "(use distributed.progress on the result's arrays)")
        from .dask import solve_ivp as front
        return front(fun, t_span, y0, method, t_eval, rtol, atol, params=params,
                     events=events, max_steps=max_steps, max_event_records=max_event_records,
                     max_step=max_step, first_step=first_step, args=args, stm=stm,
                     dense_output=dense_output)
    return numpy_front(fun, t_span, y0, method, t_eval, rtol, atol, params=params,
                       events=events, max_steps=max_steps,
                       max_event_records=max_event_records, progress=progress,
                       max_step=max_step, first_step=first_step, args=args, stm=stm,
                       jac=jac, dense_output=dense_output)


# Imported after the router is defined: the numpy front imports `hapsira_core.ivp`,
# whose __init__ imports the router from here (whichever of the two is imported first).
from .numpy import solve_ivp as numpy_front  # noqa: E402

functools.update_wrapper(solve_ivp, numpy_front)
