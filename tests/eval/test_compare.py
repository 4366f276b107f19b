"""compare: three synthetic evals render the expected table, deltas and newly solved (golden); the
learning check judges each step and control by the paired test, is undecided without controls or
across temperatures, fails on partial rows, and cannot be passed by a coin toss."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from burnqed.cli import main as cli_main
from burnqed.eval.compare import CompareError, compare, compare_markdown, load_evals, run

BENCH = {"name": "toy", "split": "test", "sha256": "abcdef0123456789"}


def synthetic_eval(
    label: str,
    solved: dict[int, list[str]],
    evaluated: int,
    expected: int = 10,
    *,
    theorems: list[str] | None = None,
    temperature: float | None = 0.8,
):
    """The parts of an eval JSON that compare reads; ``solved`` maps budget → theorems (nested).

    The benchmark's theorems are ``theorems`` (default "a", "b", … one per expected theorem); the
    first ``evaluated`` of them were evaluated.
    """
    budgets = sorted(solved)
    names = theorems or [chr(ord("a") + i) for i in range(expected)]
    done = set(names[:evaluated])
    assert set(solved[budgets[-1]]) <= done, "only evaluated theorems can be solved"
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
        "per_theorem": [
            {
                "theorem": t,
                "evaluated": t in done,
                "budget_at_proof": min((b for b in budgets if t in solved[b]), default=None),
            }
            for t in names
        ],
        "solved_theorems": sorted(solved[budgets[-1]]),
        "benchmark": dict(BENCH),
        "provenance": {"sampling": {"temperature": temperature}},
    }


GOLDEN = """\
# Solve rate by iteration — toy_test (sha256 abcdef012345), pass@1

> **Not all evals are complete**: iter_1 partial 8/10.

| iteration | status | T | 100 nodes | 300 nodes | cumulative | newly solved |
|---|---|---|---|---|---|---|
| baseline | complete 10/10 | 0.8 | 10.0% (1/10) | 20.0% (2/10) | 20.0% (2) | – |
| iter_0 | complete 10/10 | 0.8 | 20.0% (2/10) | 30.0% (3/10) | 40.0% (4) | 2 |
| iter_1 (partial 8/10) | partial 8/10 | 0.8 | 37.5% (3/8) | 50.0% (4/8) | 50.0% (5) | 1 |
| Δ iter_1 − iter_0 |  |  | +17.5 pts | +20.0 pts | +10.0 pts |  |

## Does the loop learn? **FAIL**

Each comparison: exact two-sided McNemar (binomial test on the theorems solved by one eval only) \
over the theorems both evals evaluated, solved or not at the budget shown, α = 0.05; gained = \
solved by the later eval only, lost = by the earlier only.

|  | comparison | budget | gained | lost | both | neither | paired | p (McNemar) | verdict |
|---|---|---|---|---|---|---|---|---|---|
| ✗ | baseline → iter_0 | 300 | 2 | 1 | 1 | 6 | 10 | 1.000 | no measurable effect |
| ✗ | iter_0 → iter_1 | 300 | 1 | 0 | 3 | 4 | 8 | 1.000 | undecided |

- no search-longer control given (`burnqed compare … --control eval_longer.json`): nothing shows \
that training, not more search, made the difference
- baseline → iter_0: no measurable effect (p = 1)
- iter_0 → iter_1: fails — a partial eval cannot show learning (partial eval: iter_1 partial 8/10)
- iter_0 → iter_1: left out 2 evaluated by iter_0 only

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


def _write(root: Path, evals: dict[str, dict]) -> list[Path]:
    paths = []
    for label, e in evals.items():
        (root / label).mkdir(parents=True, exist_ok=True)
        paths.append(root / label / "eval.json")
        paths[-1].write_text(json.dumps(e))
    return paths


