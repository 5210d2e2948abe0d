"""A run's pre-flight in a unit test, without what costs time and proves nothing there:

- no C is compiled: ``make check`` runs on a fresh checkout, and the pre-flight
  (``wotbench.runner.prepare.binaries.ensure_binaries``) would build every stale program
  first (18 s of one worker's time on a 2-core host);
- the host check's look at how busy the cores are samples 20 ms, not 0.3 s
  (``wotbench.runner.commands.doctor.check_cores``): a refusal or a parse count does not
  depend on it, and the catalogue of bad configs runs it twice per entry."""
from pathlib import Path

from wotbench.runner.commands import doctor
from wotbench.runner.prepare import binaries


def fresh_binaries(log=print, hog: bool = False, fleet: bool = False) -> dict[str, Path]:
    """``binaries.ensure_binaries`` without make: the binaries that are there and fresh, the
    ones ``check`` looks at (a fresh checkout has no hog, which ``make build`` leaves out)."""
    comps = (binaries.COMPONENTS + ((binaries.HOG,) if hog else ())
             + ((binaries.FLEET,) if fleet else ()))
    return {c.name: c.binary() for c in comps if not binaries.is_stale(c)}


def quick_preflight(monkeypatch) -> None:
    """Both of the above for the rest of the test."""
    real = doctor.check_cores
    monkeypatch.setattr(binaries, "ensure_binaries", fresh_binaries)
    monkeypatch.setattr(doctor, "check_cores", lambda sample_s=0.5: real(0.02))
