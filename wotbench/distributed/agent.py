"""Entry point of the cell-agent image: ``launch`` (the Swarm task), ``cell`` (the cell
container it starts), ``clean`` (a task of ``wotbench clean --cluster``). Configured by the
environment the service gives: WB_RUN, WB_NODE (``{{.Node.Hostname}}``), WB_COORD (the
coordinator's address:port), WB_WORK (the cells' work directory on the node), WB_SOCK (the
node's Docker socket, on the node), WB_IMAGE (this image's tag)."""
from __future__ import annotations

import os
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    verb = argv[0] if argv else ""
    from wotbench.errors import WotbenchError
    try:
        if verb == "launch":
            from wotbench.distributed import launcher
            return launcher.main()
        if verb == "cell":
            from wotbench.distributed import cell
            return cell.main(os.environ["WB_COORD"], os.environ["WB_NODE"],
                             Path(os.environ["WB_WORK"]))
        if verb == "clean":
            from wotbench.distributed import nodeclean
            return nodeclean.main(os.environ["WB_NODE"], Path(os.environ["WB_WORK"]),
                                  os.environ.get("WB_FORCE") == "1",
                                  set(filter(None, os.environ.get("WB_LIVE", "").split(","))))
    except WotbenchError as e:
        print(f"wotbench agent: error: {e}", file=sys.stderr, flush=True)
        return e.exit_code
    print(f"usage: agent launch|cell|clean (got {argv})", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
