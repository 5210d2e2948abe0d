#!/usr/bin/env python3
"""Behaviour stays the same across a refactor (issue 32): run example configs with the process
backend from two checkouts and compare what they wrote.

    compare_runs.py run REPO OUT CONFIG...   # each CONFIG once, code from REPO, into OUT/<stem>/
    compare_runs.py compare OUT_A OUT_B [REPO_A REPO_B]   # deterministic parts equal, rest same shape

``run`` uses this interpreter (the venv) with REPO first on the path, so an older checkout can be
run without a venv of its own; the C binaries are this checkout's (WOTBENCH_*_BIN), the same
for both sides. Every run gets ``--set`` values that keep it short (SHORT).

``compare`` checks, per config: ``plan.json`` and every file under ``trace/`` equal;
``config.resolved.yaml`` equal once each checkout's own path is replaced by ``<repo>``;
``run.json`` and ``summary.json`` the same keys at every level (values measured during the run
differ from run to run and are not compared), and equal where they do not depend on timing:
the run's name, backend, devices, gateways, the number of requests in the trace and the offered
rate. The process backend gives each run a free loopback block 127.S.0.0/16 (S depends on the
other runs on the host at the time): S is compared as ``127.S.``. The exit code and verdict are
measured (another process on a run core flags a run) and printed side by side, not compared.
Exit 0 when all match, 1 with every difference listed.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
SHORT = ["duration_s=6", "contention_detector.calibration_s=5", "report.enabled=false"]
BINARIES = {"WOTBENCH_GE_BIN": "gateway-emulator/build/gateway-emulator",
            "WOTBENCH_DEVICE_BIN": "wot-device/build/wot-device",
            "WOTBENCH_HOG_BIN": "contention-injector/build/hog",
            "WOTBENCH_WARDEN_BIN": "warden/build/wb-warden",
            "WOTBENCH_FLEET_BIN": "wot-device/build/wot-fleet"}


def run(repo: Path, out: Path, configs: list[str]) -> int:
    env = dict(os.environ, PYTHONPATH=str(repo))
    env.update({k: str(HERE / v) for k, v in BINARIES.items() if (HERE / v).exists()})
    codes = {}
    for c in configs:
        stem = Path(c).stem
        argv = [sys.executable, "-m", "wotbench.cli", "run", str(Path(c).resolve()),
                "--backend", "process", "--out-root", str((out / stem).resolve())]
        for s in SHORT:
            argv += ["--set", s]
        print(f"compare_runs: {repo}: {' '.join(argv[3:])}", flush=True)
        codes[stem] = subprocess.run(argv, cwd=repo, env=env).returncode
    out.mkdir(parents=True, exist_ok=True)
    (out / "exit-codes.json").write_text(json.dumps(codes, indent=1) + "\n")
    return 0


# maps keyed by what the host had at the time (other WoTbench runs active beside this one):
# their keys are measured values, not the file's structure
MEASURED_MAPS = {"other_runs"}


def shape(v):
    """The keys at every level (a list: its first element's shape); values become their kind."""
    if isinstance(v, dict):
        return {k: "value" if k in MEASURED_MAPS else shape(x) for k, x in sorted(v.items())}
    if isinstance(v, list):
        return [shape(v[0])] if v else []
    return "value"


def diff_shape(a, b, where: str, out: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{where}.{k}: only in {'after' if k in b else 'before'}")
            else:
                diff_shape(a[k], b[k], f"{where}.{k}", out)
    elif isinstance(a, list) and isinstance(b, list):
        if a and b:
            diff_shape(a[0], b[0], f"{where}[0]", out)
    elif type(a) is not type(b) and "value" not in (a, b):
        out.append(f"{where}: {type(a).__name__} before, {type(b).__name__} after")


def same_block(text: str) -> str:
    """The run's loopback block (process backend) as 127.S."""
    return re.sub(r"\b127\.\d{1,3}\.(?=\d{1,3}\.\d{1,3}\b)", "127.S.", text)


def run_dir(root: Path) -> Path:
    dirs = [d for d in root.iterdir() if d.is_dir()] if root.is_dir() else []
    if len(dirs) != 1:
        raise SystemExit(f"compare_runs: {root}: expected one run directory, found {len(dirs)}")
    return dirs[0]


def fixed_parts(run: dict, summary: dict) -> dict:
    """What a run's JSON says that does not depend on its timing."""
    return {"name": run.get("name"), "backend": run.get("backend"),
            "devices": [(d.get("name"), d.get("group"), same_block(str(d.get("address"))))
                        for d in run.get("devices", [])],
            "ges": [g.get("name") for g in run.get("ges", [])],
            "requests": (summary.get("overall") or {}).get("requests"),   # in the trace
            "offered_rps": (summary.get("overall") or {}).get("offered_rps")}


def compare(a_root: Path, b_root: Path, repos: list[str]) -> int:
    problems: list[str] = []
    codes_a = json.loads((a_root / "exit-codes.json").read_text())
    codes_b = json.loads((b_root / "exit-codes.json").read_text())
    for stem in sorted(set(codes_a) | set(codes_b)):
        a, b = run_dir(a_root / stem), run_dir(b_root / stem)
        for rel in ["plan.json"] + sorted(str(p.relative_to(a)) for p in (a / "trace").rglob("*")
                                          if p.is_file()):
            if not (b / rel).is_file():
                problems.append(f"{stem}: {rel} missing after")
            elif same_block((a / rel).read_text()) != same_block((b / rel).read_text()):
                problems.append(f"{stem}: {rel} differs")
        ra, rb = ((x / "config.resolved.yaml").read_text() for x in (a, b))
        # each side's own paths (its checkout, its out-root) stand for the same thing
        for root in (str(a_root.resolve()), str(b_root.resolve())):
            ra, rb = ra.replace(root, "<out>"), rb.replace(root, "<out>")
        for repo in repos:
            ra, rb = ra.replace(repo, "<repo>"), rb.replace(repo, "<repo>")
        if same_block(ra) != same_block(rb):
            problems.append(f"{stem}: config.resolved.yaml differs")
        jsons = {}
        for name in ("run.json", "summary.json"):
            ja, jb = (json.loads((x / name).read_text()) for x in (a, b))
            diff_shape(shape(ja), shape(jb), f"{stem}: {name}", problems)
            jsons[name] = (ja, jb)
        fa = fixed_parts(jsons["run.json"][0], jsons["summary.json"][0])
        fb = fixed_parts(jsons["run.json"][1], jsons["summary.json"][1])
        for k in fa:
            if fa[k] != fb[k]:
                problems.append(f"{stem}: {k}: {fa[k]!r} before, {fb[k]!r} after")
        verdicts = [(j.get("verdict") or {}).get("status") for j in jsons["summary.json"]]
        print(f"compare_runs: {stem}: measured: exit {codes_a.get(stem)}/{codes_b.get(stem)}, "
              f"verdict {verdicts[0]}/{verdicts[1]} (before/after)")
    for p in problems:
        print(f"  DIFFERENT {p}")
    print(f"compare_runs: {'no difference' if not problems else f'{len(problems)} difference(s)'}")
    return 1 if problems else 0


def main(argv: list[str]) -> int:
    if len(argv) >= 4 and argv[1] == "run":
        return run(Path(argv[2]).resolve(), Path(argv[3]), argv[4:])
    if len(argv) >= 4 and argv[1] == "compare":
        return compare(Path(argv[2]), Path(argv[3]), [str(Path(r).resolve()) for r in argv[4:6]])
    print(__doc__, file=sys.stderr)   # usage
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
