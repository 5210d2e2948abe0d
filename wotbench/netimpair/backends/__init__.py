"""One module per backend: pumba, netem (tc in the device namespace), app (inside wot-device)."""
from .app import AppBackend
from .base import Backend, DeviceTarget
from .netem import NetemBackend
from .pumba import PumbaBackend

__all__ = ["AppBackend", "Backend", "DeviceTarget", "NetemBackend", "PumbaBackend"]
