"""Where a whole `screen` call spends its host time (issue 32), in one process.

    HAPSIRA_TARGET=cuda python benchmarks/investigations/screen_host.py [--n 20000]
        [--days 7] [--out PATH]

The population of benchmarks/screening.py; a short screen compiles (or loads) the
kernels, then the full screen runs once for its phase times and once under cProfile
(top entries by own and by cumulative time). Written when the 7-day screen of 20,000
objects took 2.69 s on an H200, 0.2 s of it outside its three timed phases.
"""

import argparse
import cProfile
import io
import json
import os
import pstats
import sys
import time

os.environ.setdefault("HAPSIRA_TARGET", "cuda")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--days", type=float, default=7.0)
    parser.add_argument("--data", default=os.environ.get("HAPSIRA_TEST_DATA", "../shared/data"))
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)

    from screening import population

    from hapsira_cowell import conjunctions
    from hapsira_cowell.constants import K_EARTH

    r, v = population(args.n, args.data)
    span = (0.0, args.days * 86400.0)
    conjunctions.screen(K_EARTH, r[:200], v[:200], (0.0, 600.0), 200.0)
    stats = {}
    now = time.perf_counter()
    table = conjunctions.screen(K_EARTH, r, v, span, 5.0, stats=stats)
    report = {"n": args.n, "days": args.days, "total_s": time.perf_counter() - now,
              "approaches": len(table), **stats}
    profile = cProfile.Profile()
    profile.enable()
    conjunctions.screen(K_EARTH, r, v, span, 5.0)
    profile.disable()
    for key in ("tottime", "cumulative"):
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats(key).print_stats(30)
        report[f"profile_{key}"] = text.getvalue()
    print(json.dumps({k: x for k, x in report.items() if not k.startswith("profile")},
                     indent=1, default=str))
    print(report["profile_tottime"])
    print(report["profile_cumulative"])
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(report, fh, indent=1, default=str)


if __name__ == "__main__":
    main()
