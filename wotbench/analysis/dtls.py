"""DTLS handshakes (coaps://, issue 13): how long the GEs' handshakes took, how many failed and
why, from each GE's handshakes.csv and the "dtls" member of its summary.json (CONTRACTS §2).

``reuse`` sessions are handshaken before the start, so request times exclude them;
``per-request`` sessions open one handshake per request on the schedule (a handshake storm) and
the request's R counts from its first application record. A request whose session never came
up ends ``error`` without a send time: a testbed/config problem (wrong PSK, unreachable
server), never the system under test; the loss analysis counts it under ``local_send``.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import pandas as pd

from wotbench.rundir.layout import GE_SUMMARY
from wotbench.rundir.summary import BlockTimes, DtlsBlock, DtlsMode

from wotbench.analysis.errors import AnalysisError
from wotbench.analysis.loading import GeData, RunData
from wotbench.analysis.stats import quantiles_of


def handshakes(run: RunData) -> pd.DataFrame:
    """Every GE's handshakes: ge, mode, session, device, t_s (start, s from the test start),
    time_ms (NaN unless ok), outcome, request."""
    frames = []
    for g in run.ges:
        h = g.handshakes
        if h is None or not len(h):
            continue
        off = float(g.start_mono_ns - run.test_start_ns)
        start = h["start_ns"].to_numpy(np.float64)
        end = h["end_ns"].to_numpy(np.float64)
        ok = (h["outcome"].astype(str) == "ok").to_numpy()
        frames.append(pd.DataFrame({
            "ge": g.ge_id, "mode": _mode(g),
            "session": h["session"].to_numpy(np.int64), "device": h["device"].to_numpy(np.int64),
            "t_s": (start + off) / 1e9, "time_ms": np.where(ok, (end - start) / 1e6, np.nan),
            "outcome": h["outcome"].astype(str).to_numpy(),
            "request": h["request"].to_numpy(np.int64)}))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _mode(g: GeData) -> str:
    """The GE's session mode; a handshakes.csv without the summary's ``dtls`` member (which
    every GE that writes one also writes) is an error naming the file."""
    if g.summary.dtls is None:
        raise AnalysisError(f"{g.dir / GE_SUMMARY}: summary.json of {g.ge_id}: dtls: required "
                            "key missing (the GE wrote handshakes.csv)")
    return g.summary.dtls.mode


def integrity_view(sub: pd.DataFrame, g: GeData, test_start_ns: int) -> pd.DataFrame:
    """The GE-integrity check judges how well a GE kept its schedule. With per-request sessions
    the schedule's action is the handshake start (the request itself leaves a handshake
    later), so ``sent`` becomes the handshake start for those rows."""
    h = g.handshakes
    if h is None or not len(h) or _mode(g) != "per-request":
        return sub
    h = h[h["request"] >= 0]
    start = pd.Series(h["start_ns"].to_numpy(np.float64) + float(g.start_mono_ns - test_start_ns),
                      index=h["request"].to_numpy(np.int64))
    hs_start = start.reindex(sub["index"].to_numpy(np.int64)).to_numpy()
    out = sub.copy()
    out["sent"] = np.where(np.isnan(hs_start), out["sent"].to_numpy(np.float64), hs_start)
    return out


def session_less_errors(run: RunData) -> int:
    """Requests of DTLS GEs that ended ``error`` without a send time and without a response
    code: their session never came up (or the GE's own send failed)."""
    n = 0
    for g in run.ges:
        if g.handshakes is None:
            continue
        r = g.requests
        n += int(((r["outcome"].astype(str) == "error") & r["sent_ns"].isna() & r["code"].isna()).sum())
    return n


def analyse(run: RunData) -> tuple[Optional[DtlsBlock], dict[str, pd.DataFrame]]:
    """The ``dtls`` block of summary.json (None without DTLS) and the handshake series."""
    t = handshakes(run)
    dtls = [g.summary.dtls for g in run.ges if g.summary.dtls is not None]
    if t.empty and not dtls:
        return None, {}
    by_mode: dict[str, DtlsMode] = {}
    for mode, m in (t.groupby("mode") if not t.empty else []):
        ok = m["outcome"] == "ok"
        by_mode[str(mode)] = DtlsMode(
            handshakes=len(m), ok=int(ok.sum()), failed=int((m["outcome"] == "failed").sum()),
            timeout=int((m["outcome"] == "timeout").sum()),
            time_ms=quantiles_of(BlockTimes, m[ok]["time_ms"].to_numpy(np.float64)))
    block = DtlsBlock(
        modes=sorted(by_mode) or sorted({d.mode for d in dtls}),
        by_mode=by_mode,
        handshakes=len(t), handshakes_failed=int((t["outcome"] != "ok").sum()) if not t.empty else 0,
        requests_without_session=session_less_errors(run),
        failures=sorted({d.failure for d in dtls if d.failure}),
        ciphers=sorted({d.cipher for d in dtls if d.cipher}),
        slots_exhausted=sum(d.slots_exhausted for d in dtls),
        attribution="testbed/config (not the system under test)")
    series = {"dtls_handshakes": t} if not t.empty else {}
    return block, series


def verdict_note(block: Optional[DtlsBlock]) -> str | None:
    """A reason line for the verdict when handshakes failed (None otherwise)."""
    if not block or not (block.handshakes_failed or block.slots_exhausted):
        return None
    why = "; ".join(block.failures) or "no reason recorded"
    return (f"{block.handshakes_failed} of {block.handshakes} DTLS handshakes failed "
            f"({why}); {block.requests_without_session} request(s) found no DTLS session and "
            f"ended as error. That is a testbed/config problem (credentials, reachability), "
            f"not the system under test")
