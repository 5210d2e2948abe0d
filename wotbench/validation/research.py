"""Evidence for the detector's defaults (docs/VALIDATION.md "Detector defaults"): the contention
rule re-applied to a recorded run with shorter baselines, and a bootstrap of the rule's false
alarm and detection rates from an empirical pool of CD samples."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from cd_module.verdict import assess
from wotbench.errors import ConfigError
from wotbench.rundir import ContentionParams, RunDir


def calibration_sweep(run_dir: Path, lengths: list[int], params=None) -> list[dict]:
    """Re-apply the contention rule to one run with only the last n calibration probes.

    Evidence for the calibration length: does a shorter baseline change the verdict?"""
    rd = RunDir(run_dir)
    try:
        cd = pd.read_csv(rd.series("cd_samples"))
        run = rd.read_run()
    except (OSError, ValueError) as e:    # pandas' parser errors are ValueErrors
        raise ConfigError([f"{run_dir}: not an analysed run directory ({e})".replace("\n", " ")]) from None
    missing = {"t_s", "phase", "rd", "outcome"} - set(cd.columns)
    if missing:
        raise ConfigError([f"{rd.series('cd_samples')}: lacks column(s) {', '.join(sorted(missing))}"])
    dur = float(run.test.duration_s if run.test else 0)
    p = params or ContentionParams()
    out = []
    cal = cd[cd["phase"] == "calibration"]
    for n in lengths:
        keep = pd.concat([cal.tail(n), cd[cd["phase"] != "calibration"]])
        block, series = assess(keep, dur, p)
        base = block.baseline
        out.append({"n_calibration": int(min(n, len(cal))), "status": block.status,
                    "flagged": [(w.start_s, w.end_s) for w in block.flagged_windows],
                    "threshold": base.threshold_shift if base else None,
                    "median": base.median_rd if base else None,
                    "min_p": float(series["p_value"].min()) if len(series) else None})
    return out


def simulate_rule(pool: list[float], *, n_cal: int, n_win: int, windows: int, shift: float,
                  trials: int = 2000, seed: int = 1, params=None) -> dict[str, float]:
    """Bootstrap the window rule from an empirical pool of CD R_d (CD alone, quiet host).

    Each trial draws a baseline of ``n_cal`` and ``windows`` test windows of ``n_win`` probes from
    the pool (with replacement); one window gets ``+shift`` on every probe. Returns the share of
    trials with a flag in a null window (false alarm) and with the shifted window flagged."""
    rng = np.random.default_rng(seed)
    p = params or ContentionParams(window_s=float(n_win))   # 1 probe/s of window time units
    pool_a = np.asarray(pool, dtype=float)
    fa = det = 0
    for _ in range(trials):
        base = rng.choice(pool_a, n_cal)
        test = rng.choice(pool_a, (windows, n_win))
        test[windows // 2] += shift
        t = np.concatenate([np.arange(n_win) + w * n_win for w in range(windows)]).astype(float)
        df = pd.DataFrame({
            "t_s": np.concatenate([np.arange(-n_cal, 0, dtype=float), t]),
            "phase": ["calibration"] * n_cal + ["test"] * (windows * n_win),
            "rd": np.concatenate([base, test.ravel()]), "outcome": "ok"})
        _, series = assess(df, float(windows * n_win), p)
        fl = series["flagged"].fillna(False).astype(bool).to_numpy()
        det += bool(fl[windows // 2])
        fa += bool(np.delete(fl, windows // 2).any()) if shift else bool(fl.any())
    return {"false_alarm": fa / trials, "detected": det / trials if shift else float("nan")}
