"""hapsira_cowell.jax.cowell inside jax.jit on JAX's GPU platform, against diffrax in the same program.

    HAPSIRA_TARGET=cuda python benchmarks/gpu_jax.py [--n 100000 1000000] [--diffrax-n 100000]

The program of ``benchmarks/jax_vs_diffrax.py`` (initial states in, the
reference workload propagated for one day, final positions and their radii
out), jitted, on the GPU. Only the propagator differs: our cuda kernel
launched on XLA's stream through the FFI, or ``jax.vmap`` of diffrax's
``diffeqsolve`` (``Dopri8``, PID controller, same tolerances). Each peer runs
in its own process. For ours (peer "hapsira"), also: the compiled program's custom calls and
whether it holds any host transfer or Python callback (zero copies: inputs
and outputs stay in GPU memory), the device of the outputs, and whether the
final positions are bit for bit those of the numpy call ``cowell()`` on the
same target. Wall clock of the jitted program, best of ``--repeat``, compile
excluded. Writes JSON (default ``benchmarks/results/gpu_jax.json``).
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

WORKER = r"""
import json, re, sys, time
import numpy as np
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
sys.path.insert(0, {here!r})
import workload

peer, n, repeat, out, platform = {peer!r}, {n}, {repeat}, {out!r}, {platform!r}
r0, v0 = workload.leo_cloud(n, seed=0)
tofs = np.array([workload.DAY])

if peer == "diffrax":
    import diffrax
    rhs = workload.jax_rhs

    def solve(y0):
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(rhs), diffrax.Dopri8(), 0.0, workload.DAY, None, y0,
            stepsize_controller=diffrax.PIDController(rtol=workload.RTOL, atol=workload.ATOL),
            saveat=diffrax.SaveAt(ts=jnp.asarray(tofs)), max_steps=4096)
        return sol.ys[-1, :3], sol.stats["num_accepted_steps"]

    def propagate(r0, v0):
        return jax.vmap(solve)(jnp.concatenate([r0, v0], axis=1))
else:
    from hapsira_cowell import cowell
    from hapsira_cowell.jax import cowell as jax_cowell

    def propagate(r0, v0):
        res = jax_cowell(workload.K, r0, v0, tofs, workload.RTOL, workload.ATOL,
                         f=workload.two_body_j2)
        return res.rr[:, -1], res.nsteps


@jax.jit
def program(r0, v0):
    final, steps = propagate(r0, v0)
    return final, jnp.linalg.norm(final, axis=1), steps


def timed(run):
    best = None
    for _ in range(repeat):
        t = time.perf_counter()
        result = run()
        jax.block_until_ready(result)
        best = min(best or 1e99, time.perf_counter() - t)
    return best, result


gpu = jax.devices(platform)[0]
r0j, v0j = jax.device_put(r0, gpu), jax.device_put(v0, gpu)
t = time.perf_counter()
jax.block_until_ready(program(r0j, v0j))
compile_s = time.perf_counter() - t
seconds, (final, radii, steps) = timed(lambda: program(r0j, v0j))
np.save(out, np.asarray(final))
report = dict(seconds=seconds, compile_s=compile_s, n_objects=n,
              mean_steps=float(np.mean(steps)), device=str(gpu),
              output_devices=sorted(str(d) for d in final.devices()))
if peer == "hapsira":
    hlo = program.lower(r0j, v0j).compile().as_text()
    report["custom_call_targets"] = sorted(set(re.findall(r'custom_call_target="([^"]+)"', hlo)))
    report["host_transfers_or_callbacks"] = sorted(set(
        m.lower() for m in re.findall(
            r"(infeed|outfeed|send-done|recv-done|copy-start|S\(5\)|[a-z_]*callback[a-z_]*)", hlo)))
    numpy_s, res = timed(lambda: cowell(workload.K, r0, v0, tofs, f=workload.two_body_j2))
    report["numpy_call_seconds"] = numpy_s
    report["numpy_call_bit_equal"] = bool(np.array_equal(res.rr[:, -1], np.asarray(final)))
print(json.dumps(report))
"""

PEERS = ("hapsira", "diffrax")


def run(peer, n, repeat, out, timeout, platform="gpu"):
    env = dict(os.environ, HAPSIRA_TARGET="cuda" if platform == "gpu" else "cpu",
               HAPSIRA_CACHE="0", XLA_PYTHON_CLIENT_PREALLOCATE="false")
    script = WORKER.format(here=HERE, peer=peer, n=n, repeat=repeat, out=out, platform=platform)
    try:
        done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    if done.returncode != 0:
        return {"error": done.stderr.strip()[-3000:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--diffrax-n", type=int, nargs="*", default=[100_000],
                        help="the sizes at which diffrax runs too")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=240.0, help="seconds per process")
    parser.add_argument("--out", default=os.path.join(HERE, "results", "gpu_jax.json"))
    parser.add_argument("--platform", default="gpu",
                        help="gpu (HAPSIRA_TARGET=cuda); cpu only to try this script out")
    args = parser.parse_args()
    results = {"platform": args.platform,
               "workload": "LEO cloud, two-body + J2, 1 day, rtol 1e-11, atol 1e-12, "
                           "inside one jax.jit program", "runs": []}
    with tempfile.TemporaryDirectory() as scratch:
        for n in args.n:
            row, finals = {"n_objects": n}, {}
            for peer in PEERS:
                if peer == "diffrax" and n not in args.diffrax_n:
                    continue
                path = os.path.join(scratch, f"{peer.replace(' ', '_')}.npy")
                row[peer] = run(peer, n, args.repeat, path, args.timeout, args.platform)
                if os.path.exists(path):
                    finals[peer] = np.load(path)
                    os.remove(path)
                print(peer, n, json.dumps(row[peer]), flush=True)
            if "hapsira" in finals:
                ours = finals["hapsira"]
                for peer, final in finals.items():
                    diff = np.linalg.norm(final - ours, axis=1) / np.linalg.norm(ours, axis=1)
                    row[peer]["max_rel_pos_diff_vs_ours"] = float(diff.max())
            results["runs"].append(row)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as out:
        json.dump(results, out, indent=2)
    print("| N | peer | seconds | steps / object | diffrax / ours | max rel. pos. diff vs ours |")
    print("|---|---|---|---|---|---|")
    for row in results["runs"]:
        ours = row.get("hapsira", {}).get("seconds")
        for peer in PEERS:
            r = row.get(peer)
            if r is None:
                continue
            if "seconds" not in r:
                print(f"| {row['n_objects']} | {peer} | failed: {r['error'][-300:]} | | | |")
                continue
            ratio = f"{r['seconds'] / ours:.1f}" if ours and peer == "diffrax" else ""
            print(f"| {row['n_objects']} | {peer} | {r['seconds']:.4f} | {r['mean_steps']:.0f} | "
                  f"{ratio} | {r.get('max_rel_pos_diff_vs_ours', float('nan')):.1e} |")
        r = row.get("hapsira", {})
        if "numpy_call_seconds" in r:
            print(f"| {row['n_objects']} | hapsira, numpy call (no JAX) | "
                  f"{r['numpy_call_seconds']:.4f} | | | bit-equal: {r['numpy_call_bit_equal']} |")
            print(f"custom calls {r['custom_call_targets']}, host transfers/callbacks "
                  f"{r['host_transfers_or_callbacks']}, outputs on {r['output_devices']}")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
