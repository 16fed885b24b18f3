"""Harnesses for the UI tests: AppTest runs of one page, and a real server on a free port."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "app"
PAGE_TIMEOUT_S = 60.0
"""Generous per-run limit: two xdist workers share two cores with the rest of the suite."""
SERVER_START_S = 90.0


def page(name: str) -> AppTest:
    """An AppTest of one page script (``app/views/<name>.py``), run once with default inputs."""
    at = AppTest.from_file(str(APP / "views" / f"{name}.py"), default_timeout=PAGE_TIMEOUT_S)
    return at.run()


def widget(elements: object, key: str) -> Any:
    """The widget with ``key`` among ``elements`` (AppTest lists)."""
    for el in elements:  # type: ignore[attr-defined]
        if getattr(el, "key", None) == key:
            return el
    raise KeyError(key)


def no_errors(at: AppTest) -> None:
    """The page ran without a traceback and without st.error."""
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def free_port() -> int:
    """A TCP port nobody listens on now (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as resp:
            return resp.status == 200
    except OSError:
        return False


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)  # the server's own session: it and nothing else
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def start_server(folder: Path) -> Iterator[str]:
    """``streamlit run app/main.py`` on 127.0.0.1 at a free port;
    yields the URL, always stops it."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = (folder / "streamlit.log").open("wb")
    cmd = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(APP / "main.py"),
        "--server.address",
        "127.0.0.1",
        "--server.port",
        str(port),
        "--server.headless",
        "true",
        "--browser.gatherUsageStats",
        "false",
        "--server.fileWatcherType",
        "none",
    ]
    proc = subprocess.Popen(
        cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        deadline = time.monotonic() + SERVER_START_S
        while not _healthy(url):
            if proc.poll() is not None:
                pytest.fail(
                    f"streamlit exited with {proc.returncode}: "
                    f"{(folder / 'streamlit.log').read_text()[-2000:]}"
                )
            if time.monotonic() > deadline:
                pytest.fail(f"streamlit did not answer on {url} within {SERVER_START_S:.0f} s")
            time.sleep(0.25)
        yield url
    finally:
        _stop(proc)
        log.close()


@pytest.fixture
def streamlit_server(tmp_path: Path) -> Iterator[str]:
    """A server for one test."""
    yield from start_server(tmp_path)
