"""Things from W3C TDs and Thing Models (issue 34): validation errors name the file and the JSON
pointer, ``things:`` expands into device groups, and the trace, resource files and per-instance
TDs come from the TD's forms and the workload per affordance."""
from __future__ import annotations

import copy
import csv
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from wotbench.configfile.yaml_loader import config_from_dict, load_config
from wotbench.deploy.fleet import problems as fleet_problems
from wotbench.deploy.resolve import device_addresses, dump_resolved
from wotbench.errors import ConfigError
from wotbench.things.tdschema import schema_source
from wotbench.things.trace import write_trace
from wotbench.workload.trace_io import read_resources, read_trace

REPO = Path(__file__).resolve().parents[2]
THINGS = REPO / "configs" / "things"

LAMP = json.loads((THINGS / "lamp.td.json").read_text())


def _cfg(tmp_path: Path, things: list, **top) -> dict:
    return {"name": "t", "duration_s": 20, "backend": "process", "things": things, **top}


def _write(tmp_path: Path, name: str, doc) -> str:
    p = tmp_path / name
    p.write_text(doc if isinstance(doc, str) else json.dumps(doc, indent=1))
    return str(p)


def _problems(raw: dict, base: Path) -> list[str]:
    with pytest.raises(ConfigError) as e:
        config_from_dict(raw, base)
    return e.value.problems


LAMP_LOAD = [{"affordance": "properties/status", "op": "readproperty", "rate_per_s": 5}]


# -- validation: file + JSON pointer, never a traceback ---------------------------------------

def test_schema_error_names_file_and_pointer(tmp_path):
    bad = copy.deepcopy(LAMP)
    bad["properties"]["status"]["forms"][0]["href"] = 42
    f = _write(tmp_path, "bad.td.json", bad)
    p = _problems(_cfg(tmp_path, [{"td": f, "load": LAMP_LOAD}]), tmp_path)
    assert any(x.startswith(f"things[0].td: {f}: /properties/status/forms/0/href: ")
               for x in p), p


def test_missing_required_key_is_named(tmp_path):
    bad = copy.deepcopy(LAMP)
    del bad["title"]
    f = _write(tmp_path, "notitle.td.json", bad)
    p = _problems(_cfg(tmp_path, [{"td": f}]), tmp_path)
    assert any(f"{f}: (document): 'title' is a required property" in x for x in p), p


def test_json_syntax_error_names_line_and_column(tmp_path):
    f = _write(tmp_path, "broken.td.json", '{\n  "title": "x",\n  "properties": {,}\n}\n')
    p = _problems(_cfg(tmp_path, [{"td": f}]), tmp_path)
    assert p == [f"things[0].td: {f}:3:18: (document): JSON syntax error: Expecting property "
                 "name enclosed in double quotes"], p


def test_missing_file(tmp_path):
    p = _problems(_cfg(tmp_path, [{"td": "nope.td.json"}]), tmp_path)
    assert p == [f"things[0].td: {tmp_path / 'nope.td.json'}: (document): file not found"]


def test_placeholder_without_value_names_its_use_and_the_key(tmp_path):
    f = str(THINGS / "thermostat.tm.json")
    p = _problems(_cfg(tmp_path, [{"model": f, "count": 2}]), tmp_path)
    assert p == [f"things[0].model: {f}: /id: placeholder {{{{ROOM}}}} has no value, "
                 "expected things[0].instance.ROOM"], p


def test_unknown_affordance_and_op_without_form(tmp_path):
    f = str(THINGS / "lamp.td.json")
    p = _problems(_cfg(tmp_path, [{"td": f, "load": [
        {"affordance": "properties/colour", "op": "readproperty", "rate_per_s": 1},
        {"affordance": "events/overheating", "op": "subscribeevent",
         "notify": {"dist": "exponential", "mean": 100}},
        {"affordance": "actions/toggle", "op": "invokeaction", "rate_per_s": 1}]}]), tmp_path)
    assert len(p) == 1 and p[0].startswith(f"things[0].td: {f}: /properties/colour: "
                                           "things[0].load[0].affordance: the TD has no "
                                           "properties/colour"), p


