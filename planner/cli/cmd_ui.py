"""`planner ui`: serve the Streamlit web UI (the same as `make ui`)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Any

from hardware.errors import PlannerInputError
from planner.cli.common import int_in

APP_MAIN = Path(__file__).resolve().parents[2] / "app" / "main.py"


def register(sub: Any, groups: dict[str, Any]) -> None:
    p = sub.add_parser("ui", help="serve the web UI (Streamlit) on this machine")
    p.add_argument(
        "--address",
        default="127.0.0.1",
        help="interface to listen on (default 127.0.0.1: this machine only)",
    )
    p.add_argument("--port", type=int_in(1, 65535), default=8501)
    p.set_defaults(func=cmd_ui)


def cmd_ui(args: argparse.Namespace) -> int:
    if not APP_MAIN.is_file():
        raise PlannerInputError(
            "ui", f"{APP_MAIN} not found: run from a source checkout (pip install -e .)"
        )
    cmd = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(APP_MAIN),
        "--server.address",
        args.address,
        "--server.port",
        str(args.port),
        *streamlit_settings(),
    ]
    return subprocess.call(cmd)


UPLOAD_LIMIT_MB = 256
"""Streamlit's cap on one upload, MB (each uploader has its own smaller cap: config.json 4 MB)."""


def streamlit_settings() -> list[str]:
    """Server flags besides address and port: no browser, no usage statistics, uploads <= 256 MB."""
    return [
        "--server.headless",
        "true",
        "--browser.gatherUsageStats",
        "false",
        "--server.maxUploadSize",
        str(UPLOAD_LIMIT_MB),
    ]
