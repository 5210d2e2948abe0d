"""Devices per container (wotbench.deploy.pods): layout, addresses, placement, config checks, the
Docker pod spec and how the runner finds a pod's device processes."""
import os
from pathlib import Path

import pytest

from wotbench.deploy import pods
from wotbench.configfile.yaml_loader import config_from_dict
from wotbench.errors import ConfigError
from wotbench.deploy.plan import make_plan
from wotbench.deploy.resolve import cd_node_address, device_addresses
from wotbench.runner.deployment.components import DeviceRun
from wotbench.runner.backends.docker.pods import group_by_container, is_pod, member_pids, pod_spec


def cfg(*groups, **top):
    return config_from_dict({"name": "t", "devices": list(groups), **top})


def test_auto_keeps_one_device_per_container_up_to_the_limit():
    c = cfg({"group": "a", "count": pods.AUTO_MAX_CONTAINERS})
    assert pods.group_sizes(c) == [1]
    assert pods.containers(c) == pods.AUTO_MAX_CONTAINERS
    assert {a.container for a in device_addresses(c)} == set(c.device_names())


def test_auto_packs_1000_devices_into_about_128_containers():
    c = cfg({"group": "a", "count": 1000})
    assert pods.group_sizes(c) == [8]
    assert pods.containers(c) == 125 and pods.address_count(c) == 125
    addrs = device_addresses(c)
    # a pod's devices share its address, on consecutive ports from 5683
    assert [(a.ip, a.port, a.container) for a in addrs[7:9]] == [
        ("172.28.0.10", 5690, "a-pod0"), ("172.28.0.11", 5683, "a-pod1")]
    assert len({(a.ip, a.port) for a in addrs}) == 1000
    assert cd_node_address(c).ip == "172.28.0.135"     # after the 125 pod addresses


def test_a_group_that_does_not_fill_its_last_pod_and_the_next_group():
    c = cfg({"group": "a", "count": 5, "per_container": 2}, {"group": "b", "count": 3})
    s = pods.slots(c)
    assert [x.container for x in s] == ["a-pod0", "a-pod0", "a-pod1", "a-pod1", "a-pod2",
                                        "b-0", "b-1", "b-2"]
    assert [x.address_index for x in s] == [0, 0, 1, 1, 2, 3, 4, 5]
    assert [x.port_offset for x in s] == [0, 1, 0, 1, 0, 0, 0, 0]


def test_tc_impaired_and_third_party_groups_stay_one_per_container_under_auto():
    loss = {"loss": {"percent": 1}}
    c = cfg({"group": "a", "count": 200, "network": loss},
            {"group": "b", "count": 100, "server": {"command": ["coap-server"]}, "paths": ["x"]},
            {"group": "c", "count": 100})
    assert pods.group_sizes(c) == [1, 1, 4]
    app = cfg({"group": "a", "count": 200, "network": loss}, network={"backend": "app"})
    assert pods.group_sizes(app) == [2]       # app impairments are per device process


def test_explicit_pods_that_would_share_a_tc_link_are_refused_with_the_key():
    with pytest.raises(ConfigError) as e:
        cfg({"group": "a", "count": 4, "per_container": 2, "network": {"loss": {"percent": 1}}})
    assert any(p.startswith("devices[0].per_container: 2, expected 1 or 'auto': its network "
                            "impairments are applied by tc") for p in e.value.problems)


@pytest.mark.parametrize("bad", [0, 65, "many", True, 1.5])
def test_bad_per_container_values_name_the_key(bad):
    with pytest.raises(ConfigError) as e:
        cfg({"group": "a", "count": 4, "per_container": bad})
    assert any("devices[0].per_container" in p and "'auto' or an integer 1..64" in p
               for p in e.value.problems)


def test_pinned_placement_keeps_a_pod_on_one_core():
    c = cfg({"group": "a", "count": 6, "per_container": 3}, placement={"affinity": "pinned"})
    plan = make_plan(c, cores=[0, 1, 2, 3, 4, 5])
    assert len(plan.device_cores) > 1
    assert plan.devices["a-0"] == plan.devices["a-1"] == plan.devices["a-2"]
    assert plan.devices["a-3"] == plan.devices["a-5"] != plan.devices["a-0"]


