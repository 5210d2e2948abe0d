"""The harness's side of client devices (``devices[].push``, issue 23):

1. :func:`render_schedules` renders every pushing device's schedule before anything starts
   (the pre-flight: a template that does not render is bad input, exit 2) and
   :func:`write_schedules` writes them into the devices' log directories;
2. :func:`wait_setup` waits, once the devices listen, for each one's ``push-setup.csv`` and
   stops the run before T0 when a setup request did not succeed, naming the device, the op,
   the answer and the fix; devices then undo what succeeded on SIGTERM (their teardown);
3. :func:`write_start` gives every pushing device the test start (``push-start``).
"""
from __future__ import annotations

import csv
import time
from typing import Any, Callable, Optional

from wotbench.config.schema import Config
from wotbench.deploy import fleet
from wotbench.deploy.resolve import device_addresses
from wotbench.errors import ConfigError, EnvironmentProblem
from wotbench.rundir import RunDir, atomic
from wotbench.workload import trace_push
from wotbench.workload.push_schedule import (PushDevice, PushRenderError, Row, device_rows,
                                             merge_test_rows, render_text, write_schedule)

POLL_S = 0.1
SETUP_SLACK_S = 10.0


def _endpoint(ip: str, port: int) -> str:
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def push_devices(cfg: Config) -> list[PushDevice]:
    """Every device that sends (a group with ``push``, or device-originated lines in the
    recorded trace: :mod:`wotbench.workload.trace_push`), its ops' targets resolved to IP:PORT."""
    traced = trace_push.device_lines(cfg)
    if not traced and not any(g.push for g in cfg.devices):
        return []     # (no device address worked out: a million devices take half a minute)
    by_group: dict[str, list] = {}
    for a in device_addresses(cfg):
        by_group.setdefault(a.group, []).append(a)
    out = []
    for i, g in enumerate(cfg.devices):
        for k, a in enumerate(by_group[g.group]):
            if not g.push and a.id not in traced:
                continue
            targets = [_resolve(op.target, k, by_group) for op in g.push or []]
            out.append(PushDevice(name=a.name, id=a.id, group=g.group, index=k, address=a.ip,
                                  port=a.port, group_key=f"devices[{i}]", targets=tuple(targets)))
    return out


def _resolve(target: str, k: int, by_group: dict[str, list]) -> str:
    """A push target (a group: its device k mod count; IP:PORT as is) as IP:PORT."""
    if target in by_group:
        t = by_group[target][k % len(by_group[target])]
        return _endpoint(t.ip, t.port)
    return target


