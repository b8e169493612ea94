#!/usr/bin/env bash
# The GPU benchmarks of docs/benchmarks.md, one command on the GPU machine:
#   bash ci/gpu/bench.sh
# Installs the carried cp312 wheels (.whl/, for a machine without network; with
# network, `pip install -e ".[test,cuda,bench,bench-gpu]"` instead), then runs the
# stages of ci/gpu/core.sh one after the other on an otherwise idle machine:
# probe, regression (TREES="old=<an earlier tree>": its reference kernel against
# this one's), bench (reference workload at 1e6 with diffrax; SIZES=1e4,1e5,1e6
# for more), ensembles (Van der Pol and Lotka-Volterra at 1e6: ours, CuBIE,
# diffrax; before the tests, which would share the GPU with them), tests (the whole
# suite on the GPU, in the background on all cores but six from here on), foreign (a C function linked into a kernel vs its hjit twin,
# two processes: the second loads the linked kernel from the cache), jax (inside
# jax.jit vs diffrax), latency and cache (first result in new processes, cold and
# warm kernel cache). The results JSON land in benchmarks/results/
# (<machine>_core.json, <machine>_ensembles.json, ...) and in $OUT/results.tar.gz.
set -u
cd "$(dirname "$0")/../.."
DEADLINE="${DEADLINE:-3000}" bash ci/gpu/core.sh probe regression bench ensembles tests foreign \
    jax latency cache || exit 1
cp /tmp/hapsira-gpu/results/*.json benchmarks/results/
