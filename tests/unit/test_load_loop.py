"""Closed-loop and many-endpoint load on the Python side: the config keys and their errors,
the trace the GE gets, the GE arguments, the limits checked before a run, and the analysis'
load block and closed-loop GE-integrity rule (wotbench.analysis.load_figures, ge_integrity)."""
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from wotbench.analysis.ge_integrity import closed_integrity
from wotbench.analysis.load_figures import CLOSED_NOTE, OPEN_NOTE, fairness, load_block
from wotbench.analysis.loading import GeData, RunData, read_requests
from wotbench.config import loadloop
from wotbench.configfile.yaml_loader import config_from_dict
from wotbench.errors import ConfigError
from wotbench.rundir import GeIntegrityParams, RunRecord
from wotbench.rundir.ge_files import GeSummary
from wotbench.runner.prepare import clientlimits
from wotbench.workload.generate import write_trace
from wotbench.workload.trace_io import read_trace

from analysis_fixtures import ge_summary

BASE = {"name": "t", "duration_s": 10, "devices": [{"group": "cpu", "count": 3, "resources": 4}]}


def cfg(**gw):
    return config_from_dict({**BASE, "gateways": gw})


def problems(**gw) -> list[str]:
    with pytest.raises(ConfigError) as e:
        cfg(**gw)
    assert e.value.exit_code == 2
    return e.value.problems


# ---------------------------------------------------------------- config
@pytest.mark.parametrize("gw,message", [
    ({"loop": "closed"}, "gateways: loop: closed needs clients: N"),
    ({"think": {"dist": "exponential", "mean": 1}}, "gateways: think is a closed-loop key"),
    ({"warmup_s": 1}, "gateways: warmup_s is a closed-loop key"),
    ({"loop": "closed", "clients": 2, "think": {"dist": "lognormal", "mean": 1, "cv": 1}},
     "think.dist 'lognormal', expected one of deterministic, exponential, uniform"),
    ({"clients": 0}, "gateways.clients: "),
    ({"clients": 70000}, "gateways.clients: "),
    ({"loop": "closed", "clients": 2, "warmup_s": 6, "cooldown_s": 4},
     "gateways.warmup_s: 6 + cooldown_s 4 leave nothing of duration_s 10"),
    ({"loop": "closed", "clients": 2, "count": 2}, "gateways.clients: with gateways.count 2"),
    ({"clients": 4, "block_size": 64}, "gateways.clients: with block-wise transfer"),
])
def test_bad_loop_keys_name_the_key(gw, message):
    got = problems(**gw)
    assert any(message in p for p in got), got


def test_think_and_ge_args():
    c = cfg(loop="closed", clients=100, think={"dist": "uniform", "mean": 2, "cv": 0.2},
            target="random", warmup_s=1, cooldown_s=0.5)
    lo, hi = 2000 * (1 - 0.2 * 3 ** 0.5), 2000 * (1 + 0.2 * 3 ** 0.5)
    assert loadloop.think_arg(c) == f"uniform:{lo:.3f}:{hi:.3f}"
    a = loadloop.ge_args(c)
    assert a[:6] == ["--clients", "100", "--duration-ms", "10000", "--think", a[5]]
    assert a[a.index("--select") + 1] == "random"
    assert a[a.index("--mark-warmup-ms") + 1] == "1000"
    assert a[a.index("--mark-cooldown-ms") + 1] == "500"
    # no more requests than 100 clients can issue with a 2 ms think time in 10 s, plus margins
    assert int(a[a.index("--max-requests") + 1]) == int(100 * 10 / (0.002 + 20e-6)) + 1100
    assert loadloop.ge_args(cfg(clients=100)) == []          # open loop: the trace says it
    assert loadloop.think_arg(cfg(loop="closed", clients=1)) == "0"
    assert loadloop.think_arg(cfg(loop="closed", clients=1, think={"dist": "deterministic",
                                                                   "mean": 0.5})) == "const:500.000"


