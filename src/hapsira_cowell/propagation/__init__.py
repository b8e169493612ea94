"""Propagation: the orbit adapter (`forms`), the fronts (numpy `propagator`, `jax`, `dask`),
the router that is the public ``cowell`` (`api`) and Orbit objects (`orbits`).

Imports nothing here: importing the package must not import hapsira_core (which fixes the target).
"""
