"""Compile errors in user callbacks: see `hapsira_core.errors` (re-exported here)."""

from hapsira_core.errors import CallbackCompileError, user_function_error  # noqa: F401

__all__ = ["CallbackCompileError", "user_function_error"]
