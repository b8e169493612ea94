"""``hapsira-cowell``: the command line, an argparse layer over the library (docs/cli.md).

``hapsira-cowell propagate [CATALOG] --tof 1d --every 10min --perturbations j2,drag``
(without CATALOG: the Iridium 33 debris shipped in the package); ``hapsira-cowell screen``;
``hapsira-cowell pc CDM...`` (the probability of collision of CDMs, ranked);
``hapsira-cowell demo``; ``hapsira-cowell prepare`` (the kernels of the commands' default
options compiled ahead, into the disk cache). The work is done by the other modules of
`hapsira_cowell.cli` (`catalog`, `models`, `batch`, `writers`, `screening`, `pc`, `demo`,
`prepare`), which Python users import too. The target is fixed when ``hapsira_core`` is first
imported, so this module imports none of them at module level: `main` checks
the environment and sets ``HAPSIRA_TARGET`` first (or, when the solver was
already imported on another target, runs the command in a child process).
"""

import argparse
import importlib
import logging
import os
import re
import sys
import time

__all__ = ["build_parser", "main"]

PROG = "hapsira-cowell"


def _lib(module):
    """A module of the command line (or, for constants, outputs.oem and propagation.dask,
    of the library), imported when first needed: importing the solver fixes the target."""
    library = ("constants", "outputs.oem", "propagation.dask")
    package = "hapsira_cowell" if module in library else "hapsira_cowell.cli"
    return importlib.import_module(f"{package}.{module}")


class _Parser(argparse.ArgumentParser):
    """argparse with errors on one line (no usage block) and exit status 2."""

    def error(self, message):
        raise _lib("inputs").UsageError(message)


