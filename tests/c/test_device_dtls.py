"""wot-device over DTLS-PSK (coaps://) against a client nobody here wrote: libcoap3-bin's
coap-client-openssl (and aiocoap's tinydtls transport when DTLSSocket is installed).
ASan+UBSan build, loopback only; every client call is bounded in time."""
import shutil
import subprocess

import pytest

from testkit.device import Device

RES = "r0,0,sleep,16\nslow,2000,sleep,4\n"
ID, KEY = "wotbench", b"secret-key-0123"
CLIENT = shutil.which("coap-client-openssl")
needs_client = pytest.mark.skipif(CLIENT is None, reason="coap-client-openssl missing "
                                  "(apt-get install libcoap3-bin)")


def key_file(tmp_path, key: bytes = KEY, name: str = "psk.key"):
    p = tmp_path / name
    p.write_bytes(key + b"\n")   # one trailing newline: stripped by the device
    p.chmod(0o400)
    return p


def coaps(dev, *args: str, ident: str = ID, key: bytes = KEY, method: str = "get",
          timeout: float = 8) -> subprocess.CompletedProcess:
    """One coap-client-openssl exchange; a client that hangs (no handshake) is killed."""
    host, port = dev.addr
    uri = f"coaps://{host}:{port}/{args[0]}"
    cmd = [CLIENT, "-u", ident, "-k", key.decode(), "-m", method, "-B", "3", *args[1:], uri]
    try:
        return subprocess.run(cmd, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        return subprocess.CompletedProcess(cmd, -9, e.stdout or b"", e.stderr or b"")


@pytest.fixture
def dtls_dev(device_asan_bin, tmp_path):
    kf = key_file(tmp_path)
    with Device(device_asan_bin, tmp_path, RES, "--dtls-psk-identity", ID,
                "--dtls-psk-key-file", str(kf)) as d:
        yield d
        d.stop()
        assert "ERROR: AddressSanitizer" not in d.stderr()
        assert "runtime error" not in d.stderr()


@needs_client
def test_get_put_over_dtls_with_logs(dtls_dev):
    r = coaps(dtls_dev, "r0")
    assert r.returncode == 0 and r.stdout.strip() == b"x" * 16, r.stderr
    r = coaps(dtls_dev, "slow", "-e", "hello", method="put")   # worker + separate response
    assert r.returncode == 0, r.stderr
    r = coaps(dtls_dev, "nope")
    assert b"4.04" in r.stderr + r.stdout or r.returncode != 0
    assert dtls_dev.stop() == 0
    log = dtls_dev.log()
    assert [(x["path"], x["method"], x["code"]) for x in log] == \
        [("r0", "GET", "2.05"), ("slow", "PUT", "2.04"), ("", "GET", "4.04")]
    for row in log:
        # the kernel stamp is the encrypted record's arrival; the handler sees it after
        # decryption; the response stamp is taken before the encrypted record is sent
        assert 0 < int(row["arrival_ns"]) - int(row["arrival_kernel_ns"]) < 1_000_000_000
        assert int(row["response_sent_ns"]) >= int(row["end_ns"] or row["arrival_ns"])
        assert row["token"]
    assert int(log[1]["end_ns"]) - int(log[1]["start_ns"]) >= 2_000_000
    s = dtls_dev.summary()
    assert s["dtls"] == {"handshakes_ok": 3, "handshakes_failed": 0, "unknown_identity": 0}
    assert s["requests"] == 3 and s["responses"] == 3


@needs_client
def test_wrong_identity_and_key_fail_cleanly_and_are_counted(dtls_dev):
    bad_id = coaps(dtls_dev, "r0", ident="intruder", timeout=5)
    assert bad_id.stdout.strip() != b"x" * 16
    bad_key = coaps(dtls_dev, "r0", key=b"wrong-key", timeout=5)
    assert bad_key.stdout.strip() != b"x" * 16
    good = coaps(dtls_dev, "r0")   # the device keeps serving
    assert good.returncode == 0 and good.stdout.strip() == b"x" * 16, good.stderr
    assert dtls_dev.stop() == 0
    s = dtls_dev.summary()
    # the wrong key is counted when its half-open session ends (here: at exit), since OpenSSL
    # drops a Finished that fails its MAC without an alert (RFC 6347 §4.1.2.7)
    assert s["dtls"]["handshakes_ok"] == 1 and s["dtls"]["handshakes_failed"] == 2
    assert s["dtls"]["unknown_identity"] == 1
    assert s["requests"] == 1 and len(dtls_dev.log()) == 1
    assert dtls_dev.stderr().count("DTLS handshake with 127.") == 2
    assert "wrong-key" not in dtls_dev.stderr() and KEY.decode() not in dtls_dev.stderr()


@needs_client
def test_plain_coap_to_the_dtls_port_is_not_served(dtls_dev):
    host, port = dtls_dev.addr
    r = subprocess.run([CLIENT, "-B", "1", f"coap://{host}:{port}/r0"], capture_output=True,
                       timeout=10)
    assert r.stdout.strip() != b"x" * 16
    assert coaps(dtls_dev, "r0").stdout.strip() == b"x" * 16
    assert dtls_dev.stop() == 0
    assert dtls_dev.summary()["requests"] == 1


@pytest.mark.parametrize("args, message", [
    (["--dtls-psk-identity", "x"], "--dtls-psk-identity without --dtls-psk-key-file"),
    (["--dtls-psk-key-file", "KEY"], "--dtls-psk-key-file without --dtls-psk-identity"),
    (["--dtls-psk-identity", "x", "--dtls-psk-key-file", "MISSING"],
     "--dtls-psk-key-file {MISSING}: cannot read it"),
    (["--dtls-psk-identity", "x", "--dtls-psk-key-file", "EMPTY"], "the key is empty"),
    (["--dtls-psk-identity", "x", "--dtls-psk-key-file", "LONG"], "the key is too long"),
    (["--dtls-psk-identity", "", "--dtls-psk-key-file", "KEY"], "--dtls-psk-identity of 0 bytes, expected 1..128"),
])
def test_bad_dtls_options_exit_2_naming_the_option(device_asan_bin, tmp_path, args, message):
    files = {"KEY": key_file(tmp_path), "MISSING": tmp_path / "missing.key",
             "EMPTY": key_file(tmp_path, b"", "empty.key"),
             "LONG": key_file(tmp_path, b"k" * 65, "long.key")}
    args = [str(files.get(a, a)) for a in args]
    (tmp_path / "r.csv").write_text("path,service_time_us,mode,payload_bytes\nr0,0,sleep,1\n")
    r = subprocess.run([str(device_asan_bin), "--resources", str(tmp_path / "r.csv"),
                        "--log-dir", str(tmp_path), *args], capture_output=True, text=True,
                       timeout=10)
    assert r.returncode == 2
    assert message.format(MISSING=files["MISSING"]) in r.stderr
    assert not (tmp_path / "ready").exists()


AIOCOAP_CLIENT = """
import asyncio, sys
from aiocoap import Context, Message, GET, PUT
async def main(uri, ident, key):
    ctx = await Context.create_client_context()
    ctx.client_credentials.load_from_dict({uri + "*": {"dtls": {
        "psk": {"ascii": key}, "client-identity": {"ascii": ident}}}})
    try:
        for code, path, body in ((GET, "r0", b""), (PUT, "slow", b"hi")):
            r = await asyncio.wait_for(ctx.request(Message(code=code, uri=uri + path,
                                                           payload=body)).response, 4)
            print(r.code, r.payload.decode())
    except Exception as e:
        print("failed", type(e).__name__)
    await ctx.shutdown()
asyncio.run(main(*sys.argv[1:]))
"""


def test_aiocoap_tinydtls_client(dtls_dev):
    """aiocoap's tinydtls transport (TLS_PSK_WITH_AES_128_CCM_8, the only suite tinydtls has)."""
    pytest.importorskip("aiocoap")
    pytest.importorskip("DTLSSocket", reason="aiocoap's DTLS transport needs DTLSSocket from "
                        "PyPI, whose build needs autoconf/automake (optional)")
    import sys
    host, port = dtls_dev.addr
    uri = f"coaps://{host}:{port}/"

    def run(key: str) -> str:
        return subprocess.run([sys.executable, "-c", AIOCOAP_CLIENT, uri, ID, key],
                              capture_output=True, text=True, timeout=30).stdout
    assert run(KEY.decode()).split("\n")[:2] == ["2.05 Content " + "x" * 16, "2.04 Changed "]
    assert run("wrong-key").startswith("failed")
    assert dtls_dev.stop() == 0
    s = dtls_dev.summary()
    assert s["dtls"]["handshakes_ok"] == 1 and s["dtls"]["handshakes_failed"] == 1
    assert s["requests"] == 2
