"""How WoTbench marks what a run creates, so cleanup finds it and touches nothing else.

Containers and networks carry ``wotbench.run=<run id>`` (plus role and component labels);
process-backend children carry the environment variable ``WOTBENCH_RUN=<run id>``. Images carry
``wotbench.image`` instead: they are a build cache shared by runs, never removed by cleanup.
"""
RUN_LABEL = "wotbench.run"
ROLE_LABEL = "wotbench.role"
COMPONENT_LABEL = "wotbench.component"
IMAGE_LABEL = "wotbench.image"
PROCESS_ENV = "WOTBENCH_RUN"
PROCESS_LEASE_ENV = "WOTBENCH_LEASE"   # the run's lease file: is its harness alive?
NOBODY = 65534   # uid and gid the emulators and hogs run as (containers; process backend as root)
