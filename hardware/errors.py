"""Errors that reach the user as one line and exit code 2."""

from __future__ import annotations


class PlannerInputError(ValueError):
    """Bad user input: names the offending field and what is allowed.

    The CLI prints ``str(err)`` on one line of stderr and exits with code 2.
    """

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


class InfeasibleError(PlannerInputError):
    """A request that cannot be met (out of memory, impossible SLO); exit code 2 with the reason."""

    def __init__(self, field: str, message: str, *, binding_constraint: str = "") -> None:
        self.binding_constraint = binding_constraint or field
        super().__init__(field, message)
