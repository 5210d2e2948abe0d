"""Issue 35 on the Python side: per-request values in HTTP paths and templates, request budgets
and the ramp-up, the realised concurrency of a closed loop, rate profiles and the GE-integrity
rule on a time-varying schedule."""
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from testkit.groups import config_of, problems_of
from wotbench.analysis.ge_integrity import _rit_arrays, ge_integrity, time_varying
from wotbench.analysis.load_figures import MIN_REALISED_SHARE, load_block, shortfall
from wotbench.analysis.loading import GeData, RunData
from wotbench.config import http_spec, loadloop
from wotbench.rundir import GeIntegrityParams, RunRecord
from wotbench.rundir.ge_files import GeSummary
from wotbench.rundir.load_block import ClientFairness
from wotbench.workload.generate import generate, write_trace
from wotbench.workload.trace_io import read_trace

from analysis_fixtures import ge_summary

REPO = Path(__file__).resolve().parents[2]
NGINX = ["nginx", "-e", "stderr", "-c", "{config}", "-p", "{scratch}/"]
TEMPLATE = str(REPO / "configs" / "http-nginx.conf")


def web(**kw) -> dict:
    g = {"group": "web", "count": 2, "protocol": "http",
         "server": {"command": NGINX, "config_template": TEMPLATE}, "paths": ["e/{{seq}}"]}
    g.update(kw)
    return g


def dev(**kw) -> dict:
    return {"group": "cpu", "count": 1, "resources": 2, **kw}


# ---------------------------------------------------------------- (1) templates
def test_per_request_values_in_paths_and_templates(tmp_path):
    c = config_of(web(), gateways={"http": {"headers": ["X-Id: {{rand}}"],
                                            "body_template": '{"id": "{{seq}}-{{client}}"}'}},
                  duration_s=2)
    assert http_spec.ge_args(c)[-2:] == ["--seed", str(c.seed)]   # {{rand}} follows the seed
    write_trace(c, tmp_path)
    t = read_trace(tmp_path / "trace.csv")
    assert len(t) and t.uri.str.endswith("/e/{{seq}}").all()     # the GE fills it per request
    no_rand = config_of(web(), duration_s=2)
    assert "--seed" not in http_spec.ge_args(no_rand)


@pytest.mark.parametrize("groups,gw,message", [
    ([web(paths=["e/{{sequence}}"])], {},
     "devices[0].paths[0]:1:3: unknown placeholder 'sequence', expected one of {{index}} "
     "{{device}} {{seq}}"),
    ([web(paths=["e/{{payload}}"])], {}, "devices[0].paths[0]:1:3: unknown placeholder 'payload'"),
    ([web()], {"http": {"body_template": "{{seq}} {{time_us}}"}},
     "gateways.http.body_template:1:9: unknown placeholder 'time_us'"),
    ([{"group": "c", "server": {"command": ["coap-server"]}, "paths": ["r/{{index}}"]}], {},
     "devices[0].paths[0]:1:3: unknown placeholder 'index', expected one of {{seq}} {{client}} "
     "{{rand}} {{time_ms}} {{time_ns}} (a literal '{{' cannot be written) (a CoAP path takes "
     "the per-request values only)"),
    ([{"group": "c", "server": {"command": ["coap-server"]}, "paths": ["r?x={{seq}}"]}], {},
     "devices[0].paths[0]: 'r?x={{seq}}': a value in the query"),
    ([{"group": "c", "server": {"command": ["coap-server"]}, "paths": ["r"]}],
     {"payload_template": "{{id}}"}, "gateways.payload_template:1:1: unknown placeholder 'id'"),
    ([web()], {"payload_template": "{{seq}}"},
     "gateways.payload_template: a CoAP key, expected gateways.http.body_template"),
])
def test_unknown_values_are_refused_with_the_key(groups, gw, message):
    got = problems_of(*groups, gateways=gw)
    assert any(message in p for p in got), got


# ---------------------------------------------------------------- (2) budgets, ramp-up
def test_budget_and_ramp_become_ge_args():
    c = config_of(dev(), gateways={"loop": "closed", "clients": 20, "requests_per_client": 200,
                                   "ramp_up_s": 2.5}, duration_s=60)
    a = loadloop.ge_args(c)
    assert a[a.index("--requests-per-client") + 1] == "200"
    assert a[a.index("--ramp-ms") + 1] == "2500"
    assert a[a.index("--max-requests") + 1] == str(20 * 200)   # the whole budget, no more


