"""Validation of the contention detector: the study (``study.py``: run, resume, evaluate), its
scenarios as points of resumable sweeps (``scenarios.py``), the pure rules that judge the
detector (``rules.py``), the facts they read from a run (``facts.py``), the table (``table.py``),
the research behind the detector's defaults (``research.py``), the graded study's scoring against
clean twins (``graded.py``), its duty-cycled antagonist (``dutyhog.py``) and the resolution in
time (``resolution.py``). docs/VALIDATION.md has the results."""
