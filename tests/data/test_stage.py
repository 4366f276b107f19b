"""The data stage end to end: sources → filtered, split tactic pairs; benchmarks; pool."""

from __future__ import annotations

import dataclasses
import json
import logging
import sys
import types
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from burnqed.config import DataConfig
from burnqed.data.filters import unprefixed
from burnqed.data.readers import DataFormatError
from burnqed.data.schema import TACTIC_PAIR_SCHEMA
from burnqed.data.stage import build_search_pool, build_tactic_pairs, run
from burnqed.theorems import read_theorems

from .conftest import lean_github_row, leandojo_theorem, write_lean_github, write_leandojo

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def sources(tmp_path, workbook_records):
    """A LeanDojo directory, a Lean-Github parquet and a Lean Workbook file with known defects."""
    clean = [
        leandojo_theorem(
            f"Thm.t{i}",
            [
                (f"n : ℕ\n⊢ n + {i} = {i} + n", "omega", "no goals"),
                (f"⊢ p{i}", f"exact h{i}", "no goals"),
            ],
        )
        for i in range(40)
    ]
    train = [
        *clean,
        leandojo_theorem("Thm.only_sorry", [("x : ℕ\n⊢ x = x", "sorry", "no goals")]),
        leandojo_theorem(
            "Thm.late_admit",
            [
                ("⊢ a ∧ b", "constructor", "case left\n⊢ a\n\ncase right\n⊢ b"),
                ("case left\n⊢ a\n\ncase right\n⊢ b", "admit", "case right\n⊢ b"),
            ],
        ),
        leandojo_theorem(
            "Thm.dup", [("⊢ q", "exact hq", "no goals"), ("⊢ q", "exact hq", "no goals")]
        ),
        leandojo_theorem("Thm.empty", [("⊢ r", "   ", "no goals")]),
        leandojo_theorem("Thm.huge", [("⊢ " + "x + " * 400 + "x = x", "ring", "no goals")]),
    ]
    ld = write_leandojo(
        tmp_path / "leandojo",
        {"train": train, "val": [leandojo_theorem("Thm.v", [("⊢ True", "trivial", "no goals")])]},
    )
    # Same name and pair as a LeanDojo theorem: source-prefixed keys keep both.
    gh = write_lean_github(
        tmp_path / "lean-github.parquet",
        [
            lean_github_row("a/b", "Thm.t0", "n : ℕ\n⊢ n + 0 = 0 + n", "omega", "no goals"),
            lean_github_row("a/b", "Gh.cheat", "⊢ s", "cheat", "no goals"),
        ],
    )
    wb = tmp_path / "lean_workbook.json"
    wb.write_text(json.dumps(workbook_records, ensure_ascii=False), encoding="utf-8")
    return [
        {"name": "leandojo", "format": "leandojo", "path": str(ld)},
        {"name": "github", "format": "lean_github", "path": str(gh)},
        {"name": "workbook", "format": "lean_workbook", "path": str(wb)},
    ]


