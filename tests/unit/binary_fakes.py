"""A unit test compiles no C: ``make check`` runs on a fresh checkout, and a run's pre-flight
(``wotbench.runner.prepare.binaries.ensure_binaries``) would build every stale program first
(18 s of one worker's time on a 2-core host)."""
from pathlib import Path

from wotbench.runner.prepare import binaries


def fresh_binaries(log=print, hog: bool = False, fleet: bool = False) -> dict[str, Path]:
    """``binaries.ensure_binaries`` without make: the binaries that are there and fresh, the
    ones ``check`` looks at (a fresh checkout has no hog, which ``make build`` leaves out).
    A test that needs no rebuilt binary sets it in place of the real one."""
    comps = (binaries.COMPONENTS + ((binaries.HOG,) if hog else ())
             + ((binaries.FLEET,) if fleet else ()))
    return {c.name: c.binary() for c in comps if not binaries.is_stale(c)}
