"""The generated propositional data: training theorems (traced into tactic pairs), held-out
``valid``/``test`` sets that share no statement with them or with each other, and the development
set ``dev`` (:func:`development_split`).

``valid`` is the search pool (its proofs become training data), ``test`` the confirmation benchmark
(looked at only to confirm a frozen design), ``dev`` the benchmark development choices are made on:
drawn after the others, from the test split's distribution, it drops every candidate that equals a
training, pool or test theorem — or another dev theorem — in canonical form
(:func:`burnqed.data.decontam.theorem_keys`: up to renaming, binder order, parentheses…), so adding
it changes no byte of the other three.

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
DEV_SPLIT = "dev"  # drawn after the held-out splits (development_split)
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
    n: int, cfg: ProplogicConfig, *, seed: int, prefix: str, held_out: str | None = None
) -> list[Theorem]:
    """``n`` theorems at the depths of the training set, or of the held-out split ``held_out``
    (the search pool, ``valid``, may have depths of its own: ``cfg.search_pool_depths``)."""
    if held_out is None:
        lo, hi = cfg.min_depth, cfg.max_depth
    else:
        lo, hi = cfg.search_pool_depths if held_out == "valid" else cfg.held_out_depths
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


def held_out_splits(
    cfg: ProplogicConfig, *, seed: int, benchmark_seed: int | None = None
) -> dict[str, list[Theorem]]:
    """``{"valid": [...], "test": [...]}``, ``cfg.test_theorems`` each: theorems stating nothing a
    training theorem or the other split states (``valid`` feeds the search pool, ``test`` eval).
    ``seed`` draws the training theorems and ``valid`` (the data), ``benchmark_seed`` (None:
    ``seed``) draws ``test`` (params.yaml ``seeds``)."""
    seen = {statement_body(t) for t in training_theorems(cfg, seed=seed)}
    draw = {"valid": seed, "test": seed if benchmark_seed is None else benchmark_seed}
    out: dict[str, list[Theorem]] = {}
    for k, split in enumerate(HELD_OUT_SPLITS):
        # Draw extra candidates: small depth ranges repeat formulas, and repeats are dropped.
        candidates = _generate(
            2 * cfg.test_theorems + 10,
            cfg,
            seed=draw[split] + (k + 1) * HELD_OUT_SEED_OFFSET,
            prefix=f"{TRAIN_PREFIX}_{split}",
            held_out=split,
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


def development_split(
    cfg: ProplogicConfig, *, seed: int, benchmark_seed: int | None = None,
    held_out: dict[str, list[Theorem]] | None = None,
) -> list[Theorem]:  # fmt: skip
    """The ``dev`` theorems (``cfg.dev_theorems``, else as many as ``test``): drawn from the held-out
    depths with a seed of their own, after ``valid`` and ``test`` (``held_out``: their
    :func:`held_out_splits`, computed when not given), keeping only candidates whose canonical
    form equals no training, pool, test or earlier dev theorem's.  ``benchmark_seed`` (None:
    ``seed``) draws it, as it draws ``test``."""
    from burnqed.data.canonical import theorem_keys

    bseed = seed if benchmark_seed is None else benchmark_seed
    if held_out is None:
        held_out = held_out_splits(cfg, seed=seed, benchmark_seed=bseed)
    n = cfg.dev_theorems if cfg.dev_theorems is not None else cfg.test_theorems
    seen: set[str] = set()
    for t in [*training_theorems(cfg, seed=seed), *held_out["valid"], *held_out["test"]]:
        seen |= theorem_keys(t)
    candidates = _generate(
        3 * n + 10,
        cfg,
        seed=bseed + (len(HELD_OUT_SPLITS) + 1) * HELD_OUT_SEED_OFFSET,
        prefix=f"{TRAIN_PREFIX}_{DEV_SPLIT}",
        held_out=DEV_SPLIT,
    )
    rows: list[Theorem] = []
    dropped = 0
    for t in candidates:
        keys = theorem_keys(t)
        if keys & seen:
            dropped += 1
            continue
        seen |= keys
        rows.append(dataclasses.replace(t, split=DEV_SPLIT))
        if len(rows) == n:
            break
    log.info("proplogic dev: %d theorems (%d candidates equal to a training, pool, test or dev "
             "theorem in canonical form dropped)", len(rows), dropped)  # fmt: skip
    if len(rows) < n:
        log.warning("proplogic: only %d distinct dev theorems (asked for %d)", len(rows), n)
    return rows


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
