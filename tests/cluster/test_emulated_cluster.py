"""make test-cluster: the emulated Swarm forms, every node runs a pinned wot-device, a global
service placed by WoTbench's label reaches every node and its tasks answer each other over an
overlay network, and cluster-down leaves nothing. The tests run in file order on one cluster;
the last one takes it down."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import hostscan
import layout
import swarmrun
import teardown

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "cluster" / "cluster.py"
ROOT = layout.DEFAULT_ROOT
N = 3


def cluster(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args, "--root", str(ROOT)],
                          capture_output=True, text=True, timeout=timeout)


def on(node: layout.Node, *args: str, check: bool = True) -> str:
    r = subprocess.run(["docker", "-H", f"unix://{node.socket}", *args], capture_output=True,
                       text=True, timeout=120)
    if check:
        assert r.returncode == 0, f"{node.name}: docker {' '.join(args)}: {r.stderr}"
    return r.stdout.strip()


def test_an_interrupted_cluster_up_removes_what_it_created():
    """Ctrl-C once a node's dockerd runs: cluster-up removes all it made and exits 130."""
    # SIGINT at its default in the child: a test run started in the background (`make
    # test-cluster &`, nohup, a CI step) inherits SIGINT ignored, Python then keeps it ignored
    # and this Ctrl-C would never arrive (the up ran to its end and exited 0)
    p = subprocess.Popen([sys.executable, str(SCRIPT), "up", "--nodes", "2", "--root", str(ROOT)],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and p.poll() is None:
        st = layout.load(ROOT) if (ROOT / "state.json").exists() else None
        if st is not None and any(n.pid for n in st.nodes):
            break
        time.sleep(0.1)
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=180)
    assert p.returncode == 130, out
    assert "removing what it created" in out
    assert teardown.leftovers(ROOT) == {}


@pytest.fixture(scope="module")
def state():
    r = cluster("up", "--nodes", str(N))
    assert r.returncode == 0, f"cluster-up failed:\n{r.stdout}\n{r.stderr}"
    yield layout.load(ROOT)
    cluster("down")   # the last test checks it; this runs even when a test failed


def test_the_cluster_forms_labelled_with_the_images_on_every_node(state):
    assert state.status == "up" and [n.name for n in state.nodes] == ["wbc-n1", "wbc-n2", "wbc-n3"]
    manager = state.nodes[0]
    rows = on(manager, "node", "ls", "--format", "{{.Hostname}} {{.Status}} {{.Availability}}")
    assert sorted(rows.splitlines()) == [f"wbc-n{i} Ready Active" for i in range(1, N + 1)]
    for n in state.nodes:
        labels = json.loads(on(manager, "node", "inspect", "--format", "{{json .Spec.Labels}}",
                               n.swarm_id))
        assert labels == {"wotbench.cell": "true", "wotbench.node": n.name}
        for tag in state.images:
            assert on(n, "image", "inspect", "--format", "{{.Id}}", tag)
    assert cluster("status").returncode == 0


def _device_files(tmp: Path) -> Path:
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "logs").mkdir(exist_ok=True)
    (tmp / "logs").chmod(0o777)
    (tmp / "res.csv").write_text("path,service_time_us,mode,payload_bytes\nr0,1000,sleep,16\n")
    return tmp


def _device_image(state) -> str:
    return next(t for t in state.images if t.startswith("wotbench/wot-device:"))


