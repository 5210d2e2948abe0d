"""The trace and resource file formats the generator writes (docs/CONTRACTS.md §1): headers,
request URIs, resource rows. Reading them back is :mod:`wotbench.workload.trace_io`."""
from __future__ import annotations

from pathlib import Path

from wotbench.deploy.resolve import DeviceAddress
from wotbench.rundir import atomic

TRACE_HEADER = "device_id,send_time_us,method,uri"
RESOURCE_HEADER = "path,service_time_us,mode,payload_bytes"
RESOURCE_OBSERVE_COLUMNS = (",notify_dist,notify_mean_us,notify_jitter_us,notify_service_us,"
                            "notify_type,max_age_s")


def authority(a: DeviceAddress) -> str:
    return f"[{a.ip}]:{a.port}" if ":" in a.ip else f"{a.ip}:{a.port}"


def uri(a: DeviceAddress, path: str) -> str:
    return f"coap://{authority(a)}/{path}"


def write_resources(path: Path, rows: list[tuple]) -> None:
    header = RESOURCE_HEADER + (RESOURCE_OBSERVE_COLUMNS if rows and len(rows[0]) > 4 else "")
    atomic.write_text(path, header + "\n" + "".join(",".join(str(x) for x in row) + "\n" for row in rows))
