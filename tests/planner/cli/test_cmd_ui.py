"""`planner ui` launches Streamlit on app/main.py with the requested address and port."""

from __future__ import annotations

import pytest

from planner.cli import cmd_ui
from planner.cli.main import main


def test_ui_runs_streamlit_on_the_app(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []
    monkeypatch.setattr(cmd_ui.subprocess, "call", lambda cmd: seen.append(cmd) or 0)
    assert main(["ui", "--port", "8600"]) == 0
    cmd = seen[0]
    assert cmd[1:4] == ["-m", "streamlit", "run"] and cmd[4].endswith("app/main.py")
    assert cmd[cmd.index("--server.port") + 1] == "8600"
    assert cmd[cmd.index("--server.address") + 1] == "127.0.0.1"


def test_ui_bad_port_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ui", "--port", "70000"]) == 2
    err = capsys.readouterr().err
    assert "--port" in err and len(err.strip().splitlines()) == 1


def test_ui_streamlit_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []
    monkeypatch.setattr(cmd_ui.subprocess, "call", lambda cmd: seen.append(cmd) or 0)
    assert main(["ui"]) == 0 and main(["ui", "--address", "0.0.0.0"]) == 0
    local, shared = seen
    flags = dict(zip(local[5::2], local[6::2], strict=True))
    assert flags == {
        "--server.address": "127.0.0.1",
        "--server.port": "8501",
        "--server.headless": "true",
        "--browser.gatherUsageStats": "false",
        "--server.maxUploadSize": "256",
    }
    assert shared[shared.index("--server.address") + 1] == "0.0.0.0"


def test_make_ui_calls_planner_ui() -> None:
    from pathlib import Path

    makefile = (Path(__file__).resolve().parents[3] / "Makefile").read_text()
    recipe = makefile.split("\nui:", 1)[1].split("\n\n", 1)[0]
    assert "planner ui" in recipe and "streamlit" not in recipe
