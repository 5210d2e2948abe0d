"""Fuzz the ASan+UBSan wot-device with >= 10^5 random, truncated and mutated datagrams."""
import os
import random
import socket
import time

from testkit.coap import CON, DELETE, GET, NON, POST, PUT, Client, code_str, encode
from testkit.device import Device

N = 100_000


def _valid(rng: random.Random) -> bytes:
    path = rng.choice(["r0", "a/b", "nope", ".well-known/core", "a", "r0/x", ""])
    code = rng.choice([GET, PUT, POST, DELETE, 0, 5, 7, 0x45, 0xFF])
    mtype = rng.choice([CON, NON, NON, 2, 3])
    tok = os.urandom(rng.choice([0, 1, 4, 8]))
    payload = os.urandom(rng.choice([0, 0, 3, 200]))
    return encode(mtype, code, rng.randrange(65536), tok, path, payload)


def _mutate(rng: random.Random, d: bytes) -> bytes:
    d = bytearray(d)
    kind = rng.randrange(6)
    if kind == 0:
        return bytes(os.urandom(rng.randrange(0, 64)))
    if kind == 1 and d:
        return bytes(d[: rng.randrange(len(d))])
    if kind == 2 and d:
        for _ in range(rng.randint(1, 4)):
            d[rng.randrange(len(d))] ^= 1 << rng.randrange(8)
        return bytes(d)
    if kind == 3 and len(d) > 4:  # random option bytes after the header
        i = rng.randrange(4, len(d))
        d[i:i] = os.urandom(rng.randint(1, 8))
        return bytes(d)
    if kind == 4:  # header byte 0: token length 9..15 (reserved), version != 1
        d[0:1] = bytes([rng.randrange(256)])
        return bytes(d)
    return bytes(d)


def test_fuzz_no_crash(device_asan_bin, tmp_path):
    rng = random.Random(1234)
    seeds = [_valid(rng) for _ in range(512)]
    with Device(device_asan_bin, tmp_path, "r0,0,sleep,8\na/b,0,busy,1\n", "--queue", "4096") as d:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setblocking(False)
        deadline = time.monotonic() + 40
        for i in range(N):
            dg = _mutate(rng, rng.choice(seeds))
            try:
                s.sendto(dg, d.addr)
            except (BlockingIOError, ConnectionRefusedError):
                pass
            if i % 200 == 199:  # pace: let the device read most of them; drain replies
                time.sleep(0.001)
                try:
                    while s.recv(4096):
                        pass
                except (BlockingIOError, ConnectionRefusedError):
                    pass
            assert time.monotonic() < deadline
            assert d.proc.poll() is None, d.stderr()[-3000:]
        s.close()
        c = Client(d.addr)
        r = c.request(GET, "r0", timeout=5)
        assert r is not None and code_str(r["code"]) == "2.05"
        c.close()
        assert d.stop() == 0, d.stderr()[-3000:]
        err = d.stderr()
        assert "AddressSanitizer" not in err and "runtime error" not in err, err[-3000:]
        summ = d.summary()
        # most datagrams reached libcoap's parser (the rest: ignored types, or kernel drops)
        assert summ["malformed"] + summ["requests"] >= 0.3 * N, summ
