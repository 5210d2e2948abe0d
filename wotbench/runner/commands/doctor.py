"""``wotbench doctor``: is this host able to run WoTbench, and what to do when it is not.

Each check returns ``Check(name, status, detail, fix)`` with status ``ok``, ``warn`` (runs, with
a caveat) or ``fail`` (cannot run). ``run`` reuses :func:`run_checks` as its prerequisite step.
"""
from __future__ import annotations

import glob
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from wotbench.netimpair.probe import NO_NETEM_HINT, probe_netem
from wotbench.runner.prepare import binaries
from wotbench.runner.teardown.cleanup import leftover_processes
from wotbench.runner.backends.docker.backend import docker_client

OK, WARN, FAIL = "ok", "warn", "fail"


@dataclass
class Check:
    name: str
    status: str
    detail: str
    fix: str = ""


def connect() -> tuple[object | None, Exception | None]:
    """(a pinged Docker client, None) or (None, why not)."""
    try:
        return docker_client(), None
    except Exception as e:  # noqa: BLE001 - every failure to reach Docker is reported as one
        return None, e


def check_docker(client, problem: Exception | None = None) -> Check:
    """``client``: a pinged client, or None with the ``problem`` that connecting met."""
    try:
        if client is None:
            raise problem or ConnectionError("no Docker client")
        info = client.info()
    except Exception as e:
        return Check("docker", FAIL, f"Docker daemon not reachable: {e.__class__.__name__}: {e}",
                     "start the daemon (systemctl start docker), add yourself to the docker group, "
                     "or run with backend: process")
    return Check("docker", OK, f"Docker {info.get('ServerVersion')} (cgroup v"
                 f"{info.get('CgroupVersion', '?')}, {info.get('CgroupDriver')}, "
                 f"{info.get('Driver')}); images are built locally FROM scratch, no registry used")


def check_binaries() -> list[Check]:
    out = []
    for comp in binaries.COMPONENTS:
        b = comp.binary()
        if b.exists() and not binaries.is_stale(comp):
            static = binaries.is_static(b)
            out.append(Check(comp.name, OK if static else FAIL, f"{b}" + ("" if static else
                             " is not static"), "" if static else f"rebuild: make -C {comp.source_dir}"))
        elif (comp.source_dir / "Makefile").exists():
            tools = [t for t in ("make", "gcc") if not shutil.which(t)]
            out.append(Check(comp.name, FAIL if tools else OK,
                             f"{'missing' if not b.exists() else 'stale'}: will be built by "
                             f"`make -C {comp.source_dir}`" + (f"; missing {', '.join(tools)}"
                                                              if tools else ""),
                             "apt-get install build-essential" if tools else ""))
        else:
            out.append(Check(comp.name, FAIL, f"{b} missing and no sources to build it",
                             f"set {comp.env_var} to a static binary"))
    return out


def check_libcoap() -> Check:
    # wot-device links libcoap's OpenSSL build statically (DTLS), with OpenSSL's static libs
    hits = glob.glob("/usr/lib/*/libcoap-3-openssl.a") + glob.glob("/usr/local/lib*/libcoap-3*.a") \
        + glob.glob("/usr/lib/libcoap-3*.a")
    ssl = glob.glob("/usr/lib/*/libssl.a") + glob.glob("/usr/local/lib*/libssl.a")
    if hits and ssl:
        return Check("libcoap", OK, f"static libraries {hits[0]}, {ssl[0]}")
    return Check("libcoap", WARN, "no static libcoap-3-openssl.a / libssl.a: the C binaries cannot "
                 "be rebuilt", "apt-get install libcoap3-dev libssl-dev")


def check_collectl() -> Check:
    path = shutil.which("collectl")
    if path:
        return Check("collectl", OK, path)
    return Check("collectl", WARN, "collectl missing: no host resource monitor (per-container CPU "
                 "accounting still works)", "apt-get install collectl")


def check_cgroups() -> Check:
    root = Path("/sys/fs/cgroup")
    v2_ctl = root / "cgroup.controllers"
    if (root / "cpuset").is_dir() or (root / "cpuset,cpu").is_dir():
        quota = any((root / d / "cpu.cfs_quota_us").exists() for d in ("cpu", "cpu,cpuacct"))
        return Check("cgroup cpuset", OK, "cgroup v1 cpuset" + (" + CFS quota" if quota else ""))
    if v2_ctl.exists():
        ctl = v2_ctl.read_text().split()
        if "cpuset" in ctl:
            return Check("cgroup cpuset", OK, f"cgroup v2 ({' '.join(ctl)})")
        return Check("cgroup cpuset", FAIL, "cgroup v2 without the cpuset controller",
                     "enable it: echo +cpuset > /sys/fs/cgroup/cgroup.subtree_control")
    return Check("cgroup cpuset", WARN, "no cpuset cgroup found; containers cannot be pinned",
                 "mount the cpuset controller, or use backend: process (sched_setaffinity)")


def check_netem() -> Check:
    try:
        ok, why = probe_netem()
    except Exception as e:  # probe impossible here (no tc, no permission)
        return Check("netem", WARN, f"netem probe not available ({e.__class__.__name__})",
                     "needed only for network impairments")
    return Check("netem", OK if ok else WARN, why, "" if ok else NO_NETEM_HINT)


