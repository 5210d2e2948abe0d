"""Which webdis a test or a benchmark of applications on their own WebSockets can run
(docs/CONNECTED.md "webdis"): Debian 12's 0.1.9 closes an application's WebSocket after its
first RPC, so they need `webdis-debian13` (Debian 13's 0.1.22, scripts/webdis-debian13.sh) or
a webdis named by WOTBENCH_WEBDIS."""
from __future__ import annotations

import os
import shutil

WHY_MISSING = ("webdis-debian13 is not installed (Debian 12's webdis 0.1.9 closes an "
               "application's WebSocket after its first RPC): as root run "
               "bash scripts/webdis-debian13.sh (make build does; it needs deb.debian.org)")


def websocket_webdis() -> tuple[str | None, str]:
    """(the webdis program to run, why there is none)."""
    exe = os.environ.get("WOTBENCH_WEBDIS") or shutil.which("webdis-debian13")
    return (exe, "") if exe else (None, WHY_MISSING)
