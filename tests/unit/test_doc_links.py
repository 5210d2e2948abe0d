"""Every relative Markdown link in the README, docs/ and the components' READMEs points at a file
that exists, and a #fragment into a Markdown file at one of its headings (GitHub's anchors)."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GLOBS = ("README.md", "docs/*.md", "*/README.md", "*/*.md", "wotbench/*/README.md",
         "reports/example/README.md")


def _docs() -> list[Path]:
    found = {p for g in GLOBS for p in ROOT.glob(g) if p.is_file()}
    return sorted(p for p in found if not p.relative_to(ROOT).parts[0].startswith("."))


def _without_code(text: str) -> str:
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def _slug(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    return {_slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.*)$", _without_code(path.read_text()), re.M)}


def test_relative_links_resolve():
    bad = []
    for doc in _docs():
        for m in re.finditer(r"\]\(([^)\s]+)\)", _without_code(doc.read_text())):
            url = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", url):
                continue
            path, _, frag = url.partition("#")
            target = (doc.parent / path).resolve() if path else doc
            where = f"{doc.relative_to(ROOT)}: ({url})"
            if not target.exists():
                bad.append(f"{where}: no such file")
            elif frag and target.suffix == ".md" and frag not in _anchors(target):
                bad.append(f"{where}: no heading with that anchor")
    assert not bad, "broken links:\n" + "\n".join(bad)


def test_readme_stays_short():
    size = len((ROOT / "README.md").read_bytes())
    assert size <= 12288, f"README.md is {size} bytes: move details to a page in docs/ (limit 12 KiB)"
