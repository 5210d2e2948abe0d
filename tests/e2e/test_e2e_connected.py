"""`wotbench run` of a connected-devices config (docs/CONNECTED.md): nginx + nchan started
unprivileged from the config's template after `nginx -t`, WebSocket and chunked devices in
wot-fleet-conn engines, wot-rpcapp applications for the test, a run directory like every run's
(summary.json with the connected block and the verdict, report.html with its section, the
components' run-queue wait); `wotbench sweep --vary` over the number of devices with repeats;
a template nginx refuses stops the run before anything starts, naming it."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from testkit.connected import missing_prerequisite
from testkit.nginx import free_tcp_port
from wotbench.rundir import RunDir

ROOT = Path(__file__).resolve().parents[2]
why = missing_prerequisite()
pytestmark = pytest.mark.skipif(why is not None, reason=why or "")


def config(tmp: Path, template: Path, **over) -> Path:
    c = yaml.safe_load((ROOT / "configs" / "attached-devices.yaml").read_text())
    c["name"] = "connected-e2e"
    c["duration_s"] = 6
    c["devices"] = [
        {**c["devices"][0], "count": 200},
        {**c["devices"][0], "group": "hub", "count": 100, "protocol": "chunked"}]
    c["applications"].update(count=40, think_ms=[50, 150], warmup_s=2)
    c["edge_server"].update(config_template=str(template), port=free_tcp_port("127.0.0.1"))
    c.update(over)
    path = tmp / "c.yaml"
    path.write_text(yaml.safe_dump(c))
    return path


def small_config(tmp: Path) -> Path:
    """One WebSocket group, 20 applications, 4 s: a sweep's or a capacity search's point."""
    tmp.chmod(0o755)
    cfg = config(tmp, ROOT / "configs" / "attached-devices-nchan.conf", duration_s=4)
    c = yaml.safe_load(cfg.read_text())
    c["devices"] = c["devices"][:1]
    c["applications"].update(count=20, warmup_s=1)
    cfg.write_text(yaml.safe_dump(c))
    return cfg


def run(cfg: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(Path(sys.executable).parent / "wotbench"), "run", str(cfg), "--out-root",
                           str(out)], capture_output=True, text=True, timeout=180, cwd=ROOT)


def test_a_connected_run_measures_rpcs_and_judges_the_testbed(tmp_path):
    tmp_path.chmod(0o755)
    cfg = config(tmp_path, ROOT / "configs" / "attached-devices-nchan.conf")
    c = yaml.safe_load(cfg.read_text())
    for g in c["devices"]:       # attach headers and an attach message, taken by nchan too
        g["connection"] = {**g["connection"], "attach_headers": {"X-Device": "{device}"},
                           "attach_body": '{"attach":{device}}'}
    cfg.write_text(yaml.safe_dump(c))
    r = run(cfg, tmp_path / "r")
    assert r.returncode in (0, 3), r.stdout + r.stderr
    (d,) = (tmp_path / "r").iterdir()
    s = json.loads((d / "connected-summary.json").read_text())
    for e in (d / "engines").iterdir():      # every chunked attach message's POST accepted
        assert ',X-Device:%20' in (e / "connections.csv").read_text()
        assert json.loads((e / "out" / "conn-summary.json").read_text())["posts_rejected"] == 0
    assert s["attached_all"] and s["attached_at_exit"] == 300 and s["engines"] == 2, s
    assert sum(s["testbed"].values()) == 0 and sum(s["disconnects"].values()) == 0, s
    rpc = s["rpc"]
    assert rpc["rpcs"] > 200 and rpc["ok"] == rpc["rpcs"] and rpc["timeout"] == 0, rpc
    assert rpc["engine_part_ns"]["p50"] > 0 and 0 < rpc["testbed_share"]["p50"] < 1, rpc
    assert s["verdict"]["status"] in ("trustworthy", "contention"), s["verdict"]
    assert (r.returncode == 0) == (s["verdict"]["status"] == "trustworthy")
    assert (d / "edge" / "attached-devices-nchan.conf").is_file()     # what the server ran
    # the run directory of every run: summary.json (typed), run.json, report.html
    summ = RunDir(d).read_summary()
    assert summ.verdict.status == s["verdict"]["status"]
    assert summ.overall.outcomes.ok == rpc["ok"] and summ.connected.rpc.round_trip.n > 200
    comps = {w.component: w for w in summ.connected.sched}
    assert {"edge-server", "wot-rpcapp", "meter-conn0", "hub-conn0"} <= set(comps), comps
    assert comps["wot-rpcapp"].cpu_s > 0 and comps["edge-server"].role == "system"
    html = (d / "report.html").read_text()
    assert 'id="connected"' in html and 'id="fig-connected-rpc"' in html
    assert "Not available because" not in html.split('id="connected"')[1].split("</section>")[0]
    assert (d / "run.json").is_file()
    # the edge server is the SUT: its whole tree (master + workers) sampled like a server: SUT
    edge = summ.sut_resources.components["edge-server"]
    assert edge.role == "server" and edge.test.cpu_cores > 0 and edge.test.rss_mean_bytes > 0
    assert summ.sut_resources.total.cpu_cores == edge.test.cpu_cores
    assert 'id="table-connected-sut-resources"' in html
    # least privilege: every process of the server unprivileged (when WoTbench runs as root)
    # and without effective capabilities
    procs = json.loads((d / "edge" / "privileges.json").read_text())
    assert {p["name"] for p in procs} == {"nginx"} and len(procs) >= 2, procs
    assert all(p["cap_eff"] == "0000000000000000" for p in procs), procs
    if os.getuid() == 0:
        assert all(p["uid"] == p["euid"] == 65534 for p in procs), procs


@pytest.mark.long
def test_a_sweep_over_the_number_of_devices_gives_a_curve_with_repeats(tmp_path):
    cfg = small_config(tmp_path)
    r = subprocess.run([str(Path(sys.executable).parent / "wotbench"), "sweep", str(cfg),
                        "--vary", "devices[0].count=50,200", "--repeats", "2", "--out-root",
                        str(tmp_path / "s"), "--no-progress"],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode in (0, 3), r.stdout + r.stderr
    (sweep,) = (tmp_path / "s").iterdir()
    points = json.loads((sweep / "sweep.json").read_text())["points"]
    assert len(points) == 4 and all(p["status"] == "done" for p in points), points
    for p in points:
        summ = RunDir(sweep / p["run_dir"]).read_summary()
        assert summ.connected.devices == p["overrides"]["devices[0].count"]
        assert summ.overall.response_time_ms.from_sent.p50_ms is not None
    assert (sweep / "report.html").is_file()


@pytest.mark.long
def test_capacity_of_a_connected_config_judges_the_rpcs_against_an_slo(tmp_path):
    """Two settings of the attached devices, each judged by its RPCs' p95 round trip (an SLO
    one setting meets) on a faithful host: the answer states the testbed's share."""
    cfg = small_config(tmp_path)
    r = subprocess.run([str(Path(sys.executable).parent / "wotbench"), "capacity", str(cfg),
                        "--key", "devices[0].count", "--start", "50", "--max", "100", "--step",
                        "50", "--slo", "p95<=4000ms", "--out-root", str(tmp_path / "c")],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode in (0, 3, 5), r.stdout + r.stderr
    (search,) = (tmp_path / "c").iterdir()
    res = json.loads((search / "capacity.json").read_text())
    assert [s["value"] for s in res["steps"]] in ([50], [50, 100]), res
    for s in res["steps"]:
        summ = RunDir(search / s["run_dirs"][0]).read_summary()
        assert summ.connected.devices == s["value"]
        (p95,) = [o for o in summ.slo.objectives if o.key == "p95_ms"]
        assert p95.measured == summ.overall.response_time_ms.from_sent.p95_ms
        # the RPCs answered after the warm-up, as the round trip's percentiles count them
        assert p95.samples == summ.overall.response_time_ms.from_sent.count > 0
    if res["outcome"]["kind"] == "system":    # both faithful: the answer and the host's share
        assert len(res["steps"]) == 2 and res["answer"] == 100
        assert "of the mean RPC round trip" in res["conclusion"]
    else:                                     # a loaded host: the answer names it, not the SLO
        assert res["outcome"]["kind"] in ("host", "inconclusive"), res["conclusion"]


@pytest.mark.long
def test_wotbench_report_of_a_connected_merged_directory_draws_the_connected_report(tmp_path):
    """A connected run across hosts keeps cluster.json (for sweeps and capacity) beside its
    connected files: `wotbench report` must draw the connected report, not the CoAP merged one
    (which needs requests.csv). A single-host run's directory with the two files a connected
    coordinator adds stands in for one (the real one: tests/cluster/test_cluster_connected_cells.py)."""
    cfg = small_config(tmp_path)
    r = run(cfg, tmp_path / "r")
    assert r.returncode in (0, 3), r.stdout + r.stderr
    (d,) = (tmp_path / "r").iterdir()
    (d / "cluster.json").write_text("{}")
    (d / "connected-split.json").write_text("{}")
    (d / "report.html").unlink()
    r = subprocess.run([str(Path(sys.executable).parent / "wotbench"), "report", str(d)],
                       capture_output=True, text=True, timeout=180, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Connected devices" in (d / "report.html").read_text()


def test_a_template_nginx_refuses_stops_the_run_naming_it(tmp_path):
    tmp_path.chmod(0o755)
    bad = tmp_path / "bad-nchan.conf"
    bad.write_text((ROOT / "configs" / "attached-devices-nchan.conf").read_text()
                   .replace("nchan_pubsub websocket chunked;", "nchan_pubsub websocket bogus;"))
    r = run(config(tmp_path, bad), tmp_path / "r")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "edge_server.config_template" in r.stderr and str(bad) in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert not list((tmp_path / "r").glob("*/engines"))      # nothing started


def test_open_loop_applications_send_on_their_schedule_through_nchan(tmp_path):
    """applications.loop open at 200 RPC/s (Poisson) for 4 s through the real nchan: about 800
    RPCs scheduled whatever the replies, every one with exactly one outcome, the round trip
    from the schedule not below the one from the send (the send lag is in between)."""
    cfg = small_config(tmp_path)
    c = yaml.safe_load(cfg.read_text())
    c["applications"].update(loop="open", rate=200, max_outstanding=4)
    cfg.write_text(yaml.safe_dump(c))
    r = run(cfg, tmp_path / "r")
    assert r.returncode in (0, 3), r.stdout + r.stderr
    (d,) = (tmp_path / "r").iterdir()
    app = json.loads((d / "apps" / "rpc-summary.json").read_text())
    assert (app["loop"], app["arrival"], app["window"]) == ("open", "poisson", 4)
    assert 650 <= app["rpcs"] <= 950, app          # 800 ± 5 standard deviations
    assert sum(app[k] for k in ("ok", "timeout", "rejected", "lost", "overflow")) == app["rpcs"]
    assert app["ok"] >= 0.99 * app["rpcs"], app
    summary = RunDir(d).read_summary()
    rpc = summary.connected.rpc
    assert rpc.outcomes["overflow"] == app["overflow"]
    # the overall's sent are the rows written whole; its throughput the answered ones per s
    assert summary.overall.sent == app["sent"] == app["rpcs"] - summary.overall.outcomes.unsent
    assert summary.overall.throughput_rps == pytest.approx(app["answered_per_s"])
    assert summary.overall.offered_rps == pytest.approx(app["offered_per_s"])
    assert rpc.from_schedule.p50_ms >= rpc.round_trip.p50_ms, rpc
