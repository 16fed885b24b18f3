"""Replay measured rows through the serving model: the e2e row layout (``layout``), candidate
columns (``candidates``), launch settings (``launch``), the vectorised replay (``predict``), error
statistics (``stats``), the generic refit of engine constants (``fit``), campaign hold-out
(``holdout``), the committed bands around predictions (``bands``) and the ``planner validate e2e``
report (``e2e``); ``throughput`` and ``mlperf`` replay the other documented tables."""
