# one process per setting: the output-times variants with the stages kept (KEEP_STAGES) or not
for setting in "recompute:0:0" "keep:1:0" "keep_interleaved:1:1"; do
  IFS=: read name keep inter <<< "$setting"
  HAPSIRA_CUDA_INTERLEAVE=$inter KEEP=$keep python3 - "$OUT/output_times_$name.json" <<'PY' 2>&1 | grep -v "^written"
import os, sys
import hapsira_core.targets as t
t.active.KEEP_STAGES = os.environ["KEEP"] == "1"
print("KEEP_STAGES", t.active.KEEP_STAGES, "interleave", os.environ["HAPSIRA_CUDA_INTERLEAVE"])
sys.path.insert(0, "benchmarks/investigations")
sys.argv = ["cuda_output_times.py", "--out", sys.argv[1], "--repeat", "3"]
import cuda_output_times
cuda_output_times.main()
PY
done
