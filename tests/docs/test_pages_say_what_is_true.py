"""The user pages say what is true now: they name no date and no GPU or CPU model.

Measurements, with the machine and the day they were taken on, live in
docs/benchmarks.md (results) and docs/log.md (the dated record of what was tried);
every other page of docs/ and the README point there for numbers. Read as text:
link targets (``](...)``) are not prose, and dates inside fenced code blocks are an
example's data (an epoch), not history; a machine model is flagged there too.
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: the pages allowed to name machines and dates
RECORDS = {"benchmarks.md", "log.md"}

DATE = re.compile(r"\b(?:19|20)\d{2}-\d{2}-\d{2}\b")
#: GPU and CPU models, and LLVM's names of CPUs
MACHINE = re.compile(
    r"\b(?:[ABHLV]100|H200|GH200|[BG]B?200|A10G?|A30|A40|L4|L40S?|T4|P100|K80"
    r"|RTX\s?\d{4}\w*|Quadro|Tesla|Radeon|Instinct|MI\d{3}X?"
    r"|EPYC|Xeon|Ryzen|Threadripper|Core\si[3579]|Emerald\sRapids|Sapphire\sRapids"
    r"|Graviton\d?|znver\d|emeraldrapids|sapphirerapids|skylake(?:-avx512)?"
    r"|icelake(?:-server)?|cascadelake)\b", re.I)
FENCE = re.compile(r"^\s*(```|~~~)")
LINK_TARGET = re.compile(r"\]\([^)]*\)")


def pages(root=ROOT):
    return sorted(p for p in (root / "docs").glob("*.md") if p.name not in RECORDS) + \
        [root / "README.md"]


def offences(path, root=ROOT):
    """``page:line: text`` of each line of ``path`` that names a date (outside fenced
    code) or a machine model (anywhere), link targets left out."""
    out, fenced = [], False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        text = LINK_TARGET.sub("]()", line)
        if MACHINE.search(text) or (not fenced and DATE.search(text)):
            out.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    return out


def test_no_user_page_names_a_date_or_a_machine_model():
    found = [line for page in pages() for line in offences(page)]
    assert not found, ("the user pages say what is true now; numbers with their machine "
                       "and date go to docs/benchmarks.md, the story of how they came "
                       "about to docs/log.md:\n" + "\n".join(found))


def test_the_scan_sees_dates_and_machines_but_not_epochs_or_link_targets(tmp_path):
    (tmp_path / "docs").mkdir()
    page = tmp_path / "docs" / "page.md"
    page.write_text(
        "# Page\n"                                                        # 1
        "Measured on 2026-11-29.\n"                                       # 2 flagged
        "Fast on one H100 and on a 2-core AMD EPYC.\n"                    # 3 flagged
        "See [the log](log.md#2026-11-23-the-rebuilt-core-on-an-h100).\n"  # 4 a target
        "```python\n"                                                     # 5
        'epoch = Time("2025-02-15T12:00:00", scale="utc")\n'              # 6 an epoch
        "# took 3 s on an a100\n"                                         # 7 flagged
        "```\n"                                                           # 8
        "Objects L1 and L2 cache; an H-100 is no model; 1e-12 is no date.\n",  # 9
        encoding="utf-8")
    (tmp_path / "docs" / "benchmarks.md").write_text("H200, 2026-11-28\n")
    (tmp_path / "README.md").write_text("one NVIDIA H200\n")
    found = [line for p in pages(tmp_path) for line in offences(p, tmp_path)]
    assert [line.split(": ")[0] for line in found] == [
        "docs/page.md:2", "docs/page.md:3", "docs/page.md:7", "README.md:1"]
