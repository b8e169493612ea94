"""hapsira-cowell: Cowell's method (DOP853) for one orbit or a million, on cpu or GPU."""

# The solver is imported on first use, not here: importing it imports
# hapsira_core, which fixes the compilation target and validates
# HAPSIRA_TARGET. Importing the package (the command line does, before it
# reads --target) must neither fix the target nor fail on a bad environment.
import importlib
import sys
import types

__version__ = "0.1.0"

# public name -> submodule that defines it
_LAZY = {
    "cowell": "cowell", "CowellResult": "cowell", "STATUS_MESSAGES": "cowell",
    "from_classical": "elements", "from_equinoctial": "elements",
    "states_from_orbits": "orbits", "propagate_orbits": "orbits",
    "from_tle": "tle", "write_oem": "oem", "read_oem": "oem",
}
__all__ = sorted(_LAZY) + ["__version__"]


class _Package(types.ModuleType):
    """The package module: the public names above, imported when first read.

    ``cowell`` is both a submodule and the function it defines; the import
    system sets the package attribute ``cowell`` to the submodule when that is
    first imported, which must not replace the function (``from hapsira_cowell
    import cowell`` gives the function, as it always did).
    """

    @property
    def cowell(self):
        return importlib.import_module(f"{__name__}.cowell").cowell

    @cowell.setter
    def cowell(self, value):
        pass  # the submodule is in sys.modules; the package attribute stays the function

    def __getattr__(self, name):
        if name not in _LAZY:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        setattr(self, name, value)
        return value

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(_LAZY))


sys.modules[__name__].__class__ = _Package
