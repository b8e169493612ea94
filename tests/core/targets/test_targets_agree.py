"""The active target against another one, run in its own process (one target per process)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from hapsira_core import settings
from hapsira_cowell import cowell
from reference import K_EARTH, relative_error, varied_orbits

SCRIPT = """
import json, sys, numpy as np
from hapsira_cowell import cowell
case = json.loads(sys.stdin.read())
res = cowell(case["k"], np.array(case["r0"]), np.array(case["v0"]), np.array(case["tofs"]))
print(json.dumps({"rr": res.rr.tolist(), "status": res.status.tolist(),
                  "nsteps": res.nsteps.tolist(), "nfev": res.nfev.tolist()}))
"""


def run_in(target, case, **settings_env):
    env = {k: v for k, v in os.environ.items() if not k.startswith("HAPSIRA_")}
    env["HAPSIRA_TARGET"] = target
    # the test run's kernel cache (tests/conftest.py), never the user's default folder,
    # which HAPSIRA_CACHE=1 (the default) would read and write without these
    env["HAPSIRA_CACHE"] = "1" if settings.CACHE else "0"
    if settings.CACHE:
        env["HAPSIRA_CACHE_DIR"] = settings.CACHE_DIR
    if target != "cuda":
        env.pop("NUMBA_ENABLE_CUDASIM", None)
    env.update(settings_env)
    done = subprocess.run([sys.executable, "-c", SCRIPT], input=json.dumps(case), env=env,
                          capture_output=True, text=True, timeout=600, check=True)
    return json.loads(done.stdout)


def orbits(seed):
    states = varied_orbits(seed).values()
    return np.array([r for r, _ in states]), np.array([v for _, v in states])


def test_same_answer_as_other_target():
    r0, v0 = orbits(seed=5)
    tofs = np.array([3000.0, 40000.0])
    res = cowell(K_EARTH, r0, v0, tofs)
    other = "parallel" if settings.TARGET == "cpu" else "cpu"
    ref = run_in(other, {"k": K_EARTH, "r0": r0.tolist(), "v0": v0.tolist(),
                         "tofs": tofs.tolist()})
    np.testing.assert_array_equal(res.status, ref["status"])
    if settings.TARGET in ("cpu", "parallel"):
        # the same machine code on the host: bit for bit
        np.testing.assert_array_equal(res.nsteps, ref["nsteps"])
        np.testing.assert_array_equal(res.rr, np.array(ref["rr"]))
    else:
        # the GPU contracts a*b+c into FMAs: last-bit differences grow over a day
        # (seen on an H100: up to 3e-11 relative), and may shift one step
        assert np.all(np.abs(res.nsteps - np.array(ref["nsteps"])) <= 1)
        assert relative_error(res.rr, np.array(ref["rr"])) < 1e-9



def test_chunked_launches_equal_one_launch():
    """HAPSIRA_CUDA_CHUNK splits the objects into launches (cuda); other targets ignore it."""
    r0, v0 = orbits(seed=8)
    tofs = np.array([1000.0, 4000.0])
    res = cowell(K_EARTH, r0, v0, tofs)
    ref = run_in(settings.TARGET, {"k": K_EARTH, "r0": r0.tolist(), "v0": v0.tolist(),
                                   "tofs": tofs.tolist()}, HAPSIRA_CUDA_CHUNK="4")
    np.testing.assert_array_equal(res.status, ref["status"])
    np.testing.assert_array_equal(res.rr, np.array(ref["rr"]))


def test_columns_join_only_the_rows_asked_for():
    """cowell's states travel as Columns(r0, v0): each target joins the rows it reads."""
    from hapsira_core.kernels.kernel import Columns

    r0, v0 = orbits(seed=3)
    columns = Columns(r0, v0)
    joined = np.concatenate((r0, v0), axis=1)
    assert columns.shape == joined.shape and len(columns) == len(r0)
    np.testing.assert_array_equal(np.asarray(columns), joined)
    for start, stop in ((0, 1), (2, 5), (len(r0) - 1, len(r0) + 3)):
        rows = columns[start:stop]
        assert rows.flags.c_contiguous
        np.testing.assert_array_equal(rows, joined[start:stop])
    with pytest.raises(TypeError, match="slice"):
        columns[0]
