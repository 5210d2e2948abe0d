"""What shares the GEs' core with them (docs/FLEET.md "The GEs' late sends"): the GE containers'
cgroups at the top of the hierarchy (where the parent is chosen, that it reaches Docker, that
the monitor still finds and recognises a GE there), and collectl at the harness's nice."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path
from types import SimpleNamespace

from wotbench.monitor import foreign, recorder
from wotbench.procutil import child_setup
from wotbench.runner.backends.docker import backend as docker_backend
from wotbench.runner.backends.docker import containers

CID = "ab" * 32


def _backend(monkeypatch, dirs: dict[str, Path]):
    b = object.__new__(docker_backend.DockerBackend)
    b.ctr = {"meter-fleet0": SimpleNamespace(id=CID)}
    b._ge_parent = None
    monkeypatch.setattr(docker_backend, "container_cgroup_dirs", lambda cid: dirs)
    return b


def test_ge_cgroups_go_to_the_top_where_the_daemon_keeps_containers_under_docker(monkeypatch):
    b = _backend(monkeypatch, {"cpu": Path(f"/sys/fs/cgroup/cpu/docker/{CID}")})
    assert b._ge_cgroup_parent() == docker_backend.GE_CGROUP_PARENT == "/"


def test_a_daemon_with_its_own_cgroup_parent_keeps_its_layout(monkeypatch):
    # the emulated cluster's nodes (cgroup-parent wbc-n<i>): the monitor does not find their
    # containers under docker/, and the GEs stay where that daemon puts them
    assert _backend(monkeypatch, {})._ge_cgroup_parent() is None
    slice_dirs = {"v2": Path(f"/sys/fs/cgroup/system.slice/docker-{CID}.scope")}
    assert _backend(monkeypatch, slice_dirs)._ge_cgroup_parent() is None


def test_the_parent_reaches_the_docker_call():
    made = {}

    class Containers:
        def create(self, image, **kw):
            made.update(kw)
            return SimpleNamespace(id=CID)

    client = SimpleNamespace(containers=Containers(),
                             api=SimpleNamespace(create_endpoint_config=lambda **kw: kw))
    spec = containers.Spec(name="ge-0", role="ge", image="ge", command=[], cpuset="0",
                           networks={"net": "10.0.0.2"}, cpu_shares=8192, cgroup_parent="/")
    containers.create(client, "run1", spec)
    assert made["cgroup_parent"] == "/" and made["cpu_shares"] == 8192
    made.clear()
    spec.cgroup_parent = None
    containers.create(client, "run1", spec)
    assert "cgroup_parent" not in made


def test_the_monitor_finds_a_top_level_container_cgroup(tmp_path, monkeypatch):
    (tmp_path / "cpu" / CID).mkdir(parents=True)
    (tmp_path / "memory" / CID).mkdir(parents=True)
    monkeypatch.setattr(recorder, "CGROUP_ROOT", tmp_path)
    dirs = recorder.container_cgroup_dirs(CID)
    assert dirs["cpu"] == tmp_path / "cpu" / CID and dirs["memory"] == tmp_path / "memory" / CID


def test_the_process_scan_names_the_container_at_the_top_and_under_docker():
    for line in (f"4:cpu:/{CID}", f"4:cpu:/docker/{CID}", f"0::/system.slice/docker-{CID}.scope"):
        m = foreign._CONTAINER_ID.search(line)
        assert m and m.group(1) == CID, line
    assert foreign._CONTAINER_ID.search("4:memory:/process_api/dfbcb39be0eba127136f921569ed172b") \
        is None


def _child_nice(keep: bool) -> int:
    stat = subprocess.run(["cat", "/proc/self/stat"], capture_output=True, text=True, check=True,
                          preexec_fn=child_setup(set(), keep_nice=keep)).stdout
    return int(stat.rsplit(")", 1)[1].split()[16])   # field 19, nice


def test_collectl_keeps_the_harness_nice_where_emulators_get_theirs_undone():
    base = os.getpriority(os.PRIO_PROCESS, 0)
    assert _child_nice(True) == base
    if base > 0 and os.geteuid() == 0:   # undoing a nice needs the privilege to raise it
        assert _child_nice(False) == 0
