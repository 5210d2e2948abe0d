"""Connected configs across hosts, the pure parts (wotbench.distributed.connected_coord,
connected_merge; the run itself: tests/cluster/test_connected_cells.py): the split of devices
and applications into cells, the config a cell loads, the share on the wire, the merge of the
cells' RPCs onto one clock; and the SLO of a connected run (wotbench.connected.slo)."""
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from pydantic import ValidationError

from wotbench.configfile.yaml_loader import config_from_dict, load_config
from wotbench.connected import slo
from wotbench.connected.totals import app_file
from wotbench.distributed import wire
from wotbench.distributed.wire import ConnectedSplit
from wotbench.distributed.connected_coord import (cell_config_text, ranges, read_cell,
                                                  split_shares)
from wotbench.distributed.connected_merge import _rebased_rpcs
from wotbench.connected.procs import rpcapp_argv
from wotbench.distributed.connected_routes import all_devices, device_ranges, first_shard
from wotbench.errors import ConfigError
from wotbench.schema_errors import problems as schema_problems
from wotbench.rundir import MergedRunDir, atomic
from wotbench.rundir.connected_cell import CellFile

ROOT = Path(__file__).resolve().parents[2]
EDGE = {"command": ["nginx", "-c", "{config}"],
        "config_template": str(ROOT / "configs" / "attached-devices-nchan.conf")}


def cfg(apps: int = 2000, **top):
    return config_from_dict({"name": "t", "edge_server": EDGE, "applications": {"count": apps},
                             "devices": [
                                 {"group": "m", "count": 1001, "protocol": "websocket",
                                  "connection": {}},
                                 {"group": "s", "count": 3, "mode": "sleep"} if top.pop(
                                     "coap", False) else
                                 {"group": "h", "count": 300, "protocol": "chunked",
                                  "connection": {}}], **top})


def test_devices_and_applications_split_evenly_with_global_ids():
    assert ranges(1001, 3) == [(0, 334), (334, 334), (668, 333)]
    sh = split_shares(cfg(), ["n1", "n2"], "10.0.0.1:8080")
    assert sh["n1"].groups == {0: (0, 501), 1: (0, 150)}
    assert sh["n2"].groups == {0: (501, 500), 1: (150, 150)}
    assert (sh["n1"].first_app, sh["n1"].apps, sh["n2"].first_app, sh["n2"].apps) == \
        (0, 1000, 1000, 1000)
    assert sh["n2"].endpoint == "10.0.0.1:8080" and sh["n2"].cells == 2
    # a share survives the wire (JSON object keys are strings)
    m = wire.Share(run_id="r", config_yaml="", config_name="c.yaml", devices=[],
                   connected=sh["n2"])
    back = wire._ADAPTER.validate_json(m.model_dump_json())
    assert back.connected.groups == {0: (501, 500), 1: (150, 150)}


def test_a_cells_applications_call_its_own_devices_which_reply_on_its_own_shards():
    """The reply fan-out fix: the cells' device ranges partition every connected device, and
    their reply shards are disjoint, K per cell (each reply relayed to one cell)."""
    c = cfg()
    sh = split_shares(c, ["n1", "n2", "n3"], "10.0.0.1:8080")
    per_cell = {n: device_ranges(c, s.groups) for n, s in sh.items()}
    assert per_cell["n1"] == [(0, 334), (1001, 100)] and per_cell["n3"] == [(668, 333), (1201, 100)]
    ids = sorted(i for rs in per_cell.values() for f, n in rs for i in range(f, f + n))
    assert ids == list(range(1301))
    k = c.applications.reply_shards
    shards = {n: set(range(first_shard(c, s.index), first_shard(c, s.index) + k))
              for n, s in sh.items()}
    assert sum(len(v) for v in shards.values()) == len(set().union(*shards.values())) == 3 * k
    # every device of a cell replies on one of that cell's shards (the engines' rows)
    from wotbench.config.connected import connection_rows
    for n, s in sh.items():
        off, cnt = s.groups[1]
        rows = connection_rows(c.devices[1], 1001, "e:1", k, offset=off, count=cnt,
                               first_shard=first_shard(c, s.index))
        assert {int(r.split(",")[5].rsplit("/", 1)[1]) for r in rows} <= shards[n]


