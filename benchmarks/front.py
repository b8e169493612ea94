"""The benchmarks' front door: one command for the headline comparisons.

    python -m benchmarks --list
    python -m benchmarks headline [--quick] [--out DIR] [--dry-run]
    python -m benchmarks <name> [--quick] [--out DIR] [--dry-run]
    python -m benchmarks [<name>] --plot RESULT.json [--png PATH] [--title TEXT]

Each benchmark is one of the scripts beside this file, run in its own process with the
arguments of its entry in `BENCHMARKS` (``--quick``: small sizes, a few minutes for the
whole headline run on a 2-core machine). Its JSON record is written again as
``<benchmark>_<machine>_<date>.json`` (`result_name`) in ``--out`` (default
``benchmarks/results``) with ``"benchmark"``, ``"command"``, ``"quick"``, ``"skipped"``
(each peer that did not run, and why) and ``"summary"`` (the figures of the plot) added to
the script's own fields and its ``"machine"`` (CPU, GPUs, versions, git revision, src
digest); beside it a PNG, ours against each peer (with matplotlib). A peer that is not
installed is left out with a line naming its package, never an error; a benchmark that
needs a GPU is skipped on a machine without one.

Adding a benchmark: a script with a ``--out`` (or another flag naming its JSON path),
then a `Benchmark` entry here: its arguments (full and ``--quick``), the peers it can
leave out, and a summary function that reads the figures to plot out of its record.
"""

import argparse
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Callable

from . import harness

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BENCH_INSTALL = 'pip install -e ".[bench]"'


@dataclass(frozen=True)
class Peer:
    """Another solver a benchmark compares against, and the modules it needs."""

    name: str
    modules: tuple
    install: str


SCIPY = Peer("scipy", ("scipy",), BENCH_INSTALL)
HEYOKA = Peer("heyoka", ("heyoka",), BENCH_INSTALL)
DIFFRAX = Peer("diffrax", ("jax", "diffrax"), BENCH_INSTALL)
CYRK = Peer("CyRK", ("CyRK",), BENCH_INSTALL)
CUBIE = Peer("CuBIE", ("cubie",), 'pip install -e ".[bench-gpu]"')
CASCADE = Peer("cascade", ("cascade",),
               "pip install --no-deps esa-cascade (the peers extra; it pins an older heyoka)")
DASK = Peer("Dask", ("dask", "distributed"), 'pip install -e ".[dask]"')
OEM = Peer("oem", ("oem",), 'pip install -e ".[oem]"')


def installed(module):
    """Whether ``module`` can be imported (found, not imported: jax takes seconds)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def missing_module(peer):
    """The first of ``peer``'s modules that is not installed, or None."""
    return next((m for m in peer.modules if not installed(m)), None)


def has_gpu(machine):
    """An NVIDIA GPU that nvidia-smi lists, and numba-cuda to run on it."""
    return bool(machine.get("gpus")) and installed("numba_cuda")


# --- results: names ---

_CPU_NOISE = {"cpu", "processor", "with", "radeon", "graphics"}


def _tokens(text):
    text = re.sub(r"\((r|tm)\)", " ", text.lower())
    text = re.sub(r"@.*", "", text)
    out = []
    for token in re.split(r"[\s_/]+", text):
        token = re.sub(r"[^a-z0-9-]", "", token).strip("-")
        if token:
            out.append(token)
    return out


def machine_slug(machine, gpu=False):
    """A short name of the machine for file names: the GPU's model (``nvidia-h100``,
    ``-x2`` for two) where ``gpu`` and there is one, else the CPU's vendor and family and
    the cores this process may use (``amd-epyc-2c``, ``intel-xeon-16c``)."""
    gpus = machine.get("gpus") or []
    if gpu and gpus:
        words = []
        for token in _tokens(gpus[0].get("name", "gpu").replace("-", " ")):
            words.append(token)
            if any(c.isdigit() for c in token):  # the model: H100, A100, 4090
                break
        slug = "-".join(words[:4]) or "gpu"
        return slug + (f"-x{len(gpus)}" if len(gpus) > 1 else "")
    words = [t for t in _tokens(machine.get("cpu") or "")
             if t not in _CPU_NOISE and not re.fullmatch(r"\d+-core|\d+core", t)]
    slug = "-".join(words[:2]) or "cpu"
    cores = machine.get("cores") or machine.get("cpus")
    return f"{slug}-{cores}c" if cores else slug


def result_name(benchmark, machine, date=None, gpu=False):
    """``<benchmark>_<machine>_<date>.json``: `machine_slug`, the date (UTC) YYYY-MM-DD."""
    date = date or time.strftime("%Y-%m-%d", time.gmtime())
    return f"{benchmark}_{machine_slug(machine, gpu)}_{date}.json"


# --- the benchmarks ---

