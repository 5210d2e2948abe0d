"""devices[].push phase verify (runner/during/push_verify.py) against aiocoap's Resource Directory
(a server nobody here wrote): two of three devices registered, the lookup names two, the third
is named as missing; the config rules of the phase."""
import asyncio
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from wotbench.configfile.yaml_loader import load_config
from wotbench.errors import ConfigError
from wotbench.runner.during import push_verify

RD_BIN = Path(sys.executable).parent / "aiocoap-rd"


def _port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cfg(tmp_path, target, **lookup):
    ops = [{"op": "register", "phase": "setup", "target": target, "path": "rd?ep={device}",
            "format": "link-format", "body": "</t>"},
           {"op": "lookup", "phase": "verify", "target": target, "method": "GET",
            "path": "endpoint-lookup/", "expect": 'ep="{device}"', **lookup}]
    c = {"name": "v", "backend": "process", "duration_s": 2,
         "devices": [{"group": "s", "count": 3, "requests": False, "push": ops}]}
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(c))
    return load_config(p)


async def _register(port: int, names: list[str]) -> None:
    from aiocoap import Code, Context, Message
    ctx = await Context.create_client_context()
    try:
        for n in names:
            r = await ctx.request(Message(code=Code.POST, payload=b"</t>", content_format=40,
                                          uri=f"coap://127.0.0.1:{port}/resourcedirectory/?ep={n}&base=coap://127.0.0.1:1")).response
            assert r.code.is_successful(), r
    finally:
        await ctx.shutdown()


def _start_rd(tmp_path) -> tuple[subprocess.Popen, int]:
    """aiocoap-rd on a free port. The port is free when _port() returns, but another process
    (a parallel test's client socket) can take it before the RD binds: then the RD exits at
    once, and it is started again on another port (its stderr says why, kept per attempt)."""
    errors = []
    for attempt in range(3):
        port = _port()
        err = tmp_path / f"rd-{attempt}.err"
        rd = subprocess.Popen([str(RD_BIN), "--bind", f"127.0.0.1:{port}"],
                              stdout=subprocess.DEVNULL, stderr=err.open("wb"))
        deadline = time.monotonic() + 15
        while True:
            try:
                asyncio.run(asyncio.wait_for(_register(port, ["s-0", "s-2"]), 5))
                return rd, port
            except Exception:
                if rd.poll() is not None:
                    errors.append(err.read_text()[-300:])
                    break
                if time.monotonic() >= deadline:
                    rd.terminate()
                    rd.wait(10)
                    raise AssertionError("aiocoap-rd did not answer within 15 s")
                time.sleep(0.2)
    raise AssertionError(f"aiocoap-rd exited at start three times: {errors}")


@pytest.mark.skipif(not RD_BIN.exists(), reason="aiocoap-rd is not in the venv")
def test_lookup_counts_and_names_the_missing_device(tmp_path):
    rd, port = _start_rd(tmp_path)
    try:
        cfg = _cfg(tmp_path, f"127.0.0.1:{port}")
        [v] = push_verify.verify(cfg)
        assert (v.expected, v.found, v.missing) == (3, 2, ["s-1"])
        assert v.answers == {f"127.0.0.1:{port}": "2.05"}
        assert "named 2 of 3 s device(s); not named: s-1" in v.describe()
    finally:
        rd.terminate()
        rd.wait(10)


def test_a_target_that_does_not_answer_finds_none(tmp_path, monkeypatch):
    monkeypatch.setattr(push_verify, "TIMEOUT_S", 1.0)
    [v] = push_verify.verify(_cfg(tmp_path, f"127.0.0.1:{_port()}"))
    assert v.found == 0 and v.missing == ["s-0", "s-1", "s-2"]
    assert "answered" in v.describe()


@pytest.mark.parametrize("lookup,why", [
    ({"expect": None}, "phase verify needs `expect`"),
    ({"expect": "ep={seq}"}, "expect: expected only the fields"),
    ({"body": "x"}, "expected no body"),
])
def test_verify_rules(tmp_path, lookup, why):
    with pytest.raises(ConfigError) as e:
        _cfg(tmp_path, "127.0.0.1:5683", **lookup)
    assert why in "\n".join(e.value.problems)
