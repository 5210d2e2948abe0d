"""docs/CONFIG.md is generated from the config models (wotbench.config.reference): it must be
current, and every field must carry a description."""
from pathlib import Path

from wotbench.config import reference, schema

DOC = Path(__file__).resolve().parents[2] / "docs" / "CONFIG.md"


def test_config_md_is_current():
    assert DOC.read_text() == reference.render(), (
        f"docs/CONFIG.md is stale: run `{reference.COMMAND}` from the repository root and "
        "commit the result")


def test_every_block_and_key_is_documented():
    text = reference.render()
    for s in reference.SECTIONS:
        assert f"## {s.title}\n" in text
        for name in s.model.model_fields:
            assert f"| `{name}` |" in text, (s.title, name)
    # a literal's choices and a Field constraint make it into the table
    assert "| `mode` | `sleep` \\| `busy` | `busy` |" in text
    assert "| `threads` | integer | `1` | 1..1024 |" in text


def test_every_model_reachable_from_config_has_a_section():
    for m in reference.reachable(schema.Config):
        assert reference._section_of(m) is not None, m.__name__