@dataclass(frozen=True)
class Benchmark:
    """One benchmark of the front door.

    ``arguments(quick, have, gpu, out)`` gives the script's command-line arguments and
    extra environment: ``have`` the names of the peers installed, ``gpu`` whether this
    machine has one, ``out`` the path its JSON goes to. ``summary(record)`` reads the
    figures to plot from that JSON: ``{"metric": ..., "groups": {group: {solver:
    value}}}``, ours named ``hapsira ...``. ``gpu``: "no" (host only), "uses" (on the GPU
    where there is one) or "needs" (skipped without one)."""

    name: str
    script: str
    function: str
    measures: str
    peers: tuple
    arguments: Callable
    summary: Callable
    requires: tuple = ()
    headline: bool = False
    gpu: str = "no"

    @property
    def path(self):
        return os.path.join(HERE, self.script)

    def on_gpu(self, gpu):
        return self.gpu == "needs" or (self.gpu == "uses" and gpu)


def _rows(pairs):
    return {label: float(value) for label, value in pairs if value is not None}


def _cold_start_args(quick, have, gpu, out):
    return (["--objects", "16", "--rounds", "1", "--repeat", "1"] if quick else []) + [
        "--out", out], {}


def _cold_start_summary(record):
    names = {"classic_cold": "hapsira, compiled whole (empty cache)",
             "joined_cold": "hapsira, HAPSIRA_JOIN=1 (empty cache)",
             "joined_new_function": "hapsira, HAPSIRA_JOIN=1, a new f",
             "warm": "hapsira, warm cache"}
    groups = {}
    for case, data in record["cases"].items():
        groups[case] = _rows((label, data["summary"].get(key)) for key, label in names.items())
    if record.get("diffrax_first_jit_s") is not None and "lorenz_dop853" in groups:
        groups["lorenz_dop853"]["diffrax, first jax.jit call"] = record["diffrax_first_jit_s"]
    return {"metric": "seconds to the first result", "groups": groups}


def _cpu_vs_peers_args(quick, have, gpu, out):
    args = ["--n-scipy", "3", "--n-cpu", "100", "--n-parallel", "200", "--lanes", "off"] if quick else []
    if "heyoka" not in have:
        args += ["--n-heyoka", "0"]
    elif quick:
        args += ["--n-heyoka", "20"]
    return args + ["--out", out], {}


def _cpu_vs_peers_summary(record):
    rows = _rows((name, r.get("us_per_object_day")) for name, r in record["peers"].items())
    return {"metric": "us per object-day",
            "groups": {"reference workload (LEO, two-body + J2, one day)": rows}}


def _gpu_user_f_args(quick, have, gpu, out):
    args = (["--n", "20000", "--repeat", "3", "--n-ref", "3", "--peer-repeat", "1",
             "--peer-timeout", "300"] if quick else
            ["--n", "1000000", "--repeat", "5", "--n-ref", "10"])
    peers = [p for p in ("diffrax", "cubie") if p in {h.lower() for h in have}]
    return args + ["--peers", ",".join(peers), "--out", out], {"HAPSIRA_TARGET": "cuda"}


def _gpu_user_f_summary(record):
    n = record["n"]
    per = {"hapsira, the library's f": ("tuned_s", n),
           "hapsira, textbook f (rewritten)": ("as_written_s", n),
           "hapsira, textbook f as_written": ("as_written_without_rewrite_s", n),
           "diffrax Dopri8": ("diffrax_s", record.get("diffrax_n")),
           "CuBIE dop853": ("cubie_s", record.get("cubie_n"))}
    rows = _rows((label, 1e6 * record[key] / count if record.get(key) and count else None)
                 for label, (key, count) in per.items())
    return {"metric": "us per object-day", "groups": {"reference workload on one GPU": rows}}


def _ensembles_args(quick, have, gpu, out):
    args = (["--n", "1000", "--n-scipy", "10", "--variants", "cpu,parallel"] if quick else
            ["--n", "10000", "--n-scipy", "50"])
    return args + ["--out", out], {}


def _ensembles_summary(record):
    groups = {}
    for problem, row in record["problems"].items():
        pairs = [("scipy DOP853", row.get("scipy_us_per_object")),
                 ("CyRK nbsolve_ivp", row.get("cyrk_us_per_object"))]
        pairs += [(f"hapsira {variant}", r["us_per_object"]) for variant, r in row.items()
                  if isinstance(r, dict) and "us_per_object" in r]
        groups[problem] = _rows(pairs)
    return {"metric": "us per object", "groups": groups}


def _stiff_args(quick, have, gpu, out):
    args = (["--n", "200", "--n-scipy", "5", "--methods", "Radau", "--scipy-methods", "Radau",
             "--problems", "robertson", "--repeat", "1", "--targets", "cpu"] if quick else
            ["--n", "10000", "--n-scipy", "50", "--methods", "BDF,Radau", "--scipy-methods",
             "BDF,Radau", "--repeat", "3"])
    return args + ["--out", out], {}


