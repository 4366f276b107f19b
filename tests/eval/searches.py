"""Searches as the search stage and its gather write them, for the comparisons of expert iteration
against search only (tests/eval/test_compute.py, tests/eval/test_benchmark_curves.py): summary
parts in the trajectory format, manifests, a theorem file."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa

from burnqed.theorems import Theorem, write_theorems
from burnqed.trajectory import NODE_SCHEMA, SUMMARY_SCHEMA, write_parquet_atomic

CONFIG = {"max_nodes": 100, "attempts": 1, "temperature": 0.8}
POOL = list("abcdef")


def _row(theorem: str, status: str, nodes: int, tokens: int, attempt: int = 0) -> dict:
    return {
        "theorem": theorem, "attempt": attempt, "status": status,
        "ended_by": "proof" if status == "proved" else "budget", "proof": None,
        "verified": status == "proved", "proof_expansion": None, "nodes_expanded": nodes,
        "nodes_total": 0, "rejected_proofs": 0, "rejections": [], "wall_s": 0.1, "lean_s": 0.0,
        "gen_wait_s": 0.0, "tokens": tokens, "wall_timeouts": 0, "reasons": [],
    }  # fmt: skip


def write_search(
    directory: Path,
    rows: list[tuple],
    *,
    config: dict | None = None,
    shards: int = 1,
    model: str = "models/iter_0/merged",
    ebm: str | None = None,
    salt: str | None = None,
) -> Path:
    """A gathered search: ``shards`` shard directories (rows dealt round-robin), each with one
    summary part, its (empty: no node rows announced) nodes part and a manifest; the gathered
    manifest lists them."""
    cfg = config or CONFIG
    per_shard = {}
    for k in range(shards):
        d = directory / f"shard_{k}"
        (d / "summary").mkdir(parents=True)
        (d / "nodes").mkdir()
        part = [_row(*r) for r in rows[k::shards]]
        write_parquet_atomic(pa.Table.from_pylist(part, schema=SUMMARY_SCHEMA),
                             d / "summary" / "part-000000.parquet")  # fmt: skip
        write_parquet_atomic(NODE_SCHEMA.empty_table(), d / "nodes" / "part-000000.parquet")
        m = {"config": cfg, "model": model, "ebm": ebm, "seed_salt": salt,
             "sampling": {"temperature": cfg["temperature"], "n": 8},
             "machine": {"torch_threads": 1, "cpu_capability": "AVX2"}}  # fmt: skip
        (d / "manifest.json").write_text(json.dumps(m))
        per_shard[str(d)] = m
    gathered = {"shards": sorted(per_shard), "per_shard": per_shard}
    (directory / "manifest.json").write_text(json.dumps(gathered))
    return directory


def write_pool(path: Path, keys=POOL) -> Path:
    write_theorems(path, [Theorem(name=k, formal_statement=f"theorem {k} : True := by\n")
                          for k in keys])  # fmt: skip
    return path
