"""``solve_ivp`` for Dask arrays, chunk by chunk on a cluster: the public names of
`hapsira_core.fronts.dask` (see ``docs/dask.md``)."""

from .fronts.dask import (  # noqa: F401
    DaskIVPResult, NotImportableError, solve_ivp, worker_info, zarr_chunk_shape)

__all__ = ["solve_ivp", "DaskIVPResult", "NotImportableError", "worker_info",
           "zarr_chunk_shape"]
