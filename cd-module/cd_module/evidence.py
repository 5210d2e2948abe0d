"""Direct kernel evidence of host distortion, per window and place (docs/VALIDATION.md "Evidence").

The CD node infers contention from its own response time; the kernel measures it. Per window of
the test (the CD rule's grid) and per place — the devices of each device core, the CD node, each
gateway emulator — this module computes from the run directory:

- **CPU wait**: the run-queue wait of the place's threads (time runnable but not running,
  ``/proc/<tid>/schedstat``, sampled by the monitor) as a share of their CPU time and per
  request served. Emulated devices share cores that real devices would not, so a device that
  waits for a core is the testbed's doing (the paper's point), while queueing *inside* a device
  (a request waiting for a busy worker) is the system's and is not counted here;
- **busy stretch**: a busy service burns exactly S of its thread's CPU time, so its wall time
  over S (device log ``end - start``) is how much longer the core took to give it S;
- **wake-up delay**: the device's read of a request after its kernel arrival stamp;
- **foreign CPU**: what other processes used on the place's core (``monitor/foreign.csv``),
  named, with the share of the core;
- host CPU pressure and per-core steal time.

Rules (thresholds in :class:`~wotbench.rundir.evidence.EvidenceParams`) flag a window with what
showed it and how much; a rule whose source is missing abstains and the block says so:

- ``cpu_wait``: the place's run-queue wait per request is at least ``wait_of_service`` of the
  requests' service time (the shared core added that much to every response, on average);
- ``stretch``: the median busy service took ``stretch_p50`` times its CPU time (steal, IRQs);
- ``other_run``: another WoTbench run's components used ``other_run_share`` of a run core.
A gateway emulator's lateness is the GE-integrity rule's (whole run, ``ge_bottleneck``); per
window its send lag, late share and CPU wait are reported here beside what else used its core.
Other processes on a run core are named in every window but are not a rule of their own: what
matters is whether the run's threads lost time to them, which ``cpu_wait`` measures (a CPU hog
beside sleeping devices does not delay them: docs/VALIDATION.md).
"""
from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import pandas as pd

from wotbench.csvcheck import read_optional_csv
from wotbench.deploy.plan import parse_cpuset
from wotbench.monitor.counters import monotone
from scipy.stats import binom

from cd_module import hostshare, loop_lag
from wotbench.rundir import GeIntegrityParams, RunDir, RunRecord
from wotbench.rundir.evidence import (Antagonist, EvidenceBlock, EvidenceParams, EvidenceSources,
                                      Flag, PlaceWindow, WindowEvidence)


@dataclass(frozen=True)
class GeSends:
    """A GE's sent requests: scheduled instants (absolute CLOCK_MONOTONIC ns), lag behind them
    (ms) and the tolerance its GE-integrity check used (ms, one or one per send; None: not
    checked). ``devices``:
    set for the pushing devices of one place (devices[].push sends their own requests): their
    late sends are flagged (rule ``send_lag``), since no GE-integrity check covers them."""
    sched_ns: np.ndarray
    lag_ms: np.ndarray
    tolerance_ms: Optional[float | np.ndarray]
    devices: tuple[str, ...] = ()
    # pushing devices: the GE rule that judges them (max_late_share at alpha, per window)
    rule: GeIntegrityParams = field(default_factory=GeIntegrityParams)


OWNER_WORDS = {"injected": "the injected hog", "wotbench": "another WoTbench run",
               "container": "a container WoTbench did not start",
               "runtime": "the container runtime", "host": "outside the testbed"}


# --------------------------------------------------------------------------- inputs

def _interp(t: np.ndarray, v: np.ndarray, at: np.ndarray) -> np.ndarray:
    """A cumulative counter at the instants ``at`` (linear between samples; NaN outside)."""
    ok = np.isfinite(v)
    t, v = t[ok], v[ok]
    if len(t) < 2:
        return np.full(len(at), np.nan)
    return np.interp(at, t, v, left=np.nan, right=np.nan)


