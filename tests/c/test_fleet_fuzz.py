"""Fuzz the ASan+UBSan wot-fleet with random, truncated and mutated datagrams (the mutations of
test_device_fuzz.py) sent to two devices of different response modes: no crash, no sanitizer
report, the devices still answer, every logged row is well formed."""
import random
import socket
import time

from testkit.coap import GET, Client, code_str, ping
from testkit.fleet import Fleet, Spec, build

from test_device_fuzz import _mutate, _valid   # noqa: E402  (tests/c is on sys.path)

N = 30_000
RES = "r0,0,sleep,8\na/b,200,sleep,0\na,0,busy,1\n"


def test_fuzz_fleet(tmp_path):
    binary = build("wot-fleet-asan")
    specs = [Spec(0, RES, slots=2, queue=8, response="separate"), Spec(1, RES)]
    with Fleet(binary, tmp_path, specs, "--log-capacity", "100000") as f:
        rng = random.Random(29)
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("127.0.0.1", 0))
        s.setblocking(False)
        for k in range(N):
            s.sendto(_mutate(rng, _valid(rng)), specs[k % 2].listen)
            if k % 64 == 63:      # bounded in flight; answers are read and thrown away
                time.sleep(0.001)
                try:
                    while s.recv(4096):
                        pass
                except BlockingIOError:
                    pass
        s.close()
        time.sleep(0.5)
        for sp in specs:
            assert ping(sp.listen)
            c = Client(sp.listen)
            assert code_str(c.request(GET, "r0")["code"]) == "2.05"
            c.close()
        assert f.stop() == 0
        err = f.stderr()
        assert "ERROR: AddressSanitizer" not in err and "runtime error" not in err, err[-3000:]
        rows = f.log()
        devs = f.devices()
        assert sum(int(d["malformed"]) for d in devs.values()) > 1000
        # every request is one row, unless the SIGTERM cut it short (pending_at_exit)
        assert len(rows) == sum(int(d["requests"]) for d in devs.values()) - \
            f.summary()["loop"][0]["pending_at_exit"]
        for r in rows:
            assert r["method"] in ("GET", "POST", "PUT", "DELETE")
            assert r["code"] in ("2.05", "2.04", "2.02", "4.04", "5.03"), r
            assert int(r["arrival_kernel_ns"]) <= int(r["arrival_ns"]) <= int(r["response_sent_ns"])
