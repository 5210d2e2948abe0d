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
    # the next heaviest, from `pytest tests/unit -n 2 -m "not slow" --durations=40` on 2026-11-27
    # (make check 174 s wall at load 3.2 -> 5.3, other helpers' work on the host): each 2.5-7.5 s
    "test_report.py::test_a_series_an_older_analysis_did_not_write_says_how_to_get_it",
    "test_report.py::test_unfaithful_plan_warnings_prominent_and_autoescape",
    "test_report.py::test_missing_optional_parts_render_with_notes",
    "test_report.py::test_network_section_names_backend_and_exact_settings",
    "test_report.py::test_split_table_shows_r_minus_s_by_place",
    "test_report.py::test_contention_banner_and_shaded_windows",   # its module fixture renders
    "test_report_fleet.py::",             # each analyses and renders an engine run
    "test_analysis_fleet.py::test_many_devices_go_to_the_per_device_table",
    "test_tracegen.py::test_million_requests_benchmark",
    "test_sweep_repeats.py::test_resume_runs_the_missing_repeats_and_can_add_rounds",
    "test_sweep_repeats.py::test_repeats_run_in_interleaved_rounds_of_alternating_direction",
    "test_sweep_repeats.py::test_interval_from_values_that_differ",
    "test_sweep_repeats.py::test_mean_and_interval_per_setting_and_every_repeats_verdict",
    "test_fleet_plan.py::test_engines_are_sized_by_the_hard_file_descriptor_limit",
    "test_fleet_plan.py::test_requirements_of_the_100k_example",
    "test_fleet_plan.py::test_process_backend_engine_devices_take_the_addresses_again",
    "test_fleet_plan.py::test_pinned_plan_puts_each_fleet_on_one_core",
    "test_fleet_plan.py::test_one_ge_cannot_carry_100k_endpoints",
    "test_capacity.py::test_repeats_majority_vote_absorbs_a_noisy_flag",
    "test_runner_pieces.py::test_process_backend_stop_reports_the_one_that_ignores_sigterm",
    "test_cluster_trace_targets.py::test_a_cell_imports_its_slice_of_a_recorded_trace",
    "test_cluster_answer.py::test_a_sweep_on_swarm_names_the_host_per_point",
    "test_cluster_answer.py::test_wotbench_report_of_a_merged_run_draws_the_merged_report",
    "test_sut_resources.py::test_sampler_follows_a_process_tree_and_keeps_only_the_sut",
    # the next heaviest, from `make check PYTEST_ARGS=--durations=30` on 2026-11-27 19:36 UTC
    # (make check 91 s wall on a quiet host, load 0.27 -> 1.64): each 2.3-10 s
    "test_things.py::test_service_time_distribution_is_drawn_per_instance",
    "test_hostshare.py::test_the_bound_is_honest_where_the_truth_is_known",
    "test_hostshare.py::test_clean_runs_with_typical_scatter_raise_no_false_window",
    "test_things_http_shared.py::test_one_process_serves_several_instances_on_their_own_ports",
    "test_connected_rundir.py::",          # each analyses a whole connected run directory
    "test_connected_sut.py::test_a_connected_run_directory_with_the_servers_samples_has_sut",
    "test_analysis_contention.py::test_realistic_shift_is_flagged_with_onset_within_one_window",
    "test_cluster_cell_gateways.py::test_a_cells_fleet_check_counts_its_own_ges_endpoints",
    "test_cluster_answer.py::test_a_capacity_search_on_swarm_names_the_host_at_the_first",
    "test_sweep.py::test_affinity_series_draws_fig5",
)


def pytest_collection_modifyitems(items):
    for item in items:
        nodeid = item.nodeid.split("tests/unit/", 1)[-1]
        if nodeid.startswith(SLOW):
            item.add_marker(pytest.mark.slow)
