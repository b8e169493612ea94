"""The throughput chart of docs/benchmarks.md from the H100 results.

    python benchmarks/plot.py

Plots the two-body + J2 runs of ``results/h100.json`` (hapsira cuda and its
peers from that run) and the drag + re-entry variant of ``results/h100-drag.json``
(measured after the stride fix; the drag runs in ``h100.json`` predate it).
"""

import json
import os
import tempfile

from hapsira_cowell.plots import throughput

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    with open(os.path.join(HERE, "results", "h100.json")) as source:
        report = json.load(source)
    report["runs"] = [run for run in report["runs"] if run["variant"] == "j2"]
    with tempfile.TemporaryDirectory() as tmp:
        j2 = os.path.join(tmp, "h100.json")
        with open(j2, "w") as out:
            json.dump(report, out)
        throughput([j2, os.path.join(HERE, "results", "h100-drag.json")],
                   os.path.join(HERE, "..", "docs", "img", "throughput_h100.png"),
                   title="Reference workload, one day, on an H100 (NVIDIA H100 80GB HBM3)")


if __name__ == "__main__":
    main()
