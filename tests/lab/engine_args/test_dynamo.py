"""``lab.engine_args.dynamo`` reads Dynamo's argument helpers from source, without importing it."""

from __future__ import annotations

from pathlib import Path

from lab.engine_args import dynamo

FRONTEND_SRC = """
from x import add_argument, add_negatable_bool_argument
MODE = "agg"

class G:
    def add_arguments(self, g):
        add_argument(g, flag_name="--http-port", env_var="P", default=8000, help="", arg_type=int)
        add_argument(g, flag_name="--router-mode", env_var="R", default="rr", help="",
                     choices=["round-robin", "random"])
        add_negatable_bool_argument(g, flag_name="--serve-indexer", env_var="S", default=None,
                                    help="")
        add_argument(g, flag_name="--mode", env_var="M", default=MODE, help="",
                     choices=[MODE, *[m.value for m in Modes if m != Modes.AGG]])
"""
MODES_SRC = """
from enum import Enum

class Modes(Enum):
    AGG = "prefill_and_decode"
    PREFILL = "prefill"
    DECODE = "decode"
"""


def test_helper_calls_become_argument_records(tmp_path: Path) -> None:
    (tmp_path / "dynamo" / "trtllm").mkdir(parents=True)
    (tmp_path / "dynamo" / "f.py").write_text(FRONTEND_SRC)
    (tmp_path / dynamo.MODES).write_text(MODES_SRC)
    args = {a["flags"][0]: a for a in dynamo.read_args(tmp_path, ("dynamo/f.py",))}  # type: ignore[index]
    assert args["--http-port"] == {"flags": ["--http-port"], "takes_value": True, "type": "int"}
    assert args["--router-mode"]["choices"] == ["round-robin", "random"]
    assert args["--serve-indexer"]["takes_value"] is False and "--no-serve-indexer" in args
    assert args["--mode"]["choices"] == ["agg", "prefill", "decode"]


def test_the_shipped_lists_name_the_flags_the_emitter_writes() -> None:
    import planner.emitters.engine_args as ea

    router = {f for a in ea.load("trtllm")["tools"]["router"]["arguments"] for f in a["flags"]}
    worker = {f for a in ea.load("trtllm")["tools"]["worker"]["arguments"] for f in a["flags"]}
    assert {"--http-host", "--http-port", "--router-mode", "--discovery-backend"} <= router
    assert {"--model", "--extra-engine-args", "--disaggregation-mode"} <= worker
