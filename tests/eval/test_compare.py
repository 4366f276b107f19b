"""compare: three synthetic evals render the expected table, deltas and newly solved (golden)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from burnqed.cli import main as cli_main
from burnqed.eval.compare import CompareError, load_evals

BENCH = {"name": "toy", "split": "test", "sha256": "abcdef0123456789"}


def synthetic_eval(label: str, solved: dict[int, list[str]], evaluated: int, expected: int = 10):
    """The parts of an eval JSON that compare reads; ``solved`` maps budget → theorems."""
    budgets = sorted(solved)
    return {
        "kind": "burnqed eval",
        "label": label,
        "status": {
            "complete": evaluated == expected,
            "label": f"{'complete' if evaluated == expected else 'partial'} {evaluated}/{expected}",
            "evaluated_theorems": evaluated,
            "expected_theorems": expected,
            "attempts_errored": 0,
        },
        "budgets": budgets,
        "pass_n": 1,
        "by_budget": [
            {
                "budget": b,
                "solved": len(solved[b]),
                "theorems": evaluated,
                "rate": len(solved[b]) / evaluated,
                "ci95": [0.0, 1.0],
            }
            for b in budgets
        ],
        "solved_theorems": sorted(solved[budgets[-1]]),
        "benchmark": dict(BENCH),
    }


GOLDEN = """\
# Solve rate by iteration — toy_test (sha256 abcdef012345), pass@1

> **Not all evals are complete**: iter_1 partial 8/10.

| iteration | status | 100 nodes | 300 nodes | cumulative | newly solved |
|---|---|---|---|---|---|
| baseline | complete 10/10 | 10.0% (1/10) | 20.0% (2/10) | 20.0% (2) | – |
| iter_0 | complete 10/10 | 20.0% (2/10) | 30.0% (3/10) | 40.0% (4) | 2 |
| iter_1 (partial 8/10) | partial 8/10 | 37.5% (3/8) | 50.0% (4/8) | 50.0% (5) | 1 |
| Δ iter_1 − iter_0 |  | +17.5 pts | +20.0 pts | +10.0 pts |  |

## Does the loop learn? (solve rate at each row's largest budget)

- ✓ baseline 20.0% → iter_0 30.0%
- ✓ iter_0 30.0% → iter_1 50.0%
- (not every eval is complete: the check is not final)

## Newly solved theorems

- **iter_0** (2): c, d
- **iter_1** (1): e
"""


@pytest.fixture()
def three(tmp_path) -> list[Path]:
    evals = {
        "baseline": synthetic_eval("baseline", {100: ["a"], 300: ["a", "b"]}, 10),
        "iter_0": synthetic_eval("iter_0", {100: ["a", "c"], 300: ["a", "c", "d"]}, 10),
        "iter_1": synthetic_eval("iter_1", {100: ["a", "c", "e"], 300: ["a", "c", "d", "e"]}, 8),
    }
    paths = []
    for label in ("iter_1", "baseline", "iter_0"):  # not in iteration order: compare sorts them
        p = tmp_path / label / "eval.json"
        p.parent.mkdir()
        p.write_text(json.dumps(evals[label]))
        paths.append(p)
    return paths


def test_compare_of_three_results_renders_the_golden_table(three, tmp_path, capsys):
    md, js = tmp_path / "compare.md", tmp_path / "compare.json"
    assert cli_main(["compare", *map(str, three), "--out", str(md), "--json", str(js)]) == 0
    assert md.read_text(encoding="utf-8") == GOLDEN
    assert GOLDEN in capsys.readouterr().out
    c = json.loads(js.read_text())
    assert [r["label"] for r in c["rows"]] == ["baseline", "iter_0", "iter_1"]
    assert c["delta"]["from"] == "iter_0" and c["delta"]["to"] == "iter_1"
    assert c["delta"]["rates"] == {"100": pytest.approx(0.175), "300": pytest.approx(0.2)}
    assert c["delta"]["cumulative_rate"] == pytest.approx(0.1)
    assert [r["newly_solved"] for r in c["rows"]] == [None, ["c", "d"], ["e"]]
    assert [r["no_longer_solved"] for r in c["rows"]] == [None, ["b"], []]
    assert [r["status"] for r in c["rows"]][-1] == "partial 8/10" and not c["all_complete"]


def test_evals_of_different_benchmark_files_are_not_compared(three):
    other = json.loads(three[1].read_text())
    other["benchmark"]["sha256"] = "ffff"
    three[1].write_text(json.dumps(other))
    with pytest.raises(CompareError, match="differ in benchmark sha256"):
        load_evals(three)


def test_cli_compare_names_a_file_that_is_not_an_eval(tmp_path, capsys):
    bad = tmp_path / "x.json"
    bad.write_text("{}")
    assert cli_main(["compare", str(bad)]) == 2
    assert str(bad) in capsys.readouterr().err


def test_a_search_longer_control_is_shown_apart_and_checked_against_the_last_iteration(tmp_path):
    from burnqed.eval.compare import run

    evals = {
        "baseline": synthetic_eval("baseline", {100: ["a"], 300: ["a", "b"]}, 10),
        "iter_0": synthetic_eval("iter_0", {100: ["a", "c"], 300: ["a", "c", "d"]}, 10),
        "iter_1": synthetic_eval("iter_1", {100: ["a", "c", "e"], 300: ["a", "c", "d", "e"]}, 10),
    }
    paths = []
    for label, e in evals.items():
        (tmp_path / label).mkdir()
        paths.append(tmp_path / label / "eval.json")
        paths[-1].write_text(json.dumps(e))
    control = tmp_path / "iter_0" / "eval_longer.json"
    longer = {200: ["a", "c"], 600: ["a", "c", "d", "f"]}  # iter_0 given twice the nodes
    control.write_text(json.dumps(synthetic_eval("iter_0 search ×2", longer, 10)))
    c = run(evals=paths, controls=[control], out_md=tmp_path / "c.md")
    assert [r["label"] for r in c["rows"]] == ["baseline", "iter_0", "iter_1"]  # not a row
    assert c["delta"]["from"] == "iter_0" and c["budgets"] == [100, 200, 300, 600]
    lc = c["learning"]
    assert lc["rises_every_iteration"] and lc["complete"]
    assert lc["controls"] == [{"control": "iter_0 search ×2", "control_rate": 0.4,
                               "last": "iter_1", "last_rate": 0.4, "beats": False}]  # fmt: skip
    assert not lc["beats_controls"]  # a tie is not a win
    md = (tmp_path / "c.md").read_text()
    assert "## Search-longer controls" in md and "| iter_0 search ×2 | complete 10/10 | – |" in md
    assert "✗ iter_1 40.0% vs control iter_0 search ×2 40.0%" in md
