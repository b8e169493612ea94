"""The kernel cache key covers every value a kernel reads and every setting that
changes its code (issue 26): a warm cache must always equal a cold one.

In-process: the user's modules are written to a folder and imported under the
same names each time (a new process would import them so), and the key is the
one the solver's kernel gets (`build.kernel(...).recipe`); nothing is compiled.
The end-to-end runs are in test_disk_cache.py.
"""

import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from hapsira_core import settings
from hapsira_core.kernels import cache
from hapsira_core.ivp import build

PREFIX = "hkey_"


def load(folder, files):
    """Write ``files`` ({module: source}) to ``folder`` and import them afresh;
    the module named ``model`` last. Returns the key of ``model.f``'s kernel."""
    forget()
    for name, source in files.items():
        path = folder / f"{PREFIX}{name}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))
    sys.path.insert(0, str(folder))
    try:
        importlib.invalidate_caches()
        model = importlib.import_module(PREFIX + "model")
    finally:
        sys.path.remove(str(folder))
    kernel = build.kernel("RK23", 1, model.f, ())
    assert kernel.recipe is not None  # importable: cached on disk
    return kernel.recipe[0]


def active_target():
    from hapsira_core.targets import active
    return active


def forget():
    """Drop the modules imported by `load` (a new process would import them anew)."""
    for name in list(sys.modules):
        if name.startswith(PREFIX):
            del sys.modules[name]


@pytest.fixture
def keys(tmp_path):
    """``keys(files)``: the kernel key of these sources, each in a folder of its own."""
    count = iter(range(1000))
    yield lambda files: load(tmp_path / str(next(count)), files)
    forget()


MODEL = """
    import numpy as np
    from hapsira_core.jit import hjit
    import hkey_consts
    import hkey_helpers

    @hjit
    def f(t, y, p):
        return (-hkey_consts.RATE * hkey_helpers.g(y[0]) + hkey_consts.TABLE[{index}] * 0.0,)
"""
HELPERS = """
    from hapsira_core.jit import hjit

    @hjit
    def g(x, c={c}, *, d={d}):
        return c * x + d * 0.0

    @hjit
    def unused(x, c=1.0):
        return {unused} * x
"""
CONSTS = """
    import numpy as np
    RATE = {rate}
    OTHER = {other}
    TABLE = np.linspace(0.0, 1.0, {size})
    TABLE[{index}] += {bump}
"""


def project(rate=0.5, other=1.0, c=1.0, d=0.0, unused=1.0, size=4, index=1, bump=0.0):
    return {"consts": CONSTS.format(rate=rate, other=other, size=size, index=index, bump=bump),
            "helpers": HELPERS.format(c=c, d=d, unused=unused),
            "model": MODEL.format(index=index)}


def test_the_key_is_the_same_for_the_same_sources(keys):
    assert keys(project()) == keys(project())


@pytest.mark.parametrize("change", [
    {"rate": 0.5000000001},  # a module attribute (import consts; consts.RATE)
    {"c": 1.0000000001},  # a helper's default argument
    {"d": 1e-300},  # a helper's keyword-only default
    {"bump": 1e-12},  # an array global changed past its 8th digit
    {"size": 1500, "index": 1234, "bump": 1.0},  # one element of an array of > 1000
], ids=["module-attribute", "default", "keyword-default", "array-digits", "large-array"])
def test_a_changed_value_the_kernel_reads_changes_the_key(keys, change):
    base = {k: v for k, v in {"size": change.get("size", 4),
                              "index": change.get("index", 1)}.items()}
    assert keys(project(**base)) != keys(project(**{**base, **change}))


def test_values_the_kernel_does_not_read_keep_the_key(keys):
    # an attribute nobody reads and a function nobody calls, in the modules f reads
    assert keys(project()) == keys(project(other=2.0, unused=3.0))


HELPER_BODY = """
    from hapsira_core.jit import hjit

    @hjit
    def g(x):
        return {factor} * x
"""
PACKAGE_MODEL = """
    from hapsira_core.jit import hjit
    import hkey_pkg.sub

    @hjit
    def f(t, y, p):
        return (-hkey_pkg.sub.g(y[0]),)
"""


