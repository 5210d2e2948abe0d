"""The configuration (docs/CONFIG.md): ``schema`` (one pydantic model per block), one module per
block with rules of its own (``byo``, ``dtls``, ``hog_episodes``, ``slo``, ``distributions``),
``things_spec`` (the ``things:`` and ``directory:`` blocks). Nothing here knows the host;
placement and ``auto`` values are :mod:`wotbench.deploy`; the rules across blocks and reading a
file (``load_config``: YAML to a checked ``Config``) are :mod:`wotbench.configfile`."""
