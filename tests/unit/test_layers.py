"""The drawing of the tree (issue 32): every import points down or sideways, none back up. The
dispatcher, the distributed run and the commands sit above the runner; the runner, analysis and
report never import them; the contention detector (cd-module/) installs with the venv."""
from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# low to high; a package may import its own rank or lower ones (the lowest ranks' packages use
# each other's models: their files have no loops, which import_loops.py checks)
RANKS = [
    {"errors", "labels", "stamps", "procutil", "schema_errors", "csvcheck"},
    {"config", "rundir", "deploy", "workload", "netimpair", "monitor", "cd_module"},
    {"things"},        # Thing Descriptions on the config models and the trace generator's seam
    {"configfile"},    # a file read: its things: expanded, the rules across blocks    # a file read: its things: expanded, the rules across blocks
    {"runner", "run_result"},
    {"analysis"},
    {"report"},
    {"run_command", "distributed", "connected"},
    {"dispatch"},
    {"sweep"},
    {"capacity", "validation"},
    {"cli"},
]
RANK = {pkg: i for i, group in enumerate(RANKS) for pkg in group}
# a file that sits at another level than its package (none now: the Things' report section is
# report/things_section.py)
FILE_RANK: dict[str, int] = {}


def _package(module: str) -> str | None:
    """wotbench.<package>... or cd_module -> the package's name in RANKS (None: third-party)."""
    parts = module.split(".")
    if parts[0] == "cd_module":
        return "cd_module"
    if parts[0] == "wotbench" and len(parts) > 1:
        return parts[1]
    return None


@lru_cache(maxsize=None)
def _files() -> tuple[tuple[Path, str], ...]:
    out = []
    for p in sorted((ROOT / "wotbench").rglob("*.py")):
        rel = p.relative_to(ROOT / "wotbench").with_suffix("").parts
        if rel != ("__init__",) and rel != ("__main__",):
            out.append((p, rel[0]))
    out += [(p, "cd_module") for p in sorted((ROOT / "cd-module" / "cd_module").rglob("*.py"))]
    return tuple(out)


@lru_cache(maxsize=None)
def _imports(path: Path) -> tuple[str, ...]:
    """Every module a file imports (function-local imports too), parsed once per session."""
    out = []
    for n in ast.walk(ast.parse(path.read_text())):
        if isinstance(n, ast.Import):
            out += [a.name for a in n.names]
        elif isinstance(n, ast.ImportFrom) and n.module and not n.level:
            out.append(n.module)
    return tuple(out)


def test_every_package_has_a_rank():
    pkgs = {pkg for _, pkg in _files()}
    assert pkgs - set(RANK) == set(), "add the new package to RANKS"


def test_no_import_runs_back_up():
    up = []
    for path, pkg in _files():
        rank = FILE_RANK.get(path.relative_to(ROOT / "wotbench").as_posix()
                             if pkg != "cd_module" else "", RANK[pkg])
        for mod in _imports(path):
            target = _package(mod)
            if target in RANK and RANK[target] > rank:
                up.append(f"{path.relative_to(ROOT)} ({pkg}) imports {mod} ({target})")
    assert up == []


@pytest.mark.parametrize("module", ["dispatch", "distributed", "run_command"])
def test_only_the_commands_reach_the_dispatcher_and_the_distributed_run(module):
    allowed = {"cli", "dispatch", "distributed", "sweep", "capacity", "validation",
               "run_command"}
    users = {pkg for path, pkg in _files() for mod in _imports(path)
             if _package(mod) == module and pkg != module}
    assert users <= allowed


def test_runner_backends_hold_runtimes_only():
    """A run across hosts is no runtime: runner/backends/ has the docker and process ones."""
    found = sorted(p.name for p in (ROOT / "wotbench" / "runner" / "backends").iterdir()
                   if p.is_dir() and (p / "__init__.py").exists())
    assert found == ["docker", "process"]


def test_the_contention_detector_installs_from_cd_module():
    import cd_module
    from cd_module import sizing, verdict   # noqa: F401 - they import cleanly
    assert Path(cd_module.__file__).resolve().parent == ROOT / "cd-module" / "cd_module"
    assert (ROOT / "cd-module" / "README.md").is_file()
    assert (ROOT / "cd-module" / "validation" / "scenarios.yaml").is_file()
    assert not (ROOT / "wotbench" / "detector").exists()
