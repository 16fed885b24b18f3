"""`planner ui`: serve the Streamlit web UI (the same as `make ui`)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Any

from hardware.errors import PlannerInputError

APP_MAIN = Path(__file__).resolve().parents[2] / "app" / "main.py"


def register(sub: Any, groups: dict[str, Any]) -> None:
    p = sub.add_parser("ui", help="serve the web UI (Streamlit) on this machine")
    p.add_argument("--address", default="127.0.0.1", help="interface to listen on")
    p.add_argument("--port", type=int, default=8501)
    p.set_defaults(func=cmd_ui)


def cmd_ui(args: argparse.Namespace) -> int:
    if not APP_MAIN.is_file():
        raise PlannerInputError("ui", f"{APP_MAIN} not found: run from a source checkout (pip install -e .)")
    if not 0 < args.port < 65536:
        raise PlannerInputError("--port", f"must be in 1..65535, got {args.port}")
    cmd = [sys.executable, "-m", "streamlit", "run", str(APP_MAIN), "--server.address", args.address,
           "--server.port", str(args.port), "--server.headless", "true"]
    return subprocess.call(cmd)
