#!/usr/bin/env bash
# ncu with per-instruction stall samples (SourceCounters) on one launch of the reference
# kernel (N objects, end-only output), exported as CSV of the SASS page
set -u
N=${N:-1e5}
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
cat > /tmp/one_launch.py <<'PY'
import sys, numpy as np
sys.path.insert(0, "benchmarks")
import workloads as workload
from hapsira_core import settings
settings.CUDA_CHUNK = 10**7
from hapsira_cowell import cowell
r0, v0 = workload.leo_cloud(int(float(sys.argv[1])), seed=2)
cowell(workload.K, r0, v0, np.array([workload.DAY]), workload.RTOL, workload.ATOL, f=workload.two_body_j2)
PY
HAPSIRA_TARGET=cuda HAPSIRA_CACHE=0 timeout 400 "$NCU" --target-processes all --launch-count 1 \
  --kernel-name-base mangled --kernel-name regex:ArrayIdLi4E --section SourceCounters --section WarpStateStats \
  --import-source no -o $OUT/src python3 /tmp/one_launch.py $N > $OUT/ncu_log.txt 2>&1
tail -3 $OUT/ncu_log.txt
"$NCU" --import $OUT/src.ncu-rep --page source --csv --print-source sass > $OUT/source_sass.csv 2>$OUT/export_err.txt
wc -l $OUT/source_sass.csv; head -c 600 $OUT/source_sass.csv; cat $OUT/export_err.txt | head -5
"$NCU" --import $OUT/src.ncu-rep --page details > $OUT/details.txt 2>&1; grep -i "stall\|cycles per issued" $OUT/details.txt | head -20
