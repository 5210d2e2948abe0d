"""Host limits: the neighbour-table thresholds a run needs, raised for the run and restored,
or a clear stop naming the setting and the command."""
from __future__ import annotations

import pytest

from wotbench.errors import EnvironmentProblem
from wotbench.runner.prepare import hostlimits as hl


@pytest.fixture
def neigh(tmp_path):
    for k, v in (("gc_thresh1", 128), ("gc_thresh2", 512), ("gc_thresh3", 1024)):
        (tmp_path / k).write_text(f"{v}\n")
    return tmp_path


def test_small_run_changes_nothing(neigh):
    assert hl.neighbour_plan(100, 2, root=neigh) == []


def test_thousand_devices_need_more_than_the_default(neigh, monkeypatch):
    plan = hl.neighbour_plan(1000, 2, root=neigh)
    need = hl.neighbour_entries(1000, 2)
    assert {s.key: s.wanted for s in plan} == {"gc_thresh2": need, "gc_thresh3": 2 * need}
    monkeypatch.setattr(hl.os, "geteuid", lambda: 0)
    t = hl.HostTuning(log=lambda m: None)
    t.apply(plan)
    assert int((neigh / "gc_thresh3").read_text()) == 2 * need
    t.restore()
    t.restore()                                   # idempotent
    assert [(neigh / k).read_text().strip() for k in hl.THRESHOLDS] == ["128", "512", "1024"]
    assert [c.name for c in t.record()] == [f"net.ipv4.neigh.default.gc_thresh{i}" for i in (3, 2)]


def test_without_root_the_run_stops_naming_the_setting_and_the_command(neigh, monkeypatch):
    monkeypatch.setattr(hl.os, "geteuid", lambda: 1000)
    with pytest.raises(EnvironmentProblem) as e:
        hl.HostTuning(log=lambda m: None).apply(hl.neighbour_plan(1000, 2, root=neigh))
    msg = str(e.value)
    assert "net.ipv4.neigh.default.gc_thresh3 = 1024" in msg and "sysctl -w net.ipv4.neigh.default.gc_thresh3=" in msg
    assert (neigh / "gc_thresh3").read_text().strip() == "1024"


def test_supported_devices_follows_gc_thresh3(neigh):
    n = hl.supported_devices(root=neigh)
    assert hl.neighbour_plan(n, 2, root=neigh) == [] or \
        all(s.key != "gc_thresh3" for s in hl.neighbour_plan(n, 2, root=neigh))
    assert any(s.key == "gc_thresh3" for s in hl.neighbour_plan(n + 10, 2, root=neigh))


def test_backlog_raised_for_a_bridge_of_many_ports(tmp_path):
    p = tmp_path / "netdev_max_backlog"
    p.write_text("1000\n")
    assert hl.backlog_plan(200, path=p) == []            # 4 x 200 fits in 1000
    (s,) = hl.backlog_plan(1006, path=p)
    assert s.name == "net.core.netdev_max_backlog" and s.before == 1000
    assert s.wanted == hl.BACKLOG_PER_PORT * 1006
    p.write_text("100000\n")
    assert hl.backlog_plan(1006, path=p) == []           # never lowered


def test_conntrack_is_raised_for_the_flows_a_run_adds_to_those_in_use(tmp_path):
    from wotbench.runner.prepare.hostlimits import conntrack_plan
    mx, count = tmp_path / "max", tmp_path / "count"
    mx.write_text("262144\n")
    count.write_text("40000\n")
    (s,) = conntrack_plan(200_000, mx, count)        # 100 000 engine devices, 2 flows each
    assert (s.name, s.before, s.wanted) == ("net.netfilter.nf_conntrack_max", 262144, 440000)
    assert conntrack_plan(50_000, mx, count) == []    # 40 000 + 100 000 fit
    assert conntrack_plan(1, tmp_path / "none", count) == []   # no conntrack: nothing to do
