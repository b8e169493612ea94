"""README.md works as written, in a clone.

- its ```python blocks run in order in one namespace, in a temporary folder, as
  tests/docs/test_examples.py runs the pages' blocks (each computing block asserts);
- its ```bash blocks are read as a shell reads them, in order, in a temporary folder:
  every command is one the README may show (``mkdir -p`` makes its folders), every
  ``pip install -e ".[...]"`` names extras of pyproject.toml, and every
  ``hapsira-cowell`` command passes the command line's own parsing and checks (the
  options, durations, perturbations, output folders) without propagating; no command
  reads a file outside the clone;
- the README's first ``hapsira-cowell propagate`` runs for real (as
  tests/cowell/cli/test_app.py's catalog run does);
- its documentation list links every page of mkdocs.yml's nav, and its last section
  is "Tests" with the test command CI runs.
"""

import ast
import linecache
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from hapsira_core import settings

from .test_examples import _computes  # the pages' rule: a block that computes asserts

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
TEST_COMMAND = 'pip install -e ".[test,docs,jax,dask]" && bash ci/test-matrix'
#: The commands the README may show, besides hapsira-cowell.
KNOWN = {"python", "pip", ".", "source", "mkdir", "bash", "mkdocs"}
SIMULATED = settings.TARGET == "cuda" and settings.cuda_simulator_enabled()
CLI_TARGET = "cpu" if SIMULATED else settings.TARGET


def _blocks(language):
    text = README.read_text()
    return [(text.count("\n", 0, m.start()) + 2, m.group(1))
            for m in re.finditer(rf"^```{language}\n(.*?)^```", text, re.S | re.M)]


def _commands():
    """``(line, words)`` of every command of the bash blocks, in order."""
    found = []
    for line, block in _blocks("bash"):
        for command in re.split(r"&&|\n|;", block.replace("\\\n", " ")):
            words = shlex.split(command, comments=True)
            if words:
                found.append((line, words))
    return found


def test_readme_examples_run(tmp_path, monkeypatch, capsys):
    blocks = _blocks("python")
    assert len(blocks) >= 4  # an explicit ODE, a stiff one, orbits, screening
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    namespace = {"__name__": "readme_example"}
    for line, source in blocks:
        tree = ast.parse(source)
        assert (any(isinstance(node, ast.Assert) for node in ast.walk(tree))
                or not _computes(tree)), f"README.md:{line}: it computes, so it asserts"
        filename = f"README.md:{line}"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        exec(compile(source, filename, "exec"), namespace)
    capsys.readouterr()
    assert not list(ROOT.glob("*.png")), "an example wrote into the repository"


def _extras():
    try:
        import tomllib
    except ImportError:  # Python 3.10
        tomli = pytest.importorskip("tomli", reason="tomllib (Python >= 3.11) or tomli")
        return set(tomli.loads((ROOT / "pyproject.toml").read_text())
                   ["project"]["optional-dependencies"])
    return set(tomllib.loads((ROOT / "pyproject.toml").read_text())
               ["project"]["optional-dependencies"])


def test_readme_commands_are_known_and_parse(tmp_path, monkeypatch):
    from hapsira_cowell.cli import app

    commands = _commands()
    assert any(words[0] == "hapsira-cowell" for _, words in commands)
    monkeypatch.chdir(tmp_path)
    extras = _extras()
    shown = set()
    for line, words in commands:
        where = f"README.md:{line}: {shlex.join(words)}"
        assert not any(".." in Path(word).parts for word in words), \
            f"{where}: reads outside the clone"
        if words[0] == "hapsira-cowell":
            args = app.build_parser().parse_args(app._join_negative_values(words[1:]))
            app._validate(args)  # options, durations, perturbations, output folders
            assert getattr(args, "catalog", None) is None, \
                f"{where}: the shipped catalog, so that it runs in a clone"
            shown.add(args.command)
            continue
        assert words[0] in KNOWN, f"{where}: not a command the README may show"
        if words[0] == "mkdir":
            for folder in words[1:]:
                if not folder.startswith("-"):
                    (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        if words[:3] == ["pip", "install", "-e"]:
            named = re.fullmatch(r"\.\[([\w,-]+)\]", words[3])
            assert named, where
            assert set(named.group(1).split(",")) <= extras, where
    assert {"propagate", "screen", "demo"} <= shown


def test_readme_first_propagate_runs(tmp_path):
    """The README's first command (the one a newcomer runs), as written, on the test
    run's target (cpu under the simulator) and kernel cache."""
    words = next(words for _, words in _commands() if words[:2] == ["hapsira-cowell", "propagate"])
    (tmp_path / "out").mkdir()
    # the test run's kernel cache, as tests/cowell/cli/test_app.py's run_cli uses it
    env = dict(os.environ, HAPSIRA_CACHE="1" if settings.CACHE else "0", MPLBACKEND="Agg")
    done = subprocess.run([sys.executable, "-m", "hapsira_cowell.cli", *words[1:],
                           "--target", CLI_TARGET], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    assert "Traceback" not in done.stderr
    assert "Warning" not in done.stderr + done.stdout  # the library's checks trip on nothing
    assert "objects: 119" in done.stdout and "failures: 0" in done.stdout
    assert (tmp_path / "out" / "result.npz").stat().st_size > 0
    assert (tmp_path / "out" / "altitude.png").read_bytes()[:4] == b"\x89PNG"


def test_readme_lists_every_page_and_ends_with_the_test_command():
    text = README.read_text()
    nav = re.findall(r"^\s+- [^:]+: (\S+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), re.M)
    assert len(nav) >= 15 and "ode.md" in nav and "screening.md" in nav
    missing = [page for page in nav if f"(docs/{page})" not in text]
    assert missing == []
    sections = re.findall(r"^## (.+)$", text, re.M)
    assert sections[-1] == "Tests"
    last = text[text.index("\n## Tests\n"):]
    assert f"```bash\n{TEST_COMMAND}\n```" in last
    assert "../shared" not in text
