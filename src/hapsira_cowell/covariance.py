"""Linear covariance propagation with ``cowell(..., stm=True)`` and Monte-Carlo clones:
the public name of `hapsira_cowell.propagation.covariance` (see ``docs/covariance.md``)."""

from .propagation.covariance import propagate, sample, sample_covariance  # noqa: F401

__all__ = ["propagate", "sample", "sample_covariance"]
