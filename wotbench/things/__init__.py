"""Things from W3C Thing Descriptions (TD 1.1) and Thing Models (TM 1.1), issue 34, docs/WOT.md.

``wotbench.config.things_spec`` (the ``things:`` config block) -> ``tdfile`` (read,
instantiate a model) -> ``tdschema`` (the TD 1.1 JSON Schema) -> ``affordances`` (CoAP and HTTP
forms) -> ``model`` (one entry resolved: its protocol, resources and workload; ``payloads`` its
values) -> ``expand`` (device groups, at config load) -> ``workload``/``instances``/``files``
(trace rows, resource files, each instance's TD, at trace time); the report's table by Thing
Model and affordance is :mod:`wotbench.report.things_section`. ``http_thing``: the server of
HTTP Things (instances whose forms are HTTP, many to a process); ``directory``/``tdd_server``:
registration with a Thing Description Directory.
"""
