"""``cowell`` for JAX arrays, inside ``jax.jit``: the public name of
`hapsira_cowell.propagation.jax` (as `hapsira_core.jax` is the core's; see ``docs/jax.md``)."""

from .propagation.jax import CowellResult, DerivativeError, cowell  # noqa: F401

__all__ = ["cowell", "CowellResult", "DerivativeError"]
