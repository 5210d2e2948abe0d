"""Each emulated Thing serves its own TD at /.well-known/wot (issue 34, docs/WOT.md): the
trace's resource file carries the instance's TD in its ``body`` column, and both device
programs (wot-fleet, wot-device) answer with those bytes, block-wise above 1024 bytes.
Fetched with clients nobody here wrote -- libcoap's coap-client and aiocoap -- and checked
against the TD 1.1 JSON Schema and the instance's own address; a property read answers with
the instance's own value of its schema (the resource file's body). ASan+UBSan builds."""
from __future__ import annotations

import asyncio
import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from testkit.device import Device
from testkit.fleet import Fleet, Spec, build
from wotbench.configfile.yaml_loader import load_config
from wotbench.deploy.resolve import device_addresses
from wotbench.things.tdschema import td_problems
from wotbench.things.trace import write_trace

REPO = Path(__file__).resolve().parents[2]
COAP_CLIENT = shutil.which("coap-client-notls") or shutil.which("coap-client")
NEEDS_COAP_CLIENT = pytest.mark.skipif(
    COAP_CLIENT is None, reason="coap-client-notls (Debian libcoap3-bin) not installed")
WOT = ".well-known/wot"


def _trace(tmp_path: Path) -> tuple[Path, list, dict[str, bytes]]:
    """configs/td-small.yaml's Things (3 lamps from a TD, 5 thermostats from a TM) on a
    loopback subnet of their own: (trace dir, device addresses, each device's TD bytes)."""
    src = yaml.safe_load((REPO / "configs" / "td-small.yaml").read_text())
    src["backend"] = "process"
    src["network"] = {"subnet": f"127.{random.randint(100, 250)}.0.0/16"}
    for t in src["things"]:
        for k in ("td", "model"):
            if k in t:
                t[k] = str(REPO / "configs" / t[k])
    # the lamps' TD above one datagram (block-wise), with non-ASCII text and commas (%-encoded)
    lamp = json.loads(Path(src["things"][0]["td"]).read_text())
    lamp["description"] = "Lampe à économie d'énergie, dimmable; " * 40
    src["things"][0]["td"] = str(tmp_path / "lamp.td.json")
    (tmp_path / "lamp.td.json").write_text(json.dumps(lamp), encoding="utf-8")
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(src))
    cfg = load_config(tmp_path / "c.yaml")
    out = tmp_path / "trace"
    write_trace(cfg, out)
    tds = {}
    for line in (out / "things" / "tds.jsonl").read_text().splitlines():
        d = json.loads(line)
        tds[d["device"]] = json.dumps(d["td"], separators=(",", ":"), ensure_ascii=False).encode()
    return out, device_addresses(cfg), tds


def _check_td(body: bytes, expected: bytes, ip: str, port: int) -> None:
    assert body == expected                       # the instance's own bytes, not filler
    td = json.loads(body)
    assert td_problems("fetched", td) == []       # a valid TD 1.1
    assert td["base"] == f"coap://{ip}:{port}/"  # its own address in the forms
    for kind in ("properties", "actions", "events"):
        for aff in (td.get(kind) or {}).values():
            for form in aff["forms"]:
                assert "://" not in form["href"]  # relative to base: this instance


def _split(res_file: Path) -> tuple[str, str]:
    head, _, rows = res_file.read_text().partition("\n")
    return head + "\n", rows


def _coap_get(uri: str) -> bytes:
    r = subprocess.run([COAP_CLIENT, "-m", "get", "-B", "10", uri], capture_output=True,
                       timeout=15)
    assert r.returncode == 0, r.stderr
    return r.stdout.rstrip(b"\n")    # coap-client ends the payload with a newline


