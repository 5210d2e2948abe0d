"""Errors raised by the analysis (a :class:`wotbench.errors.WotbenchError` subclass)."""
from __future__ import annotations

from wotbench.errors import WotbenchError


class AnalysisError(WotbenchError):
    """Bad analysis input (missing or malformed file). Exit code 2; the message names the file."""

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(message, exit_code)


__all__ = ["AnalysisError", "WotbenchError"]
