"""hapsira-cowell: Cowell's method (DOP853) for one orbit or a million, on cpu or GPU.

The folders say what is where, imports running downward: ``constants``, ``units``;
``models/`` (forces, ephemeris, events); ``propagation/`` (the orbit adapter, the
numpy, JAX and Dask fronts and the router the public `cowell` is, Orbit objects,
covariance propagation);
``inputs/`` (elements, TLE, CCSDS CDMs and OMMs) and ``outputs/`` (OEM and CDM
files); ``cli/`` above all of them.
"""

# The solver is imported on first use, not here: importing it imports
# hapsira_core, which fixes the compilation target and validates
# HAPSIRA_TARGET. Importing the package (the command line does, before it
# reads --target) must neither fix the target nor fail on a bad environment.
import importlib

__version__ = "0.1.0"

# public name -> submodule that defines it
_LAZY = {
    "cowell": "propagation.api", "CowellResult": "propagation.results",
    "STATUS_MESSAGES": "propagation.results",
    "states_from_orbits": "propagation.orbits", "propagate_orbits": "propagation.orbits",
    "OrbitsResult": "propagation.orbits", "UnitsWarning": "units",
    "from_classical": "inputs.elements", "from_equinoctial": "inputs.elements",
    "from_tle": "inputs.tle", "read_cdms": "inputs.cdm", "read_omms": "inputs.omm",
    "write_oem": "outputs.oem", "read_oem": "outputs.oem",
    # the kernels of the command line's defaults compiled ahead (hapsira-cowell prepare)
    "prepare": "cli.prepare",
}
__all__ = sorted(_LAZY) + ["__version__"]


def __getattr__(name):
    """The public names above, imported when first read (PEP 562)."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