def test_an_http_only_form_makes_an_http_thing(tmp_path):
    """No longer refused: the Thing speaks HTTP (tests/unit/test_things_http.py)."""
    td = copy.deepcopy(LAMP)
    td["properties"]["status"]["forms"][0]["href"] = "http://lamp.example/status"
    f = _write(tmp_path, "http.td.json", td)
    cfg = config_from_dict(_cfg(tmp_path, [{"td": f, "load": LAMP_LOAD}]), tmp_path)
    assert [(g.protocol, g.paths) for g in cfg.devices] == [("http", ["status", ".well-known/wot"])]


def test_observe_needs_a_form_with_that_op(tmp_path):
    td = copy.deepcopy(LAMP)
    td["properties"]["status"]["forms"][0]["op"] = ["readproperty"]
    f = _write(tmp_path, "noobs.td.json", td)
    p = _problems(_cfg(tmp_path, [{"td": f, "load": [
        {"affordance": "properties/status", "op": "observeproperty",
         "notify": {"dist": "deterministic", "mean": 500}}]}]), tmp_path)
    assert p == [f"things[0].td: {f}: /properties/status/forms: things[0].load[0].op: no form "
                 "offers observeproperty, expected a form with op observeproperty"], p


def test_spec_errors_name_the_config_key(tmp_path):
    f = str(THINGS / "lamp.td.json")
    p = _problems(_cfg(tmp_path, [{"td": f, "load": [
        {"affordance": "actions/toggle", "op": "readproperty", "rate_per_s": 1}]},
        {"td": f, "cont": 3}]), tmp_path)
    assert any(x.startswith("things[0].load[0]:") and "op readproperty on actions" in x
               for x in p), p
    assert "things[1].cont: unknown key, did you mean 'count'?" in p, p


def test_the_official_schema_is_used_when_installed():
    pytest.importorskip("jsonschema")
    from importlib import metadata
    try:
        metadata.distribution("domus-tdd-api")
    except metadata.PackageNotFoundError:
        pytest.skip("domus-tdd-api (which ships the W3C TD 1.1 JSON Schema) is not installed")
    assert schema_source().startswith("W3C TD 1.1 JSON Schema")


# -- expansion ---------------------------------------------------------------------------------

def _small(tmp_path) -> Path:
    src = yaml.safe_load((REPO / "configs" / "td-small.yaml").read_text())
    src["backend"] = "process"
    for t in src["things"]:
        for k in ("td", "model"):
            if k in t:
                t[k] = str(REPO / "configs" / t[k])
    p = tmp_path / "td-small.yaml"
    p.write_text(yaml.safe_dump(src))
    return p


def test_things_become_device_groups_and_reload_the_same(tmp_path):
    cfg = load_config(_small(tmp_path))
    groups = [(g.group, g.count, g.thing, g.resources) for g in cfg.devices]
    # lamp: status, toggle, oh + .well-known/wot; thermostat: 2 properties, 1 action,
    # 1 event + .well-known/wot
    assert groups == [("lamp", 3, 0, 4), ("thermostat", 5, 1, 5)]
    lamp = cfg.devices[0]
    assert lamp.observe is not None and lamp.requests
    assert lamp.rit.mean == pytest.approx(1000 / 3.0)          # 2 + 0.5 + 0.5 req/s
    # request-weighted service time: (2*1 + 0.5*1 + 0.5*8) / 3 ms
    assert lamp.service_time.mean == pytest.approx(6.5 / 3)
    out = dump_resolved(cfg, tmp_path / "resolved.yaml")
    again = load_config(out)
    assert [g.model_dump() for g in again.devices] == [g.model_dump() for g in cfg.devices]


def test_observe_ops_run_in_the_engine(tmp_path):
    """The engine has Observe (docs/FLEET.md): an observed Thing group may be a fleet."""
    raw = yaml.safe_load(_small(tmp_path).read_text())
    raw["things"][0]["engine"] = "fleet"
    cfg = config_from_dict(raw, tmp_path)
    fleets = [g for g in cfg.devices if g.engine == "fleet"]
    assert fleets and any(g.observe is not None for g in fleets)
    assert not fleet_problems(cfg)


# -- trace, resource files, per-instance TDs ---------------------------------------------------

