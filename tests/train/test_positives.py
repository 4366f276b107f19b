"""Positive trajectory steps: only proved-and-verified proofs, deduplicated, split by theorem."""

from __future__ import annotations

import json

import pytest

from burnqed.split import TheoremSplit
from burnqed.train.positives import (
    read_positive_steps,
    split_steps_by_theorem,
    trajectory_dirs,
)
from tests.train.trajectories import Proof, write_search

A = [("p : Prop\n⊢ p → p", "intro h"), ("p : Prop\nh : p\n⊢ p", "exact h")]
B = [("p q : Prop\n⊢ p ∧ q → q", "intro h"), ("p q : Prop\nh : p ∧ q\n⊢ q", "exact h.2")]
C = [("q : Prop\n⊢ q → q ∨ q", "intro h"), ("q : Prop\nh : q\n⊢ q ∨ q", "left"),
     ("q : Prop\nh : q\n⊢ q", "exact h")]  # fmt: skip


def test_steps_are_the_proof_path_edges_of_verified_proofs(tmp_path):
    search = write_search(tmp_path / "iter_0" / "search", [Proof("a", A), Proof("c", C)])
    steps = read_positive_steps([search])
    rows = steps.table.to_pylist()
    assert [(r["theorem"], r["depth"], r["state_before"], r["tactic"]) for r in rows] == [
        ("a", 0, A[0][0], "intro h"), ("a", 1, A[1][0], "exact h"),
        ("c", 0, C[0][0], "intro h"), ("c", 1, C[1][0], "left"), ("c", 2, C[2][0], "exact h"),
    ]  # fmt: skip
    assert {r["source"] for r in rows} == {"iter_0/search"}  # dead-end siblings are not steps
    assert rows[-1]["state_after"] == "no goals"
    assert steps.counts["iter_0/search"] == {
        "attempts": 2, "proved_verified": 2, "proved_unverified": 0, "theorems_proved": 2,
        "steps": 5, "unique_steps": 5,
    }  # fmt: skip


def test_a_proof_that_failed_verification_contributes_nothing(tmp_path, caplog):
    rejected = Proof("b", B, status="proved", verified=False)  # the REPL's path, the file's veto
    failed = Proof("c", C, status="failed", verified=False)
    search = write_search(tmp_path / "iter_0" / "search", [Proof("a", A), rejected, failed])
    steps = read_positive_steps([search])
    assert set(steps.table.column("theorem").to_pylist()) == {"a"}
    assert steps.table.num_rows == len(A)
    counts = steps.counts["iter_0/search"]
    assert counts["proved_unverified"] == 1 and counts["proved_verified"] == 1
    assert "failed whole-proof verification" in caplog.text


def test_duplicates_count_once_for_the_earliest_search(tmp_path):
    s0 = write_search(tmp_path / "iter_0" / "search", [Proof("a", A)])
    noise = write_search(tmp_path / "iter_0" / "search_noise", [Proof("a", A), Proof("b", B)])
    s1 = write_search(tmp_path / "iter_1" / "search", [Proof("b", B, attempt=0),
                                                        Proof("b", B, attempt=1)])  # fmt: skip
    steps = read_positive_steps({"iter_0/search": s0, "iter_1/search": s1,
                                 "iter_0/search_noise": noise})  # fmt: skip
    assert steps.table.num_rows == len(A) + len(B)
    c = steps.counts
    assert (c["iter_0/search"]["steps"], c["iter_0/search"]["unique_steps"]) == (2, 2)
    assert (c["iter_1/search"]["steps"], c["iter_1/search"]["unique_steps"]) == (4, 2)
    assert (c["iter_0/search_noise"]["steps"], c["iter_0/search_noise"]["unique_steps"]) == (4, 0)


def test_shards_are_read_and_a_corrupt_part_is_skipped_and_reported(tmp_path):
    search = tmp_path / "iter_0" / "search"
    write_search(search / "shard_0", [Proof("a", A)])
    write_search(search / "shard_1", [Proof("b", B)])
    write_search(search / "shard_1", [Proof("c", C)], part=1)
    (search / "shard_1" / "nodes" / "part-000001.parquet").write_bytes(b"not parquet")
    steps = read_positive_steps([search])
    assert set(steps.table.column("theorem").to_pylist()) == {"a", "b"}
    assert len(steps.skipped) == 1 and "part-000001" in steps.skipped[0]
    assert steps.to_json()["skipped_parts"] == steps.skipped
    # The gathered manifest names the shards: a stale shard of another run is not read.
    write_search(search / "shard_7", [Proof("c", C)])
    assert "c" in set(read_positive_steps([search]).table.column("theorem").to_pylist())
    shards = ["results/iter_0/search/shard_0", "results/iter_0/search/shard_1"]
    (search / "manifest.json").write_text(json.dumps({"shards": shards}), encoding="utf-8")
    assert set(read_positive_steps([search]).table.column("theorem").to_pylist()) == {"a", "b"}