def test_tactic_pairs_filtered_and_split_by_theorem(tmp_path, sources, caplog):
    caplog.set_level(logging.INFO, logger="burnqed.data")
    cfg = DataConfig.from_dict(
        {"sources": sources, "tokenizer": "bytes", "max_tokens": 400, "val_fraction": 0.2}
    )
    out = tmp_path / "data" / "tactic_pairs"
    summary = build_tactic_pairs(
        out_train=out / "train.parquet",
        out_val=out / "val.parquet",
        cfg=cfg,
        seed=0,
        report=out / "filter_report.json",
    )
    train, val = pq.read_table(out / "train.parquet"), pq.read_table(out / "val.parquet")
    assert train.schema == TACTIC_PAIR_SCHEMA == val.schema
    assert (
        pq.ParquetFile(out / "train.parquet").metadata.row_group(0).column(0).compression == "ZSTD"
    )
    train_thms, val_thms = (
        set(train.column("theorem").to_pylist()),
        set(val.column("theorem").to_pylist()),
    )
    everything = train_thms | val_thms
    # The theorem whose only tactic is `sorry` is absent entirely, as is every step of a theorem
    # with one `admit`/`cheat`.
    for name in ("leandojo:Thm.only_sorry", "leandojo:Thm.late_admit", "github:Gh.cheat"):
        assert name not in everything
    for t in (train, val):
        assert not any(
            w in tac for tac in t.column("tactic").to_pylist() for w in ("sorry", "admit", "cheat")
        )
    assert not train_thms & val_thms
    assert val_thms and train_thms
    assert {"leandojo:Thm.t0", "github:Thm.t0"} <= everything  # prefixed keys: not merged
    # ... but split by the unprefixed name, so the same theorem never sits on both sides.
    assert ("leandojo:Thm.t0" in val_thms) == ("github:Thm.t0" in val_thms)
    assert not {unprefixed(t) for t in train_thms} & {unprefixed(t) for t in val_thms}
    assert "leandojo:Thm.empty" not in everything and "leandojo:Thm.huge" not in everything
    dup_rows = [
        r for t in (train, val) for r in t.to_pylist() if r["theorem"] == "leandojo:Thm.dup"
    ]
    assert len(dup_rows) == 1
    # 40×2 clean + 1 sorry + 2 admit + 2 dup + 1 empty + 1 huge + 1 val-file = 88 LeanDojo rows;
    # 2 Lean-Github rows; 1 proved workbook record.
    assert summary.source_rows == {"leandojo": 88, "github": 2, "workbook": 1}
    expected = {
        "banned_words": (4, 3, 87),
        "empty": (1, 1, 86),
        "dedup": (1, 0, 85),
        "max_tokens": (1, 1, 84),
    }
    got = {s.name: (s.rows_dropped, s.theorems_dropped, s.rows_left) for s in summary.filters}
    assert got == expected
    for name, (rows, thms, left) in expected.items():
        assert f"filter {name}: dropped {rows} rows ({thms} theorems), {left} left" in caplog.text
    assert train.num_rows + val.num_rows == 84
    report = json.loads((out / "filter_report.json").read_text())
    assert [(f["name"], f["rows_dropped"]) for f in report["filters"]] == [
        (k, v[0]) for k, v in expected.items()
    ]
    assert report["val_theorems"] == len(val_thms) and report["seed"] == 0
    assert report["config"]["tokenizer"] == "bytes"


def test_the_split_does_not_depend_on_the_seed_being_fixed_elsewhere(tmp_path, sources):
    cfg = DataConfig.from_dict({"sources": sources, "tokenizer": "bytes", "val_fraction": 0.3})
    sides = []
    for seed in (0, 0, 1):
        d = tmp_path / str(len(sides))
        build_tactic_pairs(out_train=d / "t.parquet", out_val=d / "v.parquet", cfg=cfg, seed=seed)
        sides.append(set(pq.read_table(d / "v.parquet").column("theorem").to_pylist()))
    assert sides[0] == sides[1] and sides[0] != sides[2]


def test_search_pool_from_a_benchmark_split_and_a_source(tmp_path, sources, minif2f_path):
    cfg = DataConfig.from_dict(
        {
            "sources": sources,
            "benchmarks": ["minif2f"],
            "tokenizer": "bytes",
            "search_pool": [{"benchmark": "minif2f", "split": "valid"}, {"source": "workbook"}],
        }
    )
    raw = tmp_path / "data" / "raw" / "benchmarks"
    raw.mkdir(parents=True)
    (raw / "minif2f.jsonl").write_bytes(minif2f_path.read_bytes())
    run(
        cfg=cfg,
        seed=0,
        raw_benchmarks_dir=raw,
        benchmarks_dir=tmp_path / "data" / "benchmarks",
        pairs_dir=tmp_path / "data" / "tactic_pairs",
        search_pool=tmp_path / "data" / "theorems" / "pool.jsonl",
    )
    pool = list(read_theorems(tmp_path / "data" / "theorems" / "pool.jsonl"))
    assert len(pool) == 244 + 2
    assert {t.split for t in pool[:244]} == {"valid"}
    assert [t.name for t in pool[244:]] == ["lean_workbook_7032", "lean_workbook_plus_49452"]
    assert len(list(read_theorems(tmp_path / "data" / "benchmarks" / "minif2f_test.jsonl"))) == 244
    assert (tmp_path / "data" / "tactic_pairs" / "filter_report.json").exists()

    gone = DataConfig.from_dict({"sources": [{**sources[0], "path": str(tmp_path / "nowhere")}]})
    with pytest.raises(
        DataFormatError, match=r"data.sources\['leandojo'\].*nowhere does not exist"
    ):
        build_tactic_pairs(
            out_train=tmp_path / "t.parquet", out_val=tmp_path / "v.parquet", cfg=gone, seed=0
        )
    assert not (tmp_path / "t.parquet").exists()
    bad = DataConfig.from_dict({"sources": sources, "search_pool": [{"source": "leandojo"}]})
    with pytest.raises(DataFormatError, match=r"'leandojo'.*no theorem statements"):
        build_search_pool(cfg=bad, benchmarks_dir=tmp_path, out=tmp_path / "p.jsonl", seed=0)
    missing = DataConfig.from_dict({"search_pool": [{"benchmark": "minif2f", "split": "test"}]})
    with pytest.raises(DataFormatError, match=r"search_pool\[0\]: .*minif2f_test\.jsonl not found"):
        build_search_pool(
            cfg=missing, benchmarks_dir=tmp_path / "nowhere", out=tmp_path / "p.jsonl", seed=0
        )