def test_closed_loop_trace_is_the_targets(tmp_path):
    c = config_from_dict({**BASE, "devices": [{"group": "cpu", "count": 3, "resources": 4,
                                               "methods": {"GET": 1, "PUT": 1},
                                               "request_payload_bytes": 8}],
                          "gateways": {"loop": "closed", "clients": 5}})
    write_trace(c, tmp_path)
    t = read_trace(tmp_path / "trace.csv")
    assert len(t) == 12 and (t.send_time_us == 0).all()      # each resource of each device once
    assert sorted(zip(t.device_id, t.uri.str.rsplit("/", n=1).str[1])) == \
        sorted((d, f"r{j}") for d in range(3) for j in range(4))
    assert set(t.method) == {"GET", "PUT"}                    # the method mix still applies
    assert (t.payload_bytes[t.method == "PUT"] == 8).all()


def test_open_loop_clients_column(tmp_path):
    c = cfg(clients=7)
    write_trace(c, tmp_path)
    t = read_trace(tmp_path / "trace.csv")
    assert (tmp_path / "trace.csv").read_text().splitlines()[0].endswith(",payload_bytes,client")
    assert t.client.tolist() == [k % 7 for k in range(len(t))]   # round robin in send order
    write_trace(cfg(), tmp_path / "plain")
    assert "client" not in read_trace(tmp_path / "plain" / "trace.csv").columns


# ---------------------------------------------------------------- limits before the run
def test_client_limits_name_the_key_and_the_fix():
    assert clientlimits.problems(1000, 1_048_576, (32768, 60999)) == []
    fd = clientlimits.problems(10_000, 4096, (32768, 60999))
    assert len(fd) == 1 and fd[0].startswith("gateways.clients: 10000 clients need 10064 file")
    assert "ulimit -Hn 10064" in fd[0]
    ports = clientlimits.problems(30_000, None, (32768, 60999))
    assert len(ports) == 1 and "ephemeral port range 32768-60999 has 28232" in ports[0]
    assert "ip_local_port_range" in ports[0]


def test_client_limits_check_raises_config_error(monkeypatch):
    monkeypatch.setattr(clientlimits, "port_range", lambda: (40000, 40009))
    with pytest.raises(ConfigError) as e:
        clientlimits.check(cfg(loop="closed", clients=11), docker=False)
    assert e.value.exit_code == 2 and "gateways.clients: 11 clients need 11 source ports" in str(e.value)
    clientlimits.check(cfg(loop="closed", clients=10), docker=False)   # fits: no error
    clientlimits.check(cfg(), docker=False)                             # no clients: nothing


# ---------------------------------------------------------------- analysis
def closed_summary(clients=2, **kw) -> GeSummary:
    cl = {"clients": clients, "select": "round-robin", "targets": 1, "think": "const",
          "think_a_us": 1000.0, "think_b_us": 0.0, "duration_ms": 10000.0, "warmup_ms": 1000.0,
          "cooldown_ms": 1000.0, "stopped_ms": 10000.0, "capacity": 1000, "capacity_reached": False}
    return GeSummary.model_validate(ge_summary(clients=clients, closed_loop=cl, **kw))


def req_frame(client, sched_ms, sent_ms, rt_ms, outcome=None):
    n = len(client)
    sent = np.array(sent_ms, float) * 1e6
    return pd.DataFrame({
        "index": np.arange(n), "device": np.zeros(n, int), "client": np.array(client, float),
        "sched": np.array(sched_ms, float) * 1e6, "sent": sent,
        "outcome": pd.Categorical(outcome or ["ok"] * n), "rt_sent_ms": np.array(rt_ms, float),
        "rt_sched_ms": np.array(rt_ms, float)})


