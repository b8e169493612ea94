#!/usr/bin/env bash
# Threads per block and register caps, alternated round by round, one process per
# (workload, setting), kernels from a disk cache compiled once (issue 29):
#   bash ci/gpu/occupancy.sh [ROUNDS]   (after `bash ci/gpu/core.sh probe`; OUT: results)
# N objects (default 1e6; N_STM, default 1e5, with the state matrix).
# Each line: workload, HAPSIRA_CUDA_BLOCK, HAPSIRA_CUDA_MAX_REGISTERS, host_profile.py's summary.
set -u
cd "$(dirname "$0")/../.."
export HAPSIRA_TARGET=cuda HAPSIRA_CACHE=1 HAPSIRA_CACHE_DIR=/tmp/hapsira-occupancy
export PYTHONPATH=/tmp/site:$PWD/src
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
SETTINGS=${SETTINGS:-"128:0 64:168 64:0"}
WORKLOADS=${WORKLOADS:-"j2 drag stm textbook"}
for round in $(seq 0 "${1:-2}"); do  # round 0 compiles and is not kept
    for w in $WORKLOADS; do
        for s in $SETTINGS; do
            b=${s%%:*}; r=${s##*:}
            args=(--workload "$w" --n "${N:-1e6}")
            [ "$w" = stm ] && args=(--workload j2 --stm --n "${N_STM:-1e5}")
            line=$(HAPSIRA_CUDA_BLOCK=$b HAPSIRA_CUDA_MAX_REGISTERS=$r python3 \
                benchmarks/investigations/host_profile.py --repeat 5 --top 0 \
                "${args[@]}" --out "$OUT/occupancy_${w}_${b}_${r}_r${round}.json" 2>&1 | head -1)
            echo "round $round $w block $b maxreg $r: $line"
        done
    done
done
