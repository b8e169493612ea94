"""On-disk kernel cache: keyed by a fingerprint of everything the kernel calls."""

import os
import subprocess
import sys
import textwrap

import numpy as np

from hapsira_core import settings
from hapsira_core.kernels.fingerprint import fingerprint
from hapsira_core.jit import hjit


def make(constant, helper_constant):
    namespace = {"hjit": hjit}
    exec(textwrap.dedent(f"""
        @hjit
        def helper(x):
            return x * {helper_constant}

        @hjit
        def f(t, rr, vv, k, p):
            return vv, (helper(rr[0]) * {constant}, rr[1], rr[2])
    """), namespace)
    return namespace["f"]


def test_fingerprint_follows_code_constants_and_callees():
    base = fingerprint(make(1.0, 2.0))
    assert fingerprint(make(1.0, 2.0)) == base  # same code: same kernel may be reused
    assert fingerprint(make(1.5, 2.0)) != base  # a constant of f
    assert fingerprint(make(1.0, 3.0)) != base  # a constant of a function f calls


def test_cached_kernel_file_and_same_numbers(tmp_path):
    script = textwrap.dedent("""
        import numpy as np
        from hapsira_cowell import cowell
        res = cowell(398600.4418, np.array([7000.0, 10.0, 900.0]), np.array([0.1, 7.4, 1.0]),
                     [3000.0, 9000.0])
        print(repr(res.rr.tolist()))
    """)
    outputs = []
    for cache in ("0", "1"):
        env = dict(os.environ, HAPSIRA_CACHE=cache, HAPSIRA_CACHE_DIR=str(tmp_path))
        done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                              text=True, timeout=600, check=True)
        outputs.append(np.array(eval(done.stdout.strip().splitlines()[-1])))
    np.testing.assert_array_equal(outputs[0], outputs[1])
    files = [p.name for p in tmp_path.iterdir() if p.suffix == ".py"]
    # cowell's kernel; where the host targets join kernels (`hapsira_core.targets._join`), beside it
    # the loop and the trampoline that every function of its form shares
    shared = [f for f in files if f.startswith(("hapsira_kernel_generic_",
                                                "hapsira_kernel_trampoline_"))]
    joins = settings.TARGET in ("cpu", "parallel") and settings.JOIN == "on"
    assert len(files) - len(shared) == 1 and len(shared) == (2 if joins else 0), files
    assert all(f.startswith("hapsira_kernel_") for f in files)