def test_a_search_longer_control_is_shown_apart_and_checked_against_the_last_iteration(tmp_path):
    evals = {
        "baseline": synthetic_eval("baseline", {100: ["a"], 300: ["a", "b"]}, 10),
        "iter_0": synthetic_eval("iter_0", {100: ["a", "c"], 300: ["a", "c", "d"]}, 10),
        "iter_1": synthetic_eval("iter_1", {100: ["a", "c", "e"], 300: ["a", "c", "d", "e"]}, 10),
    }
    paths = _write(tmp_path, evals)
    control = tmp_path / "iter_0" / "eval_longer.json"
    longer = {200: ["a", "c"], 600: ["a", "c", "d", "f"]}  # iter_0 given twice the nodes
    control.write_text(json.dumps(synthetic_eval("iter_0 search ×2", longer, 10)))
    c = run(evals=paths, controls=[control], out_md=tmp_path / "c.md")
    assert [r["label"] for r in c["rows"]] == ["baseline", "iter_0", "iter_1"]  # not a row
    assert c["delta"]["from"] == "iter_0" and c["budgets"] == [100, 200, 300, 600]
    lc = c["learning"]
    (v,) = lc["controls"]
    # Each at its own largest budget; f is lost, e gained: a tie is not a win.
    assert (v["before"], v["after"], v["budget_before"], v["budget_after"]) == (
        "iter_0 search ×2", "iter_1", 600, 300
    )  # fmt: skip
    assert (v["gained_theorems"], v["lost_theorems"], v["both"], v["neither"]) == (
        ["e"],
        ["f"],
        3,
        5,
    )
    assert v["p_value"] == 1.0 and v["verdict"] == "no measurable effect" and not v["beats"]
    assert lc["beats_controls"] is False and lc["verdict"] == "fail" and lc["complete"]
    md = (tmp_path / "c.md").read_text()
    assert (
        "## Search-longer controls" in md
        and "| iter_0 search ×2 | complete 10/10 | 0.8 | – |" in md
    )
    assert (
        "| ✗ | iter_1 vs control iter_0 search ×2 | 600 vs 300 | 1 | 1 | 3 | 5 | 10 | 1.000 | "
        "no measurable effect |" in md
    )


def test_without_controls_the_learning_check_is_undecided_not_passed(tmp_path):
    # 20 theorems: iteration 0 gains 8 and loses none (p = 0.0078): a real step, but no control.
    names = [f"t{i:02d}" for i in range(20)]
    evals = {
        "baseline": synthetic_eval("baseline", {10: names[:4]}, 20, 20, theorems=names),
        "iter_0": synthetic_eval("iter_0", {10: names[:12]}, 20, 20, theorems=names),
    }
    c = compare(load_evals(_write(tmp_path, evals)))
    lc = c["learning"]
    (step,) = lc["steps"]
    assert (step["gained"], step["lost"], step["verdict"], step["rises"]) == (8, 0, "better", True)
    assert step["p_value"] == pytest.approx(2 / 2**8)
    assert lc["rises_every_iteration"] is True
    assert lc["beats_controls"] is None and lc["verdict"] == "undecided"  # all([]) was True
    assert "no search-longer control given" in lc["reasons"][0]
    assert "## Does the loop learn? **UNDECIDED**" in compare_markdown(c)


def test_a_partial_row_fails_the_check_even_when_its_counts_look_better(tmp_path):
    names = [f"t{i:02d}" for i in range(20)]
    evals = {
        "baseline": synthetic_eval("baseline", {10: names[:2]}, 20, 20, theorems=names),
        "iter_0": synthetic_eval("iter_0", {10: names[:14]}, 18, 20, theorems=names),
    }
    control = synthetic_eval("control", {20: names[:2]}, 20, 20, theorems=names)
    c = compare(load_evals(_write(tmp_path, evals)), [(tmp_path / "control.json", control)])
    lc = c["learning"]
    (step,) = lc["steps"]
    assert step["gained"] == 12 and step["lost"] == 0 and step["verdict"] == "undecided"
    assert not step["rises"] and not lc["controls"][0]["beats"]  # the partial row is the last one
    assert lc["rises_every_iteration"] is False and lc["verdict"] == "fail"
    assert any("partial eval cannot show learning" in r for r in lc["reasons"])


