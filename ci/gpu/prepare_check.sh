#!/usr/bin/env bash
# `hapsira-cowell prepare` on a GPU host: the command on an empty cache, then a new
# process of the 20,000-object, 7-day screen (benchmarks/screening.py) on that cache,
# whose compile notices (stamped with ms since the process began) say whether it
# compiled anything; then tests/cowell/cli/test_prepare.py on cuda. Installs the carried
# wheels (.whl/) into /tmp/site once; the catalogs come from .gpu_shared/ (DATA=).
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD
DATA=${DATA:-$ROOT/.gpu_shared}
if [ -d .whl ] && [ ! -f /tmp/site/.installed ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl && touch /tmp/site/.installed || exit 1
fi
export HAPSIRA_TEST_DATA=$DATA HAPSIRA_TARGET=cuda PYTHONUNBUFFERED=1 HAPSIRA_CACHE=1
export PYTHONPATH=/tmp/site:$ROOT/src:$ROOT HAPSIRA_CACHE_DIR=$(mktemp -d /tmp/prepare-cache.XXXXXX)
echo "== prepare, empty cache"
/usr/bin/time -f "prepare: %e s wall, %U s user, %S s sys" python3 -m hapsira_cowell.cli prepare
echo "== prepare again"
/usr/bin/time -f "prepare again: %e s wall" python3 -m hapsira_cowell.cli prepare
echo "== screen, new process on the prepared cache"
python3 -c "import logging, runpy, sys
logging.basicConfig(format='%(relativeCreated)7.0f ms %(message)s')
sys.argv = ['screening.py', '--n', '${SCREEN_N:-20000}', '--days', '${SCREEN_DAYS:-7}',
            '--threshold', '5']
runpy.run_path('benchmarks/screening.py', run_name='__main__')"
echo "== tests/cowell/cli/test_prepare.py"
HAPSIRA_CACHE_DIR=$(mktemp -d) timeout "${TEST_LIMIT:-300}" python3 -m pytest -q \
    -p no:cacheprovider tests/cowell/cli/test_prepare.py 2>&1 | tail -15
