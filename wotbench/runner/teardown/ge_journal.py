"""What a killed gateway emulator measured: its journal (``--journal``) turned into its files.

The GE keeps its request table in a shared mapping of a file on a tmpfs
(``gateway-emulator/src/journal.c``); when the GE dies before writing ``requests.csv`` and
``summary.json`` (SIGKILL, an OOM kill, ``docker kill``), the table is still there. This module
reads it with the GE's own trace (for each request's path) and writes both files as the GE
would have on SIGTERM (contract §2: a request sent and still unanswered is ``error`` with
``sent_ns`` and no code — the analysis places it as ``interrupted`` — or ``timeout`` when it was
already older than the timeout), with ``"salvaged": true`` in the summary.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional
from urllib.parse import urlsplit

import numpy as np
import pandas as pd

from wotbench.rundir import atomic
from wotbench.rundir.layout import GE_REQUESTS, GE_SUMMARY
from wotbench.workload.trace_io import read_trace

MAGIC = 0x314E524A45474257          # "WBGEJRN1"
HEADER = np.dtype([("magic", "<u8"), ("version", "<u4"), ("record_size", "<u4"), ("n", "<u8"),
                   ("start_mono_ns", "<i8"), ("token_salt", "<u8"), ("timeout_ns", "<i8"),
                   ("scheme", "<u4"), ("reserved32", "<u4"), ("reserved", "<u8")])
SCHEME_HTTP = 3     # ge.h SCHEME_*: the records hold the HTTP status (code: its class)
# req_t (gateway-emulator/src/ge.h), 72 bytes
RECORD = np.dtype({"names": ["sched_ns", "sent_ns", "recv_ns", "device", "status", "code",
                             "outcome", "flags", "retrans", "rx_wait_ns"],
                   "formats": ["<i8", "<i8", "<i8", "<u4", "<u2", "u1", "u1", "u1", "u1", "<u4"],
                   "offsets": [0, 8, 16, 32, 50, 57, 58, 59, 60, 64], "itemsize": 72})
RF_SENT, RF_DONE, RF_KSTAMP = 0x01, 0x02, 0x08
OUTCOMES = ["none", "ok", "error", "timeout", "reset", "unsent"]
O_ERROR, O_TIMEOUT, O_RESET, O_UNSENT = 2, 3, 4, 5
METHODS = {"GET": "GET", "PUT": "PUT", "POST": "POST", "DELETE": "DELETE",
           "OBSERVE": "OBSERVE", "CANCEL": "CANCEL", "PATCH": "PATCH"}


class JournalError(Exception):
    """The journal cannot be read as one (wrong file, another GE version, truncated)."""


def read_journal(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(header record, request records) of a journal file."""
    raw = Path(path).read_bytes()
    if len(raw) < HEADER.itemsize:
        raise JournalError(f"{path}: {len(raw)} bytes, shorter than its header")
    head = np.frombuffer(raw, HEADER, count=1)[0]
    if int(head["magic"]) != MAGIC or int(head["record_size"]) != RECORD.itemsize:
        raise JournalError(f"{path}: not a version-1 gateway-emulator journal")
    n = int(head["n"])
    if len(raw) < HEADER.itemsize + n * RECORD.itemsize:
        raise JournalError(f"{path}: truncated ({n} records announced)")
    return head, np.frombuffer(raw, RECORD, count=n, offset=HEADER.itemsize)


def _paths(trace: pd.DataFrame) -> list[str]:
    out = []
    for uri in trace["uri"].astype(str):
        u = urlsplit(uri)
        out.append(u.path.lstrip("/") + (f"?{u.query}" if u.query else ""))
    return out


