#!/usr/bin/env bash
# Nsight Compute on one launch of the reference kernel (N objects, default 1e5; at 1e6 the
# first chunk's launch; LAUNCHES, default 2: a join-of-columns kernel runs first), after ci/gpu/run.sh installed the wheels. Writes $OUT/ncu.txt:
# the sections below with their detail tables (pipe utilisation, stall reasons).
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-gpu-out}
export PYTHONPATH=/tmp/site:$PWD/src:${PYTHONPATH:-} PYTHONUNBUFFERED=1 HAPSIRA_TARGET=cuda
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
cat > /tmp/one_launch.py <<'PY'
import sys, numpy as np
sys.path.insert(0, "benchmarks")
import workloads as workload
from hapsira_cowell import cowell
r0, v0 = workload.leo_cloud(int(float(sys.argv[1])), seed=2)
cowell(workload.K, r0, v0, np.array([workload.DAY / 2, workload.DAY]), f=workload.two_body_j2)
PY
# a plain numba kernel first: shows whether ncu sees numba's launches at all
timeout 120 "$NCU" --target-processes all python3 ci/gpu/tiny_ncu.py 2>&1 | grep -E "==PROF==|==WARNING==|==ERROR==|kernel|Duration" | head -5
timeout 400 "$NCU" --target-processes all --launch-count ${LAUNCHES:-2} --kernel-name regex:kernel \
    --section SpeedOfLight --section Occupancy --section LaunchStats \
    --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    --section WarpStateStats --section SchedulerStats --section InstructionStats \
    --print-details all --metrics smsp__inst_executed_pipe_fp64.sum,smsp__inst_executed.sum \
    python3 /tmp/one_launch.py "${N:-1e5}" > "$OUT/ncu.txt" 2>&1
tail -150 "$OUT/ncu.txt" | grep -v "^ *-" | grep -E "[A-Za-z]" | head -120
