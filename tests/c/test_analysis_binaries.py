"""Analyse logs produced by the real C binaries (process backend on 127.0.0.1)."""
from __future__ import annotations

import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from wotbench.analysis import analyze
from wotbench.rundir import RunDir, RunRecord

ROOT = Path(__file__).resolve().parents[2]
GE = ROOT / "gateway-emulator" / "build" / "gateway-emulator"
DEV = ROOT / "wot-device" / "build" / "wot-device"

pytestmark = pytest.mark.skipif(
    not (GE.is_file() and DEV.is_file()),
    reason="C binaries not built (run make in gateway-emulator/ and wot-device/)")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_ready(port: int, timeout: float = 5.0) -> None:
    """CoAP ping (empty CON) until the device answers with RST."""
    deadline = time.monotonic() + timeout
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(0.1)
        while time.monotonic() < deadline:
            s.sendto(bytes([0x40, 0x00, 0x12, 0x34]), ("127.0.0.1", port))
            try:
                s.recvfrom(64)
                return
            except OSError:
                continue
    raise RuntimeError(f"device on port {port} not ready")


def test_analysis_of_real_binary_logs(tmp_path):
    run = tmp_path / "run"
    names = ["cpu-0", "cpu-1"]
    ports = [_free_port() for _ in names]
    res_dir = run / "trace" / "resources"
    res_dir.mkdir(parents=True)
    for n in names:
        (res_dir / f"{n}.csv").write_text("path,service_time_us,mode,payload_bytes\n"
                                          "r0,1000,sleep,16\nr1,2000,busy,16\n")
    lines = ["device_id,send_time_us,method,uri"]
    for k in range(300):  # 2 devices × 150 requests, one every 10 ms per device
        d = k % 2
        lines.append(f"{d},{(k // 2) * 10_000 + d * 3000},GET,"
                     f"coap://127.0.0.1:{ports[d]}/r{k % 4 // 2}")
    (run / "trace" / "trace.csv").write_text("\n".join(lines) + "\n")
    procs = []
    try:
        for n, port in zip(names, ports):
            (run / "devices" / n).mkdir(parents=True)
            procs.append(subprocess.Popen(
                [str(DEV), "--resources", str(res_dir / f"{n}.csv"), "--log-dir",
                 str(run / "devices" / n), "--listen", f"127.0.0.1:{port}", "--name", n]))
        for port in ports:
            _wait_ready(port)
        start = time.monotonic_ns() + 200_000_000
        ge = subprocess.run([str(GE), "--trace", str(run / "trace" / "trace.csv"), "--out",
                             str(run / "ge" / "ge-0"), "--start-at", str(start),
                             "--timeout-ms", "2000"], capture_output=True, text=True,
                            timeout=60)
        assert ge.returncode == 0, ge.stderr
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(timeout=10)
    RunDir(run).write_run(RunRecord.model_validate({
        "name": "binaries", "run_id": "binaries-1", "backend": "process", "host": {},
        "test": {"start_mono_ns": start, "duration_s": 1.5},
        "devices": [{"name": n, "id": i, "address": "127.0.0.1", "port": p, "group": "cpu",
                     "resources": f"trace/resources/{n}.csv"}
                    for i, (n, p) in enumerate(zip(names, ports))],
        "ges": [{"id": "ge-0", "dir": "ge/ge-0"}], "failures": [], "interrupted": False}))
    s = analyze(run).model_dump()
    o = s["overall"]
    assert o["requests"] == 300 and o["outcomes"]["ok"] == 300
    assert s["rd"]["join"]["ok_requests_matched"] == 300
    assert s["rd"]["join"]["unmatched_log_rows"] == 0
    dec = s["rd"]["overall"]["decomposition_ms"]
    assert 0.9 < dec["service"]["p50_ms"] < 2.5
    assert dec["network_stack"]["p50_ms"] >= 0 and dec["queueing"]["p50_ms"] >= 0
    assert o["response_time_ms"]["from_sent"]["p50_ms"] >= 1.0
    assert s["contention"]["status"] == "not_checked"
    assert s["verdict"]["checks"]["ge"] in ("kept_up", "bottleneck")
