"""Third-party systems under test in a run (the config side is ``wotbench.config.byo``): which
programs a run starts, the checks before anything starts (programs present, impairments
possible), readiness of what WoTbench did not build (CoAP ping from this host, an HTTP GET for
``protocol: http``: ``httpprobe``) and the check that a proxy really forwards (a CoAP forward
proxy; an HTTP->CoAP proxy: ``check_http_proxy``). The backends run the programs
(``prepare_programs``).
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional, Sequence

from wotbench.config.byo import Program
from wotbench.config.schema import Config
from wotbench.errors import ConfigError, EnvironmentProblem
from wotbench.runner.deployment import coapprobe, httpprobe
from wotbench.workload import httpproxy

if TYPE_CHECKING:
    from wotbench.runner.deployment.components import DeviceRun

PROXY_KEY = "gateways.proxy"
# what a forward proxy answers when it does not forward
REFUSALS = {"5.05": "5.05 Proxying Not Supported", "4.02": "4.02 Bad Option",
            "reset": "a reset (RST)"}
ABSENT_PATH = "wotbench-absent-resource"   # what no device serves: a proxy must answer 4xx


def programs(cfg: Config) -> dict[str, Program]:
    """Config key -> the third-party program WoTbench starts there."""
    out: dict[str, Program] = {f"devices[{i}].server": g.server
                               for i, g in enumerate(cfg.devices) if g.server is not None}
    p = cfg.gateways.proxy
    if p is not None and p.started:
        out[PROXY_KEY] = p
    return out


def find_command(key: str, program: Program) -> Path:
    """The host path of ``program.command[0]``; ConfigError naming the key when it is not here."""
    if not program.command:
        raise ConfigError([f"{key}.command: required with the process backend (a program of this "
                           f"host and its arguments; an image ({program.image}) runs only with "
                           "backend: docker)"])
    name = program.command[0]
    found = shutil.which(name)
    if found is None:
        raise ConfigError([f"{key}.command: program {name!r} not found on this host (PATH, or "
                           "as a path); install it (coap-server-notls: apt-get install "
                           "libcoap3-bin) or give its full path"])
    return Path(found).absolute()   # not resolved: a venv's python must keep its own path


# what a program reads at start: an argument (or a class-path element of one) ending so names
# a file that must be there, e.g. the proxy's jar; other arguments may name what it creates
INPUT_SUFFIXES = (".jar", ".java", ".class", ".py", ".js", ".lua", ".conf", ".cfg", ".ini",
                  ".json", ".yaml", ".yml", ".xml", ".properties", ".pem", ".crt", ".key", ".so")


def missing_files(key: str, program: Program, cwd: Path) -> list[str]:
    """The input files ``program.command`` names that this host lacks, one line each with its
    argument's key; relative paths count from ``cwd`` (the program's working directory: the
    process backend starts it where wotbench runs). Arguments with placeholders or URLs are
    left alone."""
    out = []
    for i, arg in enumerate(program.command or []):
        if "{" in arg or "://" in arg:
            continue
        for piece in arg.split("=", 1)[-1].split(":"):   # --opt=FILE, a class path A:B
            if not piece.endswith(INPUT_SUFFIXES) or "/" not in piece:
                continue
            path = Path(piece) if Path(piece).is_absolute() else cwd / piece
            if not path.exists():
                out.append(f"{key}.command[{i}]: file not found on this host: {piece}"
                           + ("" if Path(piece).is_absolute() else
                              f" ({path.resolve()}: relative to the directory wotbench runs "
                              "in, the program's working directory)"))
    return out


def check_image(client, key: str, image: str) -> None:
    """ConfigError naming the key when this Docker engine has no image ``image``."""
    import docker.errors
    try:
        client.images.get(image)
    except docker.errors.ImageNotFound:
        raise missing_image(key, image) from None


def missing_image(key: str, image: str) -> ConfigError:
    return ConfigError([f"{key}.image: no local Docker image {image!r} (no registry is used: "
                        "nothing is pulled); build it here (docker build -t NAME DIR) or load "
                        "it (docker load -i FILE) -- `docker images` lists the local ones -- or "
                        "give 'command' instead to pack a program of this host"])


def check_impairments(cfg: Config, impairment_backend: Optional[str]) -> None:
    """A third-party server can only be impaired at the network level (netem/pumba): the app
    backend lives inside wot-device. Stop before the run when only app would be used."""
    if impairment_backend != "app":
        return
    hit = [i for i, g in enumerate(cfg.devices) if g.server is not None and g.network is not None]
    if hit:
        i = hit[0]
        raise EnvironmentProblem(
            f"devices[{i}].network: group {cfg.devices[i].group} runs a third-party server, and "
            "this run's only impairment backend is 'app', which lives inside wot-device; a "
            "third-party server needs the netem or pumba backend (network.backend), which need "
            "Docker and a kernel with sch_netem (`wotbench doctor`). Remove "
            f"devices[{i}].network or run on such a host")


def ge_needs_host_network(cfg: Config) -> bool:
    """Do the main GEs talk to endpoints outside the run's bridges (external devices or an
    external proxy)? A Docker GE then runs in the host's network namespace."""
    p = cfg.gateways.proxy
    return any(g.external is not None for g in cfg.devices) or (p is not None and not p.started)