def build_parser():
    from .. import __version__

    parser = _Parser(prog=PROG, description="Cowell orbit propagation (DOP853) of debris "
                     "catalogs on cpu, parallel cpu or CUDA GPUs.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="{propagate,screen,pc,demo,cache,prepare}",
                                     parser_class=_Parser)
    commands.required = True
    inputs = _lib("inputs")
    target_help = ("compilation target for this run: cpu, parallel, cuda, or another in "
                   "hapsira_core.settings.TARGETS (default: $HAPSIRA_TARGET, else cpu)")
    names = ", ".join(_lib("models").PERTURBATIONS)

    p = commands.add_parser("propagate", help="propagate a TLE catalog or a CSV of states",
                            description="Propagate every object of CATALOG (a TLE file or a "
                            "CSV with columns name,x,y,z,vx,vy,vz in km and km/s; default: "
                            "the Iridium 33 debris catalog shipped in the package) and write "
                            "the states at regular times. See docs/cli.md.")
    p.add_argument("catalog", metavar="CATALOG", nargs="?", default=None,
                   help="TLE file or CSV of state vectors (default: the embedded Iridium 33 "
                   "debris catalog, 119 objects)")
    p.add_argument("--max-input-mb", type=inputs.positive_float,
                   default=_lib("catalog").MAX_INPUT_MB, metavar="MB",
                   help="refuse a catalog file larger than this, MB (default "
                   f"{_lib('catalog').MAX_INPUT_MB:g}); only regular files are read")
    p.add_argument("--tof", default="1d", help="time of flight, e.g. 1d, 6h, 90min, 30s, 1.5d "
                   "(default 1d); negative, e.g. -1d, propagates backward")
    p.add_argument("--every", default="10min", help="output interval (default 10min); the "
                   "last output is at --tof")
    p.add_argument("--perturbations", default="j2", help=f"comma-separated subset of {names}, "
                   "or none (default j2); two-body is always included")
    p.add_argument("--out", default=None, help="output file (default result.npz, or "
                   "result.csv / result.parquet / result.zarr with --format; a folder for "
                   "oem, default result-oem)")
    p.add_argument("--format", default=None, help="npz, csv, parquet, zarr (a chunked store "
                   "for catalogs larger than memory) or oem (CCSDS OEM, one file per object; "
                   "default: from the suffix of --out)")
    p.add_argument("--force", action="store_true", help="with --format oem, write into "
                   "a folder that is not empty, replacing its .oem files (without it such a "
                   "folder is refused, so that two runs' files never mix)")
    p.add_argument("--epoch", default=None, help="ISO UTC time: where SGP4 takes a TLE "
                   "catalog (default its latest epoch); the epoch of a CSV catalog's states")
    p.add_argument("--frame", default=None, help="OEM REF_FRAME of a CSV catalog's states, "
                   "e.g. GCRF or EME2000 (needed for --format oem; TLE states are TEME)")
    p.add_argument("--target", default=None, help=target_help)
    p.add_argument("--chunk", type=inputs.positive_int, default=10_000,
                   help="objects per solver call (default 10000)")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS|local",
                   help="propagate the chunks on a Dask cluster: its scheduler's address "
                   "(tcp://host:8786; workers keep their own HAPSIRA_TARGET), or 'local' for "
                   "worker processes on this machine (needs the dask extra; docs/dask.md)")
    p.add_argument("--area-to-mass", type=inputs.positive_float, default=0.01,
                   help="area-to-mass ratio for drag, m^2/kg (default 0.01); a CSV catalog's "
                   "area_to_mass column wins where given")
    p.add_argument("--drag-coefficient", type=inputs.positive_float, default=2.2,
                   help="drag coefficient C_D (default 2.2); a CSV catalog's c_d column wins")
    p.add_argument("--reentry-altitude", type=inputs.non_negative_float, default=100.0,
                   help="with drag, stop an object descending through this altitude, km "
                   "(default 100)")
    p.add_argument("--plot", default=None, metavar="PNG",
                   help="also write an altitude-vs-time plot (needs matplotlib)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")

    s = commands.add_parser("screen", help="every close approach of a catalog's objects",
                            description="Screen every pair of CATALOG's objects (TLE, OMM "
                            "or CSV of states) for approaches below --threshold "
                            "over --days, with two-body + J2 (hapsira_cowell.conjunctions."
                            "screen), and write them as CSV. See docs/screening.md.")
    s.add_argument("catalog", metavar="CATALOG", nargs="?", default=None,
                   help="TLE file, OMM file (KVN or XML; pip install 'hapsira-cowell[cdm]') "
                   "or CSV of state vectors (default: the embedded Iridium 33 debris "
                   "catalog)")
    s.add_argument("--days", type=inputs.positive_float, default=1.0,
                   help="screening span after the epoch, days (default 1)")
    s.add_argument("--threshold", default="5km", help="report approaches closer than this, "
                   "e.g. 5km or 500m (default 5km)")
    s.add_argument("--epoch", default=None, help="ISO UTC time where SGP4 takes a TLE "
                   "catalog (default its latest epoch); the epoch of a CSV catalog's states")
    s.add_argument("--dt", type=inputs.positive_float, default=None,
                   help="broad-phase sampling interval, s (default: from the threshold)")
    s.add_argument("--out", default="conjunctions.csv", help="CSV output (default "
                   "conjunctions.csv)")
    s.add_argument("--plot", default=None, metavar="PNG",
                   help="also write a histogram of the miss distances (with --pc, beside it "
                   "each approach's probability against its miss distance, log scale)")
    s.add_argument("--cdm", default=None, metavar="DIR",
                   help="also write one CCSDS Conjunction Data Message per approach into "
                   "DIR (made if missing; needs --sigma or an OMM file's covariances, "
                   "and pip install 'hapsira-cowell[cdm]')")
    s.add_argument("--sigma", default=None, metavar="R,T,N[,RDOT,TDOT,NDOT]",
                   help="each object's standard deviations at the epoch along its radial, "
                   "transverse and normal axes, m (and m/s; velocity 0 if left out): the "
                   "covariance a CDM carries and --pc uses, propagated to the TCA "
                   "(COVARIANCE_METHOD = DEFAULT); without it, an OMM file's own "
                   "covariances, carried to the epoch (CALCULATED)")
    s.add_argument("--pc", action="store_true",
                   help="also compute each approach's probability of collision from --sigma's "
                   "covariance (or an OMM file's) and --hbr (a pc column in the CSV, "
                   "COLLISION_PROBABILITY in the CDMs, the summary ranked by it)")
    s.add_argument("--pc-method", choices=("foster", "chan", "max", "monte_carlo",
                                           "monte_carlo_epoch"),
                   default="foster",
                   help="foster (2D integral, default), chan (Chan's series), max (the "
                   "largest Pc over the covariance's size; not written to CDMs), "
                   "monte_carlo (samples of the relative state at the TCA, with a 95%% "
                   "interval) or monte_carlo_epoch (clones drawn at the epoch and "
                   "propagated, for slow encounters; with a 95%% interval)")
    s.add_argument("--pc-samples", default=None, metavar="N",
                   help="with --pc-method monte_carlo or monte_carlo_epoch, samples per "
                   "approach (default 1000000; 10000 clone pairs for monte_carlo_epoch)")
    s.add_argument("--pc-seed", default=None, metavar="SEED",
                   help="with --pc-method monte_carlo or monte_carlo_epoch, the random "
                   "numbers' seed, an integer "
                   ">= 0 (default: a fresh one, printed in the summary so that the run can "
                   "be repeated)")
    s.add_argument("--hbr", default=None, metavar="DISTANCE",
                   help="combined hard-body radius of every pair, for --pc (default 20m: "
                   "the radius of NASA CARA's Pc2D_Foster validation cases)")
    s.add_argument("--hbr-shape", choices=("circle", "square", "square_equal_area"),
                   default="circle", help="the hard-body region: circle (radius --hbr, "
                   "default), square (side 2 x --hbr) or square_equal_area (the circle's "
                   "area), as NASA CARA's Pc2D_Foster; squares with the foster method only")
    s.add_argument("--pc-above", default=None, metavar="PC",
                   help="with --pc, keep only approaches whose probability is at least "
                   "this (e.g. 1e-7) in the CSV and CDMs")
    s.add_argument("--cdm-below", default=None, metavar="DISTANCE",
                   help="write CDMs only for approaches closer than this, e.g. 1km "
                   "(default: every approach below --threshold)")
    s.add_argument("--cdm-format", choices=("kvn", "xml"), default="kvn",
                   help="CDM encoding: kvn (key = value text, .cdm) or xml (default kvn)")
    s.add_argument("--frame", choices=("TEME", "GCRF", "EME2000"), default=None,
                   help="the frame of a CSV catalog's states, for --cdm (a TLE catalog's "
                   "are TEME); TEME states are written in GCRF")
    s.add_argument("--originator", default="HAPSIRA-COWELL",
                   help="the CDMs' ORIGINATOR (default HAPSIRA-COWELL)")
    s.add_argument("--max-input-mb", type=inputs.positive_float,
                   default=_lib("catalog").MAX_INPUT_MB, metavar="MB",
                   help="refuse a catalog file larger than this, MB")
    s.add_argument("--target", default=None, help=target_help)

    q = commands.add_parser("pc", help="the probability of collision of CDMs, ranked",
                            description="Read CCSDS Conjunction Data Messages (KVN or XML; "
                            "files, or folders of .cdm, .kvn, .xml, .txt files) and print "
                            "each approach's probability of collision from the states and "
                            "covariances at the TCA they give, highest first, beside the "
                            "file's own (hapsira_cowell.conjunctions.probability; needs "
                            "pip install 'hapsira-cowell[cdm]'). See docs/cli.md.")
    q.add_argument("cdms", metavar="CDM", nargs="+", help="CDM files or folders of them")
    q.add_argument("--hbr", default=None, metavar="DISTANCE",
                   help="combined hard-body radius of every CDM, e.g. 20m (default: each "
                   "CDM's own, a comment 'HBR = 20 [m]' as NASA CARA's CDMs carry; a CDM "
                   "without one needs --hbr)")
    q.add_argument("--hbr-shape", choices=("circle", "square", "square_equal_area"),
                   default="circle", help="the hard-body region: circle (radius --hbr, "
                   "default), square (side 2 x --hbr) or square_equal_area (the circle's "
                   "area), as NASA CARA's Pc2D_Foster; squares with the foster method only")
    q.add_argument("--method", choices=("foster", "chan", "max", "monte_carlo"),
                   default="foster", help="foster (2D integral, default), chan (Chan's "
                   "series), max (the largest Pc over the covariance's size) or monte_carlo "
                   "(samples of the relative state at the TCA, with a 95%% interval)")
    q.add_argument("--samples", default=None, metavar="N",
                   help="with --method monte_carlo, samples per CDM (default 1000000)")
    q.add_argument("--seed", default=None, metavar="SEED",
                   help="with --method monte_carlo, the random numbers' seed, an integer >= 0 "
                   "(default: a fresh one, printed so that the run can be repeated)")
    q.add_argument("--out", default=None, metavar="CSV",
                   help="also write the ranked table as CSV (every CDM; the printed table "
                   "shows the first 20)")
    q.add_argument("--target", default=None, help=target_help)

    d = commands.add_parser("demo", help="propagate a synthetic debris cloud and plot it",
                            description="Propagate a synthetic LEO debris cloud (made in "
                            "code, a few fragments low enough to re-enter) for 1 day with "
                            "J2 and drag, print the summary and plot altitudes and ground "
                            "tracks.")
    d.add_argument("--out", default="demo.png", help="altitude plot (default demo.png); the "
                   "ground tracks go to <stem>-tracks.png beside it")
    d.add_argument("--n", type=inputs.positive_int, default=500, help="objects (default 500)")
    d.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    d.add_argument("--target", default=None, help=target_help)
    d.add_argument("--no-progress", action="store_true", help="no progress bar")

    c = commands.add_parser("cache", help="show or clear the kernel cache", description="Kernels "
                            "are cached under $HAPSIRA_CACHE_DIR (default ~/.cache/hapsira-"
                            "cowell); 'info' says where and how much, 'clear' empties it.")
    c.add_argument("action", choices=("info", "clear"))

    r = commands.add_parser("prepare", help="compile the kernels of the commands' default "
                            "options ahead, into the kernel cache", description="Compile "
                            "every kernel of 'screen' and 'propagate' with their default "
                            "options (two-body + J2) for the target into the kernel cache "
                            "($HAPSIRA_CACHE_DIR), side by side on this machine's cores, so "
                            "that their first runs load them instead of compiling; run it once "
                            "after installing. Kernels already cached are kept. See "
                            "docs/cli.md.")
    r.add_argument("--target", default=None, help=target_help)
    return parser


