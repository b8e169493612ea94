"""C functions declared with hapsira_core.foreign, called from hjit code on every target.

On cpu and parallel the C is a cached host library called by symbol name;
under the CUDA simulator the same library is called through ctypes (on a GPU
it is linked into the kernel). The model is examples/density.c, a piecewise
exponential atmosphere whose table travels in the params row, used through
examples/c_drag.py and checked against its hjit twin.
"""

import importlib.util
import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from hapsira_core import settings
from hapsira_core.foreign import CompilerNotFoundError, ForeignCompileError, declare
from hapsira_core.jit import Arg, ObjectKernel, hjit
from hapsira_cowell import cowell

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
REAL_GPU = settings.TARGET == "cuda" and not settings.cuda_simulator_enabled()


def _load_example():
    spec = importlib.util.spec_from_file_location("c_drag", EXAMPLES / "c_drag.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


c_drag = _load_example()


def semi_major_axis(r, v):
    return 1.0 / (2.0 / np.linalg.norm(r, axis=-1) - np.sum(v * v, axis=-1) / c_drag.K)


def test_c_density_in_f_equals_its_hjit_twin(simulated):
    # The simulator runs every thread in Python: 4 objects for 30 minutes there.
    n, span = (4, 1800.0) if simulated else (1000, 86400.0)
    r0, v0, p = c_drag.low_orbits(n, seed=11)
    tofs = np.linspace(0.0, span, 9)
    with_c = cowell(c_drag.K, r0, v0, tofs, f=c_drag.drag_c, params=p)
    twin = cowell(c_drag.K, r0, v0, tofs, f=c_drag.drag_hjit, params=p)
    assert np.all(with_c.status == 0) and np.all(twin.status == 0)
    for c_states, twin_states in ((with_c.rr, twin.rr), (with_c.vv, twin.vv)):
        difference = np.linalg.norm(c_states - twin_states, axis=-1)
        assert np.max(difference / np.linalg.norm(twin_states, axis=-1)) <= 1e-14
    np.testing.assert_array_equal(with_c.nsteps, twin.nsteps)
    # the density mattered: every orbit lost far more than the integration error
    decay = semi_major_axis(r0, v0) - semi_major_axis(with_c.rr[:, -1], with_c.vv[:, -1])
    assert np.all(decay > 1e-5), decay.min()


def reference_density(h, table):
    """density.c in plain Python: the last layer whose base is at or below h."""
    bases = table[:, 0]
    i = max(int(np.searchsorted(bases, h, side="right")) - 1, 0)
    return table[i, 1] * math.exp(-(h - table[i, 0]) / table[i, 2])


def test_table_through_pointers(tmp_path, simulated):
    """The table as a slice of the params row, as a shared 2-D array, from a
    C++ (.cu) copy of the file; a strided view gives NaN, never other numbers."""
    as_cxx = tmp_path / "density.cu"
    as_cxx.write_text((EXAMPLES / "density.c").read_text())
    density_cu = declare("double density(double h, const double *table, int64_t rows)", as_cxx)
    density_c = c_drag.density_c

    @hjit
    def body(h, p, table, out):
        rows = int(p[2])
        out[0] = density_c(h[0], p[3:], rows)
        out[1] = density_cu(h[0], p[3:], rows)
        out[2] = density_c(h[0], table, rows)
        out[3] = density_c(h[0], p[3::2], rows)

    kernel = ObjectKernel(body, [
        Arg("h", np.float64, ("one",)), Arg("p", np.float64, ("np",)),
        Arg("table", np.float64, ("rows", "three"), per_object=False),
        Arg("out", np.float64, ("four",), output=True)])
    rng = np.random.default_rng(5)
    n = 16 if simulated else 400
    # below the first base, on the bases themselves, between them, above the last
    h = np.concatenate([[-3.0, 1000.0, 1200.0], c_drag.TABLE[:8, 0],
                        rng.uniform(0.0, 1100.0, n - 11)])
    p = c_drag.params(rng.uniform(2.0, 2.4, n), rng.uniform(1e-9, 1e-8, n))
    table = np.ascontiguousarray(c_drag.TABLE)
    out = np.zeros((n, 4))
    kernel(h[:, None], p, table, out)
    expected = np.array([reference_density(x, c_drag.TABLE) for x in h])
    for column in range(3):
        np.testing.assert_allclose(out[:, column], expected, rtol=1e-15, atol=0)
    assert np.all(expected > 0) and np.ptp(np.log10(expected)) > 10  # real, varied numbers
    assert np.all(np.isnan(out[:, 3]))


CALLER = textwrap.dedent("""
    import json, os, sys
    import numpy as np
    from numba.core import event
    from hapsira_core import foreign
    from hapsira_core.jit import Arg, ObjectKernel, hjit

    compiled = []  # what numba compiles in this process (the kernel, the C's wrapper...)
    event.register("numba:compile", type("Compiles", (event.Listener,), {
        "on_start": lambda self, ev: None,
        "on_end": lambda self, ev: compiled.append(str(ev.data.get("dispatcher")))})())
    scaled = foreign.declare("double scaled(double x, const double *p)", sys.argv[1])

    @hjit
    def body(x, p, out):
        out[0] = scaled(x[0], p)

    kernel = ObjectKernel(body, [Arg("x", np.float64, ("one",)), Arg("p", np.float64, ("np",)),
                                 Arg("out", np.float64, ("one",), output=True)])
    out = np.zeros((2, 1))
    on_disk = kernel.on_disk()
    kernel(np.array([[1.5], [-2.25]]), np.array([[3.0, 0.5], [7.0, 1.25]]), out)
    library = scaled.library
    print(json.dumps({"out": out[:, 0].tolist(), "compiles": foreign.compile_count(),
                      "library": library, "on_disk": on_disk, "compiled": compiled,
                      "mtime": os.stat(library).st_mtime_ns if library else None}))
""")


def test_edited_c_changes_the_next_process_and_an_unchanged_one_compiles_nothing(tmp_path):
    source = tmp_path / "scaled.c"
    script = tmp_path / "caller.py"
    script.write_text(CALLER)
    env = dict(os.environ, HAPSIRA_CACHE="1", HAPSIRA_CACHE_DIR=str(tmp_path / "cache"))

    def run():
        return run_script(script, source, env)

    source.write_text("HAPSIRA_FUNC double scaled(double x, const double *p)\n"
                      "{\n    return p[0] * x + p[1];\n}\n")
    first, second = run(), run()
    source.write_text("HAPSIRA_FUNC double scaled(double x, const double *p)\n"
                      "{\n    return p[0] * x - p[1];\n}\n")
    edited = run()
    assert first["out"] == [5.0, -14.5] and second["out"] == first["out"]
    assert edited["out"] == [4.0, -17.0]
    # the kernel that calls the C is loaded from the cache by the next process (on a
    # GPU: the image linked with the C), and an edited C is never served from it
    # (the simulator compiles nothing, so it has no compiled kernel on disk)
    simulator = settings.cuda_simulator_enabled() and settings.TARGET == "cuda"
    assert (first["on_disk"], second["on_disk"], edited["on_disk"]) == (
        (False, False, False) if simulator else (False, True, False))
    if REAL_GPU:  # linked into the kernel: no host library, no host compiler
        assert first["library"] is None and edited["compiles"] == 0
        return
    if not simulator:  # loaded, not compiled again: numba compiles nothing at all
        assert first["compiled"] and second["compiled"] == [] and edited["compiled"]
    assert first["compiles"] == 1 and second["compiles"] == 0 and edited["compiles"] == 1
    assert second["library"] == first["library"] and second["mtime"] == first["mtime"]
    assert edited["library"] != first["library"] and os.path.exists(first["library"])


def run_script(script, source, env):
    done = subprocess.run([sys.executable, str(script), str(source)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


CACHED_CALLER = textwrap.dedent("""
    import json, sys
    import numba
    import numpy as np
    from hapsira_core import foreign

    scaled = foreign.declare("double scaled(double x, const double *p)", sys.argv[1])

    @numba.njit(cache=True)
    def caller(x, p):
        return scaled(x, p) + 1.0

    value = caller(1.5, np.array([3.0, 0.5]))
    print(json.dumps({"value": value, "cache_hits": sum(caller.stats.cache_hits.values()),
                      "compiles": foreign.compile_count()}))
""")


def test_caller_in_numbas_disk_cache_calls_the_edited_c(tmp_path):
    """numba's disk cache keys a caller (here a user's own ``njit(cache=True)``
    function) by its own file only: after the C file is edited, the cached
    caller, compiled against the old C, must call the new C by name, never a
    symbol that no library defines (a segmentation fault). numba's disk cache
    is a host feature: the script runs on cpu on every target."""
    source = tmp_path / "scaled.c"
    script = tmp_path / "cached_caller.py"
    script.write_text(CACHED_CALLER)
    env = dict(os.environ, HAPSIRA_TARGET="cpu", HAPSIRA_CACHE_DIR=str(tmp_path / "cache"),
               NUMBA_CACHE_DIR=str(tmp_path / "numba"))
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    source.write_text("HAPSIRA_FUNC double scaled(double x, const double *p)\n"
                      "{\n    return p[0] * x + p[1];\n}\n")
    first, second = run_script(script, source, env), run_script(script, source, env)
    source.write_text("HAPSIRA_FUNC double scaled(double x, const double *p)\n"
                      "{\n    return p[0] * x - p[1];\n}\n")
    edited = run_script(script, source, env)
    assert (first["value"], first["cache_hits"], first["compiles"]) == (6.0, 0, 1)
    assert (second["value"], second["cache_hits"], second["compiles"]) == (6.0, 1, 0)
    assert (edited["value"], edited["cache_hits"], edited["compiles"]) == (5.0, 1, 1)


def test_c_that_does_not_compile_names_file_and_line(tmp_path):
    source = tmp_path / "broken.c"
    source.write_text("/* a comment */\nHAPSIRA_FUNC double broken(double x)\n"
                      "{\n    return x * ;\n}\n")
    with pytest.raises(ForeignCompileError) as error:
        declare("double broken(double x)", source)
    assert error.value.file == str(source) and error.value.line == 4
    assert str(error.value).startswith(f"{source}, line 4: expected")


def test_definition_that_differs_from_the_prototype(tmp_path):
    source = tmp_path / "mismatch.c"
    source.write_text("\n\nHAPSIRA_FUNC double mismatch(double x, double n)\n"
                      "{\n    return x * n;\n}\n")
    with pytest.raises(ForeignCompileError, match=r"mismatch.c, line 3: the C definition of "
                       r"mismatch has another type than the declared 'double mismatch"):
        declare("double mismatch(double x, int64_t n)", source)
    with pytest.raises(ForeignCompileError, match="no function absent is defined"):
        declare("double absent(double x)", source)


def test_unmarked_function_is_refused_on_every_target():
    with pytest.raises(ForeignCompileError, match="HAPSIRA_FUNC"):
        declare("double plain(double x)", "double plain(double x)\n{\n    return 2.0 * x;\n}\n")


@pytest.mark.parametrize("prototype, error, message", [
    ("double(double x)", ValueError, "expected a C prototype"),
    ("float64(float64, float64[:])", ValueError, "expected a C prototype"),
    ("double f(double x", ValueError, "expected a C prototype"),
    ("float f(double x)", TypeError, "return type must be double"),
    ("double f(float x)", TypeError, "parameter 1 .* unsupported type 'float'"),
    ("double f(double x, int n)", TypeError, "parameter 2 .* unsupported type 'int'"),
    ("double f(double x, double **p)", TypeError, "unsupported type 'double \\*\\*'"),
    (None, TypeError, "expected a C prototype string"),
])
def test_bad_prototype_is_refused_before_anything_compiles(prototype, error, message, tmp_path):
    # the source does not even exist: the prototype is checked first
    with pytest.raises(error, match=message):
        declare(prototype, tmp_path / "never_read.c")


@pytest.mark.parametrize("call, message", [
    ("density(h[0], p[3:], int(p[2]), 1.0)", "positional"),
    ("density(h[0], (1.0, 2.0), int(p[2]))", r"argument 2 \(table\) must be a float64 array"),
    ("density(h[0], p[3:], 2.5)", r"argument 3 \(rows\) must be an integer"),
])
def test_wrong_call_in_hjit_code_is_a_clear_error(call, message):
    namespace = {"hjit": hjit, "density": c_drag.density_c}
    exec(textwrap.dedent(f"""
        @hjit
        def body(h, p, out):
            out[0] = {call}
    """), namespace)
    kernel = ObjectKernel(namespace["body"], [
        Arg("h", np.float64, ("one",)), Arg("p", np.float64, ("np",)),
        Arg("out", np.float64, ("one",), output=True)])
    p = c_drag.params(np.array([2.2]), np.array([1e-8]))
    with pytest.raises(Exception, match=message):
        kernel(np.array([[400.0]]), p, np.zeros((1, 1)))


def test_no_compiler_says_what_to_install(monkeypatch, tmp_path):
    source = "HAPSIRA_FUNC double lonely(double x)\n{\n    return x + 0.125;\n}\n"
    monkeypatch.setenv("HAPSIRA_CC", str(tmp_path / "no-such-cc"))
    if REAL_GPU:  # the GPU compiles the C itself: no host compiler is needed
        assert declare("double lonely(double x)", source).library is None
        return
    with pytest.raises(CompilerNotFoundError, match=r"HAPSIRA_CC=.*no-such-cc.* is not a program"
                       r".*install a C compiler \(Debian/Ubuntu: apt install gcc"):
        declare("double lonely(double x)", source)
    # nothing on the PATH either
    monkeypatch.delenv("HAPSIRA_CC")
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(CompilerNotFoundError, match="none of HAPSIRA_CC, CC, cc, gcc or clang"):
        declare("double lonely(double x)", source)


def test_fingerprint_follows_the_source(tmp_path):
    body = "HAPSIRA_FUNC double twice(double x) {{ return {}; }}"
    first = declare("double twice(double x)", body.format("2.0 * x"))
    again = declare("double twice(double x)", body.format("2.0 * x"))
    other = declare("double twice(double x)", body.format("x + x"))
    assert again is first and len(first.fingerprint) == 64
    assert other.fingerprint != first.fingerprint and other.symbol != first.symbol
    assert first.prototype == "double twice(double x)"


def test_an_unusable_cache_folder_still_runs_declared_c(tmp_path):
    """HAPSIRA_CACHE_DIR naming a regular file: the library is built in a folder of
    the process, with the cache's one CacheWarning (before, the declaration raised
    from os.makedirs: the kernels' fallback did not cover declared C)."""
    source = tmp_path / "scaled.c"
    source.write_text("HAPSIRA_FUNC double scaled(double x, const double *p)\n"
                      "{\n    return p[0] * x + p[1];\n}\n")
    script = tmp_path / "caller.py"
    script.write_text("import warnings\nwarnings.simplefilter('always')\n" + CALLER)
    not_a_folder = tmp_path / "a_file"
    not_a_folder.write_text("")
    env = dict(os.environ, HAPSIRA_CACHE="1", HAPSIRA_CACHE_DIR=str(not_a_folder))
    done = subprocess.run([sys.executable, str(script), str(source)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["out"] == [5.0, -14.5]
    warned = [line for line in done.stderr.splitlines() if "CacheWarning" in line]
    assert len(warned) == 1 and "HAPSIRA_CACHE_DIR" in warned[0], done.stderr
    assert str(not_a_folder) in warned[0]
    assert not_a_folder.read_text() == ""
    if result["library"] is not None:  # a host library: in a folder the process removed
        assert not os.path.exists(result["library"])
