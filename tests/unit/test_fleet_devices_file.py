"""The devices file the runner writes for wot-fleet (docs/CONTRACTS.md §3b) and the engine's
command line (wotbench.rundir.fleet_files, wotbench.runner.deployment.fleets)."""
from pathlib import Path

import pytest

from wotbench.configfile.yaml_loader import config_from_dict
from wotbench.deploy import fleet_capacity
from wotbench.deploy.plan import make_plan
from wotbench.deploy.resolve import device_addresses
from wotbench.rundir import RunDir
from wotbench.rundir.fleet_files import (DEVICES_HEADER, DevicesFileError, FleetDevice,
                                         read_devices, write_devices)
from wotbench.runner.deployment import fleets

SLEEP = {"mode": "sleep", "service_time": {"dist": "deterministic", "mean": 5},
         "rit": {"dist": "exponential", "mean": 1000}}


def cfg(*groups, **top):
    return config_from_dict({"name": "t", "devices": list(groups), **top})


def built(tmp_path: Path, c, in_container: bool):
    rd = RunDir(tmp_path)
    reqs = fleet_capacity.requirements(c, make_plan(c, cores=[0, 1]))
    return rd, fleets.build(c, rd, reqs, device_addresses(c), in_container,
                            make_dir=lambda p: (p.mkdir(parents=True, exist_ok=True), p)[1])


def test_header_is_the_contracts():
    assert ",".join(DEVICES_HEADER) == \
        "index,name,listen,resources,slots,queue,response,piggyback_max_us"


def test_docker_devices_file_binds_a_port_each_and_names_the_mounted_resources(tmp_path):
    c = cfg({"group": "a", "count": 30, "engine": "fleet", "threads": 4,
             "response": "separate", **SLEEP},
            {"group": "b", "count": 20, "engine": "fleet", **SLEEP})
    rd, runs = built(tmp_path, c, in_container=True)
    assert [r.name for r in runs] == ["a-fleet0", "b-fleet0"]
    rows = read_devices(rd.fleet_devices_file("b-fleet0"))
    assert [r.index for r in rows] == list(range(30, 50))          # global trace ids
    assert rows[0] == FleetDevice(index=30, name="b-0", listen="0.0.0.0:5683",
                                  resources="/res/b-0.csv", slots=1, queue=1024,
                                  response="auto", piggyback_max_us=1000)
    assert rows[-1].listen == "0.0.0.0:5702"
    a = read_devices(rd.fleet_devices_file("a-fleet0"))
    assert (a[5].slots, a[5].response) == (4, "separate")
    # the GE's view: the container's address and the device's port
    assert runs[1].endpoints["172.28.0.11:5683"] == "b-0"


def test_process_devices_file_binds_own_loopback_addresses_and_host_paths(tmp_path):
    c = cfg({"group": "a", "count": 12, "engine": "fleet", **SLEEP},
            network={"subnet": "127.5.0.0/16"})
    rd, (run,) = built(tmp_path, c, in_container=False)
    rows = read_devices(rd.fleet_devices_file("a-fleet0"))
    assert [r.listen for r in rows[:2]] == ["127.5.0.10:5683", "127.5.0.11:5683"]
    assert rows[0].resources == str(rd.resource_file("a-0"))
    argv = fleets.command(run, in_container=False, binary="/bin/wot-fleet")
    assert argv[:5] == ["/bin/wot-fleet", "--devices", str(run.dir / "devices.csv"),
                        "--log-dir", str(run.dir)]
    i = argv.index("--loops")
    assert argv[i + 1] == "1" and argv[argv.index("--name") + 1] == "a-fleet0"
    assert argv[argv.index("--cpus") + 1] == run.cpuset
    assert int(argv[argv.index("--log-capacity") + 1]) == run.req.log_capacity


def test_container_command_uses_the_mounted_paths(tmp_path):
    c = cfg({"group": "a", "count": 3, "engine": "fleet", **SLEEP})
    _, (run,) = built(tmp_path, c, in_container=True)
    argv = fleets.command(run, in_container=True)
    assert argv[:4] == ["--devices", "/logs/devices.csv", "--log-dir", "/logs"]


