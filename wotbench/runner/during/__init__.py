"""Stage 3, the test: the timeline on CLOCK_MONOTONIC, the poll loop and its progress bar, the
contention episodes' hogs, the push verify phase (-> :class:`wotbench.runner.during.timeline.Timeline`)."""
