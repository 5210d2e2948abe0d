#!/usr/bin/env python3
"""The measurement floor (issue 11), side by side in one run; figures, not pass/fail.

For each path (loopback; a Docker bridge when `docker info` answers):
  - raw UDP ping-pong (bench/udp_pingpong.c): send time read before sendto() to the reply's
    kernel receive stamp, the same ends WoTbench's R has; at the requests' gap (the reference:
    both sides idle in between, as a device between requests) and back to back;
  - R − S of the gateway emulator against one wot-device with a 0 µs, 1 ms and 5 ms busy
    resource (CON, one request in flight, every GAP ms), with the device's response path per
    --modes; R from requests.csv (sent_ns to received_kernel_ns), S from the resource file;
    the median split of R − S by place (wotbench/analysis/decomposition.py);
then the CD calibration figure: R_d = (R − S) / S median of a 5 ms busy and a 5 ms sleep
resource, as the CD node answers it (loopback, --response piggyback).

The GE is pinned to core 0 and the device / echo server to core 1: run on a quiet host (the load
average is printed before and after). Targets (printed, not asserted): R − S p50 <= 2 x the same
path's ping-pong p50, R − S p99 <= 100 µs, CD R_d median <= 0.01.

A row whose GE or device fails prints n/a with the reason; the bench goes on.

usage: .venv/bin/python bench/floor_bench.py [--n 300] [--gap-ms 10] [--modes auto,separate]
                                             [--no-docker] [--smoke]
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
from wotbench.analysis import decomposition as decomp  # noqa: E402

from testkit.bench import SMOKE_BANNER, SMOKE_HELP, na, q, stop as _stop  # noqa: E402

GE_BIN = ROOT / "gateway-emulator" / "build" / "gateway-emulator"
DEV_BIN = ROOT / "wot-device" / "build" / "wot-device"
PP_BIN = ROOT / "bench" / "build" / "udp_pingpong"
GE_CPU, PEER_CPU = "0", "1"
RESOURCES = (("r0", 0, "busy"), ("r1", 1000, "busy"), ("r5", 5000, "busy"))
CD_RESOURCES = (("cd-busy", 5000, "busy"), ("cd-sleep", 5000, "sleep"))
PORT = 5683
TARGET_RATIO, TARGET_P99_US, TARGET_RD = 2.0, 100.0, 0.01


def build() -> None:
    for d in ("gateway-emulator", "wot-device"):
        subprocess.run(["make", "-s", "-C", str(ROOT / d)], check=True)
    PP_BIN.parent.mkdir(exist_ok=True)
    src = ROOT / "bench" / "udp_pingpong.c"
    if not PP_BIN.exists() or PP_BIN.stat().st_mtime < src.stat().st_mtime:
        subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE",
                        f"-I{ROOT / 'common'}", "-static", "-o", str(PP_BIN), str(src)],
                       check=True, stderr=subprocess.DEVNULL)


def measured(f, *args) -> pd.DataFrame | str:
    """f's frame, or why it could not be measured (the row says n/a and the bench goes on)"""
    try:
        return f(*args)
    except (RuntimeError, OSError, subprocess.SubprocessError, pd.errors.ParserError) as e:
        return f"{e.__class__.__name__}: {str(e).strip()[:200]}"


# ----------------------------------------------------------------------------- ping-pong