def wait_answering(targets: Sequence["DeviceRun"], keys: dict[str, str], timeout_s: float,
                   dead: Optional[Callable[[], dict[str, str]]] = None) -> None:
    """CoAP-ping (HTTP-GET for ``protocol: http``) every target from this host until it
    answers; EnvironmentProblem naming the silent ones, their config keys and the fix."""
    coap = [d for d in targets if d.protocol != "http"]
    http = [d for d in targets if d.protocol == "http"]
    silent = coapprobe.ping_all([(d.name, d.address, d.port) for d in coap], timeout_s, dead) \
        if coap else []
    if http:
        silent += httpprobe.probe_all([(d.name, d.address, d.port, d.probe_path) for d in http],
                                      timeout_s, dead)[0]
    if not silent:
        return
    gone = dead() if dead else {}
    by_name = {d.name: d for d in targets}
    lines = []
    for n in silent[:10]:
        d = by_name[n]
        if d.protocol == "http":
            lines.append(_http_silent(d, keys.get(n, n), timeout_s, gone.get(n)))
            continue
        if d.role == "external":
            fix = ("it is not started by WoTbench: start it first (e.g. coap-server-notls -A "
                   f"{d.address} -p {d.port}) and check that it answers a CoAP ping "
                   f"(coap-client-notls -m ping coap://{d.address}:{d.port})")
        elif n in gone:
            fix = f"it {gone[n]}: see its output in the run directory"
        else:
            fix = ("check that the program listens on {address}:{port} (its arguments) and "
                   "answers an empty CON with RST, or raise ready_timeout_s")
        lines.append(f"  {keys.get(n, n)}: {n} at {d.address}:{d.port} did not answer a CoAP "
                     f"ping within {timeout_s:g} s; {fix}")
    raise EnvironmentProblem(f"{len(silent)} endpoint(s) did not answer the readiness ping:\n"
                             + "\n".join(lines))


def _http_silent(d: "DeviceRun", key: str, timeout_s: float, gone: Optional[str]) -> str:
    url = f"http://{d.endpoint}/{d.probe_path}"
    if d.role == "external":
        fix = (f"it is not started by WoTbench: start it first and check that `curl {url}` "
               "answers")
    elif gone:
        fix = (f"it {gone}: see its output in the run directory (devices/{d.name}/); a "
               "config error is named there with its file:line")
    else:
        fix = ("check that the server listens on {address}:{port} (its config or arguments) "
               "and answers HTTP, or raise ready_timeout_s")
    return f"  {key}: {d.name} at {d.endpoint} did not answer GET {url} within {timeout_s:g} s; {fix}"