def _stiff_summary(record):
    groups = {}
    for problem in record["problems"]:
        pairs = [(f"scipy {method}", row.get("us_per_object"))
                 for method, row in record["scipy"].get(problem, {}).items()
                 if isinstance(row, dict)]
        for target, report in record["ours"].items():
            pairs += [(f"hapsira {target} {key.split('/')[1]}", row["us_per_object"])
                      for key, row in report.items()
                      if key.startswith(problem + "/") and isinstance(row, dict)
                      and "us_per_object" in row]
        groups[problem] = _rows(pairs)
    return {"metric": "us per object", "groups": groups}


def _lanes_args(quick, have, gpu, out):
    args = (["--widths", "0,8", "--workloads", "van_der_pol", "--n-ensemble", "400",
             "--rounds", "2"] if quick else ["--widths", "0,4,8", "--rounds", "7"])
    if "heyoka" in have and not quick:
        args += ["--n-heyoka", "256"]
    return args + ["--out", out], {}


def _lanes_summary(record):
    groups = {}
    for workload, row in record["workloads"].items():
        groups[f"{workload} ({row['unit']})"] = _rows(
            (f"hapsira, lanes {w}" if w.isdigit() and w != "0" else
             "hapsira, per object" if w == "0" else w, r["best"])
            for w, r in row["widths"].items())
    return {"metric": "best of the rounds", "groups": groups}


def _screening_args(quick, have, gpu, out):
    args = (["--n", "1000", "--days", "0.25"] if quick else
            ["--n", "20000", "--days", "7" if gpu else "1", "--threshold", "5"])
    if "cascade" in have:
        targets = ["cuda"] if gpu else ["cpu"] if quick else ["cpu", "parallel"]
        args += ["--cascade", "--targets", *targets]
    return args + ["--json", out, "--label", "python -m benchmarks",
                   "--machine", "see machine"], {
        "HAPSIRA_TARGET": "cuda" if gpu else "cpu"}


def _screening_summary(record):
    run = record["runs"][-1]
    ours = run.get("ours", [run])
    pairs = [(f"hapsira {r['target']}", r["total_s"]) for r in ours]
    if "cascade" in run:
        pairs.append(("cascade", run["cascade"]["total_s"]))
    n = run.get("objects", run.get("n"))
    return {"metric": "seconds (wall)",
            "groups": {f"screen {n} objects, {run['days']:g} days": _rows(pairs)}}


def _stm_cost_args(quick, have, gpu, out):
    args = (["--targets", "cpu", "--objects", "16", "--heyoka-objects", "4"] if quick else
            ["--targets", "cpu,parallel", "--objects", "256", "--heyoka-objects", "32"])
    return args + ["--out", out], {}


def _stm_cost_summary(record):
    def label(name):
        return name if name == "heyoka" else f"hapsira {name}"
    rows = record["rows"]
    return {"metric": "us per object-day", "groups": {
        kind: _rows((label(name), row.get(f"{kind}_us_per_object_day"))
                    for name, row in rows.items())
        for kind in ("plain", "stm")}}


def _reference_args(quick, have, gpu, out):
    args = (["--sizes", "1e3", "--variants", "j2", "--n-ref", "3", "--repeat", "1"] if quick
            else ["--sizes", "1e3,1e4,1e5,1e6" if gpu else "1e3,1e4", "--n-ref", "20"])
    if gpu:
        peers = ["diffrax"] if "diffrax" in have else []
        peers += ["parallel", "cpu"]
    else:
        peers = [p for p in ("scipy", "heyoka") if p in have] + ["cpu"]
    return ["--platform", "cuda" if gpu else "parallel", *args, "--peers", ",".join(peers),
            "--name", out], {}


def _reference_summary(record):
    groups = {}
    for run in record["runs"]:
        name = f"{run['variant']}, {run['n_objects']:.0e} objects".replace("e+0", "e")
        pairs = [(f"hapsira {record.get('target', '')}".strip(), run["seconds"])]
        pairs += [(peer, row.get("seconds")) for peer, row in run.get("peers", {}).items()
                  if isinstance(row, dict)]
        groups[name] = _rows(pairs)
    return {"metric": "seconds (median, compile excluded)", "groups": groups}


def _latency_args(quick, have, gpu, out):
    return (["--runs", "1", "--targets", "cpu"] if quick else []) + ["--out", out], {}


def _latency_summary(record):
    groups = {}
    for state in ("cold", "warm"):
        pairs = []
        for target, row in record["targets"].items():
            runs = row[state] if isinstance(row[state], list) else [row[state]]
            pairs.append((f"hapsira {target}", min(r["process_s"] for r in runs)))
        heyoka = record.get("heyoka", {})
        if state in heyoka:
            runs = heyoka[state] if isinstance(heyoka[state], list) else [heyoka[state]]
            pairs.append(("heyoka", min(r["process_s"] for r in runs)))
        groups[f"whole process, {state} (best)"] = _rows(pairs)
    return {"metric": "seconds", "groups": groups}


