"""The benchmarks: ``python -m benchmarks --list`` names them, ``python -m benchmarks
headline`` runs the headline comparisons (benchmarks/README.md).

Each script still runs on its own (``python benchmarks/<script>.py``): the scripts import
their neighbours (``harness``, ``workloads``, ``peers``) as top-level modules; only the
front door (`benchmarks.front`) is imported as part of this package.
"""
