"""The study's manifest keys (repeats, antagonist) and the antagonist watcher, with fake
launchers: no real antagonist, no Docker."""
from __future__ import annotations

import dataclasses
import json
import re
import struct
import threading
import time
from pathlib import Path

import pytest

from sweep_fakes import FakeRunner
from wotbench.deploy.plan import Plan
from wotbench.errors import ConfigError
from wotbench.monitor.quiet import QuietGate
from wotbench.runner.during.progress import MAGIC
from wotbench.validation.antagonist import (RECORD_NAME, AntagonistSpec, Launcher, Watcher,
                                            parse_antagonist, read_record, resolve_core,
                                            with_antagonist)
from wotbench.validation.scenarios import points, read_manifest
from wotbench.validation.study import run_study

NO_WAIT = QuietGate(wait=False)
PLAN = Plan(cores_total=2, usable_cores=[0, 1], os_cores=[], ge_cores={"ge-0": 0}, cd_ge_core=None,
            device_cores=[1], cd_node_cpuset=None, devices={"d0": "1"}, ge_wait="busy",
            affinity="pinned", faithful=True, warnings=[])


def _manifest(tmp_path: Path, scenario: str) -> Path:
    (tmp_path / "c.yaml").write_text("name: v\nduration_s: 30\nseed: 7\ndevices:\n"
                                     "  - group: cpu\n    count: 5\n")
    m = tmp_path / "scenarios.yaml"
    m.write_text("scenarios:\n" + scenario)
    return m


@pytest.mark.parametrize("scenario, message", [
    ("  - {name: V-a, config: c.yaml, expect: episodes, antagonist: {kind: fork-bomb, core: 1, "
     "start_s: 5, duration_s: 5}}\n",
     "scenario V-a: antagonist.kind: must be busy-loop, duty-loop, container-hog, second-run, got 'fork-bomb'"),
    ("  - {name: V-b, config: c.yaml, expect: episodes, antagonist: {kind: busy-loop, core: gpu, "
     "start_s: 5, duration_s: 5}}\n",
     "scenario V-b: antagonist.core: must be device, ge, all or a core number >= 0, got 'gpu'"),
    ("  - {name: V-c, config: c.yaml, expect: episodes, antagonist: {kind: busy-loop, core: -1, "
     "start_s: 5, duration_s: 5}}\n", "scenario V-c: antagonist.core"),
    ("  - {name: V-d, config: c.yaml, expect: episodes, antagonist: {kind: busy-loop, core: 1, "
     "start_s: 5}}\n", "scenario V-d: antagonist.duration_s: expected a number"),
    ("  - {name: V-e, config: c.yaml, expect: episodes, antagonist: {kind: second-run, "
     "start_s: 5, duration_s: 20}}\n", "scenario V-e: antagonist.config: a second-run needs"),
    ("  - {name: V-f, config: c.yaml, expect: clean, antagonist: {kind: busy-loop, core: 1, "
     "start_s: 5, duration_s: 5}}\n", "scenario V-f: an antagonist needs expect: episodes"),
    ("  - {name: V-g, config: c.yaml, expect: clean, repeats: 0}\n",
     "scenario V-g: repeats must be an integer 1..50, got 0"),
    ("  - {name: V-h, config: c.yaml, expect: clean, repeat: 3}\n",
     "scenario V-h: unknown key(s) repeat"),
    ("  - {name: V-i, config: c.yaml, expect: episodes, antagonist: [busy-loop]}\n",
     "scenario V-i: antagonist: expected a mapping"),
])
def test_bad_antagonist_or_repeats_names_the_file_and_the_scenario(tmp_path, scenario, message):
    m = _manifest(tmp_path, scenario)
    with pytest.raises(ValueError, match=re.escape(f"{m}: {message}")):
        read_manifest(m)


