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

from wotbench.config.notify import Notify
from wotbench.config.schema import Config, device_name
from wotbench.rundir.notify import NotifyBlock, NotifyLatency, NotifySubscriber

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


def updates_of(ge_dir: Path, methods: tuple[str, ...] = UPDATE_METHODS) -> pd.DataFrame:
    """The GE's updates: seq (the requests.csv row), sent (mono ns), ok, device, path."""
    req = pd.read_csv(ge_dir / "requests.csv",
                      usecols=["index", "device", "method", "path", "sent_ns", "outcome"],
                      dtype={"path": str})
    start = json.loads((ge_dir / "summary.json").read_text())["start_mono_ns"]
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


def figures(updates: pd.DataFrame, notes: pd.DataFrame, sink: dict,
            scopes: Optional[dict[str, tuple[int, str]]] = None) -> list[SubscriberFigures]:
    """One block per subscriber of sink.json; ``scopes``: subscriber -> (device id, path) of its
    own updates (the others' are neither its losses nor its latencies)."""
    window_s = max((sink["end_mono_ns"] - sink["start_mono_ns"]) / 1e9, 1e-9)
    every = updates
    out = []
    for sub in sink["subscribers"]:
        updates = _own(every, (scopes or {}).get(sub["name"]))
        sent = updates.set_index("seq")["sent"]
        ok_ids = set(updates.loc[updates["ok"], "seq"].tolist())
        n = notes[notes["subscriber"] == sub["name"]]
        first = n.sort_values("received_ns").drop_duplicates("id")
        known = first[first["id"].isin(sent.index)]
        counted = known[known["id"].isin(ok_ids)]   # latency only of updates that count
        lat = (counted["received_ns"].to_numpy(np.float64)
               - sent.loc[counted["id"]].to_numpy(np.float64)) / 1e6
        notified = len(counted)
        lost = len(ok_ids) - notified
        not_judged = int(updates["not_judged"].eq(True).sum()) if "not_judged" in updates else 0
        out.append(SubscriberFigures(
            name=sub["name"], kind=sub["kind"], updates=len(ok_ids), notified=notified,
            lost=lost, lost_share=lost / len(ok_ids) if ok_ids else None,
            duplicates=len(n) - len(first), unknown_ids=len(first) - len(known),
            notifications_per_s=_rate(n["received_ns"].to_numpy(np.int64), window_s),
            latency_ms=_quantiles(lat),
            kernel_share=float(n["kernel"].mean()) if len(n) else None,
            not_judged=not_judged))
    return out


def device_ids(raw: dict) -> dict[str, int]:
    """device name -> its position in the config's devices (requests.csv's ``device``)."""
    ids, first = {}, 0
    for g in raw.get("devices") or []:
        for i in range(int(g.get("count", 1))):
            ids[device_name(g["group"], i)] = first + i
        first += int(g.get("count", 1))
    return ids


def _resolved(run_dir: Path) -> dict:
    """The run's config.resolved.yaml as a dict ({} when absent or not a mapping): read once
    per analysis, for the subscribers' scopes, the event emissions and their failures."""
    conf = run_dir / "config.resolved.yaml"
    if not conf.is_file():
        return {}
    import yaml
    raw = yaml.safe_load(conf.read_text()) or {}
    return raw if isinstance(raw, dict) else {}


def scopes_of(raw: dict) -> dict[str, tuple[int, str]]:
    """subscriber -> (device id, updates_to) of the run's notify.subscribers that have one (the
    id: the device's position in the config's devices, requests.csv's ``device``)."""
    ids = device_ids(raw)
    subs = (raw.get("notify") or {}).get("subscribers") or []
    return {s["name"]: (ids[s["device"]], s["updates_to"]) for s in subs
            if isinstance(s, dict) and s.get("updates_to") is not None and s.get("device") in ids}


def analyse(ge_dir: Path, sink_dir: Path,
            scopes: Optional[dict[str, tuple[int, str]]] = None,
            emitted: Optional[pd.DataFrame] = None) -> list[SubscriberFigures]:
    """``emitted``: the HTTP Things' event emissions, updates of the same shape
    (:func:`wotbench.things.sse_events.emission_updates`)."""
    notes = pd.read_csv(sink_dir / "notifications.csv",
                        dtype={"subscriber": str, "id": np.int64, "received_ns": np.int64,
                               "kernel": np.int8})
    sink = json.loads((sink_dir / "sink.json").read_text())
    updates = updates_of(ge_dir)
    if emitted is not None and len(emitted):
        updates = pd.concat([updates, emitted], ignore_index=True)
    return figures(updates, notes, sink, scopes)


def _emitted(run_dir: Path, ge_dir: Path, raw: dict) -> Optional[pd.DataFrame]:
    """The events HTTP Things emitted on their own schedule (subscribeevent over SSE), or None."""
    from wotbench.things.sse_events import emission_updates
    if not raw:
        return None
    start = int(json.loads((ge_dir / "summary.json").read_text())["start_mono_ns"])
    sink_end = int(json.loads((run_dir / "sink" / "sink.json").read_text())["end_mono_ns"])
    timeout_ms = (raw.get("notify") or {}).get("timeout_ms") \
        or Notify.model_fields["timeout_ms"].default
    return emission_updates(run_dir, device_ids(raw), start,
                            start + int(float(raw.get("duration_s") or
                                              Config.model_fields["duration_s"].default) * 1e9),
                            sink_end - int(timeout_ms * 1e6))


def block(run_dir: Path, ge_dirs: list[Path]) -> Optional[NotifyBlock]:
    """summary.json ``notify`` of a run with ``notify:`` (its ``sink/`` files), else None. The
    ids are one GE's rows (wotbench.config.notify allows one main GE)."""
    sink_dir = run_dir / "sink"
    if not (sink_dir / "sink.json").exists() or len(ge_dirs) != 1:
        return None
    raw = _resolved(run_dir)
    subs = analyse(ge_dirs[0], sink_dir, scopes_of(raw), _emitted(run_dir, ge_dirs[0], raw))
    sink = json.loads((sink_dir / "sink.json").read_text())
    return NotifyBlock(marker=sink["marker"], subscribers=[
        NotifySubscriber.model_validate({**asdict(f), "latency_ms": NotifyLatency(**f.latency_ms)})
        for f in subs], failures=_failures(run_dir, raw))


def _failures(run_dir: Path, raw: dict) -> list[str]:
    from wotbench.things.sse_events import missing_emissions
    return missing_emissions(run_dir, raw) if raw else []


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
