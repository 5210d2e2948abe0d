"""``wotbench check`` of a config with connected device groups: the schema and cross-block
rules (read by the caller, once), the layout on this host (engines by the descriptor limit, the server's
workers), the programs (wot-fleet, wot-rpcapp, the edge server's command) and the edge
server's own check of its rendered config."""
from __future__ import annotations

import tempfile
from pathlib import Path

from wotbench.config.schema import Config
from wotbench.connected.edge import Edge
from wotbench.connected.layout import EDGE_ADDRESS, make_layout
from wotbench.connected.procs import FLEET_BIN, RPCAPP_BIN
from wotbench.errors import EnvironmentProblem


def check_connected(cfg: Config, offline: bool = False) -> int:
    print("config config: the schema and the cross-block rules (connected devices)")
    lay = make_layout(cfg)
    print(f"host   layout: {lay.describe()}")
    apps = cfg.applications
    if apps is not None and apps.transport == "websocket":
        print(f"config applications: {apps.count} on their own WebSockets to {apps.rpc_ws_path}, "
              f"each RPC one frame, {'one ack per frame' if apps.rpc_acks else 'no acks'} "
              "(docs/CONNECTED.md)")
    if offline:
        print("OK (skipped, see above: programs, edge server check)")
        return 0
    missing = [str(b) for b in (FLEET_BIN, RPCAPP_BIN) if not b.exists()]
    if missing:
        raise EnvironmentProblem(f"missing {', '.join(missing)}: run `make build`")
    print("host   programs: wot-fleet, wot-rpcapp built")
    with tempfile.TemporaryDirectory(prefix="wb-edge-check-") as tmp:
        Path(tmp).chmod(0o755)
        edge = Edge(cfg.edge_server, Path(tmp), EDGE_ADDRESS, lay.server_workers,
                    lay.worker_connections, lay.fds_per_process)
        try:
            edge.prepare()
        finally:
            edge.remove()
    print(f"host   edge server: `{' '.join(cfg.edge_server.check or ['(no check)'])}` accepted "
          f"the rendered {cfg.edge_server.config_template}")
    print("OK")
    return 0
