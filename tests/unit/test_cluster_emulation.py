"""The pure parts of the emulated cluster (scripts/cluster): names, addresses and daemon
configs of the nodes, the state file, the host scans cluster-down relies on."""
from __future__ import annotations

import ipaddress
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts" / "cluster"))

import hostscan  # noqa: E402
import layout  # noqa: E402


def test_plan_gives_each_node_its_own_address_bridge_and_paths(tmp_path):
    c = layout.plan("c1", tmp_path, "10.213.0.0/16", 3)
    assert [n.name for n in c.nodes] == ["wbc-n1", "wbc-n2", "wbc-n3"]
    assert [n.address for n in c.nodes] == ["10.213.0.11", "10.213.0.12", "10.213.0.13"]
    assert [n.bip for n in c.nodes] == ["10.213.1.1/24", "10.213.2.1/24", "10.213.3.1/24"]
    link = layout.link_subnet(c.block)
    bridges = [ipaddress.ip_interface(n.bip).network for n in c.nodes]
    pool = ipaddress.ip_network(layout.overlay_pool(c.block))
    # the link, the docker0 bridges and the overlay pool never overlap one another
    nets = [link, *bridges, pool]
    assert not any(a.overlaps(b) for i, a in enumerate(nets) for b in nets[i + 1:])
    assert len({n.dir for n in c.nodes}) == 3 and all(n.dir.parent.parent == tmp_path
                                                        for n in c.nodes)


def test_daemon_config_keeps_every_path_and_cgroup_of_the_node_its_own(tmp_path):
    n = layout.plan("c1", tmp_path, layout.DEFAULT_BLOCK, 2).nodes[1]
    cfg = layout.daemon_config(n, "c1", "fuse-overlayfs")
    for key in ("data-root", "exec-root", "pidfile"):
        assert cfg[key].startswith(str(n.dir) + "/")
    assert cfg["hosts"] == [f"unix://{n.dir}/docker.sock"]
    assert cfg["cgroup-parent"] == cfg["containerd-namespace"] == "wbc-n2"
    assert cfg["bip"] == "10.213.2.1/24" and cfg["storage-driver"] == "fuse-overlayfs"
    assert "wotbench.cluster=c1" in cfg["labels"]
    assert "storage-driver" not in layout.daemon_config(n, "c1", None)


@pytest.mark.parametrize("block, n, what", [
    ("10.213.0.0/24", 3, "/16"), ("8.8.0.0/16", 3, "private"), ("10.213.0.0/16", 0, "between"),
    ("10.213.0.0/16", layout.MAX_NODES + 1, "between")])
def test_bad_block_or_node_count_is_refused_with_the_reason(tmp_path, block, n, what):
    with pytest.raises(ValueError, match=what):
        layout.plan("c", tmp_path, block, n)


def test_state_file_round_trips(tmp_path):
    c = layout.plan("c1", tmp_path / "root", layout.DEFAULT_BLOCK, 2)
    c.nodes[0].pid, c.images = 1234, ["wotbench/wot-device:abc"]
    c.save()
    back = layout.load(tmp_path / "root")
    assert back == c and back.nodes[0].socket == c.nodes[0].dir / "docker.sock"
    assert layout.load(tmp_path / "none") is None


def test_overlapping_host_routes_are_named():
    routes = ["10.213.7.0/24", "172.17.0.0/16", "10.0.0.0/8", "bogus", "192.0.2.0/24"]
    assert layout.overlaps("10.213.0.0/16", routes) == ["10.213.7.0/24", "10.0.0.0/8"]


MOUNTINFO = r"""22 1 254:0 / / rw,relatime - ext4 /dev/vda rw
101 22 254:0 /var/lib/wotbench-cluster/nodes/wbc-n1/data /var/lib/wotbench-cluster/nodes/wbc-n1/data rw - ext4 /dev/vda rw
102 101 0:50 / /var/lib/wotbench-cluster/nodes/wbc-n1/data/fuse-overlayfs/abc/merged rw - fuse.fuse-overlayfs fuse-overlayfs rw
103 22 0:4 net:[4026532] /var/lib/wotbench-cluster/nodes/wbc-n1/exec/netns/1a2b rw - nsfs nsfs rw
104 22 0:51 / /var/lib/wotbench-cluster-other/x rw - tmpfs tmpfs rw
105 22 0:52 / /var/lib/wotbench-cluster/nodes/wbc-n2/with\040space rw - tmpfs tmpfs rw
"""


def test_mounts_under_the_state_dir_deepest_first_and_nothing_else():
    found = hostscan.mounts_under(Path("/var/lib/wotbench-cluster"), MOUNTINFO)
    # a mount inside another comes first (it must be unmounted first)
    assert found.index("/var/lib/wotbench-cluster/nodes/wbc-n1/data/fuse-overlayfs/abc/merged") \
        < found.index("/var/lib/wotbench-cluster/nodes/wbc-n1/data")
    assert "/var/lib/wotbench-cluster/nodes/wbc-n2/with space" in found
    assert not any("cluster-other" in m for m in found) and len(found) == 4


