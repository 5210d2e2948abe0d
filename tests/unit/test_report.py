"""Report content checks on a recorded run (tests/unit/report_fixture.py)."""
from __future__ import annotations

import json
import re
import shutil

import pytest

from report_fixture import make_run
from wotbench.report import ReportError, main, render, render_html

# fig-host-share: the host's share of R per window (issue 31), a new figure of every analysed run
FIGURE_IDS = ["fig-rit-cdf", "fig-rt-time", "fig-rt-cdf", "fig-rd", "fig-host-share", "fig-evidence",
              "fig-cpu-cores", "fig-cpu-containers"]


def _figure(html: str, fid: str) -> str:
    m = re.search(rf'<figure id="{fid}">(.*?)</figure>', html, re.S)
    assert m, f"figure {fid} missing"
    return m.group(1)


def _table(html: str, tid: str) -> str:
    m = re.search(rf'<table id="{tid}">(.*?)</table>', html, re.S)
    assert m, f"table {tid} missing"
    return m.group(1)


@pytest.fixture(scope="module")
def clean_html(tmp_path_factory):
    run_dir = make_run(tmp_path_factory.mktemp("report-clean"))
    path = render(run_dir)
    assert path == run_dir / "report.html"
    return path.read_text()


@pytest.fixture(scope="module")
def contention_html(tmp_path_factory):
    return render_html(make_run(tmp_path_factory.mktemp("cont"), contention=True))


def test_verdict_banner_trustworthy(clean_html):
    banner = re.search(r'<section id="verdict" class="banner (\w+)">(.*?)</section>', clean_html, re.S)
    assert banner and banner.group(1) == "ok"
    assert "Results trustworthy" in banner.group(2)
    # the first screen answers "what are the numbers": throughput and p95 cards come right after
    head = clean_html[: clean_html.index('id="setup"')]
    assert "Throughput" in head and "p95 response" in head and "req/s" in head


def test_every_figure_present_as_inline_svg(clean_html):
    for fid in FIGURE_IDS:
        body = _figure(clean_html, fid)
        assert body.count("<svg") == 1, fid
        assert "How to read this" in body
    assert clean_html.count("<svg") == len(FIGURE_IDS)
    # titles are kept as text in the SVGs (svg.fonttype none)
    assert "Zoom on the low end" in _figure(clean_html, "fig-rit-cdf")
    assert "Response time percentiles per second" in _figure(clean_html, "fig-rt-time")


def test_self_contained(clean_html):
    assert not re.search(r'(src|href)\s*=\s*["\']?\s*(https?:)?//', clean_html, re.I)
    assert "<link" not in clean_html and "<script" not in clean_html
    assert "@import" not in clean_html
    assert not re.search(r"url\((?!#)", clean_html)  # only in-document references
    ids = re.findall(r'\bid="([^"]+)"', clean_html)
    assert len(ids) == len(set(ids)), "duplicate element ids across the inline SVGs"


def test_ge_table_has_paper_table1_columns(clean_html):
    t = _table(clean_html, "table-ge")
    for col in ("mean", "p5", "p50", "KS", "late share (p)", "tolerance"):
        assert f">{col}</th>" in t
    assert "expected (trace)" in t and "submitted (GE)" in t
    assert re.search(r"\d+\.\d{3} ms", t)


def test_per_device_and_outcome_tables(tmp_path, clean_html):
    t = _table(clean_html, "table-devices")
    for col in ("p50", "p95", "p99"):
        assert f">{col}</th>" in t
    assert t.count("<tr>") == 1 + 6  # header + one row per device
    assert "cpu-5" in t
    o = _table(clean_html, "table-outcomes")
    for outcome in ("ok", "error", "timeout", "reset", "unsent"):
        assert f"<td>{outcome}</td>" in o
    assert "%" in o
    summary = json.loads(next(tmp_path.parent.glob("report-clean*/*/summary.json")).read_text())
    assert f"{summary['overall']['requests']:,}" in o


