"""Backends: probe, auto choice, clear failures here, apply/remove through a fake command runner,
one real namespace test of the generic qdisc removal (tbf + ifb ingress; tbf exists on this kernel),
and the tc image build context."""
import os
import shutil
import subprocess
import uuid

import pytest

from wotbench.netimpair import (DeviceTarget, ImpairmentError, NetemBackend, PumbaBackend, probe_netem,
                                resolve_impairments, select_backend)
from wotbench.netimpair.cmdrun import Result, SubprocessRunner
from wotbench.netimpair.probe import probe_ifb
from wotbench.netimpair.tc import NetnsRef, apply_commands, leftover_qdiscs, remove_all
from wotbench.netimpair import tcimage

IS_ROOT = os.geteuid() == 0 and shutil.which("ip") and shutil.which("tc")


class FakeRunner:
    """Records every argv; answers from a list of (substring, Result fields) rules, else rc 0."""

    def __init__(self, rules=()):
        self.calls, self.rules = [], list(rules)

    def run(self, argv, timeout=30.0):
        line = " ".join(argv)
        self.calls.append(line)
        for sub, rc, err in self.rules:
            if sub in line:
                return Result(tuple(argv), rc, "", err)
        return Result(tuple(argv), 0, "", "")


def plan_of(network, count=1):
    return resolve_impairments([{"group": "d", "count": count, "network": network}])


# -- probe and selection -----------------------------------------------------------------

def test_probe_with_fake_runner_cleans_its_namespace_on_every_path():
    r = FakeRunner([("netem delay 1ms", 2, "Error: Specified qdisc kind is unknown.")])
    assert probe_netem(r) == (False, "this kernel has no sch_netem (tc: qdisc kind is unknown)")
    ns = r.calls[0].split()[-1]
    assert r.calls == [f"ip netns add {ns}",
                       f"ip netns exec {ns} tc qdisc add dev lo root netem delay 1ms",
                       f"ip netns del {ns}"]
    assert ns == f"wotbench-probe-netem-{os.getpid()}"
    ok = FakeRunner()
    assert probe_netem(ok)[0] is True and ok.calls[-1].startswith("ip netns del")


@pytest.mark.skipif(not IS_ROOT, reason="the netem probe needs root and iproute2")
def test_real_probe_reports_and_leaves_no_namespace():
    ok, reason = probe_netem(refresh=True)
    assert isinstance(ok, bool) and reason
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert "wotbench-probe" not in left
    if not ok:
        assert reason.startswith(("this kernel has no sch_netem", "not allowed", "tc netem failed",
                                  "cannot create a network namespace")), reason


def test_real_netem_apply_or_skip():
    ok, reason = probe_netem()
    if not ok:
        pytest.skip(f"netem backend: {reason}")
    # A kernel with netem: install and remove for real in a throw-away namespace.
    ns = f"wotbench-test-{uuid.uuid4().hex[:8]}"
    run = SubprocessRunner()
    assert run.run(["ip", "netns", "add", ns]).ok
    try:
        run.run(["ip", "netns", "exec", ns, "ip", "link", "add", "eth0", "type", "veth", "peer", "name", "p0"])
        run.run(["ip", "netns", "exec", ns, "ip", "link", "set", "eth0", "up"])
        b = NetemBackend(plan_of({"delay": {"time_ms": 5, "jitter_ms": 1}, "loss": {"percent": 1}}), run)
        b.apply([DeviceTarget("d-0", netns=ns)], 10)
        assert b.remove()["removed"] is True
    finally:
        run.run(["ip", "netns", "del", ns])