def _stand_in_generate(n, *, seed, min_depth, max_depth, variables, prefix="prop"):
    """The generator's contract, with a deliberately small formula space so statements repeat."""
    import random

    from burnqed.theorems import Theorem

    rng = random.Random(seed)
    names = "pqrstuvw"[:variables]
    out = []
    for i in range(n):
        depth = rng.randint(min_depth, max_depth)
        premises = [rng.choice(names) for _ in range(depth)]
        goal = " → ".join([*premises, premises[-1]])
        binders = " ".join(sorted(set(premises)))
        out.append(
            Theorem(
                name=f"{prefix}_{i}",
                formal_statement=f"theorem {prefix}_{i} : ∀ ({binders} : Prop), {goal} := by\n",
                proof=("intros", "assumption"),
            )
        )
    return out


def _stand_in_trace(theorems, *, source="proplogic"):
    """The tracer's contract: one pair per proof step (names left unprefixed, which is allowed)."""
    rows = [
        {
            "source": source,
            "theorem": t.name,
            "state_before": f"⊢ {t.formal_statement} #{d}",
            "tactic": tac,
            "state_after": "no goals",
            "depth": d,
        }
        for t in theorems
        for d, tac in enumerate(t.proof)
    ]
    return pa.Table.from_pylist(rows)


def test_proplogic_path_with_stand_in_generator_and_tracer(tmp_path, monkeypatch):
    """The demo's data config, with stand-ins for burnqed.proplogic's generator and tracer."""
    monkeypatch.setitem(
        sys.modules,
        "burnqed.proplogic.generator",
        types.SimpleNamespace(generate_theorems=_stand_in_generate),
    )
    monkeypatch.setitem(
        sys.modules,
        "burnqed.data.proplogic_trace",
        types.SimpleNamespace(trace_theorems=_stand_in_trace),
    )
    cfg = DataConfig.from_dict(
        {
            "sources": [{"name": "proplogic", "format": "proplogic", "path": None}],
            "benchmarks": [],
            "search_pool": [{"benchmark": "proplogic", "split": "valid"}],
            "tokenizer": "bytes",
            "val_fraction": 0.1,
            "proplogic": {
                "theorems": 50,
                "min_depth": 1,
                "max_depth": 4,
                "variables": 6,
                "test_theorems": 8,
            },
        }
    )
    d = tmp_path / "data"
    run(
        cfg=cfg,
        seed=0,
        raw_benchmarks_dir=d / "raw",
        benchmarks_dir=d / "benchmarks",
        pairs_dir=d / "tactic_pairs",
        search_pool=d / "theorems" / "search_pool.jsonl",
    )
    train = pq.read_table(d / "tactic_pairs" / "train.parquet")
    val = pq.read_table(d / "tactic_pairs" / "val.parquet")
    assert train.num_rows + val.num_rows == 100  # 50 theorems × 2 steps, nothing filtered
    assert all(n.startswith("proplogic:prop_") for n in train.column("theorem").to_pylist())
    splits = {
        s: list(read_theorems(d / "benchmarks" / f"proplogic_{s}.jsonl")) for s in ("valid", "test")
    }
    assert {s: len(v) for s, v in splits.items()} == {"valid": 8, "test": 8}
    assert {t.split for t in splits["test"]} == {"test"}
    pool = list(read_theorems(d / "theorems" / "search_pool.jsonl"))
    assert [t.name for t in pool] == [t.name for t in splits["valid"]]
    from burnqed.data.proplogic import statement_body, training_theorems

    bodies = {s: {statement_body(t) for t in v} for s, v in splits.items()}
    training = {statement_body(t) for t in training_theorems(cfg.proplogic, seed=0)}
    assert len(bodies["valid"]) == 8 and len(bodies["test"]) == 8  # no repeats within a split
    assert (
        not bodies["valid"] & bodies["test"] and not (bodies["valid"] | bodies["test"]) & training
    )
    meta = json.loads((d / "benchmarks" / "proplogic_test.meta.json").read_text())
    assert meta["rows"] == 8 and meta["source_sha256"] is None and meta["generator"]["seed"] == 0
    # A {source: proplogic} pool entry means the training theorems themselves.
    src_cfg = DataConfig.from_dict({**cfg.to_dict(), "search_pool": [{"source": "proplogic"}]})
    assert (
        build_search_pool(
            cfg=src_cfg, benchmarks_dir=d / "benchmarks", out=tmp_path / "p.jsonl", seed=0
        )
        == 50
    )


