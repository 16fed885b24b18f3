"""Microbenchmarks that measure our own kernel tables (``planner calibrate run``).

Needs torch (and triton on GPUs): ``pip install -e .[bench]``. Nothing outside this package imports
it at import time, so ``planner`` and ``solvers`` work without torch. Entry points:
``kernels_db.bench.runner.run`` and ``python -m kernels_db.bench.run_all`` (whole GPU sweep).
"""
