"""The catalogue of bad configs (tests/unit/bad_configs/, one file per refusal): `wotbench check`
and `wotbench run` refuse each before anything exists, with the same message, naming the key or
the file:line(:col). A file's header says what the message must contain (``# refusal:``, one
or more), the exit code (``# exit:``) and what the host must have for the refusal to be the one
meant (``# needs: nginx``; ``docker``: skipped without them, naming it)."""
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from preflight_fakes import quick_preflight

from wotbench import cli
from wotbench.runner.backends.process import loopslot

CATALOGUE = Path(__file__).parent / "bad_configs"
FILES = sorted(CATALOGUE.glob("*.yaml"))
# a checker's own log prefix (nginx: "2026/11/26 21:34:36 [emerg] 19077#19077: ") differs
# between two calls: the time and its pid, not the message
CHECKER_STAMP = re.compile(r"\d{4}/\d\d/\d\d \d\d:\d\d:\d\d (\[\w+\]) \d+#\d+: ")


@pytest.fixture(autouse=True)
def _give_back_the_loopback_block():
    """The process backend claims a loopback block for the run it prepares; give it back so
    that a run elsewhere on the host is not moved to another block by this test's worker."""
    yield
    loopslot.release()


def header(path: Path, key: str) -> list[str]:
    prefix = f"# {key}: "
    return [line[len(prefix):] for line in path.read_text().splitlines() if line.startswith(prefix)]


def _docker() -> bool:
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _missing(need: str) -> bool:
    return not _docker() if need == "docker" else shutil.which(need) is None


def refusal(capsys, *argv) -> tuple[int, str]:
    capsys.readouterr()
    rc = cli.main(list(argv))
    err = capsys.readouterr().err
    return rc, CHECKER_STAMP.sub(r"\1 ", err[err.find("wotbench: error: "):])


def test_the_catalogue_covers_the_issue_examples():
    names = {f.stem for f in FILES}
    assert {"server-config-check", "devices-100k", "devices-1m", "server-app-impairments",
            "paths-template", "proxy-file-missing"} <= names
    assert all(header(f, "refusal") and header(f, "exit") for f in FILES), \
        [f.name for f in FILES if not (header(f, "refusal") and header(f, "exit"))]


@pytest.mark.parametrize("path", FILES, ids=[f.stem for f in FILES])
def test_check_and_run_refuse_with_the_same_message(path, capsys, tmp_path, monkeypatch):
    for need in header(path, "needs"):
        if _missing(need):
            pytest.skip(f"{need} is not on this host: the refusal would be another")
    monkeypatch.chdir(tmp_path)       # relative paths in commands count from here
    quick_preflight(monkeypatch)      # nothing built (a refused config is never run), 20 ms
    rc, said = refusal(capsys, "check", str(path))
    assert rc == int(header(path, "exit")[0]), said
    for expected in header(path, "refusal"):
        assert expected in said, said
    assert "Traceback" not in said
    # only a refused config is run: a config this host carries would start a real run
    out = tmp_path / "reports"
    rc_run, said_run = refusal(capsys, "run", str(path), "--out-root", str(out))
    assert (rc_run, said_run) == (rc, said)
    assert not out.exists() or not any(out.iterdir()), list(out.iterdir())   # nothing created