def test_process_references_match_paths_under_the_root_only():
    root = Path("/var/lib/wotbench-cluster")
    assert hostscan.references("dockerd\0--config-file\0/var/lib/wotbench-cluster/n/d.json\0",
                               root)
    assert hostscan.references("fuse-overlayfs\0-o\0lowerdir=/var/lib/wotbench-cluster/l/A:"
                               "/var/lib/wotbench-cluster/l/B\0", root)
    assert not hostscan.references("dockerd\0--data-root\0/var/lib/docker\0", root)
    assert not hostscan.references("x\0/var/lib/wotbench-clusterfoo/y\0", root)


def test_node_cgroups_found_in_every_hierarchy_and_removed_deepest_first(tmp_path):
    for ctl in ("cpu", "cpuset", "pids"):
        (tmp_path / ctl / "wbc-n1" / "c0ffee").mkdir(parents=True)
        (tmp_path / ctl / "docker").mkdir()
    (tmp_path / "wbc-n2").mkdir()          # cgroup v2: directly under the root
    (tmp_path / "cpu" / "wbc-nx").mkdir()   # not a node's name
    (tmp_path / "pids" / "wbc-n1" / "cgroup.procs").write_text("12\n34\n")
    (tmp_path / "pids" / "wbc-n1" / "c0ffee" / "cgroup.procs").write_text("56\n")
    found = hostscan.node_cgroups(tmp_path)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in found) == \
        ["cpu/wbc-n1", "cpuset/wbc-n1", "pids/wbc-n1", "wbc-n2"]
    tree = hostscan.cgroup_tree(tmp_path / "pids" / "wbc-n1")
    assert tree[0].name == "c0ffee" and tree[-1].name == "wbc-n1"
    assert hostscan.cgroup_pids(tmp_path / "pids" / "wbc-n1") == {12, 34, 56}


class _Node:
    """Stands in for layout.Node where daemon.py reads it: a name and a directory."""
    def __init__(self, d: Path):
        self.name, self.dir, self.pid = "wbc-n9", d, None
        self.config_file, self.log_file, self.socket = d / "daemon.json", d / "dockerd.log", d / "s"


def _retrying(tmp_path, monkeypatch, scripts: list[str]):
    """start_ready over real processes: each start runs the next script (its argv names the
    node's config file, as dockerd's does); only a script that sleeps answers."""
    import subprocess

    import daemon
    node, todo, logged = _Node(tmp_path), list(scripts), []

    def answers(*args, **kw):
        try:
            up = b"sleep" in Path(f"/proc/{node.pid}/cmdline").read_bytes()
        except OSError:
            up = False
        return subprocess.CompletedProcess(args, 0 if up else 1, stdout="27.0\n", stderr="")
    monkeypatch.setattr(daemon, "RETRY_PAUSE_S", 0.01)
    monkeypatch.setattr(daemon, "READY_POLL_S", 0.01)   # the waits' lengths, not their logic
    monkeypatch.setattr(daemon, "docker", answers)

    def restart():
        node.pid = daemon.spawn(["sh", "-c", todo.pop(0), str(node.config_file)], node)
    restart()
    return daemon, node, restart, todo, logged


def test_a_dockerd_that_exits_before_answering_is_started_again(tmp_path, monkeypatch):
    import os
    import signal
    daemon, node, restart, todo, logged = _retrying(
        tmp_path, monkeypatch, ["exit 3", "kill -9 $$", "sleep 30; true"])
    try:
        assert daemon.start_ready(node, restart, logged.append, timeout=5) == "27.0"
        assert todo == [] and len(logged) == 2
        assert "exited (exit code 3)" in logged[0] and "(the log is empty)" in logged[0]
        assert "(killed by SIGKILL)" in logged[1] and "(3/3)" in logged[1]
    finally:
        os.killpg(node.pid, signal.SIGKILL)


def test_a_dockerd_that_never_answers_is_named_with_every_status_and_its_log(tmp_path,
                                                                              monkeypatch):
    daemon, node, restart, todo, logged = _retrying(
        tmp_path, monkeypatch, ["exit 1", "exit 2", "echo 'failed to start containerd'; exit 4"])
    with pytest.raises(daemon.ClusterError) as e:
        daemon.start_ready(node, restart, logged.append, timeout=5)
    text = str(e.value)
    assert "dockerd of wbc-n9 exited before answering, 3 times" in text
    assert "attempt 1: exit code 1; attempt 2: exit code 2; attempt 3: exit code 4" in text
    assert "failed to start containerd" in text and "make cluster-down" in text
