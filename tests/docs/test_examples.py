"""Every ```python block of docs/*.md runs, or says why not.

Three kinds of block, told apart by their first line or their shape:

- a signature, ``name(a, b, c=1)`` (only calls of a public name, on names and
  literals; ``*,`` and ``-> Result`` allowed): its parameters, in order, and its
  literal defaults must be the real ones; a call that names a perturbation as in
  an ``f``, ``a = J2_perturbation(t, rr, vv, k, ...)``, must bind to its signature;
- ``# not run: <reason>``: never run (a cluster, a file the reader has, a C
  compiler); few, each with its reason;
- everything else runs. A page's blocks run in order in one namespace, as a
  reader pastes them, in an empty temporary folder (as in a fresh clone: a file
  an example reads is one the package ships, such as its catalog, or one the
  example writes; never the repository's or ``HAPSIRA_TEST_DATA``'s); each must
  hold an ``assert``.
  ``# host only: <reason>`` blocks (thousands of objects) are not run under the
  CUDA simulator; they run on cpu and parallel. A block that needs an optional
  extra (it imports jax, dask, oem..., or calls a writer of one: `NEEDS`) where
  the extra is not installed ends the page's run there, skipped naming the extra
  (the blocks after it may use its names).
"""

import ast
import inspect
import linecache
import os
import re
from pathlib import Path

import pytest

from extras import EXTRAS, installed, reason

DOCS = Path(__file__).resolve().parents[2] / "docs"
NOT_RUN = re.compile(r"#\s*not run:\s*(.*)")
HOST_ONLY = re.compile(r"#\s*host only:\s*(.*)")
#: Blocks that are never run, at most: raise it only with a reason in the markdown.
MAX_NOT_RUN = 10
#: Where signature blocks' names are looked up, first match wins.
MODULES = ["hapsira_cowell", "hapsira_cowell.events", "hapsira_cowell.perturbations",
           "hapsira_core.ivp", "hapsira_cowell.conjunctions"]
#: Names of the library whose use needs an extra's package, besides imports of it.
NEEDS = {"write_oem": "oem", "read_oem": "oem", "write_cdms": "ccsds_ndm",
         "read_cdm": "ccsds_ndm", "read_cdms": "ccsds_ndm", "read_omms": "ccsds_ndm",
         "to_zarr": "zarr"}


def _blocks():
    found = []
    for page in sorted(DOCS.glob("*.md")):
        text = page.read_text()
        for match in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M):
            line = text.count("\n", 0, match.start()) + 2
            found.append((page.name, line, match.group(1)))
    return found


BLOCKS = _blocks()
PAGES = sorted({page for page, _, _ in BLOCKS})


def _first_line(source):
    return source.lstrip().splitlines()[0] if source.strip() else ""


def _signature_calls(source):
    """The calls of a signature block, or None when it is code to run."""
    text = re.sub(r"\)\s*->\s*[\w.]+\s*$", ")", source.strip(), flags=re.M)
    text = re.sub(r"\*\s*,", "", text)
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    calls = []
    for stmt in tree.body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            call, shape = stmt.value, "signature"
            if not all(isinstance(a, ast.Name) for a in call.args):
                return None
        elif (isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call)
              and [getattr(a, "id", None) for a in stmt.value.args[:4]] == ["t", "rr", "vv", "k"]):
            call, shape = stmt.value, "call"
        else:
            return None
        if not isinstance(call.func, ast.Name):
            return None
        calls.append((shape, call))
    return calls or None


def _kind(source):
    first = _first_line(source)
    if NOT_RUN.match(first):
        return "not run"
    if _signature_calls(source) is not None:
        return "signature"
    if HOST_ONLY.match(first):
        return "host only"
    return "run"


def _missing_extras(tree):
    """The extras a block needs (its imports of `EXTRAS`' packages, at any level of a
    dotted name: ``hapsira_cowell.jax`` needs jax; its uses of `NEEDS`) that are not
    installed."""
    modules = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(part for alias in node.names for part in alias.name.split("."))
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules.update(node.module.split(".") + [alias.name for alias in node.names])
        elif isinstance(node, (ast.Name, ast.Attribute)):
            modules.add(NEEDS.get(getattr(node, "id", None) or node.attr))
    return sorted({EXTRAS[m] for m in modules if m in EXTRAS and not installed(m)})


def _resolve(name):
    import importlib
    for module in MODULES:
        obj = getattr(importlib.import_module(module), name, None)
        if obj is not None:
            return obj
    raise AssertionError(f"{name}: not a public name of {', '.join(MODULES)}")


def _parameters(obj):
    target = getattr(obj, "py_func", obj)  # an hjit dispatcher: its Python function
    return [p for p in inspect.signature(target).parameters.values() if p.name != "self"]


def _computes(tree):
    """Whether a block calls anything outside its function definitions (imports,
    constants and definitions alone have no output to check)."""
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.Import, ast.ImportFrom)):
            continue
        if any(isinstance(node, ast.Call) for node in ast.walk(stmt)):
            return True
    return False


