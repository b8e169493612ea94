"""The optional extras (pyproject.toml's optional dependencies) that tests need: a test
of one skips, naming the extra, where its package is not installed."""

import importlib.util

import pytest

#: The packages of the extras, by top-level module.
EXTRAS = {"jax": "jax", "dask": "dask", "distributed": "dask", "zarr": "dask", "oem": "oem",
          "ccsds_ndm": "cdm"}


def reason(extra):
    return f"needs the {extra} extra: pip install 'hapsira-cowell[{extra}]'"


def need(module):
    """``module`` (of one of `EXTRAS`' packages) imported, or the test skipped naming
    its extra."""
    return pytest.importorskip(module, reason=reason(EXTRAS[module.split(".")[0]]))


def installed(module):
    """Whether the package of ``module`` is installed (without importing it)."""
    return importlib.util.find_spec(module.split(".")[0]) is not None


def needs(module):
    """A mark: the test skipped where ``module`` is not installed, naming its extra."""
    return pytest.mark.skipif(not installed(module),
                              reason=reason(EXTRAS[module.split(".")[0]]))