@pytest.mark.parametrize("gw,message", [
    ({"requests_per_client": 5}, "gateways: requests_per_client is a closed-loop key"),
    ({"ramp_up_s": 1}, "gateways: ramp_up_s is a closed-loop key"),
    ({"loop": "closed", "clients": 2, "ramp_up_s": 10},
     "gateways.ramp_up_s: 10 is not below duration_s 10"),
    ({"loop": "closed", "clients": 2, "requests_per_client": 0}, "gateways.requests_per_client"),
])
def test_bad_budgets_are_refused_with_the_key(gw, message):
    got = problems_of(dev(), gateways=gw, duration_s=10)
    assert any(message in p for p in got), got


def closed_summary(clients, **cl_kw) -> GeSummary:
    cl = {"clients": clients, "select": "round-robin", "targets": 1, "think": "0",
          "think_a_us": 0.0, "think_b_us": 0.0, "duration_ms": 10000.0, "warmup_ms": 0.0,
          "cooldown_ms": 0.0, "stopped_ms": 10000.0, "capacity": 10**6,
          "capacity_reached": False, **cl_kw}
    return GeSummary.model_validate(ge_summary(clients=clients, closed_loop=cl))


def frame(client, outcome=None) -> pd.DataFrame:
    n = len(client)
    return pd.DataFrame({"index": np.arange(n), "device": np.zeros(n, int),
                         "client": np.array(client, float), "sched": np.zeros(n),
                         "sent": np.zeros(n), "outcome": pd.Categorical(outcome or ["ok"] * n),
                         "rt_sent_ms": np.ones(n), "rt_sched_ms": np.ones(n)})


def run_of(summary: GeSummary) -> RunData:
    ge = GeData("ge-0", Path("."), requests=pd.DataFrame(), summary=summary)
    return RunData(run_dir=Path("."), run=RunRecord(), ges=[ge], cd_ge=None, devices={},
                   cd=None, test_start_ns=0, duration_s=10.0)


def test_realised_concurrency_far_below_the_configured_one_is_said():
    # 100 clients configured; 3 of them sent everything (the rest timed out once each)
    client = [0] * 300 + [1] * 300 + [2] * 300 + list(range(3, 100))
    outcome = ["ok"] * 900 + ["timeout"] * 97
    b = load_block(run_of(closed_summary(100)), frame(client, outcome))
    assert b.realised_clients == pytest.approx(b.per_client.jain * 100) and b.realised_clients < 5
    assert b.clients_unanswered == 97
    assert b.concurrency_shortfall.startswith("closed loop: 100 clients configured, but the "
                                              "requests came from about 4 of them")
    assert "97 clients never answered" in b.concurrency_shortfall
    even = load_block(run_of(closed_summary(4)), frame([0, 1, 2, 3] * 5))
    assert even.realised_clients == pytest.approx(4) and even.concurrency_shortfall is None
    per = ClientFairness(clients=10, min=0, max=1, mean=0.5, jain=MIN_REALISED_SHARE)
    assert shortfall(10, per, 5)[1] is None           # exactly at the limit: not said


def test_budget_window_ends_when_the_clients_stopped():
    s = closed_summary(2, requests_per_client=3, stopped_ms=2000.0, clients_done=2)
    b = load_block(run_of(s), frame([0, 0, 0, 1, 1, 1]))
    assert b.window_s == pytest.approx(2.0) and b.throughput_rps == pytest.approx(3.0)
    assert b.requests_per_client == 3 and b.clients_done == 2 and b.ramp_s is None


