"""The C parsers in process (issue 32 part 5): each component's table-driven unit program
(gateway-emulator/unit, wot-device/unit: good inputs and their parsed values, bad inputs and
their exact error, built with ASan+UBSan) and a bounded run of every libFuzzer target
(scripts/fuzz.sh --list; `make fuzz` runs them for FUZZ_SECONDS each). The fuzz runs skip,
naming what is missing, when clang cannot build a -fsanitize=fuzzer program."""
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FUZZ_TEST_SECONDS = int(os.environ.get("FUZZ_TEST_SECONDS", "3"))   # make fuzz: longer
FUZZ_TEST_RUNS = 2_000_000   # the fast targets stop here before their time is up


def _make(directory: str, target: str) -> None:
    r = subprocess.run(["make", "--no-print-directory", "-C", str(ROOT / directory), target],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.fail(f"make -C {directory} {target} failed:\n{r.stderr[-4000:]}")


@pytest.mark.parametrize("directory,checks", [("gateway-emulator", 190), ("wot-device", 50)])
def test_unit_program(directory, checks):
    _make(directory, "unit")
    r = subprocess.run([str(ROOT / directory / "build" / "parsers_unit")], capture_output=True,
                       text=True, timeout=120)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    m = re.search(r"parsers_unit: (\d+) checks, (\d+) failed", r.stdout)
    assert m and m.group(2) == "0", out[-4000:]
    assert int(m.group(1)) >= checks, f"only {m.group(1)} checks ran:\n{out[-2000:]}"
    assert "ERROR: AddressSanitizer" not in out and "runtime error" not in out, out[-4000:]


def _fuzz_targets() -> list[tuple[str, str, str]]:
    out = subprocess.run(["bash", str(ROOT / "scripts" / "fuzz.sh"), "--list"],
                         capture_output=True, text=True, check=True).stdout
    return [tuple(line.split()) for line in out.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def libfuzzer(tmp_path_factory):
    """clang that links -fsanitize=fuzzer,address,undefined, else skip naming what is missing."""
    if not shutil.which("clang"):
        pytest.skip("clang is not installed (apt-get install clang libclang-rt-14-dev): no fuzz run")
    d = tmp_path_factory.mktemp("probe")
    (d / "t.c").write_text("#include <stdint.h>\n#include <stddef.h>\n"
                           "int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)"
                           "{ (void)d; (void)n; return 0; }\n")
    r = subprocess.run(["clang", "-fsanitize=fuzzer,address,undefined", "-o", str(d / "t"),
                        str(d / "t.c")], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip("clang cannot link -fsanitize=fuzzer (libclang-rt-14-dev missing?): "
                    + r.stderr.strip()[-300:])


TARGETS = _fuzz_targets()


@pytest.mark.parametrize("directory,binary,corpus", TARGETS, ids=[t[1] for t in TARGETS])
def test_fuzz_target_bounded(libfuzzer, directory, binary, corpus, tmp_path):
    _make(directory, f"build/{binary}")
    seeds = ROOT / directory / "fuzz" / "corpus" / corpus
    assert len(list(seeds.iterdir())) >= 3, f"{seeds}: a seed corpus of a few files is committed"
    work = tmp_path / "corpus"         # new inputs go here; the committed seeds stay as they are
    work.mkdir()
    art = tmp_path / "artifacts"
    art.mkdir()
    cmd = [str(ROOT / directory / "build" / binary), f"-max_total_time={FUZZ_TEST_SECONDS}",
           f"-runs={FUZZ_TEST_RUNS}", "-close_fd_mask=2", "-print_final_stats=1",
           f"-artifact_prefix={art}/", str(work), str(seeds)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=FUZZ_TEST_SECONDS + 120)
    out = r.stdout + r.stderr
    found = sorted(p.name for p in art.iterdir())
    assert r.returncode == 0 and not found, (
        f"{binary} found a crash or sanitizer report (reproduce: {cmd[0]} {art}/<file>); "
        f"artifacts {found}:\n{out[-5000:]}")
    runs = re.search(r"stat::number_of_executed_units:\s+(\d+)", out)
    assert runs and int(runs.group(1)) > 100, f"{binary} barely ran:\n{out[-3000:]}"
