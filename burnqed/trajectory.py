"""Search trajectories: an append-only Parquet dataset of node rows and per-attempt summary rows.

Layout of a search output directory (SPEC §4.5)::

    out/nodes/part-000000.parquet     one row per search-tree node   (NODE_SCHEMA)
    out/summary/part-000000.parquet   one row per (theorem, attempt) (SUMMARY_SCHEMA)
    out/manifest.json                 written last by the stage: counts, config, provenance

Each checkpoint (every ``checkpoint_every`` finished attempts, and on close / SIGTERM) writes one NEW
pair of parts with the same number — never rewriting an earlier part — each to a hidden temporary
name and renamed into place, nodes first, summary second.  The summary part is the commit record:
a checkpoint counts only when both parts are readable and agree (the nodes part holds exactly the
nodes the summary rows announce).  So a crash between the two renames leaves an orphan nodes part
that readers skip (and report) and the next writer (resume) removes, redoing its attempts: nothing
is counted twice, and a kill -9 loses at most the attempts finished since the last checkpoint.

Readers return Arrow tables (or DuckDB views over them) plus the list of parts they skipped —
truncated, corrupt, orphaned or inconsistent — each named, with the reason; skipping is logged, never
silent and never fatal.

Attempt statuses, end reasons and counters are defined once, in :mod:`burnqed.outcomes`.

**Retried errors (the one rule every reader applies).**  An attempt whose summary row has status
``error`` did not run to a result (a REPL that kept dying, a policy server that stayed down, a
statement that would not start); ``--resume`` runs it again and, parts being append-only, writes
its new row in a later part.  So for each (theorem, attempt) the row of the *latest* part wins,
provided every earlier row of it is an ``error`` row; a superseded row's node rows (the partial tree
of the failed try) are dropped with it.  A later row for an attempt that already has a non-error
row is a duplicate: that later part is skipped and reported, as above — a finished attempt is never
redone.  :func:`read_summary`, :func:`read_nodes`, :func:`open_duckdb` and
:func:`finished_attempts` all go through :func:`_valid_checkpoints`, which applies the rule, so no
reader ever counts an attempt twice.

Example::

    >>> import tempfile, pathlib
    >>> out = pathlib.Path(tempfile.mkdtemp())
    >>> with TrajectoryWriter(out, checkpoint_every=50) as w:
    ...     pass                                        # w.add(result) per finished SearchResult
    >>> read_summary(out).table.num_rows, read_summary(out).skipped
    (0, [])
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

if TYPE_CHECKING:
    import duckdb

# The writer takes search results (burnqed.search.engine.SearchResult, burnqed.search.tree.Node) but
# does not import them, even for annotations: this module sits below search (and below the EBM and
# SFT stages that read trajectories), so it must not depend on it.
SearchResult = Any
Node = Any

log = logging.getLogger(__name__)

NODES_DIR = "nodes"
SUMMARY_DIR = "summary"
_PART = re.compile(r"^part-(\d{6,})\.parquet$")

NODE_SCHEMA = pa.schema(
    [
        # the theorem's key (burnqed.theorems: unique in its benchmark; not its Lean name)
        pa.field("theorem", pa.string(), nullable=False),
        pa.field("attempt", pa.int32(), nullable=False),  # 0-based attempt (pass@N)
        pa.field(
            "node_id", pa.int32(), nullable=False
        ),  # creation order within the attempt; root 0
        pa.field("parent_id", pa.int32()),  # null for the root
        pa.field("depth", pa.int32(), nullable=False),  # tactic steps from the root
        pa.field("state", pa.string()),  # Lean-printed state; null for error/duplicate edges
        pa.field("state_hash", pa.string()),  # blake2b-64 of `state` (of the target for duplicates)
        pa.field("tactic", pa.string()),  # tactic applied to the parent; null for the root
        pa.field("llm_logprob", pa.float64(), nullable=False),  # summed token logprob of `tactic`
        pa.field("cum_logprob", pa.float64(), nullable=False),  # sum along the path from the root
        pa.field("priority", pa.float64(), nullable=False),  # frontier key (-inf for error edges)
        pa.field("ebm_energy", pa.float32()),  # value-model energy; null without one / not scored
        pa.field("status", pa.string(), nullable=False),  # open | proved | failed (final)
        pa.field("on_proof_path", pa.bool_(), nullable=False),  # label: on the verified proof
        pa.field("solved", pa.bool_(), nullable=False),  # the state has no goals
        pa.field("error", pa.string()),  # "kind: message" of a rejected tactic or proof
        pa.field("duplicate_of", pa.int32()),  # node_id first reaching this state; null otherwise
        pa.field("expansion_index", pa.int32()),  # 0-based expansion order; null if never expanded
        pa.field("step", pa.int32()),  # scheduler step that popped it; null if never expanded
        pa.field("created_s", pa.float64(), nullable=False),  # creation time since attempt start
        pa.field("lean_s", pa.float64(), nullable=False),  # Lean time of the call creating it
        pa.field("expand_wall_s", pa.float64(), nullable=False),  # expansion wall time (0 if none)
        pa.field("expand_lean_s", pa.float64(), nullable=False),  # expansion's summed Lean time
        pa.field("tokens", pa.int32(), nullable=False),  # tokens generated for its expansion
        pa.field("num_candidates", pa.int32(), nullable=False),  # raw candidates of the expansion
        pa.field("unique_candidates", pa.int32(), nullable=False),  # after de-duplication
    ]
)

SUMMARY_SCHEMA = pa.schema(
    [
        pa.field("theorem", pa.string(), nullable=False),  # theorem key
        pa.field("attempt", pa.int32(), nullable=False),
        # burnqed.outcomes: proved | failed | timeout | statement_error | error
        pa.field("status", pa.string(), nullable=False),
        # why the search stopped: proof | budget | frontier | timeout | statement | fault
        pa.field("ended_by", pa.string(), nullable=False),
        pa.field("proof", pa.list_(pa.string())),  # verified tactic list; null unless proved
        pa.field("verified", pa.bool_(), nullable=False),  # whole-file verification accepted it
        # expansion index that produced the proof's final state: solved at budget b ⇔ < b
        pa.field("proof_expansion", pa.int32()),
        pa.field("nodes_expanded", pa.int32(), nullable=False),
        pa.field("nodes_total", pa.int32(), nullable=False),  # node rows of this attempt
        pa.field("rejected_proofs", pa.int32(), nullable=False),
        # the verifier's reasons, one entry per rejected proof (why each solved state was no proof)
        pa.field("rejections", pa.list_(pa.string()), nullable=False),
        pa.field("wall_s", pa.float64(), nullable=False),
        pa.field("lean_s", pa.float64(), nullable=False),
        pa.field("gen_wait_s", pa.float64(), nullable=False),
        pa.field("tokens", pa.int64(), nullable=False),
        # tactics a wall-clock backstop failed instead of the heartbeat limit (non-deterministic)
        pa.field("wall_timeouts", pa.int32(), nullable=False),
        pa.field("reasons", pa.list_(pa.string()), nullable=False),
    ]
)


class TrajectoryError(RuntimeError):
    """A trajectory directory cannot be written as asked (the message names it)."""


# --------------------------------------------------------------------------------------------
# Writing


def _node_columns(theorem: str, attempt: int, nodes: list[Node]) -> dict[str, list]:
    """Column lists for one tree; one comprehension per column is several times faster than rows."""
    n = len(nodes)

    def opt(values: Iterable[int]) -> list[int | None]:
        return [v if v >= 0 else None for v in values]

    return {
        "theorem": [theorem] * n,
        "attempt": [attempt] * n,
        "node_id": [x.node_id for x in nodes],
        "parent_id": opt(x.parent_id for x in nodes),
        "depth": [x.depth for x in nodes],
        "state": [x.text for x in nodes],
        "state_hash": [x.state_hash for x in nodes],
        "tactic": [x.tactic for x in nodes],
        "llm_logprob": [x.llm_logprob for x in nodes],
        "cum_logprob": [x.cum_logprob for x in nodes],
        "priority": [x.priority for x in nodes],
        "ebm_energy": [x.ebm_energy for x in nodes],
        "status": [x.status for x in nodes],
        "on_proof_path": [x.on_proof_path for x in nodes],
        "solved": [x.solved for x in nodes],
        "error": [x.error for x in nodes],
        "duplicate_of": opt(x.duplicate_of for x in nodes),
        "expansion_index": opt(x.expansion_index for x in nodes),
        "step": opt(x.step for x in nodes),
        "created_s": [x.created_s for x in nodes],
        "lean_s": [x.lean_s for x in nodes],
        "expand_wall_s": [x.expand_wall_s for x in nodes],
        "expand_lean_s": [x.expand_lean_s for x in nodes],
        "tokens": [x.expand_tokens for x in nodes],
        "num_candidates": [x.num_candidates for x in nodes],
        "unique_candidates": [x.unique_candidates for x in nodes],
    }


def _summary_row(r: SearchResult) -> dict[str, Any]:
    return {
        "theorem": r.theorem,
        "attempt": r.attempt,
        "status": r.status,
        "ended_by": r.ended_by,
        "proof": list(r.proof) if r.proof is not None else None,
        "verified": r.verified,
        "proof_expansion": r.proof_expansion,
        "nodes_expanded": r.nodes_expanded,
        "nodes_total": r.nodes_total,
        "rejected_proofs": r.rejected_proofs,
        "rejections": list(r.rejections),
        "wall_s": r.wall_s,
        "lean_s": r.lean_s,
        "gen_wait_s": r.gen_wait_s,
        "tokens": r.tokens,
        "wall_timeouts": r.wall_timeouts,
        "reasons": list(r.reasons),
    }


def _part_ids(directory: Path) -> list[int]:
    if not directory.is_dir():
        return []
    return sorted(int(m.group(1)) for p in directory.iterdir() if (m := _PART.match(p.name)))


def part_name(part_id: int) -> str:
    return f"part-{part_id:06d}.parquet"


def write_parquet_atomic(
    table: pa.Table, path: Path, metadata: Mapping[str, str] | None = None
) -> None:
    """Write ``table`` to ``path`` all or nothing: a hidden temporary file, fsynced, renamed."""
    if metadata:
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), **metadata})
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(table, tmp, compression="zstd")
    # fsync before the rename: a pre-empted machine must not leave a renamed but empty part.
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


class TrajectoryWriter:
    """Buffers finished attempts and appends them as new part pairs every ``checkpoint_every``.

    ``add`` takes a :class:`~burnqed.search.engine.SearchResult` with its tree (or ``nodes=None``
    rows when the tree is absent).  Context manager: leaving it (also by an exception or
    cancellation) flushes what is buffered.  Opening a directory that already holds parts continues
    the numbering after them (resume); ``metadata`` (str → str) goes into every part's schema.
    ``before_checkpoint``: called before each part pair is written (the expansion cache writes the
    answers the attempts were found with, so a killed run's resume finds them for every attempt it
    does not redo).
    """

    def __init__(
        self,
        out: str | Path,
        *,
        checkpoint_every: int = 50,
        metadata: Mapping[str, str] | None = None,
        before_checkpoint: Callable[[], None] | None = None,
    ) -> None:
        if checkpoint_every < 1:
            raise ValueError(f"checkpoint_every must be >= 1, got {checkpoint_every}")
        self.out = Path(out)
        self.checkpoint_every = checkpoint_every
        self.before_checkpoint = before_checkpoint
        self.metadata = {k: str(v) for k, v in (metadata or {}).items()}
        self.nodes_dir = self.out / NODES_DIR
        self.summary_dir = self.out / SUMMARY_DIR
        self.nodes_dir.mkdir(parents=True, exist_ok=True)
        self.summary_dir.mkdir(parents=True, exist_ok=True)
        for d in (self.nodes_dir, self.summary_dir):
            for stale in d.glob(".part-*.tmp"):  # a checkpoint killed mid-write; never renamed
                log.warning("removing unfinished temporary part %s", stale)
                stale.unlink()
        # A nodes part without its summary part is a checkpoint killed between its two renames:
        # never committed, so its attempts are redone; removing it keeps later reads clean.
        committed = set(_part_ids(self.summary_dir))
        for pid in _part_ids(self.nodes_dir):
            if pid not in committed:
                log.warning("removing uncommitted part %s", self.nodes_dir / part_name(pid))
                (self.nodes_dir / part_name(pid)).unlink()
        ids = _part_ids(self.nodes_dir) + _part_ids(self.summary_dir)
        self.next_part = max(ids) + 1 if ids else 0
        self._nodes: dict[str, list] = {f.name: [] for f in NODE_SCHEMA}
        self._summary: list[dict[str, Any]] = []
        self.parts_written = 0
        self.rows_written = 0
        self.attempts_written = 0

    def __enter__(self) -> TrajectoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def buffered(self) -> int:
        return len(self._summary)

    def add(self, result: SearchResult) -> None:
        if result.tree is None and result.nodes_total:
            raise TrajectoryError(
                f"{result.theorem}#{result.attempt}: result has no tree; search with keep_trees "
                "or pass the writer to search_all"
            )
        if result.tree is not None:
            cols = _node_columns(result.theorem, result.attempt, result.tree.nodes)
            for name, values in cols.items():
                self._nodes[name].extend(values)
        self._summary.append(_summary_row(result))
        if len(self._summary) >= self.checkpoint_every:
            self.checkpoint()

    def checkpoint(self) -> None:
        """Write buffered attempts as a new part pair (nothing when the buffer is empty)."""
        if not self._summary:
            return
        if self.before_checkpoint is not None:
            self.before_checkpoint()
        part = part_name(self.next_part)
        # Column by column: several times faster than pa.table(dict, schema=...) on Python lists.
        nodes = pa.Table.from_arrays(
            [pa.array(self._nodes[f.name], type=f.type) for f in NODE_SCHEMA], schema=NODE_SCHEMA
        )
        summary = pa.Table.from_pylist(self._summary, schema=SUMMARY_SCHEMA)
        # Nodes first: the summary part commits the checkpoint (see the module docstring).
        write_parquet_atomic(nodes, self.nodes_dir / part, self.metadata)
        write_parquet_atomic(summary, self.summary_dir / part, self.metadata)
        log.info("checkpoint %s: %d attempts, %d node rows", part, summary.num_rows, nodes.num_rows)
        self.next_part += 1
        self.parts_written += 1
        self.rows_written += nodes.num_rows
        self.attempts_written += summary.num_rows
        self._nodes = {f.name: [] for f in NODE_SCHEMA}
        self._summary = []

    def close(self) -> None:
        self.checkpoint()


# --------------------------------------------------------------------------------------------
# Reading


@dataclass(frozen=True)
class TrajectoryRead:
    """What a reader returns: the table of every valid part, and the parts it skipped (with why)."""

    table: pa.Table
    skipped: list[str]  # "<path>: <reason>" per skipped part


def _check_schema(table: pa.Table, schema: pa.Schema) -> str | None:
    for f in schema:
        if f.name not in table.column_names:
            return f"missing column {f.name!r}"
        if table.schema.field(f.name).type != f.type:
            return (
                f"column {f.name!r} has type {table.schema.field(f.name).type}, expected {f.type}"
            )
    return None


@dataclass(frozen=True)
class _Checkpoint:
    part: str
    summary: pa.Table  # only the rows still in effect (superseded error rows removed)
    nodes_path: Path
    superseded: frozenset[tuple[str, int]] = frozenset()  # attempts retried in a later part


def _keys(table: pa.Table) -> list[tuple[str, int]]:
    return list(
        zip(table.column("theorem").to_pylist(), table.column("attempt").to_pylist(), strict=True)
    )


def _without(table: pa.Table, keys: frozenset[tuple[str, int]]) -> pa.Table:
    """``table`` minus the rows of the (theorem, attempt) pairs in ``keys``."""
    if not keys:
        return table
    return table.filter(pa.array([k not in keys for k in _keys(table)], type=pa.bool_()))


def _valid_checkpoints(
    out: Path, *, read_nodes_fully: bool
) -> tuple[list[_Checkpoint], list[str], dict[str, pa.Table]]:
    """Part pairs that are readable, agree with each other and repeat no finished (theorem,
    attempt); rows retried after an ``error`` are resolved by the rule in the module docstring."""
    out = Path(out)
    nodes_dir, summary_dir = out / NODES_DIR, out / SUMMARY_DIR
    if not out.is_dir():
        raise FileNotFoundError(f"{out}: no such trajectory directory")
    skipped: list[str] = []
    valid: list[_Checkpoint] = []
    node_tables: dict[str, pa.Table] = {}
    seen: dict[tuple[str, int], tuple[str, str]] = {}  # attempt → (part, status) of its row
    superseded: dict[str, set[tuple[str, int]]] = {}  # part → its attempts retried later
    summary_ids = set(_part_ids(summary_dir))
    for pid in _part_ids(nodes_dir):
        if pid not in summary_ids:
            skipped.append(
                f"{nodes_dir / part_name(pid)}: no summary part (checkpoint interrupted); "
                "its attempts are not finished"
            )
    for pid in sorted(summary_ids):
        part = part_name(pid)
        spath, npath = summary_dir / part, nodes_dir / part
        try:
            summary = pq.read_table(spath)
        except Exception as e:
            skipped.append(f"{spath}: unreadable ({type(e).__name__}: {e}); with {npath}")
            continue
        problem = _check_schema(summary, SUMMARY_SCHEMA)
        if problem:
            skipped.append(f"{spath}: {problem}; with {npath}")
            continue
        expected = sum(summary.column("nodes_total").to_pylist())
        problem = None
        try:
            if read_nodes_fully:
                nodes = pq.read_table(npath)
                problem = _check_schema(nodes, NODE_SCHEMA)
                rows = nodes.num_rows
            else:
                rows = pq.read_metadata(npath).num_rows
        except FileNotFoundError:
            skipped.append(f"{spath}: its nodes part {npath} is missing")
            continue
        except Exception as e:
            skipped.append(f"{npath}: unreadable ({type(e).__name__}: {e}); with {spath}")
            continue
        if problem:
            skipped.append(f"{npath}: {problem}; with {spath}")
            continue
        if rows != expected:
            skipped.append(
                f"{npath}: {rows} node rows but its summary announces {expected}; with {spath}"
            )
            continue
        keys = _keys(summary)
        # Only an earlier `error` row may be superseded (a retry); anything else is a duplicate.
        clash = next((k for k in keys if k in seen and seen[k][1] != "error"), None)
        if clash is None and len(set(keys)) != len(keys):
            clash = next(k for k in keys if keys.count(k) > 1)
        if clash is not None:
            where = seen[clash][0] if clash in seen else part
            skipped.append(
                f"{spath}: attempt {clash[0]}#{clash[1]} already in {where}; skipped with {npath}"
            )
            continue
        for k, status in zip(keys, summary.column("status").to_pylist(), strict=True):
            if k in seen:
                superseded.setdefault(seen[k][0], set()).add(k)
            seen[k] = (part, status)
        valid.append(_Checkpoint(part, summary, npath))
        if read_nodes_fully:
            node_tables[part] = nodes
    resolved = []
    for c in valid:
        drop = frozenset(superseded.get(c.part, ()))
        resolved.append(_Checkpoint(c.part, _without(c.summary, drop), c.nodes_path, drop))
        if drop and c.part in node_tables:
            node_tables[c.part] = _without(node_tables[c.part], drop)
    valid = resolved
    for s in skipped:
        log.warning("trajectory part skipped: %s", s)
    return valid, skipped, node_tables


def _concat(tables: list[pa.Table], schema: pa.Schema) -> pa.Table:
    if not tables:
        return schema.empty_table()
    # Parts carry run metadata in their schemas; the concatenation keeps the columns only.
    return pa.concat_tables([t.select(schema.names).cast(schema) for t in tables])


def read_summary(out: str | Path) -> TrajectoryRead:
    """Summary rows of every valid checkpoint of ``out`` (SUMMARY_SCHEMA)."""
    valid, skipped, _ = _valid_checkpoints(Path(out), read_nodes_fully=False)
    return TrajectoryRead(_concat([c.summary for c in valid], SUMMARY_SCHEMA), skipped)


def read_nodes(out: str | Path) -> TrajectoryRead:
    """Node rows of every valid checkpoint of ``out`` (NODE_SCHEMA)."""
    valid, skipped, nodes = _valid_checkpoints(Path(out), read_nodes_fully=True)
    return TrajectoryRead(_concat([nodes[c.part] for c in valid], NODE_SCHEMA), skipped)


def finished_attempts(out: str | Path) -> tuple[set[tuple[str, int]], list[str]]:
    """(theorem, attempt) pairs of ``out`` that ran to a result — every status but ``error`` — which
    is what ``--resume`` skips (it retries the ``error`` ones) + skipped parts."""
    if not Path(out).is_dir():
        return set(), []
    valid, skipped, _ = _valid_checkpoints(Path(out), read_nodes_fully=False)
    done: set[tuple[str, int]] = set()
    for c in valid:
        statuses = c.summary.column("status").to_pylist()
        done.update(k for k, s in zip(_keys(c.summary), statuses, strict=True) if s != "error")
    return done, skipped


def open_duckdb(
    out: str | Path, con: duckdb.DuckDBPyConnection | None = None
) -> tuple[duckdb.DuckDBPyConnection, list[str]]:
    """A DuckDB connection with views ``nodes`` and ``summary`` over the valid parts of ``out``.

    Example: ``con.sql("select status, count(*) from summary group by 1").fetchall()``.
    """
    import duckdb

    # One validation pass with the nodes read in full, so both views cover the same checkpoints.
    valid, skipped, nodes = _valid_checkpoints(Path(out), read_nodes_fully=True)
    con = con or duckdb.connect()
    con.register("nodes", _concat([nodes[c.part] for c in valid], NODE_SCHEMA))
    con.register("summary", _concat([c.summary for c in valid], SUMMARY_SCHEMA))
    return con, skipped


MANIFEST = "manifest.json"  # a search output's manifest (burnqed.search.stage writes it last)


def search_part_dirs(directory: str | Path) -> list[Path]:
    """The trajectory directories of a search output: ``directory`` itself when it holds parts,
    else its shards — those its ``manifest.json`` lists (so a stale shard of an earlier, differently
    sharded run is not read), or every ``shard_*`` without a manifest.  A listed shard without
    parts raises; no parts at all gives ``[]`` (each caller says what that means for it)."""
    directory = Path(directory)
    if (directory / SUMMARY_DIR).is_dir():
        return [directory]
    if not directory.is_dir():
        raise FileNotFoundError(f"{directory}: no such search directory (run its search first)")
    listed = []
    manifest = directory / MANIFEST
    if manifest.is_file():
        try:
            listed = json.loads(manifest.read_text(encoding="utf-8")).get("shards") or []
        except json.JSONDecodeError:
            log.warning("%s: not valid JSON; reading every shard_* directory", manifest)
    shards = [directory / Path(s).name for s in listed] or sorted(directory.glob("shard_*"))
    missing = [d for d in shards if not (d / SUMMARY_DIR).is_dir()]
    if missing:
        raise FileNotFoundError(f"{missing[0]}: listed shard has no trajectory parts (summary/)")
    return shards
