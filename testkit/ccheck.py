"""The small C check programs of tests/c/src (common/ headers tested on their own): built with
the project's warnings as errors against common/, run, their "name value verdict..." lines read."""
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_c_check(name: str, tmp_path: Path, timeout: float = 60) -> tuple[int, dict, str]:
    """Builds tests/c/src/NAME.c and runs it: (exit code, {first word: the rest}, all output)."""
    exe = tmp_path / name
    subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE",
                    f"-I{ROOT / 'common'}", "-o", str(exe),
                    str(ROOT / "tests" / "c" / "src" / f"{name}.c")], check=True)
    res = subprocess.run([str(exe)], capture_output=True, text=True, timeout=timeout)
    lines = {ln.split()[0]: ln.split()[1:] for ln in res.stdout.splitlines() if ln.strip()}
    return res.returncode, lines, res.stdout + res.stderr