def test_an_antagonist_outside_the_test_stops_the_study_before_any_run(tmp_path):
    m = _manifest(tmp_path, "  - {name: V-late, config: c.yaml, expect: episodes, antagonist: "
                            "{kind: busy-loop, core: device, start_s: 25, duration_s: 10}}\n")
    runner = FakeRunner()
    with pytest.raises(ConfigError, match=re.escape(
            f"{m.resolve()}: scenario V-late: antagonist: start_s + duration_s = 35 s ends after "
            "the 30 s test")):
        run_study(m, out_root=tmp_path / "r", gate=NO_WAIT, run_fn=runner, log=lambda s: None)
    assert runner.calls == [] and not list((tmp_path / "r").glob("*"))


def test_repeats_make_points_with_distinct_seeds_per_value():
    assert points({"repeats": 2}, base_seed=7) == [{"seed": 7}, {"seed": 8}]
    assert points({}, 1) == [{"seed": 1}, {"seed": 2}, {"seed": 3}]
    sc = {"repeats": 2, "vary": {"key": "devices[0].count", "values": [5, 10]}}
    assert points(sc, 3) == [{"devices[0].count": 5, "seed": 3}, {"devices[0].count": 5, "seed": 4},
                             {"devices[0].count": 10, "seed": 3}, {"devices[0].count": 10, "seed": 4}]


def test_parse_and_resolve_cores():
    s = parse_antagonist({"kind": "busy-loop", "core": "ge", "start_s": 0, "duration_s": 1})
    assert s == AntagonistSpec("busy-loop", "ge", 0.0, 1.0)
    assert resolve_core("device", PLAN) == 1 and resolve_core("ge", PLAN) == 0
    assert resolve_core(0, PLAN) == 0
    with pytest.raises(ValueError, match=r"core 3 is not one of the run's usable cores \[0, 1\]"):
        resolve_core(3, PLAN)


# --------------------------------------------------------------------------- the watcher

class FakeLauncher(Launcher):
    """Records what it was asked; 'runs' until stopped or its duration passed."""

    def __init__(self, spec, rec=None, work=None):
        super().__init__(spec, rec, work)
        self.started_at = None
        self.stopped = 0

    def start(self, at_ns, core):
        self.started_at, self.core = at_ns, core
        self.rec.started, self.rec.start_mono_ns = True, time.monotonic_ns()
        self.rec.pid, self.rec.comm, self.rec.owner_kind = 4242, "sh", "host"

    def wait(self, stop):
        end = time.monotonic() + self.spec.duration_s
        while time.monotonic() < end and not stop.wait(0.01):
            pass
        self.rec.ended_by = "stopped" if stop.is_set() else "itself"
        self.rec.end_mono_ns = time.monotonic_ns()

    def stop(self):
        self.stopped += 1


