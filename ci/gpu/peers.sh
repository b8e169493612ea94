#!/usr/bin/env bash
# Issue 53 on one GPU machine without network (benchmarks/gpu_peers.py), in calls that
# each end within a device command's limit:
#   bash ci/gpu/peers.sh stiff                 (about 6-8 min: ours Radau, Rodas5P, BDF and
#                                               CuBIE Radau IIA on Robertson, Van der Pol, HIRES
#                                               at 1e5 objects, with the work-precision sweep)
#   bash ci/gpu/peers.sh large_n,stm           (about 4-5 min: Lorenz-96 n = 200, 1000 at 1e4
#                                               objects vs diffrax Dopri8; stm=True at 1e6)
#   bash ci/gpu/peers.sh stiff,large_n,stm --quick   (tiny sizes: the code paths, ~3 min)
# The first argument names the parts; the others go to gpu_peers.py (--n 30000,
# --problems hires, --sweep '' ...). Installs the carried cp312 wheels (WHEELS, default
# .whl/: numpy 2.4.6, since numba-cuda 0.30 fails with numpy 2.5; numba-cuda 0.30.4;
# astropy, pyerfa, astropy-iers-data, sgp4; cubie 0.14.2 and pint, flexcache,
# flexparser, platformdirs, rdflib, isodate) into /tmp/site once per machine; numba,
# llvmlite, scipy, jax, diffrax, equinox, cupy and the CUDA libraries are the image's.
# Prints the versions found, then runs the parts with a deadline (DEADLINE seconds
# from this script's start, default 540): a run that would not fit is skipped and
# recorded as such, and the record is written after every run. In $OUT (default
# gpu-out): gpu_peers_<parts>.json, gpu_peers_<parts>.log and probe_<parts>.txt. Join
# the calls' records where they come back:
#   python benchmarks/gpu_peers.py --merge A.json B.json --out benchmarks/results/gpu_peers.json
set -u
START=$(date +%s)
PARTS=${1:-stiff}
shift || true
cd "$(dirname "$0")/../.."
ROOT=$PWD
WHEELS=${WHEELS:-$ROOT/.whl}
OUT=${OUT:-$ROOT/gpu-out}
DEADLINE=${DEADLINE:-540}
TAG=${PARTS//,/_}
mkdir -p "$OUT"

if [ -d "$WHEELS" ] && [ ! -f /tmp/site/.installed ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site "$WHEELS"/*.whl || exit 1
    touch /tmp/site/.installed
fi
export PYTHONPATH=/tmp/site:$ROOT/src:$ROOT:${PYTHONPATH:-}
# kernels compiled cold in each process (as state_size.py and stm_cost.py run theirs)
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false HAPSIRA_CACHE=0

{
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
    python3 - <<'PY'
import importlib, platform
print("python", platform.python_version())
for name in ("numpy", "numba", "llvmlite", "numba_cuda", "scipy", "astropy", "sgp4", "jax",
             "jaxlib", "diffrax", "equinox", "cupy", "cubie"):
    try:
        module = importlib.import_module(name)
        print(name, getattr(module, "__version__", "?"), getattr(module, "__file__", ""))
    except Exception as error:
        print(name, "missing:", type(error).__name__, str(error)[:160])
try:
    from numba import cuda
    device = cuda.get_current_device()
    print("numba-cuda device", device.name, device.compute_capability)
except Exception as error:
    print("numba-cuda device failed:", error)
PY
} > "$OUT/probe_$TAG.txt" 2>&1
cat "$OUT/probe_$TAG.txt"

LEFT=$((DEADLINE - ($(date +%s) - START)))
echo "== gpu_peers.py --parts $PARTS ($LEFT s left)"
set -o pipefail
python3 benchmarks/gpu_peers.py --parts "$PARTS" --deadline "$LEFT" \
    --out "$OUT/gpu_peers_$TAG.json" "$@" 2>&1 | tee "$OUT/gpu_peers_$TAG.log"
RC=$?
echo "== done after $(($(date +%s) - START)) s (exit $RC)"
exit $RC
