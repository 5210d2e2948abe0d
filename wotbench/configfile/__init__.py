"""A config file read: ``yaml_loader`` (``load_config``: the YAML, the ``things:`` expanded into
device groups by :mod:`wotbench.things.expand`, the schema of :mod:`wotbench.config`) and
``checks`` (the rules across blocks, some asking the deployment's forms in
:mod:`wotbench.deploy`). It sits above the models it validates, the Things and the deployment."""