def test_closed_integrity_share_of_cycle():
    # two clients, cycles of 10 ms; the GE stalled each request 0.2 ms: 2 % of the cycle
    sent = [0, 10, 20, 30, 0, 10, 20, 30]
    sched = [s - 0.2 for s in sent]
    req = req_frame([0, 0, 0, 0, 1, 1, 1, 1], sched, sent, [8] * 8)
    b, rit, lag = closed_integrity(req, "ge-0", GeIntegrityParams(), closed_summary())
    assert b.closed_loop.stall_share == pytest.approx(0.02)
    assert b.closed_loop.cycle_mean_ms == pytest.approx(10)
    assert b.kept_up is True and b.problems == [] and b.lag_ms.p50 == pytest.approx(0.2)
    # a 1 ms stall is 10 %: the GE held its clients back
    req2 = req_frame([0, 0, 0, 0, 1, 1, 1, 1], [s - 1 for s in sent], sent, [8] * 8)
    b2, _, _ = closed_integrity(req2, "ge-0", GeIntegrityParams(), closed_summary())
    assert b2.kept_up is False and "10.0% of their cycle time" in b2.problems[0]
    # one request per client: nothing to judge
    b3, _, _ = closed_integrity(req_frame([0, 1], [0, 0], [0, 0], [1, 1]), "ge-0",
                                GeIntegrityParams(), closed_summary())
    assert b3.kept_up is None


def test_fairness():
    f = fairness(np.array([0, 0, 1, 1, np.nan]), 3)   # client 2 got nothing
    assert (f.clients, f.min, f.max) == (3, 0, 2)
    assert f.jain == pytest.approx(16 / (3 * 8))
    assert fairness(np.array([np.nan]), 0) is None


def _run(ge: GeData, duration_s=10.0) -> RunData:
    return RunData(run_dir=Path("."), run=RunRecord(), ges=[ge], cd_ge=None, devices={},
                   cd=None, test_start_ns=0, duration_s=duration_s)


def test_load_block_closed_counts_phases_apart():
    marked = pd.DataFrame({"phase": ["warmup"] * 3 + ["cooldown"] * 2})
    ge = GeData("ge-0", Path("."), requests=pd.DataFrame(), summary=closed_summary(3),
                marked_requests=marked)
    req = req_frame([0, 1, 0, 1], [0, 0, 5, 5], [0, 0, 5, 5], [1, 2, 3, np.nan],
                    ["ok", "ok", "ok", "timeout"])
    b = load_block(_run(ge), req)
    assert b.loop == "closed" and b.clients == 3 and b.window_s == 8.0
    assert b.throughput_rps == pytest.approx(3 / 8) and b.timeouts == 1
    assert b.excluded.warmup == 3 and b.excluded.cooldown == 2
    assert b.latency_ms.min_ms == 1 and b.latency_ms.max_ms == 3 and b.latency_stdev_ms == 1
    assert b.latency_from_schedule_ms is None              # no schedule in a closed loop
    assert b.per_client.min == 0 and b.per_client.max == 2  # client 2 never counted
    assert b.note == CLOSED_NOTE.format(n=3) and "coordinated omission" in b.note
    assert b.think == "const 1000 µs"


def test_load_block_open_has_schedule_latency():
    ge = GeData("ge-0", Path("."), requests=pd.DataFrame(),
                summary=GeSummary.model_validate(ge_summary()))
    req = req_frame([np.nan] * 3, [0, 1, 2], [0, 1, 2], [1, 1, 1])
    req["rt_sched_ms"] = [1.0, 2.0, 3.0]
    b = load_block(_run(ge, 2.0), req)
    assert b.loop == "open" and b.clients is None and b.per_client is None
    assert b.latency_from_schedule_ms.max_ms == 3 and b.note == OPEN_NOTE
    assert b.throughput_rps == pytest.approx(1.5)


def test_requests_csv_with_and_without_the_new_columns(tmp_path):
    old = tmp_path / "old.csv"
    old.write_text("index,device,method,path,scheduled_ns,sent_ns,received_ns,code,outcome,"
                   "retransmissions\n0,0,GET,r,0,1,5,2.05,ok,0\n")
    assert "client" not in read_requests(old).columns      # older GEs still analyse
    new = tmp_path / "new.csv"
    new.write_text("index,device,method,path,scheduled_ns,sent_ns,received_ns,code,outcome,"
                   "retransmissions,received_kernel_ns,client,phase\n"
                   "0,0,GET,r,0,1,5,2.05,ok,0,4,3,warmup\n1,0,GET,r,0,1,5,2.05,ok,0,4,,\n")
    df = read_requests(new)
    assert df["client"].iloc[0] == 3 and pd.isna(df["client"].iloc[1])
    assert df["phase"].iloc[0] == "warmup"
