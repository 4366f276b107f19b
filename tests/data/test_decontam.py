"""Decontamination: a benchmark statement planted in training data is caught, refused or dropped."""

from __future__ import annotations

import dataclasses
import json

import pytest

from burnqed.config import DataConfig
from burnqed.data.decontam import (
    BenchmarkIndex,
    ContaminationError,
    canonical_goals,
    canonical_state,
    canonical_statement,
    check_pairs,
    check_theorems,
)
from burnqed.data.proplogic import training_theorems
from burnqed.data.stage import build_search_pool, build_tactic_pairs
from burnqed.theorems import Theorem, read_theorems, write_theorems

BENCH = Theorem(
    name="mathd_algebra_10",
    formal_statement="theorem mathd_algebra_10 (x y : ℝ) [Fact (0 < x)] (h₀ : x ≠ 0)\n"
    "    (h₁ : y = 2 * x) : abs ((120 : ℝ) / 100 * 30 - 130) = 94 := by\n",
    split="test",
)


def test_a_statement_and_the_state_lean_prints_for_it_have_one_canonical_form():
    state = "x y : ℝ\ninst✝ : Fact (0 < x)\nh₀ : x ≠ 0\nh₁ : y = 2 * x\n⊢ |(120 : ℝ) / 100 * 30 - 130| = 94"
    # Lean prints `abs` as |·|: notation is not unfolded, so only the same text matches.
    assert canonical_statement(BENCH.formal_statement) == (
        "v0 : ℝ\n_ : Fact ( 0 < v0 )\n_ : v0 ≠ 0\nv1 : ℝ\n_ : v1 = 2 * v0\n"
        "⊢ abs ( ( 120 : ℝ ) / 100 * 30 - 130 ) = 94"
    )
    assert canonical_state(state) != canonical_statement(BENCH.formal_statement)
    assert canonical_state(
        state.replace("|(120 : ℝ) / 100 * 30 - 130|", "abs ((120 : ℝ) / 100 * 30 - 130)")
    ) == (canonical_statement(BENCH.formal_statement))
    # Grouping, line breaks inside a type, a case tag do not matter; every goal is read.
    assert canonical_goals("case h\np q : Prop\nh : p ∧\n  q\n⊢ q\n\np : Prop\n⊢ p") == [
        "v0 : Prop\nv1 : Prop\n_ : v1 ∧ v0\n⊢ v0",
        "v0 : Prop\n⊢ v0",
    ]
    assert canonical_statement("theorem t : ∀ (p : Prop), p → p := by") == "v0 : Prop\n_ : v0\n⊢ v0"
    assert canonical_statement("not a theorem") is None and canonical_state("no goals") is None


def test_the_index_matches_states_and_statements_of_any_name():
    index = BenchmarkIndex.from_theorems([BENCH], source="b")
    state = (
        "x y : ℝ\ninst✝ : Fact (0 < x)\nh₀ : x ≠ 0\nh₁ : y = 2 * x\n"
        "⊢ abs ((120 : ℝ) / 100 * 30 - 130) = 94"
    )
    assert index.match_state(state) == "mathd_algebra_10"
    assert index.match_state(state.replace("94", "95")) is None
    renamed = dataclasses.replace(BENCH, name="copy", formal_statement=BENCH.formal_statement
                                  .replace("mathd_algebra_10", "lean_workbook_77"))  # fmt: skip
    assert index.match_theorem(renamed) == "mathd_algebra_10"
    # A statement the parser cannot read still matches by its name-free text.
    odd = Theorem(
        name="o", formal_statement="theorem o {α : Type*} (f : α → α) (h : ∀ x, f x = x :"
    )
    assert canonical_statement(odd.formal_statement) is None
    odd_index = BenchmarkIndex.from_theorems([odd], source="b")
    assert odd_index.unparsed == 1
    assert odd_index.match_theorem(dataclasses.replace(odd, name="o2")) == "o"


