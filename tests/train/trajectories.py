"""Search-trajectory directories for the training tests, written part by part without a search.

Each proof is a chain of nodes root → … → solved (``on_proof_path``) plus one failed sibling per
step (a dead end, never a positive); each attempt has its summary row.  Parts follow
:mod:`burnqed.trajectory`'s layout exactly (``nodes/part-N`` + ``summary/part-N``), so the real
readers (DuckDB views, skipped-part checks) read them.

Example::

    >>> import tempfile
    >>> from pathlib import Path
    >>> out = Path(tempfile.mkdtemp())
    >>> write_search(out, [Proof("t1", [("p : Prop\\n⊢ p → p", "intro h"), ("p : Prop\\nh : p\\n⊢ p", "exact h")])])
    >>> sorted(p.name for p in (out / "summary").iterdir())
    ['part-000000.parquet']
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from burnqed.trajectory import NODE_SCHEMA, NODES_DIR, SUMMARY_DIR, SUMMARY_SCHEMA, part_name


@dataclass(frozen=True)
class Proof:
    """One attempt: the (state, tactic) steps of its proof, and what the summary says of it."""

    theorem: str
    steps: list[tuple[str, str]]
    status: str = "proved"
    verified: bool = True
    attempt: int = 0


def _node(proof: Proof, node_id: int, parent: int | None, depth: int, state: str | None,
          tactic: str | None, on_path: bool, status: str, solved: bool = False) -> dict:  # fmt: skip
    return {
        "theorem": proof.theorem, "attempt": proof.attempt, "node_id": node_id,
        "parent_id": parent, "depth": depth, "state": state,
        "state_hash": None if state is None else f"{hash(state) & 0xFFFFFFFF:08x}",
        "tactic": tactic, "llm_logprob": -0.5, "cum_logprob": -0.5 * depth, "priority": -0.5,
        "ebm_energy": None, "status": status, "on_proof_path": on_path, "solved": solved,
        "error": None, "duplicate_of": None, "expansion_index": node_id, "step": node_id,
        "created_s": 0.0, "lean_s": 0.0, "expand_wall_s": 0.0, "expand_lean_s": 0.0,
        "tokens": 4, "num_candidates": 2, "unique_candidates": 2,
    }  # fmt: skip


def proof_nodes(proof: Proof) -> list[dict]:
    """Root, the proof path (flagged when the attempt was proved) and a dead-end sibling per step."""
    proved = proof.status == "proved" and proof.verified
    path_flag = proof.status == "proved"  # a rejected proof still marks its path in the tree
    nodes = [
        _node(
            proof, 0, None, 0, proof.steps[0][0], None, path_flag, "proved" if proved else "failed"
        )
    ]
    parent = 0
    for depth, (state, tactic) in enumerate(proof.steps):
        next_state = proof.steps[depth + 1][0] if depth + 1 < len(proof.steps) else "no goals"
        last = depth + 1 == len(proof.steps)
        dead = len(nodes)
        nodes.append(_node(proof, dead, parent, depth + 1, state + "\n⊢ False", "dead_end",
                           False, "failed"))  # fmt: skip
        child = len(nodes)
        nodes.append(_node(proof, child, parent, depth + 1, next_state, tactic, path_flag,
                           "proved" if proved else "failed", solved=last))  # fmt: skip
        parent = child
    return nodes


def summary_row(proof: Proof, nodes_total: int) -> dict:
    proved = proof.status == "proved"
    return {
        "theorem": proof.theorem, "attempt": proof.attempt, "status": proof.status,
        "ended_by": "proof" if proved else "frontier", "wall_timeouts": 0, "rejections": [],
        "proof": [t for _, t in proof.steps] if proved else None, "verified": proof.verified,
        "proof_expansion": len(proof.steps) if proved else None, "nodes_expanded": nodes_total,
        "nodes_total": nodes_total, "rejected_proofs": 0 if proof.verified else 1,
        "wall_s": 1.0, "lean_s": 0.5, "gen_wait_s": 0.1, "tokens": 10,
        "reasons": [] if proof.verified else ["verification: stand-in rejection"],
    }  # fmt: skip


def write_search(out: Path, proofs: list[Proof], *, part: int = 0) -> Path:
    """Write ``proofs`` as one checkpoint (part ``part``) of the trajectory directory ``out``."""
    nodes, summaries = [], []
    for p in proofs:
        n = proof_nodes(p)
        nodes += n
        summaries.append(summary_row(p, len(n)))
    for sub, rows, schema in ((NODES_DIR, nodes, NODE_SCHEMA),
                              (SUMMARY_DIR, summaries, SUMMARY_SCHEMA)):  # fmt: skip
        (out / sub).mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), out / sub / part_name(part))
    (out / "manifest.json").write_text("{}\n", encoding="utf-8")
    return out


def proofs_from_pairs(rows: list[dict]) -> list[Proof]:
    """One proof per theorem of tactic-pair rows (``tests.train.pairs.make_pair_rows``)."""
    by_theorem: dict[str, list[tuple[int, str, str]]] = {}
    for r in rows:
        by_theorem.setdefault(r["theorem"], []).append((r["depth"], r["state_before"], r["tactic"]))
    return [Proof(t, [(s, a) for _, s, a in sorted(steps)]) for t, steps in by_theorem.items()]
