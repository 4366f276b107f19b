"""Eval scoring and report cost on 1M synthetic trajectory rows (no search, no model).

Workload: ~2,000 theorems × 1 attempt × 501 nodes (each of 125 expansions has 4 children; 30 % of
the attempts proved at a random expansion), written as 10 committed part pairs by the real writer
(:class:`burnqed.trajectory.TrajectoryWriter`, from :class:`~burnqed.search.engine.SearchResult`
and :class:`~burnqed.search.tree.Node` records, so the parts always have the current schemas).

Prints (parameters first; these figures last, one ``name=value`` a line):

- ``eval_score_1m_rows_s``: :func:`burnqed.eval.metrics.score_trajectories` at budgets
  10 / 50 / 125 (validation of the parts, every budget, pass@k, anytime curves, per-theorem rows),
  seconds per 1M rows;
- ``report_only_1m_rows_s``: :func:`burnqed.report.stage.run_iteration` (trajectory statistics,
  energy histogram, gates, 5 PNGs, markdown), seconds per 1M rows;
- ``report_1m_rows_s``: the two together — a report built from the rows.  Target < 10 s on 2 cores.

Run::

    python bench/report.py            # 1M rows
    python bench/report.py --rows 100000
    python bench/report.py --smoke    # 5,000 rows: that it runs (CI), not what it measures
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from burnqed.config import ReportConfig
from burnqed.eval.metrics import score_trajectories
from burnqed.report.stage import run_iteration
from burnqed.search.engine import SearchResult
from burnqed.search.tree import Node
from burnqed.trajectory import TrajectoryWriter

NODES = 501  # root + 125 expansions × 4 children
FANOUT = 4
EXPANSIONS = (NODES - 1) // FANOUT
BUDGETS = [10, 50, EXPANSIONS]
SMOKE_ROWS = 5_000


def _results(names: list[str], rng: np.random.Generator) -> list[SearchResult]:
    """One attempt per name with its whole tree; columns computed with numpy, then one
    :class:`Node` per row (the writer's input, exactly what a search hands it)."""
    t = len(names)
    rows = t * NODES
    node = np.tile(np.arange(NODES), t)
    depth = np.zeros(rows, dtype=np.int64)
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
    cols = {  # Node field → one value per row
        "node_id": node,
        "parent_id": np.where(node > 0, (node - 1) // FANOUT, -1),
        "depth": depth,
        "tactic": np.where(node > 0, "intro h", None),
        "text": np.char.add("p q : Prop\n⊢ goal ", node.astype(str)).astype(object),
        "state_hash": np.char.add("h", node.astype(str)).astype(object),
        "llm_logprob": -rng.random(rows),
        "cum_logprob": -rng.random(rows) * depth,
        "priority": -rng.random(rows),
        "created_s": node * 0.01,
        "lean_s": np.full(rows, 0.002),
        "ebm_energy": rng.normal(size=rows) - on_path,
        "solved": solved,
        "error": np.where(node % 5 == 3, "error: unknown tactic", None),
        "status": np.where(on_path, "proved", "failed").astype(object),
        "on_proof_path": on_path,
        "expansion_index": np.where(expanded, node, -1),
        "step": np.where(expanded, node, -1),
        "expand_wall_s": np.where(expanded, 0.01, 0.0),
        "expand_lean_s": np.where(expanded, 0.008, 0.0),
        "expand_tokens": np.where(expanded, 40, 0),
        "num_candidates": np.where(expanded, 8, 0),
        "unique_candidates": np.where(expanded, rng.integers(1, 9, rows), 0),
    }
    fields = list(cols)
    values = zip(*(cols[f].tolist() for f in fields), strict=True)
    nodes = [Node(state=None, **dict(zip(fields, v, strict=True))) for v in values]
    proof_len = depth[np.arange(t) * NODES + np.maximum(solved_node, 0)]
    out = []
    for i, name in enumerate(names):
        ok = bool(proved[i])
        out.append(
            SearchResult(
                theorem=name,
                attempt=0,
                status="proved" if ok else "failed",
                ended_by="proof" if ok else "budget",
                proof=("intro h",) * int(proof_len[i]) if ok else None,
                verified=ok,
                proof_expansion=int(pe[i]) if ok else None,
                nodes_expanded=int(pe[i]) + 1 if ok else EXPANSIONS,
                nodes_total=NODES,
                rejected_proofs=0,
                wall_s=NODES * 0.01,
                lean_s=1.0,
                gen_wait_s=2.0,
                tokens=5000,
                tree=SimpleNamespace(nodes=nodes[i * NODES : (i + 1) * NODES]),
            )
        )
    return out


def build(out: Path, rows: int, parts: int = 10, seed: int = 0) -> list[str]:
    """Write ~``rows`` node rows as ``parts`` committed part pairs; return the theorem names."""
    rng = np.random.default_rng(seed)
    n = max(1, -(-rows // NODES))
    names = [f"t{i:06d}" for i in range(n)]
    with TrajectoryWriter(out, checkpoint_every=n + 1) as w:
        for chunk in np.array_split(np.array(names), parts):
            if len(chunk):
                for result in _results(list(chunk), rng):
                    w.add(result)
                w.checkpoint()
    return names


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--smoke", action="store_true", help=f"{SMOKE_ROWS} rows (CI: that it runs)")
    args = ap.parse_args()
    if args.smoke:
        args.rows = SMOKE_ROWS
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
