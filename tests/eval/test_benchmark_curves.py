"""Expert iteration against search only on the benchmark, Polu et al.'s Fig. 2 form
(burnqed.eval.benchmark_curves), on synthetic evals — eval JSONs with their trajectories beside, as
the eval stage writes them: the union of every iteration's eval against iteration 0's model
evaluated again with fresh samples, iteration 0's eval both arms' first step, the arms as curves
the study reads as a `benchmark curve`, and what is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from burnqed.config import InputError
from burnqed.data.benchmarks import sha256_file
from burnqed.eval import benchmark_curves as bc
from burnqed.eval.compute import CURVE_KIND, EXPERT, SEARCH_ONLY
from burnqed.study.analysis import measure_problems
from burnqed.study.registration import BENCHMARK_CURVE, EVAL, POOL_CURVE
from tests.eval.searches import write_pool, write_search

BENCH = list("abcdef")
SEARCH = {"max_nodes": 100, "attempts": 1}
EVAL_CFG = {"budgets": [50, 100], "pass_n": 1, "benchmark": "proplogic"}
ITER_0 = {"path": "models/iter_0/merged", "sha256": "0" * 64}


def write_eval(
    path: Path, bench: Path, rows: list[tuple], *, model: dict = ITER_0, ebm: str | None = None,
    salt: str | None = None, split: str = "test", search: dict | None = None,
) -> Path:  # fmt: skip
    """An eval JSON at ``path`` and its trajectories beside it (``eval.json`` → ``eval/``)."""
    write_search(path.with_suffix(""), rows, model=model["path"], ebm=ebm, salt=salt)
    e = {
        "kind": "burnqed eval", "label": path.parent.name, "budget_factor": 1, "pass_n": 1,
        "benchmark": {"name": "proplogic", "split": split, "file": str(bench),
                      "sha256": sha256_file(bench)},
        "provenance": {"model": model, "ebm": {"path": ebm, "sha256": "e"} if ebm else None,
                       "config": {"search": search or SEARCH, "eval": EVAL_CFG},
                       "seeds": {"seed": 3, "seed_salt": salt}},
    }  # fmt: skip
    path.write_text(json.dumps(e))
    return path


@pytest.fixture
def run_evals(tmp_path: Path) -> dict:
    """A benchmark of 6.  Iteration 0's eval proves a, b; iteration 1's (its model and value
    model) b, c, d; iteration 0's model again with fresh samples a, e."""
    bench = write_pool(tmp_path / "bench.jsonl", BENCH)
    r = tmp_path / "results"
    for d in ("iter_0", "iter_1"):
        (r / d).mkdir(parents=True)
    fail = [(t, "failed", 10, 100) for t in BENCH]

    def rows(proved: str) -> list[tuple]:
        return [
            (t, "proved", 4, 40) if t in proved else f for t, f in zip(BENCH, fail, strict=True)
        ]

    iter_1 = {"path": "models/iter_1/merged", "sha256": "1" * 64}
    expert = [
        write_eval(r / "iter_0" / "eval.json", bench, rows("ab")),
        write_eval(r / "iter_1" / "eval.json", bench, rows("bcd"), model=iter_1,
                   ebm="models/iter_1/ebm"),
    ]  # fmt: skip
    again = write_eval(r / "iter_1" / "eval_search_only.json", bench, rows("ae"),
                       salt="eval_search_only/iter_1")  # fmt: skip
    return {"benchmark": bench, "expert": expert, "search_only": [again]}


def test_each_arm_unions_its_evals_and_iteration_0s_is_both_arms_first_step(run_evals):
    r = bc.benchmark_curves(**run_evals, seed=3)
    ei, so = r["arms"][EXPERT], r["arms"][SEARCH_ONLY]
    assert [p["proved"] for p in r["curves"][EXPERT]] == [2, 4]  # a b | + c d
    assert [p["proved"] for p in r["curves"][SEARCH_ONLY]] == [2, 3]  # a b | + e
    assert [p["nodes_expanded"] for p in r["curves"][EXPERT]] == [48, 90]
    assert {x["theorem"]: x["budget_at_proof"] for x in ei["per_theorem"]} == {
        "a": 1, "b": 1, "c": 2, "d": 2, "e": None, "f": None,
    }  # fmt: skip
    assert so["solved_theorems"] == ["a", "b", "e"] and ei["budgets"] == so["budgets"] == [1, 2]
    assert ei["status"]["label"] == "complete 6/6"
    assert ei["status"]["denominator"] == "the 6 theorems of proplogic_test"
    assert ei["budget_unit"] == bc.BUDGET_UNIT
    assert ei["provenance"]["model"]["path"] == "models/iter_1/merged"
    assert so["provenance"]["model"]["path"] == "models/iter_0/merged"
    assert so["provenance"]["ebm"] is None
    assert so["provenance"]["seed_salts"] == [[None], ["eval_search_only/iter_1"]]
    (t,) = r["paired"]
    assert (t["iteration"], t["gained"], t["lost"]) == (1, 2, 1)  # c, d against e
    assert r["evals"][SEARCH_ONLY][0] == str(run_evals["expert"][0])