def test_placement_and_host_header(clean_html):
    assert "6.1.0-18-amd64" in clean_html and "24.0.7" in clean_html
    place = clean_html[clean_html.index('id="placement"'):clean_html.index('id="ge"')]
    assert "OS + harness, ge-0, cd-ge" in place
    assert "cpu-0…5 (6 devices)" in place
    assert "plan-warnings" not in place
    assert "Network</dt><dd>none" in clean_html


def test_contention_banner_and_shaded_windows(contention_html):
    banner = re.search(r'<section id="verdict" class="banner (\w+)">(.*?)</section>', contention_html, re.S)
    assert banner.group(1) == "warn"
    assert "Contention detected" in banner.group(2)
    assert "10–20 s" in banner.group(2) and "33%" in banner.group(2) and "from 10 s" in banner.group(2)
    assert _table(contention_html, "table-windows").count("<tr>") == 1 + 1
    assert "contention detected" in contention_html
    # shaded spans are drawn (legend entry + polygons) in every time-series figure
    for fid in ("fig-rt-time", "fig-rd", "fig-cpu-cores", "fig-cpu-containers"):
        assert "contention window" in _figure(contention_html, fid), fid


def test_no_shading_without_contention(clean_html):
    assert "contention window" not in _figure(clean_html, "fig-rd")
    assert "No contention:" in clean_html and "table-windows" not in clean_html


def test_missing_optional_parts_render_with_notes(tmp_path):
    run_dir = make_run(tmp_path, monitor=False, cd=False, interrupted=True, faithful=False)
    (run_dir / "config.resolved.yaml").unlink()
    (run_dir / "plan.json").unlink()
    html = render_html(run_dir)
    for fid in ("fig-cpu-cores", "fig-cpu-containers"):
        body = _figure(html, fid)
        assert "<svg" not in body and "Not available because" in body, fid
    assert "CD node R_d (per probe)" not in _figure(html, "fig-rd")  # devices only
    assert "Contention not checked: not available because no contention-detector samples" in html
    assert "monitor/" in _figure(html, "fig-cpu-cores")
    assert "Run interrupted" in html and "container exited with 137" in html
    assert "config.resolved.yaml is missing" in html
    assert "plan.json is missing" in html
    assert "<svg" in _figure(html, "fig-rt-time")


def test_unfaithful_plan_warnings_prominent_and_autoescape(tmp_path):
    run_dir = make_run(tmp_path, faithful=False, ge_bottleneck=True,
                       network={"backend": "tc", "devices": {
                           f"cpu-{i}": {"describe": "delay 20 ms, loss 1 %", "impairment": {"delay_ms": 20}}
                           for i in range(3)}})
    run = json.loads((run_dir / "run.json").read_text())
    run["failures"] = [{"component": "<script>x</script>", "what": "bad & worse"}]
    run["contention"] = [{"name": "hog-1", "kind": "cpu", "cores": [1], "start_s": 10, "end_s": 20}]
    (run_dir / "run.json").write_text(json.dumps(run))
    html = render_html(run_dir)
    assert "<script>x</script>" not in html and "&lt;script&gt;" in html
    assert "hog-1" in _table(html, "table-injected")
    assert 'id="plan-warnings"' in html and "not faithful" in html
    assert "GE shares core 1" in html
    assert re.search(r'class="banner bad">\s*<div class="title">GE bottleneck', html)
    assert "did not keep up" in html and '<span class="pill bad">no</span>' in _table(html, "table-ge")
    assert "cpu-0…2 (3 devices)" in _table(html, "table-network")
    assert "delay 20 ms, loss 1 %" in _table(html, "table-network")


def test_series_missing_entirely(tmp_path):
    run_dir = make_run(tmp_path)
    shutil.rmtree(run_dir / "series")
    shutil.rmtree(run_dir / "monitor")
    shutil.rmtree(run_dir / "ge")
    html = render_html(run_dir)
    assert "<svg" not in html
    assert html.count("Not available because") >= len(FIGURE_IDS)


