"""Tests of planner.validation (measured data read from ../shared/validation, never copied)."""

from pathlib import Path

SILICON_MEASURED = (
    Path(__file__).resolve().parents[3] / ".." / "shared" / "validation" / "e2e"
) / "silicon_measured.csv"
"""The shared end-to-end measurements (absent on a checkout without ../shared: tests skip)."""