def test_trace_comes_from_the_forms_and_the_rates(tmp_path):
    cfg = load_config(_small(tmp_path))
    out = tmp_path / "trace"
    write_trace(cfg, out)
    addrs = device_addresses(cfg)
    tds = [json.loads(line) for line in (out / "things" / "tds.jsonl").read_text().splitlines()]
    assert [t["device"] for t in tds] == [a.name for a in addrs]
    for t, a in zip(tds, addrs):
        assert t["td"]["base"] == f"coap://{a.ip}:{a.port}/"
    assert len({t["td"]["id"] for t in tds}) == 8              # unique ids in the run
    assert tds[3]["td"]["id"] == "urn:building:thermostat:room-0"
    assert tds[3]["td"]["properties"]["temperature"]["forms"][0]["href"] == "properties/temperature"

    lamp0 = read_resources(out / "resources" / "lamp-0.csv")
    rows = {r.path: r for r in lamp0.itertuples()}
    assert set(rows) == {"status", "toggle", "oh", ".well-known/wot"}
    assert rows["toggle"].service_time_us == 8000 and rows["status"].service_time_us == 1000
    assert rows["status"].notify_dist == "exponential" and rows["status"].notify_mean_us == 1_000_000
    assert rows["oh"].notify_dist == "deterministic" and rows["oh"].notify_mean_us == 2_000_000
    assert rows["toggle"].notify_dist == "none"
    td_bytes = len(json.dumps(tds[0]["td"], separators=(",", ":"), ensure_ascii=False).encode())
    assert rows[".well-known/wot"].payload_bytes == td_bytes
    assert rows["status"].payload_bytes in (len('"on"'), len('"off"'))   # the enum's, as JSON

    tr = read_trace(out / "trace.csv")
    lamp_ids = {a.id for a in addrs if a.group == "lamp"}
    lamp = tr[tr.device_id.isin(lamp_ids)]
    paths = lamp.uri.str.replace(r"^coap://[^/]+/", "", regex=True)
    by = lamp.assign(p=paths).groupby(["method", "p"]).size().to_dict()
    assert by[("OBSERVE", "status?o=0")] == 3 and by[("CANCEL", "status?o=0")] == 3
    assert by[("OBSERVE", "oh?o=1")] == 3
    # Poisson counts over 3 devices x 20 s: 2/s -> 120, 0.5/s -> 30 (within ~5 sigma)
    assert abs(by[("GET", "status")] - 120) < 55
    assert abs(by[("PUT", "status")] - 30) < 28 and abs(by[("POST", "toggle")] - 30) < 28
    puts = lamp[lamp.method == "PUT"]
    # each write carries its own value of the enum, sized by it (the trace's body column)
    assert set(puts.body) <= {'"on"', '"off"'} and len(set(puts.body)) == 2
    assert list(puts.payload_bytes) == [len(b) for b in puts.body]
    assert set(lamp[lamp.method == "GET"].payload_bytes.fillna(0)) == {0}
    assert set(lamp[lamp.method != "PUT"].body) == {""}       # toggle has no input: no body

    aff = list(csv.DictReader(open(out / "things" / "affordances.csv")))
    assert [(r["group"], r["affordance"], r["op"], r["method"], r["path"]) for r in aff][:3] == [
        ("lamp", "properties/status", "readproperty", "GET", "status"),
        ("lamp", "properties/status", "writeproperty", "PUT", "status"),
        ("lamp", "actions/toggle", "invokeaction", "POST", "toggle")]
    assert aff[-1]["model"] == "Thermostat" and aff[-1]["first_device"] == "3"


def _decoded(body: str):
    from urllib.parse import unquote_to_bytes
    return json.loads(unquote_to_bytes(body))


