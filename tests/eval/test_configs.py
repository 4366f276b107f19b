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


def _replay(
    label: str,
    solved: list[str],
    *,
    uncovered: list[str] = (),  # type: ignore[assignment]
    live: bool = False,
    twin_solved: list[str] = (),  # type: ignore[assignment]
    unexpanded: int = 0,
    live_expansions: int = 0,
) -> dict:
    """A replay JSON as burnqed.replay.stage.run writes it (the keys compare reads): without
    ``live`` its eval-shaped rows hold the covered theorems only, the ``uncovered`` apart in its
    block (``twin_solved``: what the twin solved, for the block's uncovered count)."""
    covered = [t for t in NAMES if t not in uncovered]
    e = synthetic_eval(label, {64: solved}, len(covered), len(covered), theorems=covered)
    e["kind"] = "burnqed replay"
    e["replay"] = {
        "live": live,
        "role": "equality check" if live else "prediction",
        "by_budget": [{
            "budget": 64,
            "coverage": {"attempts": 40, "covered": len(covered), "coverage": len(covered) / 40},
            "covered_theorems": len(covered),
            "uncovered": {"theorems": len(uncovered),
                          "recorded_solved": len(set(uncovered) & set(twin_solved))},
            "prediction": {"max_gain": None if live else 0},
            "unexpanded": unexpanded, "inexact_attempts": len(uncovered), "oracle_ceiling": 30,
        }],
        "source": {"live": live, "expansions": {"recorded": 90, **({"live": live_expansions}
                                                                   if live else {})}},
        "inexact_attempts": [{"theorem": t, "attempt": 0, "from_expansion": 5} for t in uncovered],
    }  # fmt: skip
    return e


def test_the_feature_value_is_paired_with_c0_beside_its_live_replay_an_equality_check(tmp_path):
    """The feature value's replay runs --live: compare.md names it an equality check and says how
    many theorems it equals the live eval on, never a prediction."""
    ev = {
        "C0": synthetic_eval("iter_1 no EBM", {64: NAMES[:12]}, 40, 40, theorems=NAMES),
        "C": synthetic_eval("iter_1", {64: NAMES[:14]}, 40, 40, theorems=NAMES),
        # live: +6 / −1; the live replay solves the same theorems but one (t00)
        "F": synthetic_eval("iter_1 features", {64: NAMES[1:18]}, 40, 40, theorems=NAMES),
        "F_replay": _replay("iter_1 features (live replay)", NAMES[2:18], live=True,
                            live_expansions=7),
    }  # fmt: skip
    paths = dict(zip(ev, _write(tmp_path, ev), strict=True))
    c = run(evals=[paths["C"]], out_md=tmp_path / "c.md",
            configs={1: {"evals": paths, "metrics": {}}})  # fmt: skip
    f = c["configs"][0]["features"]
    assert (f["live"]["test"]["gained"], f["live"]["test"]["lost"]) == (6, 1)
    assert f["replay"]["live"] and f["replay"]["equality"]["agree"] == 39
    assert f["replay"]["equality"]["differ"] == ["t01"]
    md = (tmp_path / "c.md").read_text()
    assert "| value | live (paired vs none) | live replay |" in md
    assert (
        "| features | 42.5% (64); +6/−1, p 0.125 | live replay = live eval (64): 39 of 40 equal; 7 "
        "expanded live |" in md
    )
    assert "its live replay over that eval's trees (an equality check, not a prediction)" in md
    assert "Live replay = live eval, theorem by theorem at 64 nodes: 39 of 40 equal." in md
    assert "Overall" not in md  # no recording-only replay: no coverage to report