# ---------------------------------------------------------------- (5) rate profiles
def test_steps_profile_gives_each_step_its_rate():
    c = config_of(dev(count=2, rit={"dist": "exponential", "mean": 100},
                      rate_profile={"shape": "steps", "rates": [10, 100, 400], "step_s": 5}),
                  duration_s=15, seed=3)
    t = generate(c).send_time_us / 1e6
    per_step = [np.count_nonzero((t >= a) & (t < a + 5)) / 2 / 5 for a in (0, 5, 10)]
    for got, want in zip(per_step, [10, 100, 400]):
        assert got == pytest.approx(want, rel=4 / (10 * want) ** 0.5)   # Poisson: 4 sigma
    det = config_of(dev(rit={"dist": "deterministic", "mean": 1},
                         rate_profile={"shape": "ramp", "start": 10, "end": 20}), duration_s=4)
    t_us = generate(det).send_time_us
    d = np.diff(t_us) / 1e3   # evenly spaced at the current rate: 1000 / rate(t) ms
    rate = 10 + 10 * (t_us[1:] / 1e6) / 4
    assert d == pytest.approx(1000 / rate, rel=0.03)


def test_sine_and_burst_keep_their_mean():
    sine = config_of(dev(rit={"dist": "exponential", "mean": 1},
                          rate_profile={"shape": "sine", "mean": 200, "amplitude": 150,
                                        "period_s": 2}), duration_s=10)
    assert len(generate(sine).send_time_us) == pytest.approx(2000, rel=0.1)
    burst = config_of(dev(rit={"dist": "exponential", "mean": 1},
                           rate_profile={"shape": "burst", "base": 10, "peak": 1000,
                                         "every_s": 2, "length_s": 0.5}), duration_s=6)
    t = generate(burst).send_time_us / 1e6
    inside = np.count_nonzero(((t >= 2) & (t < 2.5)) | ((t >= 4) & (t < 4.5)))
    assert inside == pytest.approx(1000, rel=0.15) and len(t) - inside < 120


@pytest.mark.parametrize("profile,message", [
    ({"shape": "steps", "rates": [1, 0], "step_s": 1}, "every rate must be 0.001..1e+06"),
    ({"shape": "steps", "rates": [1]}, "shape steps needs rates, step_s; step_s is missing"),
    ({"shape": "ramp", "start": 1, "end": 2, "peak": 3}, "peak is not a key of shape ramp"),
    ({"shape": "sine", "mean": 10, "amplitude": 10, "period_s": 1}, "mean - amplitude must be"),
    ({"shape": "burst", "base": 1, "peak": 9, "every_s": 1, "length_s": 1},
     "burst length_s 1 must be below every_s 1"),
])
def test_bad_profiles_name_the_key(profile, message):
    got = problems_of(dev(rate_profile=profile))
    assert any("devices[0].rate_profile" in p and message in p for p in got), got


def test_profile_with_a_closed_loop_is_refused():
    got = problems_of(dev(rate_profile={"shape": "ramp", "start": 1, "end": 2}),
                      gateways={"loop": "closed", "clients": 2})
    assert any(p.startswith("devices[0].rate_profile: with gateways.loop: closed") for p in got)


def integrity_frame(sched_ms, lag_ms) -> pd.DataFrame:
    sched = np.asarray(sched_ms) * 1e6
    return pd.DataFrame({"index": np.arange(len(sched)), "device": np.zeros(len(sched), int),
                         "sched": sched, "sent": sched + np.asarray(lag_ms) * 1e6})


def test_integrity_on_a_time_varying_schedule_uses_the_local_rate():
    # 1 Hz for 1000 s, then 1000 Hz for 1 s: a 5 % tolerance of the median RIT (1 s) would
    # excuse a 20 ms lag in the fast part, where it is 20 periods
    slow = np.arange(1000) * 1000.0
    fast = 1_000_000.0 + np.arange(1000) * 1.0
    sched = np.concatenate([slow, fast])
    lag = np.where(sched >= 1_000_000, 20.0, 0.0)
    a = _rit_arrays(integrity_frame(sched, lag), GeIntegrityParams())
    assert a["tol_ms"][-1] == pytest.approx(0.05) and a["tol_ms"][10] == pytest.approx(50)
    b, _, _ = ge_integrity(integrity_frame(sched, lag), "ge-0", {0: "d"}, GeIntegrityParams())
    assert b.kept_up is False and "later than" in b.problems[0]
    # a steady schedule is judged on its one median RIT, as before
    steady = np.cumsum(np.random.default_rng(1).exponential(10.0, 2000))
    assert not time_varying(np.zeros(1999, int), np.diff(steady))
    a2 = _rit_arrays(integrity_frame(steady, np.zeros(2000)), GeIntegrityParams())
    assert np.unique(a2["tol_ms"]).size == 1


