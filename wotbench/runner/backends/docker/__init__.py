"""The Docker backend: ``backend`` (the RunBackend), ``containers`` (least-privilege specs),
``pods`` (several devices per container), ``network`` (per-run bridges), ``images`` and
``hostimage`` (FROM scratch images of our binaries and of host programs), ``scalelimits``."""
