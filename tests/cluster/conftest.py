"""The emulated-cluster tests need root, a Docker daemon and minutes: they run only under
``make test-cluster`` (WOTBENCH_TEST_CLUSTER=1) and are skipped, with the reason, elsewhere."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts" / "cluster"))


def pytest_collection_modifyitems(config, items):
    why = None
    if os.environ.get("WOTBENCH_TEST_CLUSTER") != "1":
        why = "the emulated cluster is tested by make test-cluster only (root, minutes)"
    elif os.geteuid() != 0:
        why = "make test-cluster needs root (network namespaces, daemons)"
    if why:
        here = str(Path(__file__).resolve().parent)
        for item in items:
            if str(item.fspath).startswith(here):
                item.add_marker(pytest.mark.skip(reason=why))
