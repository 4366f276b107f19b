"""Fail fast, one line: ``burnqed search`` checks its inputs before any model loads or server starts,
and each bad input is one line on stderr naming the file/key/line, exit status 2 (subprocesses)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from safetensors.numpy import save_file

from burnqed.theorems import Theorem, write_theorems

REPO = Path(__file__).resolve().parents[2]
GOOD = Theorem(name="t0", formal_statement="theorem t0 (p : Prop) : p → p := by\n")


def model_dir(path: Path) -> Path:
    """A model directory that passes the checks (it would still take a real load to use)."""
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 8}))
    (path / "tokenizer.json").write_text("{}")
    save_file({"w": np.zeros((64, 64), dtype=np.float32)}, str(path / "model.safetensors"))
    return path


# `python -m burnqed.cli`, noting at exit whether torch was imported (a refusal must come before).
_CLI_NOTING_TORCH = (
    "import atexit, runpy, sys\n"
    "atexit.register(lambda: open('torch_imported', 'w').write(str('torch' in sys.modules)))\n"
    "runpy.run_module('burnqed.cli', run_name='__main__', alter_sys=True)\n"
)


def burnqed_search(tmp_path: Path, *args: str, repl=None, debug=False) -> tuple[int, str, bool]:
    """The search command's exit status, its standard error, and whether it imported torch."""
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(
        yaml.safe_dump(
            {
                "lean": {
                    "repl_command": repl or [sys.executable, "-m", "burnqed.proplogic"],
                    "imports": [],
                    "workers": 1,
                },
                # In-process: a valid model path would import torch and load the weights.
                "policy": {"backend": "transformers"},
            }
        )
    )
    argv = [sys.executable, "-c", _CLI_NOTING_TORCH, *(["--debug"] if debug else []), "search"]
    argv += ["--params", str(REPO / "params.yaml"), "--configfile", str(overlay), *args]
    proc = subprocess.run(
        argv,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    torch = (tmp_path / "torch_imported").read_text()
    return proc.returncode, proc.stderr, {"True": True, "False": False}[torch]


def theorem_file(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "theorems.jsonl"
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def record(name: str, statement: str) -> str:
    return json.dumps({"name": name, "formal_statement": statement}, ensure_ascii=False)


def assert_one_line(rc: int, err: str, *needles: str) -> None:
    assert rc == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    for needle in needles:
        assert needle in lines[0], lines[0]


def _typo_file(tmp_path: Path) -> Path:
    lines = [record("t0", GOOD.formal_statement), record("t1", "theorem t1 : True := by\n")]
    lines.append(lines[1][:-3] + "\n")  # a JSON typo on line 3
    return theorem_file(tmp_path, lines)


def test_a_typo_in_the_theorem_file_fails_in_under_2_s_without_loading_the_model(
    tmp_path, monkeypatch, capsys
):
    from burnqed.cli import main as cli_main

    loads = []
    # The model directory is valid: had the search got that far, it would load it (recorded).
    monkeypatch.setattr("burnqed.policy.backend.open_generator", lambda *a, **k: loads.append(a))
    model, path = model_dir(tmp_path / "model"), _typo_file(tmp_path)
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(yaml.safe_dump({"policy": {"backend": "transformers"}}))
    argv = ["search", "--params", str(REPO / "params.yaml"), "--configfile", str(overlay)]
    argv += ["--theorems", str(path), "--model", str(model), "--out", str(tmp_path / "out")]
    t0 = time.perf_counter()
    rc = cli_main(argv)
    elapsed = time.perf_counter() - t0
    assert rc == 2 and f"{path}:3" in capsys.readouterr().err
    assert elapsed < 2.0, elapsed
    assert loads == [] and not (tmp_path / "out").exists()


def test_a_typo_in_the_theorem_file_is_one_line_exit_2_from_the_command(tmp_path):
    model, path = model_dir(tmp_path / "model"), _typo_file(tmp_path)
    rc, err, torch_imported = burnqed_search(
        tmp_path, "--theorems", str(path), "--model", str(model), "--out", "out"
    )
    assert_one_line(rc, err, f"{path}:3", "not JSON")
    assert not torch_imported  # refused before any model could load
    assert "loaded" not in err and not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("lines", "needles"),
    [
        ([record("t0", "theorm t0 (p : Prop) : p → p := by\n")], [":1:", "theorem <name>"]),
        ([record("t0", "theorem t0 (p : Prop) : p → p\n")], [":1:", "theorem <name>"]),
        (  # a repeated name is qualified into distinct keys (ProofNet); a repeated key is not
            [
                json.dumps(
                    {"name": "a", "key": "k", "formal_statement": "theorem a : True := by\n"}
                ),
                "",
                json.dumps(
                    {"name": "b", "key": "k", "formal_statement": "theorem b : True := by\n"}
                ),
            ],
            [":3:", "duplicate theorem key 'k' (also at line 1)"],
        ),
        ([json.dumps({"name": "t0"})], [":1:", "formal_statement"]),
    ],
    ids=["keyword-typo", "no-:=", "duplicate-key", "missing-key"],
)
def test_each_bad_theorem_file_is_one_line_naming_the_line(tmp_path, lines, needles):
    path = theorem_file(tmp_path, lines)
    rc, err, _ = burnqed_search(
        tmp_path, "--theorems", str(path), "--model", "models/nope", "--out", "out"
    )
    assert_one_line(rc, err, str(path), *needles)


def test_missing_theorem_file_output_clash_and_broken_repl_are_one_line(tmp_path):
    path = theorem_file(tmp_path, [record("t0", GOOD.formal_statement)])
    common = ["--model", "models/nope"]
    rc, err, _ = burnqed_search(tmp_path, "--theorems", "nope.jsonl", *common, "--out", "out")
    assert_one_line(rc, err, "nope.jsonl", "no such theorem file")
    (tmp_path / "taken").write_text("a file")
    rc, err, _ = burnqed_search(tmp_path, "--theorems", str(path), *common, "--out", "taken")
    assert_one_line(rc, err, "taken", "not a directory")
    (tmp_path / "out" / "summary").mkdir(parents=True)
    (tmp_path / "out" / "summary" / "part-000000.parquet").write_bytes(b"x")
    rc, err, _ = burnqed_search(tmp_path, "--theorems", str(path), *common, "--out", "out")
    assert_one_line(rc, err, "out", "--resume")
    rc, err, _ = burnqed_search(
        tmp_path, "--theorems", str(path), *common, "--out", "o2", repl=["/no/such/repl"]
    )
    assert_one_line(rc, err, "lean.repl_command", "/no/such/repl")
    rc, err, _ = burnqed_search(
        tmp_path, "--theorems", str(path), *common, "--out", "o3", repl=["false"]
    )
    assert_one_line(rc, err, "lean.repl_command", "exited with 1")


def _bad_config(d: Path) -> Path:
    (d / "config.json").write_text("{not json")
    return d / "config.json"


def _truncated_weights(d: Path) -> Path:
    data = (d / "model.safetensors").read_bytes()
    (d / "model.safetensors").write_bytes(data[: len(data) // 2])
    return d / "model.safetensors"


def _no_tokenizer(d: Path) -> Path:
    (d / "tokenizer.json").unlink()
    return d


@pytest.mark.parametrize(
    ("breakage", "words"),
    [
        (_bad_config, "not valid JSON"),
        (_truncated_weights, "truncated safetensors"),
        (_no_tokenizer, "no tokenizer"),
        (lambda d: d / "absent", "no such model directory"),
    ],
    ids=["bad-config.json", "truncated-safetensors", "missing-tokenizer", "absent"],
)
def test_a_broken_model_directory_is_one_line_naming_the_file(tmp_path, breakage, words):
    path = theorem_file(tmp_path, [record("t0", GOOD.formal_statement)])
    named = breakage(model_dir(tmp_path / "model"))
    model = str(named if named.name == "absent" else tmp_path / "model")
    rc, err, torch_imported = burnqed_search(
        tmp_path, "--theorems", str(path), "--model", model, "--out", "out"
    )
    assert_one_line(rc, err, str(named), words)
    assert not torch_imported  # refused before any load


def test_debug_shows_the_traceback(tmp_path):
    path = theorem_file(tmp_path, [record("t0", "theorm t0 : True := by\n")])
    rc, err, _ = burnqed_search(
        tmp_path, "--theorems", str(path), "--model", "m", "--out", "out", debug=True
    )
    assert rc != 0 and "Traceback" in err and "InputError" in err


def test_theorem_file_checks_are_in_process_too(tmp_path):
    from burnqed.search.stage import read_theorem_file

    path = tmp_path / "t.jsonl"
    write_theorems(path, [GOOD, Theorem(name="t1", formal_statement="lemma t1 : True :=\n")])
    assert [t.name for t in read_theorem_file(path)] == ["t0", "t1"]


def test_a_random_order_search_with_a_value_model_is_one_line(tmp_path):
    """A random frontier order (the noise search's) pops no value model's choice: asking for
    both is an error before anything loads."""
    path = theorem_file(tmp_path, [record("t0", GOOD.formal_statement)])
    (tmp_path / "ebm").mkdir()
    rc, err, _ = burnqed_search(tmp_path, "--theorems", str(path), "--model", "models/nope",
                                "--out", "out", "--order", "random", "--ebm", "ebm")  # fmt: skip
    assert_one_line(rc, err, "ebm", "random-order")
    assert not (tmp_path / "out").exists()


def test_the_seed_salt_reaches_the_search_stage(tmp_path, monkeypatch):
    """``burnqed search --seed-salt`` repeats a rule's salted search by hand (the noise search's
    salt here); without it the search draws from the seed itself, as the evals do."""
    from burnqed.cli import main as cli_main

    calls = []
    monkeypatch.setattr("burnqed.search.stage.run", lambda **kw: calls.append(kw))
    path = theorem_file(tmp_path, [record("t0", GOOD.formal_statement)])
    argv = ["search", "--params", str(REPO / "params.yaml"), "--theorems", str(path),
            "--model", "m", "--out", str(tmp_path / "out"), "--seed", "7"]  # fmt: skip
    assert cli_main([*argv, "--seed-salt", "search_noise/iter_0"]) == 0
    assert cli_main(argv) == 0
    assert [(c["seed"], c["seed_salt"]) for c in calls] == [(7, "search_noise/iter_0"), (7, None)]
