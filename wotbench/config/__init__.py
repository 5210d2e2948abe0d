"""The configuration (docs/CONFIG.md): ``schema`` (one pydantic model per block), one module per
block with rules of its own (``byo``, ``dtls``, ``hog_episodes``, ``slo``, ``distributions``),
``checks`` (rules across blocks) and ``load`` (``load_config``: YAML to a checked ``Config``).
Nothing here knows the host; placement and ``auto`` values are :mod:`wotbench.deploy`."""
