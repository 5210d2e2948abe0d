"""Observe (RFC 7641) on the Python side: config keys, generated OBSERVE/CANCEL lines and
notification columns, recorded-trace checks, and the analysis of notifications."""
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis_fixtures import ge_summary
from wotbench.analysis import observe as obsm
from wotbench.analysis.loading import DeviceInfo, GeData, RunData
from wotbench.configfile.yaml_loader import config_from_dict
from wotbench.errors import ConfigError
from wotbench.rundir import RunRecord
from wotbench.rundir.ge_files import GeObserve, GeSummary
from wotbench.rundir.summary import ObserveBlock
from wotbench.workload.trace_io import read_resources, read_trace
from wotbench.workload.generate import write_trace


def cfg(observe=None, **group):
    g = {"group": "s", "count": 3, "resources": 2, "rit": {"dist": "exponential", "mean": 500},
         **group}
    if observe is not None:
        g["observe"] = observe
    return config_from_dict({"name": "t", "duration_s": 10, "devices": [g]})


def problems(**kw):
    with pytest.raises(ConfigError) as e:
        cfg(**kw)
    return e.value.problems


def test_config_observe_errors_name_the_key():
    assert any(p.startswith("devices[0].observe.resources: 3 observable resources but the group has 2")
               for p in problems(observe={"resources": 3, "period_ms": 100}))
    assert any(p.startswith("devices[0].observe: give either period_ms")
               for p in problems(observe={"period_ms": 100, "interval": {"dist": "exponential", "mean": 5}}))
    assert any(p.startswith("devices[0].observe: give either period_ms") for p in problems(observe={}))
    assert any(p.startswith("devices[0].observe.interval.dist: wot-device emulates")
               for p in problems(observe={"interval": {"dist": "pareto", "mean": 100, "shape": 2}}))
    assert any(p.startswith("devices[0].observe.jitter_ms: 200 exceeds period_ms 100")
               for p in problems(observe={"period_ms": 100, "jitter_ms": 200}))
    assert any("devices[0].observe.typ" in p for p in problems(observe={"period_ms": 100, "typ": "con"}))


def test_tracegen_observe_lines_and_resource_columns(tmp_path):
    c = cfg(observe={"resources": 1, "period_ms": 250, "jitter_ms": 50, "service_time_ms": 1.5,
                     "type": "non", "max_age_s": 5, "observers": 2, "register_within_s": 2,
                     "hold": {"dist": "uniform", "mean": 3000, "cv": 0.2}}, requests=False)
    s = write_trace(c, tmp_path)
    assert s.requests == 0                       # requests: false -> OBSERVE/CANCEL lines only
    df = read_trace(tmp_path / "trace.csv")
    assert set(df.method) == {"OBSERVE", "CANCEL"}
    obs, can = df[df.method == "OBSERVE"], df[df.method == "CANCEL"]
    assert len(obs) == len(can) == 3 * 2
    assert (obs.send_time_us < 2_000_000).all()
    for (dev, uri), g in df.groupby(["device_id", "uri"]):
        assert list(g.method) == ["OBSERVE", "CANCEL"]          # every observer registers, then cancels
        hold_ms = (g.send_time_us.iloc[1] - g.send_time_us.iloc[0]) / 1000
        assert 3000 * (1 - 0.2 * 3 ** 0.5) - 1 <= hold_ms <= 3000 * (1 + 0.2 * 3 ** 0.5) + 1
        assert uri.endswith(("/r0?o=0", "/r0?o=1"))
    res = read_resources(tmp_path / "resources" / "s-0.csv")
    r0, r1 = res.iloc[0], res.iloc[1]
    assert (r0.notify_dist, r0.notify_mean_us, r0.notify_jitter_us, r0.notify_service_us,
            r0.notify_type, r0.max_age_s) == ("uniform", 250000, 50000, 1500, "non", 5)
    assert r1.notify_dist == "none"
    # the same seed gives the same files
    write_trace(c, tmp_path / "again")
    assert (tmp_path / "again" / "trace.csv").read_text() == (tmp_path / "trace.csv").read_text()


