"""Validation of the contention detector: the study (``study.py``: run, resume, evaluate), its
scenarios as points of resumable sweeps (``scenarios.py``), the pure rules that judge the
detector (``rules.py``), the facts they read from a run (``facts.py``), the table (``table.py``)
and the research behind the detector's defaults (``research.py``). docs/VALIDATION.md has the
results."""
