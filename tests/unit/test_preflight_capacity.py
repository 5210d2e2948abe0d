"""The host-limit check of the pre-flight on its data: per-form device costs against given
limits (no host read), and the cgroup pids limit as the kernel writes it."""
from wotbench.configfile.yaml_loader import config_from_dict
from wotbench.deploy.plan import make_plan
from wotbench.runner.preflight import capacity, costs
from wotbench.runner.preflight.capacity import HostLimit


def cfg(count, rit_ms=1000.0, threads=1, engine="process"):
    return config_from_dict({"name": "t", "devices": [
        {"group": "s", "count": count, "threads": threads, "mode": "sleep", "engine": engine,
         "rit": {"dist": "exponential", "mean": rit_ms}}]})


LIMITS = [HostLimit("kernel.pid_max", "tasks", 30_000, 32_768, "sysctl -w kernel.pid_max=4194304"),
          HostLimit("fs.file-max", "fds", 1_000_000, 1_000_000, "sysctl -w fs.file-max=N"),
          HostLimit("MemAvailable", "memory_bytes", 8 << 30, 16 << 30, "free memory")]


def test_process_form_costs_per_device_and_worker_thread():
    need = costs.PROCESS.need(1000, threads=4)
    assert (need.tasks, need.fds, need.ports) == (5000, 11_000, 1000)
    assert need.memory_bytes == round(1000 * 1.2 * costs.MIB)


def test_a_run_within_the_limits_passes_and_one_beyond_names_key_limit_and_fix():
    c = cfg(1000)
    plan = make_plan(c, cores=[0, 1, 2, 3])
    assert capacity.problems(c, plan, LIMITS) == []
    big = cfg(100_000, rit_ms=10_000)
    found = capacity.problems(big, make_plan(big, cores=[0, 1, 2, 3]), LIMITS)
    assert len(found) == 3, found        # tasks, fds, memory; the request rate fits one core
    assert found[0].startswith("devices[0].count: 100,000 devices (process form")
    assert "need about 200,000 tasks, more than kernel.pid_max = 32,768" in found[0]
    assert "fix: fewer devices, or more hosts" in found[0] and "sysctl -w kernel.pid_max" in found[0]
    assert "of memory, more than" in found[2]


def test_the_request_rate_needs_device_cores():
    c = cfg(200, rit_ms=1)      # 200 k requests/s
    plan = make_plan(c, cores=[0, 1, 2, 3])
    found = capacity.problems(c, plan, [])
    assert len(found) == 1 and "about 200,000 requests/s" in found[0]
    assert f"the {len(plan.device_cores)} device core(s)" in found[0] and "3 device cores are needed" in found[0]


def test_the_engine_form_is_counted_with_its_own_costs_and_named_as_a_fix():
    big = cfg(100_000, rit_ms=10_000)
    plan = make_plan(big, cores=[0, 1, 2, 3])
    assert "or devices[].engine: fleet" in capacity.problems(big, plan, LIMITS)[0]
    for engine in ("fleet", "auto"):       # auto: the engine above its size (deploy.fleet)
        in_engine = cfg(100_000, rit_ms=10_000, engine=engine)
        n, need = capacity.demand(in_engine)["fleet"]
        assert n == 100_000 and need.tasks == costs.FLEET.need(100_000).tasks < 100
        assert need.memory_bytes < 2 << 30          # 16 KiB a device, not 1.2 MiB
        assert capacity.problems(in_engine, make_plan(in_engine, cores=[0, 1, 2, 3]), LIMITS) == []


def test_cgroup_pids_limit_v1_and_v2(tmp_path):
    root = tmp_path / "cg"
    (root / "pids" / "user.slice").mkdir(parents=True)
    (root / "pids" / "user.slice" / "pids.max").write_text("4096\n")
    (root / "pids" / "user.slice" / "pids.current").write_text("100\n")
    proc = tmp_path / "cgroup"
    proc.write_text("4:memory:/x\n8:pids:/user.slice\n")
    assert capacity._cgroup_pids(proc, root) == (4096, 100)
    (root / "app").mkdir()
    (root / "app" / "pids.max").write_text("max\n")
    (root / "app" / "pids.current").write_text("7\n")
    proc.write_text("0::/app\n")
    assert capacity._cgroup_pids(proc, root) is None        # no limit


def test_a_cell_counts_only_its_share_of_the_devices():
    big = cfg(100_000, rit_ms=10_000)
    plan = make_plan(big, cores=[0, 1, 2, 3])
    share = frozenset(f"s-{i}" for i in range(1000))
    assert capacity.demand(big, share)["process"][0] == 1000
    assert capacity.problems(big, plan, LIMITS, share) == []
    assert capacity.problems(big, plan, LIMITS) != []


def test_a_form_with_many_devices_per_process_needs_their_descriptors_in_one(monkeypatch):
    many = costs.FormCost(form="many", tasks_per_device=0, tasks_per_thread=0, fds_per_device=1,
                          memory_bytes_per_device=1, ports_per_device=1, addresses_per_device=1,
                          requests_per_core_s=1e6, devices_per_process=50_000, fds_per_process=20)
    assert many.fds_of_one_process(100_000) == 50_020 and many.fds_of_one_process(10) == 30
    nofile = HostLimit("RLIMIT_NOFILE (hard, ulimit -Hn)", "fds_per_process", 20_000 - 64, 20_000,
                       "ulimit -Hn")
    per_form = {"many": (100_000, many.need(100_000))}
    c = cfg(100_000, rit_ms=10_000)
    monkeypatch.setitem(costs.FORMS, "many", many)
    found = capacity._process_fd_problems(c, per_form, nofile)
    assert len(found) == 1 and "one many-form process of 50,000 devices holds about 50,020" in found[0]
    assert capacity._process_fd_problems(c, {"process": (100_000, costs.Need())}, nofile) == []