def test_a_helper_reached_through_a_module_attribute_chain(keys):
    # f reads hkey_pkg.sub.g: a package, its submodule, an hjit function in it
    def files(factor):
        return {"pkg/__init__": "", "pkg/sub": HELPER_BODY.format(factor=factor),
                "model": PACKAGE_MODEL}
    assert keys(files(0.5)) == keys(files(0.5))
    assert keys(files(0.5)) != keys(files(0.7))


def test_modules_that_import_each_other_are_followed_without_end(keys):
    cycle = {"consts": "import hkey_helpers\nRATE = {rate}\n",
             "helpers": "import hkey_consts\nfrom hapsira_core.jit import hjit\n\n"
                        "@hjit\ndef g(x):\n    return hkey_consts.RATE * x\n",
             "model": "from hapsira_core.jit import hjit\nimport hkey_consts, hkey_helpers\n\n"
                      "@hjit\ndef f(t, y, p):\n"
                      "    return (-hkey_helpers.hkey_consts.RATE * hkey_helpers.g(y[0]),)\n"}
    first = keys({k: v.replace("{rate}", "0.5") for k, v in cycle.items()})
    assert first == keys({k: v.replace("{rate}", "0.5") for k, v in cycle.items()})
    assert first != keys({k: v.replace("{rate}", "0.6") for k, v in cycle.items()})


OPTIONS = """
    from hapsira_core.jit import hjit

    @hjit{options}
    def g(x):
        return 0.5 * x
"""
SIMPLE_MODEL = """
    from hapsira_core.jit import hjit
    from hkey_helpers import g

    @hjit
    def f(t, y, p):
        return (-g(y[0]),)
"""


@pytest.mark.parametrize("options", ["(fastmath=True)", "(boundscheck=True)"])
def test_compile_options_of_a_helper_are_in_the_key(keys, options):
    if options == "(boundscheck=True)" and settings.TARGET == "cuda":
        pytest.skip("numba.cuda has no bounds checking")
    def files(given):
        return {"helpers": OPTIONS.format(options=given), "model": SIMPLE_MODEL}
    assert keys(files("")) != keys(files(options))


@pytest.mark.parametrize("setting, value", [
    ("DEBUG", True), ("NAME", "other"), ("CUDA_MAX_REGISTERS", 32),
    ("CUDA_INTERLEAVE", "on"), ("CUDA_FETCH", "the other position")])
def test_settings_that_change_the_generated_code_are_in_the_key(keys, monkeypatch, setting,
                                                                 value):
    files = {"helpers": OPTIONS.format(options=""), "model": SIMPLE_MODEL}
    base = keys(files)
    if setting == "CUDA_FETCH":  # whichever the environment (or the default, on) chose
        value = not settings.CUDA_FETCH
    if setting == "NAME":  # the target's own name, which its code_options() give
        from hapsira_core.targets import active
        monkeypatch.setattr(active, "NAME", value)
    else:
        monkeypatch.setattr(settings, setting, value)
    build.KERNELS.clear()
    changed = keys(files) != base
    # the register cap, the interleaved rows and fetching threads are the GPU's alone;
    # cpu and parallel share their joined kernels (the same code: test_an_entry_of_one_
    # target_is_never_another_targets), so the target's name is not in their keys
    joined = hasattr(active_target(), "JoinedKernel") and settings.JOIN == "on"
    expected = (not setting.startswith("CUDA_") or settings.TARGET == "cuda") \
        and not (setting == "NAME" and joined)
    assert changed == expected


# --- random helper modules, one random edit: the key changes exactly when f reads it

RANDOM_CONSTS = """
    import numpy as np
    A0 = {A0!r}
    A1 = {A1!r}
    A2 = {A2!r}
    A3 = {A3!r}
    ARR = np.linspace(-1.0, 1.0, {size}) * {scale!r}
    ARR[{element}] += {ARR!r}
"""
RANDOM_HELPERS = """
    from hapsira_core.jit import hjit
    import hkey_consts

    @hjit
    def h(x):
        return {H!r} * x

    @hjit
    def g(x, c={C!r}, *, d={D!r}):
        return c * {g_h} + d * {g_a1} + {G!r}

    @hjit
    def unused(x, e={E!r}):
        return {U!r} * x + e
"""
RANDOM_MODEL = """
    from hapsira_core.jit import hjit
    import hkey_consts
    import hkey_helpers
    from hkey_consts import A2

    @hjit
    def f(t, y, p):
        return ({terms},)
"""
VALUES = ["A0", "A1", "A2", "A3", "ARR", "C", "D", "E", "G", "H", "U"]


