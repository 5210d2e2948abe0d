"""UTC time stamps, one format each: directory names (``20261123T053000Z``) and records
(``2026-11-23T05:30:00Z``)."""
from __future__ import annotations

from datetime import datetime, timezone


def dir_stamp() -> str:
    """For directory names: ``<name>-20261123T053000Z``."""
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def iso_stamp() -> str:
    """For records (run.json, sweep.json): ``2026-11-23T05:30:00Z``."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def report_stamp() -> str:
    """For a report's "generated" line: ``2026-11-23 05:30 UTC``."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
