"""`make bench`: every benchmark in one go, figures printed (nothing here passes or fails).

The benchmarks pin the emulator under test to core 1 and its peer to core 0, so run them on a
quiet host: any other load on the 2 cores shows up directly in the figures. The load average
before each benchmark is printed so a reader can judge that.
"""
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHES = [
    ("gateway emulator: floors, max sustained rate, send lag", ["ge_bench.py"]),
    ("wot-device: service-time emulation error, max response rate", ["device_bench.py"]),
    ("measurement floor: UDP ping-pong vs R - S (loopback, Docker bridge), CD calibration",
     ["floor_bench.py"]),
    ("DTLS: device CPU per request with and without DTLS, vs coap-server-openssl",
     ["dtls_device_bench.py"]),
    ("Observe: notifications/s and notification latency, wot-device vs libcoap's coap-server",
     ["observe_bench.py"]),
    ("block-wise transfer time vs payload, GE/wot-device vs libcoap; under 1 % loss",
     ["blockwise_bench.py"]),
    ("DTLS: handshake time and req/s with and without DTLS, GE vs libcoap's client",
     ["dtls_bench.py"]),
    ("closed loop: GE clients vs a libcoap client closed loop at 1/100/1000 clients; 10,000 "
     "clients on one GE core", ["closed_loop_bench.py"]),
    ("device push: send lag and largest sustained rate of 1 device, a pod of 64 and the GE",
     ["push_bench.py"]),
    ("HTTP: GE vs wrk against nginx at 1/10/100 connections (closed loop); open-loop latency at "
     "50 % of the max rate vs wrk2", ["http_bench.py"]),
    ("connected devices: 100 000 attached to nginx/nchan and held 5 min, memory per attached "
     "device, RPC round trip from 2 000 applications at 1 000/s with the testbed's share",
     ["connected_bench.py"]),
    ("connected devices: RPC round trip at 1 000/s from 2 000 applications each on its own "
     "WebSocket, through webdis (Debian 13's) with the testbed's share", ["connected_wsapps_bench.py"]),
]


def main() -> int:
    failed = []
    for title, argv in BENCHES:
        load1 = os.getloadavg()[0]
        print(f"\n=== {title}  (load average before: {load1:.2f}, cores: {os.cpu_count()})", flush=True)
        rc = subprocess.call([sys.executable, str(HERE / argv[0]), *argv[1:]], cwd=HERE.parent)
        if rc != 0:
            failed.append(f"{argv[0]} exited {rc}")
    if failed:
        print("\nbenchmarks that did not complete: " + "; ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
