"""Run a PuLP problem on HiGHS (highspy), falling back to CBC, and insist on a proven optimum.

PuLP's ``LpStatus`` alone is not enough: CBC reports "Optimal" after hitting a time limit with
only a feasible incumbent, so :func:`solve` also checks ``sol_status`` (LpSolutionOptimal) and
reports which solver ran. HiGHS prints a banner on stdout even when quiet (``msg=False``); the
native solver's stdout and stderr go to the null device while it runs, so no banner reaches the
user's stdout (``--format json`` stays clean) or stderr.
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
def _quiet_native() -> Iterator[None]:
    """Send fds 1 and 2 to the null device while a native solver runs (its banner bypasses
    Python's sys.stdout and sys.stderr); the solver's outcome is read from ``prob.status`` and
    ``prob.sol_status``, not from its log."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = (os.dup(1), os.dup(2))
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        os.dup2(null, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, null):
            os.close(fd)


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
            with _quiet_native():
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
