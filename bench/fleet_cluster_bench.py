#!/usr/bin/env python3
"""wot-fleet engines on the emulated cluster (issue 29 part 4: toward 10^6 devices).

Brings up its own emulated Swarm (scripts/cluster/cluster.py with WBC_PREFIX=wbcff, its own
state directory and address block, so it never meets make test-cluster's), then for each size
in --sizes (ascending; it stops at the first that fails) runs configs/fleet-100k.yaml with
`backend: swarm`, devices[0].count = the size, a low per-device rate (--rit-s) and enough
gateway emulators (the run's; each cell runs its share's part, wotbench.distributed.cellges),
and prints: devices started (the merged run's), engines, GEs per cell, requests, lost in the
testbed (sum of the cells' summaries), the run's verdict and each cell's, the host's memory used
at the peak per device (MemAvailable, everything on the host), the conntrack and neighbour-table
peaks, the neighbour table's refusals (table_fulls) and the backlog drops during the run, and
the wall time; then removes the cluster (also on failure or Ctrl-C). Asserts nothing.

Needs root (namespaces, dockerd) and Docker; holds the host lock. Raises nf_conntrack_max and
the neighbour table's thresholds for the run when the sizes need them (the emulated nodes share
this host's kernel and its tables; the cells are not privileged) and restores them after.

    .venv/bin/python bench/fleet_cluster_bench.py [--nodes 4] [--sizes 100000,300000,1000000]
        [--rit-s 1000] [--duration 20]
    .venv/bin/python bench/fleet_cluster_bench.py --smoke   # no cluster: each size's config
                                                            # through `wotbench check` only
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from scale_bench import Sampler, _softnet_drops  # noqa: E402
from testkit import hostlock  # noqa: E402
from testkit.bench import SMOKE_BANNER, SMOKE_HELP  # noqa: E402
from wotbench.rundir import MergedRunDir  # noqa: E402
from wotbench.runner.prepare import hostlimits  # noqa: E402

CONFIG = REPO / "configs" / "fleet-100k.yaml"
CLUSTER = REPO / "scripts" / "cluster" / "cluster.py"
PREFIX = "wbcff"
ROOT = Path("/var/lib/wotbench-cluster-fleet-fidelity")
BLOCK = "10.219.0.0/16"
GE_ENDPOINTS = 60000            # per GE (the GE's limit is 65 535; a margin for the split)
CONNTRACK_PER_DEVICE = 2        # warm-up socket + one GE source port (docs/FLEET.md)
CONNTRACK_MAX = Path("/proc/sys/net/netfilter/nf_conntrack_max")
ARP_STAT = Path("/proc/net/stat/arp_cache")
# neighbour paths: each engine (at most ~10 000 devices counted, a margin) with every GE of its
# cell, bounded by the run's GEs (what every cell ran before cells ran their share's part)
DEVICES_PER_ENGINE_BOUND = 10_000


def env() -> dict[str, str]:
    return {**os.environ, "WBC_PREFIX": PREFIX, "WBC_ROOT": str(ROOT),
            "DOCKER_HOST": f"unix://{ROOT}/nodes/{PREFIX}-n1/docker.sock",
            "WOTBENCH_NODE_SOCKET": f"{ROOT}/nodes/{{{{.Node.Hostname}}}}/docker.sock",
            "WOTBENCH_CELL_ROOT": f"{ROOT}/cells"}


def cluster(verb: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(CLUSTER), verb, "--root", str(ROOT), *args],
                          env=env(), capture_output=True, text=True, timeout=1800)


def config(size: int, nodes: int, a) -> dict:
    cfg = yaml.safe_load(CONFIG.read_text())
    g = cfg["devices"][0]
    cfg["name"] = f"fleet-cluster-{size}"
    cfg["backend"] = "swarm"
    cfg["duration_s"] = a.duration
    g["count"] = size
    g["rit"] = {"dist": "exponential", "mean": a.rit_s * 1000.0}
    # the run's GEs: enough for the whole fleet; each cell runs its share's part
    cfg["gateways"]["count"] = max(nodes, math.ceil(size / GE_ENDPOINTS))
    cfg["contention_detector"]["calibration_s"] = a.calibration
    cfg["report"] = {"enabled": False}
    return cfg


def raise_conntrack(size: int) -> int | None:
    """nf_conntrack_max up to what `size` devices need; the old value (None: unchanged)."""
    try:
        old = int(CONNTRACK_MAX.read_text())
    except OSError:
        return None
    want = CONNTRACK_PER_DEVICE * size + 65536
    if want <= old:
        return None
    CONNTRACK_MAX.write_text(str(want))
    return old


def raise_neighbours(size: int, ges: int, nodes: int) -> hostlimits.HostTuning:
    """The neighbour table's thresholds (one table for every namespace of this host, so for
    all the emulated nodes' cells together) up to a bound of what the run needs; the returned
    tuning restores them."""
    engines = math.ceil(size / DEVICES_PER_ENGINE_BOUND) + nodes
    tuning = hostlimits.HostTuning(log=lambda m: print(m, flush=True))
    tuning.apply(hostlimits.neighbour_plan(engines * ges, nodes * (ges + 1)))
    return tuning


def table_fulls() -> int:
    """The neighbour table's refusals since boot (a new entry past gc_thresh3 that forced
    garbage collection could not make room for: its packet is dropped); all CPUs' rows."""
    try:
        rows = ARP_STAT.read_text().splitlines()
        col = rows[0].split().index("table_fulls")
        return sum(int(r.split()[col], 16) for r in rows[1:])
    except (OSError, ValueError, IndexError):
        return 0