def test_every_device_is_sent_the_same_rpc_rate_whichever_cell_holds_it():
    """Open loop: 5 applications and 2 + 5 devices on 4 cells split unevenly (2/1/1/1 apps,
    2-3 / 1-2 devices); each cell's wot-rpcapp rate follows its devices, not its apps, so the
    rate per device is ``rate / devices`` in every cell and the cells' rates add to ``rate``."""
    c = config_from_dict({"name": "t", "edge_server": EDGE, "applications": {
        "count": 5, "loop": "open", "rate": 700.0}, "devices": [
            {"group": "m", "count": 2, "protocol": "websocket", "connection": {}},
            {"group": "h", "count": 5, "protocol": "chunked", "connection": {}}]})
    sh = split_shares(c, ["n1", "n2", "n3", "n4"], "10.0.0.1:8080")
    assert [s.apps for s in sh.values()] == [2, 1, 1, 1]
    per_device, total = [], 0.0
    for s in sh.values():
        rs = device_ranges(c, s.groups)
        argv = rpcapp_argv(c.applications, s.endpoint, 7, Path("/x"), 10, 0, None,
                           first_app=s.first_app, count=s.apps, device_ranges=rs,
                           devices_total=all_devices(c))
        rate = float(argv[argv.index("--rate") + 1])
        total += rate
        per_device.append(rate / sum(n for _, n in rs))
    assert len({sum(n for _, n in device_ranges(c, s.groups)) for s in sh.values()}) > 1
    assert max(per_device) - min(per_device) < 1e-4 * 100.0 and abs(total - 700.0) < 1e-3
    assert per_device[0] == pytest.approx(100.0)


def test_fewer_connected_devices_than_cells_is_refused():
    c = config_from_dict({"name": "t", "edge_server": EDGE, "applications": {"count": 10},
                          "devices": [{"group": "m", "count": 2, "protocol": "websocket",
                                       "connection": {}}]})
    with pytest.raises(ConfigError) as e:
        split_shares(c, ["n1", "n2", "n3"], "10.0.0.1:8080")
    assert "devices: 2 connected device(s) for 3 cells" in str(e.value)


def test_fewer_applications_than_cells_is_refused_naming_the_key():
    with pytest.raises(ConfigError) as e:
        split_shares(cfg(apps=2), ["n1", "n2", "n3"], "10.0.0.1:8080")
    assert "applications.count: 2 applications for 3 cells" in str(e.value)


def test_a_cells_config_loads_there_without_the_servers_template(tmp_path):
    text = (ROOT / "configs" / "attached-devices.yaml").read_text()
    raw = yaml.safe_load(text)
    out = cell_config_text(raw)
    assert "config_template" not in out and "config_template" in text
    assert raw == yaml.safe_load(text)       # the coordinator's mapping is left as it was
    (tmp_path / "c.yaml").write_text(out)    # a directory without the template
    c = load_config(tmp_path / "c.yaml")
    assert c.edge_server.config_template is None and c.devices[0].count == 100000


def _rpc_summary(**kw) -> dict:
    """A cell's rpc-summary.json as wot-rpcapp writes it (wotbench.rundir.connected_files),
    its counts zero but ``kw``."""
    counts = ("apps", "rpcs", "measured", "measured_sent", "measured_ok", "ok", "timeout",
              "rejected", "lost", "overflow", "others", "unsent_down", "unsent_write", "sent",
              "unmatched", "late_replies", "events_in", "post_2xx", "post_202", "app_disconnects",
              "sub_disconnects", "bytes_out", "bytes_in", "shards", "devices", "first_app",
              "window", "first_shard", "end_ns", "rows_full")
    return {**dict.fromkeys(counts, 0), "duration_s": 10.0, "offered_per_s": 0.0,
            "sent_per_s": 0.0, "answered_per_s": 0.0, "measured_s": 10.0, "loop": "closed",
            "rate": 0.0, "arrival": "poisson", "latency_ns": None, "send_lag_ns": None, **kw}


def _cell_file(node: str, t0: int) -> CellFile:
    """A cell's cell.json as a finished cell writes it, T0 at ``t0`` on its clock."""
    return CellFile(node=node, devices=2, groups={0: (0, 2)}, index=0, first_shard=0,
                    first_app=0, apps=1, endpoint="10.0.0.1:8080", engines=["m-conn0"],
                    load_before=[0.5, 0.4, 0.3], sched_missing=None, attached_all=True,
                    attach_s=1.5, t0_mono_ns=t0, warmup_end_ns=t0 + 5 * 10**9, engines_s=20.0,
                    load_after=[0.9, 0.5, 0.3])