def random_project(values, reads, size, element):
    terms = ["-y[0]"]
    if reads["a0"]:
        terms.append("hkey_consts.A0 * y[0]")
    if reads["a2"]:
        terms.append("A2")
    if reads["arr"]:
        terms.append(f"hkey_consts.ARR[{element}]")
    if reads["g"]:
        terms.append("hkey_helpers.g(y[0])")
    return {"consts": RANDOM_CONSTS.format(size=size, element=element, scale=1.0, **values),
            "helpers": RANDOM_HELPERS.format(
                g_h="h(x)" if reads["g_h"] else "x",
                g_a1="hkey_consts.A1" if reads["g_a1"] else "1.0", **values),
            "model": RANDOM_MODEL.format(terms=" + ".join(terms))}


def read_by_f(name, reads):
    return {"A0": reads["a0"], "A1": reads["g"] and reads["g_a1"], "A2": reads["a2"],
            "A3": False, "ARR": reads["arr"], "C": reads["g"], "D": reads["g"],
            "E": False, "G": reads["g"], "H": reads["g"] and reads["g_h"], "U": False}[name]


numbers = st.floats(-1e3, 1e3, allow_nan=False).filter(lambda x: x != 0.0)


@st.composite
def edits(draw):
    values = {name: draw(numbers) for name in VALUES}
    values["ARR"] = 0.0  # the bump of one element
    reads = {k: draw(st.booleans()) for k in ("a0", "a2", "arr", "g", "g_h", "g_a1")}
    size = draw(st.sampled_from([3, 17, 1001, 1500]))
    element = draw(st.integers(0, size - 1))
    read = [name for name in VALUES if read_by_f(name, reads)]
    unread = [name for name in VALUES if name not in read]
    # as many edits of values f reads as of values it does not
    name = draw(st.sampled_from(read if read and draw(st.booleans()) else unread))
    old = values[name]
    # past the 8th digit (repr rounding would hide it), or a plain change
    new = draw(st.sampled_from([old + max(abs(old), 1.0) * 2.0 ** -40, old + abs(old) + 1.0]))
    return values, reads, size, element, name, new


@hsettings(max_examples=30, deadline=None, derandomize=True,
           suppress_health_check=[HealthCheck.too_slow])
@given(edits())
def test_random_modules_the_key_changes_exactly_when_a_read_value_changes(edit):
    values, reads, size, element, name, new = edit
    folder = tempfile.mkdtemp(prefix="hkey_")
    try:
        count = iter(range(10))

        def key(vals):
            return load(Path(folder) / str(next(count)), random_project(vals, reads, size, element))

        before = key(values)
        assert key(values) == before  # nothing changed: a warm cache is found
        after = key({**values, name: new})
        assert (after != before) == read_by_f(name, reads), (name, reads)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        forget()
        build.KERNELS.clear()


# --- an unusable HAPSIRA_CACHE_DIR: one warning, then in memory

