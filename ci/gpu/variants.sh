#!/usr/bin/env bash
# Kernel variants on the GPU machine, one process each (settings are fixed at
# import): register cap and block size; median of 3 runs.
# After ci/gpu/run.sh has installed the wheels; results in $OUT/gpu_check_<label>.json.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-gpu-out}
export PYTHONPATH=/tmp/site:$PWD/src:${PYTHONPATH:-} PYTHONUNBUFFERED=1
run() { label=$1; shift; env "$@" python3 benchmarks/investigations/gpu_check.py --out "$OUT" --label "_$label" \
    --check 0 --sizes 1e6 ${SORT:-} 2>&1 | grep -E "^timing" | sed "s/^/$label /"; }
for regs in ${REGS:-128 168 200}; do
    for block in ${BLOCKS:-128 256}; do
        run r${regs}_b$block HAPSIRA_CUDA_MAX_REGISTERS=$regs HAPSIRA_CUDA_BLOCK=$block
    done
done
