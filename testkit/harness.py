"""A ``wotbench`` command in a subprocess, its output collected line by line: the e2e tests'
harness runner and ``make bench-faults``'s (the harness pins itself and installs signal
handlers, so it never runs inside the caller's process)."""
from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

WOTBENCH = [sys.executable, "-m", "wotbench.cli"]


class Harness:
    """``wotbench ARGS`` in a subprocess; its output is collected line by line."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: Path):
        self.proc = subprocess.Popen(WOTBENCH + args, env=env, cwd=cwd, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_for(self, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(text in line for line in self.lines):
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError(f"{text!r} not seen within {timeout} s:\n{self.output}")

    def wait(self, timeout: float) -> int:
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"harness did not end within {timeout} s:\n{self.output}")
        self._t.join(timeout=5)
        return rc
