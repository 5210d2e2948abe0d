"""Faults done to a running WoTbench run from outside, as a user or the host would: shared by
the e2e fault tests and ``make bench-faults`` (bench/faults_bench.py). Every action touches
only the named run's own labelled containers and processes."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional


def docker(*args: str, check: bool = True) -> str:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=check,
                          timeout=120).stdout


def containers_of(run_id: str, running_only: bool = False) -> list[str]:
    args = ["ps", "--filter", f"label=wotbench.run={run_id}", "--format", "{{.Names}}"]
    return docker(*(args if running_only else [args[0], "-a", *args[1:]])).split()


def networks_of(run_id: str) -> list[str]:
    return docker("network", "ls", "--filter", f"label=wotbench.run={run_id}", "--format",
                  "{{.Name}}").split()


def kill_container(run_id: str, component: str) -> None:
    """``docker kill`` (SIGKILL) one component's container."""
    docker("kill", f"wb-{run_id}-{component}")


def kill_pod_device(run_id: str, pod: str, device: str, sig: int = signal.SIGKILL) -> int:
    """Kill one device's process inside its pod (a crash); its pid."""
    from wotbench.runner.backends.docker.pods import member_pids
    init = int(docker("inspect", "-f", "{{.State.Pid}}", f"wb-{run_id}-{pod}").strip())
    pid = member_pids(init)[device]
    os.kill(pid, sig)
    return pid


def run_id_from(lines: list[str]) -> Optional[str]:
    for line in lines:
        if line.startswith("wotbench: run ") and " -> " in line:
            return line.split()[2]
    return None


def wait_none_running(run_id: str, within_s: float) -> Optional[float]:
    """Seconds until no container of the run runs, or None if some still run after
    ``within_s``."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < within_s:
        if not containers_of(run_id, running_only=True):
            return time.monotonic() - t0
        time.sleep(1.0)
    return None


@dataclass
class Kept:
    """What a run directory holds after the run."""
    summary: bool
    report: bool
    run_json: bool
    ge_requests: int          # rows in the main GEs' requests.csv
    verdict: Optional[str]
    reasons: list[str]

    def words(self) -> str:
        files = [n for n, ok in (("summary.json", self.summary), ("report.html", self.report),
                                 ("run.json", self.run_json)) if ok]
        return f"{', '.join(files) or 'nothing'}; {self.ge_requests} GE request rows"


def kept(run_dir: Path) -> Kept:
    summary = run_dir / "summary.json"
    verdict, reasons = None, []
    if summary.exists():
        v = json.loads(summary.read_text()).get("verdict") or {}
        verdict, reasons = v.get("status"), v.get("reasons") or []
    rows = 0
    for f in (run_dir / "ge").glob("*/requests.csv"):
        rows += max(0, sum(1 for _ in f.open()) - 1)
    return Kept(summary=summary.exists(), report=(run_dir / "report.html").exists(),
                run_json=(run_dir / "run.json").exists(), ge_requests=rows, verdict=verdict,
                reasons=reasons)
