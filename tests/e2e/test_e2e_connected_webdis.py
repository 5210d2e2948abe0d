"""`wotbench run` of connected devices through a second real relay (docs/CONNECTED.md
"webdis"): Debian's webdis + redis-server from configs/attached-devices-webdis.yaml. Chunked
devices subscribe with GET /SUBSCRIBE/rpc.d and reply with PUT /PUBLISH/reply.k; applications
publish each RPC with GET /PUBLISH/rpc.d/rpc:<id> (the id in the path) and take the replies on
WebSockets that subscribe by message. Every RPC is matched by its id through webdis's JSON
wrapping and escaping, with nothing of that format assumed beyond the configured markers.
Skips, saying why, without webdis, redis-server or wslay."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from testkit.nginx import free_tcp_port

ROOT = Path(__file__).resolve().parents[2]


def _missing() -> str | None:
    for prog, pkg in (("webdis", "webdis"), ("redis-server", "redis-server")):
        if not shutil.which(prog):
            return f"{prog} is not installed (apt-get install {pkg})"
    if not Path("/usr/include/wslay/wslay.h").exists():
        return "wslay is not installed (apt-get install libwslay-dev; make build does)"
    return None


why = _missing()
pytestmark = pytest.mark.skipif(why is not None, reason=why or "")


@pytest.mark.long
def test_rpcs_through_webdis_are_matched_by_the_id_in_the_path(tmp_path):
    tmp_path.chmod(0o755)
    c = yaml.safe_load((ROOT / "configs" / "attached-devices-webdis.yaml").read_text())
    c["name"] = "connected-webdis-e2e"
    c["duration_s"] = 6
    c["devices"][0].update(count=100)
    c["devices"][0]["connection"].update(heartbeat_s=1, attach_headers={"X-Device": "{device}"})
    c["applications"].update(count=20, think_ms=[50, 150], warmup_s=2, reply_shards=4)
    c["edge_server"].update(config_template=str(ROOT / "configs" / "attached-devices-webdis.json"),
                            port=free_tcp_port("127.0.0.1"))
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(c))
    r = subprocess.run([str(Path(sys.executable).parent / "wotbench"), "run", str(cfg),
                        "--out-root", str(tmp_path / "r")],
                       capture_output=True, text=True, timeout=180, cwd=ROOT)
    assert r.returncode in (0, 3), r.stdout + r.stderr
    (d,) = (tmp_path / "r").iterdir()
    s = json.loads((d / "connected-summary.json").read_text())
    assert s["attached_all"] and s["attached_at_exit"] == 100, s
    assert sum(s["disconnects"].values()) == 0 and sum(s["testbed"].values()) == 0, s
    rpc = s["rpc"]
    assert rpc["rpcs"] > 100 and rpc["ok"] == rpc["rpcs"] and rpc["timeout"] == 0, rpc
    app = json.loads((d / "apps" / "rpc-summary.json").read_text())
    assert app["unmatched"] == 0 and app["late_replies"] == 0, app
    # heartbeats PUT to the reply channels arrive as messages without an RPC id
    assert app["events_in"] > 0 and app["post_2xx"] == app["rpcs"], app
    (engine,) = (d / "engines").iterdir()
    dev = json.loads((engine / "out" / "conn-summary.json").read_text())
    assert dev["rpcs_in"] == rpc["rpcs"] and dev["posts_rejected"] == 0, dev
    # webdis's subscription confirmation is each device's first message: no RPC id in it
    assert dev["no_id"] >= 100 and dev["heartbeats"] >= 100 * 3, dev
