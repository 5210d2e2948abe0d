"""HTTP Things' subscribeevent over Server-Sent Events (issue 34, docs/WOT.md "Events of HTTP
Things"): the schedule an instance emits an event on, the ids its events carry, and the
emission file the analysis joins the notification sink's arrivals to.

- **Schedule**: a ``subscribeevent`` entry's ``notify: {dist, mean, cv?}`` (ms between events),
  the semantics of a CoAP event's (:func:`wotbench.things.model._notify_cols`: deterministic,
  uniform of half-width mean*cv*sqrt(3), exponential, normal of sd mean*cv, clipped at 0);
  each instance draws its own gaps (seeded by the run's seed, the group, the entry and the
  instance), its first event at a uniform phase in [0, mean) after the Thing starts.
- **Ids**: the notification sink reads one marker per run followed by 1..19 digits, and the
  run's marker is the updates' (``urn:wot:upd:``). An event's id is ``urn:wot:upd:`` +
  ``EVENT_ID_BASE + group * 10**15 + instance * 10**9 + n`` (``n``: the instance's emission
  counter), beyond any request row of the gateway emulator, so no event id is an update's.
- **Emissions**: the Thing stamps each emission with ``time.monotonic_ns()`` (CLOCK_MONOTONIC,
  its user-space stamp right before it writes the event to its streams: not a kernel stamp)
  into a list, and writes ``EMISSIONS_FILE`` (csv: id, device, path, emitted_ns, streams) into
  its device directory when it stops (one file per process, no file I/O per event).
"""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from wotbench.rundir.layout import SSE_EVENTS_CSV as EMISSIONS_FILE

EVENT_ID_BASE = 10 ** 18
EMISSION_COLUMNS = ("id", "device", "path", "emitted_ns", "streams")
STREAM_EVENTS = 97        # + nothing: rng([seed, gi, STREAM_EVENTS, entry, instance])
MAX_GROUPS, MAX_INSTANCES, MAX_EVENTS = 1000, 10 ** 6, 10 ** 9


def event_id(gi: int, index: int, n: int) -> int:
    """The number after the marker of instance ``index``'s (group ``gi``) ``n``-th event."""
    if not (0 <= gi < MAX_GROUPS and 0 <= index < MAX_INSTANCES and 0 <= n < MAX_EVENTS):
        raise ValueError(f"event id out of range: group {gi}, instance {index}, event {n}")
    return EVENT_ID_BASE + gi * 10 ** 15 + index * 10 ** 9 + n


def gaps_ms(dist: str, mean_ms: float, cv: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` times between events, ms (the CoAP events' semantics, module doc)."""
    if dist == "exponential":
        out = rng.exponential(mean_ms, n)
    elif dist == "uniform" and cv > 0:
        half = mean_ms * cv * 3 ** 0.5
        out = rng.uniform(mean_ms - half, mean_ms + half, n)
    elif dist == "normal":
        out = rng.normal(mean_ms, mean_ms * cv, n)
    else:   # deterministic, or uniform without cv
        out = np.full(n, float(mean_ms))
    return np.maximum(out, 0.0)


class Schedule:
    """An instance's event times: the first at a uniform phase in [0, mean), then the gaps;
    drawn in blocks from its own generator."""
    BLOCK = 256

    def __init__(self, dist: str, mean_ms: float, cv: float, seed: int, gi: int, entry: int,
                 index: int):
        self.dist, self.mean, self.cv = dist, float(mean_ms), float(cv or 0)
        self.rng = np.random.default_rng([seed, gi, STREAM_EVENTS, entry, index])
        self.phase_ms = float(self.rng.uniform(0, self.mean))
        self._block: list[float] = []

    def next_gap_ms(self) -> float:
        if not self._block:
            self._block = gaps_ms(self.dist, self.mean, self.cv, self.BLOCK,
                                  self.rng).tolist()[::-1]
        return self._block.pop()


def write_emissions(path: Path, rows: list[tuple[int, str, str, int, int]]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(EMISSION_COLUMNS)
        w.writerows(rows)


def emission_updates(run_dir: Path, device_ids: dict[str, int], start_ns: int, end_ns: int,
                     judged_until_ns: int):
    """The HTTP Things' emissions of a run as the notification analysis' updates: seq (the
    id), sent (the emission stamp), device (its id), path, and

    - ok: emitted during the test, ``start_ns`` .. ``end_ns`` (the test start and start +
      duration_s, CLOCK_MONOTONIC), and no later than ``judged_until_ns`` (the sink's stop
      minus notify.timeout_ms): only those count as emitted or lost;
    - not_judged: emitted during the test but later than that: the sink stopped before its
      notification had the timeout to arrive, so it is neither notified nor lost.

    One emitted before T0 (or after the test) and notified is in no figure. None when no
    Thing wrote emissions."""
    import pandas as pd
    from wotbench.rundir import RunDir
    files = sorted(RunDir(run_dir).devices_dir.glob(f"*/{EMISSIONS_FILE}"))
    if not files:
        return None
    e = pd.concat([pd.read_csv(f, dtype={"id": np.int64, "device": str, "path": str,
                                         "emitted_ns": np.int64, "streams": np.int64})
                   for f in files], ignore_index=True)
    e = e[e["device"].isin(list(device_ids))]
    t = e["emitted_ns"]
    in_test = ((t >= start_ns) & (t <= end_ns)).to_numpy()
    judged = (t <= judged_until_ns).to_numpy()
    return pd.DataFrame({"seq": e["id"].to_numpy(np.int64),
                         "sent": t.to_numpy(np.float64),
                         "ok": in_test & judged,
                         "not_judged": in_test & ~judged,
                         "device": e["device"].map(device_ids).to_numpy(np.int64),
                         "path": e["path"].fillna("").str.lstrip("/").to_numpy()})


def _event_devices(raw: dict) -> set[str]:
    """The devices of the run's ``things:`` groups whose load subscribes to an event (their
    Thing process writes an emission file when it stops)."""
    from wotbench.config.schema import device_name
    things = raw.get("things") or []
    out = set()
    for g in raw.get("devices") or []:
        k = g.get("thing")
        if not isinstance(k, int) or not 0 <= k < len(things):
            continue
        if any(isinstance(e, dict) and e.get("op") == "subscribeevent"
               for e in things[k].get("load") or []):
            out.update(device_name(g["group"], i) for i in range(int(g.get("count", 1))))
    return out


def missing_emissions(run_dir: Path, raw: dict) -> list[str]:
    """Testbed failures of the notify block: each subscriber to an HTTP Thing's events whose
    device's emissions are in no ``EMISSIONS_FILE`` (its own directory has none and no other
    file holds a row of it). The Thing writes the file only on a clean stop (SIGTERM), so a
    killed process leaves its subscribers' updates and losses unknown, not zero."""
    import pandas as pd
    from wotbench.rundir import RunDir
    events = _event_devices(raw)
    subs = [s for s in (raw.get("notify") or {}).get("subscribers") or []
            if isinstance(s, dict) and s.get("device") in events and s.get("updates_to")]
    if not subs:
        return []
    files = sorted(RunDir(run_dir).devices_dir.glob(f"*/{EMISSIONS_FILE}"))
    have = {f.parent.name for f in files}
    for f in files:
        have.update(pd.read_csv(f, usecols=["device"], dtype={"device": str})["device"])
    return [f"notify: subscriber {s['name']}: no emission of {s['device']} in any "
            f"devices/*/{EMISSIONS_FILE} (its HTTP Thing process did not stop cleanly, or its "
            "file is missing): its events' updates and losses are unknown"
            for s in subs if s["device"] not in have]
