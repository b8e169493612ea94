#!/usr/bin/env bash
# One command for the GPU machine (see docs/gpu.md): install the carried wheels
# (.whl/, cp312: numpy<2.5, astropy, pyerfa, astropy-iers-data, sgp4), check the
# cuda target against the host and time it, then run the test suite on the
# real GPU. Results land in ${OUT:-gpu-out}.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src:${PYTHONPATH:-}
export PYTHONUNBUFFERED=1
# the debris catalogs, carried in .gpu_shared/ (../shared does not travel)
[ -d .gpu_shared ] && export HAPSIRA_TEST_DATA=$PWD/.gpu_shared
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/nvidia-smi.txt"
timeout "${CHECK_TIMEOUT:-330}" python3 benchmarks/gpu_check.py --out "$OUT" ${CHECK_ARGS:-} 2>&1 | tee "$OUT/gpu_check.log"
if [ "${SKIP_TESTS:-0}" != 1 ]; then
    HAPSIRA_TARGET=cuda timeout "${TEST_TIMEOUT:-240}" python3 -m pytest -q -n 8 --dist loadfile \
        -p no:cacheprovider tests 2>&1 | tee "$OUT/pytest-gpu.log" | tail -25
fi
