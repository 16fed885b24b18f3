"""Where kernel tables, their metadata and fitted parameters live (the only module that knows).

Layout::

    kernels_db/data/<gpu_key>/<op>.csv      one table per op family (schema in ``kernels_db.schema``)
    kernels_db/data/<gpu_key>/meta.yaml     GPU, driver, library versions, date, tool, kernel_source, git SHA
    kernels_db/fitted/<gpu_key>.yaml        fitted efficiency parameters (``kernels_db.fitted``)
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

PACKAGE_DIR: Final[Path] = Path(__file__).resolve().parent
DATA_DIR: Final[Path] = PACKAGE_DIR / "data"
FITTED_DIR: Final[Path] = PACKAGE_DIR / "fitted"
META_FILE: Final[str] = "meta.yaml"


def table_dir(gpu_key: str, data_dir: Path = DATA_DIR) -> Path:
    """Folder of the tables of one GPU."""
    return data_dir / gpu_key


def table_path(gpu_key: str, op: str, data_dir: Path = DATA_DIR) -> Path:
    """CSV file of op family ``op`` on GPU ``gpu_key``."""
    return table_dir(gpu_key, data_dir) / f"{op}.csv"


def meta_path(gpu_key: str, data_dir: Path = DATA_DIR) -> Path:
    """Metadata file (GPU, driver, versions, date, tool, kernel_source, git SHA) of one GPU's tables."""
    return table_dir(gpu_key, data_dir) / META_FILE


def fitted_path(gpu_key: str, fitted_dir: Path = FITTED_DIR) -> Path:
    """YAML file of the fitted efficiency parameters of one GPU."""
    return fitted_dir / f"{gpu_key}.yaml"