_SIGNED = re.compile(r"^-\.?\d")  # '-1d', '-.5h': a value, not an option


_SIGNED_OPTIONS = ("--tof", "--every", "--threshold", "--cdm-below", "--hbr", "--pc-above",
                   "--pc-seed", "--seed", "--pc-samples", "--samples")


def _join_negative_values(argv):
    """``--tof -1d`` -> ``--tof=-1d``: argparse takes '-1d' for an option (it only
    knows plain negative numbers) and would say 'expected one argument' (for
    ``--every -10min``, ``--threshold -1km``: the checks say they must be positive)."""
    out = []
    for item in argv:
        if out and out[-1] in _SIGNED_OPTIONS and _SIGNED.match(item):
            out[-1] = f"{out[-1]}={item}"
        else:
            out.append(item)
    return out


def _validate(args):
    inputs, writers = _lib("inputs"), _lib("writers")
    UsageError = inputs.UsageError
    if args.command == "propagate":
        args.tof = inputs.parse_duration(args.tof, "--tof", allow_negative=True)
        args.every = inputs.parse_duration(args.every, "--every")
        args.perturbations = _lib("models").parse_perturbations(args.perturbations)
        args.out, args.format = writers.check_output(args.out, args.format, args.force)
        if args.frame is not None:
            try:
                _lib("outputs.oem").header_value(args.frame, "--frame")
            except ValueError as error:
                raise UsageError(str(error)) from None
        writers.check_plot_output(args.plot, "--plot")
        if args.catalog is not None:  # a regular file, not too large, before reading it
            _lib("catalog").check_file(args.catalog, args.max_input_mb)
        if args.scheduler is not None:
            try:
                import dask  # noqa: F401
                import distributed  # noqa: F401
            except ImportError:
                raise UsageError("--scheduler needs dask and distributed, which are not "
                                 "installed (pip install 'hapsira-cowell[dask]')") from None
    elif args.command == "screen":
        screening = _lib("screening")
        args.threshold = screening.parse_distance(args.threshold)
        screening.check_output(args.out)
        writers.check_plot_output(args.plot, "--plot")
        if args.catalog is not None:
            _lib("catalog").check_file(args.catalog, args.max_input_mb)
        # an OMM file brings its covariances: --pc and --cdm need no --sigma
        args.omm = (args.catalog is not None
                    and _lib("catalog").file_kind(args.catalog) == "omm")
        screening.check_cdm_options(args)
    elif args.command == "pc":
        screening = _lib("screening")
        if args.hbr is not None:
            args.hbr = screening.parse_distance(args.hbr, "--hbr")
        if args.hbr_shape != "circle" and args.method != "foster":
            raise UsageError(f"--hbr-shape {args.hbr_shape}: integrated by --method foster "
                             f"only, got --method {args.method}")
        if args.method != "monte_carlo":
            for flag, value in (("--samples", args.samples), ("--seed", args.seed)):
                if value is not None:
                    raise UsageError(f"{flag}: only used with --method monte_carlo, got "
                                     f"--method {args.method}")
        else:
            from ..propagation.monte_carlo import SAMPLES

            args.samples = (SAMPLES if args.samples is None
                            else screening.parse_count(args.samples, "--samples"))
            args.seed = (screening.fresh_seed() if args.seed is None
                         else screening.parse_seed(args.seed, "--seed"))
        screening.check_output(args.out)
        args.paths = _lib("pc").cdm_paths(args.cdms)
    elif args.command == "demo":
        writers.check_plot_output(args.out, "--out")


