"""`make bench-faults`: faults done to running WoTbench runs, one row per fault (issue 20).

For each fault: what was done, what the run said (its first failure or verdict reason), its
exit code, what was left after it (containers, networks, processes of the run), and what data
it kept. Figures, not pass/fail: a reader judges the rows.

  --scale N [--repeats K]  also kill a run of N devices in pods 15 s into its test, then time
                           `wotbench clean` (K times; issue 20: 1000 devices, <= 30 s, 0 networks)
  --restart-daemon         also restart the Docker daemon mid-run: every container on this host
                           stops. Opt-in only, and said so before it happens. With a second
                           daemon for the purpose: DOCKER_HOST=unix://SOCK WOTBENCH_DOCKERD_PID=PID
  --smoke                  one fault (the GE killed) on a 6 s run: proves the bench runs
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from testkit import faults  # noqa: E402
from testkit import hostlock  # noqa: E402
from testkit.bench import SMOKE_BANNER, SMOKE_HELP  # noqa: E402
from testkit.harness import WOTBENCH, Harness  # noqa: E402
from testkit.tmpfs import NoTmpfs, small_tmpfs  # noqa: E402

CONFIG = REPO / "tests" / "e2e" / "configs" / "faults.yaml"


@dataclass
class Row:
    fault: str
    done: str
    said: str
    exit_code: object
    leftovers: str
    kept: str


class Run(Harness):
    """``wotbench run`` in the background, its output collected."""

    def __init__(self, config: Path, out_root: Path):
        self.out_root = out_root
        super().__init__(["run", str(config), "--out-root", str(out_root)],
                         {**os.environ, "PYTHONUNBUFFERED": "1"}, REPO)

    def reach_test(self, seconds_in: float = 3.0) -> str:
        try:
            self.wait_for("T0 in", 300)
            self.wait_for("] test:", 120)
        except AssertionError:
            raise RuntimeError("the run never reached its test:\n" + "\n".join(self.lines[-20:]))
        time.sleep(seconds_in)
        return faults.run_id_from(self.lines)

    def finish(self, timeout: float = 300) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return -1

    def said(self) -> str:
        for key in ("error:", "FAILURE", "verdict:", "interrupted"):
            hit = [l for l in self.lines if key in l]
            if hit:
                return hit[0].replace("wotbench: ", "")[:150]
        return (self.lines[-1] if self.lines else "(nothing)")[:150]

    def run_dir(self) -> Path | None:
        dirs = [d for d in self.out_root.iterdir() if d.is_dir()] if self.out_root.exists() else []
        return dirs[0] if len(dirs) == 1 else None


def leftovers(run_id: str | None) -> str:
    if not run_id:
        return "?"
    from wotbench.runner.teardown.cleanup import leftover_processes
    procs = [p for p, r in leftover_processes() if r == run_id]
    return (f"{len(faults.containers_of(run_id))} containers, {len(faults.networks_of(run_id))} "
            f"networks, {len(procs)} processes")


def kept(run: Run) -> str:
    rd = run.run_dir()
    if rd is None:
        return "no run directory"
    k = faults.kept(rd)
    return k.words() + (f"; verdict {k.verdict}" if k.verdict else "")


def fault_row(name: str, done: str, act, config: Path = CONFIG, seconds_in: float = 3.0) -> Row:
    out = Path(tempfile.mkdtemp(prefix=f"wb-fault-{name}-"))
    run = Run(config, out)
    rid = run.reach_test(seconds_in)
    act(rid, run)
    code = run.finish()
    return Row(name, done, run.said(), code, leftovers(rid), kept(run))


def harness_killed() -> Row:
    out = Path(tempfile.mkdtemp(prefix="wb-fault-harness-"))
    run = Run(CONFIG, out)
    rid = run.reach_test()
    run.proc.send_signal(signal.SIGKILL)
    run.finish()
    stopped = faults.wait_none_running(rid, within_s=60)
    t = time.monotonic()
    clean = subprocess.run(WOTBENCH + ["clean"], cwd=REPO, capture_output=True, text=True,
                           timeout=300)
    took = time.monotonic() - t
    return Row("harness SIGKILLed", "kill -9 of `wotbench run` 3 s into the test",
               f"components stopped themselves after {stopped:.0f} s; `clean` took {took:.1f} s"
               if stopped is not None else "components still running after 60 s",
               clean.returncode, leftovers(rid), kept(run))


def disk_full() -> Row:
    try:
        with small_tmpfs(Path(tempfile.mkdtemp(prefix="wb-fault-disk-")), "4m") as mnt:
            return _fill_during_a_run(mnt)
    except NoTmpfs as e:
        return Row("disk full", "skipped", str(e), "-", "-", "-")


def _fill_during_a_run(mnt: Path) -> Row:
    run = Run(CONFIG, mnt)
    rid = run.reach_test(1.0)
    with open(mnt / "filler", "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass
    code = run.finish()
    return Row("disk full", "the run directory's tmpfs filled 1 s into the test",
               run.said(), code, leftovers(rid), kept(run))


def config_edited() -> Row:
    tmp = Path(tempfile.mkdtemp(prefix="wb-fault-cfg-"))
    cfg = tmp / "faults.yaml"
    shutil.copy(CONFIG, cfg)

    run = Run(cfg, Path(tempfile.mkdtemp(prefix="wb-fault-cfg-out-")))
    rid = run.reach_test()
    data = yaml.safe_load(cfg.read_text())           # the edit, while the test runs
    data["name"], data["duration_s"] = "edited", 5
    cfg.write_text(yaml.safe_dump(data))
    code = run.finish()
    rd = run.run_dir()
    rec = json.loads((rd / "run.json").read_text()) if rd else {}
    said = (f"ran as resolved: name {rec.get('name')!r}, test "
            f"{(rec.get('test') or {}).get('duration_s')} s; "
            + ("the edit is noted" if any("was edited" in w for w in rec.get("warnings", []))
               else "no note of the edit"))
    return Row("config edited", "name and duration_s changed in the file mid-test", said, code,
               leftovers(rid), kept(run))


def scale_clean(n: int, repeats: int) -> list[Row]:
    tmp = Path(tempfile.mkdtemp(prefix="wb-fault-scale-"))
    cfg = yaml.safe_load((REPO / "configs" / "scale-200.yaml").read_text())
    cfg["devices"][0]["count"], cfg["name"], cfg["duration_s"] = n, f"scale-{n}", 60
    cfg["report"] = {"enabled": False}
    path = tmp / "scale.yaml"
    path.write_text(yaml.safe_dump(cfg))
    rows = []
    for k in range(repeats):
        run = Run(path, tmp / f"r{k}")
        rid = run.reach_test(15.0)
        run.proc.send_signal(signal.SIGKILL)
        run.finish()
        # even repeats: clean at once (--force: the lease is still fresh, the components run);
        # odd ones: let the components stop themselves first, then a plain clean
        orphans = k % 2 == 1
        stopped = faults.wait_none_running(rid, within_s=90) if orphans else None
        t = time.monotonic()
        clean = subprocess.run(WOTBENCH + ["clean"] + ([] if orphans else ["--force"]),
                               cwd=REPO, capture_output=True, text=True, timeout=600)
        took = time.monotonic() - t
        how = ("components left to stop themselves, then `clean`" if orphans
               else "`clean --force` at once")
        said = (f"stopped themselves after {stopped:.0f} s; " if stopped is not None
                else ("still running after 90 s; " if orphans else "")) + f"`clean` took {took:.1f} s"
        rows.append(Row(f"{n}-device run killed ({k + 1}/{repeats})",
                        f"kill -9 of the harness 15 s into the test; {how}",
                        said, clean.returncode, leftovers(rid),
                        f"{len(faults.containers_of(rid))} containers left"))
    return rows


def daemon_restart() -> Row:
    print("bench-faults: restarting the Docker daemon now (--restart-daemon): every container "
          "on this host stops", flush=True)
    # the daemon DOCKER_HOST names when its pid is given (a second daemon for this test), else
    # the host's only dockerd
    given = os.environ.get("WOTBENCH_DOCKERD_PID")
    pids = subprocess.run(["pidof", "dockerd"], capture_output=True, text=True).stdout.split()
    if not given and len(pids) != 1:
        raise RuntimeError(f"{len(pids)} dockerd processes: set WOTBENCH_DOCKERD_PID to the one "
                           "DOCKER_HOST reaches")
    pid = int(given or pids[0])
    argv = [a.decode() for a in Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")]
    netns = subprocess.run(["ip", "netns", "identify", str(pid)], capture_output=True,
                           text=True).stdout.strip()
    if netns:   # a daemon in a network namespace of its own comes back in it
        argv = ["nsenter", f"--net=/var/run/netns/{netns}"] + argv

    def restart(rid, run):
        os.kill(pid, signal.SIGTERM)
        end = time.monotonic() + 60
        while os.path.exists(f"/proc/{pid}") and time.monotonic() < end:
            time.sleep(0.2)
        subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    return fault_row("dockerd restarted", "SIGTERM to dockerd 3 s into the test, then started "
                     "again with its command line", restart)


def print_rows(rows: list[Row]) -> None:
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\nfaults during a run (load average {load})")
    print("| fault | what was done | what the run said | exit | left after | data kept |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r.fault} | {r.done} | {r.said} | {r.exit_code} | {r.leftovers} | {r.kept} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--restart-daemon", action="store_true")
    ap.add_argument("--skip-short", action="store_true",
                    help="only the --scale and --restart-daemon rows")
    ap.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = ap.parse_args()
    rows: list[Row] = []
    if args.smoke:
        print(SMOKE_BANNER, flush=True)
        print_rows([smoke_fault()])
        return 0
    if not args.skip_short:
        rows += short_faults()
    if args.scale:   # a thousand busy devices: not beside anyone's timing measurement
        hostlock.hold()
        rows += scale_clean(args.scale, args.repeats)
    if args.restart_daemon:
        rows.append(daemon_restart())
    print_rows(rows)
    return 0


def short_faults() -> list[Row]:
    rows = [guarded("device container killed", lambda: fault_row(
                "device container killed", "`docker kill` of solo-1 3 s into the test",
                lambda rid, run: faults.kill_container(rid, "solo-1"))),
            guarded("pod device crashed", lambda: fault_row(
                "pod device crashed", "SIGKILL to pod-2's process in its pod",
                lambda rid, run: faults.kill_pod_device(rid, "pod-pod0", "pod-2"))),
            guarded("GE killed", lambda: fault_row(
                "GE killed", "`docker kill` of ge-0 3 s into the test",
                lambda rid, run: faults.kill_container(rid, "ge-0"))),
            guarded("harness SIGKILLed", harness_killed),
            guarded("disk full", disk_full),
            guarded("config edited", config_edited)]
    return rows


def smoke_fault() -> Row:
    """The GE killed 1 s into a 6 s test (a 1 s calibration): the short faults' code path."""
    cfg = yaml.safe_load(CONFIG.read_text())
    cfg["duration_s"], cfg["contention_detector"]["calibration_s"] = 6, 1
    path = Path(tempfile.mkdtemp(prefix="wb-fault-smoke-")) / "faults.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return guarded("GE killed", lambda: fault_row(
        "GE killed", "`docker kill` of ge-0 1 s into the test",
        lambda rid, run: faults.kill_container(rid, "ge-0"), path, seconds_in=1.0))


def guarded(fault: str, make) -> Row:
    """A row even when the fault could not be done (the reason in the row)."""
    try:
        return make()
    except Exception as e:  # noqa: BLE001 - a bench prints what happened
        return Row(fault, "could not be done", f"{e.__class__.__name__}: {str(e)[:200]}",
                   "-", "-", "-")


if __name__ == "__main__":
    sys.exit(main())