def test_every_node_runs_a_wot_device_pinned_with_its_cpuset(state):
    core = str(_last_cpu())
    for n in state.nodes:
        files = _device_files(ROOT / "test" / n.name)
        cid = on(n, "run", "-d", "--name", "wbc-test-pinned", "--cpuset-cpus", core,
                 "--user", "65534:65534", "-v", f"{files}/res.csv:/res.csv:ro",
                 "-v", f"{files}/logs:/logs", _device_image(state),
                 "--resources", "/res.csv", "--log-dir", "/logs", "--listen", "0.0.0.0")
        try:
            pid = int(on(n, "inspect", "--format", "{{.State.Pid}}", cid))
            assert pid > 0 and on(n, "inspect", "--format", "{{.HostConfig.CpusetCpus}}", cid) == core
            cg = Path("/sys/fs/cgroup/cpuset") / n.name / cid / "cpuset.cpus"
            if cg.exists():   # cgroup v1, cgroupfs driver: under the node's own parent
                assert cg.read_text().strip() == core
            status = Path(f"/proc/{pid}/status").read_text()
            assert f"Cpus_allowed_list:\t{core}\n" in status
        finally:
            on(n, "rm", "-f", cid)


def _last_cpu() -> int:
    return max(os.sched_getaffinity(0))


def _coap_client_image(state) -> str:
    """The host's coap-client packed into a FROM scratch image, loaded into node 1."""
    sys.path.insert(0, str(REPO))
    from wotbench.runner.backends.docker import hostimage
    from wotbench.runner.backends.docker.backend import docker_client
    prog = Path("/usr/bin/coap-client-notls")
    assert prog.exists(), "coap-client-notls missing: apt-get install libcoap3-bin"
    tag = hostimage.pack_program(docker_client(), prog, log=lambda m: None)
    save = subprocess.Popen(["docker", "save", tag], stdout=subprocess.PIPE)
    subprocess.run(["docker", "-H", f"unix://{state.nodes[0].socket}", "load", "-q"],
                   stdin=save.stdout, check=True, capture_output=True, timeout=120)
    assert save.wait(timeout=60) == 0
    return tag


def test_a_global_service_reaches_every_labelled_node_and_tasks_talk_over_the_overlay(state):
    manager = state.nodes[0]
    for n in state.nodes:
        _device_files(ROOT / "test" / n.name)
    on(manager, "network", "create", "-d", "overlay", "--attachable", "wbc-test-net")
    try:
        on(manager, "service", "create", "-d", "--name", "wbc-test-svc", "--mode", "global",
           "--endpoint-mode", "dnsrr", "--no-resolve-image", "--network", "wbc-test-net",
           "--constraint", "node.labels.wotbench.cell==true",
           "--mount", f"type=bind,src={ROOT}/test/{{{{.Node.Hostname}}}},dst=/p",
           "--user", "65534:65534", _device_image(state),
           "--resources", "/p/res.csv", "--log-dir", "/p/logs", "--listen", "0.0.0.0")
        deadline, running = time.monotonic() + 90, []
        while time.monotonic() < deadline:
            running = on(manager, "service", "ps", "wbc-test-svc", "--filter",
                         "desired-state=running", "--format", "{{.Node}} {{.CurrentState}}"
                         ).splitlines()
            if sum("Running" in r for r in running) == N:
                break
            time.sleep(1)
        assert sorted(r.split()[0] for r in running if "Running" in r) == \
            [n.name for n in state.nodes]
        client = _coap_client_image(state)
        for n in state.nodes[1:]:   # from node 1 to the task on each other node
            cid = on(n, "ps", "-q", "--filter", "label=com.docker.swarm.service.name=wbc-test-svc")
            ip = on(n, "inspect", "--format",
                    '{{(index .NetworkSettings.Networks "wbc-test-net").IPAddress}}', cid)
            out = on(manager, "run", "--rm", "--network", "wbc-test-net", client,
                     "-m", "get", "-B", "5", f"coap://{ip}/r0")
            assert out == "x" * 16, f"{n.name} ({ip}) answered {out!r}"
    finally:
        on(manager, "service", "rm", "wbc-test-svc", check=False)
        time.sleep(2)
        on(manager, "network", "rm", "wbc-test-net", check=False)


# ---------------------------------------------------------------- backend: swarm
CONFIGS = Path(__file__).resolve().parent / "configs"


