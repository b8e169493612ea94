#!/usr/bin/env bash
# The launcher's and the kernel's launch settings on the reference workload, one GPU call:
#   bash ci/gpu/launch_sweep.sh
# 1. chunk schedules: benchmarks/investigations/gpu_timeline.py (chunks 2^15..2^18, with --trace) for
#    this tree and for TREES="name=path ..." (variants of the launcher, each a copy of
#    this tree, with benchmarks/investigations/; 2026-11-23: short first and last launches, not kept), alternating,
#    ROUNDS times;
# 2. register caps and block sizes (HAPSIRA_CUDA_MAX_REGISTERS, HAPSIRA_CUDA_BLOCK):
#    a cap only adds warps per SM where the block's size lets one more block fit
#    (at 128 threads a block, 200 registers still give 2 blocks, as 255 do), so each
#    cap goes with the block size at which it adds warps (CAPS="regs:block ...").
# Needs the wheels installed by ci/gpu/core.sh (run `bash ci/gpu/core.sh probe` first).
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
export HAPSIRA_TARGET=cuda HAPSIRA_CACHE=0
for round in $(seq "${ROUNDS:-2}"); do
    for t in this=. ${TREES:-}; do
        name=${t%%=*}; tree=${t#*=}
        echo "== timeline $name (round $round)"
        PYTHONPATH=/tmp/site:$tree/src timeout 150 python3 "$tree/benchmarks/investigations/gpu_timeline.py" \
            --chunks "${CHUNKS:-15,16,17,18}" --repeat 7 ${TRACE:---trace} \
            --out "$OUT/timeline_${name}_$round.json" 2>&1 | grep -v "^  chunk_start" | tail -7
    done
done
for cap in ${CAPS:-0:128 200:64 200:32 184:32 168:64}; do
    echo "== registers ${cap%%:*} (0: no cap), block ${cap#*:}"
    HAPSIRA_CUDA_MAX_REGISTERS=${cap%%:*} HAPSIRA_CUDA_BLOCK=${cap#*:} PYTHONPATH=/tmp/site:$PWD/src \
        timeout 120 python3 benchmarks/investigations/gpu_regression.py --tree this=. --repeat 5 \
        --out "$OUT/caps_${cap%%:*}_${cap#*:}.json" 2>&1 | grep "kernel alone"
done
