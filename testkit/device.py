"""Start/stop a wot-device for tests: readiness via CoAP ping (with DTLS: its ready file, a
plain ping cannot reach a coaps endpoint), logs read back after SIGTERM."""
import csv
import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

from testkit.coap import ping

HEADER = "path,service_time_us,mode,payload_bytes\n"


def free_addr() -> tuple[str, int]:
    """A random loopback address and port (devices of parallel tests do not collide)."""
    return (f"127.0.{random.randint(1, 250)}.{random.randint(2, 250)}",
            random.randint(20000, 60000))


def stop_process(proc: subprocess.Popen, err, timeout: float) -> int:
    """SIGTERM, wait (killed after timeout, which raises); closes err; returns the exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        rc = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        kill_process(proc, err)
        raise
    err.close()
    return rc


def kill_process(proc: subprocess.Popen | None, err) -> None:
    if proc and proc.poll() is None:
        proc.kill()
        proc.wait()
    if err is not None and not err.closed:
        err.close()


class Device:
    def __init__(self, binary: Path, tmp: Path, resources: str, *args: str, name: str = "dev",
                 cpu: int | None = None):
        self.cpu = cpu
        self.dir = tmp / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.res = self.dir / "resources.csv"
        self.res.write_text(HEADER + resources)
        self.addr = free_addr()
        self.cmd = [str(binary), "--resources", str(self.res), "--log-dir", str(self.dir),
                    "--listen", f"{self.addr[0]}:{self.addr[1]}", "--name", name, *args]
        self.stderr_path = self.dir / "stderr.txt"
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> "Device":
        self._err = open(self.stderr_path, "w")
        pin = (lambda: os.sched_setaffinity(0, {self.cpu})) if self.cpu is not None else None
        self.proc = subprocess.Popen(self.cmd, stderr=self._err, preexec_fn=pin,
                                     env={**os.environ, "ASAN_OPTIONS": "detect_leaks=1"})
        deadline = time.monotonic() + 10
        while not self._ready():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"device did not start: {self.stderr()}")
        return self

    def _ready(self) -> bool:
        if "--dtls-psk-key-file" not in self.cmd:
            return ping(self.addr)
        if (self.dir / "ready").exists():
            return True
        time.sleep(0.01)
        return False

    def stop(self, timeout: float = 10) -> int:
        """SIGTERM, wait; returns the exit code."""
        return stop_process(self.proc, self._err, timeout)

    def kill(self):
        kill_process(self.proc, self._err)

    def __exit__(self, *exc):
        self.kill()

    def stderr(self) -> str:
        if not self._err.closed:
            self._err.flush()
        return self.stderr_path.read_text()

    def log(self) -> list[dict]:
        with open(self.dir / "device-log.csv") as f:
            return list(csv.DictReader(f))

    def summary(self) -> dict:
        """device-summary.json as a dict, checked against its model (wotbench.rundir)."""
        from wotbench.rundir.device_files import DeviceSummary
        data = json.loads((self.dir / "device-summary.json").read_text())
        DeviceSummary.model_validate(data)
        return data

    def cpu_ns(self) -> int:
        """CPU time of all threads (ns), summed over /proc/PID/task/*/schedstat."""
        return self.schedstat()[0]

    def schedstat(self) -> tuple[int, int]:
        """(CPU time, run-queue wait) of all threads in ns, from /proc/PID/task/*/schedstat."""
        run = wait = 0
        for task in Path(f"/proc/{self.proc.pid}/task").iterdir():
            try:
                f = (task / "schedstat").read_text().split()
                run, wait = run + int(f[0]), wait + int(f[1])
            except (FileNotFoundError, ProcessLookupError):
                pass
        return run, wait

    def rss_kib(self, field: str = "VmRSS") -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
        raise AssertionError(f"no {field}")
