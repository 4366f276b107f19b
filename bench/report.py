"""Eval scoring and report cost on 1M synthetic trajectory rows (no search, no model).

Workload: ~2,000 theorems × 1 attempt × 501 nodes (each of 125 expansions has 4 children; 30 % of
the attempts proved at a random expansion), written as 10 committed part pairs in the real schemas
(burnqed.trajectory), then

- ``eval_score_1m_rows_s``: :func:`burnqed.eval.metrics.score_trajectories` at budgets
  10 / 50 / 125 (validation of the parts, every budget, pass@k, anytime curves, per-theorem rows);
- ``report_only_1m_rows_s``: :func:`burnqed.report.stage.run_iteration` (trajectory statistics,
  energy histogram, gates, 5 PNGs, markdown);
- ``report_1m_rows_s``: the two together — a report built from the rows.  Target < 10 s on 2 cores.

Run::

    python bench/report.py            # 1M rows
    python bench/report.py --rows 100000
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from burnqed.config import ReportConfig
from burnqed.eval.metrics import score_trajectories
from burnqed.report.stage import run_iteration
from burnqed.trajectory import NODE_SCHEMA, NODES_DIR, SUMMARY_DIR, SUMMARY_SCHEMA, part_name

NODES = 501  # root + 125 expansions × 4 children
FANOUT = 4
EXPANSIONS = (NODES - 1) // FANOUT
BUDGETS = [10, 50, EXPANSIONS]


def _tables(names: list[str], rng: np.random.Generator) -> tuple[pa.Table, pa.Table]:
    """Node and summary tables of ``names`` (one attempt each), column by column."""
    t = len(names)
    rows = t * NODES
    thm = np.repeat(np.arange(t), NODES)
    node = np.tile(np.arange(NODES), t)
    parent = np.where(node > 0, (node - 1) // FANOUT, -1)
    depth = np.zeros(rows, dtype=np.int32)
    cur = node.copy()
    while (cur > 0).any():  # ≤ log4(501) rounds
        depth += cur > 0
        cur = np.where(cur > 0, (cur - 1) // FANOUT, 0)
    proved = rng.random(t) < 0.3
    pe = rng.integers(0, EXPANSIONS, t)  # expansion whose first child closes the proof
    solved_node = np.where(proved, FANOUT * pe + 1, -1)
    on_path = np.zeros(rows, dtype=bool)
    cur = solved_node.copy()
    while (cur >= 0).any():
        idx = np.nonzero(cur >= 0)[0]
        on_path[idx * NODES + cur[idx]] = True
        cur = np.where(cur > 0, (cur - 1) // FANOUT, -1)
    expanded = node < EXPANSIONS
    solved = np.zeros(rows, dtype=bool)
    solved[np.nonzero(proved)[0] * NODES + solved_node[proved]] = True
    error = np.where(node % 5 == 3, "error: unknown tactic", None)
    names_arr = np.array(names, dtype=object)
    cols = {
        "theorem": names_arr[thm],
        "attempt": np.zeros(rows, dtype=np.int32),
        "node_id": node.astype(np.int32),
        "parent_id": pa.array(parent, mask=parent < 0, type=pa.int32()),
        "depth": depth,
        "state": np.char.add("p q : Prop\n⊢ goal ", node.astype(str)).astype(object),
        "state_hash": np.char.add("h", node.astype(str)).astype(object),
        "tactic": pa.array(np.where(node > 0, "intro h", None), type=pa.string()),
        "llm_logprob": -rng.random(rows),
        "cum_logprob": -rng.random(rows) * depth,
        "priority": -rng.random(rows),
        "ebm_energy": rng.normal(size=rows).astype(np.float32) - on_path,
        "status": np.where(on_path, "proved", "failed").astype(object),
        "on_proof_path": on_path,
        "solved": solved,
        "error": pa.array(error, type=pa.string()),
        "duplicate_of": pa.nulls(rows, pa.int32()),
        "expansion_index": pa.array(node, mask=~expanded, type=pa.int32()),
        "step": pa.array(node, mask=~expanded, type=pa.int32()),
        "created_s": node * 0.01,
        "lean_s": np.full(rows, 0.002),
        "expand_wall_s": np.where(expanded, 0.01, 0.0),
        "expand_lean_s": np.where(expanded, 0.008, 0.0),
        "tokens": np.where(expanded, 40, 0).astype(np.int32),
        "num_candidates": np.where(expanded, 8, 0).astype(np.int32),
        "unique_candidates": np.where(expanded, rng.integers(1, 9, rows), 0).astype(np.int32),
    }
    nodes = pa.Table.from_arrays(
        [pa.array(cols[f.name], type=f.type) for f in NODE_SCHEMA], schema=NODE_SCHEMA
    )
    proof_len = depth[np.nonzero(proved)[0] * NODES + solved_node[proved]]
    proofs = [None] * t
    for i, n in zip(np.nonzero(proved)[0], proof_len, strict=True):  # ≤ 600 proved attempts
        proofs[i] = ["intro h"] * int(n)
    summary = pa.Table.from_pydict(
        {
            "theorem": names,
            "attempt": np.zeros(t, dtype=np.int32),
            "status": np.where(proved, "proved", "failed").astype(object),
            "proof": proofs,
            "verified": proved,
            "proof_expansion": pa.array(pe, mask=~proved, type=pa.int32()),
            "nodes_expanded": np.where(proved, pe + 1, EXPANSIONS).astype(np.int32),
            "nodes_total": np.full(t, NODES, dtype=np.int32),
            "rejected_proofs": np.zeros(t, dtype=np.int32),
            "wall_s": np.full(t, NODES * 0.01),
            "lean_s": np.full(t, 1.0),
            "gen_wait_s": np.full(t, 2.0),
            "tokens": np.full(t, 5000, dtype=np.int64),
            "reasons": [[] for _ in range(t)],
        },
        schema=SUMMARY_SCHEMA,
    )
    return nodes, summary


def build(out: Path, rows: int, parts: int = 10, seed: int = 0) -> list[str]:
    """Write ~``rows`` node rows as ``parts`` committed part pairs; return the theorem names."""
    rng = np.random.default_rng(seed)
    n = max(1, -(-rows // NODES))
    names = [f"t{i:06d}" for i in range(n)]
    (out / NODES_DIR).mkdir(parents=True)
    (out / SUMMARY_DIR).mkdir(parents=True)
    for p, chunk in enumerate(np.array_split(np.array(names), parts)):
        if len(chunk):
            nodes, summary = _tables(list(chunk), rng)
            pq.write_table(nodes, out / NODES_DIR / part_name(p), compression="zstd")
            pq.write_table(summary, out / SUMMARY_DIR / part_name(p), compression="zstd")
    return names


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        names = build(root / "eval", args.rows)
        print(f"# wrote {len(names) * NODES} node rows in {time.perf_counter() - t0:.1f} s")
        t0 = time.perf_counter()
        metrics = score_trajectories(root / "eval", expected=names, budgets=BUDGETS, pass_n=1)
        score_s = time.perf_counter() - t0
        result = {"kind": "burnqed eval", "label": "iter_0", **metrics, "benchmark": {}}
        (root / "eval.json").write_text(json.dumps(result), encoding="utf-8")
        t0 = time.perf_counter()
        run_iteration(eval_json=root / "eval.json", trajectories=root / "eval",
                      out_dir=root / "report", cfg=ReportConfig().to_dict())  # fmt: skip
        report_s = time.perf_counter() - t0
        print(f"# solved at budgets {BUDGETS}: {[b['solved'] for b in metrics['by_budget']]}")
    print(f"eval_score_1m_rows_s={score_s * 1e6 / (len(names) * NODES):.2f}")
    print(f"report_only_1m_rows_s={report_s * 1e6 / (len(names) * NODES):.2f}")
    print(f"report_1m_rows_s={(score_s + report_s) * 1e6 / (len(names) * NODES):.2f}")


if __name__ == "__main__":
    main()
