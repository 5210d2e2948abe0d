"""Command execution seam: backends run every external command through a CommandRunner,
so tests can inject a fake one and check the exact command lines."""
from __future__ import annotations

import subprocess
from dataclasses import dataclass
from typing import Protocol, Sequence


@dataclass(frozen=True)
class Result:
    argv: tuple[str, ...]
    rc: int
    stdout: str = ""
    stderr: str = ""

    @property
    def ok(self) -> bool:
        return self.rc == 0

    def text(self) -> str:
        return (self.stderr or self.stdout).strip()


class CommandRunner(Protocol):
    def run(self, argv: Sequence[str], timeout: float = 30.0) -> Result: ...


class SubprocessRunner:
    """Runs commands for real. A missing executable is rc 127 with a message, never an exception."""

    def run(self, argv: Sequence[str], timeout: float = 30.0) -> Result:
        argv = tuple(str(a) for a in argv)
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        except FileNotFoundError:
            return Result(argv, 127, "", f"{argv[0]}: command not found")
        except subprocess.TimeoutExpired:
            return Result(argv, 124, "", f"{argv[0]}: timed out after {timeout:g} s")
        return Result(argv, p.returncode, p.stdout, p.stderr)


def shell_join(argv: Sequence[str]) -> str:
    import shlex
    return " ".join(shlex.quote(a) for a in argv)
