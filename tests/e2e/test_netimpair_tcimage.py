"""The locally built Pumba --tc-image works the way Pumba uses it: a sidecar started with
``tail -f /dev/null`` in the target's network namespace, then ``tc`` exec'ed in it."""
import uuid

import pytest

from wotbench.netimpair import tcimage

docker = pytest.importorskip("docker")
pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def client():
    try:
        c = docker.from_env()
        c.ping()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"no reachable Docker daemon: {e}")
    return c


@pytest.mark.long   # make test-long (CI runs it after make test): a real run of 10-30 s
def test_tc_image_builds_and_runs_tc_in_a_target_namespace(client):
    tag = tcimage.ensure_tc_image(client)
    assert tag.startswith("wotbench-tc:")
    assert tcimage.ensure_tc_image(client) == tag                    # reused, not rebuilt
    out = client.containers.run(tag, ["-V"], remove=True).decode()
    assert "iproute2" in out
    name = f"wotbench-test-target-{uuid.uuid4().hex[:8]}"
    target = client.containers.run(tag, ["-f", "/dev/null"], entrypoint=["tail"], name=name, detach=True,
                                   network_mode="bridge", labels={"wotbench.test": "1"})
    sidecar = None
    try:
        sidecar = client.containers.run(tag, ["-f", "/dev/null"], entrypoint=["tail"], detach=True,
                                        cap_add=["NET_ADMIN"], network_mode=f"container:{target.id}",
                                        labels={"wotbench.test": "1"})
        r = sidecar.exec_run(["tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", "1mbit",
                              "burst", "10k", "latency", "50ms"])
        assert r.exit_code == 0, r.output
        shown = target.exec_run(["tc", "qdisc", "show", "dev", "eth0"]).output.decode()
        assert "tbf" in shown                                       # same namespace as the target
        r = sidecar.exec_run(["tc", "qdisc", "del", "dev", "eth0", "root"])
        assert r.exit_code == 0, r.output
        assert "tbf" not in target.exec_run(["tc", "qdisc", "show", "dev", "eth0"]).output.decode()
    finally:
        if sidecar is not None:
            sidecar.remove(force=True)
        target.remove(force=True)
