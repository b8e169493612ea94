#!/usr/bin/env bash
# Kernel variants on the GPU machine, one process each (settings are fixed at
# import): dense-output mode, block size, object ordering. After ci/gpu/run.sh
# has installed the wheels; results in $OUT/gpu_check_<label>.json.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-gpu-out}
export PYTHONPATH=/tmp/site:$PWD/src:${PYTHONPATH:-} PYTHONUNBUFFERED=1
run() { label=$1; shift; env "$@" python3 benchmarks/gpu_check.py --out "$OUT" --label "_$label" \
    --check 0 --sizes 1e5,1e6 ${SORT:-} 2>&1 | grep -E "^(compile|timing)" | sed "s/^/$label /"; }
run keep_b128 HAPSIRA_DENSE=keep
run recompute_b64 HAPSIRA_CUDA_BLOCK=64
run recompute_b256 HAPSIRA_CUDA_BLOCK=256
SORT=--sort run recompute_b128_sorted HAPSIRA_CUDA_BLOCK=128
