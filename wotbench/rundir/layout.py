"""Where every file of a run directory lives (docs/CONTRACTS.md §4): one place, so no other
module spells a run-directory path.

    rd = RunDir("reports/20dev-20261123T053000Z")
    rd.run_json, rd.summary_json, rd.ge_dir("ge-0"), rd.device_log("cpu-3"), rd.series("rd_over_time")
    rd.read_run() -> RunRecord      rd.write_run(record)
    rd.read_summary() -> Summary    rd.write_summary(summary)
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from wotbench.rundir import atomic

if TYPE_CHECKING:
    from wotbench.rundir.record import RunRecord
    from wotbench.rundir.summary import Summary

CD_GE_DIR = "cd-ge"
CONTAINER_LOG = "container.log"   # a container's own output, saved for a failed component
STDOUT_LOG = "stdout.log"         # a local process's stdout + stderr (process backend)
STDERR_LOG = "stderr.log"         # a connected run's engine's or wot-rpcapp's stderr


# a trace directory (RUN/trace/, or `wotbench generate --out`; docs/CONTRACTS.md §1)
TRACE_CSV = "trace.csv"               # every request (with several GEs: ge_trace_name's)
CD_TRACE_CSV = "cd-trace.csv"         # the contention detector's probes
RESOURCES_DIR = "resources"           # one <device>.csv per device


def ge_trace_name(ge_index: int, ge_count: int) -> str:
    """The trace a main GE replays: trace.csv with one GE, ge-<k>.csv with several."""
    return TRACE_CSV if ge_count == 1 else f"ge-{ge_index}.csv"


PUSH_SCHEDULE = "push-schedule.csv"   # in the device's log dir: it reads it there
FLEET_DEVICES_IN = "devices.csv"      # in a fleet's directory: the engine's --devices file

FLEET_LOG_GLOB = "fleet-log-*.csv"     # in a fleet's directory: one log per event loop

# a gateway emulator's files in its output directory (ge/<id>/, cd-ge/, phases/<phase>/ge/;
# docs/CONTRACTS.md §2), for the readers that are given the directory alone
GE_SUMMARY = "summary.json"           # its own summary (model rundir.ge_files.GeSummary)
GE_REQUESTS = "requests.csv"
GE_BLOCKWISE = "blockwise.csv"
GE_HANDSHAKES = "handshakes.csv"
GE_HTTP = "http.csv"
GE_NOTIFICATIONS = "notifications.csv"
GE_OBSERVE = "observe.json"
GE_BODY_TEMPLATE = "http-body-template.txt"   # written by the runner: the GE's request bodies
NOTIFY_LOG = "notify-log.csv"         # in a device's log dir: its observable resources' events

# the notification sink's files (RUN/sink/, CONTRACTS §2 notify-sink)
SINK_JSON = "sink.json"               # model rundir.sink_files.SinkSummary
SINK_NOTIFICATIONS = "notifications.csv"

# a connected run's component files (CONTRACTS §3c, §3d): in an engine's output directory
# (engines/<engine>/out/) and in the applications' (apps/); models rundir.connected_files
CONN_SUMMARY = "conn-summary.json"
CONN_DEVICES = "conn-devices.csv"
CONN_LOG_GLOB = "conn-log-*.csv"      # one per event loop
EVENTS_LOG_GLOB = "events-log-*.csv"  # one per event loop: the devices' upstream events
RPC_SUMMARY = "rpc-summary.json"
RPC_LOG = "rpc-log.csv"
CONNECTED_SCHED = "connected-sched.csv"   # in monitor/: the components' run-queue samples
CONN_ATTACHED = "attached"            # in an engine's output directory: every device attached once
EDGE_STDERR = "edge-stderr.log"       # in the edge server's directory (RunDir.edge_dir)

# the trace directory's things/ (wotbench.things.files)
THINGS_DIR = "things"
THINGS_AFFORDANCES_CSV = "affordances.csv"
THINGS_TDS_JSONL = "tds.jsonl"
# an HTTP Thing's event emissions, in its device directory (wotbench.things.sse_events)
SSE_EVENTS_CSV = "sse-events.csv"

# the validation study (wotbench.validation): the antagonist it started, in the run directory
# (or the run's out root when none appeared), and a second run's output in its out root
STUDY_ANTAGONIST_JSON = "study-antagonist.json"
SECOND_RUN_LOG = "second-run.log"
STUDY_SCENARIOS_DIR = "scenarios"       # in a study's directory: one sweep directory each
STUDY_SECOND_RUNS_DIR = "second-runs"   # in a study's directory: the second runs' out roots


class RunDir:
    """The layout of one run directory. Paths only; :meth:`read_run` / :meth:`read_summary`
    decode the two JSON contracts through their models (ValueError on a bad file)."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    # -- inputs written before the run ------------------------------------------------
    @property
    def config_resolved(self) -> Path:
        return self.path / "config.resolved.yaml"

    @property
    def plan_json(self) -> Path:
        return self.path / "plan.json"

    @property
    def trace_dir(self) -> Path:
        return self.path / "trace"

    @property
    def resources_dir(self) -> Path:
        return self.trace_dir / RESOURCES_DIR

    def resource_file(self, device: str) -> Path:
        return self.resources_dir / f"{device}.csv"

    def resource_files(self, devices: list[str]) -> list[str]:
        """:meth:`resource_file` of many devices as plain strings (10^5 Path objects cost
        seconds)."""
        base = os.path.join(str(self.resources_dir), "")
        return [f"{base}{d}.csv" for d in devices]

    def ge_trace(self, ge_index: int, ge_count: int) -> Path:
        """The trace a main GE replays (:func:`ge_trace_name`)."""
        return self.trace_dir / ge_trace_name(ge_index, ge_count)

    @property
    def cd_trace(self) -> Path:
        return self.trace_dir / CD_TRACE_CSV

    @property
    def secrets_dir(self) -> Path:
        """Mode 0700; holds the DTLS key while the run lasts (removed at cleanup)."""
        return self.path / "secrets"

    @property
    def dtls_key_file(self) -> Path:
        return self.secrets_dir / "dtls-psk.key"

    # -- what the components write ------------------------------------------------------
    @property
    def ges_dir(self) -> Path:
        """Where every main GE's directory is (:meth:`ge_dir`)."""
        return self.path / "ge"

    def ge_dir(self, ge_id: str) -> Path:
        """Output directory of a GE: ge/<id>/ for main GEs, cd-ge/ for the CD's GE."""
        return self.path / CD_GE_DIR if ge_id == CD_GE_DIR else self.ges_dir / ge_id

    def ge_summary(self, ge_id: str) -> Path:
        """The GE's own summary.json (docs/CONTRACTS.md §2): it wrote its results."""
        return self.ge_dir(ge_id) / GE_SUMMARY

    def ge_progress(self, ge_id: str) -> Path:
        """The GE's live counters (``progress.bin``, docs/CONTRACTS.md §2)."""
        return self.ge_dir(ge_id) / "progress.bin"

    def ge_container_log(self, ge_id: str) -> Path:
        return self.ge_dir(ge_id) / CONTAINER_LOG

    def ge_stdout(self, ge_id: str) -> Path:
        return self.ge_dir(ge_id) / STDOUT_LOG

    @property
    def devices_dir(self) -> Path:
        """Where every device's directory is (:meth:`device_dir`)."""
        return self.path / "devices"

    def device_dir(self, device: str) -> Path:
        return self.devices_dir / device

    def device_container_log(self, device: str) -> Path:
        return self.device_dir(device) / CONTAINER_LOG

    def device_stdout(self, device: str) -> Path:
        return self.device_dir(device) / STDOUT_LOG

    def device_log(self, device: str) -> Path:
        return self.device_dir(device) / "device-log.csv"

    def device_summary(self, device: str) -> Path:
        return self.device_dir(device) / "device-summary.json"

    def push_schedule(self, device: str) -> Path:
        """What a pushing device sends (wotbench.workload.push_schedule, wot-device --push)."""
        return self.device_dir(device) / PUSH_SCHEDULE

    def push_setup(self, device: str) -> Path:
        """Written by wot-device once its setup requests have ended (their outcomes)."""
        return self.device_dir(device) / "push-setup.csv"

    def push_go(self, device: str) -> Path:
        """Created by the harness once the targets answer: the device begins its setup."""
        return self.device_dir(device) / "push-go"

    def push_start(self, device: str) -> Path:
        """Written by the harness: the test start (CLOCK_MONOTONIC ns) the device sends from."""
        return self.device_dir(device) / "push-start"

    def push_requests(self, device: str) -> Path:
        """wot-device's outcome of every push request (the GE's requests.csv columns + phase, op)."""
        return self.device_dir(device) / "push-requests.csv"

    def device_ready(self, device: str) -> Path:
        """Created by wot-device once its CoAP endpoint listens."""
        return self.device_dir(device) / "ready"

    @property
    def fleets_dir(self) -> Path:
        """Where every wot-fleet engine's directory is (:meth:`fleet_dir`)."""
        return self.path / "fleets"

    def fleet_dir(self, fleet: str) -> Path:
        """A wot-fleet engine's directory (CONTRACTS §3b): its devices file (input), ``ready``,
        ``fleet-log-<loop>.csv``, ``fleet-devices.csv``, ``fleet-summary.json``."""
        return self.fleets_dir / fleet

    def fleet_devices_file(self, fleet: str) -> Path:
        """What the engine hosts, written by the runner (wotbench.rundir.fleet_files)."""
        return self.fleet_dir(fleet) / FLEET_DEVICES_IN

    def fleet_ready(self, fleet: str) -> Path:
        """Created by the engine once every endpoint is bound."""
        return self.fleet_dir(fleet) / "ready"

    def fleet_log(self, fleet: str, loop: int) -> Path:
        """Event loop ``loop``'s device log (every request its devices received)."""
        return self.fleet_dir(fleet) / f"fleet-log-{loop}.csv"

    def fleet_logs(self, fleet: str) -> list[Path]:
        """Every loop's log the engine wrote, in loop order."""
        logs = self.fleet_dir(fleet).glob(FLEET_LOG_GLOB)
        return sorted(logs, key=lambda p: int(p.stem.rpartition("-")[2])
                      if p.stem.rpartition("-")[2].isdigit() else -1)

    def fleet_notify_logs(self, fleet: str) -> list[Path]:
        """Every loop's notification log (Observe: fleet-notify-<loop>.csv), in loop order."""
        logs = self.fleet_dir(fleet).glob("fleet-notify-*.csv")
        return sorted(logs, key=lambda p: int(p.stem.rpartition("-")[2])
                      if p.stem.rpartition("-")[2].isdigit() else -1)

    def fleet_impair_table(self, fleet: str) -> Path:
        """One row per impaired hosted device: its impairment counters (fleet-impair.csv)."""
        return self.fleet_dir(fleet) / "fleet-impair.csv"

    def fleet_device_table(self, fleet: str) -> Path:
        """One row per hosted device: its counters (model ``wotbench.rundir.fleet_files``)."""
        return self.fleet_dir(fleet) / "fleet-devices.csv"

    def fleet_summary(self, fleet: str) -> Path:
        """The engine's totals and per-loop lag (model ``wotbench.rundir.fleet_files``)."""
        return self.fleet_dir(fleet) / "fleet-summary.json"

    # devices[].push in an engine (CONTRACTS §3b "Push"): one file each for all its devices
    def fleet_push_schedule(self, fleet: str) -> Path:
        """What the engine's pushing devices send (a ``device`` column first; wot-fleet --push)."""
        return self.fleet_dir(fleet) / PUSH_SCHEDULE

    def fleet_push_go(self, fleet: str) -> Path:
        return self.fleet_dir(fleet) / "push-go"

    def fleet_push_start(self, fleet: str) -> Path:
        return self.fleet_dir(fleet) / "push-start"

    def fleet_push_setup(self, fleet: str) -> Path:
        """Every pushing device's setup rows, written once all have ended."""
        return self.fleet_dir(fleet) / "push-setup.csv"

    def fleet_push_requests(self, fleet: str) -> Path:
        """The outcome of every push row (push-requests.csv's columns, ``device`` = index)."""
        return self.fleet_dir(fleet) / "fleet-push.csv"

    def fleet_stdout(self, fleet: str) -> Path:
        return self.fleet_dir(fleet) / STDOUT_LOG

    def fleet_container_log(self, fleet: str) -> Path:
        return self.fleet_dir(fleet) / CONTAINER_LOG

    def phase_dir(self, phase: str) -> Path:
        """A ``gateways.http`` setup/verify phase's own GE run (trace.csv, ge.log, ge/)."""
        return self.path / "phases" / phase

    def phase_ge_dir(self, phase: str) -> Path:
        """That phase's GE output directory (a GE's usual files)."""
        return self.phase_dir(phase) / "ge"

    def phase_trace(self, phase: str) -> Path:
        return self.phase_dir(phase) / TRACE_CSV

    def phase_body(self, phase: str) -> Path:
        """The phase's body template, as the GE's --http-body-template reads it."""
        return self.phase_dir(phase) / "body.txt"

    def phase_log(self, phase: str) -> Path:
        """The phase GE's stdout + stderr."""
        return self.phase_dir(phase) / "ge.log"

    @property
    def sink_dir(self) -> Path:
        """The notification sink's directory (``notify:``; wotbench.runner.notify_sink)."""
        return self.path / "sink"

    @property
    def sink_json(self) -> Path:
        return self.sink_dir / SINK_JSON

    @property
    def sink_ready(self) -> Path:
        """Created by the sink once every subscription holds."""
        return self.sink_dir / "ready"

    @property
    def sink_log(self) -> Path:
        """The sink's stdout + stderr."""
        return self.sink_dir / "sink.log"

    @property
    def sut_faults_json(self) -> Path:
        """What the SUT faults did and when (wotbench.runner.sut_faults, ``sut_faults:``)."""
        return self.path / "sut-faults.json"

    def ge_warmup(self, ge_id: str) -> Path:
        """The GE's readiness pings before its start: who answered (gateway-emulator --warmup-ms)."""
        return self.ge_dir(ge_id) / "warmup.json"

    @property
    def lease_dir(self) -> Path:
        """The harness's lease (wotbench.runner.deployment.lease), mounted read-only into every container."""
        return self.path / "lease"

    @property
    def monitor_dir(self) -> Path:
        return self.path / "monitor"

    @property
    def cgroups_csv(self) -> Path:
        return self.monitor_dir / "cgroups.csv"

    @property
    def cores_csv(self) -> Path:
        """Per-core busy/steal/idle ns, cumulative (wotbench.monitor.host_counters)."""
        return self.monitor_dir / "cores.csv"

    @property
    def pressure_csv(self) -> Path:
        """Host CPU pressure (/proc/pressure/cpu totals), cumulative."""
        return self.monitor_dir / "pressure.csv"

    @property
    def foreign_csv(self) -> Path:
        """CPU other processes used on the run's cores, per interval (wotbench.monitor.foreign)."""
        return self.monitor_dir / "foreign.csv"

    @property
    def sut_csv(self) -> Path:
        """The system under test's CPU and memory (model ``wotbench.rundir.sut.SutSample``)."""
        return self.monitor_dir / "sut.csv"

    @property
    def monitor_cost_json(self) -> Path:
        """The monitor's own CPU time (components, host counters, process scan)."""
        return self.monitor_dir / "cost.json"

    @property
    def monitor_sources_json(self) -> Path:
        """Which evidence sources this host had (None) or why not."""
        return self.monitor_dir / "sources.json"

    @property
    def cpu_csv(self) -> Path:
        return self.monitor_dir / "cpu.csv"

    @property
    def host_csv(self) -> Path:
        return self.monitor_dir / "host.csv"

    @property
    def clock_json(self) -> Path:
        """One instant on both clocks (``{"wall_s", "mono_ns"}``), to map collectl's UTC."""
        return self.monitor_dir / "clock.json"

    @property
    def collectl_dir(self) -> Path:
        return self.monitor_dir / "collectl"

    @property
    def collectl_stderr(self) -> Path:
        return self.monitor_dir / "collectl.stderr"

    @property
    def contention_dir(self) -> Path:
        return self.path / "contention"

    def hog_report(self, hog: str) -> Path:
        """A contention hog's one-line JSON report."""
        return self.contention_dir / f"{hog}.json"

    @property
    def network_dir(self) -> Path:
        return self.path / "network"

    # -- a connected run's components (docs/CONNECTED.md, CONTRACTS §3c, §3d) -------------
    @property
    def engines_dir(self) -> Path:
        """Every wot-fleet-conn engine's directory (:meth:`engine_dir`)."""
        return self.path / "engines"

    def engine_dir(self, engine: str) -> Path:
        """An engine's directory: its connections file, stderr.log and ``out/``."""
        return self.engines_dir / engine

    def engine_connections(self, engine: str) -> Path:
        """What the engine connects (its --connections file), written by the runner."""
        return self.engine_dir(engine) / "connections.csv"

    def engine_out(self, engine: str) -> Path:
        """What the engine writes (its --log-dir): conn-summary.json, conn-log-*.csv, ..."""
        return self.engine_dir(engine) / "out"

    def engine_outs(self) -> list[Path]:
        """Every engine's ``out/`` there is, in name order."""
        return sorted(p for p in self.engines_dir.glob("*/out") if p.is_dir())

    @property
    def apps_dir(self) -> Path:
        """wot-rpcapp's directory (its --log-dir): rpc-summary.json, rpc-log.csv, stderr.log."""
        return self.path / "apps"

    @property
    def edge_dir(self) -> Path:
        """The edge server's directory (its config, stderr, privileges.json)."""
        return self.path / "edge"

    @property
    def edge_privileges_json(self) -> Path:
        """Who the edge server's processes run as, once its workers serve."""
        return self.edge_dir / "privileges.json"

    @property
    def connected_sched_csv(self) -> Path:
        """The components' CPU and run-queue samples (wotbench.connected.sched)."""
        return self.monitor_dir / CONNECTED_SCHED

    @property
    def edge_sched_csv(self) -> Path:
        """A run across hosts' coordinator: the edge server's samples (its own clock)."""
        return self.monitor_dir / "edge-sched.csv"

    @property
    def study_antagonist_json(self) -> Path:
        """The antagonist a validation study started around this run (wotbench.validation)."""
        return self.path / STUDY_ANTAGONIST_JSON

    @property
    def things_affordances(self) -> Path:
        """The trace's Things: one row per affordance (wotbench.things.files)."""
        return self.trace_dir / THINGS_DIR / THINGS_AFFORDANCES_CSV

    @property
    def things_tds(self) -> Path:
        """The trace's Things: one TD per instance (wotbench.things.files)."""
        return self.trace_dir / THINGS_DIR / THINGS_TDS_JSONL

    def sse_events(self, device: str) -> Path:
        """An HTTP Thing's event emissions (wotbench.things.sse_events), written when it stops."""
        return self.device_dir(device) / SSE_EVENTS_CSV

    @property
    def cell_json(self) -> Path:
        """A connected cell's account of its run (wotbench.distributed.connected_cell), read by
        the coordinator once it fetched the cell's directory."""
        return self.path / "cell.json"

    @property
    def connected_summary_json(self) -> Path:
        """The components' totals in one file (wotbench.connected.totals), as before summary.json."""
        return self.path / "connected-summary.json"

    # -- what the harness and the analysis write ----------------------------------------
    @property
    def run_json(self) -> Path:
        return self.path / "run.json"

    @property
    def summary_json(self) -> Path:
        return self.path / "summary.json"

    @property
    def series_dir(self) -> Path:
        return self.path / "series"

    def series(self, name: str) -> Path:
        return self.series_dir / f"{name}.csv"

    @property
    def report_html(self) -> Path:
        return self.path / "report.html"

    def rel(self, path: Path) -> str:
        """``path`` relative to the run directory, as run.json stores it."""
        return str(Path(path).relative_to(self.path))

    # -- the two JSON contracts ---------------------------------------------------------
    def read_run(self) -> "RunRecord":
        from wotbench.rundir.record import RunRecord
        return RunRecord.model_validate(_read_object(self.run_json))

    def write_run(self, record: "RunRecord") -> Path:
        return _write_atomic(self.run_json, record.model_dump(mode="json"))

    def read_summary(self) -> "Summary":
        from wotbench.rundir.summary import Summary
        return Summary.model_validate(_read_object(self.summary_json))

    def write_summary(self, summary: "Summary") -> Path:
        return _write_atomic(self.summary_json, summary.model_dump(mode="json"))


