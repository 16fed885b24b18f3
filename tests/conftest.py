"""Session-wide test setup."""

import os
import tempfile

# Triton kernels run in the interpreter (numpy, on CPU) in tests; Triton reads this when a kernel is
# decorated, so it must be set before any test module imports triton.
os.environ.setdefault("TRITON_INTERPRET", "1")
# The suite never reads or writes the user's own data folder (imported tables, fits).
os.environ["PLANNER_DATA_DIR"] = tempfile.mkdtemp(prefix="planner-test-data-")


import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

# Property tests draw the same examples on every run (CI and here alike): a law a random draw
# breaks once in a while would fail CI at random; a counterexample found by exploring is written
# down as its own test instead (tests/kernels_db/test_properties.py).
settings.register_profile("repo", derandomize=True)
settings.load_profile("repo")


@pytest.fixture(autouse=True)
def _fresh_user_data_dir(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each test gets its own empty user data folder: a table or fit one test imports into it
    (``kernels import``, ``calibrate fit``) must not change the predictions of the next."""
    monkeypatch.setenv("PLANNER_DATA_DIR", str(tmp_path_factory.mktemp("planner-data")))
