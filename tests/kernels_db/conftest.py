"""Shared fixtures: the validation folder (skips when absent)."""

from __future__ import annotations

from pathlib import Path

import pytest

VALIDATION_KERNELS = (
    Path(__file__).resolve().parents[2].parent / "shared" / "validation" / "kernels"
)


@pytest.fixture(scope="session")
def validation_kernels() -> Path:
    if not VALIDATION_KERNELS.is_dir():
        pytest.skip(
            f"validation data not found at {VALIDATION_KERNELS} (../shared/validation/kernels)"
        )
    return VALIDATION_KERNELS