def _run(*args: str, timeout: float = 900, during=None) -> tuple[int, str, Path | None]:
    """``wotbench run ...`` as the coordinator on the manager (``--backend swarm`` among
    ``args``, or ``backend: swarm`` in the config); ``during(p)`` is called once a second
    while it runs. (exit code, output, merged run directory)."""
    out_root = ROOT / "test" / "reports"
    p = swarmrun.wotbench(ROOT, "run", *args, "--out-root", str(out_root))
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(p.stdout), daemon=True)
    reader.start()
    deadline = time.monotonic() + timeout
    while p.poll() is None and time.monotonic() < deadline:
        if during is not None:
            during(lines)
        time.sleep(1)
    if p.poll() is None:
        p.kill()
    reader.join(30)
    text = "".join(lines)
    found = re.search(r"-> (\S+)", text)
    return p.wait(), text, Path(found.group(1)) if found else None


def _nothing_left(state, nodes=None) -> None:
    """Nothing of a run on the nodes (a removed service's task containers go within a
    minute: Swarm removes them asynchronously on each node)."""
    deadline = time.monotonic() + 60
    for n in nodes or state.nodes:
        for what in ("ps", "network", "service"):
            while swarmrun.ours(n, what) and time.monotonic() < deadline:
                time.sleep(1)
            assert swarmrun.ours(n, what) == [], f"{n.name}: {what} left"


def test_swarm_refuses_before_t0_a_clock_beyond_the_bound_naming_each_node(state):
    """1 µs is less than any exchange can vouch for: refused before T0, every node named,
    the fix given, nothing left on any node. (cells-90.yaml says backend: swarm; the option
    overrides its cluster.clock_bound_ms.)"""
    code, out, merged = _run(str(CONFIGS / "cells-90.yaml"), "--clock-bound-ms", "0.001")
    assert code == 1, out
    assert "refused before T0" in out and "T0 in" not in out
    for n in state.nodes:
        assert f"{n.name}: clock offset" in out
    assert "synchronise the node's clock" in out
    _nothing_left(state)


def test_swarm_runs_three_cells_of_300_devices_merged_with_a_verdict_per_cell(state):
    seen: dict[str, dict[str, str]] = {}

    def sample(lines):   # each node's run containers and their cpusets, while the test runs
        if any("T0 in" in ln for ln in lines):
            for n in state.nodes:
                now = swarmrun.cpusets(n)
                if len(now) > len(seen.get(n.name, {})):
                    seen[n.name] = now
    code, out, merged = _run(str(CONFIGS / "cells-900.yaml"), "--backend", "swarm",
                             during=sample)
    assert code in (0, 3, 4), out
    cluster = json.loads((merged / "cluster.json").read_text())
    assert [c["node"] for c in cluster["cells"]] == [n.name for n in state.nodes]
    assert cluster["devices"] == 900
    ids: set[int] = set()
    for c in cluster["cells"]:
        cell = merged / c["run_dir"]
        summary = json.loads((cell / "summary.json").read_text())
        assert c["devices"] == 300 and not c["verdict"]["failed"]
        assert c["verdict"]["status"] == summary["verdict"]["status"]   # the cell's own verdict
        run = json.loads((cell / "run.json").read_text())
        cell_ids = {d["id"] for d in run["devices"]}
        assert len(cell_ids) == 300 and not cell_ids & ids   # whole shares, global ids kept
        ids |= cell_ids
        plan = json.loads((cell / "plan.json").read_text())
        pinned = seen[c["node"]]   # the cell's containers had the cpusets of its own plan
        assert pinned["ge-0"] == str(plan["ge_cores"]["ge-0"])
        assert pinned["cd-ge"] == str(plan["cd_ge_core"])
        devices = [v for k, v in pinned.items() if k not in ("ge-0", "cd-ge")]
        assert len(devices) >= 31   # 30 pods and the CD node
        allowed = set(plan["device_cores"])
        assert all({int(x) for x in v.replace("-", ",").split(",")} <= allowed for v in devices)
    assert ids == set(range(900))
    worst = cluster["verdict"]
    order = ["trustworthy", "ge_bottleneck", "contention", "testbed_loss", "invalid"]
    assert worst["status"] == max((c["verdict"]["status"] for c in cluster["cells"]),
                                  key=order.index)
    rows = pd.read_csv(merged / "requests.csv")
    assert len(rows) == cluster["overall"]["requests"] == sum(
        c["requests"]["requests"] for c in cluster["cells"])
    ok = rows.loc[rows["outcome"] == "ok", "rt_sent_ms"].to_numpy()
    p99 = cluster["overall"]["response_time_ms"]["from_sent"]["p99_ms"]
    assert abs(float(np.percentile(ok, 99)) - p99) <= 0.05 * p99   # the union's, not a mean
    clock = cluster["clock"]
    assert clock["refused"] == [] and all(c["after"] for c in clock["cells"])
    assert "| **run** |" in (merged / "report.md").read_text()
    html = (merged / "report.html").read_text()   # the merged report links every cell's own
    assert f"Verdict: {worst['status']}" in html
    for c in cluster["cells"]:
        assert (merged / c["run_dir"] / "report.html").is_file()
        assert f'href="{c["run_dir"]}/report.html"' in html
    _nothing_left(state)


