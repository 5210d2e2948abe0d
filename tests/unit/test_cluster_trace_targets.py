"""backend: swarm with a recorded trace (each cell gets the lines of its own devices, global
ids kept) and the per-node check of the endpoints a cell's share needs before T0."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml

from wotbench.distributed import split, targets, tracesplit
from wotbench.configfile.yaml_loader import load_config
from wotbench.workload.generate import write_trace

CELLS_90 = Path(__file__).resolve().parents[2] / "tests" / "cluster" / "configs" / "cells-90.yaml"
CELLS = [split.Cell(node="n1", device_cores=1), split.Cell(node="n2", device_cores=2),
         split.Cell(node="n3", device_cores=1)]


def _recorded(tmp_path: Path) -> Path:
    """cells-90's generated trace, recorded (trace.csv + resources/), and a config using it."""
    raw = yaml.safe_load(CELLS_90.read_text())
    write_trace(load_config(CELLS_90), tmp_path / "rec")
    raw["trace"] = {"file": "rec/trace.csv"}
    cfg = tmp_path / "recorded.yaml"
    cfg.write_text(yaml.safe_dump(raw))
    return cfg


def _ids(text: str) -> list[int]:
    return [int(line.split(",")[0]) for line in text.splitlines()[1:] if line]


def test_a_recorded_trace_splits_into_whole_devices_per_cell_ids_kept(tmp_path):
    cfg = load_config(_recorded(tmp_path))
    whole = Path(cfg.trace.file).read_text()
    counts = tracesplit.requests_per_device(cfg)
    assert sum(counts.values()) == len(_ids(whole)) > 0
    sp = split.split(split.units_from_config(cfg, counts), CELLS)
    assert sp == split.split(split.units_from_config(cfg, counts), CELLS)   # deterministic
    slices = {s.node: tracesplit.slice_lines(whole, s.device_ids) for s in sp.cells}
    for s in sp.cells:
        text = slices[s.node]
        assert text.splitlines()[0] == whole.splitlines()[0]              # the header
        assert set(_ids(text)) <= set(s.device_ids)                        # its devices only
        kept = [line for line in whole.splitlines()[1:] if int(line.split(",")[0]) in
                set(s.device_ids)]
        assert text.splitlines()[1:] == kept                               # the lines, in order
    assert sorted(i for t in slices.values() for i in _ids(t)) == sorted(_ids(whole))
    # the balance follows the trace's own load: n2 has two device cores, about twice the load
    load = {s.node: s.load for s in sp.cells}
    assert load["n2"] > 1.5 * max(load["n1"], load["n3"])


def test_a_cell_imports_its_slice_of_a_recorded_trace(tmp_path):
    path = _recorded(tmp_path)
    cfg = load_config(path)
    ids = {3, 4, 50, 89}
    whole = Path(cfg.trace.file).read_text()
    text = tracesplit.localise(path.read_text(), tmp_path / "cell" / "recorded",
                               tracesplit.slice_lines(whole, ids),
                               tracesplit.resource_files(cfg))
    (tmp_path / "cell" / "c.yaml").write_text(text)
    local = load_config(tmp_path / "cell" / "c.yaml")
    assert Path(local.trace.file).parent == tmp_path / "cell" / "recorded"
    summary = write_trace(local, tmp_path / "out", only=ids)
    col = np.loadtxt(tmp_path / "out" / "trace.csv", delimiter=",", skiprows=1, usecols=0,
                     dtype=np.int64)
    assert set(col.tolist()) == ids and summary.requests == sum(
        1 for i in _ids(whole) if i in ids)
    assert sorted(p.stem for p in (tmp_path / "out" / "resources").glob("*.csv")
                  if p.stem != "cd-node") == \
        sorted(f"sensor-{i}" for i in ids)


BYO = """name: byo
duration_s: 5
devices:
  - group: sensor
    count: 4
  - group: board
    external: [10.9.0.1:5683, 10.9.0.2:5683]
    paths: [time]
  - group: srv
    count: 2
    server: {image: "coap-srv:1", port: 5683}
    paths: [time]
"""


def _byo(tmp_path):
    p = tmp_path / "byo.yaml"
    p.write_text(BYO)
    return load_config(p)


