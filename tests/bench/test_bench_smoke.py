"""Every benchmark in bench/ runs end to end, in make test: each script's --smoke shape (one short
step of a tiny shape, real binaries and peers, no host lock) must exit 0, say it was a smoke run,
print every row named below and no row as "n/a (...)" (a peer that failed). Nothing here judges
a figure: targets belong to `make bench`, on a quiet host.

Adding a benchmark: give the script a --smoke flag (testkit/bench.py: SMOKE_HELP, SMOKE_BANNER;
a failed peer's row printed with na(why)) and add one line to SMOKES below: the script, the
programs it needs (a missing one skips the test, naming it) and a pattern for each row it must
print. test_every_bench_has_a_smoke_run fails for a bench/*_bench.py without its line."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from testkit.bench import SMOKE_BANNER

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
pytestmark = pytest.mark.bench


@dataclass(frozen=True)
class Smoke:
    script: str
    rows: tuple[str, ...]                  # a regex per row the run must print (re.M)
    needs: tuple[str, ...] = ()            # programs on PATH; "docker": a daemon that answers
    args: tuple[str, ...] = ()             # beyond --smoke
    na_rows: tuple[str, ...] = field(default=())   # rows that must print n/a (a forced failure)
    long: bool = False                     # 12 s or more: make test-long's, to keep make test near 10 min

    @property
    def id(self) -> str:
        return self.script.removesuffix(".py") + ("-" + "-".join(self.args) if self.args else "")


NUM = r"[\d.,]+"
SMOKES = [
    Smoke("ge_bench.py", (rf"^bare UDP sendto loop\s+{NUM}$", rf"^bare libcoap client CON, 32 inflt\s+{NUM}$",
                          rf"^GE NON 50k/s\s+{NUM}\s+{NUM}", rf"^GE CON 50k/s\s+{NUM}\s+{NUM}",
                          rf"^NON\s+\d+\s+{NUM}", rf"^ 10k req/s\s+{NUM}\s+{NUM}")),
    Smoke("device_bench.py", (rf"^sleep\s+1ms \|\s+{NUM}", rf"^busy\s+5ms \|\s+{NUM}",
                              rf"^0 µs resource, 1 worker thread\(s\), 64 in flight \(NON\): {NUM} responses/s")),
    Smoke("floor_bench.py", (rf"^\| loopback \| UDP ping-pong, same gap as the requests \| \d+ \| {NUM}",
                             rf"^\| loopback \| R − S, 5000 µs busy, --response auto \| \d+ \| {NUM}",
                             rf"^  busy : R_d median {NUM}", rf"^  sleep: R_d median {NUM}")),
    Smoke("dtls_device_bench.py", (rf"^wot-device\s+DTLS, one session\s+{NUM}\s+{NUM}",
                                   rf"^coap-server-openssl\s+DTLS, new session per request\s+{NUM}"),
          needs=("coap-server-openssl",)),
    Smoke("observe_bench.py", (rf"^wot-device\s+non\s+rate\s+1\s+1000\s+{NUM}",
                               rf"^libcoap\s+non\s+fan-out\s+10\s+1000\s+{NUM}",
                               rf"^NON rate\s+{NUM}", r"^cross-check: coap-client-notls -s 1 .* printed \d+ values",
                               r"^cross-check: aiocoap observer .* \d+ notifications"),
          needs=("coap-server-notls", "coap-client-notls")),
    Smoke("blockwise_bench.py", (rf"^get\s+1\s+1024\s+1 GE -> wot-device\s+\d+\s+\d+\s+{NUM}",
                                 rf"^put\s+1\s+1024\s+1 libcoap -> coap-server\s+\d+\s+\d+\s+{NUM}",
                                 rf"^GE -> wot-device, 1 % each way\s+get\s+1\s+\d+\s+\d+\s+{NUM}",
                                 rf"^libcoap -> coap-server, 1 % server egress\s+get\s+1\s+\d+"),
          needs=("coap-server-notls",)),
    Smoke("dtls_bench.py", (rf"^handshake p50 \(µs\)\s+{NUM}\s+{NUM}", r"^handshakes ok\s+\d+/10\s+\d+/10",
                            rf"^coap-client-openssl invocation coaps−coap .*\s+-?{NUM} \(",
                            rf"^max req/s DTLS reuse\s+\d+\s+{NUM}", r"^GE per-request steps:  250/s: \d+/50 ok"),
          needs=("coap-server-openssl", "coap-client-openssl")),
    Smoke("closed_loop_bench.py", (rf"^\s+10\s+{NUM}\s+{NUM}\s+{NUM}",
                                   r"^200 GE clients on core 0 \(think exp 20 ms, timeout 200 ms\): \d+ answered",
                                   r"^targets: GE/libcoap"),
          needs=("coap-server-notls",)),
    # the same bench when its peers cannot finish in time: n/a rows, and the bench goes on
    Smoke("closed_loop_bench.py", (r"^targets: GE/libcoap",), needs=("coap-server-notls",),
          args=("--peer-grace-s", "0"),
          na_rows=(r"^\s+10 n/a \(gateway-emulator did not finish within 0.5 s\); "
                   r"n/a \(the libcoap client \(cl_libcoap\) did not finish within 0.5 s\)",
                   r"^200 GE clients on core 0: n/a \(gateway-emulator did not finish")),
    Smoke("push_bench.py", (rf"^1 device\s+1000\s+{NUM}\s+{NUM}", rf"^pod of 4\s+1000\s+{NUM}\s+{NUM}",
                            rf"^GE hybrid\s+1000\s+{NUM}\s+{NUM}", rf"^GE busy\s+1000\s+{NUM}\s+{NUM}",
                            r"^GE busy\s+\d+$")),
    Smoke("http_bench.py", (rf"^\s+1\s+{NUM}\s+{NUM}\s+{NUM}", rf"^\s+GE\s+{NUM}\s+{NUM}\s+{NUM}\s+{NUM}",
                            r"^\s+wrk2 not run in a smoke run"),
          needs=("nginx", "wrk")),
    Smoke("fleet_engine_bench.py", (rf"^\s+300 devices in 1 process\(es\) x 2 loops: ready after\s+{NUM} s; RSS",
                                    r"^  GE 0 outcomes \{'ok': 300, 'error': 0, 'timeout': 0",
                                    rf"^  timer lateness end-due : p50\s+{NUM}")),
    Smoke("fleet_analysis_bench.py", (r"^generated 1000 devices", rf"^run 1: analyze {NUM} s")),
    Smoke("fleet_bench.py", (r"^  devices 300 in 1 engines; warm-up: (\d+) of \1 targets answered",
                             r"^  requests \d+, lost in the testbed 0, ",
                             rf"^  service-time error \(end - due\) over the fleet, test window: n \d+, p50 {NUM}",
                             r"^  core isolation: off$",
                             r"^  stop [\d.]+ s, teardown [\d.]+ s, left behind: none$"),
          needs=("docker",)),
    Smoke("fleet_fidelity_bench.py", (r"^\| 10 sleep \| process #1 \| [\d.]+ / [\d.]+ / [\d.]+ \| .* \| 0 \| [a-z_]+ \|",
                                      r"^\| 10 sleep \| fleet #1 \| [\d.]+ / [\d.]+ / [\d.]+ \| .* \| 0 \| [a-z_]+ \|",
                                      r"^\| 10 sleep \| fleet \| 1 \| [\d.]+ / "), long=True),
    Smoke("fleet_cluster_bench.py", (r"^\| 1000000 \| 4 nodes, 17 GEs in the run \| wotbench check exit 0: OK",)),
    Smoke("fleet_rd_bench.py", (r"^  devices 300 in 1 engines, test [\d.]+ s, verdict [a-z_]+, failures 0, lost in the testbed 0",
                                rf"^  register: 300 due \(\d+/s offered\), 300 sent, outcomes \{{'ok': 300\}}",
                                rf"^  engines' send lag \(test sends\): p50 {NUM} µs",
                                r"^  gave up first: "),
          needs=("coap-server-notls",), long=True),
    Smoke("connected_bench.py", (r"^attach: every device attached after [\d.]+ s \(300 devices",
                                 rf"^host memory per attached device: (≥ )?{NUM} KiB",
                                 r"^  testbed-attributed connection losses: 0$",
                                 rf"^RPCs: \d+ applications, \d+ scheduled, \d+ sent; per second after the "
                                 rf"warm-up: offered {NUM}, sent {NUM}, answered {NUM}; ok \d+",
                                 rf"^  round trip \(app send -> reply\) p50 {NUM} ms",
                                 r"^where the time goes \(\d+ answered RPCs; ms\)",
                                 rf"^  server_in +{NUM} / {NUM} / {NUM} / {NUM}$",
                                 rf"^  slowest 1 % \(\d+ RPCs, >= {NUM} ms, mean {NUM} ms\): "
                                 rf"server_in {NUM} %"),
          needs=("nginx",)),
    Smoke("connected_wsapps_bench.py", (r"^devices attached: 100 of 100 at exit",
                                        rf"^RPCs from 20 applications: \d+ scheduled, .*outcomes \{{'ok': \d+, 'timeout': 0",
                                        rf"^round trip from the send: +{NUM} / {NUM} / {NUM}",
                                        r"^testbed share of the round trip: p50 [\d.]+ %",
                                        rf"^server -> device -> server \(kernel arrival -> reply write\): {NUM}",
                                        rf"^  server_in +{NUM} / {NUM} / {NUM} / {NUM}$"),
          needs=("webdis-debian13", "redis-server"), long=True),
    Smoke("notify_bench.py", (r"^\| 50 \| sse-a \| 50 \| 50 \| 0 \| 0 \| \d+ \| [\d.]+ \| [\d.]+ \| [\d.]+ \|$",
                              r"^\| 50 \| sse-b \| 50 \| 50 \| 0 \| 0 \| "),
          needs=("nginx",)),
    Smoke("scale_bench.py", (r"^\| 4 \| \d+ \| [\d.]+ \| [\d.]+ \| [\d.]+ \| [\d.]+ \| \d+ \| \d+ \| .* \| [a-z_]+ \| "
                               r"[\d.]+ \| [\d.]+ \| none \| .* \| [034] \|$",),
          needs=("docker",), long=True),
    Smoke("faults_bench.py", (r"^\| GE killed \| `docker kill` of ge-0 1 s into the test \| FAILURE ge-0: "
                              r".*\| 3 \| 0 containers, 0 networks, 0 processes \| .*GE request rows",),
          needs=("docker",), long=True),
]


def _missing(needs: tuple[str, ...]) -> list[str]:
    out = []
    for n in needs:
        if n == "docker":
            if shutil.which("docker") is None or subprocess.run(
                    ["docker", "info"], capture_output=True).returncode != 0:
                out.append("a Docker daemon (`docker info` fails)")
        elif shutil.which(n) is None and not (n == "nginx" and Path("/usr/sbin/nginx").exists()):
            out.append(n)
    return out


def test_every_bench_has_a_smoke_run():
    scripts = {p.name for p in BENCH.glob("*_bench.py")}
    covered = {s.script for s in SMOKES}
    assert scripts - covered == set(), (
        "benchmarks without a smoke run: give each a --smoke flag and a line in SMOKES "
        "(tests/bench/test_bench_smoke.py)")
    assert covered - scripts == set(), "SMOKES names scripts that are not in bench/"


@pytest.fixture
def bench_tmp():
    """The bench's TMPDIR, removed after it: every temporary file and run directory it makes
    goes there. World-traversable (not pytest's 0700 tmp_path): nginx's workers and the
    containers' uid 65534 read files the bench puts there."""
    d = Path(tempfile.mkdtemp(prefix="wb-bench-smoke-"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("smoke", [pytest.param(s, marks=[pytest.mark.long] if s.long else [])
                                   for s in SMOKES], ids=lambda s: s.id)
def test_bench_smoke(smoke: Smoke, bench_tmp):
    missing = _missing(smoke.needs)
    if missing:
        pytest.skip(f"{smoke.script} needs {', '.join(missing)}")
    env = {**os.environ, "TMPDIR": str(bench_tmp), "PYTHONUNBUFFERED": "1"}
    p = subprocess.run([sys.executable, str(BENCH / smoke.script), "--smoke", *smoke.args],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    out = p.stdout
    assert p.returncode == 0, f"exit {p.returncode}\n{out[-3000:]}\n{p.stderr[-3000:]}"
    assert "Traceback" not in out + p.stderr, p.stderr[-3000:]
    assert out.splitlines()[0] == SMOKE_BANNER, out[:500]
    absent = [r for r in smoke.rows + smoke.na_rows if not re.search(r, out, re.M)]
    assert not absent, f"rows not printed: {absent}\n--- its output:\n{out[-4000:]}"
    na_lines = [ln for ln in out.splitlines() if "n/a (" in ln]
    unexpected = [ln for ln in na_lines if not any(re.search(r, ln) for r in smoke.na_rows)]
    assert not unexpected, f"rows the smoke run could not measure: {unexpected}"
