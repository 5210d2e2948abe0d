"""HTTP under test end to end (issue 22): Debian's nginx as the devices of a `protocol: http`
group, driven open loop by the gateway emulator over keep-alive connections, with a config
rendered per device and checked by `nginx -t`; status codes kept (200, 404, 503), 503 counted
as refusals and 404 as the system under test's errors, the SLOs judged, nginx's CPU and memory
sampled and the report's HTTP section written; nothing left behind. Process backend (nginx
from this host) and Docker (nginx packed into a FROM scratch image, read-only root, a tmpfs for
its scratch files)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from e2e_support import NEEDS_HTTP, REPO, Harness, labelled, run_dir_of
from wotbench.runner.teardown.cleanup import leftover_processes

pytestmark = NEEDS_HTTP
NGINX = ["nginx", "-e", "stderr", "-c", "{config}", "-p", "{scratch}/"]
CHECK = ["nginx", "-t", "-q", "-e", "stderr", "-c", "{config}", "-p", "{scratch}/"]


def _template(tmp_path: Path) -> Path:
    """The example's nginx config with a location that answers 503 (a full server)."""
    t = (REPO / "configs" / "http-nginx.conf").read_text().replace(
        "location / { return 404; }", "location /busy/ { return 503; }\n    location / { return 404; }")
    assert "/busy/" in t
    out = tmp_path / "nginx.conf"
    out.write_text(t)
    return out


def _run(harness_env, tmp_path: Path, backend: str) -> tuple[int, Harness, dict]:
    # short, no CD and no collectl: the default suite's time (the CD is HTTP-agnostic: a CoAP
    # wot-device of its own, checked by every other e2e test)
    cfg = {"name": f"http-{backend}", "backend": backend, "duration_s": 2, "seed": 5,
           "contention_detector": {"enabled": False}, "monitor": {"enabled": False},
           "devices": [{"group": "web", "count": 2, "protocol": "http",
                        "server": {"command": NGINX, "config_template": str(_template(tmp_path)),
                                   "check": CHECK},
                        "paths": ["sensors/t", "sensors/h", "missing", "busy/x"],
                        "methods": {"GET": 0.7, "POST": 0.3}, "request_payload_bytes": 16,
                        "rit": {"dist": "deterministic", "mean": 20}}],
           "gateways": {"http": {"connections": 2, "headers": ["Content-Type: application/json"],
                                 "body_template": '{"d": {{device}}, "p": "{{payload}}"}'}},
           "slo": {"p95_ms": 2000}}
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    h = Harness(["run", str(path), "--out-root", str(tmp_path / "reports")], harness_env, tmp_path)
    rc = h.wait(150)
    return rc, h, json.loads((run_dir_of(tmp_path) / "summary.json").read_text())


def _check(rc: int, h: Harness, s: dict, tmp_path: Path) -> str:
    assert rc in (0, 3, 4), h.output
    b = s["http"]
    codes = b["status_codes"]
    assert set(codes) == {"200", "404", "503"}, b
    assert sum(codes.values()) == b["requests"] == s["loss"]["sent"], (b, s["loss"])
    assert b["connection"] == "keep-alive" and b["pool"]["connections"] == 4
    assert b["pool"]["connects"] >= 4 and b["pool"]["protocol_errors"] == 0
    # the codes are kept and attributed: 503 a refusal, 404 the server's error
    assert s["loss"]["by_cause"]["refused_503"] == codes["503"]
    assert s["loss"]["by_cause"]["sut_error"] == codes["404"]
    assert s["overall"]["outcomes"]["ok"] == codes["200"]
    assert s["slo"] is not None and s["slo"]["objectives"], s["slo"]
    assert set(s["sut_resources"]["components"]) == {"web-0", "web-1"}
    rd = run_dir_of(tmp_path)
    assert "nginx.conf" in os.listdir(rd / "devices" / "web-0")
    html = (rd / "report.html").read_text()
    assert 'id="http"' in html and 'id="table-http-status"' in html
    return json.loads((rd / "run.json").read_text())["run_id"]


@pytest.mark.long   # make test-long (CI runs it after make test): a real run of 10-30 s
@pytest.mark.slow
def test_nginx_as_process_devices(harness_env, tmp_path):
    rc, h, s = _run(harness_env, tmp_path, "process")
    run_id = _check(rc, h, s, tmp_path)
    assert leftover_processes(run_id) == []


@pytest.mark.long   # make test-long (CI runs it after make test): 5-15 s of waiting
@pytest.mark.slow
@pytest.mark.docker
def test_nginx_in_containers(harness_env, tmp_path):
    rc, h, s = _run(harness_env, tmp_path, "docker")
    run_id = _check(rc, h, s, tmp_path)
    assert labelled(run_id) == ([], [])
