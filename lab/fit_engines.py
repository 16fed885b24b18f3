"""Write each engine's ``planner/engines/<name>/constants.yaml``: the constants fitted to rows
(``planner.replay_e2e.fit``), with their sources and a fit log (``lab/notes/engines_fit_log.md``).

    python -m lab.fit_engines              # rewrite the packaged constants files
    python -m lab.fit_engines --check      # exit 1 if it would change
    python -m lab.fit_engines --data my_rows.csv --out my_engines.yaml

The default data are both shared e2e files (``silicon_measured.csv``: H100, H200, GB200;
``silicon_measured_b200.csv``: B200); ``--data`` given more than once fits the files together, a
measurement in two of them counting once. The rows are read as ``python -m lab.prepare_e2e``
writes them (``prepare_e2e.prepare_frame``, per file).

The fit itself (constants, grids, the coordinate and joint searches) is the product's
``planner.replay_e2e.fit``, which also refits the held-out folds and a user's own rows.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import re
import sys
from collections.abc import Mapping
from pathlib import Path

import pandas as pd
import yaml

from hardware.errors import PlannerInputError
from lab.prepare_e2e import prepare_frame
from planner.engines import get_engine
from planner.engines.calibration import (
    CONSTANTS_FILE,
    ENGINE_DEFAULTS,
    EngineCalibration,
    Sourced,
    load_engines,
    load_file,
    packaged_text,
    split_text,
)
from planner.engines.registry import BUILTIN
from planner.replay_e2e.candidates import prepare
from planner.replay_e2e.fit import CONSTANTS, Constant, Values, fit_constants, fitted_values
from planner.replay_e2e.layout import drop_duplicates, read_measurements
from planner.safe_files import write_new_file

SHARED_E2E = Path(__file__).resolve().parents[1] / ".." / "shared" / "validation" / "e2e"
DATA_FILES = ("silicon_measured.csv", "silicon_measured_b200.csv")
DEFAULT_DATA = [SHARED_E2E / name for name in DATA_FILES]
FIT_COMMAND_SHORT = "python -m lab.fit_engines"
FIT_COMMAND = f"{FIT_COMMAND_SHORT} " + " ".join(
    f"--data ../shared/validation/e2e/{name}" for name in DATA_FILES
)
FIT_LOG = Path(__file__).with_name("notes") / "engines_fit_log.md"
"""The fit log of the packaged constants (each built-in engine's constants.yaml)."""


def _source(c: Constant, backend: str, date: str) -> str:
    """One short source: what it is, what it was fitted to on which rows by which command, when
    (unit and bounds stand next to it; the history is in the fit log)."""
    if c.held:
        return (
            f"{c.meaning}; held at {c.start:g} by `{FIT_COMMAND_SHORT}` (held-out figures are "
            f"better unfitted; `planner calibrate e2e` fits it to your rows), {date}"
        )
    rows = "every engine's" if c.shared else f"the {backend}"
    modes = "+".join(c.modes)
    return (
        f"{c.meaning}; fitted to {'/'.join(c.metrics).upper()} on {rows} {modes} rows of "
        f"{' + '.join(DATA_FILES)} by `{FIT_COMMAND_SHORT}`, {date}"
    )


HEADER = """\
# An engine's calibration of the serving model (planner/engines/calibration.py reads this file).
# GENERATED on {date} by
#   {command}
# from silicon_measured.csv (github:ai-dynamo/aiconfigurator
# aic-core/src/aiconfigurator_core/systems/silicon_sample.csv @095f58a5) and
# silicon_measured_b200.csv (B200 rows of the same source), duplicates dropped.
# Do not edit by hand: rerun that command after a change to the serving model or the data (a test
# checks that it reproduces this file; each write appends to lab/notes/engines_fit_log.md).
# Fitted constants carry their unit and bounds (the fit searches inside them; loading checks
# them); engine defaults (max_*, kv_held_osl_fraction) come from each engine's documentation.
"""
DATE_LINE = re.compile(r"^# GENERATED on (\d{4}-\d{2}-\d{2}) by$", re.MULTILINE)


def _yaml_value(v: float) -> str:
    """A float YAML 1.1 reads as a float (PyYAML wants a dot in the mantissa: 3.0e-05)."""
    if v == int(v):
        return f"{float(v):.1f}"
    return f"{v:.1e}" if abs(v) < 1e-3 else repr(float(v))


def _default_line(name: str, d: Sourced) -> str:
    """An engine default copied from the loaded file: integers for the max_* settings."""
    value = str(int(d.value)) if name.startswith("max_") else _yaml_value(d.value)
    bounds = (
        f"bounds: [{_yaml_value(d.bounds[0])}, {_yaml_value(d.bounds[1])}], " if d.bounds else ""
    )
    src = d.source.replace('"', "'")
    return f'  {name}: {{value: {value}, {bounds}source: "{src}"}}'


def render(values: Values, engines: Mapping[str, EngineCalibration], date: str) -> str:
    """engines.yaml text for fitted ``values`` written on ``date`` (YYYY-MM-DD); engine defaults
    (``ENGINE_DEFAULTS``) copied from ``engines``."""
    lines = [HEADER.format(command=FIT_COMMAND, date=date).rstrip("\n")]
    for b in sorted(engines):
        lines.append(f"{b}:")
        for c in CONSTANTS:
            v = values.get(b, {}).get(c.name, c.start)
            lo, hi = c.bounds
            src = _source(c, b, date).replace('"', "'")
            lines.append(
                f'  {c.name}: {{value: {_yaml_value(v)}, unit: "{c.unit}", '
                f'bounds: [{_yaml_value(lo)}, {_yaml_value(hi)}], source: "{src}"}}'
            )
        lines.extend(_default_line(n, getattr(engines[b], n)) for n in ENGINE_DEFAULTS)
    return "\n".join(lines) + "\n"


def _current(path: Path | None) -> str | None:
    """Text of the engines file ``path`` (None: the packaged constants files), None if absent."""
    if path is None:
        return packaged_text(sorted(BUILTIN))
    return path.read_text() if path.is_file() else None


def written_date(path: Path | None) -> str | None:
    """The date in the header of an engines file that ``render`` wrote (None: the packaged
    constants files), else None."""
    text = _current(path)
    m = DATE_LINE.search(text) if text is not None else None
    return m.group(1) if m else None


def fit_log_entry(old: Values, new: Values, data: Path | list[Path], date: str) -> str:
    """One entry of the fit log: when, the command, the data (sha256) and each changed value."""
    files = [data] if isinstance(data, Path) else data
    digests = ", ".join(
        f"{f.name} (sha256 {hashlib.sha256(f.read_bytes()).hexdigest()[:16]}...)" for f in files
    )
    changed = [
        f"- {b}.{name}: {old.get(b, {}).get(name, float('nan')):g} -> {v:g}"
        for b in sorted(new)
        for name, v in new[b].items()
        if old.get(b, {}).get(name) != v
    ]
    return (
        f"\n## {date}: `{FIT_COMMAND_SHORT} {' '.join(f'--data {f.name}' for f in files)}`\n\n"
        f"Data: {digests}.\n" + ("\n".join(changed) if changed else "No value changed.") + "\n"
    )


def fit_file(data: Path | list[Path], progress: bool = True) -> Values:
    """``fit_constants`` on the rows of ``data`` (one file or several: each prepared, then
    concatenated; duplicates dropped, also across files; unmodellable rows skipped)."""
    files = [data] if isinstance(data, Path) else data
    frames = [prepare_frame(read_measurements(f)) for f in files]
    df, _ = drop_duplicates(pd.concat(frames, ignore_index=True, sort=False))
    return fit_constants(prepare(df).rows, progress)


def _old_values(out: Path | None) -> Values:
    """The fitted values in ``out`` before it is rewritten (none when absent or not an engines
    file; None: the packaged constants), for the fit log."""
    if out is None:
        return fitted_values(load_engines())
    try:
        return fitted_values(load_file(out)) if out.is_file() else {}
    except (ValueError, TypeError, AttributeError, yaml.YAMLError):
        return {}


def fit_log_path(out: Path | None) -> Path:
    """The fit log of an engines file: ``FIT_LOG`` for the packaged constants (None), else next
    to it (``engines.yaml`` -> ``engines_fit_log.md``)."""
    return FIT_LOG if out is None else out.with_name(f"{out.stem}_fit_log.md")


def _append_log(out: Path | None, entry: str) -> None:
    """Append ``entry`` to the fit log of ``out`` (created with a title; never through a link)."""
    log = fit_log_path(out)
    if log.is_symlink():
        raise PlannerInputError("--out", f"{log} is a symbolic link; refusing to follow it")
    name = out.name if out is not None else "engines.yaml"
    head = log.read_text() if log.is_file() else f"# Fit log of {name}\n"
    write_new_file(log, (head + entry).encode(), force=True)


def _write(out: Path | None, text: str, force: bool) -> None:
    if out is None:  # the packaged files: each built-in engine's block into its own file
        for name, part in split_text(text).items():
            write_new_file(get_engine(name).file(CONSTANTS_FILE), part.encode(), force=True)
        return
    if out.is_symlink():
        raise PlannerInputError("--out", f"{out} is a symbolic link; refusing to follow it")
    if out.exists() and not force:
        raise PlannerInputError("--out", f"{out} exists; pass --force to overwrite it")
    write_new_file(out, text.encode(), force=True)  # temporary file + rename, no link followed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m lab.fit_engines", description=__doc__.splitlines()[0]
    )
    ap.add_argument(
        "--data",
        type=Path,
        action="append",
        default=None,
        help="CSV in the layout of silicon_measured.csv; more than once to fit several files "
        f"together (default: {' and '.join(DATA_FILES)} of ../shared/validation/e2e)",
    )
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help="engines file to write (default: the packaged constants.yaml of each engine)",
    )
    ap.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if --out differs from the fit"
    )
    ap.add_argument(
        "--force",
        action="store_true",
        help="overwrite an existing --out other than the packaged file",
    )
    args = ap.parse_args(argv)
    data = args.data or DEFAULT_DATA
    try:
        values, engines = fit_file(data), load_engines()
        if args.check:  # the fit date is the file's own: only the values are checked
            text = render(values, engines, written_date(args.out) or "")
            same = _current(args.out) == text
            where = args.out or "the packaged constants"
            sys.stderr.write(f"{where}: {'reproduced' if same else 'differs from the fit'}\n")
            return 0 if same else 1
        date = datetime.datetime.now(datetime.UTC).date().isoformat()
        old = _old_values(args.out)
        _write(args.out, render(values, engines, date), args.force)
        _append_log(args.out, fit_log_entry(old, values, data, date))
    except PlannerInputError as e:
        sys.stderr.write(f"error: {e}\n")
        return 2
    where = args.out or "the packaged constants"
    sys.stderr.write(f"wrote {where} and its fit log {fit_log_path(args.out).name}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
