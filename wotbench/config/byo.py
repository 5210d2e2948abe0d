"""Bring your own system under test: the config blocks for third-party CoAP servers as devices
(``devices[].server``), endpoints WoTbench does not start (``devices[].external``), the paths
the trace requests of them (``devices[].paths``) and a forward proxy in the path
(``gateways.proxy``). Schema and checks only; the runner deploys them
(``wotbench.runner.deployment.thirdparty``).

``server`` and ``gateways.proxy`` run either a local Docker image (``image``, its entrypoint
gets ``args``) or a program of this host (``command``: program and arguments). The process
backend runs ``command``; the Docker backend runs ``image``, or, without one, packs
``command``'s program with the shared libraries it loads into a FROM scratch image
(``wotbench.runner.backends.docker.hostimage``). Placeholders in ``args``/``command``: ``{address}`` (the
address it must listen on), ``{port}``, ``{name}``, and with a ``config_template`` ``{config}``
(the rendered file as the program sees it) and ``{scratch}`` (a writable directory: a tmpfs in
a container, whose root stays read-only). ``check`` is a host command run on the rendered
config before the run (``nginx -t``): its failure stops the run with the template's lines.
"""
from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

PLACEHOLDERS = ("address", "port", "name", "config", "scratch")
HTTP_PROXY_PORT = 8080          # gateways.proxy with mode: http, unless port is given
HTTP_PROXY_PREFIX = "/proxy/"   # ... and the path before the CoAP URI (Californium proxy2's)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


def _argv(v: Any) -> Any:
    """A command given as one string is split like a shell would (no shell runs it)."""
    if isinstance(v, str):
        try:
            return shlex.split(v)
        except ValueError as e:
            raise ValueError(f"cannot split {v!r} into arguments ({e})") from None
    return v


def _check_placeholders(argv: list[str]) -> list[str]:
    for a in argv:
        try:
            a.format(**{k: "x" for k in PLACEHOLDERS})
        except (KeyError, IndexError, ValueError) as e:
            raise ValueError(f"argument {a!r}: unknown placeholder {e} (known: "
                             + ", ".join("{" + p + "}" for p in PLACEHOLDERS)
                             + "; write {{ and }} for literal braces)") from None
    return argv


class Program(_Model):
    """A third-party CoAP program WoTbench starts: a local image or a host command."""
    image: Optional[str] = Field(
        None, description="a local Docker image (no registry: built here or `docker load`ed); its "
                          "entrypoint gets `args`")
    command: Optional[list[str]] = Field(
        None, description="a program of this host and its arguments (a list, or one string split "
        "like a shell would): the process backend runs it; the Docker backend packs the program "
        "with the shared libraries `ldd` lists and the loader into a FROM scratch image")
    args: list[str] = Field(default_factory=list,
                            description="arguments to the image's entrypoint")
    port: int = Field(5683, ge=1, le=65535, description="the port it listens on")
    ready_timeout_s: float = Field(
        10.0, gt=0, le=600, description="how long to wait for it to answer a CoAP ping (an "
                                        "HTTP request with protocol: http) from this host (a "
                                        "proxy must also forward one real request)")
    config_template: Optional[str] = Field(
        None, description="a configuration file for it (relative to the config file), rendered "
        "per device into the run directory: `{address}`, `{port}`, `{name}`, `{scratch}` are "
        "replaced, every other brace is text (nginx); `{config}` in command/args/check is its "
        "path as the program sees it (docs/HTTP.md)")
    check: Optional[list[str]] = Field(
        None, description="a command of this host that checks the rendered config before the "
        "run (e.g. [nginx, -t, -q, -e, stderr, -c, '{config}', -p, '{scratch}']); when it "
        "fails the run stops with its output, the template's file:line in it")

    @field_validator("command", "check", mode="before")
    @classmethod
    def _command(cls, v: Any, info: ValidationInfo) -> Any:
        v = _argv(v)
        if isinstance(v, list) and not v:
            raise ValueError("must name a program, e.g. " + (
                "[nginx, -t, -c, '{config}']" if info.field_name == "check"
                else "[coap-server-notls, -A, '{address}']"))
        return v

    @field_validator("command", "args", "check")
    @classmethod
    def _placeholders(cls, v: Optional[list[str]]) -> Optional[list[str]]:
        return _check_placeholders(v) if v else v

    def argv(self, *, use_image: bool, address: str, port: int, name: str, config: str = "",
             scratch: str = "") -> list[str]:
        """The arguments with placeholders filled: the image's (``args``) or the command's."""
        raw = self.args if use_image else (self.command or [])
        return [a.format(address=address, port=port, name=name, config=config, scratch=scratch)
                for a in raw]


