"""wot-device --pod: several devices, one process each, one init that forwards signals.

Checked with libcoap's own coap-client (libcoap3-bin) where it is installed, and our codec."""
import csv
import os
import random
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from testkit.coap import GET, Client, ping
from testkit.device import HEADER
from wotbench.runner.backends.docker.pods import member_pids

COAP_CLIENT = shutil.which("coap-client-notls") or shutil.which("coap-client")


class Pod:
    def __init__(self, binary: Path, tmp: Path, names: list[str], extra: dict[str, list[str]] = {}):
        self.ip = f"127.0.{random.randint(1, 250)}.{random.randint(2, 250)}"
        base = random.randint(20000, 60000)
        self.ports = {n: base + i for i, n in enumerate(names)}
        self.dirs = {}
        argv = [str(binary), "--pod"]
        for n in names:
            d = tmp / n
            d.mkdir(parents=True)
            (d / "resources.csv").write_text(HEADER + "r0,200,sleep,16\n")
            self.dirs[n] = d
            argv += ["--", "--resources", str(d / "resources.csv"), "--log-dir", str(d),
                     "--listen", f"{self.ip}:{self.ports[n]}", "--name", n, *extra.get(n, [])]
        self.err = tmp / "pod-stderr.txt"
        self.proc = subprocess.Popen(argv, stderr=open(self.err, "w"))

    def wait_ready(self, timeout: float = 10) -> None:
        deadline = time.monotonic() + timeout
        for n, port in self.ports.items():
            while not ping((self.ip, port)):
                assert self.proc.poll() is None, self.err.read_text()
                assert time.monotonic() < deadline, f"{n} never answered"

    def children(self) -> list[int]:
        text = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text()
        return [int(p) for p in text.split()]

    def stop(self, timeout: float = 10) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def pod_factory(device_asan_bin, tmp_path):
    pods = []

    def make(names, **kw):
        p = Pod(device_asan_bin, tmp_path, names, **kw)
        pods.append(p)
        return p
    yield make
    for p in pods:
        for c in (p.children() if p.proc.poll() is None else []):
            os.kill(c, signal.SIGKILL)
        p.kill()


def test_pod_devices_answer_on_their_ports_and_log_separately(pod_factory):
    pod = pod_factory(["g-0", "g-1", "g-2"])
    pod.wait_ready()
    kids = pod.children()
    assert len(kids) == 3      # one process per device, each named by its own command line
    # the runner finds each device's process (for its CPU accounting) by that name
    pids = member_pids(pod.proc.pid)
    assert set(pids) == {"g-0", "g-1", "g-2"} and sorted(pids.values()) == sorted(kids)
    counts = {"g-0": 2, "g-1": 3, "g-2": 1}
    for n, k in counts.items():
        c = Client((pod.ip, pod.ports[n]))
        for _ in range(k):
            r = c.request(GET, "r0")
            assert r is not None and r["code"] == 0x45, n
        c.close()
    assert pod.stop() == 0
    for n, k in counts.items():
        with open(pod.dirs[n] / "device-log.csv") as f:
            rows = list(csv.DictReader(f))
        assert len(rows) == k, n          # each device logged its own requests only


@pytest.mark.skipif(COAP_CLIENT is None, reason="libcoap3-bin's coap-client is not installed")
def test_pod_member_answers_libcoap_client(pod_factory):
    pod = pod_factory(["a-0", "a-1"])
    pod.wait_ready()
    out = subprocess.run([COAP_CLIENT, "-B", "5", f"coap://{pod.ip}:{pod.ports['a-1']}/r0"],
                         capture_output=True, timeout=10)
    assert out.returncode == 0 and len(out.stdout.strip()) == 16, out
    assert pod.stop() == 0


def test_a_device_that_dies_is_named_and_its_pod_mates_go_on_serving(pod_factory):
    pod = pod_factory(["x-0", "x-1"])
    pod.wait_ready()
    survivor, victim = pod.children()
    os.kill(victim, signal.SIGKILL)
    time.sleep(0.5)
    assert pod.proc.poll() is None                      # the pod still runs ...
    os.kill(survivor, 0)                                # ... and so does the other device
    assert "device x-1 exited with code 137 before the pod was told to stop" in pod.err.read_text()
    if COAP_CLIENT is not None:                         # and it still answers
        out = subprocess.run([COAP_CLIENT, "-B", "5", f"coap://{pod.ip}:{pod.ports['x-0']}/r0"],
                             capture_output=True, timeout=10)
        assert out.returncode == 0, out
    assert pod.stop() == 128 + signal.SIGKILL           # the first failure is the pod's code


def test_bad_device_arguments_fail_the_pod_with_the_device_named(pod_factory):
    pod = pod_factory(["y-0", "y-1"], extra={"y-1": ["--threads", "0"]})
    rc = pod.proc.wait(10)
    assert rc == 2
    err = pod.err.read_text()
    assert "bad --threads '0'" in err and "device y-1 exited with code 2" in err


@pytest.mark.parametrize("argv, why", [
    (["--pod"], "expected '--pod -- DEVICE ARGS"),
    (["--pod", "--resources", "x"], "expected '--pod -- DEVICE ARGS"),
    (["--pod", "--", "--name", "a", "--"], "the last device segment is empty"),
    (["--pod", "--", "--", "--name", "a"], "an empty device segment"),
])
def test_malformed_pod_command_lines_are_refused(device_asan_bin, argv, why):
    out = subprocess.run([str(device_asan_bin), *argv], capture_output=True, text=True, timeout=10)
    assert out.returncode == 2 and why in out.stderr
