"""Update -> notification over CoAP end to end (issue 35): the gateway emulator PUTs payloads
carrying urn:upd:{{seq}} (gateways.payload_template) to libcoap's coap-server-notls's
observable example_data, and the notification sink observes it (GET with Observe: 0): the
notifications that arrive are matched to their updates (summary.json `notify`). A slow
update rate, so the server notifies each state before the next replaces it."""
from __future__ import annotations

import shutil

import pytest

from e2e_support import run_config

pytestmark = pytest.mark.skipif(not shutil.which("coap-server-notls"),
                                reason="coap-server-notls not installed (apt-get install libcoap3-bin)")


@pytest.mark.long   # a whole run with coap-server and the sink
def test_coap_updates_matched_to_their_observe_notifications(harness_env, tmp_path):
    cfg = {"name": "notify-coap", "backend": "process", "duration_s": 3, "seed": 4,
           "contention_detector": {"enabled": False}, "monitor": {"enabled": False},
           "devices": [{"group": "srv", "server": {"command": [
               "coap-server-notls", "-A", "{address}", "-p", "{port}"]},
               "paths": ["example_data"], "methods": {"PUT": 1},
               "rit": {"dist": "deterministic", "mean": 50}}],
           "gateways": {"timeout_ms": 2000,
                        "payload_template": '{"id":"urn:upd:{{seq}}","t":{{time_ns}}}'},
           "notify": {"marker": "urn:upd:", "subscribers": [
               {"name": "obs", "kind": "observe", "device": "srv-0", "path": "example_data"}]}}
    rc, h, rd, s = run_config(cfg, harness_env, tmp_path)
    assert rc in (0, 3), h.output
    (x,) = s["notify"]["subscribers"]
    assert x["updates"] == 60 and x["notified"] >= 0.9 * 60 and x["unknown_ids"] == 0, x
    assert 0 < x["latency_ms"]["p50"] < 50, x
