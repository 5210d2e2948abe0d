"""Containers run under the run's warden: the entrypoint, the mounts, the lease label."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from wotbench.runner.backends.docker import containers
from wotbench.runner.deployment.lease import LEASE_LABEL


def _client(entrypoint, cmd):
    image = SimpleNamespace(attrs={"Config": {"Entrypoint": entrypoint, "Cmd": cmd}})
    return SimpleNamespace(images=SimpleNamespace(get=lambda tag: image))


def test_the_warden_runs_the_images_own_entrypoint_with_the_command():
    containers._ENTRYPOINTS.clear()
    binds, labels = {}, {}
    w = containers.Warden(Path("/b/wb-warden"), Path("/run/x/lease"))
    kw = containers.kept(_client(["/wot-device"], None), "img:1", ["--name", "d-0"], binds,
                         labels, w)
    assert kw["entrypoint"][0] == containers.WARDEN_IN
    assert kw["entrypoint"][-1] == "--" and "/.wb/lease/heartbeat" in kw["entrypoint"]
    assert kw["command"] == ["/wot-device", "--name", "d-0"]
    assert binds == {Path("/b/wb-warden"): (containers.WARDEN_IN, "ro"),
                     Path("/run/x/lease"): (containers.LEASE_IN, "ro")}
    assert labels[LEASE_LABEL] == "/run/x/lease/heartbeat"


def test_a_third_party_image_keeps_its_default_command_when_given_none():
    containers._ENTRYPOINTS.clear()
    kw = containers.kept(_client(None, ["nginx", "-g", "daemon off;"]), "nginx:x", [], {}, {},
                         containers.Warden(Path("/w"), Path("/l")))
    assert kw["command"] == ["nginx", "-g", "daemon off;"]


def test_without_a_warden_nothing_changes():
    binds, labels = {}, {}
    assert containers.kept(None, "img", ["a"], binds, labels, None) == {"command": ["a"]}
    assert binds == {} and labels == {}
