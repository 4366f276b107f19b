"""The value-model configurations section of ``burnqed compare`` (burnqed.eval.configs)."""

from __future__ import annotations

import json

from burnqed.eval.compare import run
from burnqed.eval.configs import paired_cell, replay_prediction
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
    assert (
        "| S | iter_1 S | 30.0% (64) | – | 30.0% | – | +0/−0, p 1.000, no measurable effect | – | "
        "log-prob: +0/−0, p 1.000 (Holm 1.000), no measurable effect |" in md
    )
    # Without depth twins the stronger twin is the log-prob one.  C's claim against it is the
    # pre-declared primary comparison; all four also get Holm's correction (C's p 2/2**13 is the
    # smallest of four: times 4; the others' 1.0 stay 1.0).
    assert {r["stronger_twin"] for r in rows.values()} == {"log-prob"}
    assert rows["C"]["vs_stronger"]["primary"] and not rows["A"]["vs_stronger"]["primary"]
    assert rows["C"]["vs_stronger"]["p_holm"] == round(4 * 2 / 2**13, 12)
    assert {rows[c]["vs_stronger"]["p_holm"] for c in "ASB"} == {1.0}
    assert "(Holm 0.00098) **primary**, better" in md


def test_an_ablation_whose_twin_differs_beyond_the_value_model_is_undecided_naming_it(tmp_path):
    """An EBM ablation varies the value model only: a twin drawn with another seed is undecided,
    and compare.md says why; A → C varies the model (with its value model) and is decided."""

    def ev(label, solved, model, ebm, seed=0):
        e = synthetic_eval(label, {64: solved}, 40, 40, theorems=NAMES)
        e["provenance"].update(model={"path": model, "sha256": None}, seeds={"seed": seed},
                               ebm=ebm and {"path": ebm, "sha256": None})  # fmt: skip
        return e

    ev_ = {
        "iter_0": ev("iter_0", NAMES[:10], "models/iter_0/merged", None),
        "A": ev("iter_1 A", NAMES[:20], "models/iter_0/merged", "models/iter_1/configs/A/ebm"),
        "C": ev("iter_1", NAMES[:25], "models/iter_1/merged", "models/iter_1/ebm"),
        "C0": ev("iter_1 no EBM", NAMES[:12], "models/iter_1/merged", None, seed=1),
    }
    paths = dict(zip(ev_, _write(tmp_path, ev_), strict=True))
    configs = {1: {"evals": {"A": paths["A"], "A0": paths["iter_0"], "C": paths["C"],
                             "C0": paths["C0"]}, "metrics": {}}}  # fmt: skip
    c = run(evals=[paths["iter_0"], paths["C"]], out_md=tmp_path / "c.md", configs=configs)
    rows = {r["config"]: r["ablation"] for r in c["configs"][0]["configs"]}
    assert rows["A"]["verdict"] == "better" and rows["A"]["reasons"] == []  # only the EBM differs
    assert rows["C"]["verdict"] == "undecided"
    md = (tmp_path / "c.md").read_text()
    assert (
        "- C EBM vs log-prob twin: undecided — different seed: iter_1 no EBM 1, iter_1 0 — only "
        "the value model may differ" in md
    )
    (q,) = c["configs"][0]["questions"]  # A → C varies the model: decided
    assert (q["from"], q["to"], q["test"]["verdict"]) == ("A", "C", "no measurable effect")


def test_the_feature_value_is_paired_with_c0_beside_its_replay_prediction(tmp_path):
    ev = {
        "C0": synthetic_eval("iter_1 no EBM", {64: NAMES[:12]}, 40, 40, theorems=NAMES),
        "C": synthetic_eval("iter_1", {64: NAMES[:14]}, 40, 40, theorems=NAMES),
        # live: +6 / −1; the replay predicted +4 / −0
        "F": synthetic_eval("iter_1 features", {64: NAMES[1:18]}, 40, 40, theorems=NAMES),
        "F_replay": synthetic_eval(
            "iter_1 features (replay)", {64: NAMES[:16]}, 40, 40, theorems=NAMES
        ),
    }
    paths = dict(zip(ev, _write(tmp_path, ev), strict=True))
    c = run(evals=[paths["C"]], out_md=tmp_path / "c.md",
            configs={1: {"evals": paths, "metrics": {}}})  # fmt: skip
    f = c["configs"][0]["features"]
    assert (f["live"]["test"]["gained"], f["live"]["test"]["lost"]) == (6, 1)
    assert (f["replay"]["test"]["gained"], f["replay"]["test"]["lost"]) == (4, 0)
    assert f["live"]["rate"]["solved"] == 17 and f["replay"]["rate"]["solved"] == 16
    md = (tmp_path / "c.md").read_text()
    assert "| features | 42.5% (64); +6/−1, p 0.125 | 40.0% (64); +4/−0, p 0.125 |" in md


