"""Linear covariance propagation with ``cowell(..., stm=True)`` and Monte-Carlo clones:
the public name of `hapsira_cowell.propagation.covariance` (see ``docs/covariance.md``)."""

from .propagation.covariance import (  # noqa: F401
    from_rtn,
    propagate,
    rtn_basis,
    sample,
    sample_covariance,
    to_rtn,
)

__all__ = ["from_rtn", "propagate", "rtn_basis", "sample", "sample_covariance", "to_rtn"]