def _dev(name, port, tmp, pod="p", cpuset="1", threads=2, mem=32):
    return DeviceRun(name=name, id=0, group="g", role="device", address="10.0.0.10", cpuset=cpuset,
                     resources=tmp / f"{name}.csv", log_dir=tmp / name, stdout=tmp / "x",
                     threads=threads, port=port, memory_mb=mem, container=pod)


def test_pod_spec_mounts_each_device_and_sums_the_limits(tmp_path):
    ms = [_dev("g-0", 5683, tmp_path, cpuset="1"), _dev("g-1", 5684, tmp_path, cpuset="2", threads=4)]
    spec = pod_spec("g-pod0", ms, "img", {"net0": "10.0.0.10"})
    assert spec.command[:2] == ["--pod", "--"] and spec.command.count("--") == 2
    i = spec.command.index("--", 2)   # the second device's segment
    assert spec.command[i + 1:i + 3] == ["--resources", "/res/g-1.csv"]
    assert "0.0.0.0:5684" in spec.command[i:] and "0.0.0.0:5683" in spec.command[:i]
    assert spec.binds[tmp_path / "g-1"] == ("/logs/g-1", "rw")
    assert spec.binds[tmp_path / "g-0.csv"] == ("/res/g-0.csv", "ro")
    assert (spec.cpuset, spec.memory_mb, spec.pids_limit) == ("1-2", 64, 64 * 2 + 6)


def test_group_by_container_tells_pods_from_single_devices(tmp_path):
    alone = _dev("h-0", 5683, tmp_path, pod="")
    units = group_by_container([_dev("g-0", 5683, tmp_path), _dev("g-1", 5684, tmp_path), alone])
    assert list(units) == ["p", "h-0"]
    assert is_pod("p", units["p"]) and not is_pod("h-0", units["h-0"])


def test_member_pids_reads_the_children_and_their_names(tmp_path):
    proc = tmp_path / "proc"
    (proc / "10" / "task" / "10").mkdir(parents=True)
    (proc / "10" / "task" / "10" / "children").write_text("11 12 13 ")
    for pid, argv in {11: [b"wot-device", b"--name", b"g-0"], 12: [b"x", b"--name", b"g-1", b"--threads", b"2"],
                      13: [b"no-name"]}.items():
        (proc / str(pid)).mkdir()
        (proc / str(pid) / "cmdline").write_bytes(b"\0".join(argv) + b"\0")
    assert member_pids(10, proc) == {"g-0": 11, "g-1": 12}
    assert member_pids(99, proc) == {}


def test_member_pids_looks_through_the_warden_to_the_pod_process(tmp_path):
    """Under the run's warden the container's init is the warden; the pod is its child."""
    proc = tmp_path / "proc"
    tree = {1: ([b"/.wb/warden", b"--lease", b"/.wb/lease/heartbeat", b"--", b"/wot-device",
                 b"--pod", b"--", b"--name", b"g-0"], "7"),
            7: ([b"/wot-device", b"--pod", b"--", b"--name", b"g-0", b"--", b"--name", b"g-1"],
                "8 9"),
            8: ([b"/wot-device", b"--name", b"g-0"], ""), 9: ([b"/wot-device", b"--name", b"g-1"], "")}
    for pid, (argv, kids) in tree.items():
        (proc / str(pid) / "task" / str(pid)).mkdir(parents=True)
        (proc / str(pid) / "task" / str(pid) / "children").write_text(kids)
        (proc / str(pid) / "cmdline").write_bytes(b"\0".join(argv) + b"\0")
    assert member_pids(1, proc) == {"g-0": 8, "g-1": 9}


class _FakeContainer:
    def __init__(self):
        self.signals = []
        self.id = "x"

    def kill(self, signal):
        self.signals.append(signal)


