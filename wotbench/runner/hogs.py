"""Deliberate contention episodes (``contention:`` config block, ``wotbench.contention_inject``).

The hogs are launched before T0 and sleep until their own absolute start instant; they stop on
their own after ``duration_s``. At the end of the run whatever still runs gets SIGTERM and each
hog's one-line JSON report is saved to ``contention/<name>.json``. Containers carry
``wotbench.run=<run id>`` so the normal cleanup removes them.
"""
from __future__ import annotations

import signal
import subprocess
from pathlib import Path

from wotbench.errors import EnvironmentProblem
from wotbench.runner import images
from wotbench.runner.process_backend import child_setup
from wotbench.runner.cleanup import PROCESS_ENV

HOG = images.Component("hog", "WOTBENCH_HOG_BIN")
HOG_SOURCE = images.REPO_ROOT / "contention-injector"


def hog_binary() -> Path:
    import os
    override = os.environ.get(HOG.env_var)
    binary = Path(override) if override else HOG_SOURCE / "build" / "hog"
    if not binary.exists() and (HOG_SOURCE / "Makefile").exists() and not override:
        subprocess.run(["make", "-C", str(HOG_SOURCE)], capture_output=True)
    if not binary.exists():
        raise EnvironmentProblem(f"contention episodes need {binary}: make -C {HOG_SOURCE}")
    return binary


class Hogs:
    def __init__(self, backend, run_id: str, out_dir: Path, log=print):
        self.backend, self.run_id, self.dir, self.log = backend, run_id, out_dir, log
        self.specs: list = []
        self.running: dict[str, object] = {}   # name -> container or Popen

    def prepare(self, resolved) -> None:
        """Build what the episodes need (before T0 is chosen: building takes seconds)."""
        self.binary = self.image = None
        if getattr(resolved, "contention", None):
            self.binary = hog_binary()
            if self.backend.name == "docker":
                self.image = images.ensure_image(self.backend.client, "hog", self.binary, self.log)

    def launch(self, resolved, plan, test_start_ns: int) -> list[dict]:
        if not getattr(resolved, "contention", None):
            return []
        from wotbench.contention_inject import episodes_for_run
        binary, image = self.binary, self.image
        self.specs = episodes_for_run(resolved, plan.model_dump(), test_start_ns,
                                      image=image or "none", run_label=self.run_id)
        self.dir.mkdir(parents=True, exist_ok=True)
        for s in self.specs:
            if image:
                kw = s.container_kwargs(name_prefix=f"wb-{self.run_id}")
                self.running[s.name] = self.backend.client.containers.run(**kw)
            else:
                self.running[s.name] = subprocess.Popen(
                    s.process_argv(binary), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                    env={PROCESS_ENV: self.run_id}, start_new_session=True,
                    preexec_fn=child_setup(set(s.cores)))
        if self.specs:
            self.log(f"{len(self.specs)} contention episode(s) scheduled")
        return [s.record() for s in self.specs]

    def stop(self) -> None:
        """Idempotent: SIGTERM what still runs, save each hog's JSON line."""
        for name, h in list(self.running.items()):
            out = self.dir / f"{name}.json"
            try:
                if isinstance(h, subprocess.Popen):
                    if h.poll() is None:
                        h.send_signal(signal.SIGTERM)
                    text, _ = h.communicate(timeout=10)
                    out.write_bytes(text or b"")
                else:
                    h.reload()
                    if h.status == "running":
                        h.kill(signal="SIGTERM")
                    h.wait(timeout=10)
                    out.write_bytes(h.logs(stdout=True, stderr=False))
            except Exception as e:
                self.log(f"contention: could not collect {name}: {e}")
                if isinstance(h, subprocess.Popen) and h.poll() is None:
                    h.kill()   # its own session: nothing else would ever stop it
                    h.wait()
            self.running.pop(name, None)
