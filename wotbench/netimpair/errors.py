"""Errors of the network-impairment layer."""
from __future__ import annotations


class ImpairmentError(RuntimeError):
    """A backend cannot do what the config asks (missing tool, kernel lacks netem, ...)."""


class ImpairmentConfigError(ValueError):
    """The config is wrong; ``.problems`` is a list of ``"key.path: message"`` strings."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))