def test_proplogic_source_benchmark_and_pool(tmp_path):
    cfg = DataConfig.from_dict(
        {
            "sources": [{"name": "proplogic", "format": "proplogic"}],
            "benchmarks": [],
            "search_pool": [{"source": "proplogic"}],
            "tokenizer": "bytes",
            "val_fraction": 0.1,
            "proplogic": {
                "theorems": 60,
                "min_depth": 1,
                "max_depth": 3,
                "variables": 3,
                "test_theorems": 10,
            },
        }
    )
    d = tmp_path / "data"
    run(
        cfg=cfg,
        seed=0,
        raw_benchmarks_dir=d / "raw",
        benchmarks_dir=d / "benchmarks",
        pairs_dir=d / "tactic_pairs",
        search_pool=d / "theorems" / "search_pool.jsonl",
    )
    train = pq.read_table(d / "tactic_pairs" / "train.parquet")
    assert train.num_rows > 0 and all(
        n.startswith("proplogic:") for n in train.column("theorem").to_pylist()
    )
    test = list(read_theorems(d / "benchmarks" / "proplogic_test.jsonl"))
    assert len(list(read_theorems(d / "benchmarks" / "proplogic_valid.jsonl"))) == len(test)
    pool = list(read_theorems(d / "theorems" / "search_pool.jsonl"))
    assert 0 < len(test) <= 10 and len(pool) == 60
    meta = json.loads((d / "benchmarks" / "proplogic_test.meta.json").read_text())
    assert meta["rows"] == len(test) and meta["source_sha256"] is None
    from burnqed.data.proplogic import statement_body

    assert not {statement_body(t) for t in test} & {statement_body(t) for t in pool}


def test_the_dev_split_is_drawn_after_pool_and_test_and_apart_from_everything(tmp_path, caplog):
    """proplogic_dev (issue 44 §1): drawn after valid and test from the test split's depths,
    it changes no byte of them, and no dev theorem equals a training, pool, test or other dev
    theorem in canonical form (the candidates that do are dropped on the dev side)."""
    from burnqed.config import ProplogicConfig
    from burnqed.data.benchmarks import build_proplogic_benchmark
    from burnqed.data.canonical import theorem_keys
    from burnqed.data.proplogic import training_theorems

    # Short proofs over few variables: the generator repeats itself, so the filter has work.
    cfg = ProplogicConfig(theorems=300, min_depth=1, max_depth=2, variables=2, test_theorems=40,
                          held_out_min_depth=2, held_out_max_depth=3)  # fmt: skip
    before = build_proplogic_benchmark(out_dir=tmp_path / "a", cfg=cfg, seed=4,
                                       splits=["valid", "test"])  # fmt: skip
    with caplog.at_level(logging.INFO, logger="burnqed.data.proplogic"):
        after = build_proplogic_benchmark(out_dir=tmp_path / "b", cfg=cfg, seed=4)
    assert "proplogic dev: 40 theorems (8 candidates equal to a training" in caplog.text
    assert [p.name for p in after] == ["proplogic_valid.jsonl", "proplogic_test.jsonl",
                                       "proplogic_dev.jsonl"]  # fmt: skip
    for a, b in zip(before, after, strict=False):
        assert a.read_bytes() == b.read_bytes()
        meta = a.with_suffix("").with_suffix(".meta.json").name
        assert (a.parent / meta).read_bytes() == (b.parent / meta).read_bytes()
    dev = list(read_theorems(after[2]))
    assert 0 < len(dev) <= 40 and {t.split for t in dev} == {"dev"}
    lo, hi = cfg.held_out_depths
    assert all(lo <= len(t.proof) <= hi for t in dev)  # proof: its tactics
    others = [*training_theorems(cfg, seed=4), *read_theorems(after[0]), *read_theorems(after[1])]
    seen = set().union(*(theorem_keys(t) for t in others))
    keys = [theorem_keys(t) for t in dev]
    assert all(not k & seen for k in keys)
    assert all(not keys[i] & keys[j] for i in range(len(keys)) for j in range(i))
    # Its size is its own knob.
    small = build_proplogic_benchmark(out_dir=tmp_path / "c", cfg=dataclasses.replace(
        cfg, dev_theorems=5), seed=4, splits=["dev"])  # fmt: skip
    assert len(list(read_theorems(small[0]))) == 5