# ---------------------------------------------------------------- (6) a server's cores
def test_a_started_server_gets_the_cores_it_asks_for_or_the_reason():
    from wotbench.deploy.plan import make_plan
    from wotbench.errors import ConfigError
    c = config_of(web(paths=["x"], count=1, server={"command": NGINX, "config_template": TEMPLATE,
                                                     "cpus": 3}))
    p = make_plan(c, cores=range(8))
    assert p.devices["web-0"] == "3-5" and p.device_cores == [6, 7]   # after OS, GE, CD-GE
    with pytest.raises(ConfigError) as e:
        make_plan(c, cores=range(4))
    assert e.value.problems[0].startswith("devices[0].server.cpus: 3 cores for the started "
                                          "server(s), but this host can spare 0")


# ---------------------------------------------------------------- (4) notify: in a config
def notify_cfg(**notify) -> dict:
    return {"marker": "urn:u:", "subscribers": [{"name": "sse", "kind": "stream",
                                                 "device": "web-0", "path": "sub"}], **notify}


def test_notify_block_and_the_sink_arguments():
    from wotbench.config import notify as notify_spec
    c = config_of(web(paths=["pub"]), backend="process",
                  gateways={"http": {"body_template": "{\"id\": \"urn:u:{{seq}}\"}"}},
                  notify=notify_cfg(accept="text/event-stream", subscribers=[
                      {"name": "sse", "kind": "stream", "device": "web-0", "path": "sub"},
                      {"name": "ws", "kind": "websocket", "device": "web-1", "path": "/ws"},
                      {"name": "hook", "kind": "webhook", "listen": "127.0.0.1:9000"}]))
    a = notify_spec.sink_args(c, {"web-0": ("127.1.0.2", 8080), "web-1": ("127.1.0.3", 8080)})
    assert a == ["--marker", "urn:u:", "--accept", "text/event-stream",
                 "--stream", "sse=http://127.1.0.2:8080/sub",
                 "--websocket", "ws=ws://127.1.0.3:8080/ws", "--webhook", "hook=127.0.0.1:9000"]


@pytest.mark.parametrize("notify,extra,message", [
    (notify_cfg(marker="id:"), {}, "notify.marker: no path, header or body template of the "
     "updates holds 'id:{{seq}}'"),
    (notify_cfg(subscribers=[{"name": "s", "kind": "stream", "device": "nope"}]), {},
     "notify.subscribers[0].device: 'nope', expected a device of this run"),
    (notify_cfg(subscribers=[{"name": "h", "kind": "webhook", "listen": "127.0.0.1:9000"}]),
     {"backend": "docker"}, "notify.subscribers[0].listen: 127.0.0.1:9000: a server in a "
     "container cannot reach this host's loopback"),
    (notify_cfg(subscribers=[{"name": "h", "kind": "webhook", "listen": "here"}]), {},
     "notify.subscribers[0].listen: 'here', expected ADDRESS:PORT"),
    (notify_cfg(), {"gateways": {"count": 2, "http": {"body_template": "urn:u:{{seq}}"}}},
     "notify: with gateways.count 2, expected 1"),
])
def test_bad_notify_blocks_are_refused_with_the_key(notify, extra, message):
    top = {"backend": "process", "gateways": {"http": {"body_template": "urn:u:{{seq}}"}},
           **extra}
    got = problems_of(web(paths=["pub"]), notify=notify, **top)
    assert any(message in p for p in got), got


def test_notify_objectives_join_the_run_slo():
    from wotbench.analysis import notify_slo
    from wotbench.config.notify import NotifySlo
    from wotbench.rundir.notify import NotifyBlock
    sub = {"kind": "stream", "updates": 100, "notified": 98, "lost": 2, "lost_share": 0.02,
           "duplicates": 0, "unknown_ids": 0, "notifications_per_s": 50.0}
    block = NotifyBlock(marker="u:", subscribers=[
        {**sub, "name": "a", "latency_ms": {"p50": 1.0, "p99": 4.0}},
        {**sub, "name": "b", "lost": 0, "lost_share": 0.0, "notified": 100,
         "latency_ms": {"p50": 2.0, "p99": 12.0}}])
    res = notify_slo.results(NotifySlo(p99_ms=10, lost_max="5%"), block)
    assert [(r.key, r.measured, r.state) for r in res] == [
        ("notify.slo.p99_ms", 12.0, "fail"), ("notify.slo.lost_max", 0.02, "pass")]
    merged = notify_slo.merge(None, res)
    assert merged.status == "missed" and "99th-percentile update→notification latency" in merged.text
    assert notify_slo.merge(None, []) is None


