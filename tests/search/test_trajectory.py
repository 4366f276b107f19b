"""Trajectory dataset: schema round trip, append-only parts, corrupt parts skipped and reported."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib

import pyarrow.parquet as pq
import pytest

from burnqed.config import SearchConfig
from burnqed.search import search_all
from burnqed.trajectory import (
    NODE_SCHEMA,
    SUMMARY_SCHEMA,
    TrajectoryWriter,
    finished_attempts,
    open_duckdb,
    read_nodes,
    read_summary,
)
from tests.search.fakes import RandomToyPolicy, ToyEnv, ToyValue, toy_theorems

CFG = SearchConfig(max_nodes=12, max_depth=10, num_candidates=4, concurrency=3)


def _search(n=10, seed=0, **kw):
    return asyncio.run(
        search_all(
            toy_theorems(n, seed=seed, low=2, high=8),
            RandomToyPolicy(seed=seed),
            ToyEnv(),
            CFG,
            keep_trees=True,
            **kw,
        )
    )


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_round_trip_matches_the_trees(tmp_path):
    results = _search(value_model=ToyValue())
    with TrajectoryWriter(tmp_path, checkpoint_every=4, metadata={"run": "test"}) as w:
        for r in results:
            w.add(r)
    assert w.parts_written == 3  # 4 + 4 + 2 (the last flushed on close)
    nodes, summary = read_nodes(tmp_path), read_summary(tmp_path)
    assert nodes.skipped == [] and summary.skipped == []
    assert nodes.table.schema.equals(NODE_SCHEMA) and summary.table.schema.equals(SUMMARY_SCHEMA)
    assert summary.table.num_rows == len(results)
    assert nodes.table.num_rows == sum(len(r.tree.nodes) for r in results)
    rows = {(d["theorem"], d["node_id"]): d for d in nodes.table.to_pylist()}
    for r in results:
        for n in r.tree.nodes:
            d = rows[(r.theorem, n.node_id)]
            assert d["parent_id"] == (n.parent_id if n.parent_id >= 0 else None)
            assert d["state"] == n.text and d["tactic"] == n.tactic and d["status"] == n.status
            assert d["expansion_index"] == (n.expansion_index if n.expanded else None)
            assert d["on_proof_path"] == n.on_proof_path
    srows = {d["theorem"]: d for d in summary.table.to_pylist()}
    for r in results:
        assert srows[r.theorem]["status"] == r.status
        assert srows[r.theorem]["proof"] == (list(r.proof) if r.proof else None)
    meta = pq.read_schema(tmp_path / "nodes" / "part-000000.parquet").metadata
    assert meta[b"run"] == b"test"
    con, skipped = open_duckdb(tmp_path)
    proved = con.sql("select count(*) from summary where status = 'proved'").fetchall()[0][0]
    assert skipped == [] and proved == sum(r.status == "proved" for r in results)
    on_path = con.sql("select count(*) from nodes where on_proof_path").fetchall()[0][0]
    assert on_path == sum(len(r.proof) + 1 for r in results if r.proof)


def test_parts_are_append_only(tmp_path):
    results = _search(n=9)
    w = TrajectoryWriter(tmp_path, checkpoint_every=3)
    for r in results[:3]:
        w.add(r)
    first = {p.relative_to(tmp_path): _digest(p) for p in tmp_path.rglob("part-*.parquet")}
    assert len(first) == 2
    for r in results[3:]:
        w.add(r)
    w.close()
    # A second writer (a resumed run) continues the numbering, never touching earlier parts.
    with TrajectoryWriter(tmp_path, checkpoint_every=3) as w2:
        w2.add(_search(n=1, seed=99)[0])
    names = sorted(p.name for p in (tmp_path / "summary").iterdir())
    assert names == [f"part-00000{i}.parquet" for i in range(4)]
    assert {p: _digest(tmp_path / p) for p in first} == first


def test_corrupt_truncated_and_orphaned_parts_are_reported_and_skipped(tmp_path, caplog):
    results = _search(n=8)
    with TrajectoryWriter(tmp_path, checkpoint_every=2) as w:
        for r in results:
            w.add(r)
    nodes_dir, summary_dir = tmp_path / "nodes", tmp_path / "summary"
    # part 1: truncated nodes part; part 2: garbage summary; part 3: orphan (summary lost).
    data = (nodes_dir / "part-000001.parquet").read_bytes()
    (nodes_dir / "part-000001.parquet").write_bytes(data[: len(data) // 2])
    (summary_dir / "part-000002.parquet").write_bytes(b"PAR1 not parquet at all")
    (summary_dir / "part-000003.parquet").unlink()
    (nodes_dir / ".part-000009.parquet.tmp").write_bytes(b"half written")  # ignored
    summary = read_summary(tmp_path)
    nodes = read_nodes(tmp_path)
    assert summary.table.num_rows == 2 and nodes.table.num_rows == sum(
        r.nodes_total for r in results[:2]
    )
    joined = "\n".join(nodes.skipped)
    for name in ("nodes/part-000001", "summary/part-000002", "nodes/part-000003"):
        assert name in joined, joined
    assert len(nodes.skipped) == 3
    assert "trajectory part skipped" in caplog.text
    done, skipped = finished_attempts(tmp_path)
    assert done == {(r.theorem, 0) for r in results[:2]} and len(skipped) == 3


def test_inconsistent_or_duplicated_parts_are_not_counted(tmp_path):
    results = _search(n=4)
    with TrajectoryWriter(tmp_path, checkpoint_every=2) as w:
        for r in results:
            w.add(r)
    # Swap the nodes part of checkpoint 1 for checkpoint 0's: row counts no longer agree.
    a, b = tmp_path / "nodes" / "part-000000.parquet", tmp_path / "nodes" / "part-000001.parquet"
    if pq.read_metadata(a).num_rows == pq.read_metadata(b).num_rows:
        pytest.skip("equal part sizes: the swap would not be detectable by count")
    b.write_bytes(a.read_bytes())
    s = read_summary(tmp_path)
    assert s.table.num_rows == 2 and "announces" in s.skipped[0]
    # A later part repeating finished attempts is skipped, not double counted.
    with TrajectoryWriter(tmp_path, checkpoint_every=2) as w:
        for r in results[:2]:
            w.add(r)
    s = read_summary(tmp_path)
    assert s.table.num_rows == 2 and any("already in" in x for x in s.skipped)


def test_a_resumed_writer_removes_an_uncommitted_nodes_part(tmp_path):
    results = _search(n=4)
    with TrajectoryWriter(tmp_path, checkpoint_every=2) as w:
        for r in results:
            w.add(r)
    (tmp_path / "summary" / "part-000001.parquet").unlink()  # killed between the two renames
    assert len(read_summary(tmp_path).skipped) == 1
    with TrajectoryWriter(tmp_path, checkpoint_every=2) as w:
        assert w.next_part == 1
        for r in results[2:]:
            w.add(r)
    s = read_summary(tmp_path)
    assert s.skipped == [] and s.table.num_rows == 4


def test_a_retried_error_row_is_superseded_by_the_later_one_in_every_reader(tmp_path):
    import dataclasses

    results = _search(n=3)
    a, b, c = results
    assert a.tree is not None and a.nodes_total > 1
    # Attempt `a` first ends in an infrastructure error with a partial tree, then is retried.
    a_error = dataclasses.replace(a, status="error", proof=None, verified=False,
                                  proof_expansion=None, reasons=("ReplError: worker died",))  # fmt: skip
    with TrajectoryWriter(tmp_path, checkpoint_every=10) as w:
        w.add(a_error)
        w.add(b)
    assert finished_attempts(tmp_path)[0] == {(b.theorem, 0)}  # `--resume` retries `a`
    with TrajectoryWriter(tmp_path, checkpoint_every=10) as w:
        w.add(a)
        w.add(c)
    s, n = read_summary(tmp_path), read_nodes(tmp_path)
    assert s.skipped == [] and n.skipped == []
    assert sorted(s.table.column("theorem").to_pylist()) == sorted(r.theorem for r in results)
    assert s.table.column("status").to_pylist().count("error") == 0
    assert n.table.num_rows == sum(r.nodes_total for r in results)  # a's partial tree dropped
    con, skipped = open_duckdb(tmp_path)
    assert skipped == []
    assert con.sql("select count(*) from summary").fetchall()[0][0] == 3
    assert con.sql("select count(*) from nodes").fetchall()[0][0] == n.table.num_rows
    assert finished_attempts(tmp_path)[0] == {(r.theorem, 0) for r in results}
    # A finished attempt is never redone: a later row for `b` (not an error) is a duplicate.
    with TrajectoryWriter(tmp_path, checkpoint_every=10) as w:
        w.add(b)
    s = read_summary(tmp_path)
    assert s.table.num_rows == 3 and any("already in" in x for x in s.skipped)


def test_the_verdict_and_the_verifiers_reasons_are_stored(tmp_path):
    """`verified` is the verifier's verdict and `rejections` its reasons, in the summary rows, with
    the theorem's key (not its Lean name) in the `theorem` column."""
    from tests.search.fakes import FixedPolicy, toy_theorem

    thm = dataclasses.replace(toy_theorem("t", 3), key="t@test:7")
    policy = FixedPolicy({"cheat": -0.1, "step 1": -0.5, "step 3": -2.0})
    cfg = SearchConfig(max_nodes=10, max_depth=5, num_candidates=3, concurrency=1, timeout_s=60)
    (r,) = asyncio.run(search_all([thm], policy, ToyEnv(), cfg, keep_trees=True))
    with TrajectoryWriter(tmp_path) as w:
        w.add(r)
    (row,) = read_summary(tmp_path).table.to_pylist()
    assert row["theorem"] == "t@test:7" and row["status"] == "proved" and row["verified"]
    assert row["rejections"][0] == "declaration uses 'sorryAx'"
    assert row["rejected_proofs"] == len(row["rejections"])
    assert finished_attempts(tmp_path)[0] == {("t@test:7", 0)}
