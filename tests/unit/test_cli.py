"""CLI exit codes and messages, run as a real subprocess (no tracebacks for user errors)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "configs"


def wb(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "wotbench.cli", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd or ROOT, timeout=120)


def no_traceback(r):
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout


def test_check_ok():
    r = wb("check", CONFIGS / "20dev.yaml")
    assert r.returncode == 0 and r.stdout.splitlines()[-1] == "OK", r.stdout + r.stderr
    assert "config config: schema and cross-block rules" in r.stdout
    r = wb("check", "--offline", CONFIGS / "20dev.yaml")
    assert r.returncode == 0 and "host   host: skipped (--offline)" in r.stdout
    assert r.stdout.splitlines()[-1] == "OK (skipped, see above: host)"


def test_check_problems(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text("name: t\ndevices:\n  - group: a\n    serivce_time: {dist: exponential, mean: 5}\n"
                 "  - group: b\n    service_time: {dist: exponential, mean: -5}\n")
    r = wb("check", f)
    no_traceback(r)
    assert r.returncode == 2
    assert r.stderr.startswith(f"wotbench: error: {f}: 2 problems:")
    assert f"{f}: devices[0].serivce_time: unknown key, did you mean 'service_time'?" in r.stderr
    assert f"{f}: devices[1].service_time.mean: must be > 0, got -5" in r.stderr


def test_missing_file_and_yaml_error(tmp_path):
    r = wb("check", tmp_path / "nope.yaml")
    assert r.returncode == 2 and r.stderr == f"wotbench: error: {tmp_path / 'nope.yaml'}: file not found\n"
    f = tmp_path / "s.yaml"
    f.write_text("name: [x\n")
    r = wb("check", f)
    no_traceback(r)
    assert r.returncode == 2 and "YAML syntax error" in r.stderr and "line " in r.stderr


def test_usage_errors():
    r = wb()
    assert r.returncode == 2 and "wotbench: error:" in r.stderr
    r = wb("bogus")
    assert r.returncode == 2 and "invalid choice: 'bogus'" in r.stderr
    r = wb("trace", CONFIGS / "1dev.yaml")
    assert r.returncode == 2 and r.stderr == "wotbench: error: trace: --out DIR is required to generate a trace\n"


def test_trace_and_stats(tmp_path):
    r = wb("trace", CONFIGS / "1dev.yaml", "--out", tmp_path / "t")
    assert r.returncode == 0, r.stderr
    assert "requests" in r.stdout and (tmp_path / "t" / "trace.csv").exists()
    assert (tmp_path / "t" / "resources" / "cpu-0.csv").exists() and (tmp_path / "t" / "cd-trace.csv").exists()
    r = wb("trace", "--stats", tmp_path / "t" / "trace.csv")
    assert r.returncode == 0 and "RIT mean" in r.stdout
    r = wb("trace", "--stats", tmp_path / "missing.csv")
    assert r.returncode == 2 and "file not found" in r.stderr
    no_traceback(r)


def test_plan(tmp_path):
    out = tmp_path / "plan.json"
    r = wb("plan", CONFIGS / "20dev.yaml", "--out", out, "--cores", "0-1")
    assert r.returncode == 0, r.stderr
    p = json.loads(out.read_text())
    assert p["faithful"] is False and p["device_cores"] == [1] and "warning" in r.stdout
    r = wb("plan", CONFIGS / "20dev.yaml", "--out", out, "--cores", "0-7")
    assert r.returncode == 0 and json.loads(out.read_text())["faithful"] is True


@pytest.mark.parametrize("cmd,codes", [
    (["run", "/nonexistent/config.yaml"], {2}),   # bad input: nothing is started
    (["doctor"], {0, 1}),                          # 1 = something this host lacks, with the fix
    (["analyze", "/nonexistent-run"], {2}),
    (["report", "/nonexistent-run"], {2}),
])
def test_lazy_commands_dispatch_cleanly(cmd, codes):
    """Dispatches to the other modules: a defined exit code, no traceback, a message on error.
    (A real run and `clean` are exercised end to end in tests/e2e.)"""
    r = wb(*cmd)
    no_traceback(r)
    assert r.returncode in codes
    if r.returncode == 2:
        assert r.stderr.startswith("wotbench: error:") and "nonexistent" in r.stderr


def test_error_handler_in_process(monkeypatch, capsys):
    from wotbench import cli
    from wotbench.errors import EnvironmentProblem

    def boom(args):
        raise EnvironmentProblem("docker daemon not reachable")
    monkeypatch.setattr(cli, "_cmd_doctor", boom)
    assert cli.main(["doctor"]) == 1
    assert capsys.readouterr().err == "wotbench: error: docker daemon not reachable\n"

    def interrupted(args):
        raise KeyboardInterrupt
    monkeypatch.setattr(cli, "_cmd_doctor", interrupted)
    assert cli.main(["doctor"]) == 130


def test_sweep_and_capacity_reject_bad_input(tmp_path):
    """The wired subcommands fail with the config's own key-path messages, before any run."""
    r = wb("sweep", CONFIGS / "1dev.yaml", "--vary", "devices[0].cuont=1,2", "--out-root", tmp_path)
    no_traceback(r)
    assert r.returncode == 2
    assert "cuont" in r.stderr and "did you mean 'count'" in r.stderr
    r = wb("sweep", "--out-root", tmp_path)
    no_traceback(r)
    assert r.returncode == 2 and "give a CONFIG" in r.stderr
    r = wb("capacity", CONFIGS / "1dev.yaml", "--start", "0", "--out-root", tmp_path)
    no_traceback(r)
    assert r.returncode == 2 and "start" in r.stderr


