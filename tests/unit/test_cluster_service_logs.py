"""A run whose cells failed keeps what the agents said (service.save_logs)."""
from wotbench.distributed import service


class _Service:
    def __init__(self, chunks):
        self.chunks = chunks
        self.asked = {}

    def logs(self, **kw):
        self.asked = kw
        return iter(self.chunks)


class _Services:
    def __init__(self, svc):
        self.svc = svc
        self.names = []

    def get(self, name):
        self.names.append(name)
        if self.svc is None:
            raise RuntimeError("no such service")
        return self.svc


class _Client:
    def __init__(self, svc):
        self.services = _Services(svc)


def test_the_agents_whole_output_is_written_with_timestamps(tmp_path):
    svc = _Service([b"2026-11-27T08:40:00Z wotbench: preparing\n", b"2026-11-27T08:49:00Z x\n"])
    client = _Client(svc)
    out = tmp_path / "agents.log"
    assert service.save_logs(client, "run-1", out)
    assert out.read_bytes() == (b"2026-11-27T08:40:00Z wotbench: preparing\n"
                                b"2026-11-27T08:49:00Z x\n")
    assert client.services.names == [service.service_name("run-1")]
    assert svc.asked["timestamps"] and svc.asked["stdout"] and svc.asked["stderr"]
    assert "tail" not in svc.asked            # everything, not the last lines


def test_a_service_already_gone_writes_nothing(tmp_path):
    out = tmp_path / "agents.log"
    assert not service.save_logs(_Client(None), "run-1", out)
    assert not out.exists()


def test_a_log_stream_that_never_ends_is_cut_and_what_came_is_kept(tmp_path):
    """Swarm's stream of a service with a task on a lost node does not end: the read is bounded."""
    import threading
    import time
    release = threading.Event()

    def endless():
        yield b"2026-11-27T21:30:00Z wotbench: cell done\n"
        release.wait(30)              # blocks like the SDK's read of a stream with no timeout
    client = _Client(_Service(endless()))
    t = time.monotonic()
    out = service._agent_logs(client, "run-1", read_s=0.3, timestamps=True)
    assert time.monotonic() - t < 2
    release.set()
    assert out.startswith(b"2026-11-27T21:30:00Z wotbench: cell done\n")
    assert b"cut after 0.3 s" in out