def _coin_toss_and_real_learning(names: list[str]) -> dict[str, dict]:
    """The review's demo rerun on 400 theorems: baseline 69 solved (17.2 %) → iter_0 72 (18.0 %)
    with 30 gained and 27 lost; iter_1 gains 63 and loses 13 against iter_0 searched twice as long
    (which solves what iter_0 does)."""
    base = names[:69]
    it0 = names[27:69] + names[69:99]  # lose names[:27], gain 30
    it1 = [t for t in it0 if t not in it0[:13]] + names[99:162]  # lose 13, gain 63
    return {
        "baseline": synthetic_eval("baseline", {64: base}, 400, 400, theorems=names),
        "iter_0": synthetic_eval("iter_0", {64: it0}, 400, 400, theorems=names),
        "control": synthetic_eval("iter_0 search ×2", {128: it0}, 400, 400, theorems=names),
        "iter_1": synthetic_eval("iter_1", {64: it1}, 400, 400, theorems=names),
    }


def test_a_coin_toss_is_not_learning_and_a_real_gain_is(tmp_path):
    names = [f"t{i:03d}" for i in range(400)]
    e = _coin_toss_and_real_learning(names)
    assert (e["baseline"]["by_budget"][0]["rate"], e["iter_0"]["by_budget"][0]["rate"]) == (
        0.1725, 0.18
    )  # fmt: skip
    paths = _write(tmp_path, {k: v for k, v in e.items() if k != "control"})
    control = tmp_path / "iter_0" / "eval_longer.json"
    control.write_text(json.dumps(e["control"]))
    c = run(evals=paths, controls=[control], out_md=tmp_path / "compare.md")
    lc = c["learning"]
    toss, real = lc["steps"]
    assert (toss["gained"], toss["lost"], toss["verdict"]) == (30, 27, "no measurable effect")
    assert toss["p_value"] == pytest.approx(0.7914, abs=1e-4) and not toss["rises"]
    assert (real["gained"], real["lost"], real["verdict"]) == (63, 13, "better")
    (v,) = lc["controls"]
    assert (v["gained"], v["lost"], v["verdict"], v["beats"]) == (63, 13, "better", True)
    assert v["p_value"] == pytest.approx(5.04e-9, rel=1e-2)
    assert lc["rises_every_iteration"] is False and lc["beats_controls"] is True
    assert lc["verdict"] == "fail"  # the first step did not rise
    md = (tmp_path / "compare.md").read_text()
    assert (
        "| ✗ | baseline → iter_0 | 64 | 30 | 27 | 42 | 301 | 400 | 0.791 | no measurable effect |"
        in md
    )
    assert (
        "| ✓ | iter_1 vs control iter_0 search ×2 | 128 vs 64 | 63 | 13 | 59 | 265 | 400 | 5e-09 | better |"
        in md
    )


def test_evals_at_different_temperatures_are_not_called_learning(tmp_path):
    names = [f"t{i:02d}" for i in range(20)]
    evals = {
        "iter_0": synthetic_eval("iter_0", {10: names[:2]}, 20, 20, theorems=names),
        "iter_1": synthetic_eval("iter_1", {10: names[:14]}, 20, 20, theorems=names,
                                 temperature=1.0),
    }  # fmt: skip
    control = synthetic_eval("control", {20: names[:2]}, 20, 20, theorems=names, temperature=1.0)
    lc = compare(load_evals(_write(tmp_path, evals)), [(tmp_path / "c.json", control)])["learning"]
    (step,) = lc["steps"]
    assert step["gained"] == 12 and step["verdict"] == "undecided" and not step["rises"]
    assert step["reasons"][0].startswith("different temperature: iter_0 0.8, iter_1 1 — only the")
    assert lc["controls"][0]["verdict"] == "better"  # the control ran at iter_1's temperature
    assert lc["rises_every_iteration"] is None and lc["verdict"] == "undecided"