@pytest.fixture
def planted(tmp_path):
    """Tactic pairs of 30 generated theorems and a benchmark file that states two of them."""
    from burnqed.data.proplogic import traced_pairs

    cfg = DataConfig.from_dict({"sources": [{"name": "proplogic", "format": "proplogic"}],
                                "benchmarks": [], "tokenizer": "bytes", "search_pool": [],
                                "proplogic": {"theorems": 30, "test_theorems": 5}})  # fmt: skip
    theorems = training_theorems(cfg.proplogic, seed=0)
    leaked = [theorems[3], theorems[17]]
    bench = [dataclasses.replace(t, name=f"bench_{k}", formal_statement=t.formal_statement
                                 .replace(t.name, f"bench_{k}"), split="test")
             for k, t in enumerate(leaked)]  # fmt: skip
    bench.append(Theorem(name="bench_other", formal_statement="theorem bench_other (p : Prop) "
                         "(h : p ∧ p ∧ p) : p ∨ p ∨ p := by\n"))  # fmt: skip
    path = tmp_path / "benchmarks" / "proplogic_test.jsonl"
    write_theorems(path, bench)
    return {"cfg": cfg, "pairs": traced_pairs(theorems, source="proplogic"), "bench": path,
            "leaked": {f"proplogic:{t.name}" for t in leaked}, "theorems": theorems}  # fmt: skip


def test_a_planted_benchmark_statement_in_tactic_pairs_is_caught(planted):
    index = BenchmarkIndex.load([planted["bench"]])
    with pytest.raises(ContaminationError) as e:
        check_pairs(planted["pairs"], index, mode="refuse", what="tactic pairs")
    msg = str(e.value)
    assert "2 theorem(s)" in msg and "data.decontamination: drop" in msg
    assert all(name in msg for name in planted["leaked"])

    kept, check = check_pairs(planted["pairs"], index, mode="drop", what="tactic pairs")
    names = set(kept.column("theorem").to_pylist())
    assert names.isdisjoint(planted["leaked"]) and len(names) == 28
    assert set(check.contaminated) == planted["leaked"]
    assert set(check.contaminated.values()) == {"proplogic_test:bench_0", "proplogic_test:bench_1"}
    assert check.rows_dropped == planted["pairs"].num_rows - kept.num_rows > 0
    assert check.theorems_checked == 30 and check.benchmark_statements == 3
    assert list(check.benchmarks) == [str(planted["bench"])]


def test_the_data_stage_refuses_or_drops_and_records_the_check(planted, tmp_path):
    cfg, out = planted["cfg"], tmp_path / "pairs"
    with pytest.raises(ContaminationError, match="state an evaluation-benchmark theorem"):
        build_tactic_pairs(out_train=out / "train.parquet", out_val=out / "val.parquet",
                           cfg=cfg, seed=0, eval_benchmarks=[planted["bench"]])  # fmt: skip
    assert not (out / "train.parquet").exists()

    drop = dataclasses.replace(cfg, decontamination="drop")
    summary = build_tactic_pairs(out_train=out / "train.parquet", out_val=out / "val.parquet",
                                 cfg=drop, seed=0, report=out / "report.json",
                                 eval_benchmarks=[planted["bench"]])  # fmt: skip
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))["decontamination"]
    assert report["mode"] == "drop" and report["contaminated_theorems"] == 2
    assert set(report["contaminated"]) == planted["leaked"]
    assert summary.train_theorems + summary.val_theorems == 28


def test_the_search_pool_is_decontaminated(planted, tmp_path):
    pool = tmp_path / "train_theorems.jsonl"
    write_theorems(pool, planted["theorems"])
    index = BenchmarkIndex.load([planted["bench"]])
    kept, check = check_theorems(planted["theorems"], index, mode="drop", what="search pool")
    leaked = {planted["theorems"][3].name, planted["theorems"][17].name}
    assert len(kept) == 28 and set(check.contaminated) == leaked
    assert leaked.isdisjoint(t.name for t in kept)
    cfg = dataclasses.replace(planted["cfg"], search_pool=({"benchmark": "x", "split": "y"},))
    write_theorems(tmp_path / "x_y.jsonl", planted["theorems"])
    with pytest.raises(ContaminationError, match="search pool"):
        build_search_pool(cfg=cfg, out=tmp_path / "pool.jsonl", seed=0,
                          benchmark_files=[tmp_path / "x_y.jsonl"],
                          eval_benchmarks=[planted["bench"]])  # fmt: skip
    n = build_search_pool(cfg=dataclasses.replace(cfg, decontamination="drop"),
                          out=tmp_path / "pool.jsonl", seed=0, report=tmp_path / "pool.json",
                          benchmark_files=[tmp_path / "x_y.jsonl"],
                          eval_benchmarks=[planted["bench"]])  # fmt: skip
    assert n == 28 == len(list(read_theorems(tmp_path / "pool.jsonl")))
    report = json.loads((tmp_path / "pool.json").read_text(encoding="utf-8"))
    assert report["decontamination"]["contaminated_theorems"] == 2


