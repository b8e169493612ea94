"""``solve_ivp`` for JAX arrays, inside ``jax.jit``: the public name of
`hapsira_core.fronts.jax` (see ``docs/jax.md``)."""

from .fronts.jax import DerivativeError, IVPResult, run, solve_ivp  # noqa: F401

__all__ = ["solve_ivp", "IVPResult", "DerivativeError", "run"]
