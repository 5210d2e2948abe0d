"""The contention detector (paper §4.5, docs/DETECTOR.md): how the CD node is sized (``sizing``),
what it deploys (``node``), its probe trace (``trace``) and the verdict from its samples
(``verdict``). The validation study that grades it is :mod:`wotbench.validation`."""
