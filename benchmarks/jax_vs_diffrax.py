"""hapsira_cowell.propagation.jax.cowell inside one jax.jit program against diffrax in the same
program, on the CPU or one GPU.

    python benchmarks/jax_vs_diffrax.py [--platform cpu] [--n 100 1000] [--repeat 3]
    python benchmarks/jax_vs_diffrax.py --platform cuda [--n 100000 1000000] [--diffrax-n 100000]

The reference workload (LEO cloud, two-body + J2, one day, rtol 1e-11,
atol 1e-12). The program is the same for every peer: initial states in, a
propagation to one day, final positions and their radii out, jitted; only
the propagator differs (our kernel on XLA's buffers through the FFI, or
``jax.vmap`` of diffrax's ``diffeqsolve``, ``Dopri8``, PID controller, same
tolerances). Wall clock of the jitted program, best of ``--repeat``, compile
excluded and reported apart. Each peer runs in its own process
(``HAPSIRA_TARGET`` is fixed at import):

* ``--platform cpu``: hapsira cpu (1 core), hapsira parallel (all cores),
  diffrax (XLA's CPU client, all cores); JAX_PLATFORMS=cpu. Writes
  ``benchmarks/results/jax_vs_diffrax_cpu.json``.
* ``--platform cuda``: hapsira (the cuda kernel launched on XLA's stream) and
  diffrax, on JAX's GPU. Writes ``benchmarks/results/gpu_jax.json``.

For ours, also: the plain numpy call ``cowell()`` on the same target (the
cost of the JAX layer) and whether its final positions are bit for bit those
of the JAX program, the compiled program's custom calls and whether it holds
any host transfer or Python callback (on a GPU: zero copies, inputs and
outputs stay in GPU memory), and the device of the outputs. Every peer's
largest relative position difference from ours. Needs the ``bench`` extra
(jax, diffrax; on a GPU jax[cuda]). Prints a markdown table.
"""

import argparse
import json
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import harness  # noqa: E402

WORKER = r"""
import json, re, sys, time
import numpy as np
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
sys.path.insert(0, {here!r})
import workloads as workload

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
    from hapsira_cowell.propagation.jax import cowell as jax_cowell

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


gpu = jax.devices(platform)[0]  # (on the cpu platform: the CPU)
r0j, v0j = jax.device_put(r0, gpu), jax.device_put(v0, gpu)
t = time.perf_counter()
jax.block_until_ready(program(r0j, v0j))
compile_s = time.perf_counter() - t
seconds, (final, radii, steps) = timed(lambda: program(r0j, v0j))
np.save(out, np.asarray(final))
report = dict(seconds=seconds, compile_s=compile_s, n_objects=n,
              mean_steps=float(np.mean(steps)), device=str(gpu),
              output_devices=sorted(str(d) for d in final.devices()))
if peer.startswith("hapsira"):
    hlo = program.lower(r0j, v0j).compile().as_text()
    report["custom_call_targets"] = sorted(set(re.findall(r'custom_call_target="([^"]+)"', hlo)))
    report["host_transfers_or_callbacks"] = sorted(set(
        m.lower() for m in re.findall(
            r"(infeed|outfeed|send-done|recv-done|copy-start|S\(5\)|[a-z_]*callback[a-z_]*)", hlo)))
if peer in ("hapsira", "hapsira cpu"):  # the same kernel called from numpy, outside JAX
    numpy_s, res = timed(lambda: cowell(workload.K, r0, v0, tofs, f=workload.two_body_j2))
    report["numpy_call_seconds"] = numpy_s
    report["numpy_call_bit_equal"] = bool(np.array_equal(res.rr[:, -1], np.asarray(final)))
print(json.dumps(report))
"""

#: peer -> HAPSIRA_TARGET, per platform; the first is "ours", the reference of the differences
PEERS = {"cpu": {"hapsira cpu": "cpu", "hapsira parallel": "parallel", "diffrax": "cpu"},
         "cuda": {"hapsira": "cuda", "diffrax": "cpu"}}