def test_a_cell_checks_only_the_targets_of_its_share(tmp_path):
    cfg = _byo(tmp_path)
    t = targets.targets_of(cfg, ["sensor-0", "board-1", "srv-0"])
    assert [(x.key, x.name, x.where) for x in t] == [("devices[1].external[1]", "board-1",
                                                       "10.9.0.2:5683")]
    assert targets.server_images(cfg, ["srv-1"]) == [("devices[2].server.image", "coap-srv:1")]
    assert targets.server_images(cfg, ["sensor-0"]) == []
    pinged = []
    ok = targets.preflight(cfg, ["board-0", "srv-0"], "n1", has_image=lambda i: True,
                           ping=lambda ts, s: pinged.extend(ts) or [])
    assert ok is None and pinged == [("devices[1].external[0]", "10.9.0.1", 5683)]


def test_a_node_that_cannot_reach_a_target_or_lacks_an_image_is_named_with_the_fix(tmp_path):
    cfg = _byo(tmp_path)
    why = targets.preflight(cfg, ["board-0", "board-1", "srv-1"], "wbc-n2",
                            has_image=lambda i: False,
                            ping=lambda ts, s: [k for k, _, _ in ts if k.endswith("[1]")],
                            timeout_s=0.5)
    assert why.startswith("wbc-n2 cannot serve its share before T0 (2 problem(s)): ")
    assert ("devices[2].server.image: the image coap-srv:1 is not on wbc-n2's Docker Engine; "
            "fix: docker save coap-srv:1 | ssh wbc-n2 docker load") in why
    assert ("devices[1].external[1]: board-1 at 10.9.0.2:5683 did not answer a CoAP ping from "
            "wbc-n2 within 0.5 s; fix: make it reachable from wbc-n2") in why
    assert "10.9.0.1" not in why


def test_the_real_ping_names_an_endpoint_nobody_answers(tmp_path):
    cfg = _byo(tmp_path)
    cfg.devices[1].external[0] = "127.0.0.1:9"   # discard port: nothing answers CoAP there
    why = targets.preflight(cfg, ["board-0"], "n1", has_image=lambda i: True, timeout_s=0.3)
    assert "devices[1].external[0]: board-0 at 127.0.0.1:9 did not answer" in why


def test_http_external_endpoints_get_an_http_get_and_the_silent_one_is_named(tmp_path):
    from testkit.http_server import HttpServer
    with HttpServer("status:404") as srv:   # any HTTP status is an answer: the server is up
        p = tmp_path / "http.yaml"
        p.write_text(f"""
name: http-ext
duration_s: 5
devices:
  - group: web
    protocol: http
    external: ["{srv.host}:{srv.port}", "127.0.0.1:9"]
    paths: [sensors/t]
""")
        cfg = load_config(p)
        t = targets.targets_of(cfg, ["web-0", "web-1"])
        assert [(x.scheme, x.path) for x in t] == [("http", "sensors/t")] * 2
        why = targets.preflight(cfg, ["web-0", "web-1"], "wbc-n3", has_image=lambda i: True,
                                ping=lambda ts, s: [k for k, _, _ in ts], timeout_s=0.5)
        assert why is not None and "devices[0].external[0]" not in why
        assert ("devices[0].external[1]: web-1 at 127.0.0.1:9 did not answer an HTTP GET from "
                "wbc-n3 within 0.5 s") in why
        assert "curl -sv http://127.0.0.1:9/sensors/t" in why
        assert [s.target for s in srv.seen][:1] == ["/sensors/t"]


class _CountedShare(list):
    """A share that counts how often it is walked whole (a membership test on a list walks it)."""
    walks = 0

    def __iter__(self):
        type(self).walks += 1
        return super().__iter__()


def test_a_cells_check_walks_its_share_once_not_once_per_device_of_the_config(tmp_path):
    # a cell of a 10^6-device run once made a set of its 263 160 names for each of the 10^6
    # devices (server_images): 600 s were not enough. The walks must not grow with the config.
    raw = yaml.safe_load(BYO)
    raw["devices"][0]["count"] = 3000
    p = tmp_path / "big.yaml"
    p.write_text(yaml.safe_dump(raw))
    cfg = load_config(p)
    share = _CountedShare(f"sensor-{i}" for i in range(0, 3000, 2))
    share += ["board-1", "srv-0"]
    for check in (lambda: targets.server_images(cfg, share),
                  lambda: targets.targets_of(cfg, share),
                  lambda: targets.preflight(cfg, share, "n1", has_image=lambda i: True,
                                            ping=lambda ts, s: [])):
        _CountedShare.walks = 0
        check()
        assert _CountedShare.walks == 1
    # what they find is the same
    assert targets.server_images(cfg, share) == [("devices[2].server.image", "coap-srv:1")]
    assert [t.name for t in targets.targets_of(cfg, share)] == ["board-1"]