def run_size(size: int, nodes: int, a, out_root: Path) -> dict:
    cfg = config(size, nodes, a)
    path = out_root / f"{cfg['name']}.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    old_ct = raise_conntrack(size)
    neigh = raise_neighbours(size, cfg["gateways"]["count"], nodes)
    fulls0, drops0 = table_fulls(), _softnet_drops()
    host = Sampler()
    host.start()
    load0 = os.getloadavg()
    t0 = time.monotonic()
    try:
        p = subprocess.run(["nsenter", f"--net=/var/run/netns/{PREFIX}-n1", sys.executable, "-m",
                            "wotbench.cli", "run", str(path), "--out-root", str(out_root / "runs")],
                           cwd=REPO, env=env(), capture_output=True, text=True,
                           timeout=a.run_timeout)
        out, rc = p.stdout + p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        out, rc = f"{e.stdout or ''}{e.stderr or ''}\nno end within {a.run_timeout} s", -1
    finally:
        host.stop_flag.set()
        fulls, drops = table_fulls() - fulls0, _softnet_drops() - drops0
        neigh.restore()
        if old_ct is not None:
            CONNTRACK_MAX.write_text(str(old_ct))
    row = {"size": size, "rc": rc, "wall_s": time.monotonic() - t0, "load0": load0,
           "load1": os.getloadavg(), "conntrack_peak": host.peak["conntrack"],
           "neigh_peak": host.peak["neigh"], "table_fulls": fulls, "backlog_drops": drops,
           "mem_mib": (host.mem0 - host.min_mem) / 1024, "ges": cfg["gateways"]["count"]}
    found = re.search(r"-> (\S+)", out)
    merged = Path(found.group(1)) if found else None
    if merged is None or not (merged / "cluster.json").exists():
        row["error"] = out.strip()[-1200:]
        return row
    try:   # each cell's part of the run's GEs
        sp = json.loads(MergedRunDir(merged).split_json.read_text())
        row["ges"] = f"{row['ges']} ({'/'.join(str(s.get('gateways')) for s in sp['cells'])} " \
                     "per cell)"
    except (OSError, ValueError, KeyError):
        pass
    c = json.loads((merged / "cluster.json").read_text())
    row.update(devices=c["devices"], requests=c["overall"]["requests"],
               ok=c["overall"]["outcomes"].get("ok"), verdict=c["verdict"].get("status"))
    loss, engines, cells = 0, 0, []
    for cell in c["cells"]:
        d = merged / cell["run_dir"]
        try:
            s = json.loads((d / "summary.json").read_text())
            loss += (s.get("loss") or {}).get("testbed") or 0
            engines += len((s.get("fleet") or {}).get("engines") or [])
        except (OSError, ValueError):
            loss = None if loss == 0 else loss
        cells.append(f"{cell['node']} {cell['devices']} {cell['verdict'].get('status')}")
    row.update(loss=loss, engines=engines, cells="; ".join(cells), dir=str(merged))
    return row