# Bytes per output time besides the states: its time of flight and its UTC text
# (csv, parquet, and the OEM writer's text and bytes; about 200 B).
_BYTES_PER_TIME = {}
_BYTES_PER_TIME_DEFAULT = 250
# The OEM writer formats the numbers of OemWriter.BLOCK_STATES (2^16) states at once:
# about 1.1 kB each of temporaries and text at the peak.
_FIXED_BYTES = {"oem": (1 << 16) * 1100}


def output_memory(n_objects, n_times, chunk, fmt, plot):
    """Bytes one run holds in memory for its outputs: a chunk's states (objects x
    output times x 6 columns x 8 bytes) twice (the solver's arrays and the
    writer's copy), per output time its time and text, and with ``plot`` every
    object's positions."""
    rows = min(chunk, max(n_objects, 1))
    needed = 2 * rows * n_times * 6 * 8
    needed += n_times * (8 + _BYTES_PER_TIME.get(fmt, _BYTES_PER_TIME_DEFAULT))
    needed += _FIXED_BYTES.get(fmt, 0)
    if plot:
        needed += n_objects * n_times * 3 * 8
    return needed


def _check_output_memory(args, n_objects):
    """`UsageError` before anything is allocated when the outputs of ``--tof`` /
    ``--every`` would not fit the memory limit of `hapsira_core.memory`
    (``HAPSIRA_MEMORY_LIMIT``, else the memory available now)."""
    inputs = _lib("inputs")
    memory = importlib.import_module("hapsira_core.memory")
    n_times = inputs.output_count(args.tof, args.every)
    needed = output_memory(n_objects, n_times, args.chunk, args.format, args.plot)
    allowed, source = memory.limit()
    if needed <= allowed:
        return
    rows = min(args.chunk, max(n_objects, 1))
    ways = "a larger --every, a shorter --tof" + (", a smaller --chunk" if rows > 1 else "")
    ways += ", no --plot" if args.plot else ""
    raise inputs.UsageError(
        f"--every {inputs.format_duration(args.every)} over --tof "
        f"{inputs.format_duration(args.tof)}: {n_times:,} output times x {rows:,} objects per "
        f"chunk" + (f" (and --plot: x {n_objects:,} objects)" if args.plot else "")
        + f" need about {memory.format_bytes(needed)} of memory, more than the "
        f"{memory.format_bytes(allowed)} allowed ({source}); use {ways}, or set "
        f"{memory.ENV} (e.g. 64GB or off)")