def salvage(journal: Path, trace_file: Path, out_dir: Path, label: str, died_mono_ns: int,
            settings: dict) -> dict[str, int]:
    """Write ``requests.csv`` and ``summary.json`` into ``out_dir`` from the journal of a GE that
    died at ``died_mono_ns`` (or was last seen then); ``settings``: the summary's ``wait``,
    ``type`` and ``retransmit`` as the GE was started. The outcome counts."""
    head, rec = read_journal(journal)
    trace = read_trace(trace_file)
    if len(trace) != len(rec):
        raise JournalError(f"{journal}: {len(rec)} records for {len(trace)} trace lines in "
                           f"{trace_file}")
    start = int(head["start_mono_ns"])
    timeout = int(head["timeout_ns"])
    flags, outcome = rec["flags"], rec["outcome"].astype(np.int64).copy()
    sent = (flags & RF_SENT) != 0
    done = (flags & RF_DONE) != 0
    elapsed = (died_mono_ns - start) if start else 0
    # in flight when the GE died: as the GE itself finishes them on SIGTERM (contract §2)
    pending = sent & ~done
    outcome[pending] = np.where(elapsed - rec["sent_ns"][pending] > timeout, O_TIMEOUT, O_ERROR)
    outcome[~sent & ~done] = O_UNSENT
    answered = (rec["code"] != 0) | (outcome == O_RESET)
    answered &= done
    code_s = np.where(done & (rec["code"] != 0), _codes(rec, int(head["scheme"])), "")
    kstamp = answered & ((flags & RF_KSTAMP) != 0)
    df = pd.DataFrame({
        "index": np.arange(len(rec)), "device": rec["device"].astype(np.int64),
        "method": trace["method"].astype(str).map(METHODS).fillna(trace["method"]).to_numpy(),
        "path": _paths(trace), "scheduled_ns": rec["sched_ns"],
        "sent_ns": _where(rec["sent_ns"], sent),
        "received_ns": _where(rec["recv_ns"], answered),
        "code": code_s,
        "outcome": [OUTCOMES[o] for o in outcome],
        "retransmissions": rec["retrans"].astype(np.int64),
        "received_kernel_ns": _where(rec["recv_ns"] - rec["rx_wait_ns"].astype(np.int64),
                                     kstamp)})
    out_dir.mkdir(parents=True, exist_ok=True)
    with atomic.replacing_path(out_dir / GE_REQUESTS) as tmp:
        df.to_csv(tmp, index=False)
    counts = {name: int((outcome == i).sum()) for i, name in enumerate(OUTCOMES) if i}
    last_sent = int(rec["sent_ns"][sent].max()) if sent.any() else 0
    last_sched = int(rec["sched_ns"][-1]) if len(rec) else 0
    summary = {
        "label": label, "trace": str(trace_file), "requests": int(len(rec)), "outcomes": counts,
        "start_mono_ns": start, "end_mono_ns": int(died_mono_ns),
        "duration_s": max(0.0, elapsed / 1e9), "offered_rate":
            len(rec) / (last_sched / 1e9) if last_sched > 0 else 0.0,
        "achieved_rate": int(sent.sum()) / (last_sent / 1e9) if last_sent > 0 else 0.0,
        "send_lag_us": _lag(rec[sent]), "warmup": None,
        "token_salt": f"{int(head['token_salt']):016x}",
        "rx_stamps": "kernel" if kstamp.any() else "user",
        "clock_map_bracket_ns": None, "memory_locked": None, **settings,
        "timeout_ms": timeout // 1_000_000, "ports_per_device": 0,
        "interrupted": True, "salvaged": True}
    atomic.write_json(out_dir / GE_SUMMARY, summary)
    return counts


def _codes(rec: np.ndarray, scheme: int) -> list[str]:
    """Each record's code as the GE writes it: the HTTP status (``404``) of an http:// GE, else
    the CoAP code (``4.04``)."""
    if scheme == SCHEME_HTTP:
        return [str(s) for s in rec["status"]]
    return [f"{c >> 5}.{c & 31:02d}" for c in rec["code"].astype(np.int64)]


def _where(values: np.ndarray, valid: np.ndarray) -> pd.Series:
    """Integers where ``valid``, empty cells elsewhere."""
    return pd.Series(values.astype(np.int64), dtype="Int64").mask(~valid)


def _lag(sent: np.ndarray) -> dict[str, float]:
    lag = (sent["sent_ns"] - sent["sched_ns"]) / 1e3
    if not len(lag):
        return {k: 0.0 for k in ("p50", "p90", "p99", "p999", "max")}
    q = np.percentile(lag, [50, 90, 99, 99.9])
    return {"p50": float(q[0]), "p90": float(q[1]), "p99": float(q[2]), "p999": float(q[3]),
            "max": float(lag.max())}


def salvage_needed(out_dir: Path, journal: Optional[Path]) -> bool:
    """The GE left no summary.json but a journal."""
    return journal is not None and journal.exists() and not (out_dir / GE_SUMMARY).exists()
