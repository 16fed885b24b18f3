"""Session-wide test setup."""

import os

# Triton kernels run in the interpreter (numpy, on CPU) in tests; Triton reads this when a kernel is
# decorated, so it must be set before any test module imports triton.
os.environ.setdefault("TRITON_INTERPRET", "1")
