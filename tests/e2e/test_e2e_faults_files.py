"""Issue 20, the files' faults, with the process backend: the run directory's disk fills during
the test, and the config file is edited while the run is in progress."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from e2e_support import CONFIGS, Harness, run_dir_of
from testkit.tmpfs import NoTmpfs, small_tmpfs
from wotbench.runner.teardown.cleanup import leftover_processes

pytestmark = [pytest.mark.slow,
              pytest.mark.long]   # ~25 s each of real runs: make test-long (CI runs it)


def _run_id(output: str) -> str:
    m = re.search(r"wotbench: run (\S+) \(process backend\)", output)
    assert m, output
    return m.group(1)


def _whole_or_absent(path: Path, check) -> None:
    """A file the harness writes whole: absent, or complete."""
    if path.exists():
        check(path.read_text())


@pytest.fixture
def small_disk(tmp_path):
    """tmp_path/reports on a 2 MiB tmpfs (root only), unmounted afterwards."""
    try:
        with small_tmpfs(tmp_path / "reports", "2m") as mnt:
            yield mnt
    except NoTmpfs as e:
        pytest.skip(str(e))


def test_disk_full_during_the_test(harness, small_disk, tmp_path):
    h = harness("small.yaml", "--backend", "process")
    h.wait_for("T0 in", 30)
    with open(small_disk / "filler", "wb") as f:   # fill what is left while the GEs send
        with pytest.raises(OSError):
            while True:
                f.write(b"\0" * 65536)
                f.flush()
    rc = h.wait(60)
    out = h.output
    assert rc == 1, out
    assert "Traceback" not in out, out
    assert f"{small_disk} (tmpfs): 0 B free" in out, out
    assert re.search(r"FAILURE (ge-0|dev-\d|cd-node|cd-ge): .*the disk holding", out), out
    rd = run_dir_of(tmp_path)
    assert (rd / "config.resolved.yaml").read_text().startswith("# resolved")  # kept
    _whole_or_absent(rd / "run.json", json.loads)
    _whole_or_absent(rd / "summary.json", json.loads)
    _whole_or_absent(rd / "report.html", lambda t: t.rstrip().endswith("</html>"))
    assert not [p for p in rd.rglob("*.tmp")]
    assert leftover_processes(_run_id(out)) == []


def test_config_edited_during_the_run(harness_env, tmp_path):
    cfg = tmp_path / "edited.yaml"
    original = yaml.safe_load((CONFIGS / "small.yaml").read_text())
    original["name"] = "before-edit"
    cfg.write_text(yaml.safe_dump(original))
    h = Harness(["run", str(cfg), "--out-root", str(tmp_path / "reports"), "--backend", "process"],
                harness_env, tmp_path)
    try:
        h.wait_for("T0 in", 30)
        edited = dict(original, name="after-edit", duration_s=2)
        edited["devices"] = [dict(original["devices"][0], rit={"dist": "deterministic", "mean": 20})]
        cfg.write_text(yaml.safe_dump(edited))
        rc = h.wait(60)
    finally:
        if h.proc.poll() is None:
            h.proc.kill()
    out = h.output
    assert rc in (0, 3), out
    rd = run_dir_of(tmp_path)
    assert rd.name.startswith("before-edit-")
    run = json.loads((rd / "run.json").read_text())
    assert run["name"] == "before-edit" and run["failures"] == [], out
    assert any("was edited while the run was in progress" in w for w in run["warnings"]), run
    summary = json.loads((rd / "summary.json").read_text())
    assert summary["run"]["name"] == "before-edit" and summary["run"]["duration_s"] == 8
    resolved = yaml.safe_load((rd / "config.resolved.yaml").read_text())
    assert resolved["devices"][0]["rit"]["mean"] == 100
    ge = json.loads((rd / "ge/ge-0/summary.json").read_text())
    assert ge["requests"] == 240    # 3 devices x 10/s x 8 s: the rate resolved at the start
    assert "name: before-edit" in (rd / "report.html").read_text()
