"""Search-pool selection between iterations: what iteration ``i`` (≥ 1) searches for new proofs.

Iteration ``i`` learns only from proofs it could not already find, so its pool is the base search
pool (``data/theorems/search_pool.jsonl``) minus, in this order:

1. **proved** — theorems whose proof an earlier iteration's search (normal or noise) found *and*
   verified: searching them again yields proofs the model already produces;
2. **shallow** — theorems whose known proof has at most ``min_depth`` steps (when the source records
   one; miniF2F does not): one-step theorems teach the search nothing;
3. **probe** — theorems closed by one of ``probe_tactics`` alone at the root (through the Lean pool):
   any decision procedure proves them, the policy need not;

then a seeded sample of ``pool_size`` of what remains (all of it when ``pool_size`` is null or
larger).  The counts per exclusion go to the log and to ``<out>.meta.json`` for the report.

Example (what rule ``search_pool_select`` runs; there is no CLI command for it)::

    from burnqed.search.selection import run
    run(pool=Path("data/theorems/search_pool.jsonl"),
        earlier=[Path("results/iter_0/search"), Path("results/iter_0/search_noise")],
        out=Path("results/iter_1/search_pool.jsonl"),
        cfg=params["search"], lean=params["lean"], seed=resolve_seeds(params)["train"])
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import Sequence
from pathlib import Path

from burnqed.config import LeanConfig, SearchConfig
from burnqed.theorems import Theorem, read_theorems, write_theorems
from burnqed.trajectory import read_summary, search_part_dirs

log = logging.getLogger(__name__)


def proved_theorems(searches: Sequence[Path]) -> tuple[set[str], list[str]]:
    """Theorems proved *and* verified in any of ``searches`` (search output directories), and the
    trajectory parts the readers skipped (named, with their reason)."""
    proved: set[str] = set()
    skipped: list[str] = []
    for root in searches:
        dirs = search_part_dirs(root)
        if not dirs:
            raise FileNotFoundError(f"{root}: no trajectory parts (not a search output directory)")
        for d in dirs:
            read = read_summary(d)
            skipped += read.skipped
            t = read.table
            for name, status, verified in zip(
                t.column("theorem").to_pylist(),
                t.column("status").to_pylist(),
                t.column("verified").to_pylist(),
                strict=True,
            ):
                if status == "proved" and verified:
                    proved.add(name)
    return proved, skipped


async def _probe_solved(
    theorems: Sequence[Theorem], probes: Sequence[str], lean: LeanConfig
) -> set:
    """Keys of ``theorems`` that one of ``probes`` closes at the root."""
    from burnqed.lean.pool import LeanPool, TacticSuccess

    solved: set[str] = set()
    sem = asyncio.Semaphore(max(1, 4 * lean.workers))

    async with LeanPool(lean) as pool:

        async def probe(t: Theorem) -> None:
            async with sem:
                session = await pool.start(t)
                try:
                    for tactic in probes:
                        r = await session.apply(session.root, tactic)
                        if isinstance(r, TacticSuccess) and r.state.solved:
                            solved.add(t.key)
                            return
                finally:
                    await session.close()

        await asyncio.gather(*(probe(t) for t in theorems))
    return solved


def select_pool(
    theorems: Sequence[Theorem],
    *,
    proved: set[str],
    probe_solved: set[str],
    min_depth: int,
    pool_size: int | None,
    seed: int,
) -> tuple[list[Theorem], dict[str, int]]:
    """The selected theorems (in pool order) and the count of each exclusion (pure; see module)."""
    counts = {"pool": len(theorems), "proved": 0, "shallow": 0, "probe": 0, "sampled_out": 0}
    kept: list[Theorem] = []
    for t in theorems:
        if t.key in proved:
            counts["proved"] += 1
        elif t.proof is not None and len(t.proof) <= min_depth:
            counts["shallow"] += 1
        elif t.key in probe_solved:
            counts["probe"] += 1
        else:
            kept.append(t)
    if pool_size is not None and len(kept) > pool_size:
        chosen = set(random.Random(seed).sample(range(len(kept)), pool_size))
        counts["sampled_out"] = len(kept) - pool_size
        kept = [t for i, t in enumerate(kept) if i in chosen]
    counts["selected"] = len(kept)
    return kept, counts


def run(
    *,
    pool: Path,
    earlier: Sequence[Path],
    out: Path,
    cfg: dict,
    lean: dict,
    seed: int = 0,
) -> dict[str, int]:
    """Write the selected pool to ``out`` and its counts to ``<out>.meta.json``; return the counts."""
    search_cfg = SearchConfig.from_dict(cfg)
    lean_cfg = LeanConfig.from_dict(lean)
    theorems = list(read_theorems(pool))  # a bad line fails here, before any Lean process starts
    proved, skipped = proved_theorems(earlier)
    for s in skipped:
        log.warning("skipped trajectory part: %s", s)
    candidates = [
        t
        for t in theorems
        if t.key not in proved
        and not (t.proof is not None and len(t.proof) <= search_cfg.pool_min_depth)
    ]
    probes = search_cfg.probe_tactics
    probe_solved = asyncio.run(_probe_solved(candidates, probes, lean_cfg)) if probes else set()
    selected, counts = select_pool(
        theorems,
        proved=proved,
        probe_solved=probe_solved,
        min_depth=search_cfg.pool_min_depth,
        pool_size=search_cfg.pool_size,
        seed=seed,
    )
    log.info(
        "search pool %s: %d theorems; excluded %d proved earlier, %d of depth <= %d, "
        "%d solved by probe tactics %s, %d sampled out; %d selected",
        out,
        counts["pool"],
        counts["proved"],
        counts["shallow"],
        search_cfg.pool_min_depth,
        counts["probe"],
        list(probes),
        counts["sampled_out"],
        counts["selected"],
    )
    write_theorems(out, selected)
    meta = {
        "pool": str(pool),
        "earlier": [str(p) for p in earlier],
        "counts": counts,
        "probe_tactics": list(probes),
        "min_depth": search_cfg.pool_min_depth,
        "pool_size": search_cfg.pool_size,
        "seed": seed,
        "skipped_parts": skipped,
    }
    Path(f"{out}.meta.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return counts


__all__ = ["proved_theorems", "run", "select_pool"]
