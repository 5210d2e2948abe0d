"""``make check`` (tests/unit, two workers, ``-m "not slow"``) must stay under 60 s. The tests
below take the longest of the unit suite (each several seconds: the CLI in its own process,
the 100k/1M-device catalogue entries, the agent image's walk of the venv, whole report
renders, real analyses); they are marked slow here, in one place, so ``make check`` leaves
them to ``make test``, which runs every unit test. Chosen from
``pytest tests/unit -n 2 --durations=60`` (docs/USAGE.md: the figures and the load)."""
from __future__ import annotations

import pytest

SLOW = (
    "test_bad_configs.py::test_check_and_run_refuse_with_the_same_message[devices-1m]",
    "test_bad_configs.py::test_check_and_run_refuse_with_the_same_message[devices-100k]",
    "test_cli.py::test_study_rejects_bad_input",
    "test_cli.py::test_sweep_and_capacity_reject_bad_input",
    "test_cli.py::test_trace_and_stats",
    "test_cli.py::test_check_reads_every_line_of_a_recorded_trace",
    "test_cli.py::test_lazy_commands_dispatch_cleanly",
    "test_cli.py::test_check_ok",
    "test_cli.py::test_missing_file_and_yaml_error",
    "test_cli.py::test_plan",
    "test_cli.py::test_check_names_the_bad_lines_of_every_recorded_file_at_once",
    "test_cluster_agent.py::test_the_agent_image_holds_python_the_runner_and_the_binaries",
    "test_analysis_dtls.py::test_report_shows_dtls_section",
    "test_analysis_push.py::test_no_push_section_without_pushes",
    "test_analysis_push.py::test_the_report_has_a_push_section",
    "test_analysis_contention.py::test_no_false_alarm_on_clean_series_with_steal_spikes",
    "test_cli.py::test_network_backend_key_validated",
    "test_cli.py::test_check_problems",
    "test_slo.py::test_analysis_without_slo_keeps_exit_0",
    "test_slo.py::test_analysis_writes_the_slo_block_and_the_exit_code",
    "test_slo.py::test_a_flagged_run_keeps_exit_3_and_says_the_miss_may_be_the_testbeds",
    "test_report_contract.py::",          # one module fixture renders a sweep's every report
    "test_cluster_report.py::",           # one module fixture analyses and renders two cells
    "test_cluster_split.py::test_fleet_engines_move_whole_and_do_not_count_against_process",
    "test_sweep_repeats.py::test_any_vary_key_works_also_a_pseudo_key_and_a_word",
    "test_report.py::test_real_analysis_output_renders",
    "test_c_file_models.py::test_a_missing_ge_key_names_the_file_and_the_key",
    "test_preflight_capacity.py::test_the_engine_form_is_counted_with_its_own_costs",
)


def pytest_collection_modifyitems(items):
    for item in items:
        nodeid = item.nodeid.split("tests/unit/", 1)[-1]
        if nodeid.startswith(SLOW):
            item.add_marker(pytest.mark.slow)