def test_writes_and_invocations_carry_values_of_their_schema_drawn_with_the_seed(tmp_path):
    """writeproperty/invokeaction requests carry JSON values generated from the affordance's
    data schema (type, minimum/maximum, enum), one per request, the same for the same seed."""
    import jsonschema
    from wotbench.workload.formats import TRACE_BODY_COLUMN
    model = json.loads((THINGS / "thermostat.tm.json").read_text())
    schemas = {"targetTemperature": model["properties"]["targetTemperature"],
               "setMode": model["actions"]["setMode"]["input"]}
    load = [{"affordance": "properties/targetTemperature", "op": "writeproperty", "rate_per_s": 2},
            {"affordance": "actions/setMode", "op": "invokeaction", "rate_per_s": 2},
            {"affordance": "properties/temperature", "op": "readproperty", "rate_per_s": 1}]
    entry = {"model": str(THINGS / "thermostat.tm.json"), "group": "t", "count": 4,
             "instance": {"ROOM": "r{index}"}, "load": load}
    bodies = {}
    for seed in (1, 1, 2):
        cfg = config_from_dict(_cfg(tmp_path, [entry], seed=seed), tmp_path)
        out = tmp_path / f"s{seed}-{len(bodies)}"
        write_trace(cfg, out)
        assert (out / "trace.csv").read_text().splitlines()[0].endswith(TRACE_BODY_COLUMN)
        tr = read_trace(out / "trace.csv")
        path = tr.uri.str.replace(r"^coap://[^/]+/", "", regex=True)
        got = {}
        for name, p in (("targetTemperature", "properties/targetTemperature"),
                        ("setMode", "actions/setMode")):
            rows = tr[path == p]
            assert len(rows) > 40                                  # 4 x 2/s x 20 s
            values = [_decoded(b) for b in rows.body]
            for v in values:
                jsonschema.validate(v, schemas[name])               # a value of its schema
            assert list(rows.payload_bytes) == [len(json.dumps(v, separators=(",", ":")))
                                                for v in values]
            got[name] = values
        assert len(set(got["targetTemperature"])) > 20              # drawn per request
        assert set(got["setMode"]) == {"heat", "cool", "off"}
        assert all(10 <= v <= 30 for v in got["targetTemperature"])
        assert set(tr[path == "properties/temperature"].body) == {""}   # a read has none
        bodies[(seed, len(bodies))] = got
    (a, b, c) = bodies.values()
    assert a == b and a["targetTemperature"] != c["targetTemperature"]


def test_a_payload_template_with_things_bodies_is_refused(tmp_path):
    load = [{"affordance": "properties/targetTemperature", "op": "writeproperty", "rate_per_s": 1}]
    entry = {"model": str(THINGS / "thermostat.tm.json"), "count": 1,
             "instance": {"ROOM": "r{index}"}, "load": load}
    p = _problems(_cfg(tmp_path, [entry], gateways={"payload_template": "{{seq}}"}), tmp_path)
    assert p == ["gateways.payload_template: a Thing's writeproperty/invokeaction requests carry "
                 "their own values of the affordance's data schema, expected no payload template "
                 "with things:"]


def test_same_seed_same_trace(tmp_path):
    cfg = load_config(_small(tmp_path))
    write_trace(cfg, tmp_path / "a")
    write_trace(cfg, tmp_path / "b")
    assert (tmp_path / "a" / "trace.csv").read_bytes() == (tmp_path / "b" / "trace.csv").read_bytes()


def test_building_example_expands_to_10000_things():
    cfg = load_config(REPO / "configs" / "td-building.yaml")
    assert cfg.total_devices == 10000
    assert [(g.group, g.count) for g in cfg.devices] == [
        ("thermostat", 4000), ("light", 4000), ("occupancy", 2000)]
    rate = sum(g.count * 1000.0 / g.rit.mean for g in cfg.devices)
    assert 250 < rate < 320, rate
    assert all(g.payload_bytes <= 1024 for g in cfg.devices)   # the engine has no block-wise yet
    assert not np.isnan(rate)


# -- the report's table ------------------------------------------------------------------------