@NEEDS_COAP_CLIENT
def test_fleet_serves_every_instance_its_own_td(tmp_path):
    """Eight Things in one engine, each on the address its TD names; coap-client fetches every
    TD (block-wise when above 1024 bytes, as the lamps' are here) and aiocoap one more. (The
    observable lamps come before the thermostats, which are not: fl_obs_init once wrote past
    its array for such a loop, which ASan reports here.)"""
    out, addrs, tds = _trace(tmp_path)
    assert max(len(b) for b in tds.values()) > 1024     # block-wise transfers are exercised
    specs = []
    for a in addrs:
        head, rows = _split(out / "resources" / f"{a.name}.csv")
        assert head.rstrip().endswith(",body")
        specs.append(Spec(a.id, rows, listen=(a.ip, a.port), name=a.name, res_header=head))
    with Fleet(build("wot-fleet-asan"), tmp_path, specs) as f:
        for a in addrs:
            _check_td(_coap_get(f"coap://{a.ip}:{a.port}/{WOT}"), tds[a.name], a.ip, a.port)
        a = addrs[-1]
        _check_td(asyncio.run(_aiocoap_get(f"coap://{a.ip}:{a.port}/{WOT}")), tds[a.name],
                  a.ip, a.port)
        temps = [_coap_get(f"coap://{a.ip}:{a.port}/properties/temperature")
                 for a in addrs if a.group == "thermostat"]
        assert f.stop() == 0
        err = f.stderr()
    assert "AddressSanitizer" not in err and "runtime error" not in err, err
    # a read answers with the instance's own value of the property's schema (its resource
    # file's body), not filler; instances differ
    own = [_body_of(out / "resources" / f"{a.name}.csv", "properties/temperature")
           for a in addrs if a.group == "thermostat"]
    assert temps == own and len(set(temps)) > 1, (temps, own)
    assert all(-20 <= json.loads(t) <= 50 for t in temps)
    assert f.summary()["blockwise"]["block2_follow_ups"] > 0   # the lamps' TDs went block-wise
    rows = [r for r in f.log() if r["path"] == WOT]
    assert len(rows) == len(addrs) + 1 and {r["code"] for r in rows} == {"2.05"}


def _body_of(res_file: Path, path: str) -> bytes:
    from urllib.parse import unquote_to_bytes
    head, *rows = res_file.read_text().splitlines()
    col = head.split(",").index("body")
    return next(unquote_to_bytes(r.split(",")[col]) for r in rows if r.split(",")[0] == path)


async def _aiocoap_get(uri: str) -> bytes:
    import aiocoap
    ctx = await aiocoap.Context.create_client_context()
    try:
        resp = await asyncio.wait_for(
            ctx.request(aiocoap.Message(code=aiocoap.GET, uri=uri)).response, 15)
        assert resp.code == aiocoap.CONTENT
        return resp.payload
    finally:
        await ctx.shutdown()


@NEEDS_COAP_CLIENT
def test_wot_device_serves_its_own_td(tmp_path):
    """The process form (wot-device, libcoap) serves the same bytes."""
    out, addrs, tds = _trace(tmp_path)
    a = max(addrs, key=lambda x: len(tds[x.name]))
    head, rows = _split(out / "resources" / f"{a.name}.csv")
    dev = Device(build("wot-device-asan"), tmp_path, rows)
    dev.res.write_text(head + rows)     # Device writes the four-column header; this file has body
    with dev:
        ip, port = dev.addr
        body = _coap_get(f"coap://{ip}:{port}/{WOT}")
        assert dev.stop() == 0
    # the device listens on another address than the trace's: the bytes are the trace's TD
    assert body == tds[a.name] and td_problems("fetched", json.loads(body)) == []
    assert "AddressSanitizer" not in dev.stderr()


@pytest.mark.parametrize("row, message", [
    ("w,0,sleep,4,ab%2", "res0.csv:2: bad %-escape in body, expected %XX with two hex digits"),
    ("w,0,sleep,4,abc", "res0.csv:2: body of 3 bytes with payload_bytes 4, expected a body of "
                        "exactly payload_bytes bytes (decoded)"),
    ("w,0,sleep,4,a%2Cbc%0", "res0.csv:2: bad %-escape in body"),
])
def test_bad_body_is_named_by_file_and_line(tmp_path, row, message):
    spec = Spec(0, row + "\n", res_header="path,service_time_us,mode,payload_bytes,body\n")
    with pytest.raises(RuntimeError) as e:
        with Fleet(build("wot-fleet-asan"), tmp_path, [spec], ready_timeout=10):
            pass
    assert message in str(e.value)


def test_body_on_an_observable_resource_is_refused(tmp_path):
    head = ("path,service_time_us,mode,payload_bytes,notify_dist,notify_mean_us,"
            "notify_jitter_us,notify_service_us,notify_type,max_age_s,body\n")
    spec = Spec(0, "t,0,sleep,2,exponential,1000,0,0,con,60,ab\n", res_header=head)
    with pytest.raises(RuntimeError) as e:
        with Fleet(build("wot-fleet-asan"), tmp_path, [spec], ready_timeout=10):
            pass
    assert "res0.csv:2: a body on an observable resource" in str(e.value)
