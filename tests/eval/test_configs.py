"""The value-model configurations section of ``burnqed compare`` (burnqed.eval.configs)."""

from __future__ import annotations

import json

from burnqed.eval.compare import run
from tests.eval.test_compare import _write, synthetic_eval

NAMES = [f"t{i:02d}" for i in range(40)]


def _metrics(separation: float, rank1: float, deep: float) -> dict:
    """An ebm_metrics.json as burnqed.ebm.stage.run_metrics writes it (the keys the section reads)."""
    by_depth = {
        b: {"groups": 5, "rank1": rank1, "tie_rate": 0.0} for b in ("0", "1", "2", "3-4", "5+")
    }
    return {
        "centroid_separation": separation,
        "linear_probe": {"balanced_accuracy": 0.7},
        "ebm": {
            "heldout_rank1": rank1,
            "heldout_tie_rate": 0.0,
            "chance": 0.25,
            "heldout_rank1_by_depth": by_depth,
            "heldout_rank1_depth_ge4": {"groups": 4, "rank1": deep, "tie_rate": 0.0},
        },
    }


def test_the_three_questions_and_the_ablations_are_paired_tests(tmp_path):
    ev = {
        # without value heads: iteration 0 (A's policy) solves 10; iteration 1's joint model 12
        "iter_0": synthetic_eval("iter_0", {64: NAMES[:10]}, 40, 40, theorems=NAMES),
        "iter_1_no_ebm": synthetic_eval("iter_1 no EBM", {64: NAMES[:12]}, 40, 40, theorems=NAMES),
        "A": synthetic_eval("iter_1 A", {64: NAMES[:11]}, 40, 40, theorems=NAMES),
        "S": synthetic_eval("iter_1 S", {64: NAMES[:12]}, 40, 40, theorems=NAMES),
        "S0": synthetic_eval("iter_1 S no EBM", {64: NAMES[:12]}, 40, 40, theorems=NAMES),
        "B": synthetic_eval("iter_1 B", {64: NAMES[:13]}, 40, 40, theorems=NAMES),
        # C gains 12 theorems over B and loses none: p = 2 / 2**12
        "C": synthetic_eval("iter_1", {64: NAMES[:25]}, 40, 40, theorems=NAMES),
    }
    paths = dict(zip(ev, _write(tmp_path, ev), strict=True))
    metrics = {}
    for c, sep in (("A", 0.9), ("S", 0.2), ("B", 0.6), ("C", 0.8)):
        metrics[c] = tmp_path / f"{c}_metrics.json"
        metrics[c].write_text(json.dumps(_metrics(sep, 0.5, 0.4)))
    configs = {1: {"evals": {"A": paths["A"], "A0": paths["iter_0"], "S": paths["S"],
                             "S0": paths["S0"], "B": paths["B"], "B0": paths["iter_1_no_ebm"],
                             "C": paths["C"], "C0": paths["iter_1_no_ebm"]},
                   "metrics": metrics}}  # fmt: skip
    c = run(evals=[paths["iter_0"], paths["C"]], out_md=tmp_path / "c.md", configs=configs)
    (section,) = c["configs"]
    q = {(x["from"], x["to"]): x["test"] for x in section["questions"]}
    assert list(q) == [("S", "B"), ("B", "C"), ("A", "C")]
    assert (q["B", "C"]["gained"], q["B", "C"]["lost"], q["B", "C"]["verdict"]) == (12, 0, "better")
    assert q["S", "B"]["verdict"] == "no measurable effect"  # one theorem of 40
    rows = {r["config"]: r for r in section["configs"]}
    assert rows["C"]["ablation"]["gained"] == 13 and rows["C"]["ablation"]["verdict"] == "better"
    assert rows["S"]["ablation"]["gained"] == 0 and rows["S"]["ablation"]["p_value"] == 1.0
    assert rows["S"]["embeddings"]["centroid_separation"] == 0.2
    assert rows["B"]["embeddings"]["rank1_depth_ge4"] == 0.4
    md = (tmp_path / "c.md").read_text()
    assert "## Value-model configurations, iteration 1" in md
    assert "| B → C | did live gradients help the head? | 64 | 12 | 0 |" in md
    assert "| S | iter_1 S | 30.0% (64) | 30.0% | +0/−0, p 1.000, no measurable effect |" in md