def test_report_table_groups_requests_by_model_and_affordance(tmp_path):
    from wotbench.rundir import RunDir
    from wotbench.report.things_section import things_table
    rd = RunDir(tmp_path / "run")
    (rd.trace_dir / "things").mkdir(parents=True)
    (rd.trace_dir / "things" / "affordances.csv").write_text(
        "group,model,first_device,devices,affordance,op,method,path,pattern\n"
        "lamp,Lamp,0,2,properties/status,readproperty,GET,status,status(\\?.*)?\n"
        "lamp,Lamp,0,2,actions/toggle,invokeaction,POST,toggle,toggle(\\?.*)?\n"
        "thermostat,Thermostat,2,1,properties/temperature,readproperty,GET,properties/temperature,"
        "properties/temperature(\\?.*)?\n")
    ge = rd.ge_dir("ge-0")
    ge.mkdir(parents=True)
    ms = 1_000_000
    (ge / "requests.csv").write_text(
        "index,device,method,path,scheduled_ns,sent_ns,received_ns,code,outcome,retransmissions\n"
        f"0,0,GET,/status,0,0,{2 * ms},2.05,ok,0\n"
        f"1,1,GET,status?o=3,0,0,{4 * ms},2.05,ok,0\n"
        f"2,1,POST,toggle,0,0,,,timeout,0\n"
        f"3,2,GET,properties/temperature,0,0,{1 * ms},2.05,ok,0\n"
        f"4,2,GET,status,0,0,{9 * ms},4.04,error,0\n")   # not a form of a thermostat
    t = things_table(rd, ["ge/ge-0"], 10.0)
    rows = {(r["model"], r["affordance"]): r for r in t["rows"]}
    st = rows[("Lamp", "properties/status")]
    assert (st["requests"], st["ok"], st["p50"], st["max"], st["throughput"]) == (2, 2, 2.0, 4.0, 0.2)
    assert st["span_rate"] == pytest.approx(2 / 0.004)        # first send 0, last answer 4 ms
    tg = rows[("Lamp", "actions/toggle")]
    assert (tg["requests"], tg["ok"], tg["timeout"], tg["p50"]) == (1, 0, 1, None)
    assert rows[("Thermostat", "properties/temperature")]["requests"] == 1
    assert sum(r["requests"] for r in t["rows"]) == 4     # request 4 belongs to no row


def test_observe_rows_count_their_notifications(tmp_path):
    """An OBSERVE row's notifications: the GE's notifications.csv rows of its group's devices
    and a path of its pattern (another group's, or another path's, are not counted)."""
    from wotbench.rundir import RunDir
    from wotbench.report.things_section import things_table
    rd = RunDir(tmp_path / "run")
    (rd.trace_dir / "things").mkdir(parents=True)
    (rd.trace_dir / "things" / "affordances.csv").write_text(
        "group,model,first_device,devices,affordance,op,method,path,pattern\n"
        "t,Thermostat,0,2,properties/temperature,observeproperty,OBSERVE,properties/temperature,"
        "properties/temperature(\\?.*)?\n"
        "t,Thermostat,0,2,properties/temperature,readproperty,GET,properties/temperature,"
        "properties/temperature(\\?.*)?\n"
        "o,Occupancy,2,1,events/presence,subscribeevent,OBSERVE,events/presence,"
        "events/presence(\\?.*)?\n")
    ge = rd.ge_dir("ge-0")
    ge.mkdir(parents=True)
    (ge / "requests.csv").write_text(
        "index,device,method,path,scheduled_ns,sent_ns,received_ns,code,outcome,retransmissions\n"
        "0,0,OBSERVE,properties/temperature?o=0,0,0,1000,2.05,ok,0\n"
        "1,1,OBSERVE,properties/temperature?o=0,0,0,1000,2.05,ok,0\n"
        "2,2,OBSERVE,events/presence?o=1,0,0,1000,2.05,ok,0\n")
    (ge / "notifications.csv").write_text(
        "observation,device,path,seq,received_ns,type,code,flags\n"
        "0,0,properties/temperature?o=0,3,5000,con,2.05,\n"
        "0,0,properties/temperature?o=0,4,6000,con,2.05,\n"
        "1,1,properties/temperature?o=0,3,5000,con,2.05,\n"
        "2,2,events/presence?o=1,7,5000,non,2.05,\n"
        "2,2,properties/temperature?o=0,7,5000,non,2.05,\n")   # not a form of device 2's
    rows = {(r["group"], r["op"]): r for r in things_table(rd, ["ge/ge-0"], 10.0)["rows"]}
    assert rows[("t", "observeproperty")]["notifications"] == 3
    assert rows[("t", "observeproperty")]["requests"] == 2
    assert rows[("o", "subscribeevent")]["notifications"] == 1
    assert rows[("t", "readproperty")]["notifications"] is None   # not an observation


def test_no_things_no_table(tmp_path):
    from wotbench.rundir import RunDir
    from wotbench.report.things_section import things_table
    assert things_table(RunDir(tmp_path), [], 1.0) == {"available": False}


# -- a Thing Description Directory under load --------------------------------------------------

