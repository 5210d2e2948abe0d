"""Update -> notification latency (issue 35): the notification sink's ``notifications.csv``
(``gateway-emulator/src/sink_*.c``: subscriber, id, received_ns on CLOCK_MONOTONIC, kernel)
joined to the gateway emulator's updates (``requests.csv``: the id is the row, ``{{seq}}`` in
the update's path or body; sent_ns from the GE's start, ``summary.json`` start_mono_ns).

Per subscriber: updates sent (answered 2xx), notified (at least once), never notified (lost),
duplicates, ids the GE never sent (unknown), notifications/s over the sink's run, and the
latency from the update's send to the notification's arrival (kernel stamps on both ends where
the kernel gave them; the same host's CLOCK_MONOTONIC, so no clock offset is involved), over
the updates that count only (answered 2xx; a failed update, or an event emitted outside the
test, is in no figure: neither counted, nor lost, nor an unknown id, nor a latency).
``python -m wotbench.analysis.notify_sink GE_DIR SINK_DIR`` prints it as JSON.
"""
from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd

from pydantic import ValidationError

from wotbench.analysis.errors import AnalysisError
from wotbench.analysis.loading import read_model
from wotbench.analysis.resolved import ResolvedSpecs
from wotbench.config.schema import Config
from wotbench.rundir import GeSummary, RunDir
from wotbench.rundir.layout import GE_REQUESTS, GE_SUMMARY, SINK_JSON, SINK_NOTIFICATIONS
from wotbench.rundir.notify import NotifyBlock, NotifyLatency, NotifySubscriber
from wotbench.rundir.sink_files import SinkSummary
from wotbench.schema_errors import problems as schema_problems

UPDATE_METHODS = ("POST", "PUT", "PATCH")


@dataclass
class SubscriberFigures:
    name: str
    kind: str
    updates: int                   # updates answered 2xx (each should be notified)
    notified: int                  # of them, notified at least once
    lost: int                      # never notified
    lost_share: Optional[float]
    duplicates: int                # notifications of an update already notified
    unknown_ids: int               # ids no update of this GE carried
    notifications_per_s: float     # from the first to the last arrival
    latency_ms: dict = field(default_factory=dict)   # min p50 p90 p99 p999 max mean
    kernel_share: Optional[float] = None             # notifications with a kernel stamp
    not_judged: int = 0            # events emitted in the test too close to the sink's stop


def read_ge(ge_dir: Path) -> GeSummary:
    return read_model(ge_dir / GE_SUMMARY, GeSummary, "the updating GE's summary.json")


def read_sink(sink_dir: Path) -> SinkSummary:
    return read_model(sink_dir / SINK_JSON, SinkSummary, "the notification sink's sink.json")


def updates_of(ge_dir: Path, start: int, methods: tuple[str, ...] = UPDATE_METHODS
               ) -> pd.DataFrame:
    """The GE's updates: seq (the requests.csv row), sent (mono ns: ``start``, its summary's
    start_mono_ns, + sent_ns), ok, device, path."""
    req = pd.read_csv(ge_dir / GE_REQUESTS,
                      usecols=["index", "device", "method", "path", "sent_ns", "outcome"],
                      dtype={"path": str})
    req = req[req["method"].isin(methods)]
    return pd.DataFrame({"seq": req["index"].to_numpy(np.int64),
                         "sent": start + req["sent_ns"].to_numpy(np.float64),
                         "ok": (req["outcome"] == "ok").to_numpy(),
                         "device": req["device"].to_numpy(),
                         "path": req["path"].fillna("").str.lstrip("/").to_numpy()})


def _own(updates: pd.DataFrame, scope: Optional[tuple[int, str]]) -> pd.DataFrame:
    """The updates of one subscriber: those to (device id, path) when it has ``updates_to``
    (notify.subscribers[], e.g. an HTTP Thing's writeproperty form), else all of them."""
    if scope is None or "device" not in updates:
        return updates
    return updates[(updates["device"] == scope[0]) & (updates["path"] == scope[1].lstrip("/"))]


