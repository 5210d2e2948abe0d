"""The report of a run whose devices ran in wot-fleet engines: the engines' lag beside the
devices' response times, and many devices as distributions and top/bottom N."""
from __future__ import annotations

import re

from fleet_fixtures import FleetSpec, make_fleet_run
from wotbench.analysis import analyze
from wotbench.report import render_html
from wotbench.rundir import AnalysisParams


def _section(html: str, sid: str) -> str:
    i = html.index(f'<section class="card" id="{sid}"')
    return html[i:html.index("</section>", i)]


def test_the_engine_section_shows_each_loop_and_its_flagged_windows(tmp_path):
    root = make_fleet_run(tmp_path, FleetSpec(n_devices=40, duration_s=30, late_loop=1,
                                              late_from_s=12.0))
    analyze(root)
    html = render_html(root)
    sec = _section(html, "fleet")
    assert "fell behind" in sec
    rows = re.findall(r"<tr( class=\"bad\")?><td class=\"mono\">sensor-fleet0</td><td class=\"n\">(\d)",
                      sec)
    assert rows == [("", "0"), (' class="bad"', "1")]    # only the late loop is flagged
    assert "1, 2" in sec                                # its flagged windows
    fig = sec[sec.index('id="fig-fleet-lag"'):]
    assert "<svg" in fig and "could not be drawn" not in fig
    assert "engine loop lag" in html                    # the evidence table names the rule


def test_many_devices_are_summarised_not_listed(tmp_path):
    root = make_fleet_run(tmp_path, FleetSpec(n_devices=300, duration_s=10, rate_total=900,
                                              loss_fraction=0.01))
    analyze(root, AnalysisParams(per_device_max=100))
    html = render_html(root)
    assert 'id="table-devices"' not in html
    assert 'id="table-devices-spread"' in html
    assert "300 devices" in html
    tops = re.findall(r'<table class="table-devices-top">(.*?)</table>', html, re.S)
    assert len(tops) == 3                                # slowest, fastest, most lost
    assert all(t.count("<tr>") == 1 + 10 for t in tops[:2])   # header + 10 devices
    assert html.count('<td class="mono">sensor-') < 50     # of 300: the top lists only


def test_a_small_run_keeps_its_full_per_device_table(tmp_path):
    root = make_fleet_run(tmp_path, FleetSpec(n_devices=20, duration_s=5))
    analyze(root)
    html = render_html(root)
    table = html[html.index('id="table-devices"'):]
    table = table[:table.index("</table>")]
    assert table.count('<td class="mono">sensor-') == 20
    assert 'id="table-devices-spread"' not in html