def unusable_folders(tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("not a folder")
    return {"regular-file": str(a_file), "proc": "/proc/hapsira_no_such/x",
            "dev-null": "/dev/null/x"}


@pytest.mark.parametrize("kind", ["regular-file", "proc", "dev-null"])
def test_an_unusable_folder_warns_once_and_gives_no_module(tmp_path, monkeypatch, kind):
    folder = unusable_folders(tmp_path)[kind]
    monkeypatch.setattr(settings, "CACHE_DIR", folder)
    monkeypatch.setattr(cache, "_UNUSABLE", {})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert cache.load_module("unusable_check", "VALUE = 1\n") is None
        assert cache.load_module("unusable_check_2", "VALUE = 2\n") is None
        assert cache.entries() == []
    found = [w for w in caught if issubclass(w.category, cache.CacheWarning)]
    assert len(found) == 1, [str(w.message) for w in caught]
    message = str(found[0].message)
    assert "HAPSIRA_CACHE_DIR" in message and folder in message


def test_a_read_only_folder_warns_once(tmp_path, monkeypatch):
    if os.geteuid() == 0:
        pytest.skip("root writes into read-only folders")
    folder = tmp_path / "read_only"
    folder.mkdir()
    folder.chmod(0o555)
    monkeypatch.setattr(settings, "CACHE_DIR", str(folder))
    monkeypatch.setattr(cache, "_UNUSABLE", {})
    try:
        with pytest.warns(cache.CacheWarning, match="HAPSIRA_CACHE_DIR"):
            assert cache.load_module("unusable_check", "VALUE = 1\n") is None
    finally:
        folder.chmod(0o755)


TARGET_MODEL = """
    from hapsira_core.jit import hjit

    @hjit
    def f(t, y, p):
        return (y[1], -p[0] * y[0])

    @hjit
    def rows(t, y, p, dydt):
        dydt[0] = y[1]
        dydt[1] = -p[0] * y[0]
"""
TARGET_ENTRIES = """
    import json
    from hapsira_core.ivp import build
    from hapsira_core.kernels import cache
    from hapsira_core.targets import _join
    from hkey_target_model import f, rows

    names = {}
    for method, fun, records in (("DOP853", f, False), ("RK45", f, True), ("Radau", f, False),
                                 ("DOP853", rows, False)):
        made = build.kernel(method, 2, fun, (), records=records)
        for kernel in {made, getattr(made, "scalar", made)}:
            names[kernel.cache_name] = type(kernel).__name__
            if hasattr(kernel, "generic_key"):
                name = f"{cache._PREFIX}generic_{_join._for_this_machine(kernel.generic_key)}"
                names[name] = "generic"
    print(json.dumps(names))
"""


def test_an_entry_of_one_target_is_never_another_targets(tmp_path):
    # One cache folder serves every target (ci/test-matrix shares one across its stages):
    # an entry is found by its name alone, so the names a target's kernels look up
    # (nothing is compiled here) must be its own, but for the joined kernels and their
    # loops, which cpu and parallel share: the same per-object code on the same CPU.
    (tmp_path / "hkey_target_model.py").write_text(textwrap.dedent(TARGET_MODEL))
    (tmp_path / "entries.py").write_text(textwrap.dedent(TARGET_ENTRIES))
    found = {}
    for stage, env in (("cpu", {"HAPSIRA_TARGET": "cpu"}),
                       ("parallel", {"HAPSIRA_TARGET": "parallel"}),
                       ("simulator", {"HAPSIRA_TARGET": "cuda", "NUMBA_ENABLE_CUDASIM": "1"})):
        env = dict({k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"},
                   HAPSIRA_JOIN="1", HAPSIRA_LANES="auto", HAPSIRA_CACHE="1",
                   HAPSIRA_CACHE_DIR=str(tmp_path / "cache"), **env)
        done = subprocess.run([sys.executable, str(tmp_path / "entries.py")], env=env,
                              cwd=tmp_path, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        found[stage] = json.loads(done.stdout.strip().splitlines()[-1])
    cpu, parallel, simulator = (found[s] for s in ("cpu", "parallel", "simulator"))
    shared = {n for n, kind in cpu.items()
              if kind in ("JoinedKernel", "JoinedLaneKernel", "generic")}
    assert len([n for n in shared if cpu[n] == "JoinedKernel"]) == 4  # every form joins
    lanes = len([n for n in shared if cpu[n] == "JoinedLaneKernel"])  # where lanes apply
    assert len([n for n in shared if cpu[n] == "generic"]) == 4 + lanes  # a loop each
    assert set(cpu) & set(parallel) == shared
    assert {n: k for n, k in parallel.items() if n in shared} == \
        {n: k for n, k in cpu.items() if n in shared}
    for stage, names in (("cpu", cpu), ("parallel", parallel)):
        own = [n for n in names if n not in shared]
        assert all(n.startswith(f"hapsira_kernel_{stage}_") for n in own), names
    assert simulator and not set(simulator) & (set(cpu) | set(parallel))
    assert all(n.startswith("hapsira_kernel_cuda_") for n in simulator), simulator
