"""Session-wide test setup."""

import os
import tempfile

# Triton kernels run in the interpreter (numpy, on CPU) in tests; Triton reads this when a kernel is
# decorated, so it must be set before any test module imports triton.
os.environ.setdefault("TRITON_INTERPRET", "1")
# The suite never reads or writes the user's own data folder (imported tables, fits).
os.environ["PLANNER_DATA_DIR"] = tempfile.mkdtemp(prefix="planner-test-data-")
