"""placement.isolate_cores (wotbench.runner.prepare.isolation) on a fake /proc and sysfs: what
is moved and what is left, the state file written before any change, the restore (also of tasks
born during the run, never of one re-pinned by someone else), the restore after a killed run, and
the refusals without root or without the workqueue cpumask. Nothing on the real host changes:
every affinity change goes through the fake's setter."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from wotbench.deploy.plan import cpuset_str
from wotbench.errors import ConfigError, EnvironmentProblem
from wotbench.rundir import RunRecord
from wotbench.runner.prepare import isolation
from wotbench.runner.prepare.isolation import (PF_NO_SETAFFINITY, CoreShield, HostPaths,
                                               clean_stale, cpus_mask, mask_cpus,
                                               restore_stale, shielded_cores)

HARNESS = 900
PF_KTHREAD = 0x00200000


class FakeHost:
    """A /proc of tasks (tgid, tid, ppid, comm, flags, starttime, allowed cores) and the
    workqueue cpumask file, under ``tmp``; ``set_affinity`` edits the fake, never the host."""

    def __init__(self, tmp: Path, cpumask: str = "3"):
        self.paths = HostPaths(proc=tmp / "proc", cpumask=tmp / "sys" / "cpumask",
                               state=tmp / "run" / "wotbench" / "isolation.json")
        self.paths.proc.mkdir()
        self.paths.cpumask.parent.mkdir()
        self.paths.cpumask.write_text(cpumask + "\n")
        self.tgid_of: dict[int, int] = {}
        self.calls: list[tuple[int, set[int]]] = []
        self.refuse: set[int] = set()
        self.now = 100          # the boot-time clock in ticks (the unit of stat's starttime)

    def add(self, tgid: int, tid: int | None = None, cpus: str = "0-1", comm: str = "task",
            ppid: int = 1, flags: int = 0, start: int | None = None) -> None:
        tid = tgid if tid is None else tid
        start = self.now if start is None else start
        d = self.paths.proc / str(tgid) / "task" / str(tid)
        d.mkdir(parents=True)
        # fields 3..22: state ppid pgrp session tty tpgid flags ... starttime (field 22)
        rest = ["S", str(ppid), "0", "0", "0", "0", str(flags)] + ["0"] * 12 + [str(start)]
        (d / "stat").write_text(f"{tid} ({comm}) " + " ".join(rest) + "\n")
        self._cpus(tgid, tid, cpus)
        self.tgid_of[tid] = tgid

    def _cpus(self, tgid: int, tid: int, cpus: str) -> None:
        d = self.paths.proc / str(tgid) / "task" / str(tid)
        (d / "status").write_text(f"Name:\tx\nCpus_allowed_list:\t{cpus}\n")

    def remove(self, tgid: int) -> None:
        import shutil
        shutil.rmtree(self.paths.proc / str(tgid))

    def cpus(self, tid: int) -> str:
        d = self.paths.proc / str(self.tgid_of[tid]) / "task" / str(tid)
        return (d / "status").read_text().split("Cpus_allowed_list:\t")[1].strip()

    def set_affinity(self, tid: int, cpus: set[int]) -> None:
        self.calls.append((tid, set(cpus)))
        if tid in self.refuse:
            raise PermissionError(1, "Operation not permitted")
        if not (self.paths.proc / str(self.tgid_of.get(tid, -1)) / "task" / str(tid)).is_dir():
            raise ProcessLookupError(3, "No such process")
        self._cpus(self.tgid_of[tid], tid, cpuset_str(sorted(cpus)))

    def shield(self, owner: int = HARNESS, euid: int = 0) -> CoreShield:
        return CoreShield(log=lambda _m: None, paths=self.paths, set_affinity=self.set_affinity,
                          owner=owner, euid=euid, clock=lambda: self.now)


@pytest.fixture
def host(tmp_path) -> FakeHost:
    h = FakeHost(tmp_path)
    h.add(HARNESS, comm="python", start=50)                       # the harness itself
    h.add(HARNESS, tid=901, comm="python", start=51)
    h.add(200, comm="dockerd")                                    # free: moved
    h.add(200, tid=201, comm="dockerd")
    h.add(300, comm="containerd", cpus="1")                       # pinned to the device core
    h.add(10, comm="ksoftirqd/1", cpus="1", flags=PF_KTHREAD | PF_NO_SETAFFINITY)
    h.add(11, comm="rcu_preempt", flags=PF_KTHREAD)               # unbound kthread: moved
    h.add(400, comm="editor", cpus="0")                           # already off core 1
    h.add(1, comm="systemd", ppid=0, start=1)                     # init: movable, moved
    h.add(450, comm="sleep", cpus="0")          # `taskset -c 0` before the run: stays pinned
    h.now = 1000                                                  # the run starts later
    return h


def test_masks_parse_and_print():
    assert mask_cpus("3\n") == {0, 1}
    assert mask_cpus("ff,00000001") == {0} | set(range(32, 40))
    assert cpus_mask([0]) == "1" and cpus_mask([0, 1, 3]) == "b" and cpus_mask([]) == "0"


def test_masks_beyond_32_cores_are_comma_separated_words():
    """The kernel's bitmap parser takes at most 8 hex digits a group: cores >= 32 go in words."""
    assert cpus_mask([32]) == "1,00000000" and cpus_mask([0, 33]) == "2,00000001"
    assert cpus_mask(range(64)) == "ffffffff,ffffffff"
    assert cpus_mask([0, 64]) == "1,00000000,00000001"
    for cores in ({32}, {0, 33, 70}, set(range(40))):
        assert mask_cpus(cpus_mask(cores)) == cores
    assert mask_cpus("1,0") == {32}                  # a word without its leading zeros
    with pytest.raises(ValueError, match="wider than 32 bits"):
        mask_cpus("100000000")


