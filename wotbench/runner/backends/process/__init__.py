"""The process backend: the same run with local processes on loopback addresses (``backend``)."""