def _replay(label: str, solved: list[str], *, unexpanded: int = 0, inexact: int = 0) -> dict:
    """A replay JSON as burnqed.replay.stage.run writes it (the keys the section reads)."""
    e = synthetic_eval(label, {64: solved}, 40, 40, theorems=NAMES)
    e["kind"] = "burnqed replay"
    e["replay"] = {"by_budget": [{"budget": 64, "solved": len(solved), "unexpanded": unexpanded,
                                  "inexact_attempts": inexact}]}  # fmt: skip
    return e


def test_each_configurations_replay_prediction_is_paired_with_its_twin_beside_the_live_figure(
    tmp_path,
):
    """Each configuration's replay (its EBM over its no-EBM twin's trees) is paired with that twin,
    shown beside the live figure, and marked inexact with its unexpanded pops when it made answers
    up; a configuration without a replay shows none."""
    ev = {
        "A0": synthetic_eval("iter_0", {64: NAMES[:10]}, 40, 40, theorems=NAMES),
        "A": synthetic_eval("iter_1 A", {64: NAMES[:11]}, 40, 40, theorems=NAMES),
        # A's replay: +3 / −1 against A's twin (iteration 0), exact
        "A_replay": _replay("iter_1 A (replay)", NAMES[1:13]),
        "C0": synthetic_eval("iter_1 no EBM", {64: NAMES[:12]}, 40, 40, theorems=NAMES),
        "B": synthetic_eval("iter_1 B", {64: NAMES[:13]}, 40, 40, theorems=NAMES),
        "C": synthetic_eval("iter_1", {64: NAMES[:14]}, 40, 40, theorems=NAMES),
        # C's replay: +5 / −0 against C's twin, 3 pops its recording never expanded (2 attempts)
        "C_replay": _replay("iter_1 C (replay)", NAMES[:17], unexpanded=3, inexact=2),
    }
    paths = dict(zip(ev, _write(tmp_path, ev), strict=True))
    evals = {**paths, "B0": paths["C0"]}
    c = run(evals=[paths["A0"], paths["C"]], out_md=tmp_path / "c.md", out_json=tmp_path / "c.json",
            configs={1: {"evals": evals, "metrics": {}}})  # fmt: skip
    rows = {r["config"]: r for r in c["configs"][0]["configs"]}
    a, cr = rows["A"]["replay"], rows["C"]["replay"]
    ta, tc = a["test"], cr["test"]
    assert (ta["gained"], ta["lost"], ta["before"]) == (3, 1, "iter_0")
    assert (tc["gained"], tc["lost"], tc["before"]) == (5, 0, "iter_1 no EBM")
    assert a["rate"] == {"budget": 64, "rate": 12 / 40, "solved": 12}
    assert (a["exact"], a["unexpanded"]) == (True, 0)
    assert (cr["exact"], cr["unexpanded"], cr["inexact_attempts"]) == (False, 3, 2)
    assert rows["B"]["replay"] is None
    md = (tmp_path / "c.md").read_text()
    assert "| config | eval | with EBM | replay prediction | log-prob twin | depth twin |" in md
    assert "| A | iter_1 A | 27.5% (64) | 30.0%; +3/−1 | 25.0% | – |" in md
    assert "| B | iter_1 B | 32.5% (64) | – | 30.0% | – |" in md
    assert (
        "| C | iter_1 | 35.0% (64) | 42.5%; +5/−0; inexact (3 unexpanded, 2 attempts) | 30.0% | – |"
        in md
    )
    written = json.loads((tmp_path / "c.json").read_text())["configs"][0]["configs"]
    assert [r["replay"] and r["replay"]["unexpanded"] for r in written] == [0, None, 3]


def _value_model(in_se: float) -> dict:
    """An eval JSON's value_model block (burnqed.eval.stage.value_model_block) with a fitted weight."""
    fit = {
        "heldout_frontier_top1": {n: {"rate": r, "se": 0.03, "decisions": 200}
                                  for n, r in (("logprob", 0.40), ("energy", 0.35), ("sum", 0.46))},
        "heldout_sum_gain": {"difference": 0.06, "se": 0.06 / in_se, "in_se": in_se,
                             "decisions": 200},
        "decisions_temperature": [1.2],
    }  # fmt: skip
    return {
        "energy_weight": {"value": 1.7, "source": "fitted", "fit": fit},
        "effect": {
            "median_sibling_span": {"energy": 0.9, "logprob": 2.0, "ratio": 0.45, "parents": 50},
            "decisions_changed": {"pops": 120, "changed": 30, "fraction": 0.25},
        },
    }