# ---------------------------------------------------------------- (3) setup / verify
def test_setup_and_verify_phases_are_checked_like_the_templates():
    got = problems_of(web(paths=["x"]), gateways={"http": {
        "setup": {"requests": 5, "method": "POST", "path": "e/{{sequence}}",
                  "body_template": "{{seq}"},
        "verify": {"path": "a b"}}})
    assert any(p.startswith("gateways.http.setup.path:1:3: unknown placeholder 'sequence'")
               for p in got), got
    assert any(p.startswith("gateways.http.verify.path: 'a b', expected no spaces") for p in got)


def test_phase_trace_spreads_each_device_at_the_rate():
    from wotbench.config.http_phases import HttpPhase
    from wotbench.runner.http_phases import _trace
    t = _trace(HttpPhase(requests=3, rate=100, method="POST", path="/e/{{seq}}"),
               [(0, "127.1.0.2", 8080), (1, "127.1.0.3", 8080)]).splitlines()
    assert t[0] == "device_id,send_time_us,method,uri,payload_bytes"
    assert t[1:3] == ["0,0,POST,http://127.1.0.2:8080/e/{{seq}},0",
                      "1,0,POST,http://127.1.0.3:8080/e/{{seq}},0"]
    assert t[-1] == "1,20000,POST,http://127.1.0.3:8080/e/{{seq}},0" and len(t) == 7


# ---------------------------------------------------------------- (6) faults in the SUT
@pytest.mark.parametrize("faults,message", [
    ([{"device": "web-7", "at_s": 1, "action": "kill"}],
     "sut_faults[0].device: 'web-7', expected a started server of this run (web-0, web-1)"),
    ([{"device": "web-0", "at_s": 1, "action": "pause"}], "action pause needs for_s"),
    ([{"device": "web-0", "at_s": 1.5, "action": "pause", "for_s": 0.5}],
     "sut_faults[0].at_s: 1.5 + for_s 0.5 is not before the test's end (duration_s 2)"),
    ([{"device": "web-0", "at_s": 0.5, "action": "kill"},
      {"device": "web-0", "at_s": 1, "action": "pause", "for_s": 0.1}],
     "sut_faults[1]: web-0 is killed at 0.5 s before it"),
])
def test_bad_faults_are_refused_with_the_key(faults, message):
    got = problems_of(web(paths=["x"]), sut_faults=faults)
    assert any(message in p for p in got), got


def _fault_record(**kw) -> dict:
    """One fault of RUN/sut-faults.json with every key the runner writes (runner/sut_faults.py)."""
    rec = {"device": "d", "action": "pause", "at_s": 1.0, "for_s": None, "cpus": None,
           "window_s": 1.0, "applied_ns": None, "resumed_ns": None, "stopped_ns": None,
           "throttled_periods": None, "error": None}
    return {**rec, **kw}


def test_the_fault_windows_hold_the_device_requests_by_schedule(tmp_path):
    import json as _json
    from wotbench.analysis.sut_faults import analyse, notes
    (tmp_path / "sut-faults.json").write_text(_json.dumps({"faults": [
        _fault_record(action="pause", at_s=1.0, for_s=1.0, applied_ns=10**9,
                      resumed_ns=2 * 10**9)]}))
    sched = np.arange(0, 3, 0.1) * 1e9
    recv = np.where((sched >= 1e9) & (sched < 2e9), 2.05e9, sched + 1e6)   # held to SIGCONT
    req = pd.DataFrame({"device": 5, "sched": sched, "recv": recv, "outcome": "ok",
                        "rt_sched_ms": (recv - sched) / 1e6})
    other = req.assign(device=6, recv=sched + 1e6, rt_sched_ms=1.0)        # another device
    (f,) = analyse(tmp_path, pd.concat([req, other]), {"d": 5})
    assert (f.before.sent, f.during.sent, f.after.sent) == (10, 10, 10)
    assert f.during.throughput_rps == 0 and f.after.throughput_rps == pytest.approx(20)
    assert f.during.p50_ms == pytest.approx(600) and f.before.p50_ms == pytest.approx(1)
    assert notes([f])[0].startswith("sut fault pause d at 1.00 s: throughput 10 → 0 → 20")


