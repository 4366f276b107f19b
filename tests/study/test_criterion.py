"""The development criterion (issue 61, burnqed.study.criterion): a check with a margin on every
development seed — it fails a seed whose difference is positive but below the margin, and a seed
with no result — judged on runs' pool curves and evals by `burnqed study criterion`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from burnqed.cli import main as cli_main
from burnqed.config import InputError
from burnqed.study.criterion import judge
from tests.study.test_pool_curve import EXPERT, SEARCH_ONLY, pool_curve
from tests.study.test_report import eval_json

REPO = Path(__file__).resolve().parents[2]
SEEDS = [101, 102, 103]
POOL_NAME = "expert iteration against search only"
VALUE_NAME = "the shipped value model against its stronger twin"


def criterion(tmp_path: Path, *, pool_margin: float = 2.0, **change) -> Path:
    c = yaml.safe_load((REPO / "studies/pool-ei/criterion.yaml").read_text())
    c["criterion"]["checks"][0]["seed_margin"] = pool_margin
    c["criterion"].update(change)
    path = tmp_path / "criterion.yaml"
    path.write_text(yaml.safe_dump(c))
    return path


def write_run(root: Path, seed: int, ei, so, *, value=(12, 10, 8), last: int = 1) -> Path:
    """One development seed's run: the two arms' pool curves (``ei``/``so``: the pool theorems
    proved at the last iteration beyond iteration 0's shared ten) and iteration ``last``'s eval
    with its two twins (``value``: theorems t0… each solves at 4 nodes)."""
    d = root / f"seed_{seed}"

    def put(rel: str, obj: dict) -> None:
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / rel).write_text(json.dumps(obj))

    e = pool_curve("expert iteration", ei, seed=seed, model=f"m{last}", ebm=f"e{last}")
    s = pool_curve("search only", so, seed=seed, model="m0", ebm=None)
    for curve in (e, s):  # the last iteration's step is step last + 1
        curve["budgets"] = list(range(1, last + 2))
        for r in curve["per_theorem"]:
            if r["budget_at_proof"] == 2:
                r["budget_at_proof"] = last + 1
    put(EXPERT, e)
    put(SEARCH_ONLY, s)
    it = f"results/iter_{last}"
    for name, ebm, n in zip(("eval", "eval_no_ebm", "eval_depth_twin"),
                            ("joint", None, "depth"), value, strict=True):  # fmt: skip
        put(f"{it}/{name}.json", eval_json(name, "m", ebm, {f"t{i}" for i in range(n)},
                                           seed=seed, split="dev"))  # fmt: skip
    return d


def good_runs(root: Path) -> list[Path]:
    # each seed: expert iteration proves p10–p14 beyond the shared ten, search only p10: +4/−0
    return [write_run(root, s, range(10, 15), range(10, 11)) for s in SEEDS]


def test_a_design_reaching_every_margin_on_every_seed_qualifies(tmp_path, capsys):
    runs = good_runs(tmp_path / "runs")
    r = judge(criterion(tmp_path), runs)
    assert r["qualifies"] and not r["missing_seeds"]
    for s in r["seeds"]:
        pool, value = s["checks"]
        assert (pool["gained"], pool["lost"], pool["theorems"]) == (4, 0, 30)
        assert pool["difference"] == pytest.approx(100 * 4 / 30) and pool["budget"] == [2, 2]
        # against the stronger twin, the log-prob one (10 solved against the depth twin's 8)
        assert value["control"] == "results/iter_1/eval_no_ebm.json"
        assert (value["gained"], value["lost"]) == (2, 0) and value["passed"]
    rc = cli_main(["study", "criterion", str(criterion(tmp_path)), *map(str, runs)])
    out = capsys.readouterr().out
    assert rc == 0 and "qualifies=1" in out and "**Qualifies.**" in out
    assert f"seed_101.{POOL_NAME.replace(' ', '_')}.d=13.33 passed=1" in out


def test_a_positive_difference_below_the_margin_fails_that_seed(tmp_path, capsys):
    """A margin, not a sign: +3.33 points on every seed is positive and still fails a 5-point
    margin on each one."""
    runs = good_runs(tmp_path / "runs")
    for d in runs:  # one theorem gained: +1/−0 of 30
        p = d / EXPERT
        c = json.loads(p.read_text())
        for row in c["per_theorem"]:
            if row["theorem"] in {"p12", "p13", "p14"}:
                row.update(budget_at_proof=None, solved=False)
        p.write_text(json.dumps(c))
    r = judge(criterion(tmp_path, pool_margin=5.0), runs)
    assert not r["qualifies"]
    assert [s["checks"][0]["difference"] for s in r["seeds"]] == [pytest.approx(100 / 30)] * 3
    assert all(s["checks"][0]["why"] == "d +3.33 below the margin +5.00" for s in r["seeds"])
    assert r["checks"][0]["seeds_passed"] == 0 and r["checks"][1]["seeds_passed"] == 3
    rc = cli_main(["study", "criterion", str(criterion(tmp_path, pool_margin=5.0)),
                   *map(str, runs)])  # fmt: skip
    assert rc == 1 and "qualifies=0" in capsys.readouterr().out


def test_the_mean_margin_is_a_check_of_its_own(tmp_path):
    """Every seed within a point of its twin, but no gain on the mean: not a qualifying design."""
    runs = [write_run(tmp_path / "runs", s, range(10, 15), range(10, 11), value=(10, 10, 8))
            for s in SEEDS]  # fmt: skip
    r = judge(criterion(tmp_path), runs)
    value = r["checks"][1]
    assert value["seeds_passed"] == 3 and value["mean"] == 0 and not value["mean_passed"]
    assert not r["qualifies"]


def test_a_seed_without_a_result_fails_every_check_saying_why(tmp_path):
    runs = good_runs(tmp_path / "runs")
    # seed 102: a guard stopped iteration 1's training (the run went on with iteration 0's model)
    (runs[1] / "results/compute.json").write_text(json.dumps(
        {"stopped": {"iter_1": {"step": 300, "reason": "joint step 300: the probe fell"}}}))  # fmt: skip
    # seed 103: the depth twin's eval is missing
    (runs[2] / "results/iter_1/eval_depth_twin.json").unlink()
    r = judge(criterion(tmp_path), runs)
    by_seed = {s["seed"]: s for s in r["seeds"]}
    assert by_seed[101]["passed"] and not r["qualifies"]
    stopped = by_seed[102]
    assert stopped["problems"] == [
        "a guard stopped a training: iter_1 (step 300: joint step 300: the probe fell)"
    ]
    assert [c["passed"] for c in stopped["checks"]] == [False, False]
    # seed 103 carries no seed in a readable file it misses, so it is found by its other files
    missing = by_seed[103]
    assert any("eval_depth_twin.json: not a readable JSON file" in p for p in missing["problems"])
    assert missing["checks"][1] == {"name": VALUE_NAME, "passed": False, "difference": None,
                                    "why": "no result"}  # fmt: skip


def test_last_is_the_runs_last_iteration(tmp_path):
    runs = [write_run(tmp_path / "runs", s, range(10, 15), range(10, 11), last=2) for s in SEEDS]
    r = judge(criterion(tmp_path), runs)
    assert r["qualifies"], r
    assert {s["last_iteration"] for s in r["seeds"]} == {2}
    assert r["seeds"][0]["checks"][1]["control"] == "results/iter_2/eval_no_ebm.json"
    assert r["seeds"][0]["checks"][0]["budget"] == [3, 3]


def test_seeds_the_criterion_does_not_name_are_refused_and_missing_ones_fail(tmp_path):
    runs = good_runs(tmp_path / "runs")
    other = write_run(tmp_path / "runs", 7, range(10, 15), range(10, 11))
    with pytest.raises(InputError, match=r"seed 7 is not one of the criterion's development seeds"):
        judge(criterion(tmp_path), [*runs, other])
    r = judge(criterion(tmp_path), runs[:2])
    assert r["missing_seeds"] == [103] and not r["qualifies"]


@pytest.mark.parametrize(
    ("edit", "key"),
    [
        (lambda c: c["checks"][0].pop("seed_margin"), "criterion.checks[0].seed_margin"),
        (lambda c: c["checks"][1].update(seed_margin="one"), "criterion.checks[1].seed_margin"),
        (
            lambda c: c["checks"][0]["comparison"].pop("measure"),
            "criterion.checks[0].comparison.varies",
        ),
        (lambda c: c.update(seeds=[101]), "criterion.seeds"),
        (lambda c: c["checks"][1].update(margin=1), "criterion.checks[1]"),
    ],
)
def test_a_bad_criterion_is_one_line_naming_the_key(tmp_path, edit, key):
    c = yaml.safe_load((REPO / "studies/pool-ei/criterion.yaml").read_text())
    edit(c["criterion"])
    path = tmp_path / "criterion.yaml"
    path.write_text(yaml.safe_dump(c))
    with pytest.raises(InputError) as e:
        judge(path, good_runs(tmp_path / "runs"))
    assert str(e.value).startswith(f"{path}: {key}: ") and "\n" not in str(e.value)