def test_each_configurations_replay_prediction_is_scored_on_the_attempts_it_covers(tmp_path):
    """Each configuration's recording-only replay (its EBM over its no-EBM twin's trees) is paired
    with that twin on the theorems it covers only, with its coverage, the uncovered counted apart
    (never as failures) and the bound (it cannot gain at the twin's budget) beside the figure; the
    section reports the coverage over all replays; a configuration without a replay shows none."""
    ev = {
        "A0": synthetic_eval("iter_0", {64: NAMES[:10]}, 40, 40, theorems=NAMES),
        "A": synthetic_eval("iter_1 A", {64: NAMES[:11]}, 40, 40, theorems=NAMES),
        # A's replay covers every attempt: −1 (t00) against A's twin
        "A_replay": _replay("iter_1 A (replay)", NAMES[1:10]),
        "C0": synthetic_eval("iter_1 no EBM", {64: NAMES[:12]}, 40, 40, theorems=NAMES),
        "B": synthetic_eval("iter_1 B", {64: NAMES[:13]}, 40, 40, theorems=NAMES),
        "C": synthetic_eval("iter_1", {64: NAMES[:14]}, 40, 40, theorems=NAMES),
        # C's replay: 8 theorems uncovered (t04..t11, all solved by the twin), loses t00 and t01
        # among the 32 it covers — uncovered counted as failures it would have been −10
        "C_replay": _replay("iter_1 C (replay)", NAMES[2:4], uncovered=NAMES[4:12],
                            twin_solved=NAMES[:12], unexpanded=9),
    }  # fmt: skip
    paths = dict(zip(ev, _write(tmp_path, ev), strict=True))
    evals = {**paths, "B0": paths["C0"]}
    c = run(evals=[paths["A0"], paths["C"]], out_md=tmp_path / "c.md", out_json=tmp_path / "c.json",
            configs={1: {"evals": evals, "metrics": {}}})  # fmt: skip
    section = c["configs"][0]
    rows = {r["config"]: r for r in section["configs"]}
    a, cr = rows["A"]["replay"], rows["C"]["replay"]
    ta, tc = a["test"], cr["test"]
    assert (ta["gained"], ta["lost"], ta["theorems"], ta["before"]) == (0, 1, 40, "iter_0")
    assert (tc["gained"], tc["lost"], tc["theorems"], tc["before"]) == (0, 2, 32, "iter_1 no EBM")
    assert tc["left_out"] == {"evaluated by iter_1 no EBM only": 8,
                              "evaluated by iter_1 C (replay) only": 0}  # fmt: skip
    assert cr["coverage"] == {"attempts": 40, "covered": 32, "coverage": 0.8}
    assert cr["uncovered"] == {"theorems": 8, "recorded_solved": 8} and cr["max_gain"] == 0
    assert (a["coverage"]["covered"], a["uncovered"]["theorems"]) == (40, 0)
    assert rows["B"]["replay"] is None
    assert section["replay_coverage"] == {"replays": 2, "attempts": 80, "covered": 72,
                                          "coverage": 0.9}  # fmt: skip
    md = (tmp_path / "c.md").read_text()
    assert "| config | eval | with EBM | replay prediction | log-prob twin | depth twin |" in md
    assert (
        "| A | iter_1 A | 27.5% (64) | +0/−1 on 40 covered (100.0% of attempts); can gain ≤ 0 |"
        in md
    )
    assert "| B | iter_1 B | 32.5% (64) | – | 30.0% | – |" in md
    assert (
        "| C | iter_1 | 35.0% (64) | +0/−2 on 32 covered (80.0% of attempts, 8 apart); can gain "
        "≤ 0 | 30.0% | – |" in md
    )
    assert "cannot solve a theorem the twin did not prove within the twin's own budget" in md
    assert "A `--live` replay predicts nothing: it is an equality check" in md
    assert (
        "Overall, the 2 recording-only replays could replay 72 of 80 attempts exactly (90.0%)."
        in md
    )
    written = json.loads((tmp_path / "c.json").read_text())["configs"][0]
    assert [r["replay"] and r["replay"]["unexpanded"] for r in written["configs"]] == [0, None, 9]
    assert written["replay_coverage"]["covered"] == 72
    # A replay run with another model (--allow-mismatch model) is no twin: undecided, and why.
    ev["C_replay"]["provenance"]["model"] = {"path": "models/other", "sha256": "beef"}
    d = tmp_path / "other"
    d.mkdir()
    paths = dict(zip(ev, _write(d, ev), strict=True))
    run(evals=[paths["C"]], out_md=d / "c.md",
        configs={1: {"evals": {**paths, "B0": paths["C0"]}, "metrics": {}}})  # fmt: skip
    md = (d / "c.md").read_text()
    assert "| +0/−2 (undecided) on 32 covered (80.0% of attempts, 8 apart); can gain ≤ 0 |" in md
    assert (
        "- C replay vs its twin: undecided — different model: iter_1 no EBM not recorded, "
        "iter_1 C (replay) beef — only the value model may differ" in md
    )


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
    spans 0.3 of the log-prob and changes 10 % of decisions, and where the feature value's
    recording-only replay covered a theorem its live eval agrees with it; the fit's held-out gain
    (2 SE) is a diagnostic, shown and not judged (issue 44 §5).  One judged check short and the
    goal is not met.  C's replay prediction is quoted on the theorems it covers."""
    ev = {
        "C0": synthetic_eval("iter_1 no EBM", {64: NAMES[:12]}, 40, 40, theorems=NAMES),
        "C": synthetic_eval("iter_1", {64: NAMES[:25]}, 40, 40, theorems=NAMES),
        "F": synthetic_eval("iter_1 features", {64: NAMES[:20]}, 40, 40, theorems=NAMES),
        # The feature value's replay covers 37 theorems (and agrees with live on them); the three
        # it could not (pops its recording never expanded) are the ones live solved beyond it.
        "F_replay": _replay("iter_1 features (replay)", NAMES[:17], uncovered=NAMES[17:20],
                            twin_solved=NAMES[:12], unexpanded=3),
        # C's replay covers 36 theorems (t08..t11 apart) and loses one of them (t00)
        "C_replay": _replay("iter_1 C (replay)", NAMES[1:8], uncovered=NAMES[8:12],
                            twin_solved=NAMES[:12]),
    }  # fmt: skip
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
        assert (goal["live"], goal["no_ebm"], goal["oracle_ceiling"]) == (25, 12, 30)
        assert goal["replay_prediction"] == {
            "live": False, "gained": 0, "lost": 1, "p_value": 1.0, "covered_theorems": 36,
            "coverage": 0.9, "uncovered_theorems": 4, "max_gain": 0}  # fmt: skip
        (row,) = section["configs"]
        assert row["value_model"]["weight"] == 1.7 and row["value_model"]["span_ratio"] == 0.45
        md = (d / "c.md").read_text()
        assert f"### The value model's goal: **{goal['verdict'].upper()}**" in md
        assert (
            "its replay over the no-EBM trees predicted +0/−1 on the 36 theorems it covers (90.0% "
            "of attempts; 4 uncovered apart), able to gain at most 0, and a priority" in md
        )
        assert "| C | 1.7 (fitted) | 0.900 / 2.000 (0.45) | 25.0% of 120 |" in md
        assert "fitted on the pool's decisions, sampled at temperature 1.2, cross-fitted" in md
        assert "within 5 theorems" not in md  # a rate gap is no check of a covered-only replay
        agreement = "agrees on 37 of 37; live vs none in the 3 uncovered theorems +3/−0"
        assert section["features"]["agreement"]["agree"] == 37
        assert (
            f"replay covered it, the feature value's live eval agrees theorem by theorem | {agreement} |"
            in md
        )
        assert f"on the 37 theorems the replay covered it {agreement}" in md
        assert (
            "| features | 50.0% (64); +8/−0, p 0.008 | +5/−0, p 0.062 on 37 covered (64 nodes, "
            "92.5% of attempts, 3 apart); can gain ≤ 0 |" in md
        )
    assert verdicts == {2.5: "met", 1.0: "met"}  # the held-out gain no longer decides
    # A replay that differs from live where it covered: replay and search differ, not met.
    ev["F_replay"] = _replay("iter_1 features (replay)", NAMES[:17])
    ev["C"]["value_model"] = _value_model(2.5)
    d = tmp_path / "differ"
    d.mkdir()
    paths = dict(zip(ev, _write(d, ev), strict=True))
    c = run(evals=[paths["C0"], paths["C"]], out_md=d / "c.md",
            configs={1: {"evals": paths, "metrics": {}}})  # fmt: skip
    goal = c["configs"][0]["goal"]
    (check,) = [x for x in goal["checks"] if x["check"].startswith("where its replay covered")]
    assert check["met"] is False and check["value"].startswith("agrees on 37 of 40 (differs: ")
    assert goal["verdict"] == "not met"
    # the 1.0 SE run: shown (bracketed), not judged
    assert met["diagnostic: held-out pool decisions, fitted sum over log-prob in SE"] is False
    assert "| (✗) | diagnostic: held-out pool decisions" in (tmp_path / "1.0" / "c.md").read_text()
    # A live replay is an equality check: one check, N of N equal, met only when all are.
    for solved, equal in ((NAMES[:20], True), (NAMES[:19], False)):
        ev["F_replay"] = _replay("iter_1 features (live replay)", solved, live=True)
        d = tmp_path / f"live{len(solved)}"
        d.mkdir()
        paths = dict(zip(ev, _write(d, ev), strict=True))
        c = run(evals=[paths["C0"], paths["C"]], out_md=d / "c.md",
                configs={1: {"evals": paths, "metrics": {}}})  # fmt: skip
        (check,) = [x for x in c["configs"][0]["goal"]["checks"] if "replay" in x["check"]]
        assert check["check"] == (
            "the feature value's live replay = its live eval (an equality check of replay)"
        )
        assert check["value"] == f"{39 + equal} of 40 equal" and check["met"] is equal


