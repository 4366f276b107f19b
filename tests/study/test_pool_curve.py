"""A pool-curve comparison as a study's primary (issue 61): expert iteration against search only on
each seed's search pool, the two arms' eval-shaped pool curves of ``results/compute/`` — an explicit
kind of comparison (``measure: pool curve``), registered and checked as one through `burnqed study
report`, never an eval that slips past the confirmation-benchmark check."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from burnqed.cli import main as cli_main
from burnqed.config import InputError
from burnqed.report.docs import study_headline
from burnqed.study import registration as regfile
from tests.study.test_protocol import registration2, sessions2
from tests.study.test_report import make_study

EXPERT = "results/compute/expert_iteration.json"
SEARCH_ONLY = "results/compute/search_only.json"
POOL = [f"p{i}" for i in range(30)]
NAME = "expert iteration against search only"
# Per seed: the pool theorems each arm proved at iteration 1 beyond iteration 0's shared ten.
ARMS = [
    (range(10, 18), range(10, 12)),  # p10–p17 against p10–p11: gained 6, lost 0
    (range(12, 19), range(10, 13)),  # p12–p18 against p10–p12: gained 6, lost 2 (p10, p11)
    (range(10, 16), range(10, 13)),  # p10–p15 against p10–p12: gained 3, lost 0
]


def pool_registration() -> dict:
    """Protocol 2: the learning primary replaced by the pool-curve comparison at 2 iterations
    searched (iteration 0's searches, then iteration 1's), the value model's eval primary kept."""
    reg = copy.deepcopy(registration2())
    reg["design"]["targets"] += [EXPERT, SEARCH_ONLY]
    value = reg["comparisons"]["primary"][1]
    reg["comparisons"]["primary"] = [
        {"name": NAME, "measure": "pool curve", "varies": "training", "budget": 2,
         "treatment": EXPERT, "control": SEARCH_ONLY,
         "fallback": {"difference": 0, "why": "a seed with no iteration 1 searched alike"}},
        value,
    ]  # fmt: skip
    reg["analysis"]["power"]["comparisons"][0]["name"] = NAME
    return reg


def pool_curve(arm: str, extra, *, seed: int, model: str, ebm: str | None) -> dict:
    """One arm's pool curve as burnqed.eval.compute.arm_curve writes it: per pool theorem the
    iterations searched when the arm first proved it (the first ten: iteration 0's searches)."""
    first = {f"p{i}": 1 for i in range(10)} | {f"p{i}": 2 for i in extra}
    return {
        "kind": "burnqed pool curve", "label": arm, "budgets": [1, 2], "pass_n": 4,
        "status": {"complete": True, "label": "complete 30/30", "evaluated_theorems": 30,
                   "expected_theorems": 30},
        "per_theorem": [{"theorem": t, "evaluated": True, "budget_at_proof": first.get(t),
                         "solved": t in first} for t in POOL],
        "benchmark": {"name": "search_pool", "split": None, "role": "pool",
                      "sha256": f"pool{seed}"},
        "provenance": {"model": {"path": model, "sha256": None},
                       "ebm": {"path": ebm, "sha256": None} if ebm else None,
                       "seeds": {"seed": seed}, "sampling": {"temperature": 1.2, "n": 8},
                       "config": {"search": {"max_nodes": 64}}},
    }  # fmt: skip


def make_pool_study(root: Path, reg: dict | None = None) -> tuple[Path, list[int]]:
    path, seeds = make_study(root, reg or pool_registration())
    sessions2(path, seeds)
    for s, (ei, so) in zip(seeds, ARMS, strict=True):
        d = path.parent / "seeds" / f"seed_{s}"
        (d / EXPERT).parent.mkdir(parents=True, exist_ok=True)
        (d / EXPERT).write_text(
            json.dumps(
                pool_curve(
                    "expert iteration",
                    ei,
                    seed=s,
                    model="models/iter_1/merged",
                    ebm="models/iter_1/ebm",
                )
            )
        )
        (d / SEARCH_ONLY).write_text(json.dumps(pool_curve("search only", so, seed=s,
                                     model="models/iter_0/merged", ebm=None)))  # fmt: skip
        (d / "results/compute.json").write_text(json.dumps(compute_report(ei, so)))
    return path, seeds