def _state_size_args(quick, have, gpu, out):
    args = (["--sizes", "6,28", "--objects", "16", "--forms", "array"] if quick else
            ["--sizes", "6,28,200,1000" if gpu else "6,12,28,60,200,1000"])
    if gpu:
        args += ["--targets", "cuda"] + ([] if quick else ["--forms", "array", "--objects",
                                                            "10000"])
        gpu_peers = [p for p in ("cubie", "diffrax") if p in {h.lower() for h in have}]
        if gpu_peers:
            args += ["--peers", ",".join(gpu_peers)]
    else:
        args += ["--targets", "cpu" if quick else "cpu,parallel"]
        if "heyoka" in have:
            args += ["--heyoka"]
    return args + ["--out", out], {}


def _state_size_summary(record):
    names = {"scipy": "scipy DOP853", "heyoka_batch": "heyoka, SIMD batch",
             "cubie": "CuBIE dop853", "diffrax": "diffrax Dopri8"}
    groups = {}
    for row in record["rows"]:
        if "per_object_us" not in row:
            continue
        who = row["who"]
        label = names.get(who, f"hapsira {who}")
        groups.setdefault(f"n = {row['n']}", {})[label] = float(row["per_object_us"])
    return {"metric": "us per object (Lorenz-96, DOP853)", "groups": groups}


def _jax_args(quick, have, gpu, out):
    args = (["--n", "100", "--repeat", "1"] if quick else
            ["--n", "100000", "1000000"] if gpu else ["--n", "100", "1000"])
    return ["--platform", "cuda" if gpu else "cpu", *args, "--out", out], {}


def _jax_summary(record):
    groups = {}
    for run in record["runs"]:
        groups[f"{run['n_objects']} objects, inside jax.jit"] = _rows(
            (f"{peer} Dopri8 (vmap)" if peer == "diffrax" else peer, row.get("seconds"))
            for peer, row in run.items() if isinstance(row, dict))
    return {"metric": "seconds (best, compile excluded)", "groups": groups}


def _dask_args(quick, have, gpu, out):
    args = ["--n", "2000", "--repeat", "1", "--chunks", "1000"] if quick else []
    return args + ["--out", out], {}


def _dask_summary(record):
    rows = {}
    for key, row in record["results"].items():
        label = ("hapsira, one process (parallel)" if key.startswith("single")
                 else key.replace("dask ", "hapsira on Dask, "))
        rows[label] = row.get("seconds")
    work = record.get("workload", {})
    return {"metric": "seconds (best)", "groups": {
        f"{work.get('objects', '?')} objects, {work.get('span_s', 0) / 3600:g} h": _rows(
            rows.items())}}


def _gravity_args(quick, have, gpu, out):
    if gpu:
        args = ["--propagate", "2000" if quick else "100000"]
    else:
        args = ["--points", "2000", "--repeat", "2"] if quick else []
    return args + ["--out", out], {}


def _gravity_summary(record):
    rows = record["results"]
    if "J2_perturbation" in rows:
        return {"metric": "us per evaluation (one core)", "groups": {"EGM96 field": _rows(
            ("J2 alone" if key == "J2_perturbation" else f"hapsira gravity_field {key}",
             row["us_per_eval"]) for key, row in rows.items())}}
    return {"metric": "ns per right-hand-side evaluation", "groups": {
        "cowell, two-body + EGM96": _rows((f"hapsira {key}", row["ns_per_rhs_eval"])
                                          for key, row in rows.items())}}


def _oem_args(quick, have, gpu, out):
    args = ["--objects", "100", "--repeat", "1"] if quick else ["--repeat", "5"]
    return args + ["--out", out], {}


def _oem_summary(record):
    return {"metric": "seconds (best)", "groups": {
        f"{record['objects']} objects x {record['times']} states, one file each":
            _rows([("hapsira write_oem", record["best_s"])])}}


def _probability_args(quick, have, gpu, out):
    args = ["--approaches", "10000", "--repeat", "2"] if quick else []
    return args + ["--out", out], {"HAPSIRA_TARGET": "cuda"} if gpu else {}


def _probability_summary(record):
    return {"metric": "seconds (best)", "groups": {
        f"{record['approaches']} approaches, {record['target']}":
            _rows([(f"hapsira {method}", row["best_s"])
                   for method, row in record["methods"].items()])}}


def _foreign_args(quick, have, gpu, out):
    args = ["--n", "20000", "--repeat", "1"] if quick else []
    return ["run", *args, "--out", out], {"HAPSIRA_TARGET": "cuda"}


def _foreign_summary(record):
    groups = {}
    for number, process in enumerate(record["processes"], 1):
        if "error" in process:
            continue
        which = "first process (empty cache)" if number == 1 else "next process (cache)"
        groups[f"{which}: first call"] = _rows(
            (f"hapsira, {kind} density", process[kind]["first_call_s"]) for kind in ("C", "hjit"))
        groups[f"{which}: best call"] = _rows(
            (f"hapsira, {kind} density", process[kind]["seconds"]) for kind in ("C", "hjit"))
    return {"metric": "seconds", "groups": groups}


