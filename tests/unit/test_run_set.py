"""``wotbench run CONFIG --set KEY=VALUE`` (wotbench.sweep.overridden): the keys applied the way
a sweep point's are, a bad key named, the temporary file gone after the run."""
import pytest
import yaml

from wotbench.configfile.yaml_loader import load_config
from wotbench.errors import ConfigError
from wotbench.sweep.overridden import overridden_config


def test_set_changes_the_key_and_keeps_the_rest(tmp_path):
    src = tmp_path / "c.yaml"
    src.write_text(yaml.safe_dump({"name": "c", "duration_s": 60,
                                   "devices": [{"group": "a", "count": 3}]}))
    with overridden_config(src, ["duration_s=30", "devices[0].count=5"]) as source:
        cfg = source.config                  # the run gets it read: no second parse
        assert (cfg.name, cfg.duration_s, cfg.devices[0].count) == ("c", 30, 5)
        assert "subnet" not in cfg.network.model_fields_set   # defaults stay defaults
        assert load_config(source.path) == cfg and yaml.safe_load(source.text) == source.raw
    assert not source.path.exists()


def test_a_bad_key_is_named(tmp_path):
    src = tmp_path / "c.yaml"
    src.write_text(yaml.safe_dump({"name": "c", "devices": [{"group": "a"}]}))
    with pytest.raises(ConfigError, match="--set duration_x=3"):
        with overridden_config(src, ["duration_x=3"]):
            pass
