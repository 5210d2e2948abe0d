"""A killed GE's journal becomes its requests.csv and summary.json (runner/teardown/ge_journal.py)."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from wotbench.rundir.ge_files import GeSummary
from wotbench.runner.teardown.ge_journal import (HEADER, MAGIC, RECORD, RF_DONE, RF_KSTAMP, RF_SENT,
                                        SCHEME_HTTP, JournalError, salvage)

START = 5_000_000_000


def _journal(tmp_path, rows, timeout_ns=1_000_000_000, scheme=0, base="coap://10.0.0.1:5683"):
    head = np.zeros(1, HEADER)
    head["scheme"] = scheme
    head["magic"], head["version"], head["record_size"] = MAGIC, 1, RECORD.itemsize
    head["n"], head["start_mono_ns"], head["token_salt"] = len(rows), START, 0xABC
    head["timeout_ns"] = timeout_ns
    rec = np.zeros(len(rows), RECORD)
    for i, r in enumerate(rows):
        for k, v in r.items():
            rec[i][k] = v
    path = tmp_path / "ge-0.journal"
    path.write_bytes(head.tobytes() + rec.tobytes())
    trace = tmp_path / "trace.csv"
    trace.write_text("device_id,send_time_us,method,uri\n" + "".join(
        f"{r['device']},{r['sched_ns'] // 1000},GET,{base}/r{i}?q=1\n"
        for i, r in enumerate(rows)))
    return path, trace


def test_salvage_keeps_every_outcome_and_finishes_what_was_in_flight(tmp_path):
    ok = dict(sched_ns=0, sent_ns=10, recv_ns=2_000_010, device=0, code=0x45, outcome=1,
              flags=RF_SENT | RF_DONE | RF_KSTAMP, rx_wait_ns=10_000)
    old_pending = dict(sched_ns=1_000, sent_ns=1_010, device=1, flags=RF_SENT)
    new_pending = dict(sched_ns=2_900_000_000, sent_ns=2_900_000_000, device=0, flags=RF_SENT)
    unsent = dict(sched_ns=9_000_000_000, device=1)
    journal, trace = _journal(tmp_path, [ok, old_pending, new_pending, unsent])
    out = tmp_path / "ge-0"
    counts = salvage(journal, trace, out, "ge-0", START + 3_000_000_000,
                     {"wait": "busy", "type": "con", "retransmit": True})
    assert counts == {"ok": 1, "error": 1, "timeout": 1, "reset": 0, "unsent": 1}
    req = pd.read_csv(out / "requests.csv", dtype={"code": str})
    assert list(req.outcome) == ["ok", "timeout", "error", "unsent"]
    assert req.code[0] == "2.05" and req.path[0] == "r0?q=1"
    assert req.received_kernel_ns[0] == 2_000_010 - 10_000 and pd.isna(req.received_ns[1])
    assert pd.isna(req.sent_ns[3]) and req.sent_ns[2] == 2_900_000_000
    summary = GeSummary.model_validate(json.loads((out / "summary.json").read_text()))
    assert summary.salvaged and summary.interrupted and summary.wait == "busy"
    assert summary.outcomes.model_dump() == counts and summary.start_mono_ns == START
    assert summary.token_salt == f"{0xABC:016x}"


def test_a_file_that_is_no_journal_is_refused(tmp_path):
    bad = tmp_path / "x.journal"
    bad.write_bytes(b"\0" * 200)
    with pytest.raises(JournalError, match="not a version-1"):
        salvage(bad, tmp_path / "t.csv", tmp_path, "ge-0", 0, {})


def test_a_journal_for_another_trace_is_refused(tmp_path):
    journal, trace = _journal(tmp_path, [dict(sched_ns=0, device=0)])
    trace.write_text("device_id,send_time_us,method,uri\n0,0,GET,coap://a/r\n0,1,GET,coap://a/r\n")
    with pytest.raises(JournalError, match="1 records for 2 trace lines"):
        salvage(journal, trace, tmp_path / "o", "ge-0", 0, {})


def test_an_http_journal_keeps_the_status_codes_and_outcome_kinds(tmp_path):
    """An http:// GE's records hold the status (code: its class); the salvage writes the status
    as the GE does (404, not 4.04) with each outcome kind: 2xx ok, 4xx/5xx error with the code,
    a reset with the instant it was seen and no code."""
    done = RF_SENT | RF_DONE
    ok = dict(sched_ns=0, sent_ns=10, recv_ns=900_000, device=0, status=200, code=2, outcome=1,
              flags=done | RF_KSTAMP, rx_wait_ns=1_000)
    missing = dict(sched_ns=1_000, sent_ns=1_010, recv_ns=800_000, device=1, status=404, code=4,
                   outcome=2, flags=done)
    busy = dict(sched_ns=2_000, sent_ns=2_010, recv_ns=700_000, device=0, status=503, code=5,
                outcome=2, flags=done)
    reset = dict(sched_ns=3_000, sent_ns=3_010, recv_ns=600_000, device=1, outcome=4, flags=done)
    pending = dict(sched_ns=4_000, sent_ns=4_010, device=0, flags=RF_SENT)
    journal, trace = _journal(tmp_path, [ok, missing, busy, reset, pending], scheme=SCHEME_HTTP,
                              base="http://127.0.0.1:8080")
    counts = salvage(journal, trace, tmp_path / "ge-0", "ge-0", START + 10_000_000,
                     {"wait": "busy", "type": "con", "retransmit": False})
    assert counts == {"ok": 1, "error": 3, "timeout": 0, "reset": 1, "unsent": 0}
    req = pd.read_csv(tmp_path / "ge-0" / "requests.csv", dtype={"code": str})
    assert list(req.code.fillna("")) == ["200", "404", "503", "", ""]
    assert list(req.outcome) == ["ok", "error", "error", "reset", "error"]
    assert req.received_ns[3] == 600_000 and pd.isna(req.received_ns[4])
    assert req.received_kernel_ns[0] == 900_000 - 1_000


def test_a_coap_journal_reads_its_code_byte_not_the_mid(tmp_path):
    """The same union holds a CoAP request's MID: a CoAP journal's code is the code byte."""
    ok = dict(sched_ns=0, sent_ns=10, recv_ns=900, device=0, status=0x1234, code=0x84, outcome=2,
              flags=RF_SENT | RF_DONE)
    journal, trace = _journal(tmp_path, [ok], scheme=1)
    salvage(journal, trace, tmp_path / "o", "ge-0", START + 1_000, {})
    assert pd.read_csv(tmp_path / "o" / "requests.csv", dtype={"code": str}).code[0] == "4.04"