def _gpu_peers_args(quick, have, gpu, out):
    return (["--quick"] if quick else []) + ["--out", out], {}


def _gpu_peers_summary(record):
    groups = {}
    for row in record["stiff"]:
        group = groups.setdefault(f"{row['problem']}, {row['n']} objects", {})
        group[f"hapsira cuda {row['ours_method']}"] = row.get("ours_us_per_object")
        group[f"CuBIE {row.get('cubie_algorithm', 'radau')}"] = row.get("cubie_us_per_object")
    for row in record["large_n"]:
        group = groups.setdefault(f"Lorenz-96 n = {row['n']}, {row['objects']} objects", {})
        group["hapsira cuda DOP853"] = row.get("ours_us")
        for peer, label in (("diffrax", "diffrax Dopri8"), ("cubie", "CuBIE dop853")):
            if row.get(f"{peer}_us") is not None:
                group[label] = row[f"{peer}_us"]
    return {"metric": "us per object", "groups": {
        name: _rows(rows.items()) for name, rows in groups.items()}}


BENCHMARKS = {b.name: b for b in (
    Benchmark("cpu_vs_peers", "cpu_vs_peers.py", "run_target",
              "reference workload (LEO cloud, two-body + J2, one day) on the cpu and parallel "
              "targets: us/object-day, steps, difference from scipy",
              (SCIPY, HEYOKA), _cpu_vs_peers_args, _cpu_vs_peers_summary,
              requires=(SCIPY,), headline=True),
    Benchmark("ensembles", "ensembles.py", "host_main",
              "Van der Pol and Lotka-Volterra ensembles, own parameters per object, DOP853, "
              "on the host targets: us/object",
              (SCIPY, CYRK), _ensembles_args, _ensembles_summary, requires=(SCIPY,),
              headline=True),
    Benchmark("stiff", "stiff.py", "host_main",
              "stiff ensembles (Robertson, Van der Pol mu ~ 1000), Radau and BDF on one core "
              "and all cores: us/object, agreement with scipy Radau",
              (SCIPY,), _stiff_args, _stiff_summary, requires=(SCIPY,), headline=True),
    Benchmark("screening", "screening.py", "run_ours",
              "conjunction screening of a debris population (catalogs and rotated copies): "
              "seconds per phase",
              (CASCADE,), _screening_args, _screening_summary, headline=True, gpu="uses"),
    Benchmark("gpu_user_f", "gpu_user_f.py", "timed",
              "reference workload on one GPU through cowell, the library's f and a textbook "
              "one: median seconds, orbit-steps/s, error against scipy",
              (DIFFRAX, CUBIE), _gpu_user_f_args, _gpu_user_f_summary, requires=(SCIPY,),
              headline=True, gpu="needs"),
    Benchmark("cold_start", "cold_start.py", "run_case",
              "a new function's first call in a new process: compiled whole, joined "
              "(HAPSIRA_JOIN=1), warm cache",
              (DIFFRAX,), _cold_start_args, _cold_start_summary),
    Benchmark("lanes", "lanes.py", "run",
              "SIMD lane widths (HAPSIRA_LANES) against the per-object kernel, one core, "
              "bit-identical results checked",
              (HEYOKA,), _lanes_args, _lanes_summary),
    Benchmark("stm_cost", "stm_cost.py", "hapsira",
              "the cost of stm=True (state transition matrices) over a plain run, "
              "us/object-day, Phi compared",
              (HEYOKA,), _stm_cost_args, _stm_cost_summary),
    Benchmark("reference", "reference.py", "time_hapsira",
              "reference workload against N on one target (cuda where there is a GPU, else "
              "parallel), and its drag + re-entry variant: seconds, orbit-steps/s, error "
              "against scipy",
              (SCIPY, DIFFRAX, HEYOKA), _reference_args, _reference_summary,
              requires=(SCIPY,), gpu="uses"),
    Benchmark("latency", "latency.py", "run",
              "a new process's time to its first result, cold (empty kernel cache) and warm",
              (HEYOKA,), _latency_args, _latency_summary),
    Benchmark("state_size", "state_size.py", "scipy_per_step",
              "compile time and time per object against the state size n (Lorenz-96)",
              (SCIPY, HEYOKA, CUBIE, DIFFRAX), _state_size_args, _state_size_summary,
              requires=(SCIPY,), gpu="uses"),
    Benchmark("jax_vs_diffrax", "jax_vs_diffrax.py", "run",
              "hapsira_cowell.jax.cowell inside one jax.jit program against diffrax in the "
              "same program: seconds",
              (DIFFRAX,), _jax_args, _jax_summary, requires=(DIFFRAX,), gpu="uses"),
    Benchmark("dask_overhead", "dask_overhead.py", "best",
              "cowell() on Dask arrays (a LocalCluster) against one single-process call",
              (), _dask_args, _dask_summary, requires=(DASK,)),
    Benchmark("gravity", "gravity.py", "propagate",
              "gravity_field (EGM96) per evaluation at 8x8, 20x20, 70x70 on one core; on a "
              "GPU, inside a propagation",
              (), _gravity_args, _gravity_summary, gpu="uses"),
    Benchmark("oem_write", "oem_write.py", "states",
              "write_oem (CCSDS OEM, one file per object) of a synthetic catalog: seconds",
              (), _oem_args, _oem_summary, requires=(OEM,)),
    Benchmark("probability", "probability.py", "approaches",
              "conjunctions.probability over many approaches, per method: first call "
              "and best", (), _probability_args, _probability_summary, gpu="uses"),
    Benchmark("gpu_peers", "gpu_peers.py", "run_stiff",
              "one GPU: stiff ensembles (Robertson, Van der Pol, HIRES) with every stiff method "
              "against CuBIE's Radau IIA, Lorenz-96 at n = 200 and 1000 against diffrax Dopri8, "
              "the cost of stm=True: seconds, us/object, error against a tight reference",
              (CUBIE, DIFFRAX), _gpu_peers_args, _gpu_peers_summary, requires=(SCIPY,),
              gpu="needs"),
    Benchmark("foreign", "foreign.py", "run_main",
              "a C function in a cuda kernel against its hjit twin, two processes sharing "
              "one kernel cache: first call and best",
              (), _foreign_args, _foreign_summary, gpu="needs"),
)}