def test_interval_distributions_map_to_device_columns(tmp_path):
    c = cfg(observe={"interval": {"dist": "normal", "mean": 100, "cv": 0.1}})
    write_trace(c, tmp_path)
    r0 = read_resources(tmp_path / "resources" / "s-0.csv").iloc[0]
    assert (r0.notify_dist, r0.notify_mean_us, r0.notify_jitter_us) == ("normal", 100000, 10000)


def test_recorded_trace_observe_on_plain_resource_names_the_line(tmp_path):
    res = tmp_path / "resources"
    res.mkdir()
    (res / "s-0.csv").write_text("path,service_time_us,mode,payload_bytes,notify_dist,notify_mean_us,"
                                 "notify_jitter_us,notify_service_us,notify_type,max_age_s\n"
                                 "a,100,sleep,4,uniform,1000,10,0,con,1\nb,100,sleep,4,none,0,0,0,con,1\n")
    (res / "s-1.csv").write_text("path,service_time_us,mode,payload_bytes\nb,100,sleep,4\n")
    tr = tmp_path / "trace.csv"
    tr.write_text("device_id,send_time_us,method,uri\n0,0,OBSERVE,coap://h/a\n0,1,OBSERVE,coap://h/b\n"
                  "1,2,OBSERVE,coap://h/b\n0,3,CANCEL,coap://h/zz\n")
    c = config_from_dict({"name": "t", "trace": {"file": str(tr), "resources": str(res)},
                          "devices": [{"group": "s", "count": 2}]})
    with pytest.raises(ConfigError) as e:
        write_trace(c, tmp_path / "out")
    msg = "\n".join(e.value.problems)
    assert f"{tr}:3: OBSERVE on 'b', which is not observable in {res / 's-0.csv'}" in msg
    assert f"{tr}:4: OBSERVE on 'b', which is not observable in {res / 's-1.csv'}" in msg
    assert f"{tr}:5: CANCEL without an open OBSERVE" in msg
    assert ":2:" not in msg


def _run(tmp_path, notes, emitted, cancel_sent_ns=3_000_000_000):
    salt = 0x1122334455667788
    start = 10_000_000_000
    req = pd.DataFrame({"index": [0, 1], "device": [0, 0], "method": pd.Categorical(["OBSERVE", "CANCEL"]),
                        "path": pd.Categorical(["r0?o=0", "r0?o=0"]), "scheduled_ns": [0, 3_000_000_000],
                        "sent_ns": [1000, cancel_sent_ns], "received_ns": [200_000, cancel_sent_ns + 100_000],
                        "code": ["2.05", "2.05"], "outcome": ["ok", "ok"], "retransmissions": [0, 0]})
    summary = GeSummary.model_validate(ge_summary(token_salt=f"{salt:016x}", start_mono_ns=start,
                                                  end_mono_ns=start + 4_000_000_000))
    observe = GeObserve(observations=1, established=1, notifications=3, recorded=3, dropped=0,
                        capacity=1000, gaps=1, reordered=0, duplicates=0, after_cancel=0,
                        acks_sent=0, rsts_sent=0)
    ge = GeData("ge-0", tmp_path, req.iloc[:0], summary, observe_requests=req, notifications=notes,
                observe=observe)
    tok = f"{salt >> 32:08x}{(salt & 0xFFFFFFFF) ^ 0:08x}"
    log = pd.DataFrame({"emit_ns": [start + e for e in emitted.emit], "tick_ns": [start + e - 3_000_000 for e in emitted.emit],
                        "read_start_ns": [start + e - 2_900_000 for e in emitted.emit],
                        "read_end_ns": [start + e - 900_000 for e in emitted.emit],
                        "path": "r0", "kind": "notify", "seq": emitted.seq, "type": "con", "token": tok})
    resources = pd.DataFrame({"path": ["r0"], "service_time_us": [0], "mode": ["sleep"], "payload_bytes": [1],
                              "notify_dist": ["deterministic"], "notify_mean_us": [500_000],
                              "notify_jitter_us": [0], "notify_service_us": [2000], "notify_type": ["con"],
                              "max_age_s": [1]})
    dev = DeviceInfo("s-0", 0, "s", resources=resources, notify_log=log)
    return RunData(run_dir=tmp_path, run=RunRecord(), ges=[ge], cd_ge=None, devices={"s-0": dev}, cd=None,
                   test_start_ns=start, duration_s=4.0, warnings=[])


