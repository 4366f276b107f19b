"""The ledger of looks: an eval on a confirmation benchmark is a look, merged idempotently into a
sorted ledger; a second design on the same seed is counted, and compare.md prints the count."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from burnqed.cli import main as cli_main
from burnqed.config import InputError
from burnqed.data.benchmarks import BenchmarkError, benchmark_role
from burnqed.eval.compare import run as compare_run
from burnqed.eval.ledger import (
    designs_seen,
    look_record,
    looks_from_file,
    merge,
    read_ledger,
    search_config_digest,
)
from burnqed.eval.stage import without_run_specific

TEST = {"name": "proplogic", "split": "test", "sha256": "b" * 64}


def fake_eval(label, model, *, ebm=None, seed=0, bench=TEST, solved=("a",), temperature=0.8):
    """The parts of an eval JSON a look, compare and the paired test read (with its look block
    when the benchmark is a confirmation split, as the eval stage writes it)."""
    theorems = ["a", "b", "c", "d"]
    e = {
        "kind": "burnqed eval",
        "label": label,
        "budget_factor": 1,
        "budgets": [2, 4],
        "pass_n": 1,
        "status": {"complete": True, "label": "complete 4/4", "evaluated_theorems": 4,
                   "expected_theorems": 4, "attempts_errored": 0},
        "by_budget": [{"budget": b, "rate": len(solved) / 4, "solved": len(solved)}
                      for b in (2, 4)],
        "solved_theorems": list(solved),
        "per_theorem": [{"theorem": t, "evaluated": True,
                         "budget_at_proof": 2 if t in solved else None} for t in theorems],
        "benchmark": dict(bench),
        "provenance": {
            "model": {"path": "m", "sha256": model},
            "ebm": {"path": "e", "sha256": ebm} if ebm else None,
            "seeds": {"seed": seed},
            "sampling": {"temperature": temperature, "n": 4},
            "config": {"eval": {"budgets": [2, 4]}, "search": {"max_nodes": 4}},
            "git_commit": "c0ffee",
        },
    }  # fmt: skip
    if benchmark_role(f"{bench['name']}_{bench['split']}") == "confirmation":
        e["look"] = look_record(e, looked_at="2026-01-02T03:04:05+00:00")
    return e


def write(path: Path, obj) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj), encoding="utf-8")
    return path


def test_roles_of_the_benchmark_splits():
    assert benchmark_role("proplogic_test") == "confirmation"
    assert benchmark_role("minif2f_test") == benchmark_role("proofnet_test") == "confirmation"
    assert benchmark_role("proplogic_dev") == benchmark_role("proofnet_valid") == "development"
    assert benchmark_role("minif2f_valid") == benchmark_role("proplogic_valid") == "pool"
    assert benchmark_role("proplogic_valid") == "pool"
    with pytest.raises(BenchmarkError, match="toy_test"):
        benchmark_role("toy_test")


def test_a_look_names_the_design_and_only_confirmation_evals_are_looks(tmp_path):
    e = fake_eval("iter_1", "m1", ebm="e1")
    look = e["look"]
    assert look["design"] == {"model": "m1", "value_model": "e1",
                              "search_config": search_config_digest(e)}  # fmt: skip
    assert look["seed"] == 0 and look["counts"]["solved"] == 1 and look["counts"]["budget"] == 4
    # A hotter search is another design; a development split's eval is no look.
    assert search_config_digest(fake_eval("x", "m1", temperature=1.0)) != search_config_digest(e)
    dev = fake_eval("dev", "m1", bench={**TEST, "split": "dev"})
    assert "look" not in dev and looks_from_file(write(tmp_path / "dev.json", dev)) == []
    replay = {**e, "kind": "burnqed replay"}
    del replay["look"]
    assert looks_from_file(write(tmp_path / "replay.json", replay)) == []
    # The date is clock time: a rerun's eval JSON is the same without it.
    later = {**e, "look": {**look, "looked_at": "2027-01-01T00:00:00+00:00"}}
    assert without_run_specific(later) == without_run_specific(e)


def test_ledger_add_is_idempotent_sorted_and_counts_a_second_design(tmp_path):
    ledger = tmp_path / "ledger" / "looks.jsonl"
    first = write(tmp_path / "r1/iter_1/eval.json", fake_eval("iter_1", "m1", ebm="e1"))
    assert cli_main(["ledger", "add", str(first), "--ledger", str(ledger)]) == 0
    once = ledger.read_bytes()
    assert cli_main(["ledger", "add", str(first), str(first), "--ledger", str(ledger)]) == 0
    assert ledger.read_bytes() == once and len(once.splitlines()) == 1
    # The same look again with a later date (a rerun) stays one record, the earliest.
    rerun = fake_eval("iter_1", "m1", ebm="e1")
    rerun["look"]["looked_at"] = "2026-06-01T00:00:00+00:00"
    assert cli_main(["ledger", "add", str(write(tmp_path / "rerun.json", rerun)),
                     "--ledger", str(ledger)]) == 0  # fmt: skip
    assert ledger.read_bytes() == once
    # A second design (another value model) on the same benchmark and seed is counted.
    second = write(tmp_path / "r2/iter_1/eval.json", fake_eval("iter_1", "m1", ebm="e2"))
    other_seed = write(tmp_path / "r3/eval.json", fake_eval("iter_1", "m1", ebm="e3", seed=1))
    assert cli_main(["ledger", "add", str(second), str(other_seed), "--ledger", str(ledger)]) == 0
    records = read_ledger(ledger)
    assert len(records) == 3
    assert designs_seen(records, sha256=TEST["sha256"], seed=0) == 2
    assert designs_seen(records, sha256=TEST["sha256"], seed=1) == 1
    lines = ledger.read_text().splitlines()
    assert lines == sorted(lines, key=lambda x: (json.loads(x)["seed"], json.loads(x)["looked_at"]))
    assert all(json.dumps(json.loads(x), sort_keys=True, separators=(",", ":"),
                          ensure_ascii=False) == x for x in lines)  # fmt: skip
    # Merging in any order gives the same bytes.
    assert merge(reversed(records)) == merge(records)


def test_ledger_add_refuses_bad_input_in_one_line_and_writes_nothing(tmp_path, capsys):
    ledger = tmp_path / "looks.jsonl"
    good = write(tmp_path / "a.json", fake_eval("iter_1", "m1"))
    old = fake_eval("iter_0", "m0")
    del old["look"]  # an eval from before looks were recorded
    old_path = write(tmp_path / "old.json", old)
    assert cli_main(["ledger", "add", str(good), str(old_path), "--ledger", str(ledger)]) == 2
    err = capsys.readouterr().err
    assert str(old_path) in err and "--looked-at" in err and len(err.strip().splitlines()) == 1
    assert not ledger.exists()
    # With its date given, it is recorded (the lead's record of past looks).
    assert cli_main(["ledger", "add", str(old_path), "--looked-at", "2025-05-05T00:00:00+00:00",
                     "--ledger", str(ledger)]) == 0  # fmt: skip
    assert read_ledger(ledger)[0]["label"] == "iter_0"
    ledger.write_text(ledger.read_text() + "{not json\n")
    with pytest.raises(InputError, match=r"looks.jsonl:2"):
        read_ledger(ledger)


def test_ledger_show_lists_a_windows_looks_run_by_run(tmp_path, capsys):
    """`burnqed ledger show --since --until`: the window's looks (since inclusive, until
    exclusive), one row a run (commit, seed, benchmark) with its times, looks and designs; a bad
    time is one line naming the flag."""
    ledger = tmp_path / "looks.jsonl"
    files = []
    for i, (seed, ebm, at) in enumerate([(0, "e1", "2026-01-02T03:00:00+00:00"),
                                         (0, "e2", "2026-01-02T03:30:00+00:00"),
                                         (1, "e1", "2026-01-02T04:00:00+00:00"),
                                         (1, "e3", "2026-01-03T00:00:00+00:00")]):  # fmt: skip
        e = fake_eval("iter_1", "m1", ebm=ebm, seed=seed)
        e["look"]["looked_at"] = at
        files.append(str(write(tmp_path / f"e{i}.json", e)))
    assert cli_main(["ledger", "add", *files, "--ledger", str(ledger)]) == 0
    capsys.readouterr()
    argv = ["ledger", "show", "--ledger", str(ledger), "--since", "2026-01-02T03:00:00Z"]
    assert cli_main([*argv, "--until", "2026-01-02T04:00"]) == 0  # no offset: UTC
    out = capsys.readouterr().out
    assert out.startswith("**2** looks at confirmation benchmarks in the ledger from "
                          "2026-01-02T03:00:00+00:00 to 2026-01-02T04:00:00+00:00, by 1 runs")  # fmt: skip
    assert "| 2026-01-02 03:00–03:30 | c0ffee | 0 | proplogic_test | 2 | 2 |" in out
    assert "| 1 |" not in out  # the look at 04:00 is outside: until is exclusive
    assert cli_main(argv) == 0  # open-ended: both seeds, the second run over two days
    out = capsys.readouterr().out
    assert "| 2026-01-02 04:00–2026-01-03 00:00 | c0ffee | 1 | proplogic_test | 2 | 2 |" in out
    assert cli_main([*argv, "--until", "2026-01-02T03:00:00Z"]) == 0
    assert capsys.readouterr().out.startswith("No look at a confirmation benchmark in the ledger")
    assert cli_main([*argv, "--until", "yesterday"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--until: 'yesterday' is not an ISO 8601 time" in err and len(err.splitlines()) == 1


def test_compare_md_prints_the_designs_that_looked(tmp_path):
    ledger = tmp_path / "ledger" / "looks.jsonl"
    earlier = write(tmp_path / "old/iter_1/eval.json", fake_eval("iter_1", "m1", ebm="old"))
    assert cli_main(["ledger", "add", str(earlier), "--ledger", str(ledger)]) == 0
    evals = [write(tmp_path / "run/baseline/eval.json", fake_eval("baseline", "m0")),
             write(tmp_path / "run/iter_0/eval.json", fake_eval("iter_0", "m1", solved=("a", "b"))),
             write(tmp_path / "run/iter_1/eval.json", fake_eval("iter_1", "m1", ebm="old"))]  # fmt: skip
    md = tmp_path / "compare.md"
    c = compare_run(evals=evals, out_md=md, ledger=ledger)
    # baseline (m0), iter_0 (m1), iter_1 (m1 + old EBM, also in the ledger): three designs.
    assert c["looks"] == {**c["looks"], "in_ledger": 1, "in_this_run": 3, "designs": 3}
    assert "**3** distinct designs" in md.read_text()
    assert (
        compare_run(evals=evals, out_md=md, ledger=tmp_path / "none.jsonl")["looks"]["in_ledger"]
        == 0
    )