def _open_client(scheduler):
    """The Dask client of ``--scheduler`` (`hapsira_cowell.propagation.dask.open_client`)."""
    try:
        return _lib("propagation.dask").open_client(scheduler)
    except (OSError, ImportError, ValueError) as error:  # no scheduler there, no dask-cuda
        raise _lib("inputs").UsageError(f"--scheduler {scheduler}: {error}") from None


def _propagate_command(args, started):
    catalog_module, writers, batch = _lib("catalog"), _lib("writers"), _lib("batch")
    catalog = catalog_module.read_catalog(args.catalog, args.epoch, args.max_input_mb)
    _check_output_memory(args, len(catalog))
    tofs = _lib("inputs").make_tofs(args.tof, args.every)
    try:
        sink, write = writers.open_writer(args.out, args.format, catalog, tofs,
                                          args.perturbations, frame=args.frame,
                                          chunk=args.chunk, overwrite=args.force)
    except OSError as error:  # e.g. the disk filled since check_output
        raise _lib("inputs").UsageError(f"--out {args.out!r}: cannot write it: "
                                        f"{error.strerror or error}") from None
    client = None
    try:
        if args.scheduler is not None:
            client = _open_client(args.scheduler)
        run = batch.propagate(catalog, tofs, args.perturbations, c_d=args.drag_coefficient,
                              area_to_mass=args.area_to_mass, chunk=args.chunk,
                              reentry_altitude=args.reentry_altitude, writer=write,
                              keep_states=args.plot is not None, progress=not args.no_progress,
                              client=client)
        sink.close()
    except BaseException:
        sink.abort()
        raise
    finally:
        if client is not None:
            _lib("propagation.dask").close_client(client)
    if args.plot:
        from .plots import altitude_vs_time
        model = " + ".join(args.perturbations) or "two-body"
        label = os.path.basename(args.catalog or str(catalog_module.DEFAULT_CATALOG))
        altitude_vs_time(run, tofs, _lib("constants").R_EARTH, args.plot,
                         reentry_altitude=args.reentry_altitude, title=f"{label}: {model}")
    for line in batch.summary_lines(run, catalog, args.tof, time.perf_counter() - started):
        print(line)
    what = args.format
    if args.format == "oem":
        what += f", {len(sink.written)} files" + (
            f"; {len(sink.skipped)} objects without a state got none" if sink.skipped else "")
    print(f"wrote {args.out} ({what})" + (f" and {args.plot}" if args.plot else ""))
    return 0


