"""make test-cluster: a connected config split over the cells of a 2-node emulated cluster
against one nginx + nchan (docs/CONNECTED.md "Cells on a cluster"): the coordinator starts the
server once on the manager's address, each cell attaches its share of the devices with its own
wot-fleet engines and runs its share of the applications, which call only that cell's devices
(replies on the cell's own shards: no reply relayed to a cell that did not ask), and the run
directory merges every cell's RPCs (percentiles from the raw round trips) with a
verdict per cell and the server's own resources sampled on the manager; nothing is left on the
nodes. Brings its own cluster up and down (it runs before test_emulated_cluster.py, which
brings up its own)."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import layout
import swarmrun
from testkit.connected import missing_prerequisite

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "cluster" / "cluster.py"
ROOT = layout.DEFAULT_ROOT
CONFIG = Path(__file__).resolve().parent / "configs" / "connected-400.yaml"
NODES = 2


def _cluster(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args, "--root", str(ROOT)],
                          capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def state():
    why = missing_prerequisite()
    if why:
        pytest.skip(f"connected cells need the edge server on the manager: {why}")
    for b in (REPO / "wot-device" / "build" / "wot-fleet-conn", REPO / "rpc-app" / "build" /
              "wot-rpcapp"):
        if not b.exists():
            pytest.skip(f"{b} is not built (make build)")
    r = _cluster("up", "--nodes", str(NODES))
    if r.returncode != 0:
        _cluster("down")
        pytest.skip("the emulated cluster cannot be made here: "
                    + (r.stdout + r.stderr).strip().splitlines()[-1][-400:])
    yield layout.load(ROOT)
    _cluster("down")


def _run(timeout: float = 600) -> tuple[int, str, Path | None]:
    p = swarmrun.wotbench(ROOT, "run", str(CONFIG), "--out-root", str(ROOT / "test" / "reports"))
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(p.stdout), daemon=True)
    reader.start()
    try:
        p.wait(timeout)
    except subprocess.TimeoutExpired:
        p.kill()
    reader.join(30)
    text = "".join(lines)
    found = re.search(r"-> (\S+)", text)
    return p.wait(), text, Path(found.group(1)) if found else None


def test_cells_of_attached_devices_against_one_server_merged_with_a_verdict_per_cell(state):
    code, out, merged = _run()
    print(out)                                     # the coordinator's log (make test-cluster -s)
    assert code in (0, 3, 4), out
    assert "edge server on 10." in out, out          # one server, on the manager's address
    cluster = json.loads((merged / "cluster.json").read_text())
    nodes = [n.name for n in state.nodes]
    assert [c["node"] for c in cluster["cells"]] == nodes and cluster["devices"] == 400
    split = json.loads((merged / "connected-split.json").read_text())
    app_ids: dict[str, set[int]] = {}
    device_ranges: dict[str, set[int]] = {}
    for c in cluster["cells"]:
        cell = merged / c["run_dir"]
        s = json.loads((cell / "summary.json").read_text())
        assert c["devices"] == 200 and not c["verdict"]["failed"]
        assert c["verdict"]["status"] == s["verdict"]["status"]     # the cell's own verdict
        assert s["connected"]["attached_all"] and s["connected"]["attached_at_exit"] == 200
        assert s["connected"]["disconnects"]["testbed"] == 0
        assert (cell / "report.html").is_file()
        sh = split[c["node"]]
        app_ids[c["node"]] = set(range(sh["first_app"], sh["first_app"] + sh["apps"]))
        device_ranges[c["node"]] = {sh["groups"]["0"][0] + k for k in range(sh["groups"]["0"][1])} \
            | {300 + sh["groups"]["1"][0] + k for k in range(sh["groups"]["1"][1])}
        log = pd.read_csv(cell / "apps" / "rpc-log.csv")
        assert set(log["app"]) <= app_ids[c["node"]] and len(log)
        # a cell's RPCs go to its own devices; no other cell's reply reached it (one relay)
        assert set(log["device"]) <= device_ranges[c["node"]]
        assert json.loads((cell / "apps" / "rpc-summary.json").read_text())["others"] == 0
    assert set().union(*device_ranges.values()) == set(range(400))
    # every RPC of every cell, once
    rpcs = pd.read_csv(merged / "apps" / "rpc-log.csv", dtype={"id": str})
    assert rpcs["id"].is_unique
    assert len(rpcs) == sum(len(pd.read_csv(merged / c["run_dir"] / "apps" / "rpc-log.csv"))
                            for c in cluster["cells"])
    ok = rpcs[rpcs["outcome"] == "ok"]
    summary = json.loads((merged / "summary.json").read_text())
    warm = summary["run"]["test_start_mono_ns"] + 2 * 10**9
    rt = ((ok.loc[ok["sched_ns"] >= warm, "reply_ns"] - ok.loc[ok["sched_ns"] >= warm, "send_ns"])
          / 1e6).to_numpy()
    p99 = summary["overall"]["response_time_ms"]["from_sent"]["p99_ms"]
    assert p99 == pytest.approx(float(np.percentile(rt, 99)), rel=1e-6)   # from the union
    assert summary["verdict"]["status"] == cluster["verdict"]["status"]   # the worst cell's
    assert summary["connected"]["devices"] == 400
    # the edge server's own CPU and memory, sampled on the manager where it runs (its whole
    # tree: master + workers), in the merged summary as a single-host run's sut_resources
    assert (merged / "monitor" / "sut.csv").is_file()
    sut = summary["sut_resources"]
    edge = sut["components"]["edge-server"]
    assert set(sut["components"]) == {"edge-server"} and edge["role"] == "server", sut
    assert edge["test"]["cpu_cores"] > 0 and edge["test"]["rss_mean_bytes"] > 0, edge
    assert sut["total"]["cpu_cores"] == edge["test"]["cpu_cores"]
    assert not any((merged / c["run_dir"] / "monitor" / "sut.csv").exists()
                   for c in cluster["cells"])            # the server is in no cell
    assert 'id="table-connected-sut-resources"' in (merged / "report.html").read_text()
    assert (merged / "edge" / "attached-devices-nchan.conf").is_file()
    # least privilege on the manager too: who the server's processes ran as
    procs = json.loads((merged / "edge" / "privileges.json").read_text())
    assert {p["name"] for p in procs} == {"nginx"} and len(procs) >= 2, procs
    assert all(p["cap_eff"] == "0000000000000000" for p in procs), procs
    assert all(p["uid"] == p["euid"] == 65534 for p in procs), procs
    print(f"edge server: {edge['test']['cpu_cores']:.3f} cores, RSS mean "
          f"{edge['test']['rss_mean_bytes'] / 2**20:.1f} MiB; {len(procs)} processes, all uid "
          "65534 with CapEff 0")
    assert (merged / "report.html").is_file() and (merged / "report.md").is_file()
    print((merged / "report.md").read_text())
    before = (merged / "report.html").stat().st_mtime_ns   # `wotbench report` draws it again
    r = subprocess.run([sys.executable, "-m", "wotbench.cli", "report", str(merged)], cwd=REPO,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    html = (merged / "report.html").read_text()
    assert (merged / "report.html").stat().st_mtime_ns > before
    assert f"verdict {summary['verdict']['status']} (exit code" in html   # the run's
    c = summary["connected"]
    print(f"attach {c['attach_s']:.1f} s; devices side {c['devices_side']}; applications side "
          f"{c['apps_side']}; disconnects {c['disconnects']}; testbed share "
          f"{c['rpc']['testbed_share']}; engine part {c['rpc']['engine_part']}")
    deadline = time.monotonic() + 60     # Swarm removes the tasks' containers asynchronously
    for n in state.nodes:
        for what in ("ps", "service"):
            while swarmrun.ours(n, what) and time.monotonic() < deadline:
                time.sleep(1)
            assert swarmrun.ours(n, what) == [], f"{n.name}: {what} left"


def test_a_sweep_over_the_attached_devices_on_swarm_names_the_unfaithful_node(state):
    """wotbench sweep --vary devices[0].count on swarm: each point one merged connected run
    across both cells; its summary is the merged one, and a point whose verdict is not
    trustworthy names the node whose cell decided it (from cluster.json)."""
    code, out, secs, sweep_dir = swarmrun.sweep(ROOT, CONFIG, "devices[0].count=100,300",
                                                "sweep-connected-cells-")
    print(f"sweep of 2 points on swarm: exit {code} in {secs:.0f} s")
    assert code in (0, 3, 4) and sweep_dir is not None, out
    sweep = json.loads((sweep_dir / "sweep.json").read_text())
    assert [pt["status"] for pt in sweep["points"]] == ["done", "done"], out
    for pt in sweep["points"]:
        run = sweep_dir / pt["run_dir"]
        cluster = json.loads((run / "cluster.json").read_text())
        summary = json.loads((run / "summary.json").read_text())
        count = pt["overrides"]["devices[0].count"]
        assert summary["run"]["backend"] == "swarm"
        assert summary["connected"]["devices"] == cluster["devices"] == count + 100
        assert summary["verdict"]["status"] == cluster["verdict"]["status"] == pt["verdict"]
        assert summary["overall"]["outcomes"]["ok"] > 0
        bad = cluster["verdict"]["worst_node"]
        assert (pt["host"] or {}).get("node") == bad       # named exactly when unfaithful
        print(f"  {pt['id']} devices[0].count={count}: {pt['verdict']}, "
              f"{summary['overall']['requests']} RPCs, round trip p50 "
              f"{summary['overall']['response_time_ms']['from_sent']['p50_ms']:.2f} ms; host: "
              f"{pt['host']}")
    assert (sweep_dir / "report.html").is_file()