def test_the_value_models_goal_is_checked_point_by_point_beside_the_replay_and_the_ceiling(
    tmp_path,
):
    """The goal and its checks in compare.md: C beats its stronger twin by 2 % of the theorems net
    (paired verdict better), the feature value does not beat C (two-sided), the weighted energy
    spans 0.3 of the log-prob and changes 10 % of decisions, and the feature value lands within 5
    theorems of its replay; the fit's held-out gain (2 SE) is a diagnostic, shown and not judged
    (issue 44 §5).  One judged check short and the goal is not met."""
    ev = {
        "C0": synthetic_eval("iter_1 no EBM", {64: NAMES[:12]}, 40, 40, theorems=NAMES),
        "C": synthetic_eval("iter_1", {64: NAMES[:25]}, 40, 40, theorems=NAMES),
        "F": synthetic_eval("iter_1 features", {64: NAMES[:20]}, 40, 40, theorems=NAMES),
        "F_replay": synthetic_eval(
            "iter_1 features (replay)", {64: NAMES[:17]}, 40, 40, theorems=NAMES
        ),
        "C_replay": synthetic_eval("iter_1 C (replay)", {64: NAMES[:22]}, 40, 40, theorems=NAMES),
    }
    ev["C_replay"]["replay"] = {"by_budget": [{"budget": 64, "unexpanded": 0,
                                               "inexact_attempts": 0, "oracle_ceiling": 30}]}  # fmt: skip
    # The feature value's replay follows 37 theorems exactly (and agrees with live on them); the
    # three it could not (pops its recording never expanded) are the ones live solved beyond it.
    ev["F_replay"]["replay"] = {
        "by_budget": [{"budget": 64, "unexpanded": 3, "inexact_attempts": 3, "oracle_ceiling": 30}],
        "inexact_attempts": [
            {"theorem": t, "attempt": 0, "from_expansion": 5} for t in NAMES[17:20]
        ],
    }
    verdicts = {}
    for in_se in (2.5, 1.0):
        ev["C"]["value_model"] = _value_model(in_se)
        d = tmp_path / str(in_se)
        d.mkdir()
        paths = dict(zip(ev, _write(d, ev), strict=True))
        configs = {1: {"evals": paths, "metrics": {}}}
        c = run(evals=[paths["C0"], paths["C"]], out_md=d / "c.md", configs=configs)
        (section,) = c["configs"]
        goal = section["goal"]
        verdicts[in_se] = goal["verdict"]
        met = {x["check"].split(" (")[0]: x["met"] for x in goal["checks"]}
        assert (goal["live"], goal["no_ebm"], goal["replay_prediction"], goal["oracle_ceiling"]) == (
            25, 12, 22, 30)  # fmt: skip
        (row,) = section["configs"]
        assert row["value_model"]["weight"] == 1.7 and row["value_model"]["span_ratio"] == 0.45
        md = (d / "c.md").read_text()
        assert f"### The value model's goal: **{goal['verdict'].upper()}**" in md
        assert "| C | 1.7 (fitted) | 0.900 / 2.000 (0.45) | 25.0% of 120 |" in md
        assert "fitted on the pool's decisions, sampled at temperature 1.2, cross-fitted" in md
        assert "the feature value live within 5 theorems of its replay | 3 |" in md
        agreement = "agrees on 37 of 37; live vs none in the 3 inexact theorems +3/−0"
        assert section["features"]["agreement"]["agree"] == 37
        assert (
            f"replay was exact, the feature value's live eval agrees theorem by theorem | {agreement} |"
            in md
        )
        assert f"on the 37 theorems the replay followed exactly it {agreement}" in md
    assert verdicts == {2.5: "met", 1.0: "met"}  # the held-out gain no longer decides
    # A replay that differs from live where it was exact: replay and search differ, not met.
    ev["F_replay"]["replay"]["inexact_attempts"] = []
    ev["C"]["value_model"] = _value_model(2.5)
    d = tmp_path / "differ"
    d.mkdir()
    paths = dict(zip(ev, _write(d, ev), strict=True))
    c = run(evals=[paths["C0"], paths["C"]], out_md=d / "c.md",
            configs={1: {"evals": paths, "metrics": {}}})  # fmt: skip
    goal = c["configs"][0]["goal"]
    (check,) = [x for x in goal["checks"] if x["check"].startswith("where its replay was exact")]
    assert check["met"] is False and check["value"].startswith("agrees on 37 of 40 (differs: ")
    assert goal["verdict"] == "not met"
    # the 1.0 SE run: shown (bracketed), not judged
    assert met["diagnostic: held-out pool decisions, fitted sum over log-prob in SE"] is False
    assert "| (✗) | diagnostic: held-out pool decisions" in (tmp_path / "1.0" / "c.md").read_text()


def test_a_live_replay_prediction_is_exact_and_says_how_many_states_it_expanded_live():
    e = synthetic_eval("iter_1 features (replay)", {64: NAMES[:17]}, 40, 40, theorems=NAMES)
    e["replay"] = {
        "by_budget": [{"budget": 64, "unexpanded": 0, "inexact_attempts": 0, "oracle_ceiling": 30}],
        "source": {"live": True, "expansions": {"recorded": 90, "live": 7}},
    }
    p = replay_prediction(e, None)
    assert p["exact"] is True and p["live_expansions"] == 7 and p["rate"]["solved"] == 17
    assert paired_cell(p) == "42.5%; undecided; 7 expanded live"
    e["replay"]["source"] = {"live": False, "expansions": {"recorded": 90}}
    assert replay_prediction(e, None)["live_expansions"] is None
