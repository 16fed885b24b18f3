"""Speculative-decoding flags: priced in ``estimate`` (TPOT falls at low load), refused at the
input boundary with exit 2 naming the flag."""

from __future__ import annotations

import json

import pytest

from planner.cli.main import main

LOW_LOAD = (
    "estimate",
    "--model",
    "qwen3.5-397b-a17b-nvfp4",
    "--gpu",
    "b200",
    "--tp",
    "2",
    "--isl",
    "8192",
    "--osl",
    "1024",
    "--concurrency",
    "4",
    "--format",
    "json",
)


def _tpot(capsys: pytest.CaptureFixture[str], *extra: str) -> float:
    assert main([*LOW_LOAD, *extra]) == 0
    return float(json.loads(capsys.readouterr().out)["tpot_ms"]["mean"])


def test_mtp_lowers_tpot_at_low_load(capsys: pytest.CaptureFixture[str]) -> None:
    plain = _tpot(capsys)
    mtp = _tpot(capsys, "--spec-method", "mtp", "--spec-draft-len", "3")
    # E = 2.5 tokens per step at 0.691: the verify step and 3 head steps cost far less than that
    assert mtp < 0.8 * plain


def test_higher_acceptance_lowers_tpot(capsys: pytest.CaptureFixture[str]) -> None:
    lo = _tpot(capsys, "--spec-method", "mtp", "--spec-draft-len", "3", "--spec-acceptance", "0.5")
    hi = _tpot(capsys, "--spec-method", "mtp", "--spec-draft-len", "3", "--spec-acceptance", "0.9")
    per_pos = _tpot(
        capsys, "--spec-method", "mtp", "--spec-draft-len", "3", "--spec-acceptance", "0.9,0.5,0.5"
    )
    assert hi < per_pos < lo


@pytest.mark.parametrize(
    ("extra", "flag"),
    [
        (("--spec-method", "mtp", "--spec-acceptance", "1.5"), "--spec-acceptance"),
        (("--spec-method", "mtp", "--spec-acceptance", "a,b"), "--spec-acceptance"),
        (("--spec-method", "mtp", "--spec-draft-len", "0"), "--spec-draft-len"),
        (("--spec-draft-len", "2"), "--spec-method"),
        (("--spec-method", "draft"), "--spec-draft-model"),
        (("--spec-method", "draft", "--spec-draft-model", "nope"), "--spec-draft-model"),
        # Llama 3.1 8B's vocabulary (128,256) is not Qwen3.5's: a draft must share the tokenizer
        (("--spec-method", "draft", "--spec-draft-model", "llama-3.1-8b"), "--spec-draft-model"),
        (("--spec-method", "mtp", "--spec-draft-model", "llama-3.1-8b"), "--spec-draft-model"),
    ],
)
def test_bad_spec_input_exits_2_naming_the_flag(
    capsys: pytest.CaptureFixture[str], extra: tuple[str, ...], flag: str
) -> None:
    assert main([*LOW_LOAD, *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert flag in err and "Traceback" not in err and len(err.splitlines()) == 1


def test_mtp_on_a_model_without_mtp_layers_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["estimate", "--model", "llama-3.1-8b", "--gpu", "h100", "--concurrency", "1"]
    assert main([*argv, "--spec-method", "mtp"]) == 2
    err = capsys.readouterr().err
    assert "--spec-method" in err and "MTP" in err


def test_simulate_refuses_what_it_does_not_replay(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["simulate", "--model", "llama-3.1-8b", "--gpu", "h100", "--concurrency", "2"]
    assert main([*argv, "--spec-method", "eagle3"]) == 2
    assert "--spec-method" in capsys.readouterr().err
