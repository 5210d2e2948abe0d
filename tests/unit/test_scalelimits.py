"""Host limits for many containers: how many devices each carries, and the stop message."""
from __future__ import annotations

from wotbench.runner.backends.docker import scalelimits as sl


def _limits(pid_max=32768, conntrack=262144, nofile=20000):
    vals = {"/proc/sys/kernel/pid_max": pid_max, "/proc/sys/kernel/threads-max": 192731,
            "/proc/sys/net/netfilter/nf_conntrack_max": conntrack}
    return sl.host_limits(read=vals.get, dockerd_nofile=lambda: nofile)


def test_devices_per_limit_from_measured_costs():
    by = {lim.setting: lim for lim in _limits()}
    assert by["kernel.pid_max"].devices == (32768 - sl.HOST_RESERVE) // (
        sl.TASKS_PER_DEVICE + sl.TASKS_PER_CONTAINER)
    assert by["dockerd LimitNOFILE"].devices == (20000 - sl.HOST_RESERVE) // 9
    assert by["net.netfilter.nf_conntrack_max"].devices > 80_000


def test_too_small_names_the_setting_and_the_fix():
    lims = _limits()
    assert sl.too_small(1100, 1100, lims) == []
    short = sl.too_small(1600, 1600, lims)
    assert [lim.setting for lim in short] == ["kernel.pid_max"]
    msg = sl.message(1600, 1600, short)
    assert "kernel.pid_max = 32768, about 32000 needed" in msg and "sysctl -w kernel.pid_max" in msg
    short = sl.too_small(2500, 2500, lims)
    assert {lim.setting for lim in short} == {"kernel.pid_max", "dockerd LimitNOFILE"}


def test_pods_carry_more_devices_than_one_device_containers():
    lims = _limits()
    assert sl.too_small(2500, 2500, lims) != []
    assert sl.too_small(2500, 128, lims) == []          # 2500 devices in 128 pods fit
    assert [lim.setting for lim in sl.too_small(5000, 128, lims)] == ["kernel.pid_max"]


def test_unreadable_limits_are_left_out():
    lims = sl.host_limits(read=lambda p: None, dockerd_nofile=lambda: None)
    assert lims == [] and sl.too_small(10_000, 10_000, lims) == []


def test_engine_devices_cost_conntrack_flows_but_no_tasks():
    lims = sl.host_limits(read=lambda p: {"/proc/sys/kernel/pid_max": 32768,
                                          "/proc/sys/kernel/threads-max": 60000,
                                          "/proc/sys/net/netfilter/nf_conntrack_max": 262144}.get(p),
                          dockerd_nofile=lambda: 1048576)
    assert sl.too_small(1, 4, lims, fleet_devices=100_000) == []     # 2 fleets: 4 containers
    short = sl.too_small(1, 4, lims, fleet_devices=200_000)
    assert [lim.setting for lim in short] == ["net.netfilter.nf_conntrack_max"]
    msg = sl.message(1, 4, short, fleet_devices=200_000)
    assert "and 200000 engine devices" in msg and "2 per engine device" in msg


def test_the_dockerd_found_is_the_one_of_the_cells_node_and_needs_no_pidof(tmp_path):
    # a cell's image has no pidof: unknown, the engines were not sized to the node dockerd's
    # 20 000 descriptors and runc refused 50 020 (the emulated cluster, 200 000 devices)
    from wotbench.runner.backends.docker.scalelimits import dockerd_pid

    def proc(pid: int, comm: str, cmd: str) -> None:
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "comm").write_text(comm + "\n")
        (tmp_path / str(pid) / "cmdline").write_bytes(cmd.replace(" ", "\0").encode())
    (tmp_path / "self").mkdir()
    proc(100, "dockerd", "/usr/sbin/dockerd")
    proc(200, "dockerd", "dockerd -H unix:///var/lib/c/nodes/n2/docker.sock")
    proc(300, "dockerd", "dockerd -H unix:///var/lib/c/nodes/n3/docker.sock")
    proc(400, "python3", "python3 -m wotbench dockerd")
    assert dockerd_pid(tmp_path, sock="/var/lib/c/nodes/n2/docker.sock") == 200
    assert dockerd_pid(tmp_path, sock="unix:///var/lib/c/nodes/n3/docker.sock") == 300
    assert dockerd_pid(tmp_path, sock="") == 300      # no node named: the newest, as pidof
    # a node named that none of several is: not another node's daemon
    assert dockerd_pid(tmp_path, sock="/var/lib/c/nodes/n9/docker.sock") is None
    assert dockerd_pid(tmp_path / "self", sock="") is None


def test_a_node_dockerd_configured_from_a_file_beside_its_socket_is_found(tmp_path):
    # the emulated cluster starts each node's dockerd with --config-file NODE_DIR/daemon.json
    # (its socket in that file): no socket on the command line, so no dockerd was found among
    # four and the engines went unsized (runc refused 52 652 descriptors at 10^6 devices)
    from wotbench.runner.backends.docker.scalelimits import dockerd_pid
    root = "/var/lib/wotbench-cluster-fleet-fidelity/nodes"
    for pid, n in ((100, 1), (200, 2), (300, 3)):
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "comm").write_text("dockerd\n")
        (tmp_path / str(pid) / "cmdline").write_bytes(
            f"dockerd\0--config-file\0{root}/wbcff-n{n}/daemon.json\0".encode())
    (tmp_path / "400").mkdir()
    (tmp_path / "400" / "comm").write_text("dockerd\n")
    (tmp_path / "400" / "cmdline").write_bytes(
        f"dockerd\0--config-file={root}/wbcff-n4/daemon.json\0".encode())
    assert dockerd_pid(tmp_path, sock=f"{root}/wbcff-n2/docker.sock") == 200
    assert dockerd_pid(tmp_path, sock=f"unix://{root}/wbcff-n4/docker.sock") == 400
    assert dockerd_pid(tmp_path, sock=f"{root}/wbcff-n9/docker.sock") is None
