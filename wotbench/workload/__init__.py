"""The workload the gateway emulators replay (paper §4.3): synthetic traces (``generate``), their
file formats (``formats``) and reading and checking trace and resource files (``trace_io``)."""
