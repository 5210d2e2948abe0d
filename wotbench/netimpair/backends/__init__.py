"""One module per backend: pumba, netem (tc in the device namespace), app (inside wot-device)."""
from wotbench.netimpair.backends.app import AppBackend
from wotbench.netimpair.backends.base import Backend, DeviceTarget
from wotbench.netimpair.backends.netem import NetemBackend
from wotbench.netimpair.backends.pumba import PumbaBackend

__all__ = ["AppBackend", "Backend", "DeviceTarget", "NetemBackend", "PumbaBackend"]
