"""The ``dtls:`` config block (DTLS-PSK between the gateway emulators and the wot-devices,
docs/DTLS.md): schema, its checks against the rest of the config, and the key
bytes the runner hands to both programs (``wotbench.runner.prepare.dtlskey``).

    dtls:
      enabled: true
      psk_identity: wotbench        # 1..128 bytes
      psk_key: secret-key           # 1..64 bytes, or psk_key_file: a file holding them
      sessions: reuse               # reuse | per-request

The key reaches the programs only as a file (never argv, env or the container config); the
resolved config written into the run directory shows it as ``REDACTED``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator

MAX_KEY = 64          # wot-device and the GE accept 1..64 bytes
MAX_IDENTITY = 128
REDACTED = "REDACTED"
KEY = "dtls.psk_key"
KEY_FILE = "dtls.psk_key_file"


class Dtls(BaseModel):
    model_config = ConfigDict(extra="forbid")
    enabled: bool = Field(
        False, description="DTLS-PSK (coaps://, port 5684) between the main GEs and the "
        "wot-devices; the CD node and its probes stay plain CoAP. Refused with `devices[].server`, "
        "`devices[].external` and `gateways.proxy`")
    psk_identity: str = Field("wotbench",
                              description="the PSK identity the GEs present and the devices accept")
    psk_key: Optional[str] = Field(
        None, description="the key, 1..64 bytes (no trailing newline); shown as REDACTED in "
                          "config.resolved.yaml. Give this or `psk_key_file`, not both")
    psk_key_file: Optional[str] = Field(
        None, description="a file holding the key (one trailing newline ignored), relative to "
                          "the config file")
    sessions: Literal["reuse", "per-request"] = Field(
        "reuse", description="`reuse`: one session per source port and device, handshaken before "
        "T0 (response times exclude handshakes); `per-request`: a new session for every request, "
        "on the schedule (a handshake storm)")

    @field_validator("psk_identity")
    @classmethod
    def _identity(cls, v: str) -> str:
        n = len(v.encode())
        if not 1 <= n <= MAX_IDENTITY or any(ord(c) < 32 or ord(c) == 127 for c in v):
            raise ValueError(f"expected 1..{MAX_IDENTITY} bytes without control characters, got "
                             f"{n} byte(s)")
        return v

    @field_validator("psk_key")
    @classmethod
    def _key(cls, v: Optional[str]) -> Optional[str]:
        if v is None:
            return v
        n = len(v.encode())
        if not 1 <= n <= MAX_KEY:
            raise ValueError(f"expected 1..{MAX_KEY} bytes, got {n}")  # never echo the key
        if v.endswith("\n"):
            raise ValueError("ends with a newline, which the key-file rule strips (expected a "
                             "key without a trailing newline)")
        return v


def key_file_bytes(path: Path) -> bytes:
    """The key held in ``path`` by the programs' rule: raw bytes, one trailing newline
    stripped, 1..64 bytes. ValueError naming what is wrong (never the key)."""
    try:
        raw = path.read_bytes()[:MAX_KEY + 2]
    except OSError as e:
        raise ValueError(f"cannot read {path}: {e.strerror or e}") from None
    key = raw[:-1] if raw.endswith(b"\n") else raw
    if not 1 <= len(key) <= MAX_KEY:
        raise ValueError(f"{path} holds {'no key' if not key else 'more than 64 bytes'}, "
                         f"expected 1..{MAX_KEY} bytes (one trailing newline is ignored)")
    return key


def key_bytes(d: Dtls) -> bytes:
    """The PSK the run uses (``psk_key`` or the content of ``psk_key_file``)."""
    if d.psk_key is not None:
        return d.psk_key.encode()
    return key_file_bytes(Path(d.psk_key_file or ""))


def problems(cfg: Any) -> list[str]:
    """Checks of ``cfg.dtls`` (a ``config.Config``) that need the whole config."""
    d: Dtls = cfg.dtls
    if not d.enabled:
        return []
    if (d.psk_key is None) == (d.psk_key_file is None):
        return [f"{KEY}: with dtls.enabled, give either psk_key (1..{MAX_KEY} bytes) or "
                f"psk_key_file (a file holding them), not {'both' if d.psk_key else 'neither'}"]
    out = []
    if d.psk_key_file is not None:
        try:
            key_file_bytes(Path(d.psk_key_file))
        except ValueError as e:
            out.append(f"{KEY_FILE}: {e}")
    # WoTbench can neither hand a third-party server the key without putting it on its
    # command line nor check its readiness over DTLS: refuse rather than run half-secured
    for i, g in enumerate(cfg.devices):
        if g.server is not None or g.external is not None:
            what = "server" if g.server is not None else "external"
            out.append(f"devices[{i}].{what}: with dtls.enabled, expected wot-devices only "
                       f"(a third-party server cannot be given {KEY} without putting it on its "
                       "command line); set dtls.enabled: false for this run")
    if cfg.gateways.proxy is not None:
        out.append("gateways.proxy: with dtls.enabled, expected no proxy (coaps:// through a "
                   "forward proxy is not supported)")
    return out


def redact(data: dict) -> dict:
    """A dumped config with the key replaced (config.resolved.yaml)."""
    d = data.get("dtls")
    if isinstance(d, dict) and d.get("psk_key") is not None:
        d["psk_key"] = REDACTED
    return data
