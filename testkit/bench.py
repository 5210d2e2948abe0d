"""Pieces the benchmarks share: paths, the C tools they compile, stopping
a server, a quantile that skips NaN, the raw UDP ping-pong floor, the host line."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
HERE = ROOT / "bench"          # the benches and their C tools
GE_BIN = ROOT / "gateway-emulator" / "build" / "gateway-emulator"
DEV_BIN = ROOT / "wot-device" / "build" / "wot-device"
PP_BIN = HERE / "build" / "udp_pingpong"
HOST = "127.0.0.1"
CLIENT_CPU, SERVER_CPU = "0", "1"     # load generator / client, server under test


def compile_tool(name: str, *libs: str) -> Path:
    """bench/NAME.c -> bench/build/NAME when missing or older than its source."""
    src, out = HERE / f"{name}.c", HERE / "build" / name
    out.parent.mkdir(exist_ok=True)
    if not out.exists() or out.stat().st_mtime < src.stat().st_mtime:
        subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE",
                        f"-I{ROOT / 'common'}", "-I/usr/include/coap3", "-o", str(out), str(src),
                        *libs], check=True)
    return out


def build(*tools: tuple[str, ...]) -> None:
    """wot-device, gateway-emulator, udp_pingpong and the given (name, libs...) tools."""
    for d in ("gateway-emulator", "wot-device"):
        subprocess.run(["make", "-s", "-C", str(ROOT / d)], check=True, stderr=subprocess.DEVNULL)
    compile_tool("udp_pingpong", "-static")
    for t in tools:
        compile_tool(*t)


def stop(p: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL after 10 s."""
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def q(v, p: float) -> float:
    """Quantile p of v without NaNs; NaN when nothing is left."""
    v = np.asarray(v, float)
    v = v[~np.isnan(v)]
    return float(np.quantile(v, p)) if len(v) else float("nan")


def pingpong(port: int, n: int, gap_us: int) -> np.ndarray:
    """Raw UDP round trips in µs (bench/udp_pingpong.c: send call to the reply's kernel stamp),
    echo on the server core; the first 10 % dropped as warm-up."""
    echo = subprocess.Popen(["taskset", "-c", SERVER_CPU, str(PP_BIN), "echo", HOST, str(port)])
    try:
        time.sleep(0.2)
        out = subprocess.run(["taskset", "-c", CLIENT_CPU, str(PP_BIN), "ping", HOST, str(port),
                              str(n), str(gap_us)], capture_output=True, text=True,
                             timeout=n * (1 + gap_us / 1e6) + 30)
    finally:
        echo.kill()
        echo.wait()
    k = [int(line.split()[0]) for line in out.stdout.splitlines() if line.strip()]
    return np.array([x / 1e3 for x in k if x >= 0][n // 10:])


def host_line(what: str) -> str:
    l0 = os.getloadavg()
    return (f"{what} {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average "
            f"{l0[0]:.2f} {l0[1]:.2f} {l0[2]:.2f}, {os.cpu_count()} cores; client/load core "
            f"{CLIENT_CPU}, server core {SERVER_CPU}")


# ---- every bench runs to the end; every bench has a smoke shape (tests/bench) ----------------

SMOKE_HELP = ("one short step of a tiny shape, without the host lock: proves the bench runs end "
              "to end (make test runs it); its figures are not measurements")
SMOKE_BANNER = "SMOKE RUN (--smoke): a tiny shape to prove the bench runs; figures are not measurements"


class PeerFailed(RuntimeError):
    """A program a bench row needs (a third-party peer or one of ours) timed out or failed; the
    row prints n/a with ``why`` and the bench goes on."""

    def __init__(self, why: str):
        super().__init__(why)
        self.why = why


def run_lines(title: str, r: dict, digits: int = 1) -> list[str]:
    """The first lines of a bench that ran ``wotbench run`` once (fleet_bench, fleet_rd_bench):
    when, the cores, the load average before -> after, the exit, the wall time, the error."""
    la = "/".join(f"{x:.{digits}f}" for x in r["load_before"]) + " -> " + \
        "/".join(f"{x:.{digits}f}" for x in r["load_after"])
    out = [f"\n{title}, {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, "
           f"{os.cpu_count()} cores, load {la}, exit {r['rc']}, wall {r['wall_s']:.0f} s, run "
           f"dir under {r['dir']}"]
    if r.get("error"):
        out.append(f"  error: {r['error']}")
    return out


def na(why: object) -> str:
    """How a row that could not be measured is printed."""
    return f"n/a ({why})"


def _last_line(text: str | bytes | None) -> str:
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    lines = [x.strip() for x in (text or "").splitlines() if x.strip()]
    return lines[-1][:200] if lines else ""


def run_peer(argv: list[str], what: str, timeout: float, **kw) -> subprocess.CompletedProcess:
    """subprocess.run(argv) capturing text output; PeerFailed naming `what` when it does not end
    within `timeout` s or exits non-zero (with the last line it wrote to stderr)."""
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    try:
        p = subprocess.run(argv, timeout=timeout, **kw)
    except subprocess.TimeoutExpired:
        raise PeerFailed(f"{what} did not finish within {timeout:g} s") from None
    except OSError as e:
        raise PeerFailed(f"{what} could not start: {e.strerror or e}") from None
    if p.returncode != 0:
        tail = _last_line(p.stderr) or _last_line(p.stdout)
        raise PeerFailed(f"{what} exited {p.returncode}" + (f": {tail}" if tail else ""))
    return p