def _trace_rows(d: PushDevice, lines: list, by_group: dict[str, list]) -> list[Row]:
    """The device's device-originated trace lines as test-phase rows."""
    rows = []
    for seq, t in enumerate(lines):
        fields = dict(d.fields(), seq=seq, time_ms=t.at_us // 1000, time_s=round(t.at_us / 1e6, 6))
        target = _endpoint(t.host, t.port) if t.port else _resolve(t.host, d.index, by_group)
        rows.append(Row("test", t.op, t.at_us, t.method, "con", target,
                        render_text(t.path, fields), None, b"x" * t.payload_bytes))
    return rows


def render_schedules(cfg: Config, base_dir=None) -> dict[str, list[Row]]:
    """Every pushing device's schedule rows; ConfigError when one does not render (the
    pre-flight renders them, the run writes what it rendered)."""
    devices = push_devices(cfg)
    if not devices:
        return {}
    ops = {g.group: g.push for g in cfg.devices if g.push}
    traced = trace_push.device_lines(cfg)
    by_group: dict[str, list] = {}
    for a in device_addresses(cfg):
        by_group.setdefault(a.group, []).append(a)
    out = {}
    for d in devices:
        try:
            rows = device_rows(d, ops.get(d.group, []), cfg.duration_s, cfg.seed, base_dir)
        except PushRenderError as e:
            raise ConfigError(str(e)) from None
        if d.id in traced:     # recorded instants join the test phase, in time order
            rows = merge_test_rows(rows, _trace_rows(d, traced[d.id], by_group))
        out[d.name] = rows
    return out


def write_schedules(rd: RunDir, schedules: dict[str, list[Row]]) -> dict[str, int]:
    """Writes every rendered schedule into its device's directory; {device: rows}."""
    for name, rows in schedules.items():
        rd.device_dir(name).mkdir(parents=True, exist_ok=True)
        write_schedule(rd.push_schedule(name), rows, atomic.write_text)
    return {name: len(rows) for name, rows in schedules.items()}


def _setup_key(cfg: Config, group: str, op: str) -> str:
    for i, g in enumerate(cfg.devices):
        if g.group == group:
            for j, o in enumerate(g.push or []):
                if o.op == op:
                    return f"devices[{i}].push[{j}]"
    return f"devices[?].push ({op})"


def setup_problem(cfg: Config, device: str, group: str, row: dict, target: str) -> Optional[str]:
    """What went wrong with one setup row (None when it succeeded)."""
    outcome = row["outcome"]
    if outcome == "ok":
        return None
    key = _setup_key(cfg, group, row["op"])
    what = f"{row['method']} /{row['path']} to {target}"
    if outcome == "error" and row["code"]:
        why = (f"answered {row['code']}; fix the request (path, query, body, format) so the "
               "server accepts it")
    elif outcome == "timeout":
        why = ("got no answer; the target is not part of the run or does not listen there: "
               "check the target (a group of this run, or a server that runs)")
    elif outcome == "reset":
        why = "was reset (RST): the target does not accept this request"
    elif outcome == "unsent":
        return None          # after an earlier failed step: that one is reported
    else:
        why = "could not be sent (local error): check the target address"
    return f"{key}: device {device}: setup {row['op']} {what} {why}"


def wait_setup(cfg: Config, rd: RunDir, devices: dict[str, tuple[str, str]], timeout_s: float,
               dead: Optional[Callable[[], dict[str, str]]] = None,
               fleets: Optional[dict[str, dict[int, str]]] = None) -> float:
    """Waits for ``push-setup.csv`` of every device ({name: (group, first target)}) and of
    every engine in ``fleets`` ({fleet: {device index: name}}, its devices in ``devices`` too:
    one file holds all its devices' rows, ``device`` = the index); raises ConfigError listing
    the failed setups (at most 10 shown), EnvironmentProblem on a timeout."""
    t0 = time.monotonic()
    fleets = fleets or {}
    in_fleets = {n for names in fleets.values() for n in names.values()}
    waiting: dict[str, Any] = {n: v for n, v in devices.items() if n not in in_fleets}
    waiting.update({f: None for f in fleets})
    problems: list[str] = []
    failed = 0

    def check(name: str, row: dict) -> None:
        nonlocal failed
        group, target = devices[name]
        p = setup_problem(cfg, name, group, row, target)
        if p:
            failed += 1
            if len(problems) < 10:
                problems.append(p)

    while waiting:
        for name in list(waiting):
            path = rd.fleet_push_setup(name) if name in fleets else rd.push_setup(name)
            if not path.is_file():
                continue
            waiting.pop(name)
            with open(path, newline="") as f:
                for row in csv.DictReader(f):
                    check(fleets[name][int(row["device"])] if name in fleets else name, row)
        if not waiting:
            break
        gone = {n: why for n, why in (dead() if dead else {}).items() if n in waiting}
        if gone:
            raise EnvironmentProblem("device(s) exited during their setup requests: " + "; ".join(
                f"{n}: {w}" for n, w in sorted(gone.items())[:5]))
        if time.monotonic() - t0 > timeout_s:
            shown = ", ".join(sorted(waiting)[:10])
            raise EnvironmentProblem(f"{len(waiting)} device(s) did not finish their setup "
                                     f"requests within {timeout_s:.0f} s: {shown}")
        time.sleep(POLL_S)
    if failed:
        more = [f"(+{failed - len(problems)} more failed setups)"] if failed > len(problems) else []
        raise ConfigError(problems + more)
    return time.monotonic() - t0


def setup_timeout_s(cfg: Config) -> float:
    """Every setup op of one device after another at the request timeout, plus slack."""
    n = max((sum(o.phase == "setup" for o in g.push) for g in cfg.devices if g.push), default=0)
    return n * cfg.gateways.timeout_ms / 1000 + SETUP_SLACK_S + 0.01 * cfg.total_devices


def write_start(rd: RunDir, names: list[str], start_ns: int, fleets: tuple[str, ...] = ()
                ) -> None:
    """The test start for each pushing device (it watches its directory with inotify) and
    each engine hosting pushing devices (its directory)."""
    for n in names:
        atomic.write_text(rd.push_start(n), f"{start_ns}\n")
    for f in fleets:
        atomic.write_text(rd.fleet_push_start(f), f"{start_ns}\n")


def fleet_devices(cfg: Config, schedules: dict[str, list[Row]]) -> set[str]:
    """The pushing devices (names in ``schedules``) a wot-fleet engine hosts."""
    groups = {g.group for i, g in enumerate(cfg.devices) if fleet.is_fleet(cfg, i)}
    return {n for n in schedules if n.rpartition("-")[0] in groups} if groups else set()


def pushing(cfg: Config) -> set[str]:
    return {d.name for d in push_devices(cfg)}


def first_targets(cfg: Config) -> dict[str, tuple[str, str]]:
    return {d.name: (d.group, d.targets[0] if d.targets else "-") for d in push_devices(cfg)}


__all__ = ["render_schedules", "write_schedules", "wait_setup", "write_start", "pushing",
           "fleet_devices",
           "first_targets", "setup_timeout_s"]
