"""Start/stop a wot-fleet engine (docs/CONTRACTS.md §3b) for tests and benches: writes the
devices file, waits for DIR/ready, reads the logs back after SIGTERM.

`FleetDevice` shows one device of a fleet through the interface of testkit.device.Device
(addr, stop, log, summary), so a functional check can be asserted for both programs."""
from __future__ import annotations

import csv
import json
import os
import resource
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from testkit.device import HEADER, free_addr, kill_process, stop_process

DEVICES_HEADER = "index,name,listen,resources,slots,queue,response,piggyback_max_us"
IMPAIR_COLUMNS = ",impair,impair_ge,impair_seed"
LOG_HEADER = ("device,arrival_ns,start_ns,end_ns,path,method,code,token,arrival_kernel_ns,"
              "response_sent_ns,due_ns")


@dataclass
class Spec:
    """One line of the devices file."""
    index: int
    resources: str            # resource lines (without the header) or a file name (file=True)
    listen: tuple[str, int] = field(default_factory=free_addr)
    slots: int = 1
    queue: int = 1024
    response: str = "auto"
    piggyback_max_us: int = 1000
    name: str = ""
    res_header: str = ""      # the resource file's header ("": the four basic columns)
    impair: tuple[str, str, str] = ("", "", "")   # impair, impair_ge, impair_seed columns

    def line(self, res_file: str, impair: bool = False) -> str:
        return (f"{self.index},{self.name or f'd{self.index}'},{self.listen[0]}:{self.listen[1]},"
                f"{res_file},{self.slots},{self.queue},{self.response},{self.piggyback_max_us}"
                + ("," + ",".join(self.impair) if impair else ""))


def write_devices(directory: Path, specs: list[Spec]) -> Path:
    """devices.csv plus one resource file per distinct resource text (shared by the devices
    that have the same text)."""
    directory.mkdir(parents=True, exist_ok=True)
    files: dict[str, str] = {}
    impair = any(any(s.impair) for s in specs)
    lines = [DEVICES_HEADER + (IMPAIR_COLUMNS if impair else "")]
    for s in specs:
        text = (s.res_header or HEADER) + s.resources
        if text not in files:
            name = f"res{len(files)}.csv"
            (directory / name).write_text(text)
            files[text] = name
        lines.append(s.line(files[text], impair))
    path = directory / "devices.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def raise_nofile(n: int):
    """preexec_fn: RLIMIT_NOFILE soft and hard to n (root may raise the hard limit)."""
    def apply():
        resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))
    return apply


class Fleet:
    def __init__(self, binary: Path, tmp: Path, specs: list[Spec], *args: str, name: str = "fleet",
                 nofile: int | None = None, ready_timeout: float = 30.0):
        self.specs = specs
        self.dir = tmp / name
        self.logdir = self.dir / "out"
        self.logdir.mkdir(parents=True, exist_ok=True)
        self.devices_file = write_devices(self.dir, specs)
        self.cmd = [str(binary), "--devices", str(self.devices_file), "--log-dir",
                    str(self.logdir), "--name", name, *args]
        self.nofile = nofile
        self.ready_timeout = ready_timeout
        self.stderr_path = self.dir / "stderr.txt"
        self.proc: subprocess.Popen | None = None
        self.ready_s: float | None = None

    def __enter__(self) -> "Fleet":
        self._err = open(self.stderr_path, "w")
        t0 = time.monotonic()
        self.proc = subprocess.Popen(
            self.cmd, stderr=self._err, env={**os.environ, "ASAN_OPTIONS": "detect_leaks=1"},
            preexec_fn=raise_nofile(self.nofile) if self.nofile else None)
        deadline = t0 + self.ready_timeout
        while not (self.logdir / "ready").exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"wot-fleet did not start: {self.stderr()}")
            time.sleep(0.005)
        self.ready_s = time.monotonic() - t0
        return self

    def __exit__(self, *exc):
        self.kill()

    def stop(self, timeout: float = 60) -> int:
        return stop_process(self.proc, self._err, timeout)

    def kill(self):
        kill_process(self.proc, getattr(self, "_err", None))

    def stderr(self) -> str:
        if not self._err.closed:
            self._err.flush()
        return self.stderr_path.read_text()

    def log(self) -> list[dict]:
        """Every loop's log rows (fleet-log-<loop>.csv, loop order, then row order)."""
        rows = []
        for path in sorted(self.logdir.glob("fleet-log-*.csv"),
                           key=lambda p: int(p.stem.rsplit("-", 1)[1])):
            with open(path) as f:
                assert f.readline().strip() == LOG_HEADER, path
                f.seek(0)
                rows += list(csv.DictReader(f))
        return rows

    def devices(self) -> dict[int, dict]:
        with open(self.logdir / "fleet-devices.csv") as f:
            return {int(r["device"]): r for r in csv.DictReader(f)}

    def summary(self) -> dict:
        return json.loads((self.logdir / "fleet-summary.json").read_text())

    def notify_log(self) -> list[dict]:
        """Every loop's notification rows (fleet-notify-<loop>.csv, loop order)."""
        rows = []
        for path in sorted(self.logdir.glob("fleet-notify-*.csv"),
                           key=lambda p: int(p.stem.rsplit("-", 1)[1])):
            with open(path) as f:
                rows += list(csv.DictReader(f))
        return rows

    def impair_table(self) -> dict[int, dict]:
        with open(self.logdir / "fleet-impair.csv") as f:
            return {int(r["device"]): {k: int(v) for k, v in r.items()} for r in csv.DictReader(f)}

    def device(self, index: int) -> "FleetDevice":
        return FleetDevice(self, index)


class FleetDevice:
    """One device of a running fleet, as testkit.device.Device shows a wot-device."""

    def __init__(self, fleet: Fleet, index: int):
        self.fleet = fleet
        self.index = index
        self.addr = next(s.listen for s in fleet.specs if s.index == index)

    def stop(self) -> int:
        return self.fleet.stop()

    def stderr(self) -> str:
        return self.fleet.stderr()

    def log(self) -> list[dict]:
        return [r for r in self.fleet.log() if int(r["device"]) == self.index]

    def summary(self) -> dict:
        """The device's counters under device-summary.json's names."""
        row = self.fleet.devices()[self.index]
        out = {k: int(v) for k, v in row.items() if k not in ("device", "name")}
        out["name"] = row["name"]
        out["log_entries"] = len(self.log())
        return out


def build(target: str) -> Path:
    """Builds wot-device/build/<target> (make, once per call; make skips an up-to-date one)."""
    root = Path(__file__).resolve().parents[1]
    r = subprocess.run(["make", "--no-print-directory", "-C", str(root / "wot-device"),
                        f"build/{target}"], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"building {target} failed:\n{r.stderr[-4000:]}")
    return root / "wot-device" / "build" / target