#: what ``python -m benchmarks headline`` runs: the figures of README.md's "Measured" table
HEADLINE = tuple(name for name, b in BENCHMARKS.items() if b.headline)

#: the modules the scripts share, and this front door: not benchmarks
HELPERS = {"__init__.py": "the package", "__main__.py": "python -m benchmarks",
           "front.py": "this front door", "harness.py": "machine(), write_result, timers",
           "workloads.py": "the reference workload, ensembles and stiff problems",
           "peers.py": "the peers' runs (scipy, heyoka, diffrax, CyRK, CuBIE)",
           "call_identity_functions.py": "call_identity.py's right-hand sides (importable "
                                         "by both checkouts)"}
#: scripts beside the benchmarks that are tools, not a comparison per machine: run them
#: directly (each takes --help)
TOOLS = {"kernel_stats.py": "static resources (registers, SASS instructions) of cowell's "
                            "cuda kernel, without a GPU; prints them",
         "against_revision.py": "this checkout against an earlier git revision: bit "
                                "identity and paired speed (--rev)",
         "call_identity.py": "every front's outputs hashed, to compare two checkouts bit "
                             "for bit (and a 1-object call's overhead)"}
#: one-off studies behind a decision (benchmarks/investigations/, each with --help): run by
#: hand, their results kept for the record (docs/log.md); what each does is the first line
#: of its docstring
INVESTIGATIONS = (
    "broad_phase_host.py", "call_timeline.py", "compile_log.py", "cuda_chunk.py", "cuda_fetch.py",
    "cuda_host_copies.py", "cuda_output_times.py", "dask_gpu_check.py", "drag_breakdown.py",
    "gpu_check.py", "gpu_memory_per_test.py", "gpu_regression.py", "gpu_timeline.py",
    "guarded_reads.py", "host_profile.py", "join_cost.py", "joined_lanes.py", "generic_cost.py",
    "lane_join_fresh.py", "lanes_background.py", "mlir_trial.py",
    "parallel_copies.py", "pinned_copies.py", "register_cap.py", "screen_host.py",
    "screen_profile.py")


def first_line(path):
    """The first line of a script's docstring (what it does)."""
    import ast
    with open(path, encoding="utf-8") as source:
        doc = ast.get_docstring(ast.parse(source.read())) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


def peer_names(bench):
    return ", ".join(p.name for p in bench.peers) or "none"


def listing():
    width = max(map(len, BENCHMARKS))
    lines = ["python -m benchmarks <name|headline> [--quick] [--out DIR]; "
             "headline runs those marked *;",
             "each writes <name>_<machine>_<date>.json and a .png of it in --out "
             "(benchmarks/results); --plot JSON draws a result again:"]
    for name, bench in BENCHMARKS.items():
        mark = "*" if bench.headline else " "
        gpu = {"needs": " [needs a GPU]", "uses": " [on the GPU where there is one]"}.get(
            bench.gpu, "")
        lines.append(f"{mark} {name:<{width}}  {bench.measures}{gpu}")
        lines.append(f"  {'':<{width}}  peers: {peer_names(bench)}; script: "
                     f"benchmarks/{bench.script}")
    lines.append("\ntools (run the script itself, --help):")
    for script, what in TOOLS.items():
        lines.append(f"  benchmarks/{script}: {what}")
    lines.append("\none-off studies behind a decision (benchmarks/investigations/, --help):")
    for script in INVESTIGATIONS:
        lines.append(f"  {script}: {first_line(os.path.join(HERE, 'investigations', script))}")
    return "\n".join(lines)


