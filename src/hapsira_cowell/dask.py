"""``cowell`` for Dask arrays: the public name of `hapsira_cowell.propagation.dask`
(as `hapsira_core.dask` is the core's; see ``docs/dask.md``)."""

from .propagation.dask import DaskCowellResult, cowell  # noqa: F401

__all__ = ["cowell", "DaskCowellResult"]