def _read_object(path: Path) -> dict:
    data = json.loads(path.read_text())
    if not isinstance(data, dict):
        raise ValueError("must be a JSON object")
    return data


def _write_atomic(path: Path, data: dict) -> Path:
    return atomic.write_json(path, data, allow_nan=False)


class MergedRunDir:
    """The layout of a run across hosts' merged directory (docs/CLUSTER.md): the split, the
    merged requests and figures, the reports, and each cell's own run directory under
    ``cells/<node>/`` (a :class:`RunDir`)."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"MergedRunDir({str(self.path)!r})"

    @property
    def split_json(self) -> Path:
        return self.path / "split.json"        # the coordinator's Split, before T0

    @property
    def connected_split_json(self) -> Path:
        return self.path / "connected-split.json"   # a connected run's shares, before T0

    @property
    def agents_log(self) -> Path:
        return self.path / "agents.log"        # every cell agent's output (docker service logs)

    @property
    def cluster_json(self) -> Path:
        return self.path / "cluster.json"      # MergedRun: per-cell figures, verdicts, clocks

    @property
    def requests_csv(self) -> Path:
        return self.path / "requests.csv"      # every request of every finished cell

    @property
    def summary_json(self) -> Path:
        return self.path / "summary.json"      # the merged Summary (sweeps, capacity)

    @property
    def report_md(self) -> Path:
        return self.path / "report.md"

    @property
    def report_html(self) -> Path:
        return self.path / "report.html"

    @property
    def cells_dir(self) -> Path:
        return self.path / "cells"

    def cell_dir(self, node: str) -> Path:
        return self.cells_dir / node

    def is_merged(self) -> bool:
        """A run across hosts (its cluster.json exists), not a single-host run directory."""
        return self.cluster_json.is_file()


class SweepDir:
    """The layout of a sweep directory (wotbench/sweep/README.md; a capacity search's too):
    ``sweep.json``, the base config as given, each point's derived config and run directories,
    and the report with the results beside it."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"SweepDir({str(self.path)!r})"

    @property
    def sweep_json(self) -> Path:
        return self.path / "sweep.json"       # the points, their state and run directories

    @property
    def base_yaml(self) -> Path:
        return self.path / "base.yaml"        # the base config as given (a copy)

    @property
    def configs_dir(self) -> Path:
        return self.path / "configs"

    @staticmethod
    def point_config(point: str) -> str:
        """A point's derived config, relative to the sweep dir (as sweep.json keeps it)."""
        return f"configs/{point}.yaml"

    def point_runs(self, point: str) -> Path:
        """Where a point's run makes its run directory (the runner's out root)."""
        return self.path / "runs" / point

    @property
    def report_html(self) -> Path:
        return self.path / "report.html"

    @property
    def results_json(self) -> Path:
        return self.path / "results.json"     # model wotbench.sweep.results.SweepResults

    @property
    def points_csv(self) -> Path:
        return self.path / "points.csv"       # one row per run

    @property
    def settings_csv(self) -> Path:
        return self.path / "settings.csv"     # one row per setting: mean, CI of every metric

    @property
    def capacity_json(self) -> Path:
        return self.path / "capacity.json"    # a capacity search's CapacityResult


class StudyDir:
    """The layout of a validation study's directory (wotbench.validation.study): what was asked,
    the manifest copy, one sweep directory per scenario, the second runs, the evaluation."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"StudyDir({str(self.path)!r})"

    @property
    def study_json(self) -> Path:
        return self.path / "study.json"       # what was asked and when (model StudyMeta)

    @property
    def manifest_yaml(self) -> Path:
        return self.path / "manifest.yaml"    # the scenarios manifest as given (a copy)

    def scenario_dir(self, name: str) -> Path:
        """A scenario's sweep directory (a :class:`SweepDir`)."""
        return self.path / STUDY_SCENARIOS_DIR / name

    def second_runs(self, name: str) -> Path:
        """Where a scenario's second-run antagonists make their run directories."""
        return self.path / STUDY_SECOND_RUNS_DIR / name

    @property
    def results_json(self) -> Path:
        return self.path / "results.json"     # every scenario's evaluation

    @property
    def table_md(self) -> Path:
        return self.path / "table.md"

    @property
    def graded_json(self) -> Path:
        return self.path / "graded.json"      # the graded study, when it has duty-loop scenarios

    @property
    def graded_md(self) -> Path:
        return self.path / "graded.md"