def _quantiles(x: np.ndarray) -> dict:
    if not len(x):
        return {}
    q = np.quantile(x, [0.5, 0.9, 0.99, 0.999])
    return {"min": float(x.min()), "p50": float(q[0]), "p90": float(q[1]), "p99": float(q[2]),
            "p999": float(q[3]), "max": float(x.max()), "mean": float(x.mean())}


def _rate(received_ns: np.ndarray, window_s: float) -> float:
    """Notifications per second while they came: (n - 1) over the first to the last arrival
    (not over the sink's whole run, which starts before the updates and ends after them)."""
    if len(received_ns) < 2:
        return len(received_ns) / window_s
    span = (received_ns.max() - received_ns.min()) / 1e9
    return (len(received_ns) - 1) / span if span > 0 else 0.0


def figures(updates: pd.DataFrame, notes: pd.DataFrame, sink: SinkSummary,
            scopes: Optional[dict[str, tuple[int, str]]] = None) -> list[SubscriberFigures]:
    """One block per subscriber of sink.json; ``scopes``: subscriber -> (device id, path) of its
    own updates (the others' are neither its losses nor its latencies)."""
    window_s = max((sink.end_mono_ns - sink.start_mono_ns) / 1e9, 1e-9)
    every = updates
    out = []
    for sub in sink.subscribers:
        updates = _own(every, (scopes or {}).get(sub.name))
        sent = updates.set_index("seq")["sent"]
        ok_ids = set(updates.loc[updates["ok"], "seq"].tolist())
        n = notes[notes["subscriber"] == sub.name]
        first = n.sort_values("received_ns").drop_duplicates("id")
        known = first[first["id"].isin(sent.index)]
        counted = known[known["id"].isin(ok_ids)]   # latency only of updates that count
        lat = (counted["received_ns"].to_numpy(np.float64)
               - sent.loc[counted["id"]].to_numpy(np.float64)) / 1e6
        notified = len(counted)
        lost = len(ok_ids) - notified
        not_judged = int(updates["not_judged"].eq(True).sum()) if "not_judged" in updates else 0
        out.append(SubscriberFigures(
            name=sub.name, kind=sub.kind, updates=len(ok_ids), notified=notified,
            lost=lost, lost_share=lost / len(ok_ids) if ok_ids else None,
            duplicates=len(n) - len(first), unknown_ids=len(first) - len(known),
            notifications_per_s=_rate(n["received_ns"].to_numpy(np.int64), window_s),
            latency_ms=_quantiles(lat),
            kernel_share=float(n["kernel"].mean()) if len(n) else None,
            not_judged=not_judged))
    return out


@dataclass
class RunConfig:
    """The run's config.resolved.yaml, read once per analysis: its mapping (the Things'
    emission checks read it) and the :class:`Config` it validates as."""
    raw: dict
    config: Config

    def device_ids(self) -> dict[str, int]:
        """device name -> its position in the config's devices (requests.csv's ``device``)."""
        return {n: i for i, n in enumerate(self.config.device_names())}

    def scopes(self) -> dict[str, tuple[int, str]]:
        """subscriber -> (device id, updates_to) of the run's notify.subscribers that have one
        (the id: the device's position in the config's devices, requests.csv's ``device``)."""
        ids = self.device_ids()
        subs = self.config.notify.subscribers if self.config.notify is not None else []
        return {s.name: (ids[s.device], s.updates_to) for s in subs
                if s.updates_to is not None and s.device in ids}


def _resolved(specs: ResolvedSpecs) -> Optional[RunConfig]:
    """The run's config from the analysis's one read of config.resolved.yaml (None when it is
    absent or not a mapping); one that is not a Config is an AnalysisError naming the file and
    the keys."""
    raw = specs.raw
    if not isinstance(raw, dict) or not raw:
        return None
    try:
        return RunConfig(raw, Config.model_validate(raw))
    except ValidationError as e:
        raise AnalysisError(f"{specs.path}: " + "; ".join(schema_problems(e, Config))) from None