def check_neighbour_table() -> Check:
    from wotbench.runner.prepare.hostlimits import NEIGH_DIR, THRESHOLDS, supported_devices
    vals = {k: (NEIGH_DIR / k).read_text().strip() if (NEIGH_DIR / k).exists() else "?"
            for k in THRESHOLDS}
    n = supported_devices()
    detail = (f"gc_thresh1/2/3 = {vals['gc_thresh1']}/{vals['gc_thresh2']}/{vals['gc_thresh3']}: "
              f"Docker runs up to about {n} devices without raising them")
    if os.geteuid() == 0:
        return Check("neighbour table", OK, detail + "; as root, a larger run raises them for "
                     "its duration and restores them")
    return Check("neighbour table", WARN if (n or 0) < 1000 else OK, detail,
                 "for more devices (as root): sysctl -w net.ipv4.neigh.default.gc_thresh3=8192 "
                 "net.ipv4.neigh.default.gc_thresh2=4096")


def check_scale_limits() -> Check:
    from wotbench.runner.backends.docker.scalelimits import host_limits
    lims = host_limits()
    if not lims:
        return Check("scale limits", WARN, "pid, conntrack and dockerd limits not readable")
    worst = min(lims, key=lambda lim: lim.devices)
    detail = ("at one device per container (pods carry more): "
              + "; ".join(f"{lim.setting} {lim.current}: ~{lim.devices} devices" for lim in lims))
    if worst.devices >= 1000:
        return Check("scale limits", OK, detail)
    return Check("scale limits", WARN, detail, f"for more devices: {worst.fix}")


def _cpu_times() -> dict[int, tuple[int, int]]:
    out = {}
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("cpu") and line[3:4].isdigit():
            parts = line.split()
            vals = list(map(int, parts[1:]))
            idle = vals[3] + (vals[4] if len(vals) > 4 else 0)
            out[int(parts[0][3:])] = (sum(vals[:8]), idle)
    return out


def core_busy(sample_s: float = 0.5) -> dict[int, float]:
    """Fraction of each core busy over ``sample_s`` (what else runs on this host)."""
    a = _cpu_times()
    time.sleep(sample_s)
    b = _cpu_times()
    return {c: 1 - (b[c][1] - a[c][1]) / max(1, b[c][0] - a[c][0]) for c in b if c in a}


def check_cores(sample_s: float = 0.5) -> Check:
    usable = sorted(os.sched_getaffinity(0))
    busy = core_busy(sample_s)
    hot = {c: f for c, f in busy.items() if c in usable and f > 0.25}
    detail = f"{len(usable)} usable core(s) {usable}; busy now: " + ", ".join(
        f"{c}: {busy.get(c, 0):.0%}" for c in usable)
    if len(usable) < 2:
        return Check("free cores", WARN, detail + " -- one core: everything shares it",
                     "use a host with >= 4 cores for a faithful plan")
    if hot:
        return Check("free cores", WARN, detail + " -- other work is running",
                     "stop other workloads (top), or pick free cores with placement.cpus")
    return Check("free cores", OK, detail)


def check_leftovers(client=None) -> Check:
    """Runs in progress (their harness renews its lease) and what dead runs left behind."""
    from wotbench.runner.teardown.leftovers import find
    try:
        if client is None:
            raise ConnectionError("no Docker client")
        runs = find(client)
    except Exception:
        return Check("leftovers", OK, "Docker not reachable: nothing to check")
    live = [r for r in runs if r.live]
    dead = [r for r in runs if not r.live]
    p = len(leftover_processes(abandoned_only=True))
    also = (f"; in progress: {', '.join(r.run_id for r in live)} (they load the host too)"
            if live else "")
    if dead or p:
        n = sum(r.containers for r in dead)
        m = sum(r.networks for r in dead)
        return Check("leftovers", WARN, f"{n} container(s), {m} network(s), {p} process(es) left "
                     f"by runs whose harness is gone ({', '.join(r.run_id for r in dead)}); "
                     "a run removes them before it deploys" + also, "wotbench clean")
    if live:
        return Check("leftovers", WARN, "no leftovers" + also,
                     "wait for them, or run on other cores")
    return Check("leftovers", OK, "no leftovers of earlier runs")


def run_checks(docker: bool = True, quick: bool = False, client=None) -> list[Check]:
    """Every check; ``docker``: the run uses containers (Docker and cgroup checks); ``client``:
    a pinged Docker client to reuse (else one is made here, once)."""
    problem = None
    if client is None:
        client, problem = connect()
    checks = []
    if docker:
        checks.append(check_docker(client, problem))
    checks += check_binaries()
    checks.append(check_libcoap())
    checks.append(check_collectl())
    if docker:
        checks.append(check_cgroups())
        checks.append(check_neighbour_table())
        checks.append(check_scale_limits())
    if not quick:
        checks.append(check_netem())
    checks.append(check_cores(0.3 if quick else 0.5))
    checks.append(check_leftovers(client))
    return checks


def print_checks(checks: list[Check]) -> None:
    from rich.console import Console
    from rich.table import Table
    style = {OK: "green", WARN: "yellow", FAIL: "bold red"}
    t = Table(show_header=True, header_style="bold")
    for col in ("check", "status", "detail", "fix"):
        t.add_column(col, overflow="fold")
    for c in checks:
        t.add_row(c.name, f"[{style[c.status]}]{c.status}[/]", c.detail, c.fix)
    Console().print(t)


def main() -> int:
    checks = run_checks(docker=True)
    print_checks(checks)
    docker_ok = all(c.status != FAIL for c in checks if c.name == "docker")
    others_ok = all(c.status != FAIL for c in checks if c.name != "docker")
    if not others_ok:
        return 1
    if not docker_ok:
        print("Docker is not usable: runs need `backend: process` on this host")
        return 1
    return 0
