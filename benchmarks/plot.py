"""The throughput chart of docs/benchmarks.md from the H100 results.

    python benchmarks/plot.py

Plots every run of ``results/h100.json`` (hapsira cuda on the two-body + J2
workload and on the drag + re-entry variant, and the peers of that run).
"""

import argparse
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args()
    from hapsira_cowell.cli.plots import throughput
    throughput([os.path.join(HERE, "results", "h100.json")],
               os.path.join(HERE, "..", "docs", "img", "throughput_h100.png"),
               title="Reference workload, one day, on an H100 (NVIDIA H100 80GB HBM3)")


if __name__ == "__main__":
    main()
