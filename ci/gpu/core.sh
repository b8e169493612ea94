#!/usr/bin/env bash
# The GPU session of docs/benchmarks.md ("The rebuilt core on the GPU") in one command:
#   bash ci/gpu/core.sh [STAGE ...]        (default: probe bench ensembles tests foreign jax latency)
# Stages run in the order given. probe; bench (reference workload at 1e6 with
# diffrax, benchmarks/reference.py --platform cuda); ensembles (Van der Pol and Lotka-Volterra at
# 1e6: ours, CuBIE, diffrax); tests (the whole suite on the real GPU, in the
# background on cores 0-9 while the next stages run on cores 10-15, sharing the
# GPU with them: stages timed against peers go before it); foreign (C linked into a
# kernel vs its hjit twin, two processes), jax (inside jax.jit vs diffrax),
# latency (first result in a new process, cold and warm cache), cache (what a
# new process finds in the kernel cache, ci/gpu/cache_check.py; not a default stage),
# regression (the reference kernel of other source trees, TREES="name=path ...",
# against this one: benchmarks/investigations/gpu_regression.py; not a default stage).
# Not default stages either: stiff (benchmarks/stiff.py --platform cuda, issue 31), screen
# (benchmarks/screening.py, 20,000 objects, 7 days, issue 32), stm (benchmarks/stm_cost.py,
# issue 28), userf (benchmarks/gpu_user_f.py, issue 29), statesize (benchmarks/state_size.py
# with CuBIE and diffrax, issue 24), interleave (ours with HAPSIRA_CUDA_INTERLEAVE 0 and 1),
# fetch (benchmarks/investigations/cuda_fetch.py: HAPSIRA_CUDA_FETCH 0 and 1, one process).
# (The stages bench, ensembles and jax run reference.py, ensembles.py and jax_vs_diffrax.py
# with --platform cuda, each with a deadline.)
# Environment: WHEELS (default .whl: carried cp312 wheels, installed into
# /tmp/site once: numpy<2.5, astropy, sgp4, oem, cubie, dask, distributed, zarr,
# hypothesis and their pure-Python dependencies, made with `pip download
# --only-binary=:all: --python-version 3.12` on a machine with network), DATA (default .gpu_shared: the debris catalogs),
# DEADLINE (seconds from the start, default 570: a stage starts only if its
# usual time fits), SIZES (bench sizes, default 1e6), ENS_N, FOREIGN_N (objects,
# default 1e6), JAX_N (default "100000 1000000"), JAX_DIFFRAX_N (default 100000),
# TESTS (pytest paths, default tests), OUT (default gpu-out). Everything lands in
# $OUT/results.tar.gz at the end.
set -u
START=$(date +%s)
cd "$(dirname "$0")/../.."
ROOT=$PWD
WHEELS=${WHEELS:-$ROOT/.whl}
DATA=${DATA:-$ROOT/.gpu_shared}
DEADLINE=${DEADLINE:-570}
OUT=${OUT:-$ROOT/gpu-out}
# results gathered outside $OUT, which may return only a few files: packed at the end
RES=/tmp/hapsira-gpu/results
rm -rf "$RES" && mkdir -p "$RES" "$OUT"
STAGES=${*:-probe bench ensembles tests foreign jax latency}

