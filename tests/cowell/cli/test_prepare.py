"""``hapsira-cowell prepare`` (`hapsira_cowell.cli.prepare`): the kernels of the commands'
default options compiled ahead, into an empty cache folder; then, in a new process, the
commands with those options (the screen and propagate, of fewer than 1,024 objects and of
more, where ``HAPSIRA_LANES=auto`` runs lanes) compile nothing: numba's compiler is never
entered and the cache folder's entries stay as they were."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from hapsira_core import settings

SIMULATED = settings.TARGET == "cuda" and settings.cuda_simulator_enabled()

CALLS = textwrap.dedent("""
    import sys
    from numba.core import compiler
    compiled = []
    plain = compiler.compile_extra

    def spy(typingctx, targetctx, func, *args, **kwargs):
        compiled.append(getattr(func, "__qualname__", repr(func)))
        return plain(typingctx, targetctx, func, *args, **kwargs)

    compiler.compile_extra = spy  # every numba compile of this process (a load is none)
    from hapsira_cowell.cli import main
    from hapsira_cowell.cli.prepare import needs

    runs = [["screen", "--days", "0.02", "--out", "default.csv"],
            ["screen", "cloud.csv", "--days", "0.005", "--out", "cloud-screen.csv"],
            ["propagate", "--tof", "1h", "--every", "30min", "--no-progress",
             "--out", "default.npz"],
            ["propagate", "cloud.csv", "--tof", "10min", "--every", "10min",
             "--no-progress", "--out", "cloud.npz"]]
    for argv in runs:
        assert main(argv) == 0, argv
    found = [need for group in needs().values() for need in group]
    lanes = [need.runs() for need in found if hasattr(need.runs(), "runs_lanes")]
    print("lanes for 1,100 objects", len(lanes), all(k.runs_lanes(1100) for k in lanes))
    print("on disk", all(need.on_disk() for need in found))
    print("compiled", compiled)
""")


def cloud(n, seed=0):
    """``n`` LEO objects on near-circular orbits of random planes, as a CSV catalog."""
    rng = np.random.default_rng(seed)
    radius = 6378.137 + rng.uniform(500.0, 1500.0, n)
    u, v = rng.normal(size=(n, 3)), rng.normal(size=(n, 3))
    r_hat = u / np.linalg.norm(u, axis=1)[:, None]
    t_hat = np.cross(r_hat, v)
    t_hat /= np.linalg.norm(t_hat, axis=1)[:, None]
    r = r_hat * radius[:, None]
    vv = t_hat * np.sqrt(398600.4418 / radius)[:, None]
    lines = ["name,x,y,z,vx,vy,vz"] + [
        f"O{i}," + ",".join(repr(float(x)) for x in (*r[i], *vv[i])) for i in range(n)]
    return "\n".join(lines) + "\n"


def entries(folder):
    return sorted((name, os.path.getsize(os.path.join(root, name)))
                  for root, _, files in os.walk(folder) for name in files
                  if not name.endswith(".tmp"))


@pytest.mark.skipif(SIMULATED, reason="the CUDA simulator compiles nothing")
def test_prepare_compiles_what_the_default_commands_then_load(tmp_path):
    folder = tmp_path / "cache"
    env = dict(os.environ, HAPSIRA_CACHE="1", HAPSIRA_CACHE_DIR=str(folder))
    lanes_mode = settings.LANES
    if settings.TARGET == "parallel":
        # the lane kernels are cpu's and parallel's alike (the cpu stage prepares them);
        # here the per-object kernels, whose parallel loops are this target's own
        env["HAPSIRA_LANES"], lanes_mode = "off", 0

    def command(*args):
        done = subprocess.run([sys.executable, *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=1200)
        assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
        assert "Traceback" not in done.stderr
        return done.stdout.strip().splitlines(), done.stderr

    lines, stderr = command("-m", "hapsira_cowell.cli", "prepare")
    host = settings.TARGET in ("cpu", "parallel")
    # the screen's two solvers and its broad phase (one kernel on the host targets, six on
    # a GPU), cowell's solver; under auto each solver's lane kernel and per-object twin
    total = 3 + (1 if host else 6) + (3 if host and lanes_mode == "auto" else 0)
    assert lines[0] == (f"target {settings.TARGET}: {total} kernels (the screen's and "
                        "propagate's with their default options)")
    assert lines[1].startswith(f"compiled {total} (") and lines[1].endswith(
        "; 0 were in the cache already")
    if len(os.sched_getaffinity(0)) >= 2:  # what compiles, on how many cores
        assert f"hapsira: compiling {total} kernels side by side on " in stderr
    before = entries(folder)

    (tmp_path / "cloud.csv").write_text(cloud(1100))
    out, stderr = command("-c", CALLS)
    lanes = 3 if host and lanes_mode != 0 else 0  # the three solvers' lane kernels
    assert out[-3] == f"lanes for 1,100 objects {lanes} True"
    assert out[-2:] == ["on disk True", "compiled []"], stderr
    assert "compiling" not in stderr  # (the commands' own notice, and the library's)
    assert entries(folder) == before  # nothing written: every kernel was loaded

    again, _ = command("-m", "hapsira_cowell.cli", "prepare")
    assert again[1] == f"compiled 0; {total} were in the cache already"


def test_prepare_under_the_simulator_says_there_is_nothing_to_compile(monkeypatch):
    from hapsira_core.targets import active
    from hapsira_cowell import prepare

    monkeypatch.setattr(active, "SIMULATOR", True, raising=False)
    monkeypatch.setattr(settings, "CACHE", False)  # (nothing would be kept: no matter)
    done = prepare()
    assert (done.simulated, done.side_by_side, done.here, done.cached) == (True, 0, 0, 0)
    assert done.lines() == [f"target {settings.TARGET}: numba's CUDA simulator runs "
                            "kernels in Python; nothing to compile"]


def test_prepare_without_a_disk_cache_is_one_line_and_exit_2(tmp_path):
    env = dict(os.environ, HAPSIRA_CACHE="0")
    done = subprocess.run([sys.executable, "-m", "hapsira_cowell.cli", "prepare"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    if SIMULATED:  # (nothing is compiled there, so nothing is missed without a cache)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip().splitlines() == [
            f"target {settings.TARGET}: numba's CUDA simulator runs kernels in Python; "
            "nothing to compile"]
        return
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "hapsira-cowell: error: HAPSIRA_CACHE=0: kernels are not kept on disk, so nothing "
        "compiled now would serve a later process; unset it"]
