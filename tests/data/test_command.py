"""``burnqed data`` on the command line: documented options, fetch and its refusal, a run."""

from __future__ import annotations

import argparse
import json

import pytest
import yaml

from burnqed.data import command
from burnqed.data.benchmarks import sha256_file

PINNED = "d6654c88476ff14db19d57dea25bd955a240525fb52171e460f89d98f83d7dd5"


def data_cli(argv: list[str]) -> int:
    """Parse as `burnqed <argv>` with the data command registered, and run it."""
    parser = argparse.ArgumentParser(prog="burnqed")
    command.add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def help_text(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exit_:
        data_cli([*argv, "--help"])
    assert exit_.value.code == 0
    return capsys.readouterr().out


def test_help_documents_the_options(capsys):
    text = help_text(["data"], capsys)
    for option in (
        "--params",
        "--configfile",
        "--data-dir",
        "fetch",
        "benchmarks",
        "pairs",
        "pool",
    ):
        assert option in text
    assert "before the subcommand" in text
    fetch = help_text(["data", "fetch"], capsys)
    for option in ("NAME", "--from PATH", "--dest PATH", "sha256"):
        assert option in fetch
    for sub in ("benchmarks", "pairs", "pool"):
        assert "usage: burnqed data " + sub in help_text(["data", sub], capsys)


def test_fetch_from_a_local_file_and_refusal(minif2f_path, tmp_path, capsys):
    assert (
        data_cli(
            ["data", "--data-dir", str(tmp_path), "fetch", "minif2f", "--from", str(minif2f_path)]
        )
        == 0
    )
    dest = tmp_path / "raw" / "benchmarks" / "minif2f.jsonl"
    assert sha256_file(dest) == PINNED
    assert capsys.readouterr().out.strip() == str(dest)

    tampered = tmp_path / "tampered.jsonl"
    tampered.write_bytes(minif2f_path.read_bytes() + b"\n")
    other = tmp_path / "other.jsonl"
    assert (
        data_cli(["data", "fetch", "minif2f", "--from", str(tampered), "--dest", str(other)]) == 2
    )
    err = capsys.readouterr().err
    assert PINNED in err and sha256_file(tampered) in err and "tampered.jsonl" in err
    assert not other.exists()


def test_whole_stage_from_the_cli(repo_root, minif2f_path, tmp_path, workbook_records):
    wb = tmp_path / "wb.json"
    wb.write_text(json.dumps(workbook_records, ensure_ascii=False), encoding="utf-8")
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(
        yaml.safe_dump(
            {
                "data": {
                    "sources": [{"name": "workbook", "format": "lean_workbook", "path": str(wb)}],
                    "benchmarks": ["minif2f"],
                    "tokenizer": "bytes",
                    "val_fraction": 0.5,
                    "search_pool": [{"benchmark": "minif2f", "split": "valid"}],
                    # miniF2F alone here (params.yaml also holds out ProofNet valid, the real
                    # runs' development benchmark)
                    "decontaminate_against": ["minif2f_test"],
                }
            }
        )
    )
    d = tmp_path / "data"
    assert (
        data_cli(["data", "--data-dir", str(d), "fetch", "minif2f", "--from", str(minif2f_path)])
        == 0
    )
    argv = [
        "data",
        "--params",
        str(repo_root / "params.yaml"),
        "--configfile",
        str(overlay),
        "--data-dir",
        str(d),
    ]
    assert data_cli(argv) == 0
    assert sum(1 for _ in (d / "benchmarks" / "minif2f_test.jsonl").open()) == 244
    assert sum(1 for _ in (d / "theorems" / "search_pool.jsonl").open()) == 244
    report = json.loads((d / "tactic_pairs" / "filter_report.json").read_text())
    assert report["source_rows"] == {"workbook": 1}
    # Decontaminated against minif2f_test: the valid split states none of it.
    check = report["decontamination"]
    assert list(check["benchmarks"]) == [str(d / "benchmarks" / "minif2f_test.jsonl")]
    assert check["benchmark_statements"] == 244 and check["mode"] == "refuse"
    pool = json.loads((d / "theorems" / "search_pool.report.json").read_text())
    assert pool["decontamination"]["theorems_checked"] == 244