def test_directory_run_registers_verifies_and_deregisters_every_instance(tmp_path):
    src = yaml.safe_load((REPO / "configs" / "td-directory.yaml").read_text())
    src["things"][0]["model"] = str(THINGS / "thermostat.tm.json")
    src["things"][0]["count"] = 20
    src["directory"]["server"]["command"] = ["/bin/true", "{address}:{port}"]
    src["directory"]["queries_per_s"] = 2
    p = tmp_path / "d.yaml"
    p.write_text(yaml.safe_dump(src))
    cfg = load_config(p)
    assert [(g.group, g.protocol, g.count, g.directory) for g in cfg.devices] == [
        ("tdd", "http", 1, True)]
    assert cfg.gateways.http.body_template is None                # each request has its own
    assert cfg.gateways.http.headers == ["Content-Type: application/td+json"]
    assert cfg.gateways.http.connections == 2                     # the config's, kept
    write_trace(cfg, tmp_path / "t")
    tr = read_trace(tmp_path / "t" / "trace.csv")
    path = tr.uri.str.replace(r"^http://[^/]+/", "", regex=True)
    reg = path[(tr.method == "PUT") & ~path.str.contains(r"\?")]
    assert len(reg) == 20 and reg.nunique() == 20
    # every registration and update carries its instance's own TD: its id the URL's, its own
    # base address and room, the bytes of its line of things/tds.jsonl
    tds = [json.loads(x)["td"] for x in (tmp_path / "t/things/tds.jsonl").read_text().splitlines()]
    by_id = {td["id"]: td for td in tds}
    assert len(by_id) == 20 and len({td["base"] for td in tds}) == 20
    puts = tr[tr.method == "PUT"]
    assert len(puts) > 20                                         # registrations and updates
    for p, body, size in zip(path[puts.index], puts.body, puts.payload_bytes):
        td = _decoded(body)
        tid = p.split("?")[0].removeprefix("things/")
        assert td == by_id[tid] and td["id"] == tid
        assert size == len(json.dumps(td, separators=(",", ":"), ensure_ascii=False).encode())
    assert by_id[reg.iloc[0].removeprefix("things/")]["description"].startswith("Room thermostat in room-")
    assert set(tr[tr.method != "PUT"].body) == {""}
    assert (tr.send_time_us[reg.index] < 30e6).all()               # the registration storm
    ver = path[(tr.method == "GET") & path.str.endswith("?verify")]
    assert sorted(ver.str.replace("?verify", "", regex=False)) == sorted(reg)
    dele = path[tr.method == "DELETE"]
    assert sorted(dele) == sorted(reg) and (tr.send_time_us[dele.index] >= 70e6).all()
    queries = tr[path == "things?offset=0&limit=10"]
    assert 18 < len(queries) < 65                                  # 2/s over 90 - 50 - 20 s
    aff = list(csv.DictReader(open(tmp_path / "t" / "things" / "affordances.csv")))
    assert [r["op"] for r in aff] == ["register", "verify", "update", "deregister", "query"]
    again = load_config(dump_resolved(cfg, tmp_path / "resolved.yaml"))
    assert [g.model_dump() for g in again.devices] == [g.model_dump() for g in cfg.devices]


def test_a_body_template_with_a_directory_is_refused(tmp_path):
    src = yaml.safe_load((REPO / "configs" / "td-directory.yaml").read_text())
    src["things"][0]["model"] = str(THINGS / "thermostat.tm.json")
    src["gateways"]["http"]["body_template"] = "{}"
    p = _problems(src, tmp_path)
    assert p == ["gateways.http.body_template: every registration carries its instance's own TD, "
                 "expected no body template with directory:"]


def test_directory_phases_must_fit_the_test(tmp_path):
    src = yaml.safe_load((REPO / "configs" / "td-directory.yaml").read_text())
    src["things"][0]["model"] = str(THINGS / "thermostat.tm.json")
    src["duration_s"] = 30
    p = _problems(src, tmp_path)
    assert p == ["directory: register_within_s + verify_within_s + deregister_within_s = 70 s, "
                 "expected at most duration_s (30 s): the phases follow one another"], p