def check_proxy(proxy: "DeviceRun", mode: str, target_uri: str, timeout_s: float = 5.0) -> str:
    """One GET for ``target_uri`` through the proxy; its response code. ConfigError when the
    proxy refuses to forward, EnvironmentProblem when nothing came back."""
    code = coapprobe.proxied_get((proxy.address, proxy.port), target_uri, mode, timeout_s)
    where = f"{PROXY_KEY}: the proxy at {proxy.address}:{proxy.port}"
    if code in REFUSALS:
        other = "proxy-scheme" if mode == "proxy-uri" else "proxy-uri"
        raise ConfigError([f"{where} answered {REFUSALS[code]} to a {mode} request for "
                           f"{target_uri}: it does not forward. Start it as a forward proxy "
                           "(coap-server-notls: -P ',NAME'), or try gateways.proxy.mode: "
                           f"{other}"])
    if code is None:
        raise EnvironmentProblem(f"{where} gave no answer within {timeout_s:g} s to a {mode} "
                                 f"request for {target_uri} (answered its ping): it may not "
                                 "reach the devices; check its arguments and the device")
    return code


def check_http_proxy(proxy: "DeviceRun", prefix: str, target_uri: str, timeout_s: float,
                     gone: Optional[Callable[[], Optional[str]]] = None) -> int:
    """An HTTP->CoAP proxy (``gateways.proxy.mode: http``) is ready when it accepts a TCP
    connection, forwards a GET for ``target_uri`` (a device's CoAP URI) and answers 2xx, and
    answers a resource the device does not have with 4xx (a server that answers everything 2xx
    is no proxy); the first status. ConfigError when it is not such a proxy, EnvironmentProblem
    when it does not answer or cannot reach the device."""
    where = f"{PROXY_KEY}: the HTTP->CoAP proxy at {proxy.address}:{proxy.port}"
    why = httpprobe.wait_accepting(proxy.address, proxy.port, timeout_s, gone)
    if why is not None:
        dead = gone() if gone else None
        if dead:
            raise EnvironmentProblem(f"{where} {dead} before it accepted a TCP connection; "
                                     "see its output in the run directory (devices/proxy/): its "
                                     "command line may be wrong (a class path, an argument)")
        fix = ("it is not started by WoTbench: start it first" if proxy.role == "external" else
               "check that the program listens on {address}:{port} (its arguments), or raise "
               f"{PROXY_KEY}.ready_timeout_s")
        raise EnvironmentProblem(f"{where} accepted no TCP connection within {timeout_s:g} s "
                                 f"({why}); {fix}")
    uri = httpproxy.target_uri(proxy.address, proxy.port, prefix, target_uri)
    absent = httpproxy.target_uri(proxy.address, proxy.port, prefix,
                                  target_uri.rsplit("/", 1)[0] + "/" + ABSENT_PATH)
    answers = []
    for u in (uri, absent):
        try:
            answers.append(httpprobe.get(u, max(timeout_s, 5.0)))
        except OSError as e:
            raise EnvironmentProblem(f"{where} gave no HTTP answer to GET {u} ({e}): it takes "
                                     "TCP connections but may not speak HTTP/1.1, or may not "
                                     "reach the device; check its arguments") from None
    ok, miss = answers
    form = f"{prefix}coap://HOST:PORT/PATH"
    if ok.status in (502, 503, 504):
        raise EnvironmentProblem(f"{where} answered {ok.status} {ok.reason} to GET {uri}: it "
                                 "takes the request but got no answer from the device; check "
                                 "that it reaches the devices' network")
    if not 200 <= ok.status < 300:
        raise ConfigError([f"{where} answered {ok.status} {ok.reason} to GET {uri}: it did not "
                           "forward the request to the device. It is not an HTTP->CoAP proxy, or "
                           f"it takes device URIs in another form than {form}: set "
                           f"{PROXY_KEY}.http_prefix to its path (Californium proxy2: /proxy/), "
                           f"or, for a CoAP forward proxy, {PROXY_KEY}.mode: proxy-uri"])
    if 200 <= miss.status < 300:
        raise ConfigError([f"{where} answered {miss.status} {miss.reason} to GET {absent}, a "
                           "resource the device does not have: it answers without asking the "
                           "device, so it is not an HTTP->CoAP proxy; give the command of one "
                           f"(docs/HTTP-PROXY.md) or another {PROXY_KEY}.http_prefix"])
    return ok.status
