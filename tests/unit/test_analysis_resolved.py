"""config.resolved.yaml's verdict:, slo: and notify.slo are read once per analysis, each
section through its typed model (wotbench.analysis.resolved); a section that cannot be read is
a warning naming it, and the others still count."""
from __future__ import annotations

import pytest

from wotbench.analysis import resolved


def test_each_section_through_its_model(tmp_path):
    f = tmp_path / "config.resolved.yaml"
    f.write_text("verdict: {tolerance: '0.5 ms', confidence: 0.9}\nslo: {p95_ms: 20}\n"
                 "notify: {slo: {p99_ms: 50}}\n")
    warnings: list[str] = []
    s = resolved.read(f, warnings)
    assert warnings == []
    assert (s.verdict.tolerance_ms, s.verdict.confidence) == (0.5, 0.9)
    assert s.slo.p95_ms == 20 and s.notify_slo.p99_ms == 50
    assert resolved.read(tmp_path / "none.yaml", warnings) == resolved.ResolvedSpecs()
    f.write_text("name: only-a-name\n")
    assert resolved.read(f, warnings) == resolved.ResolvedSpecs() and warnings == []


def test_a_section_that_cannot_be_read_is_a_warning_and_the_others_count(tmp_path):
    f = tmp_path / "config.resolved.yaml"
    f.write_text("verdict: {tolerance: 3}\nslo: {p95_ms: 20}\nnotify: [1]\n")
    warnings: list[str] = []
    s = resolved.read(f, warnings)
    assert s.verdict is None and s.slo.p95_ms == 20 and s.notify_slo is None
    assert len(warnings) == 2
    assert warnings[0].startswith("config.resolved.yaml: its verdict: cannot be read, the "
                                  "default tolerance is used (")
    assert warnings[1].startswith("config.resolved.yaml: its notify.slo cannot be read (")


@pytest.mark.parametrize("sections,expected", [
    (resolved.SECTIONS, ["its verdict:", "its slo:", "its notify.slo"]), (("slo",), ["its slo:"])])
def test_a_file_that_is_not_yaml_warns_once_per_section_asked(tmp_path, sections, expected):
    f = tmp_path / "config.resolved.yaml"
    f.write_text("slo: {p95_ms: [\n")
    warnings: list[str] = []
    assert resolved.read(f, warnings, sections) == resolved.ResolvedSpecs()
    assert [w.split(" cannot")[0].removeprefix("config.resolved.yaml: ") for w in warnings] \
        == expected
