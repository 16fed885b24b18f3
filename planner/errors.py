"""User-facing errors (defined at the bottom of the import graph, in ``hardware.errors``)."""

from hardware.errors import InfeasibleError, PlannerInputError

__all__ = ["InfeasibleError", "PlannerInputError"]
