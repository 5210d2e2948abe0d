"""The system under test's own CPU and memory, end to end: a coap-server-notls under load as a
process-backend device and as a Docker container, each ending with sut_resources in
summary.json and the table in the report; and a short process-backend sweep with --repeats
whose report gives mean ± 95 % CI per point, the SUT's resources among them."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from e2e_support import Harness, run_dir_of

pytestmark = pytest.mark.slow
COAP_SERVER = ["coap-server-notls", "-A", "{address}", "-p", "{port}"]
needs_libcoap = pytest.mark.skipif(not shutil.which("coap-server-notls"),
                                   reason="coap-server-notls not installed (apt-get install libcoap3-bin)")


def _config(tmp_path: Path, name: str, **extra) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({
        "name": name, "duration_s": 12, "seed": 3,
        "contention_detector": {"calibration_s": 2, "interval_s": 0.25},
        "devices": [{"group": "coap", "count": 2, "server": {"command": COAP_SERVER},
                     "paths": ["time", ""], "rit": {"dist": "exponential", "mean": 10}}],
        **extra}))
    return path


def _check(run_dir: Path, source: str) -> None:
    s = json.loads((run_dir / "summary.json").read_text())["sut_resources"]
    assert s is not None, "no sut_resources in summary.json"
    assert set(s["components"]) == {"coap-0", "coap-1"}
    for c in s["components"].values():
        assert (c["role"], c["group"], c["source"]) == ("server", "coap", source)
        assert len(c["windows"]) == 2                  # 12 s in 10 s windows
        # 100 req/s each for 12 s: the server used CPU, and libcoap's RSS is > 500 kB
        assert 0 < c["test"]["cpu_cores"] < 1.0
        assert c["test"]["rss_peak_bytes"] > 500_000
        assert all(w["cpu_cores"] is not None and w["samples"] >= 2 for w in c["windows"])
    assert s["sampling"] and "% of a core" in s["sampling"]
    html = (run_dir / "report.html").read_text()
    assert "Its own resources" in html and "table-sut-windows" in html


@pytest.mark.long   # make test-long (CI runs it after make test): a real run of 10-30 s
@needs_libcoap
def test_process_backend_server_resources(harness_env, tmp_path):
    h = Harness(["run", str(_config(tmp_path, "sut-proc", backend="process")),
                 "--out-root", str(tmp_path / "reports")], harness_env, tmp_path)
    rc = h.wait(180)
    assert rc in (0, 3), h.output
    _check(run_dir_of(tmp_path), "proc")


@pytest.mark.docker
@pytest.mark.long   # make test-long (CI runs it after make test): ~30 s of a real run
@needs_libcoap
def test_docker_server_resources(harness_env, tmp_path):
    h = Harness(["run", str(_config(tmp_path, "sut-docker")), "--out-root",
                 str(tmp_path / "reports")], harness_env, tmp_path)
    rc = h.wait(240)
    assert rc in (0, 3), h.output
    _check(run_dir_of(tmp_path), "cgroup")


@pytest.mark.long   # make test-long (CI runs it after make test): four real runs
@needs_libcoap
def test_sweep_with_repeats_over_a_server(harness_env, tmp_path):
    cfg = _config(tmp_path, "sut-sweep", backend="process", duration_s=4)
    h = Harness(["sweep", str(cfg), "--vary", "devices[0].rate=20,50", "--repeats", "2",
                 "--out-root", str(tmp_path / "reports"), "--no-progress"], harness_env, tmp_path)
    rc = h.wait(600)
    assert rc in (0, 3), h.output
    [d] = (tmp_path / "reports").iterdir()
    res = json.loads((d / "results.json").read_text())
    assert [p["point"] for p in res["points"]] == ["p00", "p01", "p01-r1", "p00-r1"]
    for s, rate in zip(res["settings"], (20, 50)):
        assert s["done"] == 2 and len(s["verdicts"]) == 2
        tput = s["metrics"]["throughput_rps"]
        # 2 servers at `rate` req/s each; the interval is there with 2 repeats
        assert tput["n"] == 2 and tput["half_width"] is not None
        assert tput["mean"] == pytest.approx(2 * rate, rel=0.3)
        assert s["metrics"]["sut_cpu_cores"]["n"] == 2
    html = (d / "report.html").read_text()
    assert "Throughput vs devices[0].rate" in html and "mean ± 95 % confidence interval" in html
