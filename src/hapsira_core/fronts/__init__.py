"""Where the arrays live: one module per kind of input (numpy, JAX, Dask).

Each front converts its inputs, calls the shared checks and the one core
(`hapsira_core.ivp`), and presents the result. No front imports another; the
choice between them is made here, by the type of the inputs.
"""
