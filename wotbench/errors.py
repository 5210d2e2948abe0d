"""Shared exceptions for WoTbench.

The CLI's central handler prints ``wotbench: error: <message>`` on stderr for every
:class:`WotbenchError` and exits with its ``exit_code``; user errors never show a traceback.

- :class:`WotbenchError` -- base class, ``WotbenchError(message, exit_code=1)``.
- :class:`ConfigError` -- bad user input (config, trace, CLI arguments), exit code 2.
  ``.problems`` is a list of ``"key.path: message"`` strings (contract section 5).
- :class:`EnvironmentProblem` -- the host cannot do what was asked (no Docker, missing
  binary, too few cores, ...), exit code 1.
"""
from __future__ import annotations

from typing import Iterable


class WotbenchError(Exception):
    """An error meant for the user: a message and the process exit code."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message


class ConfigError(WotbenchError):
    """Invalid user input. ``problems``: one ``"key.path: message"`` string per problem.

    ``source`` (usually the config file name) prefixes every line of the message.
    """

    def __init__(self, problems: Iterable[str] | str, source: str | None = None):
        if isinstance(problems, str):
            problems = [problems]
        self.problems = list(problems)
        self.source = source
        prefix = f"{source}: " if source else ""
        if len(self.problems) == 1:
            message = prefix + self.problems[0]
        else:
            message = prefix + f"{len(self.problems)} problems:\n" + \
                "\n".join(f"  {prefix}{p}" for p in self.problems)
        super().__init__(message, exit_code=2)


class EnvironmentProblem(WotbenchError):
    """The host environment cannot run what was asked (exit code 1)."""


def format_loc(loc: tuple) -> str:
    """A key path as users write it: ('devices', 1, 'service_time', 'mean') -> 'devices[1].service_time.mean'."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"
