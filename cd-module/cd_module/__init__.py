"""The contention detector (paper §4.5, cd-module/README.md, docs/DETECTOR.md): how the CD node
is sized (``sizing``), what it deploys (``node``), its probe trace (``trace``), the evidence per
window (``evidence``, ``hostshare``, ``loop_lag``) and the verdict from its samples
(``verdict``, ``tolerance``). The validation study that grades it is
:mod:`wotbench.validation`, its manifest ``cd-module/validation/scenarios.yaml``."""