def _write_whole(path: Path, data: bytes) -> None:
    """Written under another name, then renamed, as the runner writes its files: the watcher
    polls every 10 ms and must never read a half-written plan.json or progress.bin."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def _progress(path: Path, sent: int) -> None:
    _write_whole(path, struct.pack("<8Q", MAGIC, 100, sent, 0, 0, 0, 0, 2))


def _watcher(tmp_path, spec, wait_test_s=5.0):
    fake = FakeLauncher(spec)
    w = Watcher(spec, tmp_path / "runs" / "p000", manifest_dir=tmp_path,
                second_root=tmp_path / "second", log=lambda s: None, wait_test_s=wait_test_s,
                poll_s=0.01, launcher=fake)
    return w, fake


def test_without_progress_the_antagonist_never_starts_and_the_point_says_why(tmp_path):
    spec = AntagonistSpec("busy-loop", "device", 0.0, 1.0)
    (tmp_path / "runs" / "p000").mkdir(parents=True)
    w, fake = _watcher(tmp_path, spec, wait_test_s=0.2)
    rd = tmp_path / "runs" / "p000" / "v-20261124T000000Z"    # the run's dir, after the watcher
    rd.mkdir()
    _write_whole(rd / "plan.json", PLAN.to_json().encode())
    w.seen(rd)   # (as the run tells it: on_run_dir)
    w.start()
    w.thread.join(5)
    rec = w.stop()
    assert fake.started_at is None and rec.started is False
    assert "the test start was not seen within 0.2 s" in rec.why_not and "progress.bin" in rec.why_not
    assert json.loads((rd / RECORD_NAME).read_text())["why_not"] == rec.why_not
    assert read_record(rd / RECORD_NAME) == rec      # the readers get back what was written


def test_a_bad_antagonist_record_names_the_file_and_the_key(tmp_path):
    f = tmp_path / RECORD_NAME
    f.write_text(json.dumps({"kind": "busy-loop", "asked": {}, "started": True,
                             "start_mono_ns": "soon", "pids": [1]}))
    with pytest.raises(ValueError) as e:
        read_record(f)
    assert str(f) in str(e.value) and "start_mono_ns: must be an integer" in str(e.value)
    assert "pids: unknown key, did you mean 'pid'?" in str(e.value)


def test_bad_asked_and_second_run_keys_are_named(tmp_path):
    f = tmp_path / RECORD_NAME
    f.write_text(json.dumps({
        "kind": "second-run", "asked": {"kind": "second-run", "start_s": 5},
        "second_run": {"out_root": "o", "argv": ["wotbench"], "exit_code": "soon",
                       "test": {"start_mono_ns": 1}, "pid": 3}}))
    with pytest.raises(ValueError) as e:
        read_record(f)
    for key in ("asked.duration_s: required key missing", "second_run.exit_code: must be an "
                "integer", "second_run.test.duration_s: required key missing",
                "second_run.pid: unknown key"):
        assert key in str(e.value), (key, str(e.value))


def test_a_second_run_record_holds_only_the_keys_its_writer_set(tmp_path):
    """As the watcher writes it: out_root and argv at the start, exit_code when the process
    ended, the run.json facts once read (null ones too); nothing it did not learn."""
    from wotbench.rundir.record import Phases
    from wotbench.validation.antagonist import AntagonistRecord, AskedRecord, SecondRunRecord
    spec = AntagonistSpec("second-run", None, 5.0, 20.0, config="c.yaml")
    rec = AntagonistRecord(kind="second-run", asked=AskedRecord(**dataclasses.asdict(spec)))
    rec.second_run = SecondRunRecord(out_root="o", argv=["wotbench", "run"])
    assert rec.to_json()["second_run"] == {"out_root": "o", "argv": ["wotbench", "run"]}
    sr = rec.second_run
    sr.exit_code = 0
    sr.run_dir, sr.run_id, sr.t0_mono_ns, sr.test, sr.phases = "o/r", "r", None, None, Phases()
    out = rec.to_json()
    assert out["second_run"] == {"out_root": "o", "argv": ["wotbench", "run"], "exit_code": 0,
                                 "run_dir": "o/r", "run_id": "r", "t0_mono_ns": None,
                                 "test": None, "phases": Phases().model_dump(mode="json")}
    assert out["asked"] == dataclasses.asdict(spec)
    f = tmp_path / RECORD_NAME
    f.write_text(json.dumps(out))
    assert read_record(f).to_json() == out


def test_without_a_run_dir_the_record_lands_in_the_points_out_root(tmp_path):
    w, fake = _watcher(tmp_path, AntagonistSpec("busy-loop", 1, 0.0, 1.0), wait_test_s=0.2)
    w.start()
    w.thread.join(5)
    rec = w.stop()
    assert "no run directory with plan.json" in rec.why_not
    assert (tmp_path / "runs" / "p000" / RECORD_NAME).is_file()


def test_the_antagonist_starts_start_s_after_the_test_start_on_the_resolved_core(tmp_path):
    spec = AntagonistSpec("busy-loop", "device", 0.2, 5.0)
    out = tmp_path / "runs" / "p000"
    out.mkdir(parents=True)
    w, fake = _watcher(tmp_path, spec, wait_test_s=20)
    w.start()
    rd = out / "v-20261124T000000Z"
    rd.mkdir()
    w.seen(rd)   # (as the run tells it: on_run_dir, before plan.json is written)
    _write_whole(rd / "plan.json", PLAN.to_json().encode())
    time.sleep(0.1)
    _progress(rd / "ge" / "ge-0" / "progress.bin", 0)     # loading: not yet
    time.sleep(0.1)
    assert fake.started_at is None
    _progress(rd / "ge" / "ge-0" / "progress.bin", 3)
    for _ in range(1000):                                # at most 10 s on a loaded host
        if fake.started_at:
            break
        time.sleep(0.01)
    assert fake.started_at is not None
    rec = w.stop()                                       # the run ended first: stopped
    assert fake.core == 1 and rec.core == 1
    assert fake.started_at - rec.test_start_seen_mono_ns == 200_000_000
    assert rec.start_mono_ns >= fake.started_at and rec.ended_by == "stopped"
    assert fake.stopped >= 1
    saved = json.loads((rd / RECORD_NAME).read_text())
    assert saved["pid"] == 4242 and saved["started"] is True


def test_the_wrapper_ends_the_antagonist_when_the_run_raises(tmp_path):
    spec = AntagonistSpec("busy-loop", "device", 0.0, 30.0)
    fakes = []
    started = threading.Event()

    def make_watcher(*a, **kw):
        w = Watcher(*a, **kw, launcher=FakeLauncher(spec))
        fakes.append(w)
        return w

    def run_fn(config, out_root, backend=None, on_run_dir=None):
        rd = Path(out_root) / "v-20261124T000000Z"
        rd.mkdir(parents=True)
        on_run_dir(rd)
        _write_whole(rd / "plan.json", PLAN.to_json().encode())
        _progress(rd / "ge" / "ge-0" / "progress.bin", 1)
        for _ in range(300):
            if fakes and fakes[0].launcher.started_at:
                started.set()
                break
            time.sleep(0.01)
        raise KeyboardInterrupt

    import wotbench.validation.antagonist as mod
    orig = mod.Watcher
    mod.Watcher = make_watcher
    try:
        fn = with_antagonist(run_fn, spec, manifest_dir=tmp_path, second_root=tmp_path / "s",
                             log=lambda s: None, wait_test_s=5)
        t = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            fn("c.yaml", str(tmp_path / "runs" / "p000"))
    finally:
        mod.Watcher = orig
    assert started.is_set() and time.monotonic() - t < 10
    rec = fakes[0].rec
    assert rec.ended_by == "stopped" and not fakes[0].thread.is_alive()


def test_a_study_point_without_test_start_is_not_graded_and_says_why(tmp_path, monkeypatch):
    """A fake run that never writes progress.bin: the antagonist never starts, the scenario
    fails with the reason in results.json and the table."""
    m = _manifest(tmp_path, "  - {name: V-loop, config: c.yaml, expect: episodes, repeats: 1, "
                            "antagonist: {kind: busy-loop, core: device, start_s: 1, "
                            "duration_s: 5}}\n")

    class Never(Launcher):
        def start(self, at_ns, core):           # pragma: no cover - must not be reached
            raise AssertionError("started")

    import wotbench.validation.antagonist as mod
    monkeypatch.setattr(mod, "BusyLoop", Never)
    fake = FakeRunner()

    def slow_run(*a, **kw):        # the run dir is there, its GE never reports a send
        code = fake(*a, **kw)
        time.sleep(0.4)            # twice the wait for the test start
        return code
    rc = run_study(m, out_root=tmp_path / "r", gate=NO_WAIT, run_fn=slow_run,
                   log=lambda s: None, antagonist_opts={"wait_test_s": 0.2, "grace_s": 0})
    [d] = (tmp_path / "r").iterdir()
    [entry] = json.loads((d / "results.json").read_text())["scenarios"]
    assert rc == 3 and not entry["passed"]
    [bad] = entry["invalid"]
    assert "never started: the test start was not seen within 0.2 s" in bad["why"]
    assert "p000 not graded" in (d / "table.md").read_text()