def _screen_command(args, started):
    screening = _lib("screening")
    catalog = _lib("catalog").read_catalog(args.catalog, args.epoch, args.max_input_mb)
    if args.cdm is not None:
        screening.check_cdm_catalog(args, catalog)
    screening.omm_covariances(args, catalog)
    table, stats = screening.run_screen(catalog, args.days, args.threshold, args.dt)
    enc = pc = None
    if args.pc:
        enc, pc = screening.probabilities(args, catalog, table, stats)
        table, enc, pc = screening.pc_filter(args, table, enc, pc, stats)
    screening.write_csv(args.out, table, catalog.names, catalog.epoch, pc)
    if args.plot:
        screening.miss_histogram(args.plot, table, args.threshold, pc=pc,
                                 pc_above=args.pc_above)
    written = None
    if args.cdm is not None:
        written = screening.write_cdm_files(args, catalog, table, stats, enc, pc)
    for line in screening.describe(table, stats, time.perf_counter() - started,
                                   catalog, pc):
        print(line)
    print(f"wrote {args.out}" + (f" and {args.plot}" if args.plot else "")
          + ("" if written is None else f"; {written} CDMs in {args.cdm}"))
    return 0


def _pc_command(args):
    pc_module = _lib("pc")
    cdms = pc_module.read(args.paths)
    hbr, where = pc_module.hard_body_radii(cdms, args.hbr)
    pc = pc_module.compute(cdms, hbr, args.method, args.samples, args.seed, args.hbr_shape)
    pc.seed = args.seed
    for line in pc_module.table_lines(cdms, pc, hbr, where):
        print(line)
    if args.out is not None:
        pc_module.write_table(args.out, cdms, pc, hbr, where)
        print(f"wrote {args.out}")
    return 0