class ServerSpec(Program):
    """``devices[].server``: every device of the group runs this CoAP server."""
    cpus: int = Field(
        1, ge=1, le=256, description="device cores the started servers get for themselves "
        "(issue 35; a multi-threaded broker); refused with the reason when the host cannot "
        "spare them beside the OS, GE, CD and device cores")


class ProxySpec(Program):
    """``gateways.proxy``: every main-GE request goes through this CoAP forward proxy: a
    container / process WoTbench starts (``image`` or ``command``) or an ``endpoint`` it does
    not start."""
    endpoint: Optional[str] = Field(
        None, description="`HOST:PORT` of a proxy WoTbench does not start (instead of "
                          "`image`/`command`)")
    mode: Literal["proxy-uri", "proxy-scheme", "http"] = Field(
        "proxy-uri", description="how the GE addresses a device through it: `proxy-uri` (a "
        "CoAP forward proxy; one Proxy-Uri option), `proxy-scheme` (Proxy-Scheme + "
        "Uri-Host/Port/Path/Query), or `http`: an HTTP->CoAP proxy (the paper's Figure 1): the GE "
        "speaks HTTP/1.1 to it, each request to `http://PROXY:PORT{http_prefix}coap://DEVICE:5683/"
        "PATH` (RFC 8075 section 5); `port` defaults to 8080 (docs/HTTP-PROXY.md)")
    http_prefix: Optional[str] = Field(
        None, description="with `mode: http`: the path before the device's CoAP URI in the "
        "HTTP request target (default `/proxy/`, Californium proxy2's)")
    http_connections: int = Field(
        8, ge=1, le=1024, description="with `mode: http`: the keep-alive connections the GE "
        "keeps open to the proxy (the web users' connections); a request that finds none free "
        "waits, and its R counts the wait from its scheduled time")

    @field_validator("endpoint")
    @classmethod
    def _endpoint(cls, v: Optional[str]) -> Optional[str]:
        if v is not None:
            split_endpoint(v)
        return v

    @field_validator("http_prefix")
    @classmethod
    def _http_prefix(cls, v: Optional[str]) -> Optional[str]:
        if v is not None and (not v.startswith("/") or any(c in v for c in "?# \t\r\n")):
            raise ValueError(f"expected a path that starts with '/' and has no '?', '#' or "
                             f"spaces, such as /proxy/, got {v!r}")
        return v

    @model_validator(mode="after")
    def _http_defaults(self) -> "ProxySpec":
        """An HTTP->CoAP proxy listens on HTTP's port unless told otherwise."""
        if self.mode == "http":
            if "port" not in self.model_fields_set:
                self.port = HTTP_PROXY_PORT
            if self.http_prefix is None:
                self.http_prefix = HTTP_PROXY_PREFIX
        return self

    @property
    def http(self) -> bool:
        """An HTTP->CoAP proxy (the GE speaks HTTP to it), not a CoAP forward proxy."""
        return self.mode == "http"

    @property
    def started(self) -> bool:
        return self.endpoint is None


def split_endpoint(s: str) -> tuple[str, int]:
    """``"host:port"`` (``[v6]:port``) -> (host, port); ValueError with the expected form."""
    host, sep, port = s.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"expected HOST:PORT such as 127.0.0.1:5683, got {s!r}")
    return host, int(port)


def _endpoints(v: Any) -> Any:
    if isinstance(v, str):
        v = [v]
    if isinstance(v, list):
        for e in v:
            if not isinstance(e, str):
                raise ValueError(f"expected a list of HOST:PORT strings, got {e!r}")
            split_endpoint(e)
    return v


