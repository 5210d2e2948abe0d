"""The analysis reads exactly the files docs/CONTRACTS.md §3b says wot-fleet writes: the
columns of fleet-log-<loop>.csv and fleet-devices.csv and the keys of fleet-summary.json, as
the contract's text names them (a change on either side fails here, not in a run)."""
from __future__ import annotations

import re
from pathlib import Path

from wotbench.rundir.fleet_files import (FLEET_DEVICE_COLUMNS, FLEET_LOG_COLUMNS, FleetLoop,
                                         FleetSummary, LagQuantiles)

CONTRACTS = Path(__file__).resolve().parents[2] / "docs" / "CONTRACTS.md"


def _section() -> str:
    text = CONTRACTS.read_text()
    start = text.index("## 3b.")
    return text[start:text.index("\n## ", start + 5)]


def _after(marker: str) -> str:
    """The text from ``marker`` (its first occurrence after 'Files written at exit')."""
    sec = _section()
    sec = sec[sec.index("Files written at exit"):]
    return sec[sec.index(marker):]


def _first_code(text: str) -> str:
    return re.search(r"`([^`]+)`", text).group(1)


def _keys(text: str) -> list[str]:
    return re.findall(r'"([a-z_0-9]+)"', text)


def test_fleet_log_columns_are_the_contracts():
    cols = _first_code(_after("`fleet-log-<loop>.csv`").split("\n", 1)[1])
    assert cols.split(",") == list(FLEET_LOG_COLUMNS)


def test_fleet_devices_columns_are_the_contracts():
    cols = _first_code(_after("`fleet-devices.csv`:")[len("`fleet-devices.csv`:"):])
    assert cols.split(",") == list(FLEET_DEVICE_COLUMNS)


def test_fleet_summary_keys_are_the_contracts():
    text = _after("`fleet-summary.json`:")
    top, rest = text.split("each `loop` entry", 1)
    # the top-level keys are the first `{...}` span; the blocks' own keys follow in prose
    assert _keys(re.search(r"`\{[^`]*\}`", top).group(0)) == list(FleetSummary.model_fields)
    loop = rest[:rest.index("}")]
    assert _keys(loop) == list(FleetLoop.model_fields)
    quantiles = rest[rest.index("are `{") + len("are `"):]
    assert _keys(quantiles[:quantiles.index("}")]) == list(LagQuantiles.model_fields)
