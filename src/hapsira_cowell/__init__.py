"""hapsira-cowell: Cowell's method (DOP853) for one orbit or a million, on cpu or GPU."""

from .cowell import STATUS_MESSAGES, CowellResult, cowell  # noqa: F401

__version__ = "0.1.0"
