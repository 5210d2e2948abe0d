"""The DTLS block of the analysis (wotbench/analysis/dtls.py) on a synthetic run whose GE used
per-request DTLS sessions: handshake times from handshakes.csv, failed handshakes attributed to
the testbed/config (not the SUT), and the GE-integrity check judging the handshake starts."""
import json

import numpy as np
import pandas as pd
import pytest

from analysis_fixtures import make_run
from wotbench.analysis import analyze

HS_MS = 1.5   # every synthetic handshake takes this long; the request leaves right after


def _dtls_run(root, fail_every: int = 0):
    d = make_run(root, duration_s=10, seed=5, cd=False)
    ge = d / "ge" / "ge-0"
    req = pd.read_csv(ge / "requests.csv")
    sched = req["scheduled_ns"].to_numpy(np.int64)
    start = sched + 2000                                 # the ClientHello leaves on time
    end = start + int(HS_MS * 1e6)
    ok = np.ones(len(req), bool)
    if fail_every:
        ok[::fail_every] = False
    shift = end - req["sent_ns"].to_numpy(np.float64)     # the request leaves after its handshake
    for col in ("sent_ns", "received_ns", "received_kernel_ns"):
        if col in req:
            req[col] = (req[col] + shift).astype("Int64")
    req.loc[~ok, ["sent_ns", "received_ns", "received_kernel_ns", "code"]] = pd.NA
    req.loc[~ok, "outcome"] = "error"
    req.to_csv(ge / "requests.csv", index=False)
    pd.DataFrame({"session": np.arange(len(req)), "device": req["device"], "ep": req["device"],
                  "start_ns": start, "end_ns": np.where(ok, end, start + 10**9),
                  "outcome": np.where(ok, "ok", "timeout"), "request": req["index"]}
                 ).to_csv(ge / "handshakes.csv", index=False)
    s = json.loads((ge / "summary.json").read_text())
    s["dtls"] = {"mode": "per-request", "sessions": len(req), "handshakes_ok": int(ok.sum()),
                 "handshakes_failed": int((~ok).sum()), "handshakes_timeout": int((~ok).sum()),
                 "handshake_p50_us": HS_MS * 1e3, "handshake_p99_us": HS_MS * 1e3,
                 "handshake_max_us": HS_MS * 1e3, "cipher": "ECDHE-PSK-CHACHA20-POLY1305",
                 "slots": 64, "slots_exhausted": 0, "closed_by_server": 0,
                 "openssl_allocs_in_loop": 0, "openssl_allocs_per_request": 0.0,
                 "failure": "handshakes timed out after the client's Finished" if fail_every else None}
    (ge / "summary.json").write_text(json.dumps(s))
    return d, len(req), int((~ok).sum())


def test_per_request_handshakes(tmp_path):
    d, n, _ = _dtls_run(tmp_path)
    s = analyze(d).model_dump(mode="json")
    b = s["dtls"]
    assert b["modes"] == ["per-request"] and b["handshakes"] == n and b["handshakes_failed"] == 0
    m = b["by_mode"]["per-request"]
    assert m["ok"] == n and m["time_ms"]["p50"] == pytest.approx(HS_MS)
    assert m["time_ms"]["n"] == n
    # the schedule was kept by the handshake starts, although each request left 1.5 ms late
    assert s["ge_integrity"]["kept_up"] is True, s["ge_integrity"]
    assert s["verdict"]["status"] == "trustworthy"
    series = pd.read_csv(d / "series" / "dtls_handshakes.csv")
    assert len(series) == n and set(series["outcome"]) == {"ok"}


def test_failed_handshakes_are_testbed_not_sut(tmp_path):
    d, n, failed = _dtls_run(tmp_path, fail_every=10)
    s = analyze(d).model_dump(mode="json")
    b = s["dtls"]
    assert b["handshakes_failed"] == failed and b["requests_without_session"] == failed
    assert b["by_mode"]["per-request"]["timeout"] == failed
    assert s["loss"]["by_cause"]["local_send"] == failed and s["loss"]["sut"] == 0
    assert s["verdict"]["status"] == "testbed_loss"
    assert any("DTLS handshakes failed" in r and "not the system under test" in r
               for r in s["verdict"]["reasons"])


def test_plain_run_has_no_dtls_block(tmp_path):
    d = make_run(tmp_path, duration_s=5, seed=2, cd=False)
    assert analyze(d).dtls is None


def test_report_shows_dtls_section(tmp_path):
    from wotbench.report import render_html
    d, n, failed = _dtls_run(tmp_path, fail_every=10)
    analyze(d)
    html = render_html(d)
    table = html[html.index('id="table-dtls"'):]
    table = table[:table.index("</table>")]
    assert "a new session per request (on the schedule)" in table
    assert f'<td class="n">{n}</td><td class="n">{n - failed}</td>' in table
    assert f"{failed} handshake(s) failed" in html and "not against the system under test" in html
    assert "ECDHE-PSK-CHACHA20-POLY1305" in html
    plain = make_run(tmp_path / "plain", duration_s=5, seed=2, cd=False)
    analyze(plain)
    assert 'id="table-dtls"' not in render_html(plain)
