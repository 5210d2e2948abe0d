"""The ``wotbench`` command line.

Subcommands: ``check``, ``trace``, ``plan`` (this module and its siblings), and ``run``,
``doctor``, ``clean``, ``analyze``, ``report``, ``sweep``, ``capacity``, ``study`` which import
their modules when called (they pull in Docker, pandas, matplotlib).
Every :class:`~wotbench.errors.WotbenchError` is printed as ``wotbench: error: <message>``
on stderr and exits with its code; Ctrl-C exits 130; user errors never show a traceback.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional, Sequence

from wotbench.errors import ConfigError, EnvironmentProblem, WotbenchError


def _cmd_check(args) -> int:
    """The run's pre-flight (wotbench.runner.preflight): every refusal `run` makes before T0,
    with the same message; one line per step, those that needed this host marked, skipped ones
    said. The YAML is read once, here."""
    from wotbench.config.connected import connected_groups
    from wotbench.configfile.yaml_loader import load_config
    cfg = load_config(args.config)
    if connected_groups(cfg):     # connected device groups: their own runner (docs/CONNECTED.md)
        from wotbench.connected.check import check_connected
        return check_connected(cfg, offline=args.offline)
    from wotbench.runner.preflight import preflight
    pf = preflight(args.config, args.backend, offline=args.offline, loaded=cfg)
    for s in pf.steps:
        print(f"{'host' if s.host else 'config':6} {s.name}: {s.detail}")
    skipped = [s.name for s in pf.steps if s.skipped]
    print("OK" + (f" (skipped, see above: {', '.join(skipped)})" if skipped else ""))
    return 0


def _cmd_trace(args) -> int:
    if args.stats:
        from wotbench.workload.trace_io import print_stats, trace_stats
        print_stats(trace_stats(args.stats))
        return 0
    if not args.config:
        raise ConfigError(["trace: give CONFIG (with --out DIR) or --stats TRACE"])
    if not args.out:
        raise ConfigError(["trace: --out DIR is required to generate a trace"])
    from wotbench.configfile.yaml_loader import load_config
    from wotbench.things.trace import write_trace
    from wotbench.workload.generate import print_summary
    cfg = load_config(args.config)
    if args.seed is not None:
        cfg.seed = args.seed
    summary = write_trace(cfg, args.out)
    print_summary(summary)
    _note_cpu_demand(cfg, summary.busy_cpu_demand_cores)
    return 0


def _note_cpu_demand(cfg, demand: float) -> None:
    """Compare the devices' busy CPU work with the device cores this host's plan gives them."""
    from wotbench.deploy.plan import make_plan
    try:
        cores = len(make_plan(cfg).device_cores)
    except ConfigError:
        return
    if demand >= 0.7 * cores:
        level = "exceeds" if demand >= cores else "is close to"
        print(f"note: the devices' busy CPU work ({demand:.2f} cores) {level} the {cores} device core(s) "
              f"this host's plan gives them: expect CPU contention among the devices (the contention "
              f"detector measures it)")


def _parse_cores(text: str) -> list[int]:
    from wotbench.deploy.plan import parse_cpuset
    try:
        return parse_cpuset(text)
    except ValueError:
        raise ConfigError([f"--cores: expected a core list such as 0-3 or 0,2,4, got {text!r}"]) from None


def _cmd_plan(args) -> int:
    from wotbench.configfile.yaml_loader import load_config
    from wotbench.deploy.plan import make_plan, print_plan
    cfg = load_config(args.config)
    plan = make_plan(cfg, cores=_parse_cores(args.cores) if args.cores else None)
    print_plan(plan)
    from wotbench.deploy import fleet_capacity
    from wotbench.runner.backends.docker.scalelimits import dockerd_nofile
    sized, _ = fleet_capacity.for_host(cfg, dockerd_nofile(hard=True))
    for line in fleet_capacity.describe(fleet_capacity.requirements(sized, plan)):
        print(f"  wot-fleet {line}")
    out = plan.write(Path(args.out))   # a failed write: EnvironmentProblem naming the disk
    print(f"wrote {out}")
    return 0


def _cmd_run(args) -> int:
    from wotbench.dispatch import run_config   # one host or swarm (docs/CLUSTER.md)

    def run(path, source=None) -> int:
        return run_config(path, args.out_root, args.backend, args.clock_bound_ms,
                          source=source).exit_code
    if args.isolate_cores:
        args.set = (args.set or []) + ["placement.isolate_cores=true"]
    if not args.set:
        return run(args.config)
    from wotbench.sweep.overridden import overridden_config
    with overridden_config(Path(args.config), args.set) as source:   # the YAML read there
        return run(source.path, source)


def _cmd_doctor(args) -> int:
    from wotbench.runner.commands.doctor import main as doctor
    return doctor()


def _cmd_clean(args) -> int:
    if args.cluster:
        from wotbench.distributed.clean import main as clean_cluster
        return clean_cluster(force=args.force)
    from wotbench.runner.commands.clean_command import main as clean
    return clean(force=args.force)


def _cmd_analyze(args) -> int:
    from wotbench.analysis import main as analyze
    return analyze(args.run_dir)


def _cmd_report(args) -> int:
    from wotbench.rundir import MergedRunDir
    connected = MergedRunDir(args.run_dir).connected_split_json.is_file()   # a connected run's
    if MergedRunDir(args.run_dir).is_merged() and not connected:   # across hosts: merged report
        from wotbench.distributed.report import render_cluster
        print(render_cluster(args.run_dir))
        return 0
    from wotbench.report import main as report
    return report(args.run_dir)


def _yaml_scalar(text: Optional[str]):
    """Numbers stay numbers (``--start 5`` is the int 5), as the config would read them."""
    import yaml
    return None if text is None else yaml.safe_load(text)


def _gate(args):
    """The quiet-host gate of ``--quiet`` (sweep, capacity) or of the study."""
    from wotbench.monitor.quiet import QuietGate
    return QuietGate(max_load=args.max_load, timeout_s=args.quiet_timeout,
                     wait=not getattr(args, "no_wait", False))


def _series_base(path: Optional[str], backend: Optional[str], command: str):
    """The base config of a sweep or capacity search, read once here for the whole series (None
    on --resume). Connected configs run on the process backend or across hosts (swarm), not in
    Docker: refused before the first point rather than at it."""
    if not path:
        return None
    from wotbench.config.connected import connected_groups
    from wotbench.configfile.yaml_loader import read_config_file
    base = read_config_file(path)
    if backend not in (None, "process", "swarm") and connected_groups(base.config):
        raise ConfigError([f"--backend {backend}: connected device groups (websocket, chunked) "
                           f"run on the process backend or with --backend swarm, so `wotbench "
                           f"{command}` cannot run them on {backend} (docs/CONNECTED.md)"], path)
    return base


def _cmd_sweep(args) -> int:
    from wotbench.sweep import run_sweep, sweep_exit_code
    base = _series_base(args.config, args.backend, "sweep")
    sweep = run_sweep(base, args.vary or [], matrix=args.matrix, resume=args.resume,
                      out_root=args.out_root, backend=args.backend, progress=not args.no_progress,
                      gate=_gate(args) if args.quiet else None, set_args=args.set,
                      repeats=args.repeats)
    print(sweep.files.report_html)
    return sweep_exit_code(sweep)


def _cmd_capacity(args) -> int:
    base = _series_base(args.config, args.backend, "capacity")
    from rich.console import Console
    from wotbench.capacity.command import capacity_exit_code, run_capacity
    from wotbench.sweep.paths import parse_set
    result = run_capacity(base, key=args.key, start=_yaml_scalar(args.start),
                          maximum=_yaml_scalar(args.max), step=_yaml_scalar(args.step),
                          bisect=True if args.bisect else None, repeats=args.repeats,
                          resolution=_yaml_scalar(args.resolution), resume=args.resume,
                          out_root=args.out_root, backend=args.backend, console=Console(),
                          gate=_gate(args) if args.quiet else None, fixed=parse_set(args.set or []),
                          slo=args.slo or [])
    return capacity_exit_code(result)


def _cmd_study(args) -> int:
    from wotbench.validation.research import calibration_sweep
    from wotbench.validation.scenarios import MAX_REPEATS
    from wotbench.validation.study import run_study
    if args.repeats is not None and not 1 <= args.repeats <= MAX_REPEATS:
        raise ConfigError([f"--repeats: must be 1..{MAX_REPEATS}, got {args.repeats}"])
    if args.calibration_sweep:
        import json
        try:
            lengths = [int(x) for x in args.lengths.split(",")]
        except ValueError:
            raise ConfigError([f"--lengths: expected probe counts such as 5,10,20, got {args.lengths!r}"]) from None
        if any(n < 1 for n in lengths):
            raise ConfigError([f"--lengths: every probe count must be >= 1, got {args.lengths!r}"])
        for rd in args.calibration_sweep:
            for row in calibration_sweep(Path(rd), lengths):
                print(Path(rd).name, json.dumps(row))
        return 0
    return run_study(Path(args.manifest), only=args.only, out_root=Path(args.out_root),
                     resume=Path(args.resume or args.evaluate) if (args.resume or args.evaluate) else None,
                     gate=_gate(args), reanalyze=args.reanalyze,
                     evaluate_only=args.evaluate is not None, repeats_override=args.repeats,
                     seed_base=args.seed_base)


RUN_EXIT_CODES = """exit codes:
  0    results trustworthy (and every SLO of the config's slo: met, if it has one)
  3    the testbed distorted the result: the GE could not keep up, contention detected, the
       testbed lost requests, or a component failed (wins over an SLO miss)
  4    results trustworthy, but an SLO missed (or not shown: no data)
  2    bad input (config, trace)
  1    environment problem, or the test was aborted
  130/143  interrupted (SIGINT/SIGTERM); the data measured so far is kept"""

CAPACITY_EXIT_CODES = """exit codes:
  without SLOs: 0 found (or every setting up to --max was clean), 3 not even --start was clean
  with SLOs:    0 an answer about the system, 3 the host stopped being faithful before the SLOs
                were missed, 5 inconclusive (noise across repeats larger than the margin)
  1 a run failed or was skipped (resume with --resume), 2 bad input, 130/143 interrupted"""


def _set_arg(s) -> None:
    s.add_argument("--set", metavar="KEY=VALUE", action="append",
                   help="a config key every run gets (the what-if), e.g. duration_s=30, devices[*].network.loss.percent=2, "
                        "devices[0].service_time.mean=20 ([*]: every device group; repeatable)")


def _quiet_args(s) -> None:
    s.add_argument("--quiet", action="store_true",
                   help="before every run wait for a quiet host (load average, no other jobs) and record the load")
    s.add_argument("--max-load", type=float, default=0.6, help="with --quiet: 1-min load average wanted")
    s.add_argument("--quiet-timeout", type=float, default=600, help="with --quiet: s to wait per run")


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # same prefix as every other error, exit 2
        self.print_usage(sys.stderr)
        sys.stderr.write(f"wotbench: error: {message}\n")
        sys.exit(2)


def build_parser() -> argparse.ArgumentParser:
    from wotbench import __version__
    p = _Parser(prog="wotbench", description="Contention-aware Web of Things emulation testbed.")
    p.add_argument("--version", action="version", version=f"wotbench {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    s = sub.add_parser("check", help="the run's pre-flight: the config (and a recorded trace "
                                     "it names) and this host, every refusal `run` makes before "
                                     "T0; prints what it checked and OK, or the problem")
    s.add_argument("config", metavar="CONFIG")
    s.add_argument("--backend", choices=["docker", "process", "swarm"], default=None,
                   help="check for this backend (default: the config's)")
    s.add_argument("--offline", action="store_true",
                   help="the config alone: skip the checks that need this host (says so)")
    s.set_defaults(func=_cmd_check)

    s = sub.add_parser("trace", help="generate a synthetic trace, or summarise one (--stats)")
    s.add_argument("config", metavar="CONFIG", nargs="?")
    s.add_argument("--out", metavar="DIR", help="output directory (trace.csv, resources/, cd-trace.csv)")
    s.add_argument("--seed", type=int, help="override the config's seed")
    s.add_argument("--stats", metavar="TRACE", help="summarise an existing trace.csv instead")
    s.set_defaults(func=_cmd_trace)

    s = sub.add_parser("plan", help="plan the core placement; prints the core map, writes plan.json")
    s.add_argument("config", metavar="CONFIG")
    s.add_argument("--out", metavar="FILE", default="plan.json", help="default: ./plan.json")
    s.add_argument("--cores", metavar="LIST", help="plan for these cores instead of this host's (e.g. 0-7)")
    s.set_defaults(func=_cmd_plan)

    s = sub.add_parser("run", help="run an experiment", epilog=RUN_EXIT_CODES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("config", metavar="CONFIG")
    s.add_argument("--backend", choices=["docker", "process", "swarm"], default=None,
                   help="default: the config's backend; swarm: one cell per labelled Swarm "
                        "node, from a manager (docs/CLUSTER.md)")
    s.add_argument("--out-root", metavar="DIR", default="reports", help="default: reports")
    s.add_argument("--clock-bound-ms", type=float, default=None, metavar="MS",
                   help="swarm: refuse the run when a node's clock offset (± its measurement "
                        "error) exceeds this; flag it when it drifts beyond (default: the "
                        "config's cluster.clock_bound_ms, 1)")
    s.add_argument("--isolate-cores", action="store_true",
                   help="= --set placement.isolate_cores=true: for the run, the host's own work "
                        "(workqueues, dockerd, other tasks) off the GE and device cores; root; "
                        "restored at the end (docs/FLEET.md)")
    _set_arg(s)
    s.set_defaults(func=_cmd_run)

    s = sub.add_parser("sweep", help="run a series of tests varying config keys; writes a sweep report")
    s.add_argument("config", metavar="CONFIG", nargs="?")
    s.add_argument("--vary", metavar="KEY=V1,V2,...", action="append",
                   help="a dotted config key and its values, e.g. devices[0].count=5,10,20 (repeatable: cartesian product)")
    s.add_argument("--matrix", metavar="FILE", help="a YAML file listing the points explicitly")
    s.add_argument("--resume", metavar="SWEEP_DIR", help="continue a sweep; completed points are not rerun")
    s.add_argument("--repeats", type=int, metavar="N", default=None,
                   help="runs per point (default 1), in interleaved rounds; the report gives mean ± 95 %% CI "
                        "per point; with --resume: more than the sweep has adds rounds")
    s.add_argument("--backend", choices=["docker", "process", "swarm"], default=None,
                   help="default: the config's; swarm: each point a run across the labelled Swarm nodes (docs/CLUSTER.md)")
    s.add_argument("--out-root", metavar="DIR", default="reports", help="default: reports")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    _set_arg(s)
    _quiet_args(s)
    s.set_defaults(func=_cmd_sweep)

    s = sub.add_parser("capacity", help="find the largest setting this host emulates without contention, "
                                        "or (with --slo) that meets the SLOs on a faithful host",
                       epilog=CAPACITY_EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("config", metavar="CONFIG", nargs="?")
    s.add_argument("--key", default="devices[0].count",
                   help="the key to raise (default devices[0].count; devices[N].rate = req/s per device)")
    s.add_argument("--start", default="5", help="first value (default 5)")
    s.add_argument("--max", default="200", help="largest value tried (default 200)")
    s.add_argument("--step", default=None, help="step size (default: doubling, then bisection)")
    s.add_argument("--bisect", action="store_true", help="bisect between the last clean and first flagged value")
    s.add_argument("--repeats", type=int, default=1, help="runs per value; flagged if half or more are flagged")
    s.add_argument("--resolution", default=None, help="stop bisecting below this gap")
    s.add_argument("--slo", metavar="EXPR", action="append",
                   help="an objective every run must meet, e.g. 'p95<=50ms', 'loss<=2%%', 'p99_sched<=200ms', "
                        "'success>=98%%', 'throughput>=100/s', 'GROUP:p95<=30ms' (repeatable; over the config's slo:)")
    _set_arg(s)
    s.add_argument("--resume", metavar="DIR", help="continue a capacity search")
    s.add_argument("--backend", choices=["docker", "process", "swarm"], default=None,
                   help="default: the config's; swarm: each point a run across the labelled Swarm nodes (docs/CLUSTER.md)")
    s.add_argument("--out-root", metavar="DIR", default="reports", help="default: reports")
    _quiet_args(s)
    s.set_defaults(func=_cmd_capacity)

    s = sub.add_parser("study", help="run the contention-detector validation study "
                                     "(cd-module/validation/scenarios.yaml); writes table.md")
    s.add_argument("--manifest", default="cd-module/validation/scenarios.yaml")
    s.add_argument("--only", nargs="+", metavar="NAME", help="only these scenarios")
    s.add_argument("--repeats", type=int, metavar="N",
                   help="runs per scenario (per value of a series) instead of the manifest's")
    s.add_argument("--seed-base", type=int, metavar="N",
                   help="seeds N, N+1, ... for every scenario's runs instead of each config's "
                        "(twins share them): a study on new seeds")
    s.add_argument("--resume", metavar="STUDY_DIR", help="continue a study; finished points are not rerun")
    s.add_argument("--evaluate", metavar="STUDY_DIR", help="only recompute the table of a study")
    s.add_argument("--reanalyze", action="store_true", help="re-run the analysis of every point first")
    s.add_argument("--out-root", metavar="DIR", default="reports", help="default: reports")
    s.add_argument("--max-load", type=float, default=0.6, help="1-min load average wanted before a run")
    s.add_argument("--quiet-timeout", type=float, default=600, help="s to wait for a quiet host per run")
    s.add_argument("--no-wait", action="store_true", help="run even when the host is busy (the load is recorded)")
    s.add_argument("--calibration-sweep", nargs="+", metavar="RUN_DIR",
                   help="research: re-apply the contention rule with shorter baselines")
    s.add_argument("--lengths", default="5,10,20,30", help="with --calibration-sweep")
    s.set_defaults(func=_cmd_study)

    s = sub.add_parser("doctor", help="check that this host can run WoTbench")
    s.set_defaults(func=_cmd_doctor)
    s = sub.add_parser("clean", help="remove leftover WoTbench containers and networks")
    s.add_argument("--force", action="store_true",
                   help="also remove runs still in progress (their harness renews its lease)")
    s.add_argument("--cluster", action="store_true",
                   help="on a Swarm manager: every labelled node, and the agent services of "
                        "runs whose coordinator is gone")
    s.set_defaults(func=_cmd_clean)
    s = sub.add_parser("analyze", help="analyse a run directory (summary.json, series/)")
    s.add_argument("run_dir", metavar="RUN_DIR")
    s.set_defaults(func=_cmd_analyze)
    s = sub.add_parser("report", help="write report.html for a run directory")
    s.add_argument("run_dir", metavar="RUN_DIR")
    s.set_defaults(func=_cmd_report)
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        rc = args.func(args)
        return int(rc or 0)
    except WotbenchError as e:
        sys.stderr.write(f"wotbench: error: {e.message}\n")
        return e.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("wotbench: interrupted\n")
        return 130
    except BrokenPipeError:
        return 141


def _entry() -> None:  # pragma: no cover
    sys.exit(main())


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