def test_analysis_latency_loss_rate_and_rd(tmp_path):
    # the device emitted seq 3..7 every 0.5 s; the GE got 3, 4, 6 (5 lost in the network);
    # 7 was emitted 0.2 s before the CANCEL left: in flight, not counted as lost
    emit = pd.DataFrame({"seq": [3, 4, 5, 6, 7],
                         "emit": [500_000_000, 1_000_000_000, 1_500_000_000, 2_000_000_000, 2_800_000_000]})
    got = emit[emit.seq.isin([3, 4, 6])]
    notes = pd.DataFrame({"observation": 0, "device": 0, "path": "r0?o=0", "seq": got.seq.to_numpy(),
                          "received_ns": got.emit.to_numpy() + np.array([100_000, 300_000, 200_000]),
                          "type": "con", "code": "2.05", "flags": ""})
    block, series = obsm.analyse(_run(tmp_path, notes, emit), ["s-0"])
    b = ObserveBlock.model_validate(block)
    assert (b.observations, b.established, b.received, b.emitted) == (1, 1, 3, 5)
    assert b.lost == 1 and b.in_flight_at_stop == 1 and b.loss_share == pytest.approx(1 / 4)
    assert b.skipped_by_device == 0 and b.gaps == 1
    assert b.latency_ms.p50 == pytest.approx(0.2) and b.latency_ms.max == pytest.approx(0.3)
    # R = receive - tick = latency + 3 ms, S = 2 ms: R_d = (latency + 1 ms) / 2 ms
    assert b.rd.p50 == pytest.approx((0.2 + 1) / 2)
    assert b.service_ms.p50 == pytest.approx(2.0)
    d = b.per_device["s-0"]
    assert d.configured_rate == pytest.approx(2.0)
    assert d.achieved_rate == pytest.approx(3 / ((3_000_000_000 - 200_000) / 1e9))
    assert len(series["notify_latency"]) == 3 and series["notify_latency_cdf"]["cdf"].iloc[-1] == 1


def test_analysis_latency_uses_the_kernel_stamp_where_recorded(tmp_path):
    # one batch read at 900 µs after emission (user space); the kernel stamps say 100 and 300 µs;
    # the third notification has no kernel stamp: its user-space reading is used
    emit = pd.DataFrame({"seq": [3, 4, 5], "emit": [500_000_000, 1_000_000_000, 1_500_000_000]})
    notes = pd.DataFrame({"observation": 0, "device": 0, "path": "r0?o=0", "seq": [3, 4, 5],
                          "received_ns": emit.emit.to_numpy() + 900_000, "type": "con",
                          "code": "2.05", "flags": "",
                          "received_kernel_ns": [500_100_000, 1_000_300_000, np.nan]})
    block, _ = obsm.analyse(_run(tmp_path, notes, emit), ["s-0"])
    b = ObserveBlock.model_validate(block)
    assert b.latency_ms.p50 == pytest.approx(0.3) and b.latency_ms.max == pytest.approx(0.9)


def test_analysis_tells_device_coalescing_from_loss(tmp_path):
    # the device never emitted seq 4 to this observer (coalesced): a GE gap, not a loss
    emit = pd.DataFrame({"seq": [3, 5], "emit": [500_000_000, 1_000_000_000]})
    notes = pd.DataFrame({"observation": 0, "device": 0, "path": "r0?o=0", "seq": [3, 5],
                          "received_ns": [500_100_000, 1_000_100_000], "type": "con", "code": "2.05", "flags": ""})
    block, _ = obsm.analyse(_run(tmp_path, notes, emit), ["s-0"])
    assert block.lost == 0 and block.skipped_by_device == 1


