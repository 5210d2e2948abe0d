"""A run whose harness was killed: run.json says in_progress; the analysis refuses one whose
harness still renews its lease, and one killed before its test; `clean` names the command."""
import os
import time

import pandas as pd
import pytest

from wotbench.analysis import killed
from wotbench.analysis.errors import AnalysisError
from wotbench.rundir import RunDir, RunRecord
from wotbench.rundir import TestWindow as Window
from wotbench.runner.commands import clean_command
from wotbench.runner.deployment.lease import LEASE_FILE


def _run_dir(tmp_path, lease_age_s=None, test=True) -> tuple[RunDir, RunRecord]:
    rd = RunDir(tmp_path / "r")
    rd.path.mkdir(parents=True)
    rec = RunRecord(run_id="r", in_progress=True,
                    test=Window(start_mono_ns=10**9, duration_s=20) if test else None)
    rd.write_run(rec)
    if lease_age_s is not None:
        rd.lease_dir.mkdir()
        lease = rd.lease_dir / LEASE_FILE
        lease.write_text("wotbench-lease 1\n")
        t = time.time() - lease_age_s
        os.utime(lease, (t, t))
    return rd, rec


def test_a_running_harness_and_a_kill_before_the_test_are_refused(tmp_path):
    rd, rec = _run_dir(tmp_path, lease_age_s=1)
    with pytest.raises(AnalysisError, match="still in progress .* analyse it when it has ended"):
        killed.check(rd, rec)
    rd, rec = _run_dir(tmp_path / "b", lease_age_s=60, test=False)
    with pytest.raises(AnalysisError, match="killed before the test started.*nothing was measured"):
        killed.check(rd, rec)
    rd, rec = _run_dir(tmp_path / "c", lease_age_s=60)
    killed.check(rd, rec)                       # stale lease: killed, analysable
    killed.check(rd, rec.model_copy(update={"in_progress": False}))   # a finished run


def test_the_reason_names_the_kill_and_the_last_moment_measured():
    req = pd.DataFrame({"sent": [1e9, 5.5e9, float("nan")], "recv": [1.1e9, float("nan"), None]})
    text = killed.reason(RunRecord(in_progress=True), req, 20)
    assert text.startswith("the harness was killed during the run")
    assert "the last moment measured is 5.5 s into the 20 s test" in text
    empty = pd.DataFrame({"sent": [float("nan")], "recv": [float("nan")]})
    assert "no request was sent before it" in killed.reason(RunRecord(), empty, 20)


def test_clean_says_how_to_read_a_killed_run(tmp_path, capsys):
    rd, _ = _run_dir(tmp_path, lease_age_s=60)
    clean_command._say_killed("r", str(rd.lease_dir / LEASE_FILE))
    assert f"wotbench analyze {rd.path} && wotbench report {rd.path}" in capsys.readouterr().out
    rd, rec = _run_dir(tmp_path / "done", lease_age_s=60)
    rd.write_run(rec.model_copy(update={"in_progress": False}))
    clean_command._say_killed("r", str(rd.lease_dir / LEASE_FILE))
    assert capsys.readouterr().out == ""        # a finished run: nothing to say