def compute_report(ei, so) -> dict:
    """The part of ``results/compute.json`` the study's picture reads: per arm and step, the
    cumulative node expansions and pool pass rate (iteration 0's ten proofs shared)."""

    def point(step, proved, nodes):
        return {"step": step, "proved": proved, "pool": len(POOL), "nodes_expanded": nodes,
                "pass_rate": proved / len(POOL), "tokens": 10 * nodes, "value_scorings": 0}  # fmt: skip

    return {"kind": "burnqed compute", "curves": {
        "expert iteration": [point(1, 10, 300), point(2, 10 + len(ei), 520)],
        "search only": [point(1, 10, 300), point(2, 10 + len(so), 400)],
    }}  # fmt: skip


def report_cli(path: Path, root: Path, capsys) -> dict:
    rc = cli_main(["study", "report", str(path), "--root", str(root)])
    err = capsys.readouterr().err
    assert rc == 0, f"`burnqed study report` refused the study: {err}"
    return json.loads((path.parent / "report.json").read_text())


def test_a_pool_curve_comparison_is_a_primary_checked_as_one(tmp_path, capsys):
    path, seeds = make_pool_study(tmp_path / "repo")
    r = report_cli(path, tmp_path / "repo", capsys)
    assert r["label"] == "confirmatory", [c for c in r["checks"] if not c["ok"]]
    (check,) = [c for c in r["checks"] if c["check"] == "confirmation benchmark"]
    assert check["detail"].endswith("every pool curve on its seed's search pool")
    curves = next(c for c in r["comparisons"] if c["name"] == NAME)
    assert curves["measure"] == "pool curve" and curves["varies"] == "training"
    rows = {x["seed"]: x for x in curves["per_seed"]}
    assert [(rows[s]["gained"], rows[s]["lost"], rows[s]["theorems"]) for s in seeds] == [
        (6, 0, 30), (6, 2, 30), (3, 0, 30)]  # fmt: skip
    assert rows[seeds[1]]["budget"] == [2, 2] and rows[seeds[1]]["verdict"] != "undecided"
    assert curves["pooled"]["estimate"] == pytest.approx((6 + 4 + 3) / 30 / 3)
    md = (path.parent / "report.md").read_text()
    assert "pool curves on each seed's search pool" in md


def test_an_eval_in_a_pool_curve_comparison_and_a_curve_in_an_eval_one_fail_the_check(
    tmp_path, capsys
):
    """The kinds do not mix: a confirmation eval given as a pool curve is no pool curve, and a pool
    curve compared as an eval is on the pool — each named, the report exploratory."""
    reg = pool_registration()
    reg["comparisons"]["secondary"] = [
        {"name": "a curve as an eval", "treatment": EXPERT, "control": SEARCH_ONLY,
         "varies": "model", "budget": 2},
        {"name": "an eval as a curve", "measure": "pool curve", "varies": "training",
         "treatment": "results/iter_1/eval.json", "control": "results/iter_0/eval.json"},
    ]  # fmt: skip
    path, seeds = make_pool_study(tmp_path / "repo", reg)
    r = report_cli(path, tmp_path / "repo", capsys)
    assert r["label"] == "exploratory"
    (check,) = [c for c in r["checks"] if c["check"] == "confirmation benchmark"]
    assert not check["ok"]
    s = seeds[0]
    assert f"seed_{s}/{EXPERT} is on search_pool (pool)" in check["detail"]
    assert (f"seed_{s}/results/iter_1/eval.json is not a pool curve (kind 'burnqed eval') but "
            "its comparison's measure is pool curve") in check["detail"]  # fmt: skip


def test_curves_of_two_pools_leave_the_comparison_undecided(tmp_path, capsys):
    path, seeds = make_pool_study(tmp_path / "repo")
    other = path.parent / "seeds" / f"seed_{seeds[0]}" / SEARCH_ONLY
    curve = json.loads(other.read_text())
    curve["benchmark"]["sha256"] = "another pool"
    other.write_text(json.dumps(curve))
    r = report_cli(path, tmp_path / "repo", capsys)
    (decided,) = [c for c in r["checks"] if c["check"] == "decided"]
    assert not decided["ok"] and "different benchmark" in decided["detail"]