if [ -d "$WHEELS" ] && [ ! -f /tmp/site/.installed ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site "$WHEELS"/*.whl || exit 1
    touch /tmp/site/.installed
fi
export PYTHONPATH=/tmp/site:$ROOT/src:${PYTHONPATH:-}
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
[ -d "$DATA" ] && export HAPSIRA_TEST_DATA=$DATA
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
case "$GPU" in *H200*) MACHINE=h200 ;; *H100*) MACHINE=h100 ;; *) MACHINE=gpu ;; esac
CORES=$(nproc)
# with the tests in the background, they get all cores but six; the timed stages get those six
if [[ " $STAGES " == *" tests "* ]] && command -v taskset >/dev/null && [ "$CORES" -ge 12 ]; then
    TEST_CPUS="taskset -c 0-$((CORES - 7))"; BENCH_CPUS="taskset -c $((CORES - 6))-$((CORES - 1))"
else
    TEST_CPUS=""; BENCH_CPUS=""
fi

left() { echo $((DEADLINE - ($(date +%s) - START))); }

# stage NAME SECONDS COMMAND...: run COMMAND if SECONDS still fit before the deadline
stage() {
    local name=$1 need=$2 began
    shift 2
    if [ "$(left)" -lt "$need" ]; then
        echo "== $name: skipped ($(left) s left, needs about $need s)" | tee -a "$RES/skipped.txt"
        return
    fi
    echo "== $name ($(left) s left)"
    began=$(date +%s)
    timeout "$(left)" $BENCH_CPUS "$@" > "$RES/$name.log" 2>&1
    local rc=$?
    tail -40 "$RES/$name.log"
    echo "== $name: exit $rc after $(($(date +%s) - began)) s" | tee -a "$RES/stages.txt"
}

TESTS_PID=
for s in $STAGES; do
    case $s in
    probe)
        {
            nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
            python3 - <<'PY'
import importlib, platform
print("python", platform.python_version())
for name in ("numpy", "numba", "numba_cuda", "scipy", "astropy", "jax", "jaxlib", "diffrax",
             "equinox", "cupy", "cubie", "dask", "distributed", "zarr", "oem", "pytest", "xdist"):
    try:
        print(name, getattr(importlib.import_module(name), "__version__", "?"))
    except Exception as error:
        print(name, "missing:", type(error).__name__, str(error)[:120])
try:
    import jax
    print("jax devices", jax.devices())
except Exception as error:
    print("jax devices failed:", error)
try:
    from numba import cuda
    device = cuda.get_current_device()
    print("numba-cuda device", device.name, device.compute_capability)
except Exception as error:
    print("numba-cuda device failed:", error)
PY
        } > "$RES/probe.txt" 2>&1
        cat "$RES/probe.txt"
        ;;
    tests)
        # -n 8 --dist loadfile, with the longest file (100 warm processes in a row) given
        # its own process from the start rather than queued behind another file
        echo "== tests: in the background ($TEST_CPUS)"
        # (TESTS and TEST_K, a -k expression, select a part: then one -n 8 run)
        LONG=tests/core/kernels/test_disk_cache.py
        if [ -n "${TESTS:-}" ]; then SELECT=(-n 8 ${TEST_K:+-k "$TEST_K"} $TESTS); else
            SELECT=(-n 7 --ignore=$LONG tests); fi
        (HAPSIRA_TARGET=cuda HAPSIRA_CACHE=0 timeout "$(left)" $TEST_CPUS python3 -m pytest -q \
            --dist loadfile -p no:cacheprovider -rs --durations=25 -o timeout=480 \
            --junitxml="$RES/junit.xml" "${SELECT[@]}" > "$RES/pytest.log" 2>&1;
         echo "exit $?" >> "$RES/pytest.log") &
        TESTS_PID=$!
        if [ -z "${TESTS:-}" ]; then
            (HAPSIRA_TARGET=cuda HAPSIRA_CACHE=0 timeout "$(left)" $TEST_CPUS python3 -m pytest -q \
                -p no:cacheprovider -rs --durations=5 -o timeout=480 \
                --junitxml="$RES/junit_long.xml" $LONG > "$RES/pytest_long.log" 2>&1;
             echo "exit $?" >> "$RES/pytest_long.log") &
            TESTS_PID="$TESTS_PID $!"
        fi
        ;;
    bench)
        stage bench 40 python3 benchmarks/reference.py --platform cuda \
            --name "${MACHINE}_core${BENCH_TAG:-}" --sizes "${SIZES:-1e6}" \
            --variants "${VARIANTS:-j2,drag}" --peers "${PEERS:-diffrax}" --n-ref 20 --repeat 3
        cp "benchmarks/results/${MACHINE}_core${BENCH_TAG:-}.json" "$RES/" 2>/dev/null
        ;;
    ensembles)
        stage ensembles 150 python3 benchmarks/ensembles.py --platform cuda --n "${ENS_N:-1000000}" --repeat 3 \
            --n-ref 30 --timeout 170 --out "$RES/${MACHINE}_ensembles.json"
        ;;
    foreign)
        stage foreign 60 env HAPSIRA_TARGET=cuda python3 benchmarks/foreign.py run --n "${FOREIGN_N:-1000000}" \
            --repeat "${FOREIGN_REPEAT:-2}" --out "$RES/${MACHINE}_foreign.json"
        ;;
    jax)
        stage jax 60 python3 benchmarks/jax_vs_diffrax.py --platform cuda --n ${JAX_N:-100000 1000000} --diffrax-n ${JAX_DIFFRAX_N:-100000} \
            --repeat 3 --out "$RES/${MACHINE}_jax.json"
        ;;
    cache)
        stage cache 60 env HAPSIRA_TARGET=cuda python3 ci/gpu/cache_check.py --runs 3 \
            --out "$RES/${MACHINE}_cache_check.json"
        ;;
    regression)
        # TREES: "name=path ..." (default: this tree alone), e.g. an earlier revision's
        # git archive beside this one (benchmarks/investigations/gpu_regression.py)
        TREE_ARGS=(); for t in ${TREES:-this=.}; do TREE_ARGS+=(--tree "$t"); done
        stage regression 60 python3 benchmarks/investigations/gpu_regression.py "${TREE_ARGS[@]}" \
            --rounds "${ROUNDS:-1}" --out "$RES/${MACHINE}_regression.json"
        ;;
    latency)
        stage latency 30 python3 benchmarks/latency.py --targets cuda --runs 2 \
            --name "${MACHINE}_core"
        cp "benchmarks/results/latency_${MACHINE}_core.json" "$RES/" 2>/dev/null
        ;;
    stiff)
        # issue 31: ours (STIFF_METHODS) beside diffrax Kvaerno5 and CuBIE's Radau IIA at STIFF_N
        # (STIFF_PEERS: who runs)
        stage stiff 240 python3 benchmarks/stiff.py --platform cuda --n "${STIFF_N:-1000000}" \
            --methods "${STIFF_METHODS:-Rodas5P,BDF}" --repeat 2 --timeout "${STIFF_TIMEOUT:-200}" \
            --peers "${STIFF_PEERS:-ours,diffrax,cubie}" \
            --out "$RES/${MACHINE}_stiff.json"
        ;;
    screen)
        # issue 32: the 20,000-object, 7-day screen on the GPU (catalogs from $DATA)
        stage screen 120 env HAPSIRA_TARGET=cuda python3 benchmarks/screening.py \
            --n "${SCREEN_N:-20000}" --days "${SCREEN_DAYS:-7}" --threshold 5 \
            --label "${MACHINE}" --machine "$GPU" --json "$RES/${MACHINE}_screening.json"
        ;;
    screen_profile)
        # issue 32: where the GPU broad phase's time goes (kernels, host, cProfile)
        stage screen_profile 90 env HAPSIRA_TARGET=cuda python3 \
            benchmarks/investigations/screen_profile.py --n "${SCREEN_N:-20000}" \
            --windows "${SCREEN_WINDOWS:-200}" --out "$RES/${MACHINE}_screen_profile.json"
        ;;
    screen_week)
        # the same for 7 days whatever SCREEN_DAYS says (after a shorter screen has compiled)
        stage screen_week 60 env HAPSIRA_TARGET=cuda python3 benchmarks/screening.py \
            --n "${SCREEN_N:-20000}" --days 7 --threshold 5 \
            --label "${MACHINE}" --machine "$GPU" --json "$RES/${MACHINE}_screening.json"
        ;;
    stm)
        # issue 28: the cost of stm=True on cpu, parallel (the stage's cores) and the GPU
        stage stm 150 python3 benchmarks/stm_cost.py --targets "${STM_TARGETS:-cpu,parallel,cuda}" \
            --objects "${STM_OBJECTS:-1024}" --cuda-objects "${STM_CUDA_OBJECTS:-1000000}" \
            --out "$RES/${MACHINE}_stm_cost${STM_TAG:-}.json"
        ;;
    stm_interleave)
        # the same on the GPU alone with its working rows interleaved across objects
        stage stm_interleave 100 env HAPSIRA_CUDA_INTERLEAVE=1 python3 benchmarks/stm_cost.py \
            --targets cuda --cuda-objects "${STM_CUDA_OBJECTS:-1000000}" \
            --out "$RES/${MACHINE}_stm_cost_interleave.json"
        ;;
    userf)
        # issue 29: the textbook f and the tuned one, diffrax Dopri8 and CuBIE, one process
        stage userf 200 env HAPSIRA_TARGET=cuda python3 benchmarks/gpu_user_f.py \
            --n "${USERF_N:-1000000}" --name "${MACHINE}" --peer-timeout 200
        cp "benchmarks/results/gpu_user_f_${MACHINE}.json" "$RES/" 2>/dev/null
        ;;
    statesize)
        # issue 24: our cuda target against n, CuBIE and diffrax at the same n (small n with
        # 1e5 objects, large n with 1e4, as the earlier h100_state_size_{small,large} runs)
        stage statesize 150 python3 benchmarks/state_size.py --targets cuda --sizes 6,28 \
            --objects 100000 --forms array --peers cubie,diffrax --peer-timeout 90 \
            --out "$RES/${MACHINE}_state_size_peers_small.json"
        ;;
    statesize_large)
        stage statesize_large 200 python3 benchmarks/state_size.py --targets cuda \
            --sizes 200,1000 --objects 10000 --forms array --peers cubie,diffrax \
            --peer-timeout 90 --out "$RES/${MACHINE}_state_size_peers_large.json"
        ;;
    interleave)
        # issue 24: the explicit methods' work rows interleaved across objects (default)
        # against per-object rows, ours only, in one call: per-object first, then interleaved
        for IL in 0 1; do
            stage "interleave${IL}_small" 90 env HAPSIRA_TARGET=cuda HAPSIRA_CUDA_INTERLEAVE=$IL \
                python3 benchmarks/state_size.py --targets cuda --sizes 6,28 --objects 100000 \
                --forms array --out "$RES/${MACHINE}_state_size_interleave${IL}_small.json"
            stage "interleave${IL}_large" 100 env HAPSIRA_TARGET=cuda HAPSIRA_CUDA_INTERLEAVE=$IL \
                python3 benchmarks/state_size.py --targets cuda --sizes 200,1000 --objects 10000 \
                --forms array --out "$RES/${MACHINE}_state_size_interleave${IL}_large.json"
        done
        ;;
    fetch)
        # HAPSIRA_CUDA_FETCH off and on, alternated in one process, results checked identical
        stage fetch 150 env HAPSIRA_TARGET=cuda python3 benchmarks/investigations/cuda_fetch.py \
            --n "${FETCH_N:-1000000}" --rounds "${FETCH_ROUNDS:-5}" \
            --out "$RES/${MACHINE}_cuda_fetch.json"
        ;;
    *) echo "unknown stage $s" ;;
    esac
done
if [ -n "$TESTS_PID" ]; then
    wait $TESTS_PID
    echo "== tests"
    for log in "$RES"/pytest*.log; do
        echo "-- $log"
        grep -E "passed|failed|error|SKIPPED|^FAILED|^ERROR|^exit " "$log" | tail -30
    done
fi
tar -czf "$OUT/results.tar.gz" -C "$(dirname "$RES")" results
echo "== done after $(($(date +%s) - START)) s"