def test_auto_picks_the_first_backend_that_works_and_says_why():
    plan = plan_of({"delay": {"time_ms": 20}, "loss": {"percent": 2}})
    opts = {"pumba": {"which": lambda _: None}, "netem": {"probe": lambda: (False, "this kernel has no sch_netem (tc: qdisc kind is unknown)")}}
    b, reasons = select_backend("auto", plan, options=opts)
    assert b.name == "app"
    assert reasons[0].startswith("pumba backend: no `pumba` binary on PATH")
    assert reasons[1] == ("netem backend: this kernel has no sch_netem (tc: qdisc kind is unknown); "
                          "use network.backend: app or load the sch_netem module (modprobe sch_netem)")
    # pumba installed and netem present, but delay + loss cannot be combined by Pumba -> netem
    ok = lambda: (True, "tc netem works")
    opts = {"pumba": {"which": lambda n: "/usr/bin/pumba", "probe": ok}, "netem": {"probe": ok, "ifb_probe": ok}}
    b, reasons = select_backend("auto", plan, options=opts)
    assert b.name == "netem" and "Exclusivity flag on" in reasons[0]
    b, _ = select_backend("auto", plan_of({"delay": {"time_ms": 20}}), options=opts)
    assert b.name == "pumba"


def test_auto_on_this_machine():
    ok, reason = probe_netem()
    b, reasons = select_backend("auto", plan_of({"loss": {"percent": 2}}))
    if shutil.which("pumba") is None and not ok:
        assert b.name == "app", reasons
    else:
        assert b.name in ("pumba", "netem")


def test_explicit_backends_fail_clearly_here():
    ok, reason = probe_netem()
    if ok:
        pytest.skip("this kernel has sch_netem; the failure message is not reachable here")
    plan = plan_of({"loss": {"percent": 2}})
    with pytest.raises(ImpairmentError) as e:
        select_backend("netem", plan)
    assert str(e.value) == ("netem backend: this kernel has no sch_netem (tc: qdisc kind is unknown); "
                            "use network.backend: app or load the sch_netem module (modprobe sch_netem)")
    with pytest.raises(ImpairmentError) as e:
        NetemBackend(plan).apply([DeviceTarget("d-0", pid=1)], 10)
    assert "no sch_netem" in str(e.value)
    with pytest.raises(ImpairmentError) as e:
        select_backend("pumba", plan, options={"pumba": {"which": lambda n: "/usr/bin/pumba"}})
    assert str(e.value).startswith("pumba backend: Pumba drives tc netem, and this kernel has no sch_netem")


def test_netem_ingress_needs_ifb():
    b = NetemBackend(plan_of({"delay": {"time_ms": 5}, "direction": "ingress"}), FakeRunner(),
                     probe=lambda: (True, ""), ifb_probe=lambda: (False, "no ifb here"))
    assert b.check() == ["devices[0].network.direction: no ifb here"]


# -- apply / remove through a fake runner --------------------------------------------------

ABSENT = [("del dev eth0 root", 2, "Error: Cannot delete qdisc with handle of zero."),
          ("del dev eth0 ingress", 2, "Error: Invalid handle."),
          ("link del wbifb0", 1, 'Cannot find device "wbifb0"'),
          ("ip link show wbifb0", 1, 'Device "wbifb0" does not exist.')]


def fake_netem(network, rules=()):
    r = FakeRunner(list(rules) + ABSENT)
    b = NetemBackend(plan_of(network, count=2), r, probe=lambda: (True, "ok"), ifb_probe=lambda: (True, "ok"))
    return b, r


def test_netem_apply_issues_tc_per_device_and_records_it():
    b, r = fake_netem({"delay": {"time_ms": 20, "jitter_ms": 2}, "loss": {"percent": 1}, "direction": "both"})
    rec = b.apply([DeviceTarget("d-0", netns="n0"), DeviceTarget("d-1", netns="n1")], 60)
    assert r.calls[0] == "ip netns exec n0 tc qdisc add dev eth0 root netem delay 20ms 2ms loss random 1%"
    assert r.calls[-1] == "ip netns exec n1 tc qdisc add dev wbifb0 root netem delay 20ms 2ms loss random 1%"
    assert len(r.calls) == 12
    assert rec["devices"]["d-1"]["applied"] == r.calls[6:]
    assert rec["devices"]["d-0"]["describe"] == "delay 20ms ±2ms uniform, loss 1%; both"


