"""The layout's promises, checked on the source text: where numba-cuda may be
imported, where target names may be compared, which module may import which."""

import ast
import pathlib
import re

import pytest

SRC = pathlib.Path(__file__).resolve().parents[2] / "src"
CORE = SRC / "hapsira_core"
TARGETS = CORE / "targets"
FRONTS = CORE / "fronts"
CLI = SRC / "hapsira_cowell" / "cli"


def modules():
    return sorted(p for p in SRC.rglob("*.py") if ".egg-info" not in str(p))


def _is_module(name):
    path = SRC.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def imported_names(path):
    """Every module name an ``import`` or ``from ... import`` of ``path`` names,
    made absolute (``from ..ivp import api`` in hapsira_core/fronts/x.py gives
    ``hapsira_core.ivp`` and ``hapsira_core.ivp.api``)."""
    package = list(path.relative_to(SRC).with_suffix("").parts)
    if package[-1] != "__init__":
        package = package[:-1]
    else:
        package = package[:-1]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            # ``from package import module`` names the module's file, not the package's
            # (as Python resolves it, and as a reader follows it)
            modules_named = [alias.name for alias in node.names
                             if _is_module(f"{module}.{alias.name}")]
            if len(modules_named) < len(node.names):
                names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def test_the_source_tree_is_found():
    assert len(modules()) > 50 and (TARGETS / "cuda" / "__init__.py").exists()


def test_only_targets_import_numba_cuda():
    offenders = [str(p.relative_to(SRC)) for p in modules()
                 if TARGETS not in p.parents
                 and any(n == "numba.cuda" or n.startswith(("numba.cuda.", "numba_cuda"))
                         for n in imported_names(p))]
    assert offenders == []


# a comparison with a target's name: TARGET == "cuda", "cpu" != x, in ("cpu", ...)
_NAME = r"""['"](?:cpu|parallel|cuda)['"]"""
_COMPARISON = re.compile(rf"(?:==|!=)\s*{_NAME}|{_NAME}\s*(?:==|!=)|\bin\s*[(\[{{]\s*{_NAME}")


def test_no_target_name_is_compared_outside_targets():
    offenders = []
    for path in modules():
        if TARGETS in path.parents:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#")[0]
            if _COMPARISON.search(code):
                offenders.append(f"{path.relative_to(SRC)}:{number}: {line.strip()}")
    assert offenders == []


def test_no_front_imports_another():
    """A front is a module or a package of ``fronts/``; routing is ``fronts/__init__``'s."""
    def front_of(path):
        parts = path.relative_to(FRONTS).with_suffix("").parts
        return None if parts == ("__init__",) else parts[0]

    offenders = []
    for path in FRONTS.rglob("*.py"):
        own = front_of(path)
        if own is None:
            continue
        for name in imported_names(path):
            parts = name.split(".")
            if parts[:2] == ["hapsira_core", "fronts"] and len(parts) > 2 and parts[2] != own:
                offenders.append(f"{path.relative_to(FRONTS)} imports {name}")
    assert offenders == []


def test_every_front_uses_the_one_checker():
    """Each solve_ivp front checks its call with `Call.check` (`hapsira_core.ivp.call`)
    and none calls the checks it is made of (a front's own copy of them drifts from the
    others' messages)."""
    fronts = [FRONTS / "numpy.py", FRONTS / "jax" / "__init__.py", FRONTS / "dask.py"]
    parts = ("call_options", "solver_options", "step_sizes", "extra_args", "jacobian_option",
             "with_args", "with_jacobian")
    found = {}
    for path in fronts:
        calls = [node.func for node in ast.walk(ast.parse(path.read_text()))
                 if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)]
        checked = any(f.attr == "check" and isinstance(f.value, ast.Name)
                      and f.value.id == "Call" for f in calls)
        found[path.relative_to(FRONTS).as_posix()] = (
            checked, sorted({f.attr for f in calls}.intersection(parts)))
    assert found == {name: (True, []) for name in found}
    assert len(found) == 3


def test_nothing_below_the_command_line_imports_it():
    offenders = [str(p.relative_to(SRC)) for p in modules()
                 if CLI not in p.parents and p.parent != CLI
                 and any(n.startswith("hapsira_cowell.cli") for n in imported_names(p))]
    assert offenders == []