def test_notification_figures_per_subscriber():
    from analysis_fixtures import sink_summary
    from wotbench.analysis.notify_sink import figures
    from wotbench.rundir.sink_files import SinkSummary
    updates = pd.DataFrame({"seq": [0, 1, 2, 3], "sent": [0.0, 1e9, 2e9, 3e9],
                            "ok": [True, True, True, False]})
    notes = pd.DataFrame({"subscriber": ["a", "a", "a", "a", "b"], "id": [0, 1, 1, 9, 0],
                          "received_ns": [2e6, 1.005e9, 1.007e9, 2.5e9, 4e6],
                          "kernel": [1, 1, 1, 0, 1]})
    sink = SinkSummary.model_validate(sink_summary([("a", "stream"), ("b", "webhook")]))
    a, b = figures(updates, notes, sink)
    assert (a.updates, a.notified, a.lost, a.duplicates, a.unknown_ids) == (3, 2, 1, 1, 1)
    assert a.latency_ms["p50"] == pytest.approx(3.5) and a.latency_ms["max"] == pytest.approx(5)
    assert a.notifications_per_s == pytest.approx(3 / 2.498) and a.kernel_share == 0.75
    assert (b.notified, b.lost) == (1, 2) and b.latency_ms["min"] == pytest.approx(4)


def test_restart_and_quota_windows_and_notes(tmp_path):
    """A restart's during window runs from its stop to its answer, then an after window; a
    quota change has none (it lasts)."""
    import json as _json
    from wotbench.analysis.sut_faults import analyse, notes
    (tmp_path / "sut-faults.json").write_text(_json.dumps({"faults": [
        _fault_record(action="restart", at_s=1.0, applied_ns=10**9, stopped_ns=12 * 10**8,
                      resumed_ns=15 * 10**8),
        _fault_record(action="cpu_quota", at_s=2.0, cpus=0.25, applied_ns=2 * 10**9)]}))
    sched = np.arange(0, 3, 0.1) * 1e9
    down = (sched >= 1e9) & (sched < 1.5e9)
    req = pd.DataFrame({"device": 5, "sched": sched, "recv": np.where(down, np.nan, sched + 1e6),
                        "outcome": np.where(down, "timeout", "ok"),
                        "rt_sched_ms": np.where(down, np.nan, 1.0 + (sched >= 2e9) * 4)})
    restart, quota = analyse(tmp_path, req, {"d": 5})
    assert restart.downtime_s == pytest.approx(0.5) and restart.stopped_s == pytest.approx(1.2)
    assert (restart.during.sent, restart.during.failed, restart.after.failed) == (5, 5, 0)
    assert restart.after.start_s == pytest.approx(1.5) and quota.after is None
    assert quota.cpus == 0.25 and quota.during.p50_ms == pytest.approx(5)
    r, q = notes([restart, quota])
    assert r.startswith("sut fault restart d at 1.00 s: throughput 10 → 0 → ") and \
        "while it was down (0.50 s until it answered again)" in r, r
    assert q.startswith("sut fault cpu_quota d to 0.25 cpus at 2.00 s:") and \
        "p50 1.00 → 5.00 ms" in q, q


