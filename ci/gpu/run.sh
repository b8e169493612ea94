#!/usr/bin/env bash
# The test suite on the real GPU, one command for a GPU machine without network
# access (see docs/gpu.md): installs the carried cp312 wheels (.whl/: numpy<2.5,
# astropy, pyerfa, astropy-iers-data, sgp4, oem, ...; WHEELS= elsewhere), takes the
# debris catalogs from .gpu_shared/ (DATA=), prints the machine's versions, then
# runs every test with HAPSIRA_TARGET=cuda, HAPSIRA_CACHE=0, -n 8 --dist loadfile.
# Logs and JUnit XML land in $OUT/results.tar.gz (ci/gpu/core.sh, stages probe and tests).
set -u
exec env DEADLINE="${DEADLINE:-3000}" bash "$(dirname "$0")/core.sh" probe tests
