"""The README's first command (the job the package is for) and the home page's write
where git ignores: running them in a clone leaves no untracked result behind."""

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _first_propagate(page):
    """The output paths of the first ``hapsira-cowell propagate`` in ``page``'s bash blocks."""
    for block in re.findall(r"^```bash\n(.*?)^```", (ROOT / page).read_text(), re.S | re.M):
        for command in re.split(r"&&|\n", block.replace("\\\n", " ")):
            words = shlex.split(command, comments=True)
            if words[:2] == ["hapsira-cowell", "propagate"]:
                out = words[words.index("--out") + 1] if "--out" in words else "result.npz"
                paths = [out]
                if "--plot" in words:
                    paths.append(words[words.index("--plot") + 1])
                return paths
    raise AssertionError(f"{page}: no hapsira-cowell propagate command")


@pytest.mark.parametrize("page", ["README.md", "docs/index.md"])
def test_the_first_command_writes_where_git_ignores(page):
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git clone")
    paths = _first_propagate(page)
    assert len(paths) == 2  # the npz and the plot
    for path in paths:
        ignored = subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=ROOT)
        assert ignored.returncode == 0, f"{page}: {path} is not ignored by git"
