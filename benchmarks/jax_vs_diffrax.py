"""hapsira_cowell.jax.cowell against diffrax Dopri8, each inside one jitted JAX program on the CPU.

    python benchmarks/jax_vs_diffrax.py [--n 100 1000] [--repeat 3]

The reference workload (LEO cloud, two-body + J2, one day, rtol 1e-11,
atol 1e-12). The program is the same for both: initial states in, a
propagation to one day, final positions and their radii out; only the
propagator differs (our kernel on XLA's buffers through the FFI, or
``jax.vmap`` of diffrax's ``diffeqsolve``). Wall clock of the jitted program,
best of ``--repeat``, compile excluded. Each peer runs in its own process
(``HAPSIRA_TARGET`` is fixed at import): hapsira cpu (1 core), hapsira
parallel (all cores), diffrax (XLA's CPU client, all cores), and the plain
numpy call of the cpu target for the cost of the JAX layer. Writes
``benchmarks/results/jax_vs_diffrax_cpu.json`` and prints a markdown table.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

WORKER = r"""
import json, sys, time
import numpy as np
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
sys.path.insert(0, {here!r})
import workload

peer, n, repeat, out = {peer!r}, {n}, {repeat}, {out!r}
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


r0j, v0j = jnp.asarray(r0), jnp.asarray(v0)
t = time.perf_counter()
jax.block_until_ready(program(r0j, v0j))
compile_s = time.perf_counter() - t
seconds, (final, radii, steps) = timed(lambda: program(r0j, v0j))
np.save(out, np.asarray(final))
report = dict(seconds=seconds, compile_s=compile_s, n_objects=n,
              mean_steps=float(np.mean(steps)), device=str(jax.devices()[0]))
if peer == "hapsira cpu":  # the same kernel called from numpy, outside JAX
    numpy_s, res = timed(lambda: cowell(workload.K, r0, v0, tofs, f=workload.two_body_j2))
    report["numpy_call_seconds"] = numpy_s
    report["numpy_call_bit_equal"] = bool(np.array_equal(res.rr[:, -1], np.asarray(final)))
print(json.dumps(report))
"""

PEERS = {"hapsira cpu": "cpu", "hapsira parallel": "parallel", "diffrax": "cpu"}


def run(peer, n, repeat, out):
    env = dict(os.environ, HAPSIRA_TARGET=PEERS[peer], HAPSIRA_CACHE="0", JAX_PLATFORMS="cpu")
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    script = WORKER.format(here=HERE, peer=peer, n=n, repeat=repeat, out=out)
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{peer} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main():
    from cpu_vs_scipy import machine

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default=os.path.join(HERE, "results", "jax_vs_diffrax_cpu.json"))
    args = parser.parse_args()

    import diffrax
    import jax
    import numba
    results = {"machine": machine(),
               "workload": "LEO cloud, two-body + J2, 1 day, rtol 1e-11, atol 1e-12, "
                           "inside one jax.jit program on JAX's CPU platform",
               "versions": {"numpy": np.__version__, "numba": numba.__version__,
                            "jax": jax.__version__, "diffrax": diffrax.__version__},
               # each peer's "load_average": the machine's 1-minute load before and
               # after its run (the machine is shared; above its core count, the
               # times are inflated)
               "runs": []}
    with tempfile.TemporaryDirectory() as scratch:
        for n in args.n:
            row = {"n_objects": n}
            finals = {}
            for peer in PEERS:
                path = os.path.join(scratch, f"{peer.replace(' ', '_')}.npy")
                before = os.getloadavg()[0]
                row[peer] = run(peer, n, args.repeat, path)
                row[peer]["load_average"] = [before, os.getloadavg()[0]]
                finals[peer] = np.load(path)
                print(peer, n, row[peer], flush=True)
            ours = finals["hapsira cpu"]
            for peer, final in finals.items():
                diff = np.linalg.norm(final - ours, axis=1) / np.linalg.norm(ours, axis=1)
                row[peer]["max_rel_pos_diff_vs_hapsira_cpu"] = float(diff.max())
            results["runs"].append(row)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as out:
        json.dump(results, out, indent=2)

    print(f"machine: {results['machine']['cpu']}, {results['machine']['cores']} cores")
    print("| N | peer | seconds | us / object-day | steps / object | vs diffrax | "
          "max rel. pos. diff vs hapsira cpu |")
    print("|---|---|---|---|---|---|---|")
    for row in results["runs"]:
        base = row["diffrax"]["seconds"]
        for peer in PEERS:
            r = row[peer]
            print(f"| {row['n_objects']} | {peer} | {r['seconds']:.3f} | "
                  f"{1e6 * r['seconds'] / row['n_objects']:.0f} | {r['mean_steps']:.0f} | "
                  f"{base / r['seconds']:.1f}x | {r['max_rel_pos_diff_vs_hapsira_cpu']:.1e} |")
        cpu = row["hapsira cpu"]
        print(f"| {row['n_objects']} | hapsira cpu, numpy call (no JAX) | "
              f"{cpu['numpy_call_seconds']:.3f} | "
              f"{1e6 * cpu['numpy_call_seconds'] / row['n_objects']:.0f} | | | "
              f"bit-equal: {cpu['numpy_call_bit_equal']} |")


if __name__ == "__main__":
    main()
