"""Live progress from the GEs' ``progress.bin`` (contract §2): 8 little-endian uint64
``magic, total, sent, ok, timeout, reset, error, state``, read without disturbing the GE."""
from __future__ import annotations

import struct
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from wotbench.runner.during.timeline import Timeline

MAGIC = 0x57544250524F4731
STATES = {0: "loading", 1: "waiting", 2: "sending", 3: "draining", 4: "done"}
FIELDS = ("total", "sent", "ok", "timeout", "reset", "error", "state")


def read_progress(path: Path) -> dict | None:
    """The counters of one GE, or None when the file is missing, short or not ours yet."""
    try:
        with open(path, "rb") as f:
            data = f.read(64)
    except OSError:
        return None
    if len(data) < 64:
        return None
    vals = struct.unpack("<8Q", data)
    if vals[0] != MAGIC:
        return None
    return dict(zip(FIELDS, vals[1:]))


def combine(progs: list[dict | None]) -> dict:
    out = {k: 0 for k in FIELDS[:-1]}
    states = []
    for p in progs:
        if p:
            for k in out:
                out[k] += p[k]
            states.append(p["state"])
    out["answered"] = out["ok"] + out["reset"] + out["error"]
    out["lost"] = out["timeout"]
    out["state"] = STATES.get(min(states), "?") if states else "starting"
    return out


class ProgressView:
    """Rich progress bar on a terminal; a plain line every 5 s otherwise (logs, CI)."""

    def __init__(self, ge_files: list[Path], cd_file: Path | None, timeline: "Timeline"):
        self.ge_files, self.cd_file, self.timeline = ge_files, cd_file, timeline
        self.live = sys.stdout.isatty()
        self._last_line = 0.0
        self._progress = None

    def __enter__(self):
        if self.live:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
            self._progress = Progress(TextColumn("{task.description}"), BarColumn(),
                                      TextColumn("{task.fields[info]}"), TimeElapsedColumn(),
                                      transient=False)
            self._progress.__enter__()
            self._task = self._progress.add_task("starting", total=1.0, info="")
        return self

    def __exit__(self, *exc):
        if self._progress is not None:
            self._progress.__exit__(*exc)
        return False

    def update(self) -> None:
        now = time.monotonic_ns()
        main = combine([read_progress(p) for p in self.ge_files])
        cd = read_progress(self.cd_file) if self.cd_file else None
        phase, frac = self.timeline.phase(now)
        info = (f"sent {main['sent']}/{main['total']}  answered {main['answered']}  "
                f"lost {main['lost']}" + (f"  | cd {cd['ok']}/{cd['sent']}" if cd else ""))
        if self._progress is not None:
            self._progress.update(self._task, completed=min(1.0, max(0.0, frac)),
                                  description=f"{phase:<11} {main['state']:<8}", info=info)
        elif time.monotonic() - self._last_line >= 5:
            self._last_line = time.monotonic()
            print(f"[{(now - self.timeline.t0_ns) / 1e9:6.1f} s] {phase}: {info}", flush=True)