def test_rare_requests_keep_their_rate_in_a_short_test():
    """A Thing read every 30 s in a 30 s test: one request per instance on average (a first
    arrival at U * X1 would give ~1.5 for exponential intervals)."""
    from wotbench.config.distributions import make_distribution
    from wotbench.config.schema import DistSpec
    from wotbench.workload.renewal import stationary_arrivals
    for spec in (DistSpec(dist="exponential", mean=30000), DistSpec(dist="uniform", mean=30000, cv=0.5),
                 DistSpec(dist="deterministic", mean=30000)):
        rows = stationary_arrivals(make_distribution(spec), np.random.default_rng(7), 20000, 30000.0)
        assert abs(sum(len(r) for r in rows) / 20000 - 1.0) < 0.03, spec


# -- payloads from data schemas ----------------------------------------------------------------

@pytest.mark.parametrize("schema", [
    {"type": "integer", "minimum": 3, "maximum": 7},
    {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
    {"type": "string", "minLength": 12},
    {"type": "array", "items": {"type": "boolean"}, "minItems": 3, "maxItems": 3},
    {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"enum": ["x", "y"]}},
     "required": ["a", "b"]},
    {"const": 42},
])
def test_generated_bodies_conform_to_their_schema(schema):
    import jsonschema
    from wotbench.things import payloads
    rng = np.random.default_rng(3)
    value = payloads.generate(schema, rng)
    jsonschema.validate(value, schema)
    size, why = payloads.body(schema, np.random.default_rng(3))
    assert why is None and size == len(json.dumps(value, separators=(",", ":")))


def test_an_unsatisfiable_schema_is_named(tmp_path):
    td = copy.deepcopy(LAMP)
    td["properties"]["status"] = {"type": "integer", "minimum": 10, "maximum": 5,
                                  "forms": [{"href": "status"}]}
    f = _write(tmp_path, "unsat.td.json", td)
    p = _problems(_cfg(tmp_path, [{"td": f, "load": LAMP_LOAD}]), tmp_path)
    assert len(p) == 1 and p[0].startswith(f"things[0].td: {f}: /properties/status: cannot "
                                           "generate a value it accepts"), p


# -- service time per affordance: a number or a distribution ---------------------------------

def _thermostats(tmp_path, n: int, service, entry_service=None) -> dict:
    load = {"affordance": "properties/temperature", "op": "readproperty", "rate_per_s": 1}
    if entry_service is not None:
        load["service_time_ms"] = entry_service
    return _cfg(tmp_path, [{"model": str(THINGS / "thermostat.tm.json"), "group": "t",
                            "count": n, "instance": {"ROOM": "r{index}"},
                            "service_time_ms": service, "load": [load]}], duration_s=2)


def test_service_time_distribution_is_drawn_per_instance(tmp_path):
    """The group's instances get the distribution's bin means (as a device group's resources
    do): their mean is the distribution's, they differ, and their cv is about the given one."""
    raw = _thermostats(tmp_path, 400, 3, entry_service={"dist": "gamma", "mean": 2, "cv": 0.5})
    cfg = config_from_dict(raw, tmp_path)
    write_trace(cfg, tmp_path / "trace")
    names = [a.name for a in device_addresses(cfg)]
    svc = {n: {r.path: r.service_time_us for r in
               read_resources(tmp_path / "trace" / "resources" / f"{n}.csv").itertuples()}
           for n in names}
    temp = np.array([s["properties/temperature"] for s in svc.values()], float)
    assert temp.mean() == pytest.approx(2000, rel=0.01)
    assert temp.std() / temp.mean() == pytest.approx(0.5, rel=0.15)
    assert len(set(temp.tolist())) > 300
    # every other affordance keeps the entry's fixed 3 ms
    assert {s["properties/targetTemperature"] for s in svc.values()} == {3000}
    again = config_from_dict(raw, tmp_path)
    write_trace(again, tmp_path / "trace2")           # same seed, same draws
    assert (tmp_path / "trace" / "resources" / "t-7.csv").read_text() == \
        (tmp_path / "trace2" / "resources" / "t-7.csv").read_text()


def test_bad_service_time_distribution_names_its_key(tmp_path):
    msgs = _problems(_thermostats(tmp_path, 2, {"dist": "uniform", "mean": 2, "cv": 5}), tmp_path)
    assert any(m.startswith("things[0].service_time_ms") and "cv" in m for m in msgs), msgs
    msgs = _problems(_thermostats(tmp_path, 2, 1, entry_service={"dist": "gamma"}), tmp_path)
    assert any(m.startswith("things[0].load[0].service_time_ms") and "mean" in m
               for m in msgs), msgs
