#!/usr/bin/env bash
# The 20,000-object, 7-day GPU screen (benchmarks/screening.py) of this tree against
# other source trees, each in new processes, cold (an empty kernel cache) then warm:
#   bash ci/gpu/screen_against.sh [TREE ...]
# TREE: a folder holding another checkout's src/ and benchmarks/ (e.g. made here with
# `git archive REV src benchmarks | tar -x -C .gpu_trees/REV`; .gpu_trees/ is ignored:
# name it in carry). The debris catalogs come from .gpu_shared/ (DATA=; a link to
# ../shared/data here, whose files carry names through the link). Each compile notice
# is stamped with the milliseconds since its process began, so that the cold run shows
# which kernel compiles when. Installs the carried wheels (.whl/) into /tmp/site once.
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD
DATA=${DATA:-$ROOT/.gpu_shared}
if [ -d .whl ] && [ ! -f /tmp/site/.installed ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl && touch /tmp/site/.installed || exit 1
fi
export HAPSIRA_TEST_DATA=$DATA HAPSIRA_TARGET=cuda PYTHONUNBUFFERED=1
RUN="import logging, runpy, sys
logging.basicConfig(format='%(relativeCreated)7.0f ms %(message)s')
sys.argv = ['screening.py', '--n', '${SCREEN_N:-20000}', '--days', '${SCREEN_DAYS:-7}',
            '--threshold', '5']
runpy.run_path('benchmarks/screening.py', run_name='__main__')"
for tree in "$ROOT" "$@"; do
    cache=$(mktemp -d /tmp/screen-cache.XXXXXX)
    for run in cold warm; do
        echo "== $tree, $run"
        (cd "$tree" && PYTHONPATH=/tmp/site:$tree/src:$tree HAPSIRA_CACHE_DIR=$cache \
            python3 -c "$RUN")
    done
done