def test_a_series_an_older_analysis_did_not_write_says_how_to_get_it(tmp_path):
    run_dir = make_run(tmp_path)
    (run_dir / "series" / "cpu_groups.csv").unlink()
    body = _figure(render_html(run_dir), "fig-cpu-containers")
    assert "<svg" not in body and "cpu_groups.csv is missing" in body
    assert f"wotbench analyze {run_dir}" in body


def test_bad_run_dir_names_missing_file(tmp_path, capsys):
    run_dir = make_run(tmp_path, summary=False)
    with pytest.raises(ReportError) as e:
        render(run_dir)
    assert "summary.json" in str(e.value) and e.value.exit_code == 2
    assert main(run_dir) == 2
    assert "summary.json" in capsys.readouterr().err
    assert main(tmp_path / "nope") == 2


def test_main_ok(tmp_path, capsys):
    run_dir = make_run(tmp_path, monitor=False)
    shutil.rmtree(run_dir / "series")  # keep it quick: no figures to draw but the response CDF
    assert main(run_dir) == 0
    assert (run_dir / "report.html").is_file()
    assert "report.html" in capsys.readouterr().out


def test_real_analysis_output_renders(tmp_path):
    """The fixture's raw files analysed by the real wotbench.analysis render without a hole."""
    analysis = pytest.importorskip("wotbench.analysis")
    run_dir = make_run(tmp_path, contention=True, summary=False)
    summary = analysis.analyze(run_dir)
    html = render_html(run_dir)
    status = summary.verdict.status
    assert f"verdict {status}" in html
    for fid in FIGURE_IDS:
        assert "<svg" in _figure(html, fid), fid
    assert "Not available because" not in html


def test_network_section_names_backend_and_exact_settings(tmp_path):
    devs = {f"s-{i}": {"describe": "delay 40ms, loss 2%; egress", "applied":
                       ["--impair", "dir=egress,delay=40ms,loss=2%", "--impair-seed", str(100 + i)],
                       "counters": {"dropped_out": 3, "dropped_in": 0, "seed": 100 + i, "dir": "egress"}}
            for i in range(2)}
    run_dir = make_run(tmp_path, network={"backend": "app", "requested": "auto", "devices": devs,
                                          "reasons": ["netem backend: no sch_netem", "app backend chosen: x"],
                                          "removed": True})
    html = render_html(run_dir)
    assert "with the <b>app</b> backend (requested: auto)" in html
    table = _table(html, "table-network")
    assert "dropped_out 6" in table and "seed" not in table
    assert "--impair dir=egress,delay=40ms,loss=2% --impair-seed 101" in html
    assert "netem backend: no sch_netem | app backend chosen: x" in html


def test_split_table_shows_r_minus_s_by_place(tmp_path, clean_html):
    """The R − S split needs device logs: the analysis fixture has them (the report fixture has
    none, and then the section is left out)."""
    from analysis_fixtures import make_run as make_logged_run
    from wotbench.analysis import analyze
    logged = make_logged_run(tmp_path / "logged", duration_s=10, seed=5)
    analyze(logged)
    html = render_html(logged)
    assert "table-split" not in clean_html
    t = _table(html, "table-split")
    rows = re.findall(r"<tr><td>(.*?)</td>", t)
    assert rows == ["network, GE → device", "device: wake-up, queue, hand-off", "service beyond S",
                    "device: hand-back, send", "network, device → GE", "R − S",
                    "GE read delay (not in R)"]
    assert "<th class=\"n\">devices</th>" in t
    cells = re.findall(r'<td class="n">([^<]*)</td>', t)
    assert cells and all(" / " in c for c in cells)
    assert "CD, calibration" in t and "stamps: devices user" in html


def test_every_flag_rule_has_a_name_in_the_report():
    """A flag of a rule the report cannot name stopped `wotbench report` with a KeyError
    (found on a killed run flagged by the host share's queueing measure)."""
    import typing
    from wotbench.report.evidence import RULE_NAMES
    from wotbench.rundir.evidence import FlagRule
    assert set(typing.get_args(FlagRule)) <= set(RULE_NAMES)