def test_a_cells_account_is_written_and_read_through_its_model(tmp_path):
    """cell.json as the cell writes it (every key, JSON keys strings) reads back equal; a
    file that lacks a key, has one the model does not know or a value of the wrong type makes
    the cell a failed one, the reason naming the file and the key."""
    f = tmp_path / "cell.json"
    cell = _cell_file("n1", 7_000)
    atomic.write_json(f, cell.model_dump(mode="json"), indent=1)
    assert '"0": [' in f.read_text() and read_cell(f) == cell
    good = json.loads(f.read_text())
    for change, key in (({"t0_mono_ns": None, "warmup_end_ns": None}, "t0_mono_ns"),
                        ({"devices": "many"}, "devices"), ({"engine": []}, "engine")):
        f.write_text(json.dumps({**good, **change}))
        why = read_cell(f)
        assert isinstance(why, str) and str(f) in why and key in why, why
    f.write_text(json.dumps({k: v for k, v in good.items() if k != "attach_s"}))
    why = read_cell(f)
    assert isinstance(why, str) and str(f) in why and "attach_s" in why, why
    assert read_cell(tmp_path / "none.json") == "its run directory has no none.json"


def _cell(md: MergedRunDir, node: str, t0: int, rows: list[tuple], summary: dict) -> None:
    apps = md.cell_dir(node) / "apps"
    apps.mkdir(parents=True)
    pd.DataFrame(rows, columns=["app", "id", "device", "sched_ns", "send_ns", "reply_ns",
                                "status", "outcome"]).to_csv(apps / "rpc-log.csv", index=False)
    (apps / "rpc-summary.json").write_text(json.dumps(summary))


def test_the_cells_rpcs_move_onto_one_clock_by_each_cells_t0(tmp_path):
    md = MergedRunDir(tmp_path)
    _cell(md, "n1", 5_000, [(0, "0-1", 7, 6_000, 6_100, 9_100, 202, "ok")],
          _rpc_summary(apps=1, rpcs=1, ok=1, bytes_in=10, others=1, duration_s=9.0))
    _cell(md, "n2", 900_000, [(1, "1-1", 3, 901_000, 901_050, None, 202, "timeout")],
          _rpc_summary(apps=1, rpcs=1, timeout=1, bytes_in=5, duration_s=10.0))
    _rebased_rpcs(md, {"n1": _cell_file("n1", 5_000), "n2": _cell_file("n2", 900_000)}, 100,
                  tmp_path / "apps")
    f = pd.read_csv(tmp_path / "apps" / "rpc-log.csv", dtype={"id": str})
    # 1 000 ns after each cell's T0 -> 1 100 on this clock; a round trip is unchanged
    assert f["sched_ns"].tolist() == [1_100, 1_100]
    assert f.loc[0, "reply_ns"] - f.loc[0, "send_ns"] == 3_000
    assert pd.isna(f.loc[1, "reply_ns"]) and f["id"].tolist() == ["0-1", "1-1"]
    s = json.loads((tmp_path / "apps" / "rpc-summary.json").read_text())
    assert (s["apps"], s["rpcs"], s["ok"], s["timeout"], s["bytes_in"], s["others"],
            s["duration_s"]) == (2, 2, 1, 1, 15, 1, 10.0)
    merged = app_file(tmp_path / "apps")     # the merged file reads through its model
    assert (merged.ok, merged.timeout, merged.latency_ns, merged.shards) == (1, 1, None, None)


def test_the_connected_split_is_written_from_its_model_and_a_bad_one_names_the_key():
    shares = split_shares(cfg(), ["n1", "n2"], "10.0.0.1:8080")
    text = json.dumps(ConnectedSplit(shares).model_dump(), indent=1)
    assert json.loads(text) == {n: json.loads(s.model_dump_json()) for n, s in shares.items()}
    assert ConnectedSplit.model_validate_json(text).root == shares
    bad = json.loads(text)
    del bad["n1"]["endpoint"]
    with pytest.raises(ValidationError) as e:
        ConnectedSplit.model_validate(bad)
    assert schema_problems(e.value, ConnectedSplit) == ["n1.endpoint: required key missing"]