def test_every_block_is_found_and_classified():
    kinds = [_kind(source) for _, _, source in BLOCKS]
    assert len(BLOCKS) >= 40 and kinds.count("run") + kinds.count("host only") >= 25
    assert "ode.md" in PAGES and "index.md" in PAGES and "api.md" in PAGES


def test_blocks_not_run_are_few_and_say_why():
    not_run = [(page, line, NOT_RUN.match(_first_line(source)).group(1).strip())
               for page, line, source in BLOCKS if _kind(source) == "not run"]
    assert all(len(reason) >= 10 for _, _, reason in not_run), not_run
    assert len(not_run) <= MAX_NOT_RUN, not_run
    for page, line, source in BLOCKS:
        if _kind(source) == "host only":
            assert len(HOST_ONLY.match(_first_line(source)).group(1).strip()) >= 10, (page, line)


@pytest.mark.parametrize("page, line, source",
                         [b for b in BLOCKS if _kind(b[2]) == "signature"],
                         ids=[f"{p}:{n}" for p, n, s in BLOCKS if _kind(s) == "signature"])
def test_signatures_are_the_real_ones(page, line, source):
    for shape, call in _signature_calls(source):
        obj = _resolve(call.func.id)
        params = _parameters(obj)
        if shape == "call":
            inspect.signature(getattr(obj, "py_func", obj)).bind(*call.args)
            continue
        # (``**cowell_kwargs``: a keyword without a name, shown by its value's name)
        written = [a.id for a in call.args] + [k.arg or k.value.id for k in call.keywords]
        assert written == [p.name for p in params], f"{page}:{line} {call.func.id}"
        for keyword in call.keywords:
            if keyword.arg is None:
                continue
            real = next(p for p in params if p.name == keyword.arg)
            try:
                shown = ast.literal_eval(keyword.value)
            except ValueError:
                continue  # "umbra" | "penumbra": the choices, not a default
            assert shown == real.default, f"{page}:{line} {keyword.arg}"


@pytest.mark.parametrize("page", PAGES)
def test_page_examples_run(page, simulated, tmp_path, monkeypatch, capsys):
    blocks = [(line, source) for p, line, source in BLOCKS
              if p == page and _kind(source) in ("run", "host only")]
    if not blocks:
        pytest.skip(f"{page} has no block to run")
    monkeypatch.chdir(tmp_path)  # empty: the examples run as in a clone
    monkeypatch.setenv("MPLBACKEND", "Agg")
    namespace = {"__name__": "docs_example"}
    ran = 0
    for line, source in blocks:
        if simulated and _kind(source) == "host only":
            continue
        tree = ast.parse(source)
        assert (any(isinstance(node, ast.Assert) for node in ast.walk(tree))
                or not _computes(tree)), f"docs/{page}:{line}: it computes, so it asserts"
        missing = _missing_extras(tree)
        if missing:
            pytest.skip(f"docs/{page}:{line} and after ({ran} blocks ran): "
                        + "; ".join(reason(extra) for extra in missing))
        filename = f"docs/{page}:{line}"
        # readable by inspect.getsource, as a reader's file or notebook cell is (source
        # transformations: shared reciprocals, guarded reads, automatic Jacobians)
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        exec(compile(source, filename, "exec"), namespace)
        ran += 1
    capsys.readouterr()
    assert ran or simulated
    assert not list(Path(DOCS.parent).glob("*.png")), "an example wrote into the repository"


def test_documented_constants_are_the_code_s():
    """docs/perturbations.md's table of constants gives the code's values."""
    from hapsira_cowell import constants

    rows = re.findall(r"^\| `([A-Z0-9_]+)` \| ([-+0-9.e]+)", (DOCS / "perturbations.md").read_text(),
                      re.M)
    names = {name for name, _ in rows}
    assert {"K_EARTH", "R_EARTH", "J2_EARTH", "J3_EARTH"} <= names
    for name, shown in rows:
        if name not in constants.__all__:
            continue  # a table of arguments
        digits = len(re.sub(r"e.*|[-+.]", "", shown).lstrip("0"))
        assert float(f"{getattr(constants, name):.{digits}g}") == float(shown), name


def test_no_page_or_source_holds_merge_conflict_markers():
    """A merge left ``<<<<<<< HEAD`` / ``=======`` / ``>>>>>>> branch`` in
    docs/from-scipy-poliastro.md, two versions of two table rows, unnoticed: every text
    file of docs/, src/, tests/, benchmarks/ and the README is checked for them."""
    root = DOCS.parent
    marker = re.compile(r"^(<{7} |={7}$|>{7} )", re.MULTILINE)
    files = [root / "README.md"] + [
        path for folder in ("docs", "src", "tests", "benchmarks")
        for path in (root / folder).rglob("*")
        if path.suffix in (".md", ".py", ".toml", ".sh", ".json", ".txt", ".cfg")]
    assert len(files) > 100  # the folders were found
    marked = [str(path.relative_to(root)) for path in files
              if marker.search(path.read_text(encoding="utf-8", errors="replace"))]
    assert marked == []
