"""The ``hapsira-cowell`` command line: an application above the library (docs/cli.md).

`app` parses the arguments and runs a command; `target` fixes the compilation
target before the solver is imported; `inputs` (durations, output times),
`catalog` (TLE and CSV catalogs), `models` (the force models by name), `batch`
(a catalog propagated in chunks), `writers` (npz, csv, parquet, zarr, oem: one
interface) and `plots` do the work; `demo` is the synthetic cloud. Nothing in
the library imports this package.
"""

from .app import main  # noqa: F401  (the console script: hapsira_cowell.cli:main)

__all__ = ["main"]