@pytest.mark.parametrize("line, what", [
    ("x,a-0,127.0.0.1:5683,/r.csv,1,1024,auto,1000", "2: index"),
    ("0,a-0,127.0.0.1,/r.csv,1,1024,auto,1000", "2: listen"),
    ("0,a-0,127.0.0.1:70000,/r.csv,1,1024,auto,1000", "2: listen"),
    ("0,a-0,127.0.0.1:5683,/r.csv,0,1024,auto,1000", "2: slots"),
    ("0,a-0,127.0.0.1:5683,/r.csv,1,1024,fast,1000", "2: response"),
    ("0,a-0,127.0.0.1:5683,/r.csv,1,1024,auto", "2: 7 fields"),
])
def test_a_bad_line_is_named_by_file_and_line(tmp_path, line, what):
    f = tmp_path / "devices.csv"
    f.write_text(",".join(DEVICES_HEADER) + "\n" + line + "\n")
    with pytest.raises(DevicesFileError, match=f"devices.csv:{what}"):
        read_devices(f)


def test_a_repeated_index_or_endpoint_is_refused(tmp_path):
    f = tmp_path / "devices.csv"
    d = FleetDevice(index=0, name="a-0", listen="127.0.0.1:5683", resources="/r.csv", slots=1)
    write_devices(f, [d, d.model_copy(update={"name": "a-1", "listen": "127.0.0.2:5683"})])
    with pytest.raises(DevicesFileError, match="devices.csv:3: 0 repeats line 2"):
        read_devices(f)
    write_devices(f, [d, d.model_copy(update={"index": 1, "name": "a-1"})])
    with pytest.raises(DevicesFileError, match="devices.csv:3: 127.0.0.1:5683 repeats line 2"):
        read_devices(f)


def test_a_cells_share_of_an_engine_is_sized_for_its_devices(tmp_path):
    c = cfg({"group": "a", "count": 3000, "engine": "fleet", **SLEEP})
    rd = RunDir(tmp_path)
    reqs = fleet_capacity.requirements(c, make_plan(c, cores=[0, 1]))
    share = [a for a in device_addresses(c) if 1000 <= a.id < 1500]
    (run,) = fleets.build(c, rd, reqs, share, in_container=True,
                          make_dir=lambda p: (p.mkdir(parents=True, exist_ok=True), p)[1])
    r = run.req
    assert (r.first_id, r.devices) == (1000, 500)
    assert r.nofile == 500 + fleet_capacity.FDS_BASE + fleet_capacity.FDS_PER_LOOP
    assert r.rate_per_s == pytest.approx(500.0)       # 1 req/s each
    assert [d.index for d in read_devices(rd.fleet_devices_file(r.name))] == \
        list(range(1000, 1500))


def test_docker_starts_an_engine_least_privileged_with_the_planned_limits(tmp_path, monkeypatch):
    """The container spec of an engine (what containers.create turns into the Docker call,
    with its LEAST_PRIVILEGE keywords): its address, the resource files read-only, the
    fleet's directory, cpuset, memory, pids and nofile from the plan."""
    from wotbench.runner.backends.docker import backend as dbackend
    from wotbench.runner.backends.docker import containers, network
    c = cfg({"group": "a", "count": 40, "engine": "fleet", **SLEEP})
    rd, (run,) = built(tmp_path, c, in_container=True)
    made = []

    class Started:
        def start(self):
            made[-1]["started"] = True
    monkeypatch.setattr(containers, "create",
                        lambda client, run_id, spec: made.append({"spec": spec}) or Started())
    b = dbackend.DockerBackend(client=None, run_id="r1", log=lambda m: None, run_dir=tmp_path)
    b.images = {"wot-fleet": "wotbench/wot-fleet:x"}
    b.net_plan = network.plan_networks("r1", c.network.subnet, {run.name: run.address}, ["ge-0"])
    b.start_fleets([run])
    (m,) = made
    s = m["spec"]
    assert m["started"] and (s.name, s.role, s.image) == ("a-fleet0", "fleet", "wotbench/wot-fleet:x")
    assert s.networks == {"wb-r1-net0": "172.28.0.10"} and s.cpuset == run.cpuset
    assert s.binds[rd.resources_dir] == ("/res", "ro") and s.binds[run.dir] == ("/logs", "rw")
    assert (s.nofile, s.pids_limit) == (run.req.nofile, run.req.pids)
    assert s.memory_mb * 2**20 >= run.req.memory_bytes
    assert s.command[:4] == ["--devices", "/logs/devices.csv", "--log-dir", "/logs"]
    lp = containers.LEAST_PRIVILEGE
    assert lp["read_only"] and lp["cap_drop"] == ["ALL"] and lp["user"] == "65534:65534"
    assert lp["security_opt"] == ["no-new-privileges"] and not lp["privileged"]


