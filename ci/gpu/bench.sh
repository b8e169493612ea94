#!/usr/bin/env bash
# The benchmark of docs/benchmarks.md, one command on the GPU machine:
#   bash ci/gpu/bench.sh [NAME]
# Installs the carried cp312 wheels (.whl/, for a machine without network; with
# network, `pip install -e ".[test,cuda]"` and diffrax instead), then runs
# benchmarks/bench.py on the cuda target with its peers (diffrax on the same
# GPU, the parallel and cpu targets) and writes benchmarks/results/NAME.json
# (default h100), also copied to $OUT when set.
set -u
cd "$(dirname "$0")/../.."
NAME=${1:-h100}
if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site:${PYTHONPATH:-}
fi
export PYTHONPATH=$PWD/src:${PYTHONPATH:-} PYTHONUNBUFFERED=1
HAPSIRA_TARGET=cuda python3 benchmarks/bench.py --name "$NAME" || exit 1
if [ -n "${OUT:-}" ]; then cp "benchmarks/results/$NAME.json" "$OUT/"; fi