def test_the_training_data_is_held_out_of_the_confirmation_benchmark_whatever_is_evaluated():
    """data.decontaminate_against is fixed apart from eval.benchmark: the dev overlay changes only
    what is evaluated (the dev split is decontaminated when it is drawn), and any other evaluated
    benchmark is held out of the training data too."""
    from burnqed.config import decontamination_benchmarks, load_params

    demo = load_params(REPO / "params.yaml", [REPO / "config/demo.yaml"])
    dev = load_params(REPO / "params.yaml", [REPO / "config/demo.yaml", REPO / "config/dev.yaml"])
    assert dev["eval"]["benchmark"] == "proplogic_dev" != demo["eval"]["benchmark"]
    assert decontamination_benchmarks(dev) == decontamination_benchmarks(demo) == ["proplogic_test"]
    for section in ("data", "model", "sft", "split", "ebm", "search", "lean", "policy"):
        assert dev[section] == demo[section], section  # the same models and searches
    real = load_params(REPO / "params.yaml")
    assert decontamination_benchmarks(real) == ["minif2f_test", "proofnet_valid"]
    other = {**real, "eval": {**real["eval"], "benchmark": "proofnet_test"}}
    assert decontamination_benchmarks(other) == ["minif2f_test", "proofnet_valid", "proofnet_test"]


def test_the_benchmark_seed_draws_test_and_dev_and_nothing_else():
    """params.yaml seeds.benchmark (issue 45 §1): the held-out evaluation sets change with it, the
    pool (valid) does not (nor the training theorems: held_out_splits draws them from ``seed``);
    equal to the data's seed, every byte is today's."""
    from burnqed.config import ProplogicConfig
    from burnqed.data.proplogic import development_split, held_out_splits

    cfg = ProplogicConfig(theorems=200, min_depth=1, max_depth=3, variables=3, test_theorems=20,
                          held_out_min_depth=3, held_out_max_depth=4)  # fmt: skip
    same = held_out_splits(cfg, seed=5)
    assert held_out_splits(cfg, seed=5, benchmark_seed=5) == same
    assert development_split(cfg, seed=5, benchmark_seed=5) == development_split(cfg, seed=5)
    other = held_out_splits(cfg, seed=5, benchmark_seed=6)
    assert other["valid"] == same["valid"] and other["test"] != same["test"]
    assert development_split(cfg, seed=5, benchmark_seed=6) != development_split(cfg, seed=5)


def test_the_pool_can_span_difficulty_and_the_benchmarks_keep_their_depths():
    """data.proplogic.pool_depths (issue 61: Polu's curriculum): the search pool
    (valid) takes depths of its own, graded from shallower to deeper than the benchmarks; the test
    and dev splits keep the held-out depths, still distinct from the pool; unset, every split is
    the one the held-out depths give."""
    from collections import Counter

    from burnqed.config import ConfigError, DataConfig, ProplogicConfig
    from burnqed.data.proplogic import development_split, held_out_splits, statement_body

    cfg = ProplogicConfig(theorems=200, min_depth=1, max_depth=3, variables=3, test_theorems=60,
                          held_out_min_depth=3, held_out_max_depth=4)  # fmt: skip
    plain = held_out_splits(cfg, seed=5)
    assert held_out_splits(dataclasses.replace(cfg, pool_depths=(3, 4)),
                           seed=5) == plain  # fmt: skip
    graded = dataclasses.replace(cfg, pool_depths=[2, 6])
    splits = held_out_splits(graded, seed=5)
    depths = Counter(len(t.proof) for t in splits["valid"])
    assert set(depths) == {2, 3, 4, 5, 6}, depths  # every depth of the range, shallow to deep
    assert all(3 <= len(t.proof) <= 4 for t in splits["test"])
    dev = development_split(graded, seed=5, held_out=splits)
    assert dev and all(3 <= len(t.proof) <= 4 for t in dev)
    pool = {statement_body(t) for t in splits["valid"]}
    assert not pool & {statement_body(t) for t in [*splits["test"], *dev]}
    with pytest.raises(ConfigError, match=r"proplogic\.pool_depths: \[min, max\] with min <= max"):
        DataConfig(proplogic={**dataclasses.asdict(cfg), "pool_depths": [7, 5]})