@pytest.mark.parametrize(
    ("change", "key", "why"),
    [
        ({"varies": "model"}, "comparisons.primary[0].varies", "varies training"),
        ({"control": [SEARCH_ONLY, EXPERT]}, "comparisons.primary[0].control", "one pool curve"),
        ({"budget": [1, 2]}, "comparisons.primary[0].budget", "the same for both arms"),
        ({"measure": "curve"}, "comparisons.primary[0].measure", "expected one of"),
        ({"measure": "eval"}, "comparisons.primary[0].varies", "measure: pool curve"),
    ],
)
def test_a_pool_curve_comparison_is_registered_only_as_one(tmp_path, change, key, why):
    """`varies: training` only with `measure: pool curve`, and a pool curve only at one budget
    against one control, varying training: one line naming the key."""
    reg = pool_registration()
    reg["comparisons"]["primary"][0].update(change)
    with pytest.raises(InputError) as e:
        regfile.validate(reg, tmp_path / "r.yaml")
    msg = str(e.value)
    assert "\n" not in msg and f"{key}:" in msg and why in msg


def test_the_report_draws_both_arms_curves_every_seed_and_their_mean(tmp_path, capsys):
    """Issue 61 part 4's picture: ``curves.png`` beside the forest plot, the seeds' curves kept in
    ``report.json`` (a re-rendered report draws the same), their mean per iteration in report.md."""
    path, seeds = make_pool_study(tmp_path / "repo")
    r = report_cli(path, tmp_path / "repo", capsys)
    assert sorted(r["pool_curves"]) == sorted(str(s) for s in seeds)
    first = r["pool_curves"][str(seeds[0])]
    assert [p["pass_rate"] for p in first["expert iteration"]] == [10 / 30, 18 / 30]
    assert [p["nodes_expanded"] for p in first["search only"]] == [300, 400]
    png = (path.parent / "curves.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    md = (path.parent / "report.md").read_text()
    assert "![Both arms' cumulative pool pass rate, every seed and their mean](curves.png)" in md
    # After iteration 1 (step 2): expert iteration 18, 17, 16 of 30; search only 12, 13, 13.
    assert "| 1 | 56.7% | 520 | 42.2% | 400 | +14.44 |" in md
    assert "| 0 | 33.3% | 300 | 33.3% | 300 | +0.00 |" in md
    # Beside it, what each arm's searches spent (tokens: ten a node in compute_report).
    assert "| 1 | 520 / 400 (1.30×) | 5,200 / 4,000 (1.30×) | 0 / 0 |" in md
    assert first["expert iteration"][1]["tokens"] == 5200
    # The README's headline (`burnqed report docs`) shows both pictures under its tables.
    text = study_headline(r, "pool")
    assert text.index("](studies/pool/forest.png)") < text.index("](studies/pool/curves.png)")
    assert "each seed thin, the pooled curve bold](studies/pool/curves.png)" in text
    assert (
        "No training guard stopped a training on any seed." in md and r["stopped_trainings"] == {}
    )
    r.pop("pool_curves")  # a study without Polu's comparison: the forest plot alone
    text = study_headline(r, "pool")
    assert "curves.png" not in text and "](studies/pool/forest.png)" in text


def test_a_seed_without_its_compute_report_is_named(tmp_path, capsys):
    path, seeds = make_pool_study(tmp_path / "repo")
    missing = path.parent / "seeds" / f"seed_{seeds[1]}" / "results/compute.json"
    missing.unlink()
    rc = cli_main(["study", "report", str(path), "--root", str(tmp_path / "repo")])
    err = capsys.readouterr().err
    assert rc != 0 and f"{missing}: not a readable compute report" in err


BENCH_EXPERT = "results/compute/benchmark_expert_iteration.json"
BENCH_SEARCH_ONLY = "results/compute/benchmark_search_only.json"


def test_a_benchmark_curve_comparison_is_registered_and_checked_on_a_confirmation_benchmark(
    tmp_path, capsys
):
    """Part 3's registered secondary (burnqed.eval.benchmark_curves): the same two arms on the
    confirmation benchmark, the union of every iteration's eval against iteration 0's model
    evaluated again; the same kind of file as a pool curve, checked against its own measure."""
    reg = pool_registration()
    reg["design"]["targets"] += [BENCH_EXPERT, BENCH_SEARCH_ONLY]
    reg["comparisons"]["secondary"] = [
        {"name": "on the benchmark", "measure": "benchmark curve", "varies": "training",
         "budget": 2, "treatment": BENCH_EXPERT, "control": BENCH_SEARCH_ONLY},
    ]  # fmt: skip
    path, seeds = make_pool_study(tmp_path / "repo", reg)
    on_test = {"name": "proplogic", "split": "test", "role": "confirmation"}
    for s, (ei, so) in zip(seeds, ARMS, strict=True):
        d = path.parent / "seeds" / f"seed_{s}"
        for f, arm, extra, model in ((BENCH_EXPERT, "expert iteration", so, "iter_1"),
                                     (BENCH_SEARCH_ONLY, "search only", ei, "iter_0")):  # fmt: skip
            c = pool_curve(arm, extra, seed=s, model=f"models/{model}/merged", ebm=None)
            (d / f).write_text(json.dumps({**c, "benchmark": {**on_test, "sha256": "b"}}))
    r = report_cli(path, tmp_path / "repo", capsys)
    assert r["label"] == "confirmatory", [c for c in r["checks"] if not c["ok"]]
    (check,) = [c for c in r["checks"] if c["check"] == "confirmation benchmark"]
    assert check["detail"].endswith("every benchmark curve on a confirmation benchmark")
    bench = next(c for c in r["comparisons"] if c["name"] == "on the benchmark")
    assert bench["measure"] == "benchmark curve" and bench["kind"] == "secondary"
    rows = {x["seed"]: x for x in bench["per_seed"]}
    assert [(rows[s]["gained"], rows[s]["lost"]) for s in seeds] == [(0, 6), (2, 6), (0, 3)]
    md = (path.parent / "report.md").read_text()
    assert "benchmark curves, the union of each iteration's eval" in md
    # the same files registered as pool curves are on the wrong benchmark: named, exploratory
    reg["comparisons"]["secondary"][0]["measure"] = "pool curve"
    (path).write_text(json.dumps(reg))
    r = report_cli(path, tmp_path / "repo", capsys)
    (check,) = [c for c in r["checks"] if c["check"] == "confirmation benchmark"]
    assert f"seed_{seeds[0]}/{BENCH_EXPERT} is a pool curve on proplogic" in check["detail"]


def test_a_benchmark_curve_comparison_varies_training_against_one_control(tmp_path):
    reg = pool_registration()
    reg["comparisons"]["primary"][0].update(
        measure="benchmark curve", control=[SEARCH_ONLY, EXPERT]
    )
    with pytest.raises(InputError, match=r"primary\[0\]\.control: one benchmark curve"):
        regfile.validate(reg, tmp_path / "r.yaml")
    reg["comparisons"]["primary"][0].update(control=SEARCH_ONLY, varies="model")
    with pytest.raises(InputError, match="a benchmark curve comparison varies training"):
        regfile.validate(reg, tmp_path / "r.yaml")


def test_a_training_a_guard_stopped_is_said_in_the_report_and_the_headline(tmp_path, capsys):
    """Issue 61: a seed whose training a guard stopped keeps the previous iteration's model and
    goes on; the report (from the seed's ``results/compute.json``) and the README's headline say
    so — a sentence, and a note on that seed's row."""
    path, seeds = make_pool_study(tmp_path / "repo")
    f = path.parent / "seeds" / f"seed_{seeds[1]}" / "results/compute.json"
    doc = json.loads(f.read_text())
    reason = "joint step 300: held-out centroid_separation fell to 0.296, below its red line 0.3"
    doc["stopped"] = {"iter_1": {"error": "burnqed.train.joint.JointTrainingError", "step": 300,
                                 "reason": reason, "previous_adapter": "models/iter_0/adapter"}}  # fmt: skip
    f.write_text(json.dumps(doc))
    r = report_cli(path, tmp_path / "repo", capsys)
    assert r["stopped_trainings"] == {str(seeds[1]): {"iter_1": {"step": 300, "reason": reason}}}
    said = (f"A training guard stopped 1 training — seed {seeds[1]}'s iteration 1 (joint step "
            "300): that iteration kept the previous iteration's model")  # fmt: skip
    assert said in (path.parent / "report.md").read_text()
    text = study_headline(r, "pool")
    assert said in text
    rows = [line for line in text.splitlines() if "training stopped)" in line]
    assert len(rows) == 1 and rows[0].startswith(f"| {seeds[1]} |")
    # The pool comparison's cell (the first primary's) carries it.
    assert rows[0].split(" | ")[1] == "+6/−2, d +13.33 (iteration 1's training stopped)"