def test_a_missing_search_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="iter_0/search: no such search directory"):
        read_positive_steps([tmp_path / "iter_0" / "search"])


def test_trajectory_dirs_of_an_iteration():
    assert trajectory_dirs(0) == {}
    assert [str(d) for d in trajectory_dirs(2).values()] == [
        "results/iter_0/search", "results/iter_1/search", "results/iter_0/search_noise",
    ]  # fmt: skip


def test_split_by_theorem_keeps_a_theorem_on_one_side_every_time(tmp_path):
    proofs = [Proof(f"t{k}", [(f"x{k} : Prop\n" + s, t) for s, t in A]) for k in range(40)]
    table = read_positive_steps([write_search(tmp_path / "iter_0" / "search", proofs)]).table
    train, val, test = split_steps_by_theorem(table, TheoremSplit(0.25, 0.0, seed=0))
    tr, va = set(train.column("theorem").to_pylist()), set(val.column("theorem").to_pylist())
    assert tr.isdisjoint(va) and tr | va == {p.theorem for p in proofs}
    assert 3 <= len(va) <= 20 and test.num_rows == 0
    # A theorem's side depends on its name only: with half the theorems gone, the rest stay put.
    import pyarrow as pa
    import pyarrow.compute as pc

    keep = pa.array(sorted(tr | va)[:20])
    half = table.filter(pc.is_in(table.column("theorem"), value_set=keep))
    val_half = split_steps_by_theorem(half, TheoremSplit(0.25, 0.0, seed=0)).val
    assert set(val_half.column("theorem").to_pylist()) <= va
    # At least one held-out theorem whenever there are two.
    tiny_val = split_steps_by_theorem(table.slice(0, 4), TheoremSplit(0.01, 0.0, seed=0)).val
    assert tiny_val.num_rows > 0


def test_a_test_split_is_disjoint_and_leaves_the_validation_theorems_alone(tmp_path):
    proofs = [Proof(f"t{k}", [(f"x{k} : Prop\n" + s, t) for s, t in A]) for k in range(60)]
    table = read_positive_steps([write_search(tmp_path / "iter_0" / "search", proofs)]).table

    def names(t):
        return set(t.column("theorem").to_pylist())

    val_only = split_steps_by_theorem(table, TheoremSplit(0.2, 0.0, seed=0))
    split = split_steps_by_theorem(table, TheoremSplit(0.2, 0.2, seed=0))
    tr, va, te = names(split.train), names(split.val), names(split.test)
    assert va == names(val_only.val)  # adding a test split moves no validation theorem
    assert not (tr & va or tr & te or va & te) and tr | va | te == {p.theorem for p in proofs}
    assert 4 <= len(te) <= 24 and te <= names(val_only.train)
    assert split.train.num_rows + split.val.num_rows + split.test.num_rows == table.num_rows
    # Another seed, other theorems (the split is a hash of seed and name).
    assert names(split_steps_by_theorem(table, TheoremSplit(0.2, 0.2, seed=1)).test) != te
    # Three theorems and tiny fractions: one each; two: no test theorem (one must be trained on).
    three = table.filter(pc_is_in(table, ["t0", "t1", "t2"]))
    small = split_steps_by_theorem(three, TheoremSplit(0.01, 0.01, seed=0))
    assert [len(names(t)) for t in small] == [1, 1, 1]
    two = split_steps_by_theorem(
        table.filter(pc_is_in(table, ["t0", "t1"])), TheoremSplit(0.01, 0.01, seed=0)
    )
    assert [len(names(t)) for t in two] == [1, 1, 0]
    # A theorem the hash holds out stays held out (the value model holds it out too: burnqed.split),
    # even when that leaves nothing of these to train on; only a theorem a small-set rule held out
    # is given back to training.
    most = TheoremSplit(0.5, 0.49, seed=0)
    held = most.held_out(["t0", "t1", "t2"])
    split = split_steps_by_theorem(three, most)
    assert names(split.val) | names(split.test) >= held
    assert names(split.train) == {"t0", "t1", "t2"} - held


def pc_is_in(table, theorems):
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.is_in(table.column("theorem"), value_set=pa.array(theorems))
