"""One GPU, one command: the reference workload, the ensembles and JAX, each beside its GPU peers.

    python benchmarks/gpu.py --name h100 [--stages reference,ensembles,jax] [--sizes 1e6]

Runs, one after the other, each in its own process (the GPU is not shared
between them):

* ``reference``: ``reference.py --platform cuda`` (two-body + J2 and the drag
  + re-entry variant, against N, beside diffrax on the same GPU; ``--peers``
  adds ``parallel,cpu``) -> ``results/<name>_core.json``;
* ``ensembles``: ``ensembles.py --platform cuda`` (Van der Pol and
  Lotka-Volterra: ours, CuBIE, diffrax) -> ``results/<name>_ensembles.json``;
* ``jax``: ``jax_vs_diffrax.py --platform cuda`` (inside ``jax.jit``, against
  diffrax in the same program) -> ``results/<name>_jax.json``.

A stage that fails is reported and the next one still runs; the exit status
is the number of stages that failed. ``ci/gpu/core.sh`` runs the same scripts
as its stages ``bench``, ``ensembles`` and ``jax`` (with a deadline per stage).
"""

import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def commands(args):
    py = sys.executable
    return {
        "reference": [py, os.path.join(HERE, "reference.py"), "--platform", "cuda",
                      "--name", f"{args.name}_core", "--sizes", args.sizes,
                      "--variants", args.variants, "--peers", args.peers,
                      "--n-ref", str(args.n_ref), "--repeat", str(args.repeat)],
        "ensembles": [py, os.path.join(HERE, "ensembles.py"), "--platform", "cuda",
                      "--n", str(int(float(args.ens_n))), "--repeat", str(args.repeat),
                      "--n-ref", str(args.n_ref), "--out", f"{args.name}_ensembles"],
        "jax": [py, os.path.join(HERE, "jax_vs_diffrax.py"), "--platform", "cuda",
                "--n", *[str(int(float(n))) for n in args.jax_n.split(",")],
                "--diffrax-n", *[str(int(float(n))) for n in args.jax_diffrax_n.split(",")],
                "--repeat", str(args.repeat), "--out", f"{args.name}_jax"],
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", default="gpu", help="prefix of the result files (e.g. h100)")
    parser.add_argument("--stages", default="reference,ensembles,jax")
    parser.add_argument("--sizes", default="1e6", help="reference: N, comma-separated")
    parser.add_argument("--variants", default="j2,drag", help="reference: j2, drag")
    parser.add_argument("--peers", default="diffrax", help="reference: diffrax,parallel,cpu")
    parser.add_argument("--n-ref", type=int, default=20, help="objects checked against scipy")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--ens-n", default="1e6", help="ensembles: N")
    parser.add_argument("--jax-n", default="1e5,1e6", help="jax: N, comma-separated")
    parser.add_argument("--jax-diffrax-n", default="1e5", help="jax: the N where diffrax runs")
    parser.add_argument("--dry-run", action="store_true", help="print the commands only")
    args = parser.parse_args()
    every = commands(args)
    failed = 0
    for stage in args.stages.split(","):
        command = every[stage]
        print(f"== {stage}: {' '.join(command)}", flush=True)
        if args.dry_run:
            continue
        start = time.perf_counter()
        rc = subprocess.run(command).returncode
        failed += rc != 0
        print(f"== {stage}: exit {rc} after {time.perf_counter() - start:.0f} s", flush=True)
    sys.exit(failed)


if __name__ == "__main__":
    main()