def test_a_missing_benchmark_is_named_before_any_work(tmp_path, planted):
    with pytest.raises(FileNotFoundError, match=r"nope\.jsonl: evaluation benchmark not found"):
        build_tactic_pairs(out_train=tmp_path / "t.parquet", out_val=tmp_path / "v.parquet",
                           cfg=planted["cfg"], seed=0, eval_benchmarks=[tmp_path / "nope.jsonl"])  # fmt: skip


def test_the_check_runs_before_the_token_length_filter(planted, tmp_path, monkeypatch):
    """A benchmark theorem whose root row is too long for max_tokens still loses its other rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from burnqed.data import stage
    from burnqed.data.schema import TACTIC_PAIR_SCHEMA

    leaked = planted["theorems"][3]
    # The root row's tactic is too long; the later row is short and is not a benchmark goal.
    rows = [("s:leak", _state_of(leaked), "simp [" +
             ", ".join(["foo"] * 200) + "]", 0),
            ("s:leak", "⊢ True", "trivial", 1),
            ("s:clean", "⊢ True ∧ True", "simp", 0)]  # fmt: skip
    table = pa.table({"source": ["s"] * 3, "theorem": [r[0] for r in rows],
                      "state_before": [r[1] for r in rows], "tactic": [r[2] for r in rows],
                      "state_after": ["no goals"] * 3, "depth": [r[3] for r in rows]},
                     schema=TACTIC_PAIR_SCHEMA)  # fmt: skip
    monkeypatch.setattr(stage, "read_source_pairs", lambda spec, cfg, seed: table)
    cfg = dataclasses.replace(planted["cfg"], decontamination="drop", max_tokens=400)
    out = tmp_path / "pairs"
    build_tactic_pairs(out_train=out / "train.parquet", out_val=out / "val.parquet", cfg=cfg,
                       seed=0, report=out / "report.json",
                       eval_benchmarks=[planted["bench"]])  # fmt: skip
    kept = {t for f in ("train", "val") for t in pq.read_table(out / f"{f}.parquet")
            .column("theorem").to_pylist()}  # fmt: skip
    assert kept == {"s:clean"}
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert report["decontamination"]["contaminated"] == {"s:leak": "proplogic_test:bench_0"}
    # The filters ran on what decontamination kept.
    assert report["filters"][0]["rows_in"] == 1


def _state_of(t: Theorem) -> str:
    """The proof state Lean prints for a `theorem name (x : T) … : goal` statement of proplogic."""
    from burnqed.data.proplogic import traced_pairs

    pairs = traced_pairs([t], source="x").to_pylist()
    return min(pairs, key=lambda r: r["depth"])["state_before"]


def test_subscript_digits_outside_a_name_are_tokens_not_a_crash():
    """ProofNet's ``⋃₀ s`` (the union of a set of sets) once crashed the tokenizer: ``₀`` is a digit
    to ``str.isdigit`` but not a number."""
    from burnqed.data.canonical import canonical_statement, tokenize

    assert tokenize("(⋃₀ s) = ∅ ∨ ⋂₀ s = ⊤ ∨ x ₀") == [
        "(", "⋃₀", "s", ")", "=", "∅", "∨", "⋂₀", "s", "=", "⊤", "∨", "x", "₀",
    ]  # fmt: skip
    stmt = "theorem t : ∀ X : Type, ∀ s : Set (Set X), (⋃₀ s) = ∅ → s ⊆ {∅} :="
    assert canonical_statement(stmt) == (
        "v1 : Type\nv0 : Set ( Set v1 )\n_ : ( ⋃₀ v0 ) = ∅\n⊢ v0 ⊆ { ∅ }"
    )
