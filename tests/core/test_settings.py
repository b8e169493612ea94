"""HAPSIRA_* settings: validated once, at import, with messages that say how to fix them."""

import os
import subprocess
import sys

import pytest


def import_with(env):
    full = {k: v for k, v in os.environ.items() if not k.startswith(("HAPSIRA_", "NUMBA_ENABLE_CUDASIM"))}
    full.update(env)
    return subprocess.run([sys.executable, "-c", "import hapsira_core.settings as s; print(s.TARGET, s.CACHE)"],
                          env=full, capture_output=True, text=True, timeout=120)


def test_default_target_is_cpu():
    run = import_with({})
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["cpu", "True"]  # kernels cached on disk by default


@pytest.mark.parametrize("env, words", [
    ({"HAPSIRA_TARGET": "gpu"}, ["HAPSIRA_TARGET", "'gpu'", "'cpu'", "'parallel'", "'cuda'"]),
    ({"HAPSIRA_CACHE": "maybe"}, ["HAPSIRA_CACHE", "'maybe'", "0/1"]),
    ({"HAPSIRA_CUDA_BLOCK": "-3"}, ["HAPSIRA_CUDA_BLOCK", "positive integer"]),
    ({"HAPSIRA_FASTMATH": "fast"}, ["HAPSIRA_FASTMATH", "'fast'", "'auto'", "'on'", "'off'"]),
    ({"HAPSIRA_CUDA_INTERLEAVE": "rows"}, ["HAPSIRA_CUDA_INTERLEAVE", "'rows'", "'auto'"]),
    ({"HAPSIRA_CUDA_FETCH": "2"}, ["HAPSIRA_CUDA_FETCH", "'2'", "0/1"]),
])
def test_bad_values_raise_value_error(env, words):
    run = import_with(env)
    assert run.returncode != 0
    assert "ValueError" in run.stderr
    for word in words:
        assert word in run.stderr


def test_values_are_normalised():
    run = import_with({"HAPSIRA_TARGET": " Parallel ", "HAPSIRA_CACHE": "yes"})
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["parallel", "True"]


def test_cuda_without_gpu_says_how_to_fix():
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    probe = subprocess.run([sys.executable, "-c", "from numba import cuda; print(cuda.is_available())"],
                           env=env, capture_output=True, text=True, timeout=120)
    if probe.stdout.strip() == "True":
        run = import_with({"HAPSIRA_TARGET": "cuda"})
        assert run.returncode == 0, run.stderr  # a real GPU: the target is usable
        return
    run = import_with({"HAPSIRA_TARGET": "cuda"})
    assert run.returncode != 0
    assert "NUMBA_ENABLE_CUDASIM=1" in run.stderr and "hapsira-cowell[cuda]" in run.stderr


def test_cuda_simulator_is_accepted_without_gpu():
    run = import_with({"HAPSIRA_TARGET": "cuda", "NUMBA_ENABLE_CUDASIM": "1"})
    assert run.returncode == 0, run.stderr
    assert run.stdout.split()[0] == "cuda"