def test_a_container_spec_with_nofile_asks_docker_for_that_ulimit():
    from types import SimpleNamespace
    from wotbench.runner.backends.docker import containers
    got = {}
    client = SimpleNamespace(
        api=SimpleNamespace(create_endpoint_config=lambda **kw: kw),
        containers=SimpleNamespace(create=lambda image, **kw: got.update(kw) or "c"),
        networks=None)
    spec = containers.Spec(name="a-fleet0", role="fleet", image="i", command=["--x"],
                           cpuset="1", networks={"n0": "172.28.0.10"}, memory_mb=300,
                           pids_limit=8, nofile=16687)
    containers.create(client, "r1", spec)
    (u,) = got["ulimits"]
    assert (u["Name"], u["Soft"], u["Hard"]) == ("nofile", 16687, 16687)
    assert got["read_only"] and got["cap_drop"] == ["ALL"] and got["mem_limit"] == "300m"
    assert got["pids_limit"] == 8


def test_impaired_devices_get_wot_devices_impair_arguments_as_columns(tmp_path):
    """The app backend's --impair/--impair-ge/--impair-seed of each device become its three
    columns; a fleet with no impaired device keeps the eight-column header."""
    from wotbench import netimpair
    c = cfg({"group": "a", "count": 4, "engine": "fleet", **SLEEP,
             "network": {"loss": {"percent": 2}, "direction": "both"}},
            {"group": "b", "count": 2, "engine": "fleet", **SLEEP}, network={"backend": "app"})
    backend, _ = netimpair.select_backend("app", netimpair.resolve_impairments(c.devices), seed=5)
    rd = RunDir(tmp_path)
    reqs = fleet_capacity.requirements(c, make_plan(c, cores=[0, 1]))
    fleets.build(c, rd, reqs, device_addresses(c), False,
                 make_dir=lambda p: (p.mkdir(parents=True, exist_ok=True), p)[1],
                 impair=backend.device_args)
    a = read_devices(rd.fleet_devices_file("a-fleet0"))
    assert rd.fleet_devices_file("a-fleet0").read_text().splitlines()[0].endswith(
        ",impair,impair_ge,impair_seed")
    want = FleetDevice.impair_fields(backend.device_args("a-1"))
    assert (a[1].impair, a[1].impair_ge, a[1].impair_seed) == \
        (want["impair"], want.get("impair_ge", ""), want["impair_seed"])
    assert a[1].impair.startswith("dir=both;") and "loss=2" in a[1].impair   # ';' for ','
    assert a[1].impair.replace(";", ",") == backend.device_args("a-1")[1]
    assert len({d.impair_seed for d in a}) == 4          # a seed per device
    b = rd.fleet_devices_file("b-fleet0").read_text().splitlines()[0]
    assert b == ",".join(DEVICES_HEADER)
    with pytest.raises(ValueError, match="--dtls"):
        FleetDevice.impair_fields(["--dtls-psk-identity", "x"])


def test_observed_groups_get_observer_records_on_the_command_line(tmp_path):
    c = cfg({"group": "a", "count": 3, "engine": "fleet", **SLEEP,
             "observe": {"period_ms": 500, "observers": 3}})
    _, (run,) = built(tmp_path, c, in_container=False)
    a = run.args("d.csv", "out")
    assert a[a.index("--observers") + 1] == str(3 + fleets.OBSERVER_MARGIN)
