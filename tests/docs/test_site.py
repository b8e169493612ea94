"""The built site renders every markdown table as a table.

A paragraph written inside a table ends it: the rows after it are rendered as
paragraph text that starts with ``|`` (docs/api.md's ``solve_ivp`` table lost six
rows so). The site is built as CI builds it (``mkdocs build --strict``) and every
page's text outside ``<pre>`` is read line by line.
"""

import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: Elements whose text is not prose: code blocks, inline code (stood in for by a
#: letter, so that a line is still seen to start with it), scripts and styles.
SKIPPED = {"pre", "script", "style"}
CODE = "code"
#: Elements that start a new block of text.
BLOCKS = {"p", "li", "td", "th", "dd", "dt", "div", "h1", "h2", "h3", "h4", "h5", "h6",
          "table", "tr", "blockquote", "section", "article", "body"}


class _Prose(HTMLParser):
    """Each block's text outside ``SKIPPED``, inline code as one letter."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.blocks, self._text, self._skip, self._code = [], [], 0, 0

    def _close(self):
        text = "".join(self._text)
        if text.strip():
            self.blocks.append(text)
        self._text = []

    def handle_starttag(self, tag, attrs):
        if tag in SKIPPED:
            self._skip += 1
        elif tag == CODE:
            if not self._skip and not self._code:
                self._text.append("x")
            self._code += 1
        elif tag in BLOCKS:
            self._close()

    def handle_endtag(self, tag):
        if tag in SKIPPED:
            self._skip = max(self._skip - 1, 0)
        elif tag == CODE:
            self._code = max(self._code - 1, 0)
        elif tag in BLOCKS:
            self._close()

    def handle_data(self, data):
        if not self._skip and not self._code:
            self._text.append(data)

    def close(self):
        super().close()
        self._close()


def leaked_table_lines(html):
    """Lines of prose in ``html`` that are markdown table syntax: they start with
    ``|`` or hold a delimiter row (``| ---``, ``|---``)."""
    parser = _Prose()
    parser.feed(html)
    parser.close()
    return [line.strip() for block in parser.blocks for line in block.splitlines()
            if line.strip().startswith("|") or re.search(r"\|\s*:?-{3}", line)]


def test_the_check_sees_a_leaked_row_and_nothing_else():
    leaked = ("<p>A paragraph inside a table.\n| <code>events</code> | an <code>Event</code> |"
              "\n| <code>stm</code> | <code>True</code> |</p>")
    assert leaked_table_lines(leaked) == ["| x | an x |", "| x | x |"]
    assert leaked_table_lines("<p>head</p><p>|---|---|</p>") == ["|---|---|"]
    fine = ("<table><tr><td><code>a | b</code></td></tr></table>"
            "<pre><code>| not | prose |\n|---|</code></pre>"
            "<p><code>|x|</code> is its norm, and a | b is an or</p>")
    assert leaked_table_lines(fine) == []


def test_every_page_renders_its_tables(tmp_path):
    pytest.importorskip("mkdocs", reason="the docs extra (pip install -e '.[docs]')")
    site = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q",
                           "-d", str(site)], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    pages = sorted(site.glob("**/index.html"))
    assert len(pages) >= 15  # the nav's pages were built
    tables = 0
    leaked = {}
    for page in pages:
        html = page.read_text(encoding="utf-8")
        tables += html.count("<table")
        lines = leaked_table_lines(html)
        if lines:
            leaked[str(page.relative_to(site))] = lines[:3]
    assert tables > 50  # the pages' tables are there to be checked
    assert leaked == {}
