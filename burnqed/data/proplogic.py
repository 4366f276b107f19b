"""The generated propositional data: training theorems (traced into tactic pairs) and held-out
``valid``/``test`` sets that share no statement with them or with each other.

Both come from ``burnqed.proplogic`` (its generator, and :mod:`burnqed.data.proplogic_trace` through
burnqed's own REPL); they are imported when first used so ``burnqed.data`` stays light to import.  The same
``(config, seed)`` always gives the same theorems, so the pairs stage, the search pool and the
benchmark agree without passing files around.

Example::

    >>> from burnqed.config import ProplogicConfig
    >>> cfg = ProplogicConfig(theorems=20, test_theorems=5, max_depth=3)
    >>> [t.name for t in held_out_splits(cfg, seed=0)["test"]][:2]     # doctest: +SKIP
    ['prop_test_0', 'prop_test_1']
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Sequence

import pyarrow as pa

from burnqed.config import ProplogicConfig
from burnqed.data.schema import TACTIC_PAIR_SCHEMA, validate_tactic_pairs
from burnqed.theorems import Theorem

log = logging.getLogger(__name__)

TRAIN_PREFIX = "prop"
HELD_OUT_SPLITS = ("valid", "test")
# Each held-out split's generator seed is offset from the run seed so it is a different draw.
HELD_OUT_SEED_OFFSET = 1_000_003

_DECL_NAME = re.compile(r"^\s*(?:theorem|lemma)\s+\S+")


def generate_theorems(
    n: int,
    *,
    seed: int,
    min_depth: int = 1,
    max_depth: int = 6,
    variables: int = 4,
    prefix: str = TRAIN_PREFIX,
) -> list[Theorem]:
    """``n`` generated theorems (:func:`burnqed.proplogic.generator.generate_theorems`) as
    :class:`~burnqed.theorems.Theorem` records, each with its known proof."""
    from burnqed.proplogic.generator import generate_theorems as generate

    return [
        Theorem(name=t.name, formal_statement=t.formal_statement, proof=t.proof)
        for t in generate(
            n,
            seed=seed,
            min_depth=min_depth,
            max_depth=max_depth,
            variables=variables,
            prefix=prefix,
        )
    ]


def _generate(
    n: int, cfg: ProplogicConfig, *, seed: int, prefix: str, held_out: bool = False
) -> list[Theorem]:
    lo, hi = cfg.held_out_depths if held_out else (cfg.min_depth, cfg.max_depth)
    return generate_theorems(
        n,
        seed=seed,
        min_depth=lo,
        max_depth=hi,
        variables=cfg.variables,
        prefix=prefix,
    )


def training_theorems(cfg: ProplogicConfig, *, seed: int) -> list[Theorem]:
    """The ``cfg.theorems`` generated training theorems, each with its known proof."""
    return _generate(cfg.theorems, cfg, seed=seed, prefix=TRAIN_PREFIX)


def statement_body(theorem: Theorem) -> str:
    """The statement without its declaration name (theorems differing only by name are equal)."""
    return _DECL_NAME.sub("", theorem.formal_statement, count=1).strip()


def held_out_splits(cfg: ProplogicConfig, *, seed: int) -> dict[str, list[Theorem]]:
    """``{"valid": [...], "test": [...]}``, ``cfg.test_theorems`` each: theorems stating nothing a
    training theorem or the other split states (``valid`` feeds the search pool, ``test`` eval)."""
    seen = {statement_body(t) for t in training_theorems(cfg, seed=seed)}
    out: dict[str, list[Theorem]] = {}
    for k, split in enumerate(HELD_OUT_SPLITS):
        # Draw extra candidates: small depth ranges repeat formulas, and repeats are dropped.
        candidates = _generate(
            2 * cfg.test_theorems + 10,
            cfg,
            seed=seed + (k + 1) * HELD_OUT_SEED_OFFSET,
            prefix=f"{TRAIN_PREFIX}_{split}",
            held_out=True,
        )
        rows: list[Theorem] = []
        for t in candidates:
            body = statement_body(t)
            if body in seen:
                continue
            seen.add(body)
            rows.append(dataclasses.replace(t, split=split))
            if len(rows) == cfg.test_theorems:
                break
        if len(rows) < cfg.test_theorems:
            log.warning(
                "proplogic: only %d distinct %s theorems not in training (asked for %d)",
                len(rows),
                split,
                cfg.test_theorems,
            )
        out[split] = rows
    return out


def traced_pairs(theorems: Sequence[Theorem], *, source: str) -> pa.Table:
    """Tactic pairs of ``theorems``' known proofs, traced through burnqed's propositional REPL."""
    from burnqed.data.proplogic_trace import trace_theorems

    table = trace_theorems(list(theorems), source=source)
    table = table.select(TACTIC_PAIR_SCHEMA.names).cast(TACTIC_PAIR_SCHEMA)
    names = table.column("theorem").to_pylist()
    prefix = f"{source}:"
    if not all(n.startswith(prefix) for n in names):
        names = [n if n.startswith(prefix) else prefix + n for n in names]
        table = table.set_column(
            TACTIC_PAIR_SCHEMA.get_field_index("theorem"),
            TACTIC_PAIR_SCHEMA.field("theorem"),
            pa.array(names, pa.string()),
        )
    validate_tactic_pairs(table, where=f"proplogic tracer output ({source})")
    return table
