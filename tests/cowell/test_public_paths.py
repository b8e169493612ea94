"""The package's public names and documented module paths resolve to the modules in its folders."""

import importlib

import pytest
from extras import need

import hapsira_cowell


@pytest.mark.parametrize("name", hapsira_cowell.__all__)
def test_every_public_name_resolves(name):
    assert getattr(hapsira_cowell, name) is not None


@pytest.mark.parametrize("documented, module", [
    ("hapsira_cowell.perturbations", "hapsira_cowell.models.perturbations"),
    ("hapsira_cowell.events", "hapsira_cowell.models.events"),
    ("hapsira_cowell.jax", "hapsira_cowell.propagation.jax"),
    ("hapsira_cowell.dask", "hapsira_cowell.propagation.dask"),
    ("hapsira_cowell.covariance", "hapsira_cowell.propagation.covariance"),
    ("hapsira_cowell.conjunctions", "hapsira_cowell.propagation.conjunctions "
                                    "hapsira_cowell.propagation.encounters "
                                    "hapsira_cowell.propagation.probability"),
])
def test_documented_paths_re_export_the_same_objects(documented, module):
    """``module``: the module(s), separated by spaces, whose public names the documented
    path re-exports."""
    if documented.endswith(("jax", "dask")):
        need(documented.rsplit(".", 1)[1])
    documented = importlib.import_module(documented)
    modules = [importlib.import_module(m) for m in module.split()]
    sources = {name: m for m in modules for name in m.__all__}
    assert set(documented.__all__) <= set(sources)
    for name in documented.__all__:
        assert getattr(documented, name) is getattr(sources[name], name), name


def test_the_command_line_finds_the_library_modules_it_imports_by_name():
    from hapsira_cowell.cli import app

    for name in ("constants", "outputs.oem", "propagation.dask"):
        assert app._lib(name).__name__ == f"hapsira_cowell.{name}"
