"""Notifications end to end (issue 35): `wotbench run` with a `notify:` block starts the
notification sink before T0 with an SSE and a WebSocket subscription to nginx's nchan module (a
`server:` device, process backend), the gateway emulator publishes updates carrying
urn:upd:{{seq}}, and summary.json `notify` and the report's Notifications section give every
subscriber's update -> notification latency with no update lost; a subscription the server
does not serve stops the run before T0 with the sink's message."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from e2e_support import NEEDS_HTTP, REPO, Harness, run_dir_of
from testkit.nchan import nchan_available

pytestmark = [
    pytest.mark.skipif(not nchan_available(), reason="nginx's nchan module is not installed "
                       "(apt-get install libnginx-mod-nchan)"),
]+NEEDS_HTTP
NGINX = ["nginx", "-e", "stderr", "-c", "{config}", "-p", "{scratch}/"]


def _config(tmp_path: Path, sub_path: str = "sub") -> Path:
    cfg = {"name": "notify", "backend": "process", "duration_s": 3, "seed": 2,
           "contention_detector": {"enabled": False}, "monitor": {"enabled": False},
           "devices": [{"group": "pubsub", "protocol": "http",
                        "server": {"command": NGINX,
                                   "config_template": str(REPO / "configs" / "notify-nchan.conf")},
                        "paths": ["pub"], "methods": {"POST": 1},
                        "rit": {"dist": "deterministic", "mean": 20}}],
           "gateways": {"http": {"body_template": '{"id": "urn:upd:{{seq}}"}'}},
           "notify": {"marker": "urn:upd:", "accept": "text/event-stream", "subscribers": [
               {"name": "sse", "kind": "stream", "device": "pubsub-0", "path": sub_path},
               {"name": "ws", "kind": "websocket", "device": "pubsub-0", "path": "ws"}]}}
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.mark.long   # a whole run with nginx and the sink: about a minute on this host
def test_updates_matched_to_their_notifications(harness_env, tmp_path):
    h = Harness(["run", str(_config(tmp_path)), "--out-root", str(tmp_path / "reports")],
                harness_env, tmp_path)
    rc = h.wait(150)
    rd = run_dir_of(tmp_path)
    s = json.loads((rd / "summary.json").read_text())
    assert rc in (0, 3), h.output
    n = s["notify"]
    assert n["marker"] == "urn:upd:" and [x["name"] for x in n["subscribers"]] == ["sse", "ws"]
    for x in n["subscribers"]:
        assert x["updates"] == 150 and x["notified"] == 150 and x["lost"] == 0, x
        assert 0 < x["latency_ms"]["p50"] < 100 and x["kernel_share"] == 1.0
    assert "Notifications: update → notification" in (rd / "report.html").read_text()
    assert (rd / "sink" / "notifications.csv").exists()


def test_a_subscription_the_server_does_not_serve_stops_the_run(harness_env, tmp_path):
    h = Harness(["run", str(_config(tmp_path, "missing")), "--out-root",
                 str(tmp_path / "reports")], harness_env, tmp_path)
    rc = h.wait(150)
    out = h.output
    assert rc == 1, out
    assert "notify: the notification sink did not get its subscriptions" in out
    assert "--stream sse=http://" in out and "answered 'HTTP/1.1 200'" not in out
