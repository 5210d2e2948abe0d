"""wot-fleet in a least-privileged container: a FROM-scratch image holding only the static
binary (docker import of a one-file tar), non-root, read-only root fs, no capabilities, memory
and pids limits; it serves two devices, exits 0 on `docker stop` and writes its files."""
import io
import os
import shutil
import subprocess
import tarfile
import time
import uuid

import pytest

from testkit.coap import CON, GET, Client, code_str
from testkit.fleet import DEVICES_HEADER, build
from testkit.device import HEADER


def _docker_ok() -> bool:
    return bool(shutil.which("docker")) and subprocess.run(
        ["docker", "info"], capture_output=True).returncode == 0


@pytest.mark.docker
def test_runs_unprivileged_from_scratch(tmp_path):
    if not _docker_ok():
        pytest.skip("no reachable Docker daemon (`docker info` fails)")
    binary = build("wot-fleet")
    tag = f"wotbench-fleet-test:{uuid.uuid4().hex[:12]}"
    name = f"wotbench-fleet-test-{uuid.uuid4().hex[:12]}"
    tar = io.BytesIO()
    with tarfile.open(fileobj=tar, mode="w") as t:
        t.add(binary, arcname="wot-fleet")
    r = subprocess.run(["docker", "import", "-c", 'ENTRYPOINT ["/wot-fleet"]', "-", tag],
                       input=tar.getvalue(), capture_output=True)
    assert r.returncode == 0, r.stderr
    cfg, out = tmp_path / "cfg", tmp_path / "out"
    cfg.mkdir()
    out.mkdir()
    out.chmod(0o777)
    (cfg / "res.csv").write_text(HEADER + "r0,1000,sleep,16\n")
    host = f"127.0.{os.getpid() % 200 + 20}"
    (cfg / "devices.csv").write_text(
        f"{DEVICES_HEADER}\n0,d0,{host}.1:5683,res.csv,1,4,auto,1000\n"
        f"1,d1,{host}.2:5683,res.csv,1,4,separate,1000\n")
    try:
        r = subprocess.run(["docker", "run", "-d", "--name", name, "--user", "65534:65534",
                            "--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
                            "--network", "host", "--memory", "64m", "--pids-limit", "16",
                            "-v", f"{cfg}:/cfg:ro", "-v", f"{out}:/out", tag,
                            "--devices", "/cfg/devices.csv", "--log-dir", "/out", "--loops", "2"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        deadline = time.monotonic() + 20
        while not (out / "ready").exists():
            assert time.monotonic() < deadline, "no ready file"
            time.sleep(0.05)
        for i in (1, 2):
            c = Client((f"{host}.{i}", 5683))
            assert code_str(c.request(GET, "r0", CON)["code"]) == "2.05"
            c.close()
        subprocess.run(["docker", "stop", "-t", "10", name], capture_output=True, timeout=30)
        code = subprocess.run(["docker", "inspect", name, "--format", "{{.State.ExitCode}}"],
                              capture_output=True, text=True).stdout.strip()
        assert code == "0", subprocess.run(["docker", "logs", name], capture_output=True,
                                           text=True).stderr
        assert (out / "fleet-summary.json").exists()
        rows = (out / "fleet-log-0.csv").read_text().splitlines()[1:] + \
            (out / "fleet-log-1.csv").read_text().splitlines()[1:]
        assert sorted(r.split(",")[0] for r in rows) == ["0", "1"]
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)