def test_netem_remove_is_idempotent_and_issues_the_deletes():
    b, r = fake_netem({"rate": "250kbit"})
    b.apply([DeviceTarget("d-0", netns="n0"), DeviceTarget("d-1", netns="n1")], 60)
    r.calls.clear()
    first = b.remove()
    deletes = [c for c in r.calls if " del" in c]
    assert deletes == ["ip netns exec n0 tc qdisc del dev eth0 root",
                       "ip netns exec n0 tc qdisc del dev eth0 ingress",
                       "ip netns exec n0 ip link del wbifb0",
                       "ip netns exec n1 tc qdisc del dev eth0 root",
                       "ip netns exec n1 tc qdisc del dev eth0 ingress",
                       "ip netns exec n1 ip link del wbifb0"]
    second = b.remove()
    assert first["removed"] is second["removed"] is True
    assert [c for c in r.calls if " del" in c] == deletes * 2


def test_netem_failure_midway_removes_what_was_done_and_says_what_failed():
    b, r = fake_netem({"delay": {"time_ms": 20}}, rules=[("exec n1 tc qdisc add", 2, "Error: Specified qdisc kind is unknown.")])
    with pytest.raises(ImpairmentError) as e:
        b.apply([DeviceTarget("d-0", netns="n0"), DeviceTarget("d-1", netns="n1")], 60)
    assert str(e.value) == ("netem backend: ip netns exec n1 tc qdisc add dev eth0 root netem delay 20ms failed "
                            "for d-1: Error: Specified qdisc kind is unknown.")
    assert "ip netns exec n0 tc qdisc del dev eth0 root" in r.calls
    assert "ip netns exec n1 tc qdisc del dev eth0 root" in r.calls
    assert b.removed is True


def test_remove_reports_real_errors_and_skips_dead_containers():
    r = FakeRunner([("del dev eth0 root", 2, "Error: Operation not permitted.")] + ABSENT)
    res = remove_all(r, NetnsRef(name="n0"), "eth0")
    assert res["errors"] == ["ip netns exec n0 tc qdisc del dev eth0 root: Error: Operation not permitted."]
    gone = remove_all(FakeRunner(), NetnsRef(pid=2 ** 22 + 12345, ns_inode=1), "eth0")
    assert gone["commands"] == [] and "process gone" in gone["skipped"]


def test_missing_target_is_an_error():
    b, _ = fake_netem({"rate": "1mbit"})
    with pytest.raises(ImpairmentError, match="no running container given for impaired device"):
        b.apply([DeviceTarget("d-0", netns="n0")], 10)


# -- pumba processes (fake Popen) -----------------------------------------------------------

class FakeProc:
    def __init__(self, argv, **kw):
        self.argv, self.pid, self.returncode, self.signals = argv, 99999999, None, []

    def poll(self):
        return self.returncode

    def terminate(self):
        self.returncode = 0

    def wait(self, timeout=None):
        self.returncode = 0 if self.returncode is None else self.returncode
        return self.returncode


def test_pumba_apply_starts_one_process_per_device_and_remove_stops_them(tmp_path):
    started = []

    def popen(argv, **kw):
        p = FakeProc(argv, **kw)
        started.append(p)
        return p

    plan = plan_of({"loss": {"percent": 2}}, count=2)
    b = PumbaBackend(plan, FakeRunner(ABSENT), which=lambda n: "/usr/bin/pumba", probe=lambda: (True, "ok"),
                     image_builder=lambda: "wotbench-tc:feed", popen=popen, log_dir=str(tmp_path), settle_s=0.2)
    rec = b.apply([DeviceTarget("d-0", container="c0"), DeviceTarget("d-1", container="c1")], 60)
    assert [" ".join(p.argv) for p in started] == [
        "pumba --log-level info netem --duration 90s --interface eth0 --tc-image wotbench-tc:feed "
        f"--pull-image=false loss --percent 2 --correlation 0 c{i}" for i in (0, 1)]
    assert rec["devices"]["d-0"]["tc_image"] == "wotbench-tc:feed"
    res = b.remove()
    assert [p["exit"] for p in res["processes"]] == [0, 0]
    assert b.remove()["processes"] == []   # idempotent


def test_pumba_process_dying_at_start_is_reported(tmp_path):
    def popen(argv, stdout=None, **kw):
        stdout.write(b"level=fatal msg=\"failed to pull image\"\n")
        p = FakeProc(argv)
        p.returncode = 1
        return p

    b = PumbaBackend(plan_of({"rate": "1mbit"}), FakeRunner(ABSENT), which=lambda n: "/x/pumba",
                     probe=lambda: (True, "ok"), image_builder=lambda: "img", popen=popen,
                     log_dir=str(tmp_path), settle_s=1)
    with pytest.raises(ImpairmentError, match=r"pumba rate for d-0 exited with 1 right after start: .*failed to pull"):
        b.apply([DeviceTarget("d-0", container="c0")], 5)


