"""``burnqed train base|sft|merge``: config plumbing, SPEC-layout defaults, clean input errors."""

from __future__ import annotations

import argparse
import json
import logging
import re
from pathlib import Path

import pytest
import yaml

from burnqed.train.command import add_parser
from tests.train.conftest import SFT


@pytest.fixture()
def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="burnqed")
    add_parser(p.add_subparsers(dest="command", required=True))
    return p


def write_params(tmp_path: Path, repo_root: Path, **sections) -> Path:
    params = yaml.safe_load((repo_root / "params.yaml").read_text(encoding="utf-8"))
    for name, value in sections.items():  # override keys within a section, or a top-level value
        params[name] = {**params[name], **value} if isinstance(value, dict) else value
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params, allow_unicode=True), encoding="utf-8")
    return path


def test_defaults_follow_the_artifact_layout(parser):
    args = parser.parse_args(["train", "base"])
    assert args.out == Path("models/base") and args.pairs == Path("data/tactic_pairs/train.parquet")
    assert args.val == Path("data/tactic_pairs/val.parquet")
    assert parser.parse_args(["train", "base", "--no-val"]).val is None
    args = parser.parse_args(
        ["train", "--configfile", "config/demo.yaml", "sft", "--iteration", "2"]
    )
    assert args.configfile == ["config/demo.yaml"] and args.iteration == 2
    assert args.train == Path("data/tactic_pairs/train.parquet")
    with pytest.raises(SystemExit):
        parser.parse_args(["train"])  # a subcommand is required


def test_sft_and_merge_from_the_command_line(
    parser, tmp_path, repo_root, tiny_base, pairs, caplog, monkeypatch
):
    monkeypatch.setenv("BURNQED_PROGRESS_INTERVAL_S", "0")  # a progress line every step
    caplog.set_level(logging.INFO, logger="burnqed.train.sft")
    params = write_params(tmp_path, repo_root, sft=SFT, seed=7)
    adapter = tmp_path / "adapter"
    args = parser.parse_args(["train", "--params", str(params), "sft", "--base", str(tiny_base),
                              "--train", str(pairs["train"]), "--val", str(pairs["val"]),
                              "--out", str(adapter)])  # fmt: skip
    assert args.func(args) == 0
    hp = json.loads((adapter / "hyperparameters.json").read_text(encoding="utf-8"))
    assert hp["seed"] == 7 and hp["sft"]["lora_r"] == SFT["lora_r"]
    # The trainer's steps reach the log as progress lines with a rate and an ETA.
    progress = [
        r.getMessage() for r in caplog.records if r.getMessage().startswith("progress sft:")
    ]
    last = f"{SFT['max_steps']}/{SFT['max_steps']} steps (100.0%)"
    assert len(progress) >= SFT["max_steps"] and last in progress[-1]
    assert all(re.search(r", [\d.e+-]+/s, ETA \S+", line) for line in progress)

    merged = tmp_path / "merged"
    args = parser.parse_args(["train", "merge", "--base", str(tiny_base), "--adapter", str(adapter),
                              "--out", str(merged)])  # fmt: skip
    assert args.func(args) == 0
    assert (merged / "burnqed_merge.json").exists()


def test_base_from_the_command_line_copies_a_local_model(parser, tmp_path, repo_root, tiny_base):
    params = write_params(tmp_path, repo_root, model={"base": str(tiny_base)})
    out = tmp_path / "base"
    args = parser.parse_args(["train", "--params", str(params), "base", "--out", str(out)])
    assert args.func(args) == 0
    assert (out / "config.json").exists()


def test_a_missing_input_is_one_line_and_exit_2(parser, tmp_path, tiny_base, capsys):
    args = parser.parse_args(["train", "merge", "--base", str(tiny_base),
                              "--adapter", str(tmp_path / "nope"), "--out", str(tmp_path / "m")])  # fmt: skip
    assert args.func(args) == 2
    err = capsys.readouterr().err
    assert "burnqed train merge:" in err and "nope" in err and "no adapter_config.json" in err
    assert not (tmp_path / "m").exists()