def test_cli_compare_takes_repeated_controls(tmp_path, capsys):
    names = [f"t{i:03d}" for i in range(400)]
    e = _coin_toss_and_real_learning(names)
    paths = _write(tmp_path, {k: v for k, v in e.items() if k != "control"})
    controls = []
    for i, factor in enumerate((2, 4)):
        controls.append(tmp_path / f"control_{i}.json")
        controls[-1].write_text(json.dumps({**e["control"], "label": f"iter_0 search ×{factor}"}))
    js = tmp_path / "c.json"
    argv = ["compare", *map(str, paths), "--json", str(js)]
    assert cli_main([*argv, "--control", str(controls[0]), "--control", str(controls[1])]) == 0
    c = json.loads(js.read_text())
    assert [r["label"] for r in c["controls"]] == ["iter_0 search ×2", "iter_0 search ×4"]
    assert [v["verdict"] for v in c["learning"]["controls"]] == ["better", "better"]
    assert "iter_1 vs control iter_0 search ×4" in capsys.readouterr().out


def test_compare_md_splits_how_unsolved_attempts_ended_per_budget(three, tmp_path):
    """Per budget and eval (controls too): ended by spending the budget / by the frontier dying
    out, other reasons named, of the attempts unsolved there; absent for evals that never
    recorded it (the golden table above)."""
    evals = load_evals(three)
    for _, e in evals:
        for b in e["by_budget"]:
            unsolved = b["theorems"] - b["solved"]
            b["ended_by"] = {"proof": b["solved"], "budget": unsolved - 1, "frontier": 1}
    evals[-1][1]["by_budget"][-1]["ended_by"] = {"proof": 4, "budget": 1, "frontier": 2, "fault": 1}
    c = compare(evals[:2], [evals[2]])
    assert c["rows"][0]["ended_by"]["300"] == {"proof": 2, "budget": 7, "frontier": 1}
    md = compare_markdown(c)
    section = md.split("## How unsolved attempts ended")[1].split("\n## ")[0]
    assert "| eval | 100 nodes | 300 nodes |" in section
    assert "| baseline | 8 / 1 of 9 | 7 / 1 of 8 |" in section
    assert "1 / 2 (fault 1) of 4 |" in section  # the control's row, fault named


def test_compare_md_names_the_field_beyond_a_comparisons_factor(tmp_path):
    """A learning step varies the model (and the value model that comes with it), the control the
    budget against training: those differences decide as before; another thread count does not."""
    names = [f"t{i:02d}" for i in range(20)]

    def ev(label, solved, model, *, threads=1, ebm=None, factor=1):
        e = synthetic_eval(label, {10 * factor: solved}, 20, 20, theorems=names)
        e["provenance"].update(model={"path": model, "sha256": f"sha-{model}"},
                               ebm=ebm and {"path": ebm, "sha256": f"sha-{ebm}"})  # fmt: skip
        return {**e, "budget_factor": factor, "machine": {"torch_threads": threads}}

    evals = {
        "iter_0": ev("iter_0", names[:2], "models/iter_0/merged"),
        "iter_1": ev("iter_1", names[:14], "models/iter_1/merged", ebm="models/iter_1/ebm"),
    }
    control = ev("iter_0 search ×2", names[:2], "models/iter_0/merged", factor=2)
    (tmp_path / "c.json").write_text(json.dumps(control))
    c = run(evals=_write(tmp_path, evals), controls=[tmp_path / "c.json"], out_md=tmp_path / "a.md")
    (step,), (versus,) = c["learning"]["steps"], c["learning"]["controls"]
    assert step["verdict"] == versus["verdict"] == "better" and c["learning"]["verdict"] == "pass"

    evals["iter_1"]["machine"]["torch_threads"] = 2
    c = run(evals=_write(tmp_path, evals), controls=[tmp_path / "c.json"], out_md=tmp_path / "b.md")
    (step,), (versus,) = c["learning"]["steps"], c["learning"]["controls"]
    assert step["verdict"] == versus["verdict"] == "undecided"
    assert c["learning"]["verdict"] == "undecided"
    md = (tmp_path / "b.md").read_text()
    assert (
        "- iter_0 → iter_1: undecided — different torch threads: iter_0 1, iter_1 2 — only the "
        "model may differ" in md
    )
    assert (
        "- iter_1 vs control iter_0 search ×2: undecided — different torch threads: "
        "iter_0 search ×2 1, iter_1 2 — only the budget may differ" in md
    )