def test_docker_backend_maps_a_pods_exit_and_stop_to_its_devices():
    from types import SimpleNamespace

    from wotbench.runner.backends.docker.backend import DockerBackend
    b = DockerBackend(client=None, run_id="r", log=lambda m: None)
    pod, alone = _FakeContainer(), _FakeContainer()
    b.ctr = {"g-pod0": pod, "h-0": alone}
    b.pod_of = {"g-0": "g-pod0", "g-1": "g-pod0"}
    b.exits = SimpleNamespace(codes={"g-pod0": 137})
    assert b.created("g-1") and not b.created("g-2")
    assert b.exited({"g-0", "g-1", "h-0"}) == {"g-0": 137, "g-1": 137}
    assert b.exit_code("g-0") == 137 and b.exit_code("h-0") is None
    assert b.cgroup("g-0") is None          # a pod's device is sampled by its own threads
    b.exits.codes["h-0"] = 0
    assert b.stop(["g-0", "g-1", "h-0"], grace_s=1) == {"g-0": 137, "g-1": 137, "h-0": 0}
    assert pod.signals == ["SIGTERM"] and alone.signals == ["SIGTERM"]   # the pod once


def test_a_pod_member_gone_unreported_waits_for_the_pods_own_exit(monkeypatch):
    """A killed pod's processes are gone a moment before its exit event: a member seen dead
    without the pod's report is not called a member's death (-1) until the grace has passed,
    and the pod's exit code wins if it comes first; a reported death is taken at once."""
    import subprocess
    from types import SimpleNamespace

    from wotbench.runner.backends.docker import backend as be
    dead = subprocess.Popen(["true"])
    dead.wait()                                  # a pid that no longer runs
    pod = _FakeContainer()
    pod.logs = lambda **kw: b"pod: device g-1 exited with code 139 (SIGSEGV)\n"
    b = be.DockerBackend(client=None, run_id="r", log=lambda m: None)
    b.ctr, b.pod_of = {"g-pod0": pod}, {"g-0": "g-pod0", "g-1": "g-pod0"}
    b.exits = SimpleNamespace(codes={})
    b._pids = {"g-0": dead.pid, "g-1": dead.pid}
    clock = [100.0]
    monkeypatch.setattr(be.time, "monotonic", lambda: clock[0])
    assert b.exited({"g-0", "g-1"}) == {"g-1": 139}       # reported: at once
    b.exits.codes["g-pod0"] = 137                         # the pod's exit event arrives
    assert b.exited({"g-0"}) == {"g-0": 137}
    b.exits.codes.clear()
    b._member_codes.pop("g-1")
    clock[0] += be.POD_REPORT_GRACE_S / 2
    pod.logs = lambda **kw: b""
    assert b.exited({"g-0", "g-1"}) == {}                 # gone, no report, no exit event yet
    clock[0] += be.POD_REPORT_GRACE_S / 2
    assert b.exited({"g-0", "g-1"}) == {"g-0": -1, "g-1": -1}   # the pod went on without them


def test_pod_spec_mounts_the_dtls_key_once_and_passes_its_path(tmp_path):
    from wotbench.runner.prepare.dtlskey import KEY_IN, DtlsCreds
    creds = DtlsCreds("wotbench", tmp_path / "secrets" / "dtls-psk.key", "reuse")
    ms = [_dev("g-0", 5684, tmp_path), _dev("g-1", 5685, tmp_path)]
    for d in ms:
        d.dtls = creds
    spec = pod_spec("g-pod0", ms, "img", {"net0": "10.0.0.10"})
    assert spec.binds[creds.key_file] == (KEY_IN, "ro")
    assert spec.command.count("--dtls-psk-key-file") == 2 and KEY_IN in spec.command
    assert "wotbench" in spec.command and "--dtls-sessions" not in spec.command


def test_reported_exit_reads_the_pods_last_word_on_a_device():
    from wotbench.runner.backends.docker.pods import reported_exit
    out = ("wot-device pod: device g-1 exited with code 139 before the pod was told to stop\n"
           "wot-device pod: device g-10 exited with code 2\n")
    assert reported_exit(out, "g-1") == 139
    assert reported_exit(out, "g-10") == 2
    assert reported_exit(out, "g-2") == -1
