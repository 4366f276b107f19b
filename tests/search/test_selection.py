"""Search-pool selection between iterations: exclusions in order, counts, seeded sampling, and the
stage over a real trajectory directory and the propositional REPL's probe tactics."""

from __future__ import annotations

import asyncio
import json
import sys

from burnqed.config import SearchConfig
from burnqed.policy import SamplingParams
from burnqed.search.selection import proved_theorems, run, select_pool
from burnqed.search.stage import search_to_dir
from burnqed.theorems import Theorem, read_theorems, write_theorems
from burnqed.trajectory import read_summary, search_part_dirs
from tests.search.fakes import RandomToyPolicy, ToyEnv, toy_theorems


def _t(name: str, depth: int | None = None, stmt: str = "∀ (p : Prop), p → p") -> Theorem:
    proof = None if depth is None else tuple(["intro p h"] + ["exact h"] * (depth - 1))
    return Theorem(name=name, formal_statement=f"theorem {name} : {stmt} := by\n", proof=proof)


def test_exclusions_apply_in_order_and_are_counted():
    pool = [_t("a", 3), _t("b", 1), _t("c", 4), _t("d", None), _t("e", 5), _t("f", 2)]
    kept, counts = select_pool(
        pool, proved={"a", "b"}, probe_solved={"c", "b"}, min_depth=1, pool_size=None, seed=0
    )
    assert [t.name for t in kept] == ["d", "e", "f"]
    # b is proved AND shallow AND probe-solved: counted once, under the first exclusion.
    assert counts == {
        "pool": 6,
        "proved": 2,
        "shallow": 0,
        "probe": 1,
        "sampled_out": 0,
        "selected": 3,
    }
    kept, counts = select_pool(
        pool, proved=set(), probe_solved=set(), min_depth=2, pool_size=None, seed=0
    )
    assert counts["shallow"] == 2 and [t.name for t in kept] == ["a", "c", "d", "e"]


def test_sampling_is_seeded_and_keeps_pool_order():
    pool = [_t(f"t{i}", 3) for i in range(50)]
    a, ca = select_pool(pool, proved=set(), probe_solved=set(), min_depth=1, pool_size=10, seed=4)
    b, _ = select_pool(pool, proved=set(), probe_solved=set(), min_depth=1, pool_size=10, seed=4)
    c, _ = select_pool(pool, proved=set(), probe_solved=set(), min_depth=1, pool_size=10, seed=5)
    assert a == b and a != c and len(a) == 10 and ca["sampled_out"] == 40
    assert [t.name for t in a] == sorted((t.name for t in a), key=lambda n: int(n[1:]))


def _toy_search(out, theorems):
    cfg = SearchConfig(max_nodes=40, max_depth=30, num_candidates=4, concurrency=4, timeout_s=60)
    asyncio.run(
        search_to_dir(
            theorems,
            RandomToyPolicy(seed=9),
            ToyEnv(),
            cfg,
            out,
            sampling=SamplingParams(n=4, temperature=1.0),
        )
    )


def test_proved_theorems_reads_shards_and_counts_only_verified_proofs(tmp_path):
    theorems = toy_theorems(24, seed=5, low=3, high=14)
    root = tmp_path / "search"
    _toy_search(root / "shard_0", theorems[:12])
    _toy_search(root / "shard_1", theorems[12:])
    assert search_part_dirs(root) == [root / "shard_0", root / "shard_1"]
    expected = set()
    for d in search_part_dirs(root):
        for r in read_summary(d).table.to_pylist():
            if r["status"] == "proved" and r["verified"]:
                expected.add(r["theorem"])
    proved, skipped = proved_theorems([root])
    assert proved == expected and 0 < len(proved) < 24 and skipped == []


def test_stage_over_a_real_search_and_the_propositional_repl(tmp_path):
    theorems = toy_theorems(12, seed=5, low=3, high=14)
    earlier = tmp_path / "iter_0" / "search"
    _toy_search(earlier, theorems)
    proved, _ = proved_theorems([earlier])
    # The pool: the toy theorems' names with propositional statements, one closed by `trivial`,
    # one by `assumption`... and one of depth 1 (shallow).
    pool = [_t(t.name, 3, "∀ (p q : Prop), p → q → p ∧ q") for t in theorems]
    pool.append(_t("triv", 3, "True"))
    pool.append(_t("shallow", 1))
    write_theorems(tmp_path / "pool.jsonl", pool)
    out = tmp_path / "iter_1" / "search_pool.jsonl"
    counts = run(
        pool=tmp_path / "pool.jsonl",
        earlier=[earlier],
        out=out,
        cfg={"pool_size": None, "pool_min_depth": 1, "probe_tactics": ["trivial", "assumption"]},
        lean={
            "repl_command": [sys.executable, "-m", "burnqed.proplogic"],
            "imports": [],
            "workers": 1,
            "ready_timeout_s": 20,
        },
        seed=0,
    )
    names = [t.name for t in read_theorems(out)]
    assert counts["proved"] == len(proved) > 0
    assert counts["shallow"] == 1 and counts["probe"] == 1  # `True` falls to `trivial`
    assert set(names) == {t.name for t in theorems} - proved
    meta = json.loads((tmp_path / "iter_1" / "search_pool.jsonl.meta.json").read_text())
    assert meta["counts"] == counts and meta["probe_tactics"] == ["trivial", "assumption"]
