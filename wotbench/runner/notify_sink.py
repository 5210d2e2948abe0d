"""The run's notification sink (``notify:``, issue 35): ``build/notify-sink`` on this host,
started before the gateway emulators with one subscriber per ``notify.subscribers`` entry and
waited for until every subscription holds (its ready file), stopped (SIGTERM) after them. Its
files land in ``RUN/sink/`` (notifications.csv, sink.json, sink.log); the analysis joins them to
the updates (wotbench.analysis.notify_sink). A subscription that fails stops the run before T0
with the sink's own message."""
from __future__ import annotations

import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from wotbench.config import notify as notify_spec
from wotbench.errors import EnvironmentProblem
from wotbench.rundir import RunDir
from wotbench.runner.prepare.binaries import Component, ensure_binary

SINK = Component("notify-sink", "WOTBENCH_SINK_BIN", source="gateway-emulator")
READY_TIMEOUT_S = 10.0
MARGIN_S = 120.0          # its own bound beyond the run's end (it is stopped before)


@dataclass
class SinkRun:
    proc: subprocess.Popen
    out: Path

    def stop(self) -> Optional[int]:
        """SIGTERM, then its exit code (it writes its files on the way out); idempotent."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def start(cfg, rd: RunDir, addresses: dict[str, tuple[str, int]], bound_s: float,
          log: Callable[[str], None] = print) -> SinkRun:
    """Into ``rd.sink_dir``."""
    binary = ensure_binary(SINK, log)
    out, ready = rd.sink_dir, rd.sink_ready
    out.mkdir(parents=True, exist_ok=True)
    argv = [str(binary), "--out", str(out), "--ready-file", str(ready),
            "--duration-ms", str(int((bound_s + MARGIN_S) * 1000))]
    argv += notify_spec.sink_args(cfg, addresses)
    with open(rd.sink_log, "wb") as f:
        proc = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT)
    run = SinkRun(proc, out)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            run.stop()
            said = rd.sink_log.read_text(errors="replace").strip()[-800:]
            raise EnvironmentProblem(
                f"notify: the notification sink did not get its subscriptions within "
                f"{READY_TIMEOUT_S:g} s: {said or 'no message'} (notify.subscribers; is the "
                "server up and serving that path?)")
        time.sleep(0.02)
    log(f"notification sink: {len(cfg.notify.subscribers)} subscription(s) hold "
        f"({', '.join(s.name for s in cfg.notify.subscribers)})")
    return run
