"""Comments and docstrings under src/ say what is true now and why: they name no GPU or
CPU model and no date. The measurements behind a default live in docs/benchmarks.md
("Measurements behind the defaults"). Checked on the source text; nothing is compiled."""

import ast
import io
import pathlib
import re
import tokenize

#: the packages whose comments and docstrings are read
SRC = pathlib.Path(__file__).resolve().parents[2] / "src"
PACKAGES = ("hapsira_core", "hapsira_cowell")

#: a GPU or CPU model, or a date; an ISO timestamp (a date followed by ``T``) shows a
#: format and is allowed
HISTORY = re.compile(r"\b(?:H100|H200|A100|EPYC|Emerald|znver\w*)\b"
                     r"|\b20\d{2}-\d{2}-\d{2}(?!T)")


def commentary_lines(source):
    """``{line number: text}`` of the comments and of the lines of string statements
    (docstrings: a module's, a class's, a function's, an attribute's) of ``source``."""
    lines = source.splitlines()
    found = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            found[token.start[0]] = token.string
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, str):
            for number in range(node.lineno, node.end_lineno + 1):
                found[number] = lines[number - 1]
    return found


def offences(root=SRC):
    """``file:line: text`` of every comment or docstring line under ``root``'s packages
    that names a machine model or a date."""
    out = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            source = path.read_text(encoding="utf-8")
            for number, text in sorted(commentary_lines(source).items()):
                if HISTORY.search(text):
                    out.append(f"{path.relative_to(root)}:{number}: {text.strip()}")
    return out


def test_no_comment_or_docstring_names_a_machine_model_or_a_date():
    found = offences()
    assert not found, ("comments and docstrings say why, not on which machine or when "
                       "(move measurements to docs/benchmarks.md, \"Measurements behind "
                       "the defaults\"):\n" + "\n".join(found))


def test_the_scan_reads_comments_and_docstrings_but_not_code_or_timestamps(tmp_path):
    package = tmp_path / "hapsira_core"
    package.mkdir()
    (tmp_path / "hapsira_cowell").mkdir()
    (package / "m.py").write_text(
        '"""Module: fast on an H200."""\n'                           # 1 flagged
        "X = 1  # measured 2026-11-28\n"                              # 2 flagged
        "#: the width\n"                                               # 3
        "#: (znver4 box)\n"                                            # 4 flagged
        "def f():\n"                                                   # 5
        '    """Reads "2026-01-01T00:00:00" (UTC)."""\n'               # 6 a format
        "    raise ValueError('t: e.g. 2025-02-15 12:00')\n"           # 7 code, not read
        "class C:\n"                                                   # 8
        '    """Twice as fast\n'                                       # 9
        '    as on an A100, 2025-01-02."""\n',                          # 10 flagged
        encoding="utf-8")
    assert [line.split(": ")[0] for line in offences(tmp_path)] == [
        "hapsira_core/m.py:1", "hapsira_core/m.py:2", "hapsira_core/m.py:4",
        "hapsira_core/m.py:10"]
