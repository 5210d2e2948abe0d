"""What a config becomes on this host (paper §5): device names and addresses (``addressing``),
devices per container (``pods``), the core placement (``plan``) and the resolved config with
every ``auto`` filled in (``resolve``)."""