def test_the_slo_of_a_connected_run_is_judged_on_its_rpcs_after_the_warm_up(tmp_path):
    c = config_from_dict({"name": "t", "edge_server": EDGE, "applications": {"warmup_s": 1},
                          "devices": [{"group": "m", "count": 4, "protocol": "websocket",
                                       "connection": {}},
                                      {"group": "c", "count": 2},
                                      {"group": "h", "count": 2, "protocol": "chunked",
                                       "connection": {}}],
                          "slo": {"p95_ms": 5, "loss_max": 0.2, "groups": {"h": {"p50_ms": 1}}}})
    warm = 10 * 10**9
    rows = [(0, "w-0", 0, warm - 1, warm, warm + 99 * 10**6, 202, "ok")]   # in the warm-up
    rts = [1, 2, 3, 4, 6, 8, 2, 3]                                          # ms
    for k, ms in enumerate(rts):
        t = warm + k * 10**8
        dev = 4 + k % 2 if k >= 6 else k % 4                                # 4, 5: group h
        rows.append((1, f"1-{k}", dev, t, t + 1000, t + 1000 + ms * 10**6, 202, "ok"))
    rows.append((1, "1-9", 1, warm + 10**9, warm + 10**9, None, 0, "timeout"))
    pd.DataFrame(rows, columns=["app", "id", "device", "sched_ns", "send_ns", "reply_ns",
                                "status", "outcome"]).to_csv(tmp_path / "rpc-log.csv",
                                                              index=False)
    b = slo.evaluate(c, tmp_path / "rpc-log.csv", warm, 3.0)
    by = {o.key: o for o in b.objectives}
    assert by["p95_ms"].measured == pytest.approx(np.percentile(rts, 95))
    assert by["p95_ms"].state == "fail" and b.status == "missed"
    assert by["loss_max"].measured == pytest.approx(1 / 9) and by["loss_max"].state == "pass"
    h = by["groups.h.p50_ms"]
    assert h.measured == pytest.approx(2.5) and h.state == "fail"    # devices 4, 5 only
    assert {o.device for o in by["p95_ms"].offenders} <= {"m-0", "m-1", "m-2", "m-3", "h-0",
                                                          "h-1"}
    assert slo.evaluate(c, None, warm, 3.0).objectives[0].state == "no_data"
    assert slo.evaluate(c.model_copy(update={"slo": None}), None, warm, 3.0) is None


def test_the_reply_read_stamp_moves_onto_the_clock_with_the_others(tmp_path):
    md = MergedRunDir(tmp_path)
    apps = md.cell_dir("n1") / "apps"
    apps.mkdir(parents=True)
    pd.DataFrame([(0, "0-1", 7, 6_000, 6_100, 9_100, 202, "ok", 9_150, "kernel")],
                 columns=["app", "id", "device", "sched_ns", "send_ns", "reply_ns", "status",
                          "outcome", "reply_read_ns", "reply_stamp"]).to_csv(
        apps / "rpc-log.csv", index=False)
    (apps / "rpc-summary.json").write_text(json.dumps(
        {"apps": 1, "rpcs": 1, "measured": 1, "ok": 1, "timeout": 0, "rejected": 0, "lost": 0,
         "late_replies": 0, "post_202": 1, "bytes_out": 10, "bytes_in": 10, "latency_ns": None,
         "send_lag_ns": None, "rows_full": False, "replies_kernel_stamped": 1,
         "duration_s": 9.0}))
    _rebased_rpcs(md, {"n1": _cell_file("n1", 5_000)}, 100, tmp_path / "apps")
    f = pd.read_csv(tmp_path / "apps" / "rpc-log.csv", dtype={"id": str})
    assert (f.loc[0, "reply_ns"], f.loc[0, "reply_read_ns"]) == (4_200, 4_250)
    assert f.loc[0, "reply_stamp"] == "kernel"
    s = json.loads((tmp_path / "apps" / "rpc-summary.json").read_text())
    assert s["replies_kernel_stamped"] == 1 and s["replies_user_stamped"] == 0


def test_the_coordinator_takes_the_servers_last_sample_before_stopping_it():
    """The edge server runs on the coordinator's host: its process tree is sampled there
    (monitor/sut.csv of the merged run), the last sample while it still runs."""
    from wotbench.distributed.connected_coord import ConnectedCoordinator
    order: list[str] = []

    class Edge:
        def running(self):
            order.append("running?")
            return True

        def stop(self):
            order.append("edge stopped")

        def remove(self):
            order.append("edge removed")

    class Sampler:
        def __init__(self, what):
            self.what = what

        def stop(self):
            order.append(f"{self.what} stopped")

    c = ConnectedCoordinator.__new__(ConnectedCoordinator)
    c.edge, c.sampler, c.edge_sut = Edge(), Sampler("sched"), Sampler("sut")
    assert c._stop_edge() is True
    assert order == ["running?", "sched stopped", "sut stopped", "edge stopped", "edge removed"]
    assert c.edge is None and c.edge_sut is None
    assert c._stop_edge() is None                 # idempotent: run()'s finally calls it again
