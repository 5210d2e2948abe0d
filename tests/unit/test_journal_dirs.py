"""The GEs' journal directories: made whole, and only dead runs' removed (runner/deployment/journal.py)."""
from __future__ import annotations

from wotbench.runner.deployment import journal
from wotbench.runner.deployment.lease import Lease


def test_a_live_runs_journals_are_kept_and_a_dead_runs_removed(tmp_path):
    root = tmp_path / "shm" / "wotbench"
    (tmp_path / "shm").mkdir()
    lease = Lease(tmp_path / "lease", "live")
    lease.start()
    try:
        live = journal.make_dir("live", lease.path, root)
        dead = journal.make_dir("dead", tmp_path / "gone" / "heartbeat", root)
        (root / ".half-made.x").mkdir()          # another run's, being made right now
        assert (live / journal.LEASE_NOTE).read_text() == str(lease.path)
        assert journal.abandoned(root) == [dead]
    finally:
        lease.release()
    assert sorted(journal.abandoned(root)) == sorted([dead, live])   # released: dead too


def test_no_tmpfs_no_journals(tmp_path):
    assert journal.make_dir("r", tmp_path / "l", tmp_path / "missing" / "wotbench") is None