def test_apply_moves_the_free_tasks_and_leaves_the_rest(host):
    sh = host.shield()
    sh.apply([0], [1])
    assert host.paths.cpumask.read_text().strip() == "1"
    assert {tid for tid, _ in host.calls} == {200, 201, 11, 1}
    assert all(cpus == {0} for _, cpus in host.calls)
    assert [host.cpus(t) for t in (200, 201, 11)] == ["0", "0", "0"]
    assert host.cpus(300) == "1" and host.cpus(10) == "1" and host.cpus(HARNESS) == "0-1"
    r = sh.record()
    assert (r.moved, r.moved_processes, r.pinned_there, r.per_cpu_kthreads, r.harness) == \
        (4, 3, 1, 1, 2)
    assert (r.workqueue_cpumask_before, r.workqueue_cpumask_during) == ("3", "1")
    assert r.moved_by_command == {"dockerd": 2, "rcu_preempt": 1, "systemd": 1}
    state = json.loads(host.paths.state.read_text())
    assert state["owner_pid"] == HARNESS and state["owner_start"] == 50
    assert state["cpumask"] == {"before": "3", "during": "1"}
    assert state["applied_at_ticks"] == 1000
    assert {t["tid"]: (t["before"], t["during"]) for t in state["tasks"]} == {
        200: ([0, 1], [0]), 201: ([0, 1], [0]), 11: ([0, 1], [0]), 1: ([0, 1], [0])}


def test_restore_puts_back_only_what_the_shield_set(host):
    sh = host.shield()
    sh.apply([0], [1])
    host.add(200, tid=202, comm="dockerd", cpus="0")      # a thread dockerd started meanwhile
    host.add(500, comm="containerd-shim", ppid=200, cpus="0")   # a child of a moved process
    host.add(501, comm="sh", ppid=500, cpus="0")                # ...and its child
    host.add(600, comm="other", ppid=400, cpus="0")             # not born of a moved task
    host._cpus(11, 11, "0-1,3")                                 # re-pinned by someone else
    sh.restore()
    assert host.paths.cpumask.read_text().strip() == "3"
    assert [host.cpus(t) for t in (200, 201, 202, 500, 501)] == ["0-1"] * 5
    assert host.cpus(11) == "0-1,3" and host.cpus(600) == "0" and host.cpus(400) == "0"
    assert host.cpus(HARNESS) == "0-1" and HARNESS not in {t for t, _ in host.calls}
    assert not host.paths.state.exists()
    r = sh.record()
    assert (r.restored, r.restored_inherited, r.left_changed) == (3, 3, 1)
    sh.restore()                          # idempotent: the cleanup may run it twice
    assert r.restored == 3


