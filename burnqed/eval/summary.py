"""Trajectory statistics of any search output directory, in DuckDB SQL (no Python loops over rows).

Used by ``burnqed summary DIR`` and by the reports (burnqed.report): attempts by status, proved
rate (errors apart), proof depth and node distributions, candidates per expansion raw and unique
after dedup (a collapsing policy shows as unique ≈ 1), error classes, and where the time went.

Example::

    burnqed summary results/iter_0/search/shard_0
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

# "kind: message" → kind; rejected tactics and proofs carry it (burnqed.trajectory NODE_SCHEMA).
ERROR_CLASS = "coalesce(nullif(split_part(error, ':', 1), ''), 'unknown')"

QUERIES: dict[str, str] = {
    "statuses": "select status, count(*) as attempts from summary group by status order by status",
    "overall": """
        select count(*) as attempts,
               count(*) filter (where status = 'error') as errored,
               count(*) filter (where status = 'proved' and verified) as proved,
               count(distinct theorem) as theorems,
               count(distinct theorem) filter (where status = 'proved' and verified)
                   as theorems_proved,
               sum(nodes_total) as node_rows,
               sum(nodes_expanded) as expansions,
               avg(nodes_expanded) as avg_expanded, min(nodes_expanded) as min_expanded,
               max(nodes_expanded) as max_expanded,
               sum(rejected_proofs) as rejected_proofs,
               sum(wall_s) as wall_s, sum(lean_s) as lean_s, sum(gen_wait_s) as gen_wait_s,
               sum(tokens) as tokens
        from summary""",
    "candidates": """
        select count(*) as expansions,
               min(num_candidates) as raw_min, avg(num_candidates) as raw_avg,
               max(num_candidates) as raw_max,
               min(unique_candidates) as unique_min, avg(unique_candidates) as unique_avg,
               max(unique_candidates) as unique_max
        from nodes where expansion_index is not null""",
    "time_split": """
        select coalesce(sum(wall_s), 0) as attempt_wall_s,
               coalesce(sum(gen_wait_s), 0) as generation_wait_s,
               coalesce(sum(lean_s), 0) as lean_s
        from summary""",
    "proof_depth": """
        select len(proof) as depth, count(*) as proofs
        from summary where status = 'proved' and verified and proof is not null
        group by 1 order by 1""",
    "nodes_hist": """
        select nodes_expanded, count(*) as attempts
        from summary where status <> 'error' group by 1 order by 1""",
    "errors": f"""
        select {ERROR_CLASS} as error_class, count(*) as n
        from nodes where error is not null group by 1 order by n desc, 1 limit 20""",
    "attempt_errors": """
        select coalesce(reasons[1], 'unknown') as reason, count(*) as attempts
        from summary where status = 'error' group by 1 order by 2 desc, 1 limit 20""",
    "depth_nodes": """
        select depth, count(*) as nodes, count(*) filter (where on_proof_path) as on_proof_path
        from nodes group by 1 order by 1""",
}


def rows(con: Any, sql: str) -> list[dict]:
    """A query's rows as dicts (a result of at most a few hundred rows, not trajectory rows)."""
    rel = con.sql(sql)
    return [dict(zip(rel.columns, r, strict=True)) for r in rel.fetchall()]


def summarise(con: Any) -> dict:
    """Every query of :data:`QUERIES` over views ``nodes`` and ``summary`` of ``con``."""
    out = {name: rows(con, sql) for name, sql in QUERIES.items()}
    for single in ("overall", "candidates", "time_split"):
        out[single] = out[single][0]
    o = out["overall"]
    done = (o["attempts"] or 0) - (o["errored"] or 0)
    o["proved_rate"] = (o["proved"] or 0) / done if done else None
    return out


def summarise_dir(trajectories: Path) -> dict:
    from burnqed.trajectory import open_duckdb

    con, skipped = open_duckdb(Path(trajectories))
    try:
        out = summarise(con)
    finally:
        con.close()
    out["skipped_parts"] = skipped
    out["directory"] = str(trajectories)
    return out


def summary_markdown(s: dict) -> str:
    from burnqed.eval.table import fmt, markdown_table, pct

    o, c, t = s["overall"], s["candidates"], s["time_split"]
    lines = [
        f"**{s.get('directory', 'trajectories')}**: {o['attempts']} attempts of "
        f"{o['theorems']} theorems, {o['errored']} errored (not counted), proved "
        f"{o['proved']} ({pct(o['proved_rate'])} of finished attempts), {o['node_rows'] or 0} "
        f"node rows",
        "",
        markdown_table(
            ["status", "attempts"], [[r["status"], str(r["attempts"])] for r in s["statuses"]]
        ),
        "",
        markdown_table(
            ["", "min", "avg", "max"],
            [
                [
                    "nodes expanded / attempt",
                    fmt(o["min_expanded"]),
                    fmt(o["avg_expanded"]),
                    fmt(o["max_expanded"]),
                ],
                [
                    "raw candidates / expansion",
                    fmt(c["raw_min"]),
                    fmt(c["raw_avg"], 2),
                    fmt(c["raw_max"]),
                ],
                [
                    "unique candidates / expansion",
                    fmt(c["unique_min"]),
                    fmt(c["unique_avg"], 2),
                    fmt(c["unique_max"]),
                ],
            ],
        ),
        "",
        markdown_table(
            ["time", "seconds"],
            [
                ["attempt wall time (summed over attempts)", fmt(t["attempt_wall_s"], 1)],
                ["waiting for generation", fmt(t["generation_wait_s"], 1)],
                ["Lean (summed over calls, which overlap)", fmt(t["lean_s"], 1)],
                ["value scoring", "not recorded in the trajectories"],
            ],
        ),
    ]
    if s["errors"]:
        lines += [
            "",
            markdown_table(
                ["error class (rejected tactics)", "count"],
                [[r["error_class"], str(r["n"])] for r in s["errors"]],
            ),
        ]
    if s["attempt_errors"]:
        lines += [
            "",
            markdown_table(
                ["errored attempts: reason (not counted as results)", "attempts"],
                [[r["reason"], str(r["attempts"])] for r in s["attempt_errors"]],
            ),
        ]
    if s.get("skipped_parts"):
        lines += ["", f"Skipped unreadable parts: {len(s['skipped_parts'])}"]
    return "\n".join(lines) + "\n"
