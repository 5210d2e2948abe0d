"""The models of the JSON files the C programs write (wotbench/rundir/ge_files.py,
device_files.py) and the percentile families (rundir/quantiles.py): the saved example run's
files load, a missing or unknown key is an analysis error naming the file and the key (exit 2,
no traceback), and the families keep the JSON keys summary.json always had."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from analysis_fixtures import device_summary, ge_summary, make_run
from wotbench.analysis import AnalysisError, analyze
from wotbench.analysis.stats import quantiles_of
from wotbench.rundir.device_files import DeviceSummary
from wotbench.rundir.ge_files import GeDtls, GeSummary, GeWarmupFile
from wotbench.rundir.summary import (BlockTimes, DecompStats, LagStats, ObserveQuantiles, RdStats,
                                     RitStats, RtStats, SplitStats)

EXAMPLE = Path(__file__).resolve().parents[2] / "reports" / "example"


def test_the_example_runs_files_load():
    # an older GE and wot-device: none of the keys added later, all of the first ones
    for f in (EXAMPLE / "ge" / "ge-0" / "summary.json", EXAMPLE / "cd-ge" / "summary.json"):
        s = GeSummary.model_validate_json(f.read_text())
        assert s.token_salt is None and s.salt is None and s.timeout_ms == 10000
        assert s.send_lag_us.p99 > 0
    for f in (EXAMPLE / "devices").glob("*/device-summary.json"):
        d = DeviceSummary.model_validate_json(f.read_text())
        assert d.log_dropped == 0 and d.impair is None


def test_a_current_ge_summary_with_dtls_and_warmup():
    dtls = {"mode": "reuse", "sessions": 2, "handshakes_ok": 2, "handshakes_failed": 0,
            "handshakes_timeout": 0, "handshake_p50_us": 900.5, "handshake_p99_us": 1200.0,
            "handshake_max_us": 1200.0, "cipher": "ECDHE-PSK-CHACHA20-POLY1305", "slots": 0,
            "slots_exhausted": 0, "closed_by_server": 0, "openssl_allocs_in_loop": 0,
            "openssl_allocs_per_request": 0.0, "failure": None}
    s = GeSummary.model_validate(ge_summary(
        token_salt="82e842934e2547bc", dtls=dtls,
        warmup={"endpoints": 1, "answered": 1, "took_ms": 0.46, "rounds": 1}))
    assert s.salt == 0x82E842934E2547BC and s.dtls.mode == "reuse" and s.warmup.answered == 1
    with pytest.raises(ValueError, match="failure"):   # null is written, never left out
        GeDtls.model_validate({k: v for k, v in dtls.items() if k != "failure"})
    w = GeWarmupFile.model_validate({"endpoints": 2, "answered": 1, "took_ms": 3.0, "rounds": 2,
                                     "unanswered": ["172.28.0.11:5683"]})
    assert w.unanswered == ["172.28.0.11:5683"]


def test_a_missing_ge_key_names_the_file_and_the_key(tmp_path):
    d = make_run(tmp_path, duration_s=3, seed=17, cd=False)
    f = d / "ge" / "ge-0" / "summary.json"
    s = json.loads(f.read_text())
    del s["timeout_ms"]      # was: silently 10000
    s["timout_ms"] = 500
    f.write_text(json.dumps(s))
    with pytest.raises(AnalysisError) as e:
        analyze(d, write=False)
    assert e.value.exit_code == 2
    msg = str(e.value)
    assert msg.startswith(f"{f}: summary.json of ge-0: ")
    assert "timeout_ms: required key missing" in msg
    assert "timout_ms: unknown key, did you mean 'timeout_ms'?" in msg
    # the command line: one error line, exit 2, no traceback
    r = subprocess.run([sys.executable, "-m", "wotbench.cli", "analyze", str(d)],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "timeout_ms" in r.stderr


def test_a_bad_device_summary_names_the_file(tmp_path):
    d = make_run(tmp_path, duration_s=3, seed=17, cd=False)
    f = d / "devices" / "cpu-0" / "device-summary.json"
    f.write_text(json.dumps({**device_summary("cpu-0", 5), "log_dropped": "none"}))
    with pytest.raises(AnalysisError, match=rf"{f}: device-summary\.json: log_dropped: must be an "
                                            "integer, got 'none'"):
        analyze(d, write=False)
    f.write_text(json.dumps({k: v for k, v in device_summary("cpu-0", 5).items()
                             if k != "log_dropped"}))   # was: silently 0
    with pytest.raises(AnalysisError, match="log_dropped: required key missing"):
        analyze(d, write=False)


def test_handshakes_without_the_dtls_member_is_an_error(tmp_path):
    d = make_run(tmp_path, duration_s=3, seed=17, cd=False)
    ge = d / "ge" / "ge-0"
    (ge / "handshakes.csv").write_text("session,device,ep,start_ns,end_ns,outcome,request\n"
                                       "0,0,0,-5000000,-4000000,ok,-1\n")
    with pytest.raises(AnalysisError, match=r"summary\.json of ge-0: dtls: required key missing"):
        analyze(d, write=False)   # was: the mode silently "reuse"


def test_the_families_keep_their_json_keys():
    keys = {
        RtStats: ["count", "mean_ms", "p50_ms", "p90_ms", "p95_ms", "p99_ms", "p999_ms", "max_ms"],
        RitStats: ["count", "mean_ms", "p5_ms", "p50_ms"],
        LagStats: ["mean", "p50", "p90", "p99", "p999", "max", "min"],
        RdStats: ["count", "mean", "p50", "p95", "p99", "max"],
        DecompStats: ["count", "mean_ms", "p50_ms", "p95_ms", "p99_ms", "max_ms"],
        SplitStats: ["count", "mean_us", "p50_us", "p95_us", "p99_us", "max_us"],
        ObserveQuantiles: ["p50", "p90", "p95", "p99", "mean", "max", "n"],
        BlockTimes: ["p50", "p90", "p99", "max", "n"],
    }
    for family, expected in keys.items():
        assert list(family().model_dump()) == expected, family.__name__
    with pytest.raises(ValueError, match="extra"):
        RdStats(p90=1.0)


def test_quantiles_of_fills_a_family():
    v = np.array([1.0, 2.0, np.nan, 3.0, 4.0])
    b = quantiles_of(BlockTimes, v)
    assert (b.n, b.p50, b.max) == (4, 2.5, 4.0) and b.value("p90") == pytest.approx(3.7)
    r = quantiles_of(RtStats, v)
    assert (r.count, r.mean_ms, r.p50_ms, r.max_ms) == (4, 2.5, 2.5, 4.0)
    assert quantiles_of(ObserveQuantiles, np.zeros(0)) == ObserveQuantiles()
