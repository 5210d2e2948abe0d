"""Which runs' objects a new run or `wotbench clean` may remove (runner/teardown/leftovers.py)."""
from __future__ import annotations

import os
import re
import time
from types import SimpleNamespace

from wotbench.runner.teardown import leftovers
from wotbench.runner.deployment.lease import LEASE_LABEL, Lease, lease_state


class FakeClient:
    def __init__(self, containers, networks):
        self.containers = SimpleNamespace(list=lambda **kw: containers)
        self.networks = SimpleNamespace(list=lambda **kw: networks)


def ctr(run, state="running", lease=None):
    labels = {"wotbench.run": run, **({LEASE_LABEL: str(lease)} if lease else {})}
    return SimpleNamespace(attrs={"Labels": labels, "State": state})


def net(run, lease=None):
    return SimpleNamespace(attrs={"Labels": {"wotbench.run": run,
                                             **({LEASE_LABEL: str(lease)} if lease else {})}})


def test_runs_are_grouped_and_judged_by_their_lease(tmp_path):
    live = Lease(tmp_path / "a", "a")
    (tmp_path / "a").mkdir()
    live.set_deadline(0)
    stale = tmp_path / "b" / "heartbeat"
    stale.parent.mkdir()
    stale.write_text("x")
    old = time.time() - 600
    os.utime(stale, (old, old))
    client = FakeClient(
        [ctr("a", lease=live.path), ctr("a", "exited", lease=live.path),
         ctr("b", lease=stale), ctr("c", lease=tmp_path / "gone" / "heartbeat"),
         ctr("old-running"), ctr("old-exited", "exited")],
        [net("a", live.path), net("b", stale), net("orphan-net", stale)])
    runs = {r.run_id: r for r in leftovers.find(client)}
    assert (runs["a"].containers, runs["a"].running, runs["a"].networks) == (2, 1, 1)
    assert runs["a"].live and runs["a"].lease == "live"
    assert not runs["b"].live and runs["b"].lease == "stale"
    assert re.search(r"renewed its lease 60[01] s ago", runs["b"].describe())
    assert not runs["c"].live and "gone" in runs["c"].describe()
    # without a lease (an older WoTbench): in progress while a container runs
    assert runs["old-running"].live and not runs["old-exited"].live
    assert runs["orphan-net"].networks == 1 and not runs["orphan-net"].live


def test_remove_abandoned_spares_live_runs_and_the_caller(tmp_path, monkeypatch):
    live = Lease(tmp_path / "a", "a")
    (tmp_path / "a").mkdir()
    live.set_deadline(0)
    client = FakeClient([ctr("a", lease=live.path), ctr("b", "exited"), ctr("me", "exited")], [])
    removed = []
    monkeypatch.setattr(leftovers, "remove_run",
                        lambda c, rid, log: removed.append(rid) or {"containers": 1, "networks": 0})
    said = []
    gone = leftovers.remove_abandoned(client, said.append, keep="me")
    assert [r.run_id for r in gone] == removed == ["b"]
    assert any("run b" in s and "left over" in s for s in said)


def test_lease_state_follows_renewal_and_release(tmp_path, monkeypatch):
    from wotbench.runner.deployment import lease as lease_mod
    monkeypatch.setattr(lease_mod, "RENEW_S", 0.05)   # the renewal's period, not its logic
    lease = Lease(tmp_path / "l", "r")
    assert lease_state(lease.path) == "gone"
    lease.start(deadline_mono_ns=123)
    assert "deadline_mono_ns 123" in lease.path.read_text()
    assert oct(lease.path.stat().st_mode & 0o777) == "0o644"   # the components run as nobody
    old = time.time() - 100
    os.utime(lease.path, (old, old))
    assert lease_state(lease.path) == "stale"
    deadline = time.monotonic() + 5           # the renewal thread touches it again
    while lease_state(lease.path) != "live" and time.monotonic() < deadline:
        time.sleep(0.02)
    assert lease_state(lease.path) == "live"
    lease.release()
    assert lease_state(lease.path) == "gone"


def test_doctor_tells_runs_in_progress_from_what_dead_runs_left(tmp_path, monkeypatch):
    from wotbench.runner.commands import doctor
    monkeypatch.setattr(doctor, "leftover_processes", lambda **kw: [])
    (tmp_path / "a").mkdir()
    live = Lease(tmp_path / "a", "a")
    live.set_deadline(0)
    both = doctor.check_leftovers(FakeClient([ctr("a", lease=live.path), ctr("b", "exited")],
                                             [net("b")]))
    assert both.status == doctor.WARN
    assert "1 container(s), 1 network(s), 0 process(es) left by runs whose harness is gone (b)" \
        in both.detail and "in progress: a" in both.detail
    only_live = doctor.check_leftovers(FakeClient([ctr("a", lease=live.path)], []))
    assert only_live.detail.startswith("no leftovers") and "in progress: a" in only_live.detail
    assert doctor.check_leftovers(FakeClient([], [])).status == doctor.OK


def test_process_leftovers_of_a_live_run_are_not_leftovers(tmp_path):
    """`wotbench clean` ends only processes whose run's harness is gone (their lease)."""
    import subprocess
    import sys
    from wotbench.labels import PROCESS_ENV, PROCESS_LEASE_ENV
    from wotbench.runner.teardown.cleanup import leftover_processes
    (tmp_path / "l").mkdir()
    live = Lease(tmp_path / "l", "live-run")
    live.set_deadline(0)
    procs = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                              env={PROCESS_ENV: rid, PROCESS_LEASE_ENV: str(lease)})
             for rid, lease in (("live-run", live.path), ("dead-run", tmp_path / "gone"))]
    try:
        time.sleep(0.3)
        every = {r for _, r in leftover_processes()}
        abandoned = {r for _, r in leftover_processes(abandoned_only=True)}
        assert {"live-run", "dead-run"} <= every
        assert "dead-run" in abandoned and "live-run" not in abandoned
    finally:
        for p in procs:
            p.kill()
            p.wait()
