"""The test tree itself: pytest imports test modules by their basename (no packages here), so
two directories collected in one session (make test-long collects unit and cluster tests
together) must not hold modules of the same name — the second fails collection."""
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_two_test_modules_share_a_basename():
    seen: dict[str, Path] = {}
    clashes = []
    for f in sorted(TESTS.rglob("test_*.py")):
        if f.name in seen:
            clashes.append(f"{seen[f.name].relative_to(TESTS)} and {f.relative_to(TESTS)}")
        seen.setdefault(f.name, f)
    assert not clashes, "test modules sharing a basename: " + "; ".join(clashes)