def test_a_live_replay_is_an_equality_check_and_says_how_many_states_it_expanded_live():
    e = _replay("iter_1 features (live replay)", NAMES[:17], live=True, live_expansions=7)
    live = synthetic_eval("iter_1 features", {64: NAMES[:17]}, 40, 40, theorems=NAMES)
    p = replay_prediction(e, None, live=live)
    assert p["live"] and p["live_expansions"] == 7 and p["max_gain"] is None
    assert p["equality"]["agree"] == p["equality"]["exact"] == 40
    assert paired_cell(p) == "live replay = live eval: 40 of 40 equal; 7 expanded live"
    assert paired_cell(replay_prediction(e, None)) == (
        "live replay (no live eval to check); 7 expanded live"
    )
    p = replay_prediction(_replay("iter_1 features (replay)", NAMES[:17]), None)
    assert not p["live"] and p["live_expansions"] is None and p["max_gain"] == 0  # a bound instead


def test_a_value_directory_that_ships_its_depth_twin_is_said_in_the_value_section():
    """``ebm.fallback: depth_twin``: an eval whose value directory ships the depth twin for a head
    fitted to weight 0 (its ``provenance.ebm.fallback_for``) is named so in compare.md's value
    section, with the export's reason; an eval of the head itself is not."""
    from burnqed.eval.configs import value_markdown, value_summary

    why = "the head's fitted energy weight is 0 (on 37 decisions of its held-out theorems)"
    block = {"energy_weight": {"value": 6.0, "logprob_weight": 1.0, "source": "fitted"}}
    shipped = value_summary({"value_model": block, "provenance": {"ebm": {
        "path": "models/iter_2/ebm", "fallback_for": {"value": "depth twin", "why": why}}}})  # fmt: skip
    head = value_summary(
        {"value_model": block, "provenance": {"ebm": {"path": "models/iter_2/ebm"}}}
    )
    assert shipped["fallback_for"]["value"] == "depth twin" and head["fallback_for"] is None
    md = "\n".join(value_markdown({"configs": [{"config": "C", "value_model": shipped},
                                              {"config": "A", "value_model": head}]}))  # fmt: skip
    assert f"> **C ships its depth twin** (`ebm.fallback`): {why}." in md
    assert "| C (its depth twin) | 6 (fitted) |" in md and "| A | 6 (fitted) |" in md
    assert "A ships" not in md
