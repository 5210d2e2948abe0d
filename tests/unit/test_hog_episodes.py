"""The contention: config block and the hog specs a run launches."""
import pytest

from wotbench.config.hog_episodes import ContentionEpisode, parse_contention, validate_contention
from wotbench.runner.backends.docker.backend import hog_container_kwargs
from wotbench.runner.during.hogspec import default_buffer_bytes, episodes_for_run
from wotbench.runner.backends.process.backend import hog_process_argv
from wotbench.errors import ConfigError

PLAN = {"cores_total": 2, "usable_cores": [0, 1], "device_cores": [1]}
T0 = 5_000_000_000_000


def _cfg(episodes, duration=60):
    return {"name": "t", "duration_s": duration, "contention": episodes}


def test_no_block_means_no_hogs():
    assert episodes_for_run({"name": "t", "duration_s": 60}, PLAN, T0) == []
    assert episodes_for_run(_cfg([]), PLAN, T0) == []


def test_cpu_episode_becomes_an_aligned_pinned_hog():
    [s] = episodes_for_run(_cfg([{"kind": "cpu", "cores": [1], "start_s": 10, "duration_s": 10, "threads": 1}]),
                           PLAN, T0)
    assert s.start_mono_ns == T0 + 10 * 10**9 and s.end_mono_ns == T0 + 20 * 10**9
    assert s.argv == ["/hog", "--mode", "cpu", "--seconds", "10", "--start-at", str(T0 + 10 * 10**9),
                      "--cpu", "1", "--threads", "1", "--label", "hog-0-cpu"]
    assert s.cpuset == "1" and s.buffer_bytes == 0
    kw = hog_container_kwargs(s, "wotbench/hog:x", run_id="t")
    assert kw["user"] == "65534:65534" and kw["cap_drop"] == ["ALL"] and kw["cpuset_cpus"] == "1"
    assert kw["command"] == s.argv[1:] and kw["network_mode"] == "none" and kw["name"] == "wb-t-hog-0-cpu"
    assert hog_process_argv(s, "/x/hog")[0] == "/x/hog" and hog_process_argv(s, "/x/hog")[1:] == s.argv[1:]
    assert s.record().end_s == 20


def test_memory_episode_gets_buffer_and_memory_limit():
    [s] = episodes_for_run(_cfg([{"kind": "membw", "cores": [0, 1], "start_s": 0, "duration_s": 5}]),
                           PLAN, T0, llc_bytes=32 << 20)
    assert s.threads == 2 and s.buffer_bytes == 64 << 20
    assert s.argv[-2:] == ["--bytes", str(64 << 20)]
    assert s.memory_limit_bytes >= 2 * (64 << 20)
    assert default_buffer_bytes("membw", 100 << 20) == 200 << 20
    assert default_buffer_bytes("cache", 105 << 20) == 64 << 20
    assert default_buffer_bytes("cache", 1 << 10) == 1 << 20


@pytest.mark.parametrize("episode,problem", [
    ({"kind": "gpu", "cores": [1], "start_s": 0, "duration_s": 1}, "contention[0].kind"),
    ({"kind": "cpu", "cores": [], "start_s": 0, "duration_s": 1}, "contention[0].cores"),
    ({"kind": "cpu", "cores": [1, 1], "start_s": 0, "duration_s": 1}, "distinct"),
    ({"kind": "cpu", "cores": [1], "start_s": -1, "duration_s": 1}, "contention[0].start_s"),
    ({"kind": "cpu", "cores": [1], "start_s": 0, "duration_s": 0}, "contention[0].duration_s"),
    ({"kind": "cpu", "cores": [1], "start_s": 0, "duration_s": 5, "treads": 1}, "contention[0].treads"),
    ({"kind": "cpu", "cores": [1], "start_s": 55, "duration_s": 10}, "ends after the test"),
    ({"kind": "cpu", "cores": [3], "start_s": 0, "duration_s": 1}, "[3] not among the usable cores [0, 1]"),
])
def test_validation_names_the_problem(episode, problem):
    with pytest.raises(ConfigError) as e:
        episodes_for_run(_cfg([episode]), PLAN, T0)
    assert any(problem in p for p in e.value.problems), e.value.problems


def test_all_problems_reported_together():
    with pytest.raises(ConfigError) as e:
        validate_contention([{"kind": "cpu", "cores": [9], "start_s": 50, "duration_s": 20},
                             {"kind": "cpu", "cores": [0], "start_s": 0, "duration_s": 1},
                             {"kind": "membw"}], test_duration_s=60, cores=[0, 1])
    probs = e.value.problems
    assert any(p.startswith("contention[2].cores") for p in probs)
    assert not any(p.startswith("contention[1]") for p in probs)


def test_not_a_list():
    with pytest.raises(ConfigError, match="must be a list"):
        parse_contention({"kind": "cpu"})


def test_model_objects_accepted():
    ep = ContentionEpisode(kind="cache", cores=[1], start_s=1, duration_s=2)
    [s] = episodes_for_run(_cfg([ep]), PLAN, T0, llc_bytes=8 << 20)
    assert s.kind == "cache" and s.buffer_bytes == 8 << 20