class Places:
    """Which component runs where: device -> core (pinned devices; shared cpusets count as one
    place named by the set), the CD node and the GEs by name."""

    def __init__(self, run: RunRecord):
        self.of: dict[str, str] = {}
        self.core_of: dict[str, list[int]] = {}
        self.workers: dict[str, int] = {d.name: int(d.threads or 1) for d in run.devices}
        # third-party servers on this host (devices[].server): no device log; their requests
        # come from the GEs' answers, their S from their CPU time (_add_servers)
        self.servers: set[str] = {d.name for d in run.devices
                                  if d.server is not None and d.role != "external"}
        for d in run.devices:
            cores = parse_cpuset(d.cpuset) if d.cpuset else []
            place = f"core {d.cpuset}" if cores else "devices"
            self.of[d.name] = place
            self.core_of[place] = cores
        if run.cd_node is not None:
            self.workers[run.cd_node.name] = int(run.cd_node.threads or 1)
            self.of[run.cd_node.name] = "cd-node"
            self.core_of["cd-node"] = parse_cpuset(run.cd_node.cpuset) if run.cd_node.cpuset else []
        for g in run.ges + ([run.cd_ge] if run.cd_ge else []):
            self.of[g.id] = g.id
            self.core_of[g.id] = [g.cpu] if g.cpu is not None else []

    def device_places(self) -> list[str]:
        return sorted({p for p in self.of.values() if p.startswith("core") or p == "devices"})


def _sources(rd: RunDir, cg: Optional[pd.DataFrame]) -> EvidenceSources:
    waits = cg is not None and "runqueue_ns" in cg.columns and cg["runqueue_ns"].notna().any()
    try:
        found = json.loads(rd.monitor_sources_json.read_text())
    except (OSError, ValueError):   # a run recorded before the sampler: what its files hold
        why = "not recorded (the run predates the evidence sampler)"
        found = {"per_core_cpu": why, "steal": why, "cpu_pressure": why, "process_scan": why}
    if not waits:
        found["thread_runqueue_wait"] = found.get("thread_runqueue_wait") or \
            "monitor/cgroups.csv has no run-queue wait"
    return EvidenceSources(**{k: found.get(k) for k in EvidenceSources.model_fields
                              if k != "device_logs"})


# --------------------------------------------------------------------------- measures