def _graph():
    """``module -> modules of the library it imports`` (file level)."""
    names = {}
    for path in modules():
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    graph = {}
    for name, path in names.items():
        graph[name] = {n for n in imported_names(path) if n in names and n != name}
    return graph


def test_no_import_circles():
    graph = _graph()
    circles, state = [], {}

    def visit(node, stack):
        state[node] = "open"
        for other in sorted(graph[node]):
            if state.get(other) == "open":
                # a package imports its own submodules: not a circle of files
                cycle = stack[stack.index(other):] + [other]
                if not all(b.startswith(a + ".") or a.startswith(b + ".")
                           for a, b in zip(cycle, cycle[1:])):
                    circles.append(" -> ".join(cycle))
            elif other not in state:
                visit(other, stack + [other])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert circles == []


@pytest.mark.parametrize("floor, above", [
    ("hapsira_core.settings", ("hapsira_core.kernels", "hapsira_core.targets",
                               "hapsira_core.ivp", "hapsira_core.fronts")),
    ("hapsira_core.kernels", ("hapsira_core.targets", "hapsira_core.ivp",
                              "hapsira_core.fronts", "hapsira_core.jit")),
    ("hapsira_core.targets", ("hapsira_core.ivp", "hapsira_core.fronts", "hapsira_core.jit",
                              "hapsira_core.foreign")),
    ("hapsira_core.ivp", ("hapsira_core.fronts.",)),
])
def test_floors_import_only_downward(floor, above):
    graph = _graph()
    offenders = [f"{name} -> {other}" for name, imports in graph.items()
                 if name == floor or name.startswith(floor + ".")
                 for other in imports if other.startswith(above)]
    assert offenders == []


# hapsira_cowell's parts, each with the parts it may import (besides itself): the folders
# import in one direction, constants and units at the bottom, the command line at the top;
# models, inputs and outputs never import propagation (its fronts, router or adapter), and
# propagation reads no input or output format. A new module of hapsira_cowell's top level
# must be placed here.
_FLOOR = {"constants", "units"}
COWELL_PARTS = {
    "constants": set(), "units": set(),
    "models": _FLOOR,
    "perturbations": {"models"}, "events": {"models"},  # the documented paths: re-exports
    "jax": {"propagation"}, "dask": {"propagation"},  # the fronts' public names: re-exports
    "covariance": {"propagation"}, "conjunctions": {"propagation"},  # public names: re-exports
    "inputs": _FLOOR | {"models"},
    "outputs": _FLOOR | {"models"},
    "propagation": _FLOOR | {"models"},
    "cli": _FLOOR | {"models", "inputs", "outputs", "propagation", "__init__"},
}
#: Single modules a part may import beside its parts: the readers of CCSDS messages
#: (inputs/cdm.py, inputs/omm.py) turn RTN covariances inertial and give a message's
#: probability of collision with propagation's array arithmetic, neither a front nor
#: the router
COWELL_MODULES = {"inputs": {"hapsira_cowell.propagation.covariance",
                             "hapsira_cowell.propagation.probability"}}


def _cowell_part(name):
    parts = name.split(".")
    return "__init__" if len(parts) == 1 else parts[1]


def test_cowell_folders_import_in_one_direction():
    graph = _graph()
    offenders = []
    for name, imports in sorted(graph.items()):
        if not name.startswith("hapsira_cowell") or name == "hapsira_cowell":
            continue
        own = _cowell_part(name)
        if own not in COWELL_PARTS:
            offenders.append(f"{name}: not placed in COWELL_PARTS")
            continue
        offenders += [f"{name} -> {other}" for other in sorted(imports)
                      if other.startswith("hapsira_cowell")
                      and _cowell_part(other) not in COWELL_PARTS[own] | {own}
                      and other not in COWELL_MODULES.get(own, ())]
    assert offenders == []


def test_cowell_folder_rule_sees_a_wrong_import(monkeypatch):
    """The rule above is not vacuous: a model importing a front is named."""
    graph = _graph()
    graph["hapsira_cowell.models.events"] = graph["hapsira_cowell.models.events"] | {
        "hapsira_cowell.propagation.propagator"}
    monkeypatch.setitem(globals(), "_graph", lambda: graph)
    with pytest.raises(AssertionError, match="models.events -> hapsira_cowell.propagation"):
        test_cowell_folders_import_in_one_direction()