def test_swarm_stops_before_t0_naming_the_node_that_cannot_reach_an_external_target(state):
    """An external endpoint no node reaches (its own 127.0.0.1:9): the cell whose share holds
    it checks it before deploying, and the run stops before T0 naming that node, the key, the
    target and the fix; nothing is left on any node."""
    code, out, merged = _run(str(CONFIGS / "cells-unreachable.yaml"))
    assert code == 1, out
    assert "T0 in" not in out
    found = re.search(r"the cell on (wbc-n\d) could not deploy: \1 cannot serve its share "
                      r"before T0 \(1 problem\(s\)\): devices\[1\]\.external\[0\]: board-0 at "
                      r"127\.0\.0\.1:9 did not answer a CoAP ping from \1", out)
    assert found, out
    assert f"fix: make it reachable from {found.group(1)}" in out
    print(f"refused before T0: {found.group(0)}")
    split = json.loads((merged / "split.json").read_text())
    holder = next(c["node"] for c in split["cells"] if "board-0" in c["devices"])
    assert holder == found.group(1)
    _nothing_left(state)


def _record(tmp: Path) -> Path:
    """cells-recorded.yaml with its own generated workload recorded beside it (trace:)."""
    import yaml
    sys.path.insert(0, str(REPO))
    from wotbench.configfile.yaml_loader import load_config
    from wotbench.workload.generate import write_trace
    base = CONFIGS / "cells-recorded.yaml"
    tmp.mkdir(parents=True, exist_ok=True)
    write_trace(load_config(base), tmp / "recorded")
    raw = yaml.safe_load(base.read_text())
    raw["trace"] = {"file": "recorded/trace.csv"}
    (tmp / "cells-recorded.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    return tmp / "cells-recorded.yaml"


def test_swarm_sweep_of_two_points_each_a_merged_run_of_a_recorded_trace(state):
    """wotbench sweep on backend: swarm: each point one merged run across the 3 nodes, whose
    recorded trace was split by whole pods (each cell replayed the lines of its devices,
    global ids kept); every point's summary is the merged run's, and a point whose verdict is
    not trustworthy names the node whose cell stopped being faithful."""
    config = _record(ROOT / "test" / "recorded")
    lines = [ln for ln in (config.parent / "recorded" / "trace.csv").read_text().splitlines()[1:]
             if ln]
    whole_ids = {int(ln.split(",")[0]) for ln in lines}
    out_root = ROOT / "test" / "sweeps"
    p = swarmrun.wotbench(ROOT, "sweep", str(config), "--vary", "devices[0].threads=1,2",
                          "--out-root", str(out_root), "--no-progress")
    began = time.monotonic()
    out, _ = p.communicate(timeout=900)
    print(f"sweep of 2 points on swarm: exit {p.returncode} in {time.monotonic() - began:.0f} s")
    assert p.returncode in (0, 3, 4), out
    [sweep_dir] = [d for d in out_root.iterdir() if d.name.startswith("sweep-cells-rec-")]
    sweep = json.loads((sweep_dir / "sweep.json").read_text())
    html = (sweep_dir / "report.html").read_text()
    assert [pt["status"] for pt in sweep["points"]] == ["done", "done"], out
    for pt in sweep["points"]:
        run = sweep_dir / pt["run_dir"]
        cluster = json.loads((run / "cluster.json").read_text())
        summary = json.loads((run / "summary.json").read_text())
        assert summary["verdict"]["status"] == cluster["verdict"]["status"] == pt["verdict"]
        assert summary["run"]["backend"] == "swarm" and summary["overall"]["devices"] == 30
        assert summary["overall"]["requests"] == len(lines)   # every line, once, in one cell
        seen: set[int] = set()
        for c in cluster["cells"]:
            sliced = (run / c["run_dir"] / "trace" / "trace.csv").read_text().splitlines()[1:]
            ids = {int(ln.split(",")[0]) for ln in sliced if ln}
            assert ids and not ids & seen   # whole devices, each in one cell
            seen |= ids
        assert seen == whole_ids
        print(f"  {pt['id']} threads={pt['overrides']['devices[0].threads']}: {pt['verdict']}, "
              f"{summary['overall']['requests']} requests (trace: {len(lines)} lines), cells "
              + ", ".join(f"{c['node']} {c['devices']} dev {c['verdict']['status']}"
                          for c in cluster["cells"]) + f"; host: {pt['host']}")
        bad = cluster["verdict"]["worst_node"]
        assert (pt["host"] or {}).get("node") == bad       # named exactly when unfaithful
        if bad:
            cell = next(c for c in cluster["cells"] if c["node"] == bad)
            assert pt["host"]["status"] == cell["verdict"]["status"] != "trustworthy"
            assert f"stopped being faithful: {bad} ({cell['verdict']['status']}" in html
    _nothing_left(state)


def _run_ids(lines: list[str]) -> list[str]:
    """The merged runs a sweep's coordinator started so far, in order."""
    return [m.group(1) for ln in list(lines)
            for m in [re.search(r"wotbench: run (\S+) \(swarm backend\)", ln)] if m]


def test_swarm_sweep_names_the_node_whose_device_was_killed_in_one_point(state):
    """A real fault nobody faked: during the second point of a 2-point sweep, once the victim
    cell's GE has sent requests, one of its device pods is killed through the victim node's
    own Docker API. That point is still a merged point, named with the victim and the cell's
    own reason; the first names no host (unless the noisy host flagged it, when it names
    the worst cell, not the victim's failure); nothing is left on any node. The capacity
    search's conclusion, read from these two real merged runs, names the victim too."""
    sys.path.insert(0, str(REPO))
    from wotbench.distributed.answer import hosts_text
    from wotbench.runner.during.progress import read_progress
    victim = state.nodes[1]
    out_root = ROOT / "test" / "naming"
    p = swarmrun.wotbench(ROOT, "sweep", str(CONFIGS / "cells-recorded.yaml"), "--vary",
                          "devices[0].threads=1,2", "--out-root", str(out_root), "--no-progress")
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(p.stdout), daemon=True)
    reader.start()
    killed: dict[str, str] = {}
    deadline = time.monotonic() + 900
    while p.poll() is None and time.monotonic() < deadline:
        ids = _run_ids(lines)
        if not killed and len(ids) == 2:   # the second point: wait for its cell's progress
            prog = list((ROOT / "cells" / ids[1] / victim.name).glob("*/ge/ge-0/progress.bin"))
            sent = read_progress(prog[0]) if prog else None
            if sent and sent["sent"] > 0:
                pods = on(victim, "ps", "-q", "--filter", "label=wotbench.role=device",
                          "--filter", "label=wotbench.run").split()
                assert pods, f"{victim.name}: no device container running"
                killed["pod"] = on(victim, "inspect", "--format",
                                   '{{index .Config.Labels "wotbench.component"}}', pods[0])
                killed["at_sent"] = str(sent["sent"])
                on(victim, "kill", pods[0])   # through the node's own Engine
        time.sleep(0.2)
    if p.poll() is None:
        p.kill()
    reader.join(30)
    out = "".join(lines)
    assert killed, f"the second point's cell on {victim.name} never sent a request:\n{out}"
    print(f"killed {victim.name}'s pod {killed['pod']} after its GE sent {killed['at_sent']}")
    assert p.returncode == 3, out   # every point done, one (at least) flagged
    [sweep_dir] = list(out_root.iterdir())
    sweep = json.loads((sweep_dir / "sweep.json").read_text())
    assert [pt["status"] for pt in sweep["points"]] == ["done", "done"], out
    first, second = sweep["points"]

    # the faulted point: merged, invalid, naming exactly the victim with its cell's reason
    run = sweep_dir / second["run_dir"]
    cluster = json.loads((run / "cluster.json").read_text())
    cells = {c["node"]: c for c in cluster["cells"]}
    assert set(cells) == {n.name for n in state.nodes}, "every cell merged"
    mine = cells[victim.name]["verdict"]
    assert not mine["failed"] and mine["status"] == "invalid"   # it finished, unfaithful
    assert cluster["verdict"]["worst_node"] == victim.name
    host = second["host"]
    assert host is not None and host["node"] == victim.name and host["status"] == "invalid", host
    assert host["why"] == mine["reasons"][0]
    found = re.fullmatch(r"component (\S+) failed: container exited with (\d+) during the test "
                         r"\(exit code \d+\)", host["why"])
    assert found, host["why"]
    devices = json.loads((run / cells[victim.name]["run_dir"] / "run.json").read_text())
    pod_of = {d["name"]: d["container"] for d in devices["devices"]}
    assert pod_of[found.group(1)] == killed["pod"]   # a device of the pod killed on the victim
    for n in state.nodes:
        if n is not victim:   # the others ran to the end, their requests merged
            assert not cells[n.name]["verdict"]["failed"] and cells[n.name]["requests"]["requests"]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["verdict"]["status"] == "invalid" == second["verdict"]
    named = f"the host that stopped being faithful: {victim.name} (invalid: {host['why']}"
    assert named in " ".join(out.split())                        # printed by the sweep
    assert named in (sweep_dir / "report.html").read_text()     # and in its report

    # the other point names a host only when one of its cells was not trustworthy
    other = json.loads((sweep_dir / first["run_dir"] / "cluster.json").read_text())
    if other["verdict"]["worst_node"] is None:
        assert first["host"] is None
    else:   # the noisy host flagged a cell: named as such, never the victim's failure
        assert first["host"]["node"] == other["verdict"]["worst_node"]
        assert "failed" not in first["host"]["why"], first["host"]
    print(f"  {first['id']}: {first['verdict']}, host {first['host']}; "
          f"{second['id']}: {second['verdict']}, {hosts_text([second['host']])}")
    _nothing_left(state)

    # the capacity search's conclusion from the same two merged runs (threads 1 and 2): the
    # first flagged setting is the faulted one unless the noisy host flagged the first
    res = _capacity_over(sweep_dir, [first, second])
    print(f"  capacity ({res.status}): {res.conclusion}")
    flagged = first if first["verdict"] != "trustworthy" else second
    threads = flagged["overrides"]["devices[0].threads"]
    assert res.first_flagged == threads
    # the host sentence, then (issue 31) how much the host added at the answer, when measured
    assert (f"At devices[0].threads = {threads}, {hosts_text([flagged['host']])}."
            in res.conclusion)
    if flagged is second:
        assert res.status == "found" and res.answer == 1
        assert f"At devices[0].threads = 2, {named})" in res.conclusion


