"""The performance model: the op graph of a forward step (``opgraph``), step pricing (``step``,
``pricer``), the memory model (``memory``, with ``memory_plan`` its one-deployment view), the
serving model (``serving``, ``queueing``), batch evaluation of candidates (``batch``, ``workers``,
``roles``), one deployment's estimate (``estimate``), and the step-level simulator and trace
replay (``simulator``, ``replay``)."""
