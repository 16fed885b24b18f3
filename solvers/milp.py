"""Run a PuLP problem on HiGHS (highspy), falling back to CBC, and insist on a proven optimum.

PuLP's ``LpStatus`` alone is not enough: CBC reports "Optimal" after hitting a time limit with
only a feasible incumbent, so :func:`solve` also checks ``sol_status`` (LpSolutionOptimal) and
reports which solver ran. HiGHS prints a banner on stdout even when quiet; it is redirected so
``--format json`` stays clean.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import pulp

TIME_LIMIT_S = 10.0
"""Wall-clock cap per MILP; the planner's problems solve in well under a second."""


@dataclass(frozen=True)
class MilpOutcome:
    """What the solver proved."""

    optimal: bool
    status: str  # PuLP's LpStatus text
    solution_status: str  # PuLP's LpSolution text
    solver: str
    objective: float | None


@contextlib.contextmanager
def _quiet_stdout() -> Iterator[None]:
    """Send fd 1 to stderr while a native solver runs (its banner bypasses Python's sys.stdout)."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _solvers(time_limit_s: float) -> list[pulp.LpSolver]:
    out: list[pulp.LpSolver] = []
    for name in ("HiGHS", "HiGHS_CMD", "PULP_CBC_CMD"):
        cls = getattr(pulp, name, None)
        if cls is None:
            continue
        s = cls(msg=False, timeLimit=time_limit_s)
        if s.available():
            out.append(s)
            if name.startswith("HiGHS"):
                break  # CBC only as a fallback (constructing it warns about deprecation)
    return out


def solve(prob: pulp.LpProblem, time_limit_s: float = TIME_LIMIT_S) -> MilpOutcome:
    """Solve ``prob`` with the first available solver; ``optimal`` only when proven."""
    last = MilpOutcome(False, "Not Solved", "No Solution Found", "none", None)
    for solver in _solvers(time_limit_s):
        try:
            with _quiet_stdout():
                prob.solve(solver)
        except pulp.PulpSolverError:
            continue
        status = pulp.LpStatus[prob.status]
        sol = pulp.LpSolution.get(prob.sol_status, str(prob.sol_status))
        proven = prob.status == pulp.LpStatusOptimal and prob.sol_status == pulp.LpSolutionOptimal
        obj = pulp.value(prob.objective) if prob.status == pulp.LpStatusOptimal else None
        last = MilpOutcome(proven, status, sol, solver.name, None if obj is None else float(obj))
        if proven or prob.status == pulp.LpStatusInfeasible:
            return last
    return last