def _capacity_over(sweep_dir: Path, points: list[dict]) -> dict:
    """``wotbench capacity --key devices[0].threads --start 1 --max 2 --step 1`` whose runs
    are the sweep's real merged runs (copied), not new ones: its capacity.json."""
    import io
    import shutil
    import yaml
    from rich.console import Console
    from wotbench.capacity.command import run_capacity
    from wotbench.run_result import RunResult
    from wotbench.rundir import RunDir
    by_threads = {pt["overrides"]["devices[0].threads"]: (sweep_dir / pt["run_dir"], pt)
                  for pt in points}

    def replay(config_path, out_root, backend=None, on_run_dir=None) -> RunResult:
        threads = yaml.safe_load(Path(config_path).read_text())["devices"][0]["threads"]
        src, pt = by_threads[threads]
        dst = Path(out_root) / src.name
        shutil.copytree(src, dst, symlinks=True)
        rd = RunDir(dst)
        return RunResult(pt["exit_code"], dst,
                         rd.read_summary() if rd.summary_json.is_file() else None)
    res = run_capacity(CONFIGS / "cells-recorded.yaml", key="devices[0].threads", start=1,
                       maximum=2, step=1, out_root=ROOT / "test" / "naming-capacity",
                       run_fn=replay, console=Console(file=io.StringIO()), report=False)
    return res