def group_problems(i: int, g: Any, count_given: bool) -> list[str]:
    """Checks of one device group's third-party keys (``g`` a ``config.DeviceGroup``)."""
    key = f"devices[{i}]"
    out = []
    if g.server is not None and g.external is not None:
        out.append(f"{key}: 'server' and 'external' exclude each other (WoTbench starts a "
                   "server; an external endpoint it does not start)")
    if g.server is not None and g.server.image is None and g.server.command is None:
        out.append(f"{key}.server: give 'image' (a local Docker image) or 'command' (a program "
                   "of this host, e.g. [coap-server-notls, -A, '{address}'])")
    if g.external is not None:
        if count_given and g.count != len(g.external):
            out.append(f"{key}.count: {g.count}, but external lists {len(g.external)} "
                       "endpoint(s): one device per endpoint (leave count out)")
        if g.network is not None:
            out.append(f"{key}.network: an external endpoint cannot be impaired (WoTbench does "
                       "not run it); remove network from this group")
    if g.server is not None and (g.server.check or _uses(g.server, "config")) \
            and g.server.config_template is None:
        out.append(f"{key}.server: {{config}} or 'check' without config_template: give "
                   "config_template (the file rendered into the run directory)")
    if g.server is not None and g.server.config_template is not None \
            and not Path(g.server.config_template).is_file():
        out.append(f"{key}.server.config_template: file not found: {g.server.config_template}")
    if g.paths is not None and g.server is None and g.external is None:
        out.append(f"{key}.paths: only for a third-party server or an external endpoint; "
                   "wot-device serves the synthetic resources r0..r{resources-1}")
    for j, path in enumerate(g.paths or []):   # an http group's are templates (config.http)
        if g.protocol != "http" and ("{{" in path or "}}" in path):
            out += coap_path_problems(path, f"{key}.paths[{j}]")
    if (g.server is not None or g.external is not None) and g.paths is None:
        out.append(f"{key}.paths: required with {'server' if g.server else 'external'}: the "
                   "resource paths the trace may request, e.g. [time] for coap-server")
    return out


def coap_path_problems(path: str, key: str) -> list[str]:
    """A CoAP path may hold the per-request values (the GE fills them in its Uri-Path options,
    gateway-emulator/src/coap_tmpl.c), in the path only: not the trace line's {{index}} or
    {{device}} (HTTP only), not in the query, not beside a percent-escape."""
    from wotbench.config.http_spec import PER_REQUEST, template_problems
    out = template_problems(path, key, PER_REQUEST)
    if out:
        return [p + " (a CoAP path takes the per-request values only)" for p in out]
    query = path.partition("?")[2]
    if "{{" in query:
        return [f"{key}: {path!r}: a value in the query, expected the per-request values in "
                "the path's segments only (they are filled in its Uri-Path options)"]
    if "%" in path:
        return [f"{key}: {path!r}: a percent-escape in a path with values, expected plain "
                "segments (the option holds the decoded bytes)"]
    return []


def _uses(p: Program, placeholder: str) -> bool:
    return any("{" + placeholder + "}" in a for a in [*(p.command or []), *p.args])


def proxy_problems(p: Optional[ProxySpec]) -> list[str]:
    if p is None:
        return []
    if p.endpoint is not None and (p.image or p.command):
        return ["gateways.proxy: give either 'endpoint' (a proxy WoTbench does not start) or "
                "'image'/'command' (one it starts), not both"]
    extra = [k for k in ("http_prefix", "http_connections") if k in p.model_fields_set]
    if extra and not p.http:
        return [f"gateways.proxy.{extra[0]}: only with mode: http (an HTTP->CoAP proxy); "
                f"mode is {p.mode}: remove {extra[0]} or set mode: http"]
    if p.endpoint is None and p.image is None and p.command is None:
        return ["gateways.proxy: give 'image' or 'command' (a forward proxy WoTbench starts, e.g. "
                "command: [coap-server-notls, -A, '{address}', -P, ',wotbench-proxy']) or "
                "'endpoint' (HOST:PORT of one it does not start)"]
    return []


ENDPOINTS_VALIDATOR = _endpoints