def _cache_command(args):
    from hapsira_core.kernels import cache
    print("\n".join(cache.clear_lines() if args.action == "clear" else cache.info_lines()))
    return 0


def _prepare_command(args):
    # what compiles, on how many cores: the library's notice (hapsira_core.progress)
    logging.getLogger("hapsira").setLevel(logging.WARNING)
    try:
        done = _lib("prepare").prepare()
    except RuntimeError as error:  # HAPSIRA_CACHE=0, an unusable HAPSIRA_CACHE_DIR
        raise _lib("inputs").UsageError(str(error)) from None
    for line in done.lines():
        print(line)
    return 0


def _demo_command(args, started):
    run, catalog, paths = _lib("demo").run_demo(args.out, args.n, args.seed,
                                                progress=not args.no_progress)
    for line in _lib("batch").summary_lines(run, catalog, run.tofs[-1],
                                            time.perf_counter() - started):
        print(line)
    print(f"wrote {' and '.join(paths)}")
    return 0


def main(argv=None):
    """Entry point of the ``hapsira-cowell`` console script; returns the exit status."""
    started = time.perf_counter()
    # the command says itself when it compiles (batch.compile_notice), with its model
    logging.getLogger("hapsira").setLevel(logging.ERROR)
    argv = _join_negative_values(list(sys.argv[1:] if argv is None else argv))
    UsageError = _lib("inputs").UsageError
    try:
        # The environment first, before even --help: a bad HAPSIRA_TARGET (or cuda
        # without a GPU) is one line and exit 2, whatever the command.
        # The target's name is checked by hapsira_core, which knows the targets.
        requested = _lib("target").requested_target(argv)
        status = _lib("target").select_target(requested, argv, PROG)
        if status is not None:
            return status
        try:
            import hapsira_core  # noqa: F401  (reads HAPSIRA_TARGET, checks a GPU for cuda)
        except (ValueError, RuntimeError) as error:
            text = str(error)
            if requested is not None:
                text = text.replace(f"HAPSIRA_TARGET={requested!r}", f"--target {requested!r}")
            raise UsageError(text) from None
        args = build_parser().parse_args(argv)
        _validate(args)
        if args.command == "propagate":
            return _propagate_command(args, started)
        if args.command == "cache":
            return _cache_command(args)
        if args.command == "screen":
            return _screen_command(args, started)
        if args.command == "pc":
            return _pc_command(args)
        if args.command == "prepare":
            return _prepare_command(args)
        return _demo_command(args, started)
    except UsageError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    except MemoryError as error:  # HAPSIRA_MEMORY_LIMIT=off, or memory taken meanwhile
        message = " ".join(str(error).split()) or "out of memory"
        print(f"{PROG}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