def test_restore_never_widens_what_was_pinned_to_the_os_cores_before_the_run(host):
    """pid 1 is moved like any task; the host descends from it: only what started after the
    shield, with pid 1 its direct parent or a moved process its nearest such ancestor, inherits."""
    sh = host.shield()
    sh.apply([0], [1])
    host.now = 1500
    host.add(460, comm="job", ppid=450, cpus="0")       # born during the run of a pinned job
    host.add(470, comm="unit", cpus="0")                # pid 1 started it during the run
    host.add(480, comm="unit-child", ppid=470, cpus="0")    # pid 1 not its direct parent
    host.add(490, comm="old", ppid=470, cpus="0", start=500)   # pid reuse: born before
    host.add(200, tid=203, comm="dockerd", cpus="0", start=900)  # thread older than the shield
    sh.restore()
    assert host.cpus(1) == "0-1" and host.cpus(470) == "0-1"
    assert [host.cpus(t) for t in (450, 460, 480, 490, 203)] == ["0"] * 5
    assert sh.record().restored_inherited == 1


def test_a_state_file_without_its_application_time_restores_only_the_moved(host):
    sh = host.shield()
    sh.apply([0], [1])
    host.add(500, comm="containerd-shim", ppid=200, cpus="0")
    state = json.loads(host.paths.state.read_text())
    del state["applied_at_ticks"]                       # written by an older WoTbench
    host.paths.state.write_text(json.dumps(state))
    host.remove(HARNESS)                                # ... that was killed
    restore_stale(host.paths, lambda _m: None, host.set_affinity)
    assert host.cpus(200) == "0-1" and host.cpus(500) == "0" and host.cpus(450) == "0"


def test_restore_leaves_a_cpumask_changed_meanwhile(host):
    sh = host.shield()
    sh.apply([0], [1])
    host.paths.cpumask.write_text("2\n")
    sh.restore()
    assert host.paths.cpumask.read_text().strip() == "2"


def test_a_reused_tid_is_not_restored(host):
    sh = host.shield()
    sh.apply([0], [1])
    host.remove(200)
    host.add(200, comm="new", ppid=400, cpus="0", start=2000)   # another process got the pid
    sh.restore()
    assert host.cpus(200) == "0"


def test_excepted_commands_stay_where_they_are(host):
    host.add(7, comm="agent-init")
    host.add(7, tid=8, comm="worker")
    host.add(800, comm="bash", ppid=7)                 # its child is not excepted
    sh = host.shield()
    sh.apply([0], [1], keep=["agent-init"])
    assert host.cpus(7) == "0-1" and host.cpus(8) == "0-1" and host.cpus(800) == "0"
    assert sh.record().excepted == 2
    sh.restore()
    assert host.cpus(800) == "0-1"


def test_refused_tasks_are_counted_and_not_kept_for_restore(host):
    host.refuse = {201}
    sh = host.shield()
    sh.apply([0], [1])
    assert (sh.record().moved, sh.record().refused) == (3, 1)
    assert {t["tid"] for t in json.loads(host.paths.state.read_text())["tasks"]} == {200, 11, 1}


def test_a_killed_run_is_restored_by_the_next(host):
    host.add(700, comm="python", start=70)            # the harness that will be killed
    host.shield(owner=700).apply([0], [1])             # ... and never restores
    host.remove(700)
    nxt = host.shield()
    nxt.apply([0], [1])                                # the next isolated run: restore, apply
    state = json.loads(host.paths.state.read_text())
    assert state["owner_pid"] == HARNESS and state["cpumask"]["before"] == "3"
    assert {t["before"][0] for t in state["tasks"]} == {0} and \
        all(t["before"] == [0, 1] for t in state["tasks"])
    nxt.restore()
    assert host.cpus(200) == "0-1" and host.paths.cpumask.read_text().strip() == "3"


def test_a_killed_run_is_restored_by_clean_or_a_run_without_isolation(host):
    host.add(700, comm="python", start=70)
    host.shield(owner=700).apply([0], [1])
    host.remove(700)
    assert clean_stale(lambda _m: None, paths=host.paths, set_affinity=host.set_affinity,
                       euid=0) is None
    assert not host.paths.state.exists()
    assert host.cpus(200) == "0-1" and host.cpus(11) == "0-1"
    assert host.paths.cpumask.read_text().strip() == "3"