def print_row(r: dict) -> None:
    la = lambda t: "/".join(f"{x:.1f}" for x in t)  # noqa: E731
    head = (f"| {r['size']} | load {la(r['load0'])} → {la(r['load1'])} | wall {r['wall_s']:.0f} s "
            f"| GEs {r['ges']} | neighbour peak {r['neigh_peak']}, table_fulls "
            f"{r['table_fulls']}, backlog drops {r['backlog_drops']} |")
    if r.get("error"):
        last = " ".join(r["error"].splitlines()[-4:])
        print(f"{head} failed (exit {r['rc']}): {last} |", flush=True)
        return
    mem = r["mem_mib"] * 1024 / max(1, r["devices"])
    print(f"{head} devices {r['devices']} in {r['engines']} engines | "
          f"requests {r['requests']} (ok {r['ok']}), lost in the testbed {r['loss']} | verdict "
          f"{r['verdict']} ({r['cells']}) | host memory {r['mem_mib']:.0f} MiB = {mem:.1f} KiB/"
          f"device | conntrack peak {r['conntrack_peak']} | exit {r['rc']} |", flush=True)


def smoke(a) -> int:
    with tempfile.TemporaryDirectory(prefix="fleet-cluster-") as tmp:
        for size in sorted(int(x) for x in a.sizes.split(",")):
            cfg = config(size, a.nodes, a)
            path = Path(tmp) / f"{cfg['name']}.yaml"
            path.write_text(yaml.safe_dump(cfg, sort_keys=False))
            p = subprocess.run([sys.executable, "-m", "wotbench.cli", "check", str(path)],
                               cwd=REPO, capture_output=True, text=True, timeout=300)
            last = (p.stdout + p.stderr).strip().splitlines()[-1:]
            print(f"| {size} | {a.nodes} nodes, {cfg['gateways']['count']} GEs in the run | "
                  f"wotbench check exit {p.returncode}: {' '.join(last)} |", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=4)
    ap.add_argument("--sizes", default="100000,300000,1000000")
    ap.add_argument("--rit-s", type=float, default=1000.0,
                    help="each device's mean inter-request time, s (1000: 1 000 req/s at 10^6)")
    ap.add_argument("--duration", type=float, default=20.0)
    ap.add_argument("--calibration", type=float, default=6.0)
    ap.add_argument("--run-timeout", type=float, default=1500.0)
    ap.add_argument("--keep", action="store_true", help="leave the cluster up (cluster.py down)")
    ap.add_argument("--no-up", action="store_true",
                    help="use the cluster already up (WBC_PREFIX=wbcff cluster.py up --root ...)")
    ap.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    a = ap.parse_args(argv)
    if a.smoke:     # a cluster-up takes minutes and root: the configs only
        print(SMOKE_BANNER)
        return smoke(a)
    if os.geteuid() != 0 or subprocess.run(["docker", "info"],
                                           capture_output=True).returncode != 0:
        print("fleet cluster bench skipped: needs root and a Docker daemon (`docker info`)")
        return 0
    if not a.smoke:
        hostlock.hold(timeout_s=3600)   # the host lock is much sought after
    sizes = sorted(int(x) for x in a.sizes.split(","))
    print(f"fleet cluster bench, {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, "
          f"{os.cpu_count()} cores, {a.nodes} emulated nodes ({PREFIX}-n*), sizes {sizes}, "
          f"each device 1 request per {a.rit_s:g} s, test {a.duration:g} s", flush=True)
    t0 = time.monotonic()
    up = cluster("status") if a.no_up else cluster("up", "--nodes", str(a.nodes), "--block", BLOCK)
    print(f"cluster {'status' if a.no_up else 'up'}: exit {up.returncode} in "
          f"{time.monotonic() - t0:.0f} s", flush=True)
    try:
        if up.returncode != 0:
            print((up.stdout + up.stderr).strip()[-1500:])
            return 1
        out = Path(tempfile.mkdtemp(prefix="fleet-cluster-"))    # kept: the runs' data
        out.chmod(0o755)
        print(f"run directories under {out}", flush=True)
        for size in sizes:
            r = run_size(size, a.nodes, a, out)
            print_row(r)
            if r.get("error") or r.get("loss"):
                break
    finally:
        if not a.keep:
            down = cluster("down")
            last = (down.stdout + down.stderr).strip().splitlines()[-1:]
            print(f"cluster down: exit {down.returncode}; {' '.join(last)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