@dataclass
class Plan:
    """What running one benchmark here means: its command, or why it does not run."""

    bench: Benchmark
    command: list
    env: dict
    skipped: dict
    skip: str = None


def plan(name, quick, out, gpu=False, say=print):
    """The command of benchmark ``name`` on this machine, its JSON going to ``out``;
    each missing peer said (``say``) and listed in ``skipped``."""
    bench = BENCHMARKS[name]
    skipped, have = {}, set()
    for peer in bench.peers:
        module = missing_module(peer)
        if module is None:
            have.add(peer.name)
            continue
        skipped[peer.name] = f"{module} not installed ({peer.install})"
        say(f"{name}: peer {peer.name} skipped: {skipped[peer.name]}")
    absent = [p for p in bench.requires if p.name not in have and missing_module(p)]
    skip = None
    if bench.gpu == "needs" and not gpu:
        skip = "needs an NVIDIA GPU (nvidia-smi lists none, or numba-cuda is not installed)"
    elif absent:
        skip = "needs " + ", ".join(f"{p.name} ({p.install})" for p in absent)
    args, env = bench.arguments(quick, have, gpu, out)
    if skip:
        say(f"{name}: skipped: {skip}")
    return Plan(bench, [sys.executable, bench.path, *args], env, skipped, skip)


# --- one benchmark: run, write, plot ---

def plot(summary, path, title):
    """A horizontal bar per solver, one panel per group; ours in blue. Returns the path,
    or None where matplotlib is missing (said)."""
    try:
        import matplotlib
    except ImportError:
        print(f"plot skipped: matplotlib is not installed ({BENCH_INSTALL})")
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = {g: rows for g, rows in summary["groups"].items() if rows}
    if not groups:
        print("plot skipped: no figures in the result")
        return None
    fig, axes = plt.subplots(len(groups), 1, squeeze=False,
                             figsize=(9, 1.2 + 0.42 * sum(len(r) + 1.5 for r in groups.values())),
                             gridspec_kw={"height_ratios": [len(r) + 1 for r in groups.values()]})
    for ax, (group, rows) in zip(axes[:, 0], groups.items()):
        labels, values = list(rows), list(rows.values())
        colors = ["tab:blue" if label.startswith("hapsira") else "tab:gray" for label in labels]
        ax.barh(range(len(labels)), values, color=colors)
        ax.set_yticks(range(len(labels)), labels, fontsize=8)
        ax.invert_yaxis()
        positive = [v for v in values if v > 0]
        if positive and max(positive) / min(positive) > 30:
            ax.set_xscale("log")
        for i, value in enumerate(values):
            ax.text(value, i, f" {value:.3g}", va="center", fontsize=8)
        ax.set_title(group, fontsize=9, loc="left")
        ax.set_xlabel(f"{summary['metric']} (shorter is faster)", fontsize=8)
        ax.margins(x=0.15)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def benchmark_of(record, path, name=None):
    """The benchmark whose summary reads the record at ``path``: ``name``, else the
    record's own ``"benchmark"``, else the longest registered name the file's starts with."""
    name = name or record.get("benchmark")
    if name is None:
        stem = os.path.basename(path)
        starts = [b for b in BENCHMARKS if stem.startswith(b)]
        name = max(starts, key=len) if starts else None
    if name not in BENCHMARKS:
        raise ValueError(f"{path}: which benchmark is it? name one of {', '.join(BENCHMARKS)}")
    return name


def machine_words(record, gpu=None):
    """``cpu, N cores`` or the GPUs of the record's machine, and when it was measured."""
    machine = record.get("machine") if isinstance(record.get("machine"), dict) else {}
    gpus = machine.get("gpus") or []
    if gpu is None:
        gpu = bool(gpus) and record.get("environment", {}).get("HAPSIRA_TARGET") == "cuda"
    where = (", ".join(g["name"] for g in gpus) if gpu and gpus else
             f"{machine.get('cpu')}, {machine.get('cores')} cores" if machine.get("cpu") else "")
    when = machine.get("measured", "")
    return ", ".join(w for w in (where, when) if w)


def plot_result(path, name=None, png=None, title=None):
    """Draw the plot of an existing result file (``python -m benchmarks --plot JSON``): its
    ``"summary"``, or the benchmark's summary of its record. Returns the PNG's path, or None
    where matplotlib is missing."""
    with open(path) as source:
        record = json.load(source)
    name = benchmark_of(record, path, name)
    summary = record.get("summary")
    if not summary or "groups" not in summary:
        summary = BENCHMARKS[name].summary(record)
    png = png or os.path.splitext(path)[0] + ".png"
    if title is None:
        words = machine_words(record)
        title = f"{name}: {words}" if words else name
    return plot(summary, png, title)


