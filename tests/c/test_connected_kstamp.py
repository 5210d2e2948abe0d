"""Kernel receive stamps on the connected devices' and the applications' TCP reads
(common/tcpstamp.h, docs/CONNECTED.md "Where time goes in an RPC"): a message is stamped by the
read that completed it, with that read's kernel stamp (`arrival_stamp`/`reply_stamp` kernel),
never later than the read's own time (`read_ns`/`reply_read_ns`), and the device's service runs
from that stamp. Checked against the scripted edge server, with a message sent in two parts
30 ms apart: its stamp is the second part's arrival, not the first's."""
import json
import re
import subprocess
import threading
import time

import pandas as pd
import pytest

from testkit.connected import ConnFleet, ConnSpec, build, missing_prerequisite
from testkit.scripted_edge import Conn, ScriptedEdge

why = missing_prerequisite()
pytestmark = pytest.mark.skipif(why is not None, reason=why or "")

SPLIT_GAP_S = 0.03


def _wire(c: Conn, text: str) -> bytes:
    data = text.encode()
    if c.kind == "ws":
        return bytes([0x81, len(data)]) + data
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


@pytest.mark.parametrize("protocol", ["websocket", "chunked", "chunked-post"])
def test_a_device_stamps_each_rpc_with_the_kernel_stamp_of_its_completing_read(
        tmp_path, conn_fleet_bin, protocol):
    second_part_at: dict[str, int] = {}

    def on_open(c: Conn) -> None:
        def send():                       # off the server's reading thread
            c.send('{"id":"1-1","method":"ping"}')          # whole, in one segment
            time.sleep(0.05)
            wire = _wire(c, '{"id":"1-2","method":"ping"}')
            with c.lock:
                c.sock.sendall(wire[:9])                     # its beginning...
            time.sleep(SPLIT_GAP_S)
            second_part_at["1-2"] = time.monotonic_ns()      # CLOCK_MONOTONIC, as the engine's
            with c.lock:
                c.sock.sendall(wire[9:])                     # ...and the rest 30 ms later
        threading.Thread(target=send, daemon=True).start()

    specs = [ConnSpec(1, protocol, 4, 1, service_us=2000)]
    with ScriptedEdge(on_open=on_open) as edge:
        fleet = ConnFleet(conn_fleet_bin, tmp_path, edge.server, specs).start(attach_timeout=20)
        edge.wait_for(lambda: "1-2" in second_part_at, 10)
        time.sleep(0.2)                   # the second RPC's reply (2 ms service)
        s = fleet.stop()
        rows = {r["id"]: r for r in fleet.log_rows()}
    assert not edge.errors, edge.errors
    assert set(rows) == {"1-1", "1-2"}, rows
    for r in rows.values():
        arrival, read, due = int(r["arrival_ns"]), int(r["read_ns"]), int(r["due_ns"])
        assert r["arrival_stamp"] == "kernel", r
        assert arrival <= read, r                           # the kernel's stamp is no later
        assert due - arrival == 2_000_000, r                # the service runs from the arrival
        assert r["outcome"] == "sent", r
    # the split RPC is stamped by the read that completed it: the second part's arrival
    assert int(rows["1-2"]["arrival_ns"]) >= second_part_at["1-2"], rows["1-2"]
    assert s["stamps"]["kernel"] == s["msgs_in"] >= 2 and s["stamps"]["user"] == 0, s
    assert s["stamps"]["sockets_refused"] == 0 and s["stamps"]["pin_on"] == 1, s


def test_an_application_stamps_each_reply_with_its_reads_kernel_stamp(tmp_path):
    box: list = []

    def on_post(req):
        rid = re.search(r'"id":"([0-9]+-[0-9]+)"', req.body.decode()).group(1)
        box[0].conns[0].send(f'{{"id":"{rid}","reply":"pong"}}')

    box.append(ScriptedEdge(on_post=on_post))
    with box[0] as edge:
        binary = build("rpc-app", "wot-rpcapp-asan")
        r = subprocess.run([str(binary), "--server", edge.server, "--log-dir", str(tmp_path),
                            "--duration-s", "1", "--apps", "2", "--rate", "50",
                            "--arrival", "constant", "--devices", "0:4", "--timeout-ms", "1000"],
                           capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    s = json.loads((tmp_path / "rpc-summary.json").read_text())
    log = pd.read_csv(tmp_path / "rpc-log.csv", dtype={"id": str})
    ok = log[log["outcome"] == "ok"]
    assert len(ok) == s["ok"] >= 40, s
    assert (ok["reply_stamp"] == "kernel").all(), ok["reply_stamp"].value_counts()
    assert (ok["reply_ns"] <= ok["reply_read_ns"]).all()    # the kernel's stamp is no later
    assert (ok["reply_ns"] > ok["send_ns"]).all()
    assert log.loc[log["outcome"] != "ok", "reply_stamp"].isna().all()
    assert s["replies_kernel_stamped"] == s["ok"] and s["replies_user_stamped"] == 0, s
    assert s["subs_without_kernel_stamps"] == 0 and s["stamp_pin_on"] == 1, s
    # the reader's own delay per reply, as the log's two stamps give it
    lag = (ok["reply_read_ns"] - ok["reply_ns"]).max()
    assert s["reply_read_lag_ns"]["max"] == lag, (s["reply_read_lag_ns"], lag)