def test_swarm_a_node_lost_mid_run_is_named_and_the_other_cells_kept(state):
    victim = state.nodes[2]
    killed = {}

    def kill(lines):
        if not killed and any("T0 in" in ln for ln in lines):
            time.sleep(12)   # into the test
            swarmrun.power_off(victim, ROOT)
            killed["at"] = time.monotonic()
    code, out, merged = _run(str(CONFIGS / "cells-90.yaml"), during=kill)
    assert killed, out
    assert code == 3, out
    cluster = json.loads((merged / "cluster.json").read_text())
    cells = {c["node"]: c for c in cluster["cells"]}
    lost = cells[victim.name]["verdict"]
    assert lost["failed"] and lost["status"] == "invalid" and victim.name in lost["reasons"][0]
    assert cluster["verdict"]["worst_node"] == victim.name
    for n in state.nodes[:2]:   # the others ran to the end; their data is merged
        assert not cells[n.name]["verdict"]["failed"] and cells[n.name]["requests"]["requests"]
    rows = pd.read_csv(merged / "requests.csv")
    assert set(rows["cell"]) == {n.name for n in state.nodes[:2]}
    assert f"the cell on {victim.name} is lost" in out
    _nothing_left(state, state.nodes[:2])
    assert not hostscan.cgroup_pids(next(t for t in hostscan.node_cgroups()
                                         if t.name == victim.name))


def test_clean_cluster_covers_every_node_and_names_the_one_it_cannot_reach(state):
    p = swarmrun.wotbench(ROOT, "clean", "--cluster")
    out, _ = p.communicate(timeout=400)
    victim = state.nodes[2]
    assert p.returncode == 1, out   # the powered-off node cannot be cleaned now
    assert f"{victim.name}: not cleaned" in out and "wotbench clean --cluster again" in out
    for n in state.nodes[:2]:
        assert f"{n.name}: nothing to clean" in out
    _nothing_left(state, state.nodes[:2])


def test_cluster_down_leaves_nothing(state):
    r = cluster("down")
    assert r.returncode == 0, r.stdout + r.stderr
    assert teardown.leftovers(ROOT) == {}
    links = subprocess.run(["ip", "-br", "link"], capture_output=True, text=True).stdout
    assert not [ln for ln in links.splitlines() if ln.split()[0].startswith(layout.PREFIX)]
    again = cluster("down")   # idempotent
    assert again.returncode == 0 and "nothing of the cluster is left" in again.stdout
