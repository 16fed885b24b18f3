"""Workloads: request lengths, arrivals and SLO inputs (``spec``), timed traces (``traces``),
synthetic trace generation (``trace_gen``) and trace windows (``windows``)."""
