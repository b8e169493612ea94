"""The on-disk kernel cache across processes: warm starts, edits, damage, pruning, the CLI.

Each run is a new Python process with HAPSIRA_CACHE=1 and its own cache folder; the
user's script uses RK23, the smallest kernel (each run may compile it: CI's time).
Under the CUDA simulator nothing is compiled: the cache holds the kernel modules
alone and every run starts "fresh"; the tests check that runs are right there.
"""

import json
import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig
import textwrap

import numpy as np
import pytest

from hapsira_core import settings

SIMULATED = settings.TARGET == "cuda" and settings.cuda_simulator_enabled()
#: The host targets join a generic solve loop to each function (`hapsira_core.targets._join`):
#: besides each kernel's own entry the folder holds the loop ("generic") and the
#: function that calls a joined kernel ("trampoline"), shared by every kernel of a form.
JOINS = settings.TARGET in ("cpu", "parallel") and settings.JOIN == "on"
SHARED = ("hapsira_kernel_generic_", "hapsira_kernel_trampoline_")

SCRIPT = textwrap.dedent("""
    import sys
    sys.setswitchinterval(5e-5)  # for the CUDA simulator's threads (tests/conftest.py)
    import numpy as np
    from hapsira_core.jit import hjit
    from hapsira_core.ivp import solve_ivp
    from helper import damping

    @hjit
    def oscillator(t, y, p):
        return (y[1], -p[0] * y[0] - damping(y[1]) * {constant})

    from hapsira_core.ivp import build
    warm = build.kernel("RK23", 2, oscillator, ()).on_disk()  # the kernel solve_ivp will use
    y0 = np.array([[1.0, 0.0], [0.5, 0.3], [2.0, -1.0]])
    res = solve_ivp(oscillator, (0.0, 5.0), y0, method="RK23", rtol=1e-10, atol=1e-12,
                    params=[[1.0], [2.0], [0.5]])
    print(repr(res.y[:, :, -1].tolist()))
    print("cached-before" if warm else "fresh")
""")

HELPER = textwrap.dedent("""
    from hapsira_core.jit import hjit

    @hjit
    def damping(v):
        return {factor} * v
""")


def expected(constant, factor):
    from scipy.integrate import solve_ivp
    out = []
    for y0, k in (([1.0, 0.0], 1.0), ([0.5, 0.3], 2.0), ([2.0, -1.0], 0.5)):
        sol = solve_ivp(lambda t, y: [y[1], -k * y[0] - factor * y[1] * constant], (0.0, 5.0),
                        y0, method="RK23", rtol=1e-10, atol=1e-12)
        out.append(sol.y[:, -1])
    return np.array(out)


@pytest.fixture
def project(tmp_path):
    """A user's script and helper module, and a cache folder of their own."""
    return make_project(tmp_path)


@pytest.fixture(scope="module")
def warm_folder(tmp_path_factory):
    """A cache folder holding the script's kernel, compiled once for the module."""
    folder, _, run = make_project(tmp_path_factory.mktemp("warm"))
    run()
    return folder / "cache"