def pingpong(host: str, n: int, gap_us: int) -> np.ndarray:
    """Round trips in µs, send to the reply's kernel receive stamp."""
    out = subprocess.run(["taskset", "-c", GE_CPU, str(PP_BIN), "ping", host, str(PORT), str(n),
                          str(gap_us)], capture_output=True, text=True, timeout=n * 2 + 30)
    k = [int(line.split()[0]) for line in out.stdout.split("\n") if line.strip()]
    return np.array([x / 1e3 for x in k if x >= 0][n // 10:])   # the first 10 %: warm-up


# ----------------------------------------------------------------------------- GE + device

def write_resources(d: Path, resources) -> Path:
    res = d / "resources.csv"
    res.write_text("path,service_time_us,mode,payload_bytes\n" +
                   "".join(f"{p},{us},{mode},16\n" for p, us, mode in resources))
    return res


def write_trace(d: Path, resources, host: str, n: int, gap_ms: float) -> Path:
    trace = d / "trace.csv"
    rows = ["device_id,send_time_us,method,uri"]
    for i in range(n * len(resources)):
        p = resources[i % len(resources)][0]
        rows.append(f"0,{int(i * gap_ms * 1000)},GET,coap://{host}:{PORT}/{p}")
    trace.write_text("\n".join(rows) + "\n")
    return trace


def run_ge(trace: Path, out: Path, n_total: int, gap_ms: float) -> None:
    out.mkdir(exist_ok=True)
    r = subprocess.run(["taskset", "-c", GE_CPU, str(GE_BIN), "--trace", str(trace), "--out",
                        str(out), "--wait", "hybrid", "--type", "con", "--timeout-ms", "2000",
                        "--warmup-ms", "2000", "--label", "floor"],
                       capture_output=True, text=True, timeout=n_total * gap_ms / 1e3 + 60)
    if r.returncode != 0:
        raise RuntimeError(f"gateway-emulator exited {r.returncode}: {r.stderr.strip()}")


def split_frame(ge_out: Path, log_csv: Path, resources) -> pd.DataFrame:
    """decomposition.split per answered request, with its path: R − S and the parts (µs)."""
    import json
    req = pd.read_csv(ge_out / "requests.csv")
    summ = json.loads((ge_out / "summary.json").read_text())
    start, salt = int(summ["start_mono_ns"]), int(summ["token_salt"], 16)
    log = pd.read_csv(log_csv, dtype={"token": str})
    s_us = {p: us for p, us, _ in resources}
    frame = pd.DataFrame({
        "sent": req["sent_ns"].astype(float), "recv_user": req["received_ns"].astype(float),
        "recv_kernel": req["received_kernel_ns"].astype(float), "outcome": req["outcome"]})
    frame["recv"] = frame["recv_kernel"].where(frame["recv_kernel"].notna(), frame["recv_user"])
    idx = log["token"].map(lambda t: int(t[8:], 16) ^ (salt & 0xFFFFFFFF))
    matched = pd.DataFrame({"row": idx.to_numpy(np.int64), "code": 0})
    for col, src in (("arrival", "arrival_ns"), ("start", "start_ns"), ("end", "end_ns"),
                     ("arrival_k", "arrival_kernel_ns"), ("dev_sent", "response_sent_ns")):
        matched[col] = log[src].astype(float) - start
    s_ms = req["path"].map(s_us).to_numpy(float) / 1e3
    out = decomp.split(frame, matched, s_ms)
    out["path"] = req["path"].to_numpy()[out["row"].to_numpy()]
    return out.iloc[len(out) // 10:]          # drop the first 10 %: warm-up


def loopback_device(d: Path, resources, mode: str, n: int, gap_ms: float) -> pd.DataFrame:
    res = write_resources(d, resources)
    trace = write_trace(d, resources, "127.0.0.1", n, gap_ms)
    dev = subprocess.Popen(["taskset", "-c", PEER_CPU, str(DEV_BIN), "--resources", str(res),
                            "--log-dir", str(d), "--listen", f"127.0.0.1:{PORT}",
                            "--response", mode], stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not (d / "ready").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        run_ge(trace, d / "ge", n * len(resources), gap_ms)
    finally:
        _stop(dev)
    return split_frame(d / "ge", d / "device-log.csv", resources)


def loopback_pingpong(n: int, gap_us: int) -> tuple[np.ndarray, np.ndarray]:
    echo = subprocess.Popen(["taskset", "-c", PEER_CPU, str(PP_BIN), "echo", "127.0.0.1",
                             str(PORT)])
    try:
        time.sleep(0.2)
        return pingpong("127.0.0.1", n, gap_us), pingpong("127.0.0.1", n, 0)
    finally:
        echo.kill()
        echo.wait()


# ----------------------------------------------------------------------------- Docker bridge

class DockerPath:
    """A per-run internal bridge with one least-privilege container at a time (wb-floor-*)."""

    def __init__(self) -> None:
        import docker
        from wotbench.runner.backends.docker.images import ensure_image
        self.client = docker.from_env()
        tag = f"{os.getpid()}-{int(time.time())}"
        self.net = self.client.networks.create(f"wb-floor-{tag}", driver="bridge", internal=True,
                                               labels={"wotbench.bench": "floor"})
        self.name = f"wb-floor-{tag}"
        self.count = 0
        self.dev_image = ensure_image(self.client, "wot-device", DEV_BIN, log=lambda *_: None)
        self.pp_image = ensure_image(self.client, "udp_pingpong", PP_BIN, log=lambda *_: None)

    def _run(self, image: str, args: list[str], volume: Path | None = None):
        self.count += 1
        c = self.client.containers.run(
            image, args, name=f"{self.name}-{self.count}", detach=True, network=self.net.name,
            cap_drop=["ALL"], read_only=True, security_opt=["no-new-privileges"],
            cpuset_cpus=PEER_CPU, labels={"wotbench.bench": "floor"},
            volumes={str(volume): {"bind": "/run-dir", "mode": "rw"}} if volume else None)
        c.reload()
        return c, c.attrs["NetworkSettings"]["Networks"][self.net.name]["IPAddress"]

    def pingpong(self, n: int, gap_us: int) -> tuple[np.ndarray, np.ndarray]:
        c, ip = self._run(self.pp_image, ["echo", "0.0.0.0", str(PORT)])
        try:
            time.sleep(0.3)
            return pingpong(ip, n, gap_us), pingpong(ip, n, 0)
        finally:
            c.remove(force=True)

    def device(self, d: Path, resources, mode: str, n: int, gap_ms: float) -> pd.DataFrame:
        d.chmod(0o777)                   # the device runs as uid 65534
        write_resources(d, resources)
        c, ip = self._run(self.dev_image, ["--resources", "/run-dir/resources.csv", "--log-dir",
                                           "/run-dir", "--listen", f"0.0.0.0:{PORT}",
                                           "--response", mode], volume=d)
        try:
            trace = write_trace(d, resources, ip, n, gap_ms)
            deadline = time.monotonic() + 10
            while not (d / "ready").exists() and time.monotonic() < deadline:
                time.sleep(0.02)
            run_ge(trace, d / "ge", n * len(resources), gap_ms)
            c.stop(timeout=10)
        finally:
            c.remove(force=True)
        return split_frame(d / "ge", d / "device-log.csv", resources)

    def close(self) -> None:
        self.net.remove()


def docker_reason() -> str | None:
    """None when Docker can be used, else why not."""
    if not shutil.which("docker"):
        return "no docker command"
    r = subprocess.run(["docker", "info"], capture_output=True, text=True)
    if r.returncode != 0:
        return "docker info failed: " + (r.stderr.strip().splitlines() or ["?"])[-1]
    try:
        import docker  # noqa: F401
    except ImportError:
        return "the docker Python package is missing (make build installs it)"
    return None


# ----------------------------------------------------------------------------- report

def table(rows: list[dict]) -> str:
    head = ("| path | what | n | p50 µs | p99 µs | p50 / ping-pong p50 | where R − S goes (p50 µs: "
            "net out / device in / service / device out / net back) |")
    lines = [head, "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        if "na" in r:
            lines.append(f"| {r['path']} | {r['what']} | {na(r['na'])} | | | | |")
            continue
        ratio = "" if r.get("ratio") is None else f"{r['ratio']:.2f}"
        lines.append(f"| {r['path']} | {r['what']} | {r['n']} | {r['p50']:.1f} | {r['p99']:.1f} |"
                     f" {ratio} | {r.get('parts', '')} |")
    return "\n".join(lines)


def parts(f: pd.DataFrame) -> str:
    return " / ".join(f"{q(f[k].to_numpy(), 0.5):.1f}" for k in
                      ("network_out", "device_in", "service", "device_out", "network_back"))


def measure_path(label: str, pp: tuple[np.ndarray, np.ndarray],
                 frames: dict[str, pd.DataFrame | str]) -> list[dict]:
    """pp: ping-pong round trips at the requests' gap (the reference) and back to back."""
    base = q(pp[0], 0.5)
    rows = [{"path": label, "what": "UDP ping-pong, same gap as the requests", "n": len(pp[0]),
             "p50": base, "p99": q(pp[0], 0.99), "ratio": 1.0},
            {"path": label, "what": "UDP ping-pong, back to back (cores kept awake)",
             "n": len(pp[1]), "p50": q(pp[1], 0.5), "p99": q(pp[1], 0.99),
             "ratio": q(pp[1], 0.5) / base}]
    for mode, f in frames.items():
        if isinstance(f, str):
            rows.append({"path": label, "what": f"R − S, --response {mode}", "na": f})
            continue
        for p, us, _ in RESOURCES:
            sub = f[f["path"] == p]
            v = sub["r_minus_s"].to_numpy()
            rows.append({"path": label, "what": f"R − S, {us} µs busy, --response {mode}",
                         "n": len(v), "p50": q(v, 0.5), "p99": q(v, 0.99),
                         "ratio": q(v, 0.5) / base, "parts": parts(sub)})
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200, help="requests per resource (and ping-pongs)")
    ap.add_argument("--gap-ms", type=float, default=10.0)
    ap.add_argument("--modes", default="auto,piggyback,separate")
    ap.add_argument("--no-docker", action="store_true")
    ap.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    a = ap.parse_args()
    if a.smoke:
        print(SMOKE_BANNER)
        a.n, a.gap_ms, a.modes = 20, 6.0, "auto"   # the gap over the 5 ms resource: no queue
    if (os.cpu_count() or 1) < 2:
        print("floor bench: needs 2 cores (GE and peer pinned apart); skipped")
        return 0
    build()
    modes = [m for m in a.modes.split(",") if m]
    load0 = os.getloadavg()
    print(f"floor bench {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average "
          f"{load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}, {os.cpu_count()} cores; "
          f"{a.n} samples per row every {a.gap_ms} ms", flush=True)
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="wb-floor-") as tmp:
        t = Path(tmp)
        frames = {}
        for m in modes:
            (t / f"lo-{m}").mkdir()
            frames[m] = measured(loopback_device, t / f"lo-{m}", RESOURCES, m, a.n, a.gap_ms)
        rows += measure_path("loopback", loopback_pingpong(a.n, int(a.gap_ms * 1000)), frames)
        why = "--no-docker" if a.no_docker else docker_reason()
        if why:
            print(f"Docker bridge: skipped ({why})")
        else:
            dp = DockerPath()
            try:
                frames = {}
                for m in modes:
                    (t / f"dk-{m}").mkdir()
                    frames[m] = measured(dp.device, t / f"dk-{m}", RESOURCES, m, a.n, a.gap_ms)
                rows += measure_path("docker bridge", dp.pingpong(a.n, int(a.gap_ms * 1000)),
                                     frames)
            finally:
                dp.close()
        (t / "cd").mkdir()
        cd = measured(loopback_device, t / "cd", CD_RESOURCES, "piggyback", a.n, a.gap_ms)
    print(table(rows))
    print("\nCD calibration (loopback, 5 ms resource, the CD node's --response piggyback): R_d median")
    for p, us, mode in CD_RESOURCES:
        if isinstance(cd, str):
            print(f"  {mode:5s}: {na(cd)}")
            continue
        rd = cd[cd["path"] == p]["r_minus_s"].to_numpy() / us
        print(f"  {mode:5s}: R_d median {q(rd, 0.5):.4f} (p99 {q(rd, 0.99):.4f}, n {len(rd)})"
              f"  target <= {TARGET_RD}")
    load1 = os.getloadavg()
    print(f"\ntargets: R − S p50 <= {TARGET_RATIO} x the path's ping-pong p50, R − S p99 <= "
          f"{TARGET_P99_US:.0f} µs, CD R_d median <= {TARGET_RD}")
    for r in rows:
        if r["what"].startswith("R − S") and "na" not in r:
            a = "meets" if r["ratio"] <= TARGET_RATIO else "misses"
            b = "meets" if r["p99"] <= TARGET_P99_US else "misses"
            print(f"  {r['path']}, {r['what']}: p50 ratio {r['ratio']:.2f} {a}, "
                  f"p99 {r['p99']:.0f} µs {b}")
    print(f"load average after: {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