def _component_deltas(cg: Optional[pd.DataFrame], edges_ns: np.ndarray
                      ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """component -> (cpu_ns, wait_ns) used in each interval between consecutive edges."""
    out = {}
    if cg is None or not len(cg):
        return out
    cg = cg[cg["role"] != "device-group"]
    for comp, g in cg.groupby("component", observed=True, sort=False):
        t = g["mono_ns"].to_numpy(np.float64)
        # a restarted component's counters start again from 0 (wotbench.monitor.counters)
        cpu = _interp(t, monotone(pd.to_numeric(g["cpu_ns"], errors="coerce").to_numpy(
            np.float64)), edges_ns)
        wait = _interp(t, monotone(pd.to_numeric(g["runqueue_ns"], errors="coerce").to_numpy(
            np.float64)), edges_ns)
        out[str(comp)] = (np.diff(cpu), np.diff(wait))
    return out


def _queue_excess_ms(lg: pd.DataFrame, s_us: np.ndarray, workers: int) -> np.ndarray:
    """Per log row: its end minus its end on a device of its own (hostshare.replay_ends), ms;
    NaN where S or a stamp is unknown."""
    out = np.full(len(lg), np.nan)
    arr = pd.to_numeric(lg.get("arrival_kernel_ns", lg["arrival_ns"]), errors="coerce")
    arr = arr.where(arr > 0, lg["arrival_ns"]).to_numpy(np.float64)
    end = lg["end_ns"].to_numpy(np.float64)
    ok = np.isfinite(arr) & np.isfinite(end) & np.isfinite(s_us)
    idx = np.flatnonzero(ok)
    order = idx[np.argsort(arr[idx], kind="stable")]
    ends = hostshare.replay_ends(arr[order], s_us[order] * 1e3, workers)
    out[order] = (end[order] - ends) / 1e6
    return out


def _log_measures(logs: dict[str, pd.DataFrame], services: dict[str, pd.DataFrame],
                  places: Places, edges_ns: np.ndarray) -> dict[str, dict[str, list]]:
    """place -> measure -> per interval arrays: requests, stretch values, wake-up delays."""
    n = len(edges_ns) - 1
    out: dict[str, dict[str, list]] = defaultdict(
        lambda: {"requests": [0] * n, "service_us": [0.0] * n, "served": [0] * n,
                 "stretch": [[] for _ in range(n)], "stretch_ms": [[] for _ in range(n)],
                 "wakeup": [[] for _ in range(n)], "queue_ms": [[] for _ in range(n)]})
    for name, lg in logs.items():
        place = places.of.get(name)
        if place is None or lg is None or not len(lg):
            continue
        arr = lg["arrival_ns"].to_numpy(np.float64)
        idx = np.searchsorted(edges_ns, arr, side="right") - 1
        inside = (idx >= 0) & (idx < n)
        m = out[place]
        for i, c in zip(*np.unique(idx[inside], return_counts=True)):
            m["requests"][int(i)] += int(c)
        res = services.get(name)
        if res is not None and len(res):
            s_all = lg["path"].astype(str).map(dict(zip(res["path"].astype(str),
                                                        res["service_time_us"].astype(float))))
            s_all = s_all.to_numpy(np.float64)
            known = inside & np.isfinite(s_all)
            for i, v in zip(idx[known], s_all[known]):
                m["service_us"][int(i)] += float(v)
                m["served"][int(i)] += 1
            modes = set(res["mode"].astype(str)) if "mode" in res.columns else {"busy"}
            workers = places.workers.get(name, 1)
            # a busy device of several workers shares one CPU in the real deployment too:
            # its queue cannot be replayed with parallel servers
            if "end_ns" in lg.columns and (workers == 1 or modes == {"sleep"}):
                q = _queue_excess_ms(lg, s_all, workers)
                ok = inside & np.isfinite(q)
                for i, v in zip(idx[ok], q[ok]):
                    m["queue_ms"][int(i)].append(float(v))
        if res is not None and len(res) and "start_ns" in lg.columns:
            busy = res[res["mode"].astype(str) == "busy"]
            s_us = dict(zip(busy["path"].astype(str), busy["service_time_us"].astype(float)))
            s = lg["path"].astype(str).map(s_us).to_numpy(np.float64)
            wall = (lg["end_ns"].to_numpy(np.float64) - lg["start_ns"].to_numpy(np.float64)) / 1e3
            ok = inside & np.isfinite(s) & (s > 0) & np.isfinite(wall) & (wall > 0)
            for i, v, x in zip(idx[ok], wall[ok] / s[ok], (wall[ok] - s[ok]) / 1e3):
                m["stretch"][int(i)].append(float(v))
                m["stretch_ms"][int(i)].append(float(x))
        if "arrival_kernel_ns" in lg.columns:
            k = pd.to_numeric(lg["arrival_kernel_ns"], errors="coerce").to_numpy(np.float64)
            ok = inside & np.isfinite(k) & (k > 0)
            for i, v in zip(idx[ok], (arr[ok] - k[ok]) / 1e6):
                m["wakeup"][int(i)].append(float(v))
    return out


def server_answers(responses: Optional[pd.DataFrame], places: Places) -> dict[str, np.ndarray]:
    """Each third-party server's answered requests, by the instant they were sent (absolute ns):
    its requests, since it writes no device log."""
    if responses is None or not len(responses) or not places.servers:
        return {}
    mine = responses[responses["device"].isin(places.servers)]
    return {str(d): g["sent_ns"].to_numpy(np.float64)
            for d, g in mine.groupby("device", observed=True)}


def _add_servers(logm: dict[str, dict[str, list]], answers: dict[str, np.ndarray],
                 comp: dict[str, tuple[np.ndarray, np.ndarray]], places: Places,
                 edges: np.ndarray) -> None:
    """A third-party server's requests per interval (the GEs' answers from it) and its S: the
    CPU time it used, per request (the kernel's; it has no resource file), so its run-queue wait
    per request is judged as a device's: beyond the run's own level of wait per S."""
    n = len(edges) - 1
    for name, sent in answers.items():
        place = places.of.get(name)
        if place is None:
            continue
        idx = np.searchsorted(edges, sent, side="right") - 1
        counts = np.bincount(idx[(idx >= 0) & (idx < n)], minlength=n)
        cpu = comp.get(name, (np.full(n, np.nan), None))[0]
        m = logm[place]
        for i in np.flatnonzero(counts):
            m["requests"][i] += int(counts[i])
            if np.isfinite(cpu[i]):
                m["service_us"][i] += float(cpu[i]) / 1e3
                m["served"][i] += int(counts[i])


@dataclass(frozen=True)
class MonitorFiles:
    """The monitor's evidence files of a run, read once (None: absent)."""
    cgroups: Optional[pd.DataFrame]
    cores: Optional[pd.DataFrame]
    pressure: Optional[pd.DataFrame]
    foreign: Optional[pd.DataFrame]

    @classmethod
    def read(cls, rd: RunDir) -> "MonitorFiles":
        return cls(read_optional_csv(rd.cgroups_csv), read_optional_csv(rd.cores_csv),
                   read_optional_csv(rd.pressure_csv), read_optional_csv(rd.foreign_csv))


def _foreign(df: Optional[pd.DataFrame], edges_ns: np.ndarray) -> Optional[pd.DataFrame]:
    """foreign.csv rows with their interval index (a sample's CPU belongs to the interval its
    sampling instant falls in; one monitor interval of smear at a window's edge)."""
    if df is None:
        return None
    if not len(df):
        return df.assign(win=pd.Series(dtype=np.int64))
    t = df["mono_ns"].to_numpy(np.float64) - df["interval_ns"].to_numpy(np.float64) / 2
    df = df.assign(win=np.searchsorted(edges_ns, t, side="right") - 1)
    return df[(df["win"] >= 0) & (df["win"] < len(edges_ns) - 1)]


def _core_counter(df: Optional[pd.DataFrame], edges_ns: np.ndarray, column: str
                  ) -> dict[int, np.ndarray]:
    out = {}
    if df is None or not len(df):
        return out
    for core, g in df.groupby("core"):
        v = _interp(g["mono_ns"].to_numpy(np.float64), g[column].to_numpy(np.float64), edges_ns)
        out[int(core)] = np.diff(v)
    return out


def _pressure(df: Optional[pd.DataFrame], edges_ns: np.ndarray) -> Optional[np.ndarray]:
    if df is None or len(df) < 2:
        return None
    v = _interp(df["mono_ns"].to_numpy(np.float64),
                pd.to_numeric(df["some_us"], errors="coerce").to_numpy(np.float64) * 1e3, edges_ns)
    return np.diff(v)


# --------------------------------------------------------------------------- rules

def _q(v: list[float], q: float) -> Optional[float]:
    return float(np.quantile(v, q)) if v else None


def _pct(x: float) -> str:
    return f"{100 * x:.0f} %"


def _send_lag_flag(pw: PlaceWindow, s: GeSends, p: EvidenceParams) -> Optional[Flag]:
    """Pushing devices that sent late in this window (a one-sided binomial test of the share
    later than their tolerance against the GE rule's ``max_late_share``, 1 %, at its
    ``alpha``): the testbed's, as a late GE send is."""
    devices = s.devices
    n = pw.requests
    late = int(round(pw.late_share * n))   # late_share is rounded to 4 digits: about right
    if n < p.min_requests or not late or \
            binom.sf(late - 1, n, s.rule.max_late_share) >= s.rule.alpha:
        return None
    where = pw.place.removeprefix("push ")
    where = "unpinned" if where == "devices" else "on " + where
    more = f" and {len(devices) - 5} more" if len(devices) > 5 else ""
    return Flag(rule="send_lag", place=pw.place, text=(
        f"pushing device(s) {', '.join(devices[:5])}{more} {where} sent {late} of their {n} "
        f"own requests later than their tolerance ({_pct(late / n)}; p99 lag "
        f"{pw.lag_p99_ms:.2f} ms): their core did not run them on time"))


def _measures_text(pw: PlaceWindow, their: str) -> str:
    """The kernel's measures behind an amount: "; waited for the CPU 2.10 ms per request, 41 %
    of their 5.10 ms service time (38 % of their CPU time); busy service stretched x1.40"."""
    out = ""
    if pw.wait_ms_per_request is not None and pw.wait_of_service is not None:
        out += (f"; waited for the CPU {pw.wait_ms_per_request:.2f} ms per request, "
                f"{_pct(pw.wait_of_service)} of {their} {pw.service_ms_per_request:.2f} ms "
                f"service time" + (f" ({_pct(pw.wait_share)} of {their} CPU time)"
                                   if pw.wait_share is not None else ""))
    if pw.stretch_p50 is not None:
        out += f"; busy service stretched x{pw.stretch_p50:.2f} (median; p90 x{pw.stretch_p90:.2f})"
    return out


def _flags(w: WindowEvidence, p: EvidenceParams, places: "Places",
           push_devices: Optional[dict[str, GeSends]] = None) -> list[Flag]:
    push_devices = push_devices or {}
    device_places = set(places.device_places()) | set(push_devices)
    out = []
    for pw in w.places:
        devices = pw.place in device_places
        where = ("devices on " + pw.place) if devices else \
            ("the CD node" if pw.place == "cd-node" else pw.place)
        their = "their" if devices else "its"
        if pw.requests < p.min_requests:
            continue
        if pw.beyond_tolerance:
            rule = pw.added_by if pw.added_by in ("cpu_wait", "stretch", "wakeup", "queueing",
                                                  "loop_lag") \
                else "cpu_wait"
            out.append(Flag(rule=rule, place=pw.place, text=hostshare.describe_window(
                pw, where, p.verdict) + _measures_text(pw, their)))
        if pw.place in push_devices and pw.late_share is not None:
            flag = _send_lag_flag(pw, push_devices[pw.place], p)
            if flag is not None:
                out.append(flag)
    by_run: dict[tuple[int, str], float] = defaultdict(float)
    for a in w.antagonists:
        # another run's components (its run id known); a harness of unknown run is named with
        # the other processes, and its effect is in the host's share like theirs
        if a.owner_kind == "wotbench" and a.owner:
            by_run[(a.core, a.owner)] += a.share
    for (core, run), share in sorted(by_run.items()):
        if share >= p.other_run_share:
            out.append(Flag(rule="other_run", place=f"core {core}", text=(
                f"core {core}: another WoTbench run ({run}) used {share:.2f} of the core")))
    # the devices first (what the user measures), then the CD node, then the GEs
    out.sort(key=lambda f: (0 if f.place in device_places else 1 if f.place == "cd-node" else 2))
    if out:   # name what else ran on the cores where the run lost time
        cores = {c for f in out for c in places.core_of.get(f.place, [])}
        named = [f"core {a.core}: {describe(a)} used {a.share:.2f} of the core"
                 for a in w.antagonists if not (a.owner_kind == "wotbench" and a.owner)
                 and a.core in cores]
        if named:
            out[0].text += "; " + "; ".join(named)
    return out


def owner_words(a: Antagonist) -> str:
    """What the process is: "outside the testbed", "another WoTbench run RUN", ..."""
    if a.owner_kind == "wotbench" and not a.owner:   # a harness whose run is not known
        return "a WoTbench harness of another run"
    return OWNER_WORDS[a.owner_kind] + (f" {a.owner}" if a.owner else "")


def describe(a: Antagonist) -> str:
    """"`sh` (pid 4242, outside the testbed: `sh -c while :; do :; done`)": how the verdict and
    the report name a process, by its command as it was at the scan, with its command line."""
    cmd = f": `{a.cmdline}`" if a.cmdline and a.cmdline != a.comm else ""
    return f"`{a.comm}` (pid {a.pid}, {owner_words(a)}{cmd})"


# --------------------------------------------------------------------------- the block

def assess(rd: RunDir, run: RunRecord, logs: dict[str, pd.DataFrame],
           services: dict[str, pd.DataFrame], sends: dict[str, GeSends], test_start_ns: int,
           duration_s: float, window_s: float, p: Optional[EvidenceParams] = None,
           responses: Optional[pd.DataFrame] = None,
           loops: Optional[dict[str, loop_lag.LoopLags]] = None
           ) -> tuple[EvidenceBlock, pd.DataFrame]:
    """The evidence block and its per-window, per-place series (``series/evidence.csv``).

    ``logs``/``services``: each device's log and resource table (the CD node's too), by name;
    ``sends``: each GE's send lags with its GE-integrity tolerance; ``responses``: the answered
    requests (device, sent_ns absolute, rt_ms) whose mean R the host's share is a share of;
    ``loops``: the wot-fleet loops' per-request lags (places, flags and host-share source of
    their own, cd_module/loop_lag.py)."""
    p = p or EvidenceParams()
    loops = loops or {}
    files = MonitorFiles.read(rd)
    sources = _sources(rd, files.cgroups)
    if not logs:
        sources.device_logs = "no device logs"
    places = Places(run)
    nwin = max(1, int(np.ceil(duration_s / window_s - 1e-9)))
    edges = test_start_ns + np.arange(nwin + 1) * window_s * 1e9
    cal = run.calibration
    cal_edges = np.array([cal.start_mono_ns, cal.end_mono_ns], np.float64) if cal else None

    push_devices = {k: s for k, s in sends.items() if s.devices}
    for k, s in push_devices.items():   # a pushing place is on its devices' cores
        cores = places.core_of.get(places.of.get(s.devices[0], ""), [])
        if not cores and k.startswith("push core "):   # an engine's devices: its cpuset
            cores = parse_cpuset(k.removeprefix("push core "))
        places.core_of[k] = cores
    answers = server_answers(responses, places)
    windows = _windows(files, logs, services, sends, places, edges, p, answers)
    for w in windows:       # the host share's quiet spans need the windows' times
        w.start_s, w.end_s = w.window * window_s, (w.window + 1) * window_s
    loop_lag.add_places(windows, loops, edges, p)
    if loops and sources.device_logs == "no device logs":   # the engines' logs are the devices'
        sources.device_logs = None
    of = {name: place for name, place in places.of.items()
          if place in places.device_places() or place == "cd-node"}
    loop_of = {d: place for place, lg in loops.items() for d in lg.devices}
    fine = _fine_inputs(files, logs, services, sends, places, edges, nwin, p, answers)
    _loop_inputs(fine, loops, edges, nwin)
    # places of third-party servers only: their amount is at most their R's rise
    server_places = frozenset(pl for pl in places.device_places()
                              if {d for d, x in places.of.items() if x == pl} <= places.servers)
    share = hostshare.assess(fine, windows, set(places.device_places()), of, responses, edges, p,
                             loop_of, server_places)
    share.per_group = hostshare.by_group(share.per_device, {
        d.name: d.group or d.name.rpartition("-")[0] for d in run.devices})
    calibration = (_windows(files, logs, services, sends, places, cal_edges, p)[0]
                   if cal_edges is not None and cal_edges[1] > cal_edges[0] else None)
    if calibration is not None:
        calibration.start_s = float((cal_edges[0] - test_start_ns) / 1e9)
        calibration.end_s = float((cal_edges[1] - test_start_ns) / 1e9)
        calibration.window = -1
    for w in windows:
        w.flags = _flags(w, p, places, push_devices)
    loop_lag.add_flags(windows, loops, p)
    block = EvidenceBlock(params=p, sources=sources, calibration=calibration, windows=windows,
                          other_runs=run.other_runs, host_share=share)
    return block, series(block)


def _fine_inputs(files: MonitorFiles, logs, services, sends: dict[str, GeSends], places: Places,
                 edges: np.ndarray, nwin: int, p: EvidenceParams,
                 answers: Optional[dict[str, np.ndarray]] = None) -> hostshare.Inputs:
    """The measures on a grid of ``k`` sub-intervals per window: the host share's sample."""
    window_ns = float(edges[1] - edges[0]) if len(edges) > 1 else 1e9
    k = max(2, int(round(window_ns / 1e9 / p.verdict.sub_window_s)))
    fine = edges[0] + np.arange(nwin * k + 1) * (window_ns / k)
    inp = hostshare.Inputs(nwin=nwin, k=k)
    comp = _component_deltas(files.cgroups, fine)
    for name, (_, wait) in comp.items():
        place = places.of.get(name)
        if place is None:
            continue
        acc = inp.wait_ns.get(place)
        inp.wait_ns[place] = wait.copy() if acc is None else np.where(
            np.isfinite(acc), acc + np.nan_to_num(wait), wait)
    logm = _log_measures(logs, services, places, fine)
    _add_servers(logm, answers or {}, comp, places, fine)
    for place, m in logm.items():
        inp.requests[place] = np.asarray(m["requests"], np.float64)
        inp.service_ms[place] = np.asarray(m["service_us"], np.float64) / 1e3
        inp.served[place] = np.asarray(m["served"], np.float64)
        inp.stretch_ms[place] = m["stretch_ms"]
        inp.wakeup_ms[place] = m["wakeup"]
        inp.queue_ms[place] = m["queue_ms"]
    for ge, s in sends.items():
        if s.devices:        # pushing devices: the send_lag rule judges them
            continue
        idx = np.searchsorted(fine, s.sched_ns, side="right") - 1
        inside = (idx >= 0) & (idx < nwin * k)
        inp.lag_ms[ge] = [s.lag_ms[inside & (idx == i)] for i in range(nwin * k)]
    return inp


def _loop_inputs(inp: hostshare.Inputs, loops: dict[str, loop_lag.LoopLags], edges: np.ndarray,
                 nwin: int) -> None:
    """Each loop's per-request lag on the fine grid (the host share's ``loop_lag`` sample)."""
    k = inp.k
    fine = edges[0] + np.arange(nwin * k + 1) * ((edges[1] - edges[0]) / k if len(edges) > 1
                                                 else 1e9 / k)
    for place, lg in loops.items():
        idx = np.searchsorted(fine, lg.arrival_ns, side="right") - 1
        inside = (idx >= 0) & (idx < nwin * k)
        order = np.argsort(idx[inside], kind="stable")
        counts = np.bincount(idx[inside], minlength=nwin * k)
        inp.loop_ms[place] = np.split(lg.added_ms()[inside][order], np.cumsum(counts)[:-1])
        inp.requests[place] = counts.astype(np.float64)


def _windows(files: MonitorFiles, logs, services, sends: dict[str, GeSends], places: Places,
             edges: np.ndarray, p: EvidenceParams,
             answers: Optional[dict[str, np.ndarray]] = None) -> list[WindowEvidence]:
    n = len(edges) - 1
    lengths = np.diff(edges)
    comp = _component_deltas(files.cgroups, edges)
    logm = _log_measures(logs, services, places, edges)
    _add_servers(logm, answers or {}, comp, places, edges)
    for ge, s in sends.items():   # a GE's "requests" are its sends
        idx = np.searchsorted(edges, s.sched_ns, side="right") - 1
        inside = (idx >= 0) & (idx < n)
        logm[ge]["requests"] = np.bincount(idx[inside], minlength=n).tolist()
        logm[ge]["lag"] = [s.lag_ms[inside & (idx == i)] for i in range(n)]
        logm[ge]["late"] = (None if s.tolerance_ms is None else
                            [(s.lag_ms > s.tolerance_ms)[inside & (idx == i)] for i in range(n)])
    foreign = _foreign(files.foreign, edges)
    steal = _core_counter(files.cores, edges, "steal_ns")
    pressure = _pressure(files.pressure, edges)
    out = []
    for i in range(n):
        w = WindowEvidence(window=i, start_s=0.0, end_s=0.0)
        length = float(lengths[i])
        per_place: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
        for name, (cpu, wait) in comp.items():
            place = places.of.get(name)
            if place is None or not np.isfinite(cpu[i]):
                continue
            acc = per_place[place]
            acc[0] += cpu[i]
            acc[1] += wait[i] if np.isfinite(wait[i]) else 0.0
            acc[2] += 1 if np.isfinite(wait[i]) else 0
        fshare: dict[int, float] = defaultdict(float)
        if foreign is not None:
            rows = foreign[foreign["win"] == i]
            if "cmdline" not in rows.columns:   # a run recorded before the scan kept it
                rows = rows.assign(cmdline="")
            # a pid named by its last command (an exec changes it: taskset -> what it runs)
            rows = rows.assign(comm=rows.groupby("pid")["comm"].transform("last"),
                               cmdline=rows.groupby("pid")["cmdline"].transform("last"))
            agg = rows.groupby(["core", "pid", "comm", "owner_kind", "owner", "cmdline"],
                               dropna=False, observed=True)["cpu_ns"].sum().reset_index()
            agg = _one_row_per_other_run(agg)
            for r in agg.sort_values("cpu_ns", ascending=False).itertuples():
                share = float(r.cpu_ns) / length
                fshare[int(r.core)] += share
                if share >= p.name_min_share:
                    w.antagonists.append(Antagonist(
                        core=int(r.core), pid=int(r.pid), comm=str(r.comm),
                        owner_kind=str(r.owner_kind),
                        owner="" if pd.isna(r.owner) else str(r.owner), share=round(share, 4),
                        cmdline="" if pd.isna(r.cmdline) else str(r.cmdline)))
        for place in sorted(set(per_place) | set(logm)):
            cpu, wait, with_wait = per_place.get(place, [0.0, 0.0, 0])
            m = logm.get(place)
            req = m["requests"][i] if m else 0
            st = m["stretch"][i] if m else []
            wk = m["wakeup"][i] if m else []
            cores = places.core_of.get(place, [])
            pw = PlaceWindow(place=place, requests=req, cores=cores)
            served = m["served"][i] if m else 0
            if served:
                pw.service_ms_per_request = round(m["service_us"][i] / 1e3 / served, 4)
            if place in per_place:
                pw.cpu_s = round(cpu / 1e9, 6)
                if with_wait:
                    pw.wait_s = round(wait / 1e9, 6)
                    pw.wait_share = round(wait / cpu, 4) if cpu > 0 else None
                    pw.wait_ms_per_request = round(wait / 1e6 / req, 4) if req else None
                    if served and m["service_us"][i] > 0:
                        pw.wait_of_service = round(wait / 1e3 / m["service_us"][i] * served / req, 4)
            pw.stretch_p50, pw.stretch_p90 = _q(st, 0.5), _q(st, 0.9)
            lag = m.get("lag") if m else None
            if lag is not None and len(lag[i]):
                pw.lag_p99_ms = round(float(np.quantile(lag[i], 0.99)), 4)
                if m["late"] is not None:
                    pw.late_share = round(float(np.mean(m["late"][i])), 4)
            pw.wakeup_p95_ms = _q(wk, 0.95)
            if foreign is not None and cores:
                pw.foreign_share = round(sum(fshare.get(c, 0.0) for c in cores) / len(cores), 4)
            if steal and cores and all(c in steal for c in cores):
                pw.steal_share = round(float(np.mean([steal[c][i] for c in cores])) / length, 4)
            w.places.append(pw)
        if pressure is not None and np.isfinite(pressure[i]):
            w.pressure_share = round(float(pressure[i]) / length, 4)
        out.append(w)
    return out


def _one_row_per_other_run(agg: pd.DataFrame) -> pd.DataFrame:
    """Another WoTbench run's processes on a core as one row (its many devices each use little;
    together they load the core): the busiest one's pid, their command names."""
    other = agg["owner_kind"] == "wotbench"
    if not other.any():
        return agg
    rows = []
    for (core, owner), g in agg[other].groupby(["core", "owner"], dropna=False):
        top = g.sort_values("cpu_ns", ascending=False).iloc[0]
        comms = ", ".join(sorted(set(g["comm"].astype(str))))
        rows.append({"core": core, "pid": top["pid"], "comm": comms[:60],
                     "owner_kind": "wotbench", "owner": owner, "cpu_ns": g["cpu_ns"].sum()})
    return pd.concat([agg[~other], pd.DataFrame(rows)], ignore_index=True)


SERIES_COLUMNS = ["window", "start_s", "end_s", "place", "requests", "cpu_s", "wait_s",
                  "wait_share", "wait_ms_per_request", "service_ms_per_request",
                  "wait_of_service", "stretch_p50", "stretch_p90", "lag_p99_ms", "late_share",
                  "wakeup_p95_ms", "foreign_share", "steal_share", "pressure_share", "flags"]


def series(block: EvidenceBlock) -> pd.DataFrame:
    rows = []
    for w in ([block.calibration] if block.calibration else []) + block.windows:
        for pw in w.places:
            rows.append({"window": w.window, "start_s": w.start_s, "end_s": w.end_s,
                         **pw.model_dump(), "pressure_share": w.pressure_share,
                         "flags": ";".join(f.rule for f in w.flags if f.place == pw.place)})
    return pd.DataFrame(rows, columns=SERIES_COLUMNS)


HOST_SHARE_COLUMNS = ["window", "start_s", "end_s", "place", "requests", "r_ms", "system_ms",
                      "testbed_ms", "testbed_low_ms", "testbed_high_ms", "testbed_share",
                      "added_by", "own_ms", "grade", "beyond_tolerance"]


def host_share_series(block: EvidenceBlock) -> pd.DataFrame:
    """``series/host_share.csv``: per window and place, the measured mean R split into the
    system's part and the testbed's (the host's added latency beyond the run's own level)."""
    rows = []
    for w in block.windows:
        for pw in w.places:
            if pw.added_ms is None and pw.r_ms is None:
                continue
            testbed = pw.added_ms
            system = (pw.r_ms - testbed) if pw.r_ms is not None and testbed is not None else None
            rows.append({"window": w.window, "start_s": w.start_s, "end_s": w.end_s,
                         "place": pw.place, "requests": pw.requests, "r_ms": pw.r_ms,
                         "system_ms": system, "testbed_ms": testbed,
                         "testbed_low_ms": pw.added_low_ms, "testbed_high_ms": pw.added_high_ms,
                         "testbed_share": pw.added_share, "added_by": pw.added_by,
                         "own_ms": pw.own_ms, "grade": pw.grade,
                         "beyond_tolerance": pw.beyond_tolerance})
    return pd.DataFrame(rows, columns=HOST_SHARE_COLUMNS)