def test_no_observations_no_block(tmp_path):
    run = RunData(run_dir=tmp_path, run=RunRecord(), ges=[], cd_ge=None, devices={}, cd=None,
                  test_start_ns=1, duration_s=1.0, warnings=[])
    assert obsm.analyse(run, []) == (None, {})


# ----------------------------------------------------------------------------- block-wise
def test_blockwise_analysis_whole_transfers(tmp_path):
    from wotbench.analysis import blockwise as blkm
    from wotbench.rundir.summary import BlockwiseBlock
    start = 5_000_000_000
    req = pd.DataFrame({"index": [0, 1, 2, 3, 4], "device": 0,
                        "method": pd.Categorical(["GET", "GET", "GET", "PUT", "GET"]),
                        "path": pd.Categorical(["r0"] * 5), "scheduled_ns": [0, 1, 2, 3, 4],
                        "sent_ns": [0, 1_000_000, 2_000_000, 3_000_000, 4_000_000],
                        "received_ns": [5_000_000, 2_701_000_000, np.nan, 6_000_000, 4_500_000],
                        "code": ["2.05", "2.05", None, "2.04", "2.05"],
                        "outcome": ["ok", "ok", "timeout", "ok", "ok"], "retransmissions": [0, 1, 4, 0, 0]})
    bw = pd.DataFrame({"index": [0, 1, 2, 3, 4], "kind": ["block2", "block2", "block2", "block1", "block2"],
                       "body_bytes": [16384, 16384, 3072, 4096, 16], "block_size": 1024,
                       "blocks": [16, 16, 4, 4, 1], "retransmissions": [0, 1, 4, 0, 0]})
    ge = GeData("ge-0", tmp_path, req, GeSummary.model_validate(ge_summary(start_mono_ns=start)),
                blockwise=bw)
    run = RunData(run_dir=tmp_path, run=RunRecord(), ges=[ge], cd_ge=None, devices={}, cd=None,
                  test_start_ns=start, duration_s=1.0, warnings=[])
    block, series = blkm.analyse(run)
    b = BlockwiseBlock.model_validate(block).by_kind
    r = b["block2"]
    assert (r.transfers, r.multi_block, r.ok, r.failed) == (4, 3, 2, 1)   # the 16-byte GET is one block
    assert r.outcomes == {"ok": 2, "timeout": 1} and r.retransmissions == 5 and r.with_retransmissions == 2
    assert r.time_ms_no_retransmission.p50 == pytest.approx(5.0)
    assert r.time_ms_with_retransmission.p50 == pytest.approx(2700.0)
    w = b["block1"]
    assert (w.transfers, w.ok, w.blocks_median, w.body_bytes_median) == (1, 1, 4, 4096)
    assert len(series["blockwise_transfers"]) == 5


def test_generated_blockwise_workload_passes_block_size(tmp_path):
    c = config_from_dict({"name": "t", "duration_s": 5, "devices": [
        {"group": "s", "count": 2, "payload_bytes": 16384, "request_payload_bytes": 4096,
         "methods": {"GET": 0.5, "PUT": 0.5}}]})
    assert c.ge_block_size() == 1024
    write_trace(c, tmp_path)
    df = read_trace(tmp_path / "trace.csv")
    assert set(df.loc[df.method == "PUT", "payload_bytes"]) == {4096}
    assert int(read_resources(tmp_path / "resources" / "s-0.csv")["payload_bytes"].iloc[0]) == 16384


def test_recorded_big_bodies_need_block_size(tmp_path):
    res = tmp_path / "resources"
    res.mkdir()
    (res / "s-0.csv").write_text("path,service_time_us,mode,payload_bytes\na,100,sleep,20000\n")
    tr = tmp_path / "trace.csv"
    tr.write_text("device_id,send_time_us,method,uri\n0,0,GET,coap://h/a\n")
    c = config_from_dict({"name": "t", "trace": {"file": str(tr), "resources": str(res)},
                          "devices": [{"group": "s", "count": 1}]})
    with pytest.raises(ConfigError) as e:
        write_trace(c, tmp_path / "out")
    assert any(p.startswith(f"gateways.block_size: {res / 's-0.csv'} has payload_bytes above 1024")
               for p in e.value.problems)