def test_killed_half_way_through_the_moves(host):
    host.add(700, comm="python", start=70)

    def killed_after_first(tid, cpus):
        if len(host.calls) == 1:
            raise KeyboardInterrupt      # the harness dies with the state file written
        host.set_affinity(tid, cpus)
    sh = CoreShield(log=lambda _m: None, paths=host.paths, set_affinity=killed_after_first,
                    owner=700, euid=0)
    with pytest.raises(KeyboardInterrupt):
        sh.apply([0], [1])
    host.remove(700)
    assert host.paths.cpumask.read_text().strip() == "1"
    restore_stale(host.paths, lambda _m: None, host.set_affinity)
    assert host.cpus(200) == "0-1" and host.cpus(201) == "0-1" and host.cpus(11) == "0-1"
    assert host.paths.cpumask.read_text().strip() == "3"


def test_a_live_run_holding_the_isolation_is_not_undone(host):
    host.add(700, comm="python", start=70)
    host.shield(owner=700).apply([0], [1])            # 700 is alive
    with pytest.raises(EnvironmentProblem, match="pid 700"):
        host.shield().apply([0], [1])
    assert "pid 700" in clean_stale(lambda _m: None, paths=host.paths,
                                    set_affinity=host.set_affinity, euid=0)
    assert host.cpus(200) == "0"                       # still isolated for run 700
    assert clean_stale(lambda _m: None, force=True, paths=host.paths,
                       set_affinity=host.set_affinity, euid=0) is None
    assert host.cpus(200) == "0-1" and not host.paths.state.exists()


def test_refused_without_root_and_nothing_changes(host):
    with pytest.raises(EnvironmentProblem, match=r"placement\.isolate_cores.*root"):
        host.shield(euid=1000).apply([0], [1])
    assert host.paths.cpumask.read_text().strip() == "3"
    assert not host.paths.state.exists() and not host.calls
    assert "root" in isolation.why_not(host.paths, euid=1000)
    host.paths.state.parent.mkdir(parents=True)
    host.paths.state.write_text("{}")
    assert "as root" in clean_stale(paths=host.paths, euid=1000)


def test_refused_without_the_workqueue_cpumask(host):
    host.paths.cpumask.unlink()
    with pytest.raises(EnvironmentProblem, match="cpumask"):
        host.shield().apply([0], [1])
    assert not host.paths.state.exists() and not host.calls


def test_shielded_cores_need_os_cores():
    assert shielded_cores([0, 1, 2, 3], [0]) == {1, 2, 3}
    with pytest.raises(ConfigError, match="reserved_os_cores"):
        shielded_cores([0, 1], [])


def test_run_json_carries_the_record_and_the_report_shows_it(host):
    from wotbench.report.sections import host as host_rows
    sh = host.shield()
    sh.apply([0], [1])
    sh.restore()
    run = RunRecord.model_validate(json.loads(
        RunRecord(isolation=sh.record()).model_dump_json()))
    rows = dict(host_rows(run))
    assert "3 -> 1" in rows["Core isolation"] and "4 task(s)" in rows["Core isolation"]
    assert "restored 4 (+0 born during the run)" in rows["Core isolation"]


def _cfg(isolate: bool):
    from wotbench.configfile.yaml_loader import config_from_dict
    from wotbench.deploy.plan import make_plan
    c = config_from_dict({"name": "t", "placement": {"isolate_cores": isolate}, "devices": [
        {"group": "s", "count": 2, "rit": {"dist": "exponential", "mean": 1000}}]})
    return c, make_plan(c, cores=[0, 1, 2, 3])


def test_check_refuses_the_key_where_isolation_is_not_possible(monkeypatch):
    from wotbench.runner.preflight import check
    monkeypatch.setattr(isolation, "why_not", lambda *a, **k: "it needs root (uid 1000)")
    with pytest.raises(EnvironmentProblem, match=r"placement\.isolate_cores: true .*uid 1000"):
        check._isolation(*_cfg(True))
    assert "not possible here: it needs root" in check._isolation(*_cfg(False))


def test_check_says_which_cores_isolation_shields(monkeypatch):
    from wotbench.runner.preflight import check
    monkeypatch.setattr(isolation, "why_not", lambda *a, **k: None)
    c, plan = _cfg(True)
    said = check._isolation(c, plan)
    shielded = ",".join(map(str, sorted(set(plan.usable_cores) - set(plan.os_cores))))
    assert said.startswith(f"on: for the run, core(s) {shielded} kept free") and \
        f"goes to core(s) {','.join(map(str, plan.os_cores))}" in said
    assert "possible here" in check._isolation(*_cfg(False))