def test_study_rejects_bad_input(tmp_path):
    """A missing manifest, bad --lengths, or a directory that is no analysed run: exit 2,
    a message, no traceback, no study directory left behind."""
    r = wb("study", "--manifest", tmp_path / "none.yaml", "--out-root", tmp_path / "r")
    no_traceback(r)
    assert r.returncode == 2 and "none.yaml: file not found" in r.stderr
    assert not (tmp_path / "r").exists()
    r = wb("study", "--calibration-sweep", tmp_path, "--lengths", "5,x")
    no_traceback(r)
    assert r.returncode == 2 and "--lengths" in r.stderr
    r = wb("study", "--calibration-sweep", tmp_path)
    no_traceback(r)
    assert r.returncode == 2 and f"{tmp_path}: not an analysed run directory" in r.stderr


def test_network_backend_key_validated(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("name: t\nnetwork: {backend: netme}\ndevices:\n  - group: a\n")
    r = wb("check", f)
    no_traceback(r)
    assert r.returncode == 2 and "network.backend" in r.stderr and "'netem'" in r.stderr


def test_check_reads_every_line_of_a_recorded_trace(tmp_path):
    """`check` names the first bad line of a recorded trace or of one of its resource files."""
    src = CONFIGS / "recorded-3dev.yaml"
    r = wb("check", src)
    assert r.returncode == 0 and r.stdout.splitlines()[-1] == "OK", r.stderr
    import shutil
    import yaml
    trace_dir = tmp_path / "t"
    shutil.copytree(ROOT / "traces" / "example-3dev", trace_dir)
    cfg = yaml.safe_load(src.read_text())
    cfg["trace"] = str(trace_dir / "trace.csv")
    f = tmp_path / "rec.yaml"
    f.write_text(yaml.safe_dump(cfg))
    lines = (trace_dir / "trace.csv").read_text().splitlines()
    bad_no = next(i for i, line in enumerate(lines, 1) if line and line[0].isdigit()) + 5
    lines[bad_no - 1] = "1,notanumber,GET,coap://10.0.0.1/r0"
    (trace_dir / "trace.csv").write_text("\n".join(lines) + "\n")
    r = wb("check", f)
    no_traceback(r)
    assert r.returncode == 2 and f"trace.csv:{bad_no}: send_time_us 'notanumber'" in r.stderr
    shutil.copyfile(ROOT / "traces" / "example-3dev" / "trace.csv", trace_dir / "trace.csv")
    res = sorted((trace_dir / "resources").glob("*.csv"))[0]
    rows = res.read_text().splitlines()
    rows[2] = "r1,fast,busy,16"
    res.write_text("\n".join(rows) + "\n")
    r = wb("check", f)
    no_traceback(r)
    assert r.returncode == 2 and f"{res.name}:3: column service_time_us: 'fast' is not an integer" in r.stderr


def test_check_names_the_bad_lines_of_every_recorded_file_at_once(tmp_path):
    """One `check` lists the problems of the trace and of every resource file, exit 2."""
    import shutil
    import yaml
    trace_dir = tmp_path / "t"
    shutil.copytree(ROOT / "traces" / "example-3dev", trace_dir)
    cfg = yaml.safe_load((CONFIGS / "recorded-3dev.yaml").read_text())
    cfg["trace"] = str(trace_dir / "trace.csv")
    f = tmp_path / "rec.yaml"
    f.write_text(yaml.safe_dump(cfg))
    with (trace_dir / "trace.csv").open("a") as t:
        t.write("0,x,GET,coap://10.0.0.1/r0\n0,y,GET,coap://10.0.0.1/r0\n")
    n_trace = len((trace_dir / "trace.csv").read_text().splitlines())
    res = sorted((trace_dir / "resources").glob("*.csv"))
    for r_file in res[:2]:
        with r_file.open("a") as rf:
            rf.write("/abs,5,busy,16\n")
    n_res = [len(r_file.read_text().splitlines()) for r_file in res[:2]]
    r = wb("check", f)
    no_traceback(r)
    assert r.returncode == 2 and "4 problems:" in r.stderr
    for where in (f"trace.csv:{n_trace - 1}: send_time_us 'x'", f"trace.csv:{n_trace}: send_time_us 'y'",
                  f"{res[0].name}:{n_res[0]}: column path: path '/abs' starts with '/'",
                  f"{res[1].name}:{n_res[1]}: column path"):
        assert where in r.stderr


def test_help_lists_check_and_study_apart():
    r = wb("--help")
    assert r.returncode == 0 and "check" in r.stdout and "study" in r.stdout
    assert "validate" not in r.stdout   # the old name served both: a config check and the study