def test_a_quota_the_process_backend_cannot_set_is_refused_before_the_start(monkeypatch, tmp_path):
    from wotbench.config.sut_faults import SutFault
    from wotbench.errors import ConfigError
    from wotbench.runner import sut_faults
    from wotbench.runner.backends.docker.backend import DockerBackend
    from wotbench.runner.backends.process import cpu_cgroup
    from wotbench.runner.backends.process.backend import ProcessBackend
    monkeypatch.setattr(cpu_cgroup, "unavailable", lambda: "cgroup v2 without the cpu controller")
    f = [SutFault(device="s-0", at_s=1, action="pause", for_s=1),
         SutFault(device="s-0", at_s=2, action="cpu_quota", cpus=0.5)]
    with pytest.raises(ConfigError) as e:
        sut_faults.preflight(f, ProcessBackend("r", tmp_path, log=lambda m: None))
    assert "sut_faults[1].cpus: the process backend changes" in str(e.value)
    assert "cgroup v2 without the cpu controller" in str(e.value)
    assert "sut_faults[0]" not in str(e.value)
    # the container's quota: nothing of this host's
    sut_faults.preflight(f, DockerBackend(None, "r", log=lambda m: None))
    sut_faults.preflight(f[:1], ProcessBackend("r", tmp_path, log=lambda m: None))  # no quota


class _Limiter:
    """A backend's CpuLimiter part as the faults' thread sees it: what it was asked, in order."""
    name = "fake"

    def __init__(self):
        self.calls: list[tuple] = []

    def prepare_cpu_limit(self, name):
        self.calls.append(("prepare", name))

    def limit_cpu(self, name, cpus):
        self.calls.append(("limit", name, cpus))

    def release_cpu_limit(self, name):
        self.calls.append(("release", name))
        return 7


def test_a_cpu_quota_fault_goes_through_the_backends_cpu_limiter(tmp_path):
    """prepare before the test, the limit at its second, the release (with its throttling)
    at the end: the fault never reaches a backend's internals."""
    import json
    import time

    from wotbench.config.sut_faults import SutFault
    from wotbench.runner import sut_faults
    backend = _Limiter()
    f = [SutFault(device="s-0", at_s=0.05, action="cpu_quota", cpus=0.25)]
    out = tmp_path / "sut-faults.json"
    runner = sut_faults.FaultRunner(backend, f, time.monotonic_ns(), out, log=lambda m: None)
    runner.start()
    assert backend.calls[0] == ("prepare", "s-0")
    runner.scheduled.wait(timeout=10)
    runner.finish()
    runner.finish()   # twice: released once, the record kept
    assert backend.calls == [("prepare", "s-0"), ("limit", "s-0", 0.25), ("release", "s-0")]
    rec = json.loads(out.read_text())["faults"][0]
    assert rec["throttled_periods"] == 7 and rec["error"] is None and rec["applied_ns"] > 0
    # what the runner wrote is what the analysis's model reads, key for key
    from wotbench.rundir.sut_faults import FaultsFile
    assert FaultsFile.model_validate_json(out.read_text()).faults[0].throttled_periods == 7


def test_coap_values_in_paths_and_payload_reach_the_trace_and_the_ge_args(tmp_path):
    """A CoAP group's path keeps its per-request values in the trace (the GE fills them); a
    {{rand}} anywhere brings --seed; the payload template is the GE's body template file."""
    coap = {"group": "c", "server": {"command": ["coap-server"]}, "paths": ["e/{{rand}}"],
            "methods": {"PUT": 1}, "rit": {"dist": "deterministic", "mean": 100}}
    c = config_of(coap, gateways={"payload_template": '{"id":"urn:u:{{seq}}"}'}, duration_s=2)
    assert http_spec.ge_args(c) == ["--seed", str(c.seed)]
    assert http_spec.ge_body_text(c) == '{"id":"urn:u:{{seq}}"}'
    write_trace(c, tmp_path)
    t = read_trace(tmp_path / "trace.csv")
    assert len(t) and t.uri.str.endswith("/e/{{rand}}").all()


def test_a_sut_faults_record_the_runner_did_not_write_is_named_not_guessed(tmp_path):
    import json as _json
    from wotbench.analysis.errors import AnalysisError
    from wotbench.analysis.sut_faults import analyse
    bad = _fault_record()
    del bad["window_s"]
    (tmp_path / "sut-faults.json").write_text(_json.dumps({"faults": [bad]}))
    with pytest.raises(AnalysisError, match="sut-faults.json.*window_s"):
        analyse(tmp_path, pd.DataFrame({"device": [], "sched": [], "recv": [], "outcome": [],
                                        "rt_sched_ms": []}), {"d": 5})