def run(peer, n, repeat, out, timeout, platform):
    import importlib.util
    if peer == "diffrax" and importlib.util.find_spec("diffrax") is None:
        return {"missing": "diffrax not installed (pip install -e .[bench])"}
    env = harness.child_env(PEERS[platform][peer], XLA_PYTHON_CLIENT_PREALLOCATE="false")
    if platform == "cpu":
        env["JAX_PLATFORMS"] = "cpu"
    script = WORKER.format(here=HERE, peer=peer, n=n, repeat=repeat, out=out,
                           platform="gpu" if platform == "cuda" else "cpu")
    result = harness.run_child(script, env=env, timeout=timeout, check=False)
    result.pop("process_s", None)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    harness.add_platform(parser, "cpu", choices=("cpu", "cuda"),
                         help="cpu: JAX's CPU client, hapsira cpu and parallel; cuda: one GPU")
    parser.add_argument("--n", type=int, nargs="+", default=None,
                        help="objects (default 100 1000 on cpu, 100000 1000000 on cuda)")
    parser.add_argument("--diffrax-n", type=int, nargs="*", default=None,
                        help="the sizes at which diffrax runs too (default: all on cpu, "
                             "100000 on cuda)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=None,
                        help="seconds per process (default: none on cpu, 240 on cuda)")
    parser.add_argument("--out", default=None,
                        help="result name or path (default jax_vs_diffrax_cpu / gpu_jax)")
    args = parser.parse_args()
    cuda = args.platform == "cuda"
    if args.timeout is None and cuda:
        args.timeout = 240.0
    args.n = args.n or ([100_000, 1_000_000] if cuda else [100, 1000])
    if args.diffrax_n is None:
        args.diffrax_n = [100_000] if cuda else args.n
    peers = PEERS[args.platform]
    ours_name = next(iter(peers))
    results = {"platform": args.platform,
               "workload": "LEO cloud, two-body + J2, 1 day, rtol 1e-11, atol 1e-12, "
                           f"inside one jax.jit program on JAX's {'GPU' if cuda else 'CPU'} platform",
               # each peer's "load_average": the machine's 1-minute load before and
               # after its run (the machine is shared; above its core count, the
               # times are inflated)
               "runs": []}
    with tempfile.TemporaryDirectory() as scratch:
        for n in args.n:
            row, finals = {"n_objects": n}, {}
            for peer in peers:
                if peer == "diffrax" and n not in args.diffrax_n:
                    continue
                path = os.path.join(scratch, f"{peer.replace(' ', '_')}.npy")
                before = os.getloadavg()[0]
                row[peer] = run(peer, n, args.repeat, path, args.timeout, args.platform)
                row[peer]["load_average"] = [before, os.getloadavg()[0]]
                if os.path.exists(path):
                    finals[peer] = np.load(path)
                    os.remove(path)
                print(peer, n, json.dumps(row[peer]), flush=True)
            if ours_name in finals:
                ours = finals[ours_name]
                for peer, final in finals.items():
                    diff = np.linalg.norm(final - ours, axis=1) / np.linalg.norm(ours, axis=1)
                    row[peer]["max_rel_pos_diff_vs_ours"] = float(diff.max())
            results["runs"].append(row)
    harness.write_result(args.out or ("gpu_jax" if cuda else "jax_vs_diffrax_cpu"), results,
                         indent=2)
    print("| N | peer | seconds | us / object-day | steps / object | seconds / diffrax's | "
          f"max rel. pos. diff vs {ours_name} |")
    print("|---|---|---|---|---|---|---|")
    for row in results["runs"]:
        base = row.get("diffrax", {}).get("seconds")
        for peer in peers:
            r = row.get(peer)
            if r is None:
                continue
            if "seconds" not in r:
                print(f"| {row['n_objects']} | {peer} | not run: "
                      f"{(r.get('error') or r.get('missing'))[-300:]} | | | | |")
                continue
            ratio = f"{r['seconds'] / base:.3g}" if base else ""
            print(f"| {row['n_objects']} | {peer} | {r['seconds']:.4f} | "
                  f"{1e6 * r['seconds'] / row['n_objects']:.0f} | {r['mean_steps']:.0f} | "
                  f"{ratio} | {r.get('max_rel_pos_diff_vs_ours', float('nan')):.1e} |")
        r = row.get(ours_name, {})
        if "numpy_call_seconds" in r:
            print(f"| {row['n_objects']} | {ours_name}, numpy call (no JAX) | "
                  f"{r['numpy_call_seconds']:.4f} | "
                  f"{1e6 * r['numpy_call_seconds'] / row['n_objects']:.0f} | | | "
                  f"bit-equal: {r['numpy_call_bit_equal']} |")
            print(f"custom calls {r['custom_call_targets']}, host transfers/callbacks "
                  f"{r['host_transfers_or_callbacks']}, outputs on {r['output_devices']}")


if __name__ == "__main__":
    main()
