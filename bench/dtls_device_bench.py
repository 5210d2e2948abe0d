#!/usr/bin/env python3
"""Devices' CPU cost per request with and without DTLS (issue 13 item 3; not pass/fail).

One server on loopback, pinned to --server-cpu, driven by bench/dtls_load.c (libcoap client,
CON GETs, a window of 8 on one session; "new session" = a DTLS handshake before every
request) on --client-cpu, bounded in count and time. The server's CPU seconds come from
/proc/PID/stat (utime + stime, all threads) around the load; CPU per request = that / the
responses. The same load runs against libcoap's own coap-server-openssl in the same run, for
comparison. Each figure is the median of --reps runs, with the 1-minute load average beside
it (a busy host inflates everything). Holds the host lock (testkit/hostlock.py). A run whose
server or load generator fails or times out is counted in the row's "n/a" note; a row with no
run left prints n/a with the reason, and the bench goes on.

usage: .venv/bin/python bench/dtls_device_bench.py [--reps 3] [--count 60000] [--smoke]
"""
import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
from testkit import hostlock
from testkit.bench import SMOKE_BANNER, SMOKE_HELP, PeerFailed, na, run_peer

ID, KEY = "wotbench", b"bench-psk-0123456789"
TICK = os.sysconf("SC_CLK_TCK")
MODES = (("plain", "plain UDP"), ("dtls", "DTLS, one session"),
         ("dtls-new", "DTLS, new session per request"))


def build() -> tuple[Path, Path]:
    subprocess.run(["make", "-s", "-C", str(ROOT / "wot-device")], check=True)
    load = ROOT / "wot-device" / "build" / "dtls_load"
    subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-I/usr/include/coap3", "-o",
                    str(load), str(HERE / "dtls_load.c"), "-l:libcoap-3-openssl.a",
                    "-l:libssl.a", "-l:libcrypto.a", "-lpthread"], check=True)
    return ROOT / "wot-device" / "build" / "wot-device", load


def cpu_s(pid: int) -> float:
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / TICK    # utime + stime (fields 14, 15)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """wot-device or coap-server-openssl, pinned; ``port`` is where the mode's endpoint is."""

    def __init__(self, kind: str, mode: str, device: Path, tmp: Path, cpu: int):
        self.kind, self.tmp = kind, tmp
        pin = (lambda: os.sched_setaffinity(0, {cpu}))
        keyf = tmp / "psk.key"
        keyf.write_bytes(KEY)
        if kind == "wot-device":
            self.port, self.path = free_port(), "r0"
            logs = tempfile.mkdtemp(dir=tmp)
            (tmp / "r.csv").write_text("path,service_time_us,mode,payload_bytes\nr0,0,sleep,16\n")
            cmd = [str(device), "--resources", str(tmp / "r.csv"), "--log-dir", logs,
                   "--listen", f"127.0.0.1:{self.port}", "--log-capacity", "200000"]
            if mode != "plain":
                cmd += ["--dtls-psk-identity", ID, "--dtls-psk-key-file", str(keyf)]
            self.ready = Path(logs) / "ready"
        else:   # coap-server-openssl: coap on -p PORT, coaps on PORT + 1; its key is on argv
            base, self.path = free_port(), "time"
            self.port = base + 1 if mode != "plain" else base
            cmd = ["coap-server-openssl", "-A", "127.0.0.1", "-p", str(base), "-h", ID,
                   "-k", KEY.decode()]
            self.ready = None
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     preexec_fn=pin)
        deadline = time.monotonic() + 5
        while not self._listening():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise PeerFailed(f"{kind} did not start")
            time.sleep(0.02)

    def _listening(self) -> bool:
        if self.ready is not None:
            return self.ready.exists()
        out = subprocess.run(["ss", "-Hlun", f"sport = :{self.port}"], capture_output=True,
                             text=True).stdout
        return bool(out.strip())

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def one(load: Path, kind: str, mode: str, device: Path, count: int, cpu: tuple[int, int],
        min_new: int = 200):
    """(responses, seconds, server CPU s) of one bounded load run against a fresh server."""
    with tempfile.TemporaryDirectory(prefix="dtls-bench-") as t:
        tmp = Path(t)
        srv = Server(kind, mode, device, tmp, cpu[0])
        try:
            n = count if mode != "dtls-new" else max(min_new, count // 30)
            argv = [str(load), "127.0.0.1", str(srv.port), srv.path, mode, str(n), "8", "10"]
            if mode != "plain":
                argv += [ID, str(tmp / "psk.key")]
            c0 = cpu_s(srv.proc.pid)
            out = run_peer(argv, f"dtls_load ({mode}) against {kind}", timeout=30,
                           preexec_fn=lambda: os.sched_setaffinity(0, {cpu[1]}))
            time.sleep(0.05)   # the last response's CPU is booked
            c1 = cpu_s(srv.proc.pid)
        finally:
            srv.stop()
    done, secs, failed = out.stdout.split()
    return int(done), float(secs), c1 - c0, int(failed)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--count", type=int, default=60000, help="requests per run (new-session "
                    "runs: count/30, at least 200)")
    ap.add_argument("--server-cpu", type=int, default=1)
    ap.add_argument("--client-cpu", type=int, default=0)
    ap.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    a = ap.parse_args()
    if shutil.which("coap-server-openssl") is None:
        print("coap-server-openssl missing (apt-get install libcoap3-bin)", file=sys.stderr)
        return 1
    device, load = build()
    if a.smoke:
        print(SMOKE_BANNER)
        a.reps, a.count = 1, 3000
    else:
        held = hostlock.hold()
        print("host lock: " + ("held by the caller" if held is None else "taken"))
    cpus = (a.server_cpu, a.client_cpu)
    print(f"server CPU per request (µs, /proc/PID/stat utime+stime), CON GETs, window 8, "
          f"server on cpu {a.server_cpu}, client on cpu {a.client_cpu}, median of {a.reps}")
    print(f"{'server':20} {'mode':31} {'req/s':>9} {'CPU µs/req':>11} {'(min..max)':>15} "
          f"{'failed':>6} {'load1':>6}")
    base = {}
    for kind in ("wot-device", "coap-server-openssl"):
        for mode, label in MODES:
            per, rates, fails, why = [], [], 0, []
            for _ in range(a.reps):
                try:
                    done, secs, cpu, failed = one(load, kind, mode, device, a.count, cpus,
                                                  10 if a.smoke else 200)
                except PeerFailed as e:
                    why.append(e.why)
                    continue
                fails += failed
                if done:
                    per.append(cpu / done * 1e6)
                    rates.append(done / secs)
            if not per:
                print(f"{kind:20} {label:31} " + na("; ".join(why) or "no responses"))
                continue
            med = statistics.median(per)
            base.setdefault(kind, med)
            print(f"{kind:20} {label:31} {statistics.median(rates):9.0f} {med:11.1f} "
                  f"{f'({min(per):.1f}..{max(per):.1f})':>15} {fails:6d} "
                  f"{os.getloadavg()[0]:6.2f}   "
                  + (f"x{med / base[kind]:.2f} of plain" if base[kind] > 0 else
                     "x n/a of plain (under one CPU tick)")
                  + (f"; {len(why)} run(s) n/a: {why[0]}" if why else ""), flush=True)
    print("CPU µs/req resolution: 1 tick = 10 ms over the run; 'new session' includes one "
          "PSK handshake per request (ClientHello, cookie, key exchange, Finished).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
