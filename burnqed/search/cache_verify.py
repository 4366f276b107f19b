"""``burnqed cache verify``: ask Lean again the questions an expansion cache's Lean rows keep.

Each Lean row of the cache keeps its question — the theorem, the tactics from its root to the state,
the tactic (:data:`~burnqed.search.cache_store.LEAN_SCHEMA`) — so its answer can be checked long
after it was stored, by a REPL of today's configuration: :func:`verify` takes the rows stored under
this configuration's Lean key (:func:`~burnqed.search.cache.lean_settings`; rows of other toolchains
or REPLs are counted, not asked), draws a ``sample`` of them (a seeded hash of each key, so the
same seed checks the same rows), starts each theorem in a :class:`~burnqed.lean.pool.LeanPool`,
replays the path and runs the tactic.  Per row:

- ``agreed`` — Lean says what the row says (:func:`~burnqed.search.cache.agrees`);
- ``disagreed`` — it says otherwise: the answer is evicted (a tombstone every reader honours) and
  Lean's answer stored in its place;
- ``inconclusive`` — the wall clock stopped it (a ``timeout``), or the REPL answered a protocol
  error;
- ``disagreed`` too — the state its path leads to is printed otherwise than the one the row was
  stored below (another Lean, or a non-determinism): evicted, Lean's answer stored;
- ``unreachable`` — a step of its path fails (an ancestor's answer is wrong: verifying that row
  settles it), or its key is not its question's under today's settings;
- ``no_question`` — written before rows kept their question; ``errors`` — the REPL failed.

Example::

    burnqed cache verify results/cache --configfile config/demo.yaml --sample 0.1
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pyarrow as pa

from burnqed.config import LeanConfig
from burnqed.lean.errors import ReplError, StartError
from burnqed.search.cache import (
    NOT_STORED,
    agrees,
    lean_settings,
    path_keys,
    settings_digest,
    start_key,
    state_digest,
    statement_digest,
    theorem_of,
)
from burnqed.search.cache_store import LEAN_SCHEMA, ShardStore, read_shard, shard_files

log = logging.getLogger(__name__)

OUTCOMES = ("agreed", "disagreed", "inconclusive", "unreachable", "no_question", "errors")
COLUMNS = ["key", "settings", "text", "error_kind", "error", "cost_s", "state_digest", "theorem",
           "path", "tactic"]  # fmt: skip


def drawn(key: str, sample: float, seed: int) -> bool:
    """Whether the row of ``key`` is in the sample (a seeded hash below ``sample``)."""
    if sample >= 1.0:
        return True
    h = hashlib.blake2b(f"verify\0{seed}\0{key}".encode(), digest_size=8).digest()
    return int.from_bytes(h, "big") / 2.0**64 < sample


def _rows(store: ShardStore) -> tuple[list[dict], int, list[str]]:
    """The rows of the answers ``store`` serves (its settings'; evicted ones not), with their
    questions; the count of other settings' rows; the shards that could not be read."""
    rows: dict[str, dict] = {}
    others, unreadable = 0, []
    for path in shard_files(store.directory):
        try:
            table = read_shard(path, COLUMNS, None)
        except (OSError, pa.ArrowException) as e:
            log.warning("%s: unreadable cache shard skipped (%s)", path, e)
            unreadable.append(str(path))
            continue
        for row in table.to_pylist():
            if row["settings"] != store.settings:
                others += 1
                continue
            held = store.get(row["key"])
            if held is not None and store.answer(held) == store.answer(row):
                rows.setdefault(row["key"], row)
    return list(rows.values()), others, unreadable


async def _check_theorem(
    pool: Any, record: str, rows: list[dict], digest: str, store: ShardStore, counts: Counter
) -> None:
    """Ask Lean the questions of one theorem's rows (module docstring) in one proof session."""
    theorem = theorem_of(record)
    statement = statement_digest(theorem)

    def settle(row: dict, text: str | None, kind: str | None, message: str | None, cost: float,
               printed: str | None = None) -> None:  # fmt: skip
        """Reconcile ``row`` with Lean's answer (``printed``: the digest of the state the tactic
        ran on today; a row stored under another one disagrees whatever it says)."""
        otherwise = printed is not None and row.get("state_digest") not in (None, printed)
        if kind in NOT_STORED:
            counts["inconclusive"] += 1
        elif agrees(row, text, kind) and not otherwise:
            counts["agreed"] += 1
        else:
            counts["disagreed"] += 1
            said = row["text"] if row["text"] is not None else f"{row['error_kind']} failure"
            now = text if text is not None else f"{kind} failure"
            where = " (stored below another printed state)" if otherwise else ""
            store.evict(row["key"], f"verify: cached {said!r}{where}, Lean now {now!r}")
            question = {k: row[k] for k in ("theorem", "path", "tactic")}
            store.put({"key": row["key"], "text": text, "error_kind": kind, "error": message,
                       "cost_s": cost, "state_digest": printed, **question})  # fmt: skip

    try:
        session = await pool.start(theorem)
    except StartError as e:
        for row in rows:
            if row["tactic"] is None and row["key"] == start_key(digest, statement):
                settle(row, None, "statement", str(e), 0.0)
            else:
                counts["unreachable"] += 1
        return
    try:
        for row in rows:
            if row["tactic"] is None:
                settle(row, session.root.text, None, None, 0.0)
                continue
            path = list(row["path"] or [])
            if path_keys(digest, statement, [*path, row["tactic"]])[-1] != row["key"]:
                counts["unreachable"] += 1  # not this theorem's question under today's key
                continue
            state = session.root
            for step in path:
                r = await session.apply(state, step)
                if getattr(r, "state", None) is None:
                    state = None
                    break
                state = r.state
            if state is None:
                counts["unreachable"] += 1
                continue
            r = await session.apply(state, row["tactic"])
            st = getattr(r, "state", None)
            settle(row, None if st is None else st.text, None if st is not None else r.kind,
                   None if st is not None else r.message, float(r.lean_time_s),
                   state_digest(state.text))  # fmt: skip
    finally:
        await session.close()


async def verify_async(
    cache_dir: Path, lean: LeanConfig, repl_version: str, *, sample: float = 1.0, seed: int = 0,
    log_dir: Path | None = None,
) -> dict[str, Any]:  # fmt: skip
    """:func:`verify` inside a running event loop."""
    from burnqed.lean.environment import observe_repl
    from burnqed.lean.pool import LeanPool

    settings = lean_settings(lean, repl_version, running=await observe_repl(lean))
    digest = settings_digest(settings)
    store = ShardStore(Path(cache_dir) / "lean", LEAN_SCHEMA, settings=digest, description=settings)
    rows, others, unreadable = _rows(store)
    counts: Counter[str] = Counter()
    by_theorem: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        if not drawn(row["key"], sample, seed):
            continue
        if row["theorem"] is None:
            counts["no_question"] += 1
            continue
        by_theorem[row["theorem"]].append(row)
    checked = sum(len(v) for v in by_theorem.values())
    log.info("cache verify %s: %d of %d rows of this Lean drawn (sample %g, seed %d); %d rows of "
             "other toolchains or REPLs not asked", cache_dir, checked, len(rows), sample, seed,
             others)  # fmt: skip
    if by_theorem:
        async with LeanPool(lean, log_dir=log_dir) as pool:
            slots = asyncio.Semaphore(max(1, 2 * lean.workers))

            async def one(record: str, todo: list[dict]) -> None:
                async with slots:
                    try:
                        await _check_theorem(pool, record, todo, digest, store, counts)
                    except ReplError as e:
                        log.warning("cache verify: %s: %s", theorem_of(record).key, e)
                        counts["errors"] += len(todo)

            await asyncio.gather(*(one(r, todo) for r, todo in by_theorem.items()))
    store.flush()
    return {
        "dir": str(cache_dir),
        "settings": digest,
        "rows": len(rows),
        "other_settings_rows": others,
        "unreadable_shards": unreadable,
        "sample": sample,
        "seed": seed,
        "checked": checked,
        **{k: counts[k] for k in OUTCOMES},
        "evicted": store.evicted,
    }


def verify(
    cache_dir: Path, lean: LeanConfig, *, sample: float = 1.0, seed: int = 0,
    log_dir: Path | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Check a ``sample`` of the Lean rows stored under ``lean``'s key against a live REPL
    (module docstring); returns the counts.  The REPL's ``--version`` is read first (a bad
    ``lean.repl_command`` is an :class:`~burnqed.config.InputError` naming it)."""
    from burnqed.search.stage import check_repl

    repl_version = check_repl(lean)
    return asyncio.run(
        verify_async(cache_dir, lean, repl_version, sample=sample, seed=seed, log_dir=log_dir)
    )


__all__ = ["drawn", "verify", "verify_async"]