def analyse(ge_dir: Path, sink_dir: Path,
            scopes: Optional[dict[str, tuple[int, str]]] = None,
            emitted: Optional[pd.DataFrame] = None) -> list[SubscriberFigures]:
    """``emitted``: the HTTP Things' event emissions, updates of the same shape
    (:func:`wotbench.things.sse_events.emission_updates`). Reads the GE's summary.json and
    sink.json (:func:`block` is given them)."""
    return _analyse(ge_dir, read_ge(ge_dir).start_mono_ns, sink_dir, read_sink(sink_dir),
                    scopes, emitted)


def _analyse(ge_dir: Path, start: int, sink_dir: Path, sink: SinkSummary,
             scopes: Optional[dict[str, tuple[int, str]]],
             emitted: Optional[pd.DataFrame]) -> list[SubscriberFigures]:
    notes = pd.read_csv(sink_dir / SINK_NOTIFICATIONS,
                        dtype={"subscriber": str, "id": np.int64, "received_ns": np.int64,
                               "kernel": np.int8})
    updates = updates_of(ge_dir, start)
    if emitted is not None and len(emitted):
        updates = pd.concat([updates, emitted], ignore_index=True)
    return figures(updates, notes, sink, scopes)


def _emitted(run_dir: Path, start: int, sink: SinkSummary, conf: Optional[RunConfig]
             ) -> Optional[pd.DataFrame]:
    """The events HTTP Things emitted on their own schedule (subscribeevent over SSE), or None."""
    from wotbench.things.sse_events import emission_updates
    if conf is None or conf.config.notify is None:   # no sink was started without notify:
        return None
    return emission_updates(run_dir, conf.device_ids(), start,
                            start + int(float(conf.config.duration_s) * 1e9),
                            sink.end_mono_ns - int(conf.config.notify.timeout_ms * 1e6))


def block(run_dir: Path, ges: list[tuple[Path, GeSummary]],
          specs: ResolvedSpecs) -> Optional[NotifyBlock]:
    """summary.json ``notify`` of a run with ``notify:`` (its ``sink/`` files), else None.
    ``ges``: each main GE's directory and its summary, as the analysis loaded them; ``specs``:
    its read of config.resolved.yaml (:func:`wotbench.analysis.resolved.read`). The ids are one
    GE's rows (wotbench.config.notify allows one main GE)."""
    rd = RunDir(run_dir)
    if not rd.sink_json.exists() or len(ges) != 1:
        return None
    (ge_dir, ge), sink = ges[0], read_sink(rd.sink_dir)
    conf = _resolved(specs)
    subs = _analyse(ge_dir, ge.start_mono_ns, rd.sink_dir, sink,
                    conf.scopes() if conf is not None else {},
                    _emitted(run_dir, ge.start_mono_ns, sink, conf))
    return NotifyBlock(marker=sink.marker, subscribers=[
        NotifySubscriber.model_validate({**asdict(f), "latency_ms": NotifyLatency(**f.latency_ms)})
        for f in subs], failures=_failures(run_dir, conf))


def _failures(run_dir: Path, conf: Optional[RunConfig]) -> list[str]:
    from wotbench.things.sse_events import missing_emissions
    return missing_emissions(run_dir, conf.raw) if conf is not None else []


def invalidate(verdict, notify: Optional[NotifyBlock]) -> None:
    """The notify block's testbed failures make the run's verdict invalid (exit 3), each one a
    reason: figures that are unknown must not read as "nothing lost"."""
    if notify is None or not notify.failures:
        return
    verdict.reasons[:0] = notify.failures
    verdict.status, verdict.exit_code, verdict.checks.data = "invalid", 3, "invalid"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m wotbench.analysis.notify_sink GE_DIR SINK_DIR", file=sys.stderr)
        return 2
    print(json.dumps([asdict(f) for f in analyse(Path(argv[0]), Path(argv[1]))], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
