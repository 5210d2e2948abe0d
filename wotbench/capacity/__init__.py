"""Capacity search (``wotbench capacity``): the verb (``command``), the probe-and-bisect engine
over a sweep (``search``) and the SLO-driven variant (``slo``)."""
