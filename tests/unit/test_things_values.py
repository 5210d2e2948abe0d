"""What a Thing's requests and responses carry (issue 34): responses are values of the
affordance's data schema (one per instance and resource, in the resource file's body column),
and the group is sized from the largest value a schema can give, since each request draws its
own (a CoAP request whose value may exceed one datagram is refused)."""
from __future__ import annotations

import copy
import json
from pathlib import Path
from urllib.parse import unquote_to_bytes

import jsonschema
import numpy as np
import pytest

from wotbench.configfile.yaml_loader import config_from_dict
from wotbench.errors import ConfigError
from wotbench.things import payloads
from wotbench.things.trace import write_trace


def read_resources(path: Path) -> list:
    """The resource file's rows with their body column (CONTRACTS §1: fields split at commas,
    a body's own commas percent-encoded, its quotes literal: not RFC 4180 quoting)."""
    from types import SimpleNamespace
    head, *lines = path.read_text().splitlines()
    keys = head.split(",")
    return [SimpleNamespace(**{k: (int(v) if k in ("payload_bytes", "service_time_us") else v)
                               for k, v in zip(keys, line.split(","))}) for line in lines]


REPO = Path(__file__).resolve().parents[2]
THINGS = REPO / "configs" / "things"
LAMP = json.loads((THINGS / "lamp.td.json").read_text())
THERMOSTAT_TM = json.loads((THINGS / "thermostat.tm.json").read_text())


@pytest.mark.parametrize("schema", [
    {"type": "number", "minimum": -40, "maximum": 85},
    {"type": "number", "minimum": 0, "maximum": 1e6},
    {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
    {"type": "integer", "minimum": 9, "exclusiveMinimum": 9, "maximum": 9},
    {"type": "integer", "minimum": -5, "maximum": 100000},
    {"type": "array", "items": {"type": "number", "minimum": 0, "maximum": 1000},
     "minItems": 40, "maxItems": 40},
    {"type": "object", "properties": {"a": {"type": "boolean"}, "b": {"enum": ["x", "long-one"]},
                                      "c": {"type": "string", "minLength": 3}}},
    {"oneOf": [{"type": "integer", "minimum": 0, "maximum": 12}, {"type": "string"}]},
    {"const": {"k": [1, 2, 3]}},
    {"type": "null"},
])
def test_no_generated_value_exceeds_the_schemas_maximum(schema):
    bound = payloads.max_bytes(schema)
    rng = np.random.default_rng(7)
    sizes = [len(payloads.value_text(schema, rng).encode()) for _ in range(2000)]
    assert max(sizes) <= bound, (max(sizes), bound)
    assert bound <= max(sizes) + 2 * max(1, len(schema.get("properties", {})) +
                                         schema.get("minItems", 0)), (max(sizes), bound)


def _lamp_raw(tmp_path: Path, td: dict, load: list) -> dict:
    f = tmp_path / "lamp.td.json"
    f.write_text(json.dumps(td))
    return {"name": "t", "duration_s": 10, "backend": "process",
            "things": [{"td": str(f), "group": "lamp", "count": 2, "load": load}]}


def test_a_coap_request_value_that_may_exceed_one_datagram_is_refused(tmp_path):
    """The issue's bug: a value sampled near 1 KiB once said nothing of the others, each
    request drawing its own; the group is now sized from the schema's maximum."""
    td = copy.deepcopy(LAMP)
    # 140 numbers in [0, 1000]: 5-6 characters each when sampled, up to 7 by the bound
    td["properties"]["status"] = {"type": "array", "minItems": 140, "maxItems": 140,
                                  "items": {"type": "number", "minimum": 0, "maximum": 1000},
                                  "forms": [{"href": "status"}]}
    load = [{"affordance": "properties/status", "op": "writeproperty", "rate_per_s": 1}]
    sampled = len(payloads.value_text(td["properties"]["status"], np.random.default_rng(1)))
    assert sampled <= 1024 < payloads.max_bytes(payloads.data_schema(td["properties"]["status"]))
    with pytest.raises(ConfigError) as e:
        config_from_dict(_lamp_raw(tmp_path, td, load), tmp_path)
    [p] = e.value.problems
    assert p.startswith(f"things[0].td: {tmp_path / 'lamp.td.json'}: /properties/status: "
                        "things[0].load[0]: a value of its data schema may take "), p
    assert "expected at most 1024 (each CoAP request carries its own value in one datagram" in p
    td["properties"]["status"]["minItems"] = td["properties"]["status"]["maxItems"] = 100
    cfg = config_from_dict(_lamp_raw(tmp_path, td, load), tmp_path)
    assert cfg.devices[0].request_payload_bytes == \
        payloads.max_bytes(payloads.data_schema(td["properties"]["status"])) <= 1024


def test_reads_and_invocations_answer_with_values_of_their_schema(tmp_path):
    """The resource file's body column: one value per instance and resource (wot-device and
    wot-fleet serve one body per resource), conforming, drawn with the seed; an observable
    resource keeps filler (notifications carry no body)."""
    tm = REPO / "configs" / "things" / "thermostat.tm.json"
    raw = {"name": "t", "duration_s": 5, "backend": "process", "seed": 3,
           "things": [{"model": str(tm), "group": "t", "count": 20, "instance": {"ROOM": "r{index}"},
                       "load": [{"affordance": "properties/temperature", "op": "readproperty",
                                 "rate_per_s": 1}]}]}
    cfg = config_from_dict(raw, tmp_path)
    write_trace(cfg, tmp_path / "a")
    schemas = {f"properties/{k}": v for k, v in THERMOSTAT_TM["properties"].items()}
    schemas.update({f"actions/{k}": v["output"] for k, v in THERMOSTAT_TM["actions"].items()
                    if "output" in v})
    values = {}
    for i in range(20):
        rows = read_resources(tmp_path / "a" / "resources" / f"t-{i}.csv")
        for r in rows:
            if r.path in schemas:
                assert r.body, (i, r.path)
                raw_value = unquote_to_bytes(r.body)
                assert r.payload_bytes == len(raw_value)
                value = json.loads(raw_value)
                jsonschema.validate(value, payloads._checkable(payloads.data_schema(schemas[r.path])))
                values.setdefault(r.path, set()).add(json.dumps(value))
    assert "properties/temperature" in values
    assert len(values["properties/temperature"]) > 5          # instances answer differently
    write_trace(config_from_dict(raw, tmp_path), tmp_path / "b")
    assert (tmp_path / "a/resources/t-4.csv").read_text() == \
        (tmp_path / "b/resources/t-4.csv").read_text()          # same seed, same values


def test_an_observable_resource_answers_with_filler(tmp_path):
    load = [{"affordance": "properties/status", "op": "observeproperty",
             "notify": {"dist": "exponential", "mean": 1000}}]
    cfg = config_from_dict(_lamp_raw(tmp_path, LAMP, load), tmp_path)
    write_trace(cfg, tmp_path / "tr")
    rows = {r.path: r for r in read_resources(tmp_path / "tr/resources/lamp-0.csv")}
    assert not rows["status"].body and rows["status"].notify_dist == "exponential"
    assert rows["status"].payload_bytes == payloads.max_bytes(payloads.data_schema(
        LAMP["properties"]["status"]))
    assert rows["oh"].notify_dist == "none"                   # not subscribed: a value
    assert json.loads(unquote_to_bytes(rows["oh"].body)) == "x" * 8   # of its data: a string
