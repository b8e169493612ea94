"""Where a test run's time goes: every kernel the tests build, compiled or loaded, with
its seconds; a pytest plugin.

    COMPILE_LOG=out/dir python -m pytest -p compile_log tests/...
        (with benchmarks/investigations on PYTHONPATH; any number of xdist workers)
    python benchmarks/investigations/compile_log.py out/dir [out/dir2 ...]   (the summary)

Each process appends one JSON line per build to ``COMPILE_LOG/<pid>.jsonl``: a kernel
(`hapsira_core.kernels.kernel.ObjectKernel._build`: per-object, lane, parallel and
cuda kernels), a joined kernel (`hapsira_core.targets._join.JoinedKernel._build`,
its generic loop inside it) and a generic loop (`_join.generic`), with the entry's
name, whether it was on disk before, the seconds and the test. The summary counts,
per folder, the builds of each kind that compiled (more than a second) or loaded,
their seconds, and the entries compiled more than once (by two workers at the same
time, or after their folder was emptied). Written to see what the CI stages compile
and which of it another stage or worker had compiled already (issue 49 item 6).
"""

import collections
import glob
import json
import os
import sys
import time

COMPILED = 1.0  # seconds: a build that took longer compiled (a load takes milliseconds)


def _record(out, **fields):
    fields["test"] = os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0]
    fields["target"] = os.environ.get("HAPSIRA_TARGET", "cpu")
    out.write(json.dumps(fields, default=str) + "\n")


def pytest_configure(config):
    folder = os.environ.get("COMPILE_LOG")
    if not folder:
        return
    from hapsira_core.kernels import kernel
    from hapsira_core.targets import _join

    os.makedirs(folder, exist_ok=True)
    out = open(os.path.join(folder, f"{os.getpid()}.jsonl"), "a", buffering=1)

    def timed(cls, kind):
        build = cls._build

        def _build(self):
            try:
                name, before = self.cache_name, self.on_disk()
            except Exception:
                name, before = None, None
            start = time.perf_counter()
            try:
                return build(self)
            finally:
                _record(out, kind=kind, cls=type(self).__qualname__, name=name,
                        on_disk=before, seconds=time.perf_counter() - start)
        cls._build = _build

    timed(kernel.ObjectKernel, "kernel")
    timed(_join.JoinedKernel, "joined")
    generic = _join.generic

    def timed_generic(key, make_kernel):
        before = key in _join._GENERIC
        start = time.perf_counter()
        try:
            return generic(key, make_kernel)
        finally:
            _record(out, kind="generic", name=key, on_disk=before,
                    seconds=time.perf_counter() - start)
    _join.generic = timed_generic


def summary(folder):
    records = [json.loads(line) for path in glob.glob(os.path.join(folder, "*.jsonl"))
               for line in open(path)]
    print(f"== {folder}: {len(records)} builds")
    kinds = collections.defaultdict(lambda: [0, 0.0])
    for r in records:
        kinds[(r["kind"], r.get("cls") or "", r["seconds"] > COMPILED)][0] += 1
        kinds[(r["kind"], r.get("cls") or "", r["seconds"] > COMPILED)][1] += r["seconds"]
    for (kind, cls, compiled), (count, seconds) in sorted(kinds.items(),
                                                         key=lambda item: -item[1][1]):
        print(f"  {kind:8} {cls:14} {'compiled' if compiled else 'loaded  '} "
              f"{count:5} builds {seconds:8.1f} s")
    compiled = collections.Counter(r["name"] for r in records
                                   if r["name"] and r["seconds"] > COMPILED
                                   and r["kind"] != "generic")
    twice = {name: count for name, count in compiled.items() if count > 1}
    print(f"  entries compiled: {len(compiled)} distinct, {sum(twice.values()) - len(twice)} "
          "compiles of an entry compiled before")


if __name__ == "__main__":
    for given in sys.argv[1:]:
        summary(given)
