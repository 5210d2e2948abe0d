"""Files written whole (wotbench.rundir.atomic) and a full disk named (wotbench.rundir.disk):
a failed write leaves the previous file and no temporary file, and raises an
EnvironmentProblem (exit 1) naming the file, the disk, the size needed and the fix."""
from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pandas as pd
import pytest

from testkit.tmpfs import NoTmpfs, small_tmpfs
from wotbench import run_command
from wotbench.analysis import summary as analysis_summary
from wotbench.errors import EnvironmentProblem
from wotbench.rundir import RunDir, RunRecord, atomic, disk


def _enospc(*_a, **_k):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _leftovers(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.endswith(".tmp"))


def test_write_json_replaces_whole_with_the_umask_mode(tmp_path):
    target = tmp_path / "summary.json"
    target.write_text('{"old": true}\n')
    atomic.write_json(target, {"a": [1, 2]}, allow_nan=False)
    assert json.loads(target.read_text()) == {"a": [1, 2]}
    mask = os.umask(0)
    os.umask(mask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~mask
    assert _leftovers(tmp_path) == []


def test_enospc_at_fsync_keeps_the_old_file_and_names_the_disk(tmp_path, monkeypatch):
    target = tmp_path / "run.json"
    target.write_text('{"old": true}\n')
    monkeypatch.setattr(atomic.os, "fsync", _enospc)
    with pytest.raises(EnvironmentProblem) as e:
        atomic.write_text(target, "x" * 3000)
    assert target.read_text() == '{"old": true}\n'
    assert _leftovers(tmp_path) == []
    msg = str(e.value)
    mount = disk.disk_of(tmp_path).mount
    assert str(target) in msg and "no space left" in msg and mount in msg
    assert "needs 2.9 KiB" in msg and "Fix: free space" in msg
    assert e.value.exit_code == 1


def test_a_writer_failing_midway_leaves_nothing_half_written(tmp_path):
    target = tmp_path / "trace.csv"
    with pytest.raises(EnvironmentProblem, match=r"needs more than 6 B"):
        with atomic.replacing(target) as f:
            f.write("a,b,c\n")
            f.flush()
            _enospc()
    assert not target.exists() and _leftovers(tmp_path) == []


def test_a_bug_in_the_writer_propagates_unchanged_and_removes_the_temp(tmp_path):
    target = tmp_path / "series.csv"
    with pytest.raises(ZeroDivisionError):
        with atomic.replacing_path(target) as tmp:
            tmp.write_text("partial")
            1 / 0
    assert not target.exists() and _leftovers(tmp_path) == []


def test_other_write_errors_are_named_too(tmp_path):
    with pytest.raises(EnvironmentProblem, match="does not exist. Fix: create it"):
        atomic.write_text(tmp_path / "missing" / "plan.json", "{}")


def test_a_real_full_tmpfs(tmp_path):
    """The kernel's own ENOSPC on a 64 KiB tmpfs (root only: mount)."""
    try:
        with small_tmpfs(tmp_path / "small", "64k") as mnt:
            atomic.write_text(mnt / "report.html", "small")
            with pytest.raises(EnvironmentProblem) as e:
                atomic.write_bytes(mnt / "report.html", b"x" * (256 << 10))
            assert "(tmpfs)" in str(e.value) and "needs 256.0 KiB" in str(e.value)
            assert (mnt / "report.html").read_text() == "small"
            assert _leftovers(mnt) == []
    except NoTmpfs as e:
        pytest.skip(str(e))


def test_full_note_only_when_the_disk_is_nearly_full(tmp_path, monkeypatch):
    real = os.statvfs(tmp_path)

    class Vfs:
        f_frsize, f_blocks = 4096, 1000

        def __init__(self, free):
            self.f_bavail = free

    if real.f_bavail * real.f_frsize >= disk.FULL_BELOW:
        assert disk.full_note(tmp_path) == ""
    monkeypatch.setattr(disk.os, "statvfs", lambda p: Vfs(free=10))
    note = disk.full_note(tmp_path)
    assert "is full" in note and "40.0 KiB free of 3.9 MiB" in note


def test_as_problem_turns_only_a_full_disk_into_an_environment_problem(tmp_path):
    full = OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "x.csv"))
    assert isinstance(disk.as_problem(full, tmp_path), EnvironmentProblem)
    other = OSError(errno.EBADF, "Bad file descriptor")
    assert disk.as_problem(other, tmp_path) is other


def test_analysis_writes_summary_last(tmp_path, monkeypatch):
    """A disk that fills during the series leaves no summary.json claiming an analysis."""
    calls = {"n": 0}
    real_fsync = os.fsync

    def fsync_then_full(fd):
        calls["n"] += 1
        if calls["n"] >= 2:
            _enospc()
        real_fsync(fd)

    monkeypatch.setattr(atomic.os, "fsync", fsync_then_full)
    series = {"a": pd.DataFrame({"x": [1]}), "b": pd.DataFrame({"x": [2]})}
    with pytest.raises(EnvironmentProblem):
        analysis_summary.write(tmp_path, summary=None, series=series)
    assert (tmp_path / "series" / "a.csv").read_text() == "x\n1\n"
    assert not (tmp_path / "series" / "b.csv").exists()
    assert not (tmp_path / "summary.json").exists()


def test_config_edited_during_the_run_is_noted_in_run_json(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("name: before\n")
    before = run_command._fingerprint(cfg)
    rd = RunDir(tmp_path / "run")
    rd.path.mkdir()
    rd.write_run(RunRecord(name="before"))
    run_command.note_config_edit(cfg, before, rd.path)
    assert rd.read_run().warnings == []            # unchanged file: nothing to say
    cfg.write_text("name: after\n")
    run_command.note_config_edit(cfg, before, rd.path)
    (w,) = rd.read_run().warnings
    assert "was edited while the run was in progress" in w and "config.resolved.yaml" in w