def run(name, quick, out_dir, machine, gpu, dry_run=False):
    """Run one benchmark; its result and plot in ``out_dir``. Returns (status, paths):
    status ``"ok"``, ``"skipped"`` or ``"failed"``."""
    bench = BENCHMARKS[name]
    final = os.path.join(out_dir, result_name(name, machine, gpu=bench.on_gpu(gpu)))
    with tempfile.TemporaryDirectory(prefix=f"bench-{name}-") as scratch:
        raw = os.path.join(scratch, f"{name}.json")
        step = plan(name, quick, raw, gpu)
        shown = shlex.join(os.path.relpath(a, ROOT) if a == bench.path else a
                           for a in step.command[1:])
        if step.skip:
            return "skipped", []
        env_shown = " ".join(f"{k}={v}" for k, v in step.env.items())
        print(f"== {name}: {env_shown + ' ' if env_shown else ''}python {shown}", flush=True)
        if dry_run:
            return "ok", []
        started = time.perf_counter()
        done = subprocess.run(step.command, cwd=ROOT, env=dict(os.environ, **step.env))
        seconds = time.perf_counter() - started
        if done.returncode or not os.path.exists(raw):
            print(f"{name}: failed (exit {done.returncode}) after {seconds:.0f} s", flush=True)
            return "failed", []
        with open(raw) as source:
            record = json.load(source)
    script_machine = record.pop("machine", None)
    out = {"benchmark": name, "quick": quick, "command": f"python {shown}",
           "environment": step.env, "skipped": step.skipped, "seconds": seconds}
    out.update(record)
    # the script's record of the machine where it has one (src digest included), else ours
    out["machine"] = (script_machine if isinstance(script_machine, dict)
                      and "src_digest" in script_machine else machine)
    if script_machine is not None and out["machine"] is not script_machine:
        out["machine_label"] = script_machine
    try:
        out["summary"] = bench.summary(record)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as error:
        out["summary"] = {"error": f"{type(error).__name__}: {error}"}
        print(f"{name}: no summary of the result ({out['summary']['error']})")
    os.makedirs(out_dir, exist_ok=True)
    paths = [harness.write_result(final, out)]
    if "groups" in out["summary"]:
        where = (", ".join(g["name"] for g in machine.get("gpus") or [])
                 if bench.on_gpu(gpu) else f"{machine.get('cpu')}, {machine.get('cores')} cores")
        picture = plot(out["summary"], final[:-len(".json")] + ".png",
                       f"{name}{' (quick)' if quick else ''}: {where}")
        if picture:
            print(f"plotted to {picture}")
            paths.append(picture)
    print(f"{name}: done in {seconds:.0f} s", flush=True)
    return "ok", paths


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Run a benchmark, or the headline comparisons, on this machine; write "
                    "<benchmark>_<machine>_<date>.json and a plot of ours against the peers.")
    parser.add_argument("name", nargs="?", help="a benchmark of --list, or 'headline'")
    parser.add_argument("--list", action="store_true", help="the benchmarks and their peers")
    parser.add_argument("--quick", action="store_true",
                        help="small sizes: a few minutes for the headline run on 2 cores")
    parser.add_argument("--out", default=harness.RESULTS,
                        help="folder of the results (default benchmarks/results)")
    parser.add_argument("--dry-run", action="store_true",
                        help="say what would run and which peers are missing; run nothing")
    parser.add_argument("--plot", metavar="JSON",
                        help="run nothing: draw the plot of this result file (the benchmark: "
                             "the name given, else the record's, else the file's name)")
    parser.add_argument("--png", help="with --plot: the picture's path (default: beside JSON)")
    parser.add_argument("--title", help="with --plot: the title (default: the machine, the date)")
    args = parser.parse_args(argv)
    if args.plot:
        try:
            picture = plot_result(args.plot, args.name, args.png, args.title)
        except (OSError, ValueError, KeyError, TypeError) as error:
            parser.error(f"--plot {args.plot}: {error}")
        if picture:
            print(f"plotted to {picture}")
        return 0 if picture else 1
    if args.list or not args.name:
        print(listing())
        return 0
    if args.name != "headline" and args.name not in BENCHMARKS:
        parser.error(f"unknown benchmark {args.name!r}: one of {', '.join(BENCHMARKS)}, "
                     "or headline")
    names = HEADLINE if args.name == "headline" else (args.name,)
    machine = harness.machine()
    gpu = has_gpu(machine)
    print(f"machine: {machine['cpu']}, {machine['cores']} cores"
          + "".join(f"; {g['name']}" for g in machine["gpus"]) + f"; load average "
          f"{machine['load_average']}; src digest {machine['src_digest']}", flush=True)
    status, written = {}, []
    for name in names:
        status[name], paths = run(name, args.quick, os.path.abspath(args.out), machine, gpu,
                                  args.dry_run)
        written += paths
    print("\n" + ", ".join(f"{name}: {s}" for name, s in status.items()))
    for path in written:
        print(f"  {path}")
    return 1 if "failed" in status.values() else 0