def make_project(tmp_path):
    (tmp_path / "cache").mkdir()

    def write(constant=0.1, factor=0.5):
        (tmp_path / "model.py").write_text(SCRIPT.format(constant=constant))
        (tmp_path / "helper.py").write_text(HELPER.format(factor=factor))
        for stale in (tmp_path / "__pycache__").glob("*"):
            stale.unlink()  # python's own bytecode cache keys by mtime at 1 s

    def run(check=True):
        env = dict(os.environ, HAPSIRA_CACHE="1", HAPSIRA_CACHE_DIR=str(tmp_path / "cache"),
                   PYTHONPATH=str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        done = subprocess.run([sys.executable, str(tmp_path / "model.py")], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=600)
        if check:
            assert done.returncode == 0, done.stderr
        lines = done.stdout.strip().splitlines()
        return np.array(eval(lines[-2])), lines[-1], done.stderr

    write()
    return tmp_path, write, run


def cache_files(folder):
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def test_warm_runs_load_the_kernel_and_give_the_same_numbers(project):
    folder, _, run = project
    reference = expected(0.1, 0.5)
    first, state, _ = run()
    np.testing.assert_allclose(first, reference, rtol=1e-9)
    assert state == "fresh"
    # consecutive cached runs of one script: 4 on cpu, 3 elsewhere (parallel loads
    # through the same code; the simulator caches nothing). Each run is a new process
    # (~4 s on the 2-core machine); 100 runs on cpu once took 120 to 270 s of CI.
    runs = {"cpu": 4}.get(settings.TARGET, 3)
    for _ in range(runs - 1):
        again, state, stderr = run()
        np.testing.assert_array_equal(again, first)
        assert state == ("fresh" if SIMULATED else "cached-before")
        assert "hapsira cache" not in stderr
    modules = [f for f in cache_files(folder / "cache") if f.endswith(".py")]
    own = [f for f in modules if not f.startswith(SHARED)]
    assert len(own) == 1 and len(modules) == (3 if JOINS else 1), modules


def test_edited_functions_and_helpers_never_run_a_stale_kernel(project):
    folder, write, run = project
    base, _, _ = run()
    write(constant=0.3)  # the user's function
    edited, state, _ = run()
    assert state == "fresh"
    np.testing.assert_allclose(edited, expected(0.3, 0.5), rtol=1e-9)
    assert not np.allclose(edited, base)
    write(constant=0.3, factor=0.9)  # a helper module the function imports
    helper_edited, state, _ = run()
    assert state == "fresh"
    np.testing.assert_allclose(helper_edited, expected(0.3, 0.9), rtol=1e-9)
    write()  # back to the first version: its entry is still there
    again, state, _ = run()
    np.testing.assert_array_equal(again, base)
    assert state == ("fresh" if SIMULATED else "cached-before")


@pytest.mark.parametrize("kind", ["module", "index", "data"])
@pytest.mark.parametrize("damage", ["truncate", "garbage"])
def test_damaged_entries_are_rebuilt_with_a_warning(project, warm_folder, kind, damage):
    if SIMULATED and kind != "module":
        pytest.skip("the CUDA simulator compiles nothing: numba writes no index or data file")
    folder, _, run = project
    shutil.rmtree(folder / "cache")
    shutil.copytree(warm_folder, folder / "cache")
    good, state, _ = run()
    assert state == ("fresh" if SIMULATED else "cached-before")
    suffixes = {"module": (".py",), "index": (".nbi",), "data": (".nbc", ".bin")}[kind]
    files = [f for f in (folder / "cache").rglob("*") if f.suffix in suffixes]
    # one module (three where the host targets join: the kernel's, the loop's and the trampoline's);
    # numba's index and data once per compiled function (the parallel target's gufunc
    # has two: the kernel and its gufunc wrapper); the joined kernel's and the loop's
    # code in a .bin each
    if kind == "module":
        assert len(files) == (3 if JOINS else 1), files
    else:
        assert len(files) >= (2 if JOINS and kind == "data" else 1), files
    for file in files:
        data = file.read_bytes()
        file.write_bytes(data[: len(data) // 3] if damage == "truncate"
                         else bytes(reversed(data[:200])) + b"\x00garbage\xff" * 10)
    repaired, state, stderr = run()
    np.testing.assert_array_equal(repaired, good)
    assert "hapsira cache" in stderr
    healthy, state, stderr = run()  # and the rebuilt entry is good again
    np.testing.assert_array_equal(healthy, good)
    assert state == ("fresh" if SIMULATED else "cached-before")
    assert "hapsira cache" not in stderr


def test_concurrent_first_runs_share_one_folder(project):
    folder, _, run = project
    env = dict(os.environ, HAPSIRA_CACHE="1", HAPSIRA_CACHE_DIR=str(folder / "cache"),
               PYTHONPATH=str(folder) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    runs = [subprocess.Popen([sys.executable, str(folder / "model.py")], env=env, cwd=folder,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(3)]
    outputs = [p.communicate(timeout=600) for p in runs]
    assert all(p.returncode == 0 for p in runs), [err for _, err in outputs]
    results = [np.array(eval(out.strip().splitlines()[-2])) for out, _ in outputs]
    for result in results[1:]:
        np.testing.assert_array_equal(result, results[0])
    np.testing.assert_allclose(results[0], expected(0.1, 0.5), rtol=1e-9)
    assert not [f for f in cache_files(folder / "cache") if f.endswith(".tmp")]


PRANGE_SCRIPT = textwrap.dedent("""
    import re
    import numba
    import numpy as np
    import hapsira_core  # noqa: F401 (the library's naming of compiled functions)

    def make(scale):
        @numba.njit(parallel=True)
        def kernel(a, out):
            for i in numba.prange(a.shape[0]):
                out[i] = a[i] * scale
        return kernel

    found = []
    for scale in (2.0, 3.0, 2.0):
        kernel, a = make(scale), np.arange(5.0)
        out = np.zeros(5)
        kernel(a, out)
        assert (out == a * scale).all()
        llvm = kernel.inspect_llvm(kernel.signatures[0])
        found.append(sorted(set(re.findall(r"define[^@]*@[^(]*parfor_gufunc[^(]*", llvm))))
    print(found)
""")


def test_prange_function_names_come_from_content(tmp_path):
    # the parallel target's kernels, trampolines and lane chunks are prange loops:
    # numba names each loop's function after an address of the compiling process, so
    # two processes sharing a folder could give two loops one name, and a process
    # loading both would run the first one loaded for both. Named from content: the
    # same function gets the same names in every process, another function others.
    (tmp_path / "loops.py").write_text(PRANGE_SCRIPT)
    runs = [subprocess.run([sys.executable, str(tmp_path / "loops.py")], capture_output=True,
                           text=True, timeout=600, cwd=tmp_path) for _ in range(2)]
    assert all(r.returncode == 0 for r in runs), [r.stderr[-3000:] for r in runs]
    first, second = (eval(r.stdout.strip().splitlines()[-1]) for r in runs)
    assert all(len(names) == 1 for names in first), first
    assert first == second
    assert first[0] == first[2] and first[0] != first[1]


def test_functions_that_cannot_be_imported_run_without_the_cache(tmp_path):
    code = SCRIPT.format(constant=0.1).replace("from helper import damping", textwrap.dedent("""
        @hjit
        def damping(v):
            return 0.5 * v
    """))
    env = dict(os.environ, HAPSIRA_CACHE="1", HAPSIRA_CACHE_DIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    np.testing.assert_allclose(np.array(eval(done.stdout.splitlines()[-2])), expected(0.1, 0.5),
                               rtol=1e-9)
    # no entry of this kernel; where the host targets join, the loop and the trampoline it shares with
    # every function of its form are cached (a new process compiles only the function)
    modules = [f for f in cache_files(tmp_path) if f.endswith(".py")]
    assert not [f for f in modules if not f.startswith(SHARED)]
    assert len(modules) == (2 if JOINS else 0), modules


def test_the_cache_is_pruned_and_the_command_line_shows_and_clears_it(project):
    folder, write, run = project
    for constant in (0.1, 0.2):
        write(constant=constant)
        run()
    env = dict(os.environ, HAPSIRA_CACHE_DIR=str(folder / "cache"))
    info = subprocess.run([sys.executable, "-m", "hapsira_cowell.cli", "cache", "info"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert info.returncode == 0, info.stderr
    # the two kernels, and where the host targets join the loop and the trampoline they share
    entries = 4 if JOINS else 2
    assert f"entries:   {entries} (" in info.stdout and str(folder / "cache") in info.stdout
    from hapsira_core.kernels import cache
    if not SIMULATED:
        assert len(cache_files(folder / "cache")) >= 6  # module, index, data per entry
        previous = settings.CACHE_DIR
        try:
            settings.CACHE_DIR = str(folder / "cache")
            newest, size, _ = cache.entries()[0]
            cache.prune(max_bytes=size + 1)  # room for one: the most recently used stays
            assert [name for name, _, _ in cache.entries()] == [newest]
        finally:
            settings.CACHE_DIR = previous
        assert newest.startswith("hapsira_kernel_")
    cleared = subprocess.run([sys.executable, "-m", "hapsira_cowell.cli", "cache", "clear"],
                             env=env, capture_output=True, text=True, timeout=120)
    assert cleared.returncode == 0 and "removed" in cleared.stdout
    assert not [f for f in cache_files(folder / "cache") if f.endswith(".py")]


def test_a_warm_load_keeps_the_module_stamp_and_marks_it_used(tmp_path, monkeypatch):
    # numba-cuda (0.30) stamps a cache index with its source file's (mtime, size): a
    # module touched on every load made every new process on a GPU recompile
    from hapsira_core.kernels import cache
    monkeypatch.setattr(settings, "CACHE_DIR", str(tmp_path))
    source = "VALUE = 42\n"
    cache.load_module("stamp_check", source)
    path = tmp_path / "hapsira_kernel_stamp_check.py"
    os.utime(path, ns=(1_000_000_000, 2_000_000_000))  # an old file, used long ago
    del sys.modules["hapsira_kernel_stamp_check"]  # as a new process would
    assert cache.load_module("stamp_check", source).VALUE == 42
    assert path.stat().st_mtime_ns == 2_000_000_000
    assert path.stat().st_atime_ns > 2_000_000_000  # the use is recorded for pruning
    [(name, _, used)] = cache.entries()
    assert name == "hapsira_kernel_stamp_check" and used > 2.0


TWO_KERNELS = textwrap.dedent("""
    import json, sys
    import numpy as np
    from hapsira_cowell import cowell
    from hapsira_cowell.models.perturbations import two_body
    from models import x_scaled

    r0 = np.array([[7000.0, 300.0, -200.0], [6800.0, -1000.0, 900.0]])
    v0 = np.array([[0.2, 7.4, 1.1], [-1.0, 7.2, 2.0]])
    out = {}
    for name in sys.argv[1:]:
        f, params = (two_body, None) if name == "plain" else (x_scaled, [0.5])
        out[name] = cowell(398600.4418, r0, v0, [600.0, 1800.0], f=f, params=params).rr.tolist()
    print(json.dumps(out))
""")

MODELS = textwrap.dedent("""
    from hapsira_core.jit import hjit
    from hapsira_cowell.models.perturbations import two_body

    @hjit
    def x_scaled(t, rr, vv, k, p):
        drr, dvv = two_body(t, rr, vv, k, p)
        return drr, (dvv[0] * p[0], dvv[1], dvv[2])
""")


def test_kernels_compiled_by_different_processes_keep_their_own_functions(tmp_path):
    """cowell's kernels reach ``f`` through closures of one qualified name: compiled
    in two processes and loaded into a third, each must still run its own ``f``
    (numba's names carry a per-process counter; equal counters once made a cached
    two-body kernel run the other kernel's ``f`` on cpu)."""
    (tmp_path / "two_kernels.py").write_text(TWO_KERNELS)
    (tmp_path / "models.py").write_text(MODELS)
    env = dict(os.environ, HAPSIRA_CACHE="1", HAPSIRA_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", ""))

    def run(*names):
        done = subprocess.run([sys.executable, str(tmp_path / "two_kernels.py"), *names],
                              env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        return {k: np.array(v) for k, v in json.loads(done.stdout.strip().splitlines()[-1]).items()}

    scaled, plain = run("scaled")["scaled"], run("plain")["plain"]  # one process each
    both = run("scaled", "plain")  # both from the cache, scaled first
    np.testing.assert_array_equal(both["scaled"], scaled)
    np.testing.assert_array_equal(both["plain"], plain)
    assert np.max(np.abs(scaled - plain)) > 1.0  # the two f really differ (km)


ROUTES_MODEL = textwrap.dedent("""
    import numpy as np
    from hapsira_core.jit import hjit
    from hapsira_core.ivp import build, solve_ivp
    import consts
    import helpers

    @hjit
    def decay(t, y, p):
        return (-consts.RATE * helpers.g(y[0]),)

    warm = build.kernel("RK23", 1, decay, ()).on_disk()
    res = solve_ivp(decay, (0.0, 1.0), np.array([[1.0], [2.0]]), method="RK23", rtol=1e-8,
                    atol=1e-10)
    print(repr(res.y[:, 0, -1].tolist()))
    print("cached-before" if warm else "fresh")
""")


def decay_expected(rate, c):
    from scipy.integrate import solve_ivp
    return np.array([solve_ivp(lambda t, y: -rate * c * y, (0.0, 1.0), [y0], method="RK23",
                               rtol=1e-8, atol=1e-10).y[0, -1] for y0 in (1.0, 2.0)])


def test_edited_module_attributes_and_default_arguments_never_run_a_stale_kernel(tmp_path):
    """f reads ``consts.RATE`` (``import consts``) and calls ``helpers.g(x, c=...)``:
    editing either in a warm cache gives the new numbers (issue 26; before, the
    cache key hashed a module by its name and ignored defaults: status 0, old result)."""
    (tmp_path / "cache").mkdir()
    (tmp_path / "model.py").write_text(ROUTES_MODEL)

    def run(rate, c):
        (tmp_path / "consts.py").write_text(f"RATE = {rate!r}\n")
        (tmp_path / "helpers.py").write_text(
            f"from hapsira_core.jit import hjit\n\n@hjit\ndef g(x, c={c!r}):\n    return c * x\n")
        shutil.rmtree(tmp_path / "__pycache__", ignore_errors=True)
        env = dict(os.environ, HAPSIRA_CACHE="1", HAPSIRA_CACHE_DIR=str(tmp_path / "cache"),
                   PYTHONPATH=str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        done = subprocess.run([sys.executable, str(tmp_path / "model.py")], env=env,
                              cwd=tmp_path, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        lines = done.stdout.strip().splitlines()
        result = np.array(eval(lines[-2]))
        np.testing.assert_allclose(result, decay_expected(rate, c), rtol=1e-7)
        return lines[-1]

    assert run(0.5, 1.0) == "fresh"
    assert run(0.8, 1.0) == "fresh"  # a module attribute: a new kernel
    assert run(0.8, 1.5) == "fresh"  # a default argument: a new kernel


INSTALLED_MODEL = textwrap.dedent("""
    import numpy as np
    from hapsira_core.jit import hjit
    from hapsira_core.ivp import build, solve_ivp
    import ratepkg
    import ratepkg.tools

    @hjit
    def decay(t, y, p):
        return (-ratepkg.RATE * ratepkg.tools.g(y[0]),)

    warm = build.kernel("RK23", 1, decay, ()).on_disk()
    res = solve_ivp(decay, (0.0, 1.0), np.array([[1.0], [2.0]]), method="RK23", rtol=1e-8,
                    atol=1e-10)
    print(repr([res.y[:, 0, -1].tolist(), res.status.tolist()]))
    print("cached-before" if warm else "fresh")
""")


def test_an_installed_package_changed_under_one_version_never_runs_a_stale_kernel(tmp_path):
    """f reads ``ratepkg.RATE`` and calls ``ratepkg.tools.g`` of a package installed in
    site-packages (``pip install .``, not editable) whose version stays 1.0 while its
    files change: each change gives the new numbers (before, an installed module was
    keyed by its name and version: status 0 and the first RATE's answer)."""
    (tmp_path / "cache").mkdir()
    (tmp_path / "model.py").write_text(INSTALLED_MODEL)
    base = tmp_path / "userbase"  # PYTHONUSERBASE: its site-packages is a library folder
    installed = pathlib.Path(sysconfig.get_path("purelib", "posix_user",
                                                vars={"userbase": str(base)}))
    package = installed / "ratepkg"
    package.mkdir(parents=True)
    info = installed / "ratepkg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ratepkg\nVersion: 1.0\n")

    def run(rate, c):
        (package / "__init__.py").write_text(f"RATE = {rate!r}\n")
        (package / "tools.py").write_text(
            f"from hapsira_core.jit import hjit\n\n@hjit\ndef g(x):\n    return {c!r} * x\n")
        shutil.rmtree(package / "__pycache__", ignore_errors=True)
        env = dict(os.environ, HAPSIRA_CACHE="1", HAPSIRA_CACHE_DIR=str(tmp_path / "cache"),
                   PYTHONUSERBASE=str(base),
                   PYTHONPATH=os.pathsep.join([str(installed), os.environ.get("PYTHONPATH", "")]))
        done = subprocess.run([sys.executable, str(tmp_path / "model.py")], env=env,
                              cwd=tmp_path, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        lines = done.stdout.strip().splitlines()
        result, status = eval(lines[-2])
        assert status == [0, 0]
        np.testing.assert_allclose(result, decay_expected(rate, c), rtol=1e-7)
        return lines[-1]

    assert run(1.0, 1.0) == "fresh"
    assert run(3.0, 1.0) == "fresh"  # the package's constant, same version: a new kernel
    assert run(3.0, 0.5) == "fresh"  # its submodule's jitted helper: a new kernel
    assert run(3.0, 0.5) == ("fresh" if SIMULATED else "cached-before")  # unchanged: warm


UNUSABLE_FOLDER = textwrap.dedent("""
    import warnings
    import numpy as np
    from hapsira_core.jit import hjit
    from hapsira_core.ivp import solve_ivp

    @hjit
    def decay(t, y, p):
        return (-0.5 * y[0],)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = solve_ivp(decay, (0.0, 1.0), np.array([[1.0], [2.0]]), method="RK23",
                        rtol=1e-8, atol=1e-10)
    print(repr(res.y[:, 0, -1].tolist()))
    print(repr([str(w.message) for w in caught if w.category.__name__ == "CacheWarning"]))
""")


def test_an_unusable_cache_folder_warns_once_and_compiles_in_memory(tmp_path):
    """HAPSIRA_CACHE_DIR naming a regular file: one CacheWarning naming the variable
    and the path, and right results (before, every solve raised from os.makedirs).
    Other unusable folders, and one warning for several kernels: test_cache_key.py."""
    (tmp_path / "model.py").write_text(UNUSABLE_FOLDER)
    not_a_folder = tmp_path / "a_file"
    not_a_folder.write_text("")
    env = dict(os.environ, HAPSIRA_CACHE="1", HAPSIRA_CACHE_DIR=str(not_a_folder),
               PYTHONPATH=str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, str(tmp_path / "model.py")], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    results, messages = eval(lines[-2]), eval(lines[-1])
    np.testing.assert_allclose(results, np.exp(-0.5) * np.array([1.0, 2.0]), rtol=1e-6)
    assert len(messages) == 1, messages
    assert "HAPSIRA_CACHE_DIR" in messages[0] and str(not_a_folder) in messages[0]
    assert not_a_folder.read_text() == ""