# -- real namespace: generic removal leaves nothing (tbf stands in for netem) -------------

@pytest.mark.skipif(not IS_ROOT, reason="needs root, ip and tc to create a network namespace")
def test_real_generic_removal_of_egress_and_ifb_ingress_qdiscs():
    ok, why = probe_ifb()
    if not ok:
        pytest.skip(why)
    run = SubprocessRunner()
    ns = f"wotbench-test-{uuid.uuid4().hex[:8]}"
    assert run.run(["ip", "netns", "add", ns]).ok
    try:
        ref = NetnsRef(name=ns)
        for argv in (["ip", "link", "add", "eth0", "type", "veth", "peer", "name", "wbpeer0"],
                     ["ip", "link", "set", "eth0", "up"]):
            r = run.run(ref.prefix() + argv)
            assert r.ok, r.text()
        tbf = ["tbf", "rate", "1mbit", "burst", "10k", "latency", "50ms"]
        for argv in apply_commands(ref, "eth0", "both", tbf):
            r = run.run(argv)
            assert r.ok, f"{' '.join(argv)}: {r.text()}"
        assert len(leftover_qdiscs(run, ref, "eth0")) == 3   # tbf root, ingress, the ifb
        first = remove_all(run, ref, "eth0")
        assert first["errors"] == []
        assert leftover_qdiscs(run, ref, "eth0") == []
        second = remove_all(run, ref, "eth0")                # idempotent: nothing left to delete
        assert second["errors"] == [] and leftover_qdiscs(run, ref, "eth0") == []
    finally:
        run.run(["ip", "netns", "del", ns])
    assert ns not in run.run(["ip", "netns", "list"]).stdout


# -- tc image build context ----------------------------------------------------------------

LDD_TC = """\
\tlinux-vdso.so.1 (0x00007ffd)
\tlibmnl.so.0 => /lib/x86_64-linux-gnu/libmnl.so.0 (0x00007f01)
\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f02)
\t/lib64/ld-linux-x86-64.so.2 (0x00007f03)
"""


def test_tc_image_files_and_dockerfile(tmp_path):
    files = tcimage.collect_files(
        which={"tc": "/usr/sbin/tc", "tail": "/usr/bin/tail"}.get,
        ldd=lambda p: LDD_TC if p.endswith("tc") else "\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x1)\n",
        dist_globs=())
    assert list(files) == ["/lib/x86_64-linux-gnu/libc.so.6", "/lib/x86_64-linux-gnu/libmnl.so.0",
                           "/lib64/ld-linux-x86-64.so.2", "/usr/bin/tail", "/usr/sbin/tc"]
    assert tcimage.dockerfile(files) == (
        "# wotbench tc sidecar image (generated by wotbench.netimpair.tcimage)\n"
        "FROM scratch\n"
        "COPY rootfs/ /\n"
        "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"
        "ENV LD_LIBRARY_PATH=/lib/x86_64-linux-gnu:/lib64\n"
        'LABEL org.wotbench.role="tc-sidecar"\n'
        'ENTRYPOINT ["/usr/sbin/tc"]\n')
    with pytest.raises(RuntimeError, match="tc image: tc is not installed on this host"):
        tcimage.collect_files(which=lambda n: None)


def test_tc_image_context_tar_from_real_host_files(tmp_path):
    if not shutil.which("tc") or not shutil.which("ldd"):
        pytest.skip("tc or ldd is not installed")
    files = tcimage.collect_files()
    tar, digest = tcimage.build_context(files)
    names = tcimage.context_names(tar)
    assert names[0] == "Dockerfile"
    assert "rootfs" + shutil.which("tc") in names or "rootfs/usr/sbin/tc" in names
    assert any(n.endswith("normal.dist") for n in names), "distribution tables missing"
    assert any("ld-linux" in n for n in names)
    assert tcimage.build_context(files)[1] == digest          # same host -> same tag
