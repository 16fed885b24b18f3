"""Where kernel tables, their metadata and fitted parameters live (the only module that knows).

Layout::

    kernels_db/data/<gpu_key>/<op>.csv  one table per op family (schema: ``kernels_db.schema``)
    kernels_db/data/<gpu_key>/meta.yaml GPU, driver, versions, date, tool, kernel_source, git SHA
    kernels_db/fitted/<gpu_key>.yaml    fitted efficiency parameters (``kernels_db.fitted``)

What users import or fit (``planner kernels import``, ``planner calibrate fit``) goes to ``--out``
or to the per-user data folder, never into the installed package::

    $PLANNER_DATA_DIR (default $XDG_DATA_HOME/llm-serving-planner, else
    ~/.local/share/llm-serving-planner)/kernels/<gpu_key>/<op>.csv and /fitted/<gpu_key>.yaml

A GPU's tables (or fit) in the user folder are read instead of the bundled ones on start-up.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Final

from hardware.errors import PlannerInputError

PACKAGE_DIR: Final[Path] = Path(__file__).resolve().parent
DATA_DIR: Final[Path] = PACKAGE_DIR / "data"
FITTED_DIR: Final[Path] = PACKAGE_DIR / "fitted"
META_FILE: Final[str] = "meta.yaml"
GPU_KEY_PATTERN: Final[str] = r"[a-z0-9][a-z0-9_.-]{0,63}"
"""A GPU key used as a folder or file name: lower-case letters, digits, '_', '.', '-'; no '..'."""


def check_gpu_key(key: str, field: str = "--gpu") -> str:
    """``key`` when it is safe as one path part (``GPU_KEY_PATTERN``); else a PlannerInputError."""
    if not re.fullmatch(GPU_KEY_PATTERN, key) or ".." in key:
        raise PlannerInputError(
            field,
            f"'{key[:60]}' cannot name a GPU folder: use lower-case "
            "letters, digits, '_', '.' and '-' (at most 64, no '..')",
        )
    return key


def user_data_dir() -> Path:
    """Per-user data folder: $PLANNER_DATA_DIR, else llm-serving-planner in $XDG_DATA_HOME or
    ~/.local/share."""
    explicit = os.environ.get("PLANNER_DATA_DIR")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "llm-serving-planner"


def user_tables_dir() -> Path:
    """Where ``planner kernels import`` writes by default (``<gpu>/<op>.csv`` below)."""
    return user_data_dir() / "kernels"


def user_fitted_dir() -> Path:
    """Where ``planner calibrate fit`` writes by default (``<gpu>.yaml`` below)."""
    return user_data_dir() / "fitted"


def tables_root(gpu_key: str) -> Path:
    """The user's table folder when it holds tables of ``gpu_key``, else the bundled one."""
    user = user_tables_dir()
    return user if table_dir(gpu_key, user).is_dir() else DATA_DIR


def fitted_root(gpu_key: str) -> Path:
    """The user's fitted folder when it holds a fit of ``gpu_key``, else the bundled one."""
    user = user_fitted_dir()
    return user if fitted_path(gpu_key, user).is_file() else FITTED_DIR


def table_dir(gpu_key: str, data_dir: Path = DATA_DIR) -> Path:
    """Folder of the tables of one GPU."""
    return data_dir / gpu_key


def table_path(gpu_key: str, op: str, data_dir: Path = DATA_DIR) -> Path:
    """CSV file of op family ``op`` on GPU ``gpu_key``."""
    return table_dir(gpu_key, data_dir) / f"{op}.csv"


def meta_path(gpu_key: str, data_dir: Path = DATA_DIR) -> Path:
    """Metadata file (GPU, driver, versions, date, tool, kernel_source, git SHA) of one GPU's
    tables."""
    return table_dir(gpu_key, data_dir) / META_FILE


def fitted_path(gpu_key: str, fitted_dir: Path = FITTED_DIR) -> Path:
    """YAML file of the fitted efficiency parameters of one GPU."""
    return fitted_dir / f"{gpu_key}.yaml"