def test_the_arms_are_benchmark_curves_on_a_confirmation_benchmark_and_nothing_else(run_evals):
    arm = bc.benchmark_curves(**run_evals)["arms"][EXPERT]
    assert arm["kind"] == CURVE_KIND
    assert arm["benchmark"]["role"] == "confirmation" and arm["benchmark"]["split"] == "test"
    assert measure_problems("x", arm, BENCHMARK_CURVE) == []
    assert measure_problems("x", arm, POOL_CURVE) == [
        "x is a pool curve on proplogic (role 'confirmation'), not the search pool"
    ]
    assert measure_problems("x", arm, EVAL) == ["x is on proplogic_test (confirmation)"]
    # an eval given as a benchmark curve is none; a curve on the development split is refused
    e = json.loads(run_evals["expert"][1].read_text())
    assert (
        "is not a benchmark curve (kind 'burnqed eval')"
        in measure_problems("y", e, BENCHMARK_CURVE)[0]
    )
    dev = {**arm, "benchmark": {**arm["benchmark"], "split": "dev", "role": "development"}}
    assert measure_problems("z", dev, BENCHMARK_CURVE) == [
        "z is a benchmark curve on proplogic (role 'development'), not a confirmation benchmark"
    ]


def test_run_writes_both_arms_the_report_and_its_section(run_evals, tmp_path):
    out = tmp_path / "compute"
    arms = {EXPERT: out / "benchmark_expert_iteration.json",
            SEARCH_ONLY: out / "benchmark_search_only.json"}  # fmt: skip
    bc.run(**run_evals, out_json=out / "benchmark.json", out_md=out / "benchmark.md",
           out_arms=arms, seed=3)  # fmt: skip
    body = json.loads((out / "benchmark.json").read_text())
    assert body["kind"] == bc.KIND and "arms" not in body
    assert body["arm_files"] == {k: str(v) for k, v in arms.items()}
    assert json.loads(arms[EXPERT].read_text())["solved_theorems"] == ["a", "b", "c", "d"]
    md = (out / "benchmark.md").read_text()
    assert md.startswith("## Search only on the benchmark")
    assert "| 1 | 4/6 | 66.7% | 90 | 0 | 3/6 | 50.0% | 96 |" in md
    with pytest.raises(InputError, match="out_arms: no file for search only"):
        bc.run(**run_evals, out_json=out / "x.json", out_md=out / "x.md",
               out_arms={EXPERT: out / "x"})  # fmt: skip


def test_an_iteration_whose_training_stopped_is_named(run_evals):
    e = json.loads(run_evals["expert"][1].read_text())
    e["provenance"]["model"]["training_stopped"] = {"step": 3, "reason": "probe fell"}
    run_evals["expert"][1].write_text(json.dumps(e))
    r = bc.benchmark_curves(**run_evals)
    assert r["stopped"] == {"iter_1": {"step": 3, "reason": "probe fell"}}
    assert r["arms"][EXPERT]["provenance"]["training_stopped"] == r["stopped"]
    assert "iter_1's model is the previous iteration's" in bc.benchmark_markdown(r)


def _rewrite(path: Path, **changes) -> None:
    e = json.loads(path.read_text())
    for dotted, value in changes.items():
        *keys, last = dotted.split("__")
        d = e
        for k in keys:
            d = d[k]
        d[last] = value
    path.write_text(json.dumps(e))


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"provenance__model": {"path": "models/iter_1/merged", "sha256": "1" * 64}},
         "evaluates models/iter_1/merged, not iteration 0's model"),
        ({"provenance__ebm": {"path": "models/iter_1/ebm", "sha256": "e"}},
         r"with a value model \(models/iter_1/ebm\)"),
        ({"provenance__seeds__seed_salt": None}, "draws the samples of .*iter_0/eval.json"),
        ({"benchmark__sha256": "f" * 64}, "not of .*bench.jsonl"),
        ({"provenance__config__search": {**SEARCH, "max_nodes": 200}},
         r"other settings than .*iter_0/eval.json \(search\)"),
    ],
)  # fmt: skip
def test_a_search_only_eval_that_is_not_a_fresh_search_of_iteration_0s_model_is_refused(
    run_evals, change, match
):
    _rewrite(run_evals["search_only"][0], **change)
    with pytest.raises(InputError, match=match):
        bc.benchmark_curves(**run_evals)


def test_one_search_only_eval_per_iteration_after_0(run_evals):
    with pytest.raises(InputError, match=r"2 eval\(s\) of expert iteration .* and 0 search-only"):
        bc.benchmark_curves(**{**run_evals, "search_only": []})
    with pytest.raises(InputError, match="no eval of iteration 0"):
        bc.benchmark_curves(benchmark=run_evals["benchmark"], expert=[], search_only=[])
    with pytest.raises(InputError, match="cannot read the eval"):
        bc.benchmark_curves(**{**run_evals, "search_only": [Path("nowhere.json")]})
