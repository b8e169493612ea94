"""The whole suite runs on the target chosen by HAPSIRA_TARGET (ci/test-matrix runs each)."""

import os

import pytest

from hapsira_core import settings


def pytest_report_header(config):
    sim = " (CUDA simulator)" if settings.cuda_simulator_enabled() else ""
    return f"hapsira target: {settings.TARGET}{sim}"


@pytest.fixture(scope="session")
def target():
    return settings.TARGET


@pytest.fixture(scope="session")
def simulated():
    """True under numba's CUDA simulator: keep object counts small there."""
    return settings.TARGET == "cuda" and settings.cuda_simulator_enabled()


@pytest.fixture(autouse=True, scope="session")
def _no_numba_disk_cache():
    # Parallel test workers sharing numba's on-disk cache have segfaulted before.
    assert os.environ.get("HAPSIRA_CACHE", "0") in ("0", ""), "run tests with HAPSIRA_CACHE=0"
