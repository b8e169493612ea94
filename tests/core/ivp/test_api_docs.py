"""The examples of docs/api.md marked ``# docs example:`` run as written."""

import re
from pathlib import Path

import pytest

API_MD = Path(__file__).resolve().parents[3] / "docs" / "api.md"
BLOCKS = re.findall(r"```python\n(# docs example: [^\n]*\n.*?)```", API_MD.read_text(), re.S)


def test_the_examples_are_found():
    assert len(BLOCKS) >= 1


@pytest.mark.parametrize("source", BLOCKS, ids=[b.splitlines()[0][16:] for b in BLOCKS])
def test_docs_example_runs(source, simulated, capsys):
    if simulated:
        pytest.skip("thousands of steps at n = 200 run in Python under the simulator; "
                    "test_large_n.py runs the array form there")
    exec(compile(source, str(API_MD), "exec"), {"__name__": "docs_example"})
    assert "0.0702" in capsys.readouterr().out
