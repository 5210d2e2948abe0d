"""HTTP runs downstream of the GE (issue 22): traces with http:// URIs, the GE's integrity
judged at the instant it handed a request over (an HTTP request that waited for a busy
connection was on time), HTTP 503 as a refusal."""
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from wotbench.analysis import GeIntegrityParams
from wotbench.analysis.ge_integrity import ge_integrity
from wotbench.errors import ConfigError
from wotbench.workload.trace_io import read_trace


def _trace(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "t.csv"
    p.write_text("device_id,send_time_us,method,uri,payload_bytes\n" + body)
    return p


def test_http_trace_with_patch_reads(tmp_path):
    df = read_trace(_trace(tmp_path, "0,0,GET,http://127.0.0.1:8080/a,\n"
                                     "1,10,PATCH,http://h.example/b?x=1,5\n"))
    assert list(df.method) == ["GET", "PATCH"] and list(df.payload_bytes) == [0, 5]


@pytest.mark.parametrize("body,line,what", [
    ("0,0,OBSERVE,http://127.0.0.1/a,\n", 2, "Observe is CoAP only"),
    ("0,0,PATCH,coap://127.0.0.1/a,\n", 2, "PATCH: http:// only"),
    ("0,0,GET,http://127.0.0.1/a,\n0,1,GET,coap://127.0.0.1/a,\n", 3,
     "http:// like the trace's first request"),
    ("0,0,GET,http://127.0.0.1/a#frag,\n", 2, "http://host[:port]/path"),
])
def test_http_trace_problems_name_the_line(tmp_path, body, line, what):
    with pytest.raises(ConfigError) as e:
        read_trace(_trace(tmp_path, body))
    assert f"t.csv:{line}:" in str(e.value) and what in str(e.value)


def test_ge_integrity_charges_a_connection_wait_to_the_server_not_the_ge():
    sched = np.arange(400) * 5_000_000.0                       # every 5 ms
    sent = sched + 3_000_000.0                                 # each left 3 ms late ...
    df = pd.DataFrame({"device": 0, "sched": sched, "sent": sent, "index": np.arange(400)})
    p = GeIntegrityParams()
    late, _, _ = ge_integrity(df, "ge-x", {}, p)
    assert late.kept_up is False
    df["queued"] = sched + 1_000.0                             # ... because it waited, queued at once
    on_time, _, _ = ge_integrity(df, "ge-x", {}, p)
    assert on_time.kept_up is True and on_time.late_share == 0
