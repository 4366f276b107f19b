"""The expansion cache's storage: append-only Parquet shards, one writer each.

A cache directory holds one subdirectory per kind of answer — ``policy/`` (one row per sampled
candidate) and ``lean/`` (one row per theorem start or tactic application) — of shards named
``part-<writer>-<NNNNNN>.parquet``, and ``runs/<writer>.json``, what each run that used the cache
asked it and saved (:func:`summary` adds them up).  ``<writer>`` is unique per process (time, pid,
random), so any number of processes — two evals side by side, a SLURM array — add shards at once
without a lock, a shared writer or a database: each shard is written whole to a hidden temporary
name, fsynced and renamed (:func:`~burnqed.trajectory.write_parquet_atomic`), so a reader sees a
shard complete or not at all, and a killed writer loses only the rows it had not flushed.  Nothing
written is rewritten; :func:`prune` is the one exception, run by hand, and it too only writes new
shards and removes old ones.

A row's ``key`` is the digest of everything that decides its answer (:mod:`burnqed.search.cache`),
its ``settings`` the digest of the run-wide part of it (model, backend, toolchain, …): a run loads
only the rows of its own settings.  Two rows with one key hold the same answer (both were computed
from the same inputs by deterministic code); one that differs is counted as a ``conflict`` (a
non-determinism the cache makes visible) and the first one read stands.

Example::

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> w = ShardStore(d / "lean", LEAN_SCHEMA, settings="s1")
    >>> w.put({"key": "k1", "text": "⊢ q", "error_kind": None, "error": None, "cost_s": 0.5})
    >>> w.flush()
    >>> ShardStore(d / "lean", LEAN_SCHEMA, settings="s1").get("k1")["text"]
    '⊢ q'
    >>> ShardStore(d / "lean", LEAN_SCHEMA, settings="other settings").get("k1") is None
    True
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from burnqed.trajectory import write_parquet_atomic

log = logging.getLogger(__name__)

KINDS = ("policy", "lean")
RUNS = "runs"  # runs/<writer>.json: what each run asked the cache (summary)
_SHARD = re.compile(r"^part-([\w.-]+)-(\d{6})\.parquet$")

# One sampled candidate (burnqed.policy.Candidate) of a prompt and seed.
POLICY_SCHEMA = pa.schema(
    [
        pa.field("key", pa.string(), nullable=False),  # burnqed.search.cache.candidate_key
        pa.field("settings", pa.string(), nullable=False),  # digest of the run-wide key part
        pa.field("model", pa.string(), nullable=False),  # the weights' digest (prune by model)
        pa.field("text", pa.string(), nullable=False),
        pa.field("logprob", pa.float64(), nullable=False),
        pa.field("num_tokens", pa.int32(), nullable=False),
        pa.field("finish_reason", pa.string(), nullable=False),
        pa.field("cost_s", pa.float64(), nullable=False),  # generation seconds it cost (a share)
    ]
)
# One theorem start or tactic application: the printed state, or the failure.
LEAN_SCHEMA = pa.schema(
    [
        pa.field("key", pa.string(), nullable=False),  # start_key / tactic_key
        pa.field("settings", pa.string(), nullable=False),
        pa.field("text", pa.string()),  # the new state as Lean prints it; null: it failed
        pa.field("error_kind", pa.string()),  # TacticFailure.kind, or "statement" (StartError)
        pa.field("error", pa.string()),  # the failure's message
        pa.field("cost_s", pa.float64(), nullable=False),  # Lean seconds it cost
    ]
)
SCHEMAS = {"policy": POLICY_SCHEMA, "lean": LEAN_SCHEMA}


def new_writer_id() -> str:
    """A name no other process's shards have: start time, pid and 24 random bits."""
    return f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}-{secrets.token_hex(3)}"


def shard_files(directory: Path) -> list[Path]:
    """The complete shards of one kind (hidden temporary files are not yet shards)."""
    if not Path(directory).is_dir():
        return []
    return sorted(p for p in Path(directory).iterdir() if _SHARD.match(p.name))


class ShardStore:
    """The rows of one kind with one ``settings`` digest: read from every shard at start (and again
    on :meth:`refresh`), looked up by key, and new rows appended as this process's own shards.

    Thread-safe: the search looks candidates up on its event loop while the generator's thread
    adds what the model answered.  A shard that cannot be read (a bad copy) is skipped with a
    warning; its answers are asked again.
    """

    def __init__(
        self,
        directory: Path,
        schema: pa.Schema,
        *,
        settings: str,
        writer: str | None = None,
        flush_rows: int = 1000,
        flush_s: float = 60.0,
    ) -> None:
        self.directory = Path(directory)
        self.schema = schema
        self.settings = settings
        self.writer = writer or new_writer_id()
        self.flush_rows = flush_rows
        self.flush_s = flush_s
        self._names = [f.name for f in schema if f.name not in ("key", "settings")]
        self._index: dict[str, tuple] = {}  # key → the row's values in self._names order
        self._seen: set[str] = set()  # shard names read (or written) by this store
        self._buffer: list[tuple[str, tuple]] = []
        self._shards_written = 0
        self._last_flush = time.monotonic()
        self._lock = threading.Lock()
        self.loaded = 0  # rows read from shards
        self.written = 0  # rows this store wrote
        self.conflicts = 0  # a key read twice with different answers
        self.skipped: list[str] = []  # shards that could not be read
        self.refresh()

    def __len__(self) -> int:
        return len(self._index)

    def refresh(self) -> int:
        """Read the shards other processes finished since the last call; returns the rows added."""
        added = 0
        for path in shard_files(self.directory):
            if path.name in self._seen:
                continue
            self._seen.add(path.name)
            try:
                table = pq.read_table(path, filters=[("settings", "=", self.settings)])
            except (OSError, pa.ArrowException) as e:  # a bad copy, or pruned meanwhile
                log.warning("%s: unreadable cache shard skipped (%s)", path, e)
                self.skipped.append(str(path))
                continue
            columns = [table.column(n).to_pylist() for n in self._names]
            keys = table.column("key").to_pylist()
            with self._lock:
                for key, *values in zip(keys, *columns, strict=True):
                    row = tuple(values)
                    known = self._index.get(key)
                    if known is None:
                        self._index[key] = row
                        added += 1
                    elif self._answer(known) != self._answer(row):
                        self.conflicts += 1
            self.loaded += table.num_rows
        if added:
            log.debug("%s: %d cached answers read", self.directory, added)
        return added

    def _answer(self, row: tuple) -> tuple:
        """The part of a row that is the answer (not what it cost, which the clock decided)."""
        return tuple(v for n, v in zip(self._names, row, strict=True) if n != "cost_s")

    def get(self, key: str) -> dict[str, Any] | None:
        row = self._index.get(key)
        return None if row is None else dict(zip(self._names, row, strict=True))

    def put(self, row: Mapping[str, Any]) -> None:
        """Add an answer (``key`` and the schema's other fields but ``settings``); it is written
        with the next shard — when ``flush_rows`` are waiting or ``flush_s`` have passed."""
        values = tuple(row[n] for n in self._names)
        with self._lock:
            if row["key"] in self._index:
                return
            self._index[row["key"]] = values
            self._buffer.append((row["key"], values))
            due = (
                len(self._buffer) >= self.flush_rows
                or time.monotonic() - self._last_flush >= self.flush_s
            )
        if due:
            self.flush()

    def flush(self) -> None:
        """Write the waiting rows as a new shard of this writer's (nothing when none wait)."""
        with self._lock:
            rows, self._buffer = self._buffer, []
            self._last_flush = time.monotonic()
            if not rows:
                return
            name = f"part-{self.writer}-{self._shards_written:06d}.parquet"
            self._shards_written += 1
            self._seen.add(name)
        data: dict[str, list] = {
            "key": [k for k, _ in rows],
            "settings": [self.settings] * len(rows),
        }
        for i, n in enumerate(self._names):
            data[n] = [v[i] for _, v in rows]
        self.directory.mkdir(parents=True, exist_ok=True)
        write_parquet_atomic(pa.Table.from_pydict(data, schema=self.schema), self.directory / name)
        self.written += len(rows)


def _dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.is_dir() else 0


def summary(cache_dir: Path) -> dict[str, Any]:
    """What ``burnqed cache stats`` prints: per kind, shards, rows, bytes (and for the policy, rows
    per model digest); the runs recorded in ``runs/`` and their hit rates by kind."""
    cache_dir = Path(cache_dir)
    out: dict[str, Any] = {"dir": str(cache_dir), "bytes": _dir_bytes(cache_dir), "kinds": {}}
    for kind in KINDS:
        shards = shard_files(cache_dir / kind)
        rows = 0
        models: Counter[str] = Counter()
        for s in shards:
            try:
                rows += pq.read_metadata(s).num_rows
                if kind == "policy":
                    models.update(pq.read_table(s, columns=["model"]).column("model").to_pylist())
            except (OSError, pa.ArrowException) as e:
                log.warning("%s: unreadable cache shard (%s)", s, e)
        out["kinds"][kind] = {
            "shards": len(shards),
            "rows": rows,
            "bytes": _dir_bytes(cache_dir / kind),
            **({"rows_by_model": dict(models.most_common())} if kind == "policy" else {}),
        }
    runs = []
    for f in sorted((cache_dir / RUNS).glob("*.json")) if (cache_dir / RUNS).is_dir() else []:
        try:
            runs.append(json.loads(f.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            log.warning("%s: unreadable run record", f)
    out["runs"] = len(runs)
    totals: dict[str, Counter] = {k: Counter() for k in ("policy", "lean", "starts")}
    for r in runs:
        totals["policy"].update(((r.get("policy") or {}).get("candidates")) or {})
        totals["lean"].update({k: v for k, v in (r.get("lean") or {}).items()
                               if k in ("hits", "misses")})  # fmt: skip
        totals["starts"].update(r.get("starts") or {})
    out["hit_rates"] = {
        k: {**dict(c), "hit_rate": hit_rate(c.get("hits", 0), c.get("misses", 0))}
        for k, c in totals.items()
    }
    return out


def hit_rate(hits: int, misses: int) -> float | None:
    """``hits / (hits + misses)``; None when nothing was asked.

    >>> hit_rate(3, 1), hit_rate(0, 0)
    (0.75, None)
    """
    return hits / (hits + misses) if hits + misses else None


def write_run_record(cache_dir: Path, writer: str, stats: Mapping[str, Any]) -> None:
    """``runs/<writer>.json``: one run's :meth:`~burnqed.search.cache.CachedSource.stats`."""
    d = Path(cache_dir) / RUNS
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / f".{writer}.json.tmp"
    tmp.write_text(json.dumps(stats, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, d / f"{writer}.json")


def prune(cache_dir: Path, keep: Callable[[str], bool]) -> dict[str, int]:
    """Drop the policy rows whose model digest ``keep`` refuses: each shard that loses rows is
    replaced by a new shard with the rest (written before the old one is removed, so a reader sees
    every kept row at any moment; run it while no search uses the cache, or its readers may skip a
    shard removed under them).  Lean rows do not depend on the model and stay.  Returns counts."""
    policy = Path(cache_dir) / "policy"
    writer = new_writer_id()
    kept = dropped = removed = 0
    for n, path in enumerate(shard_files(policy)):
        table = pq.read_table(path)
        mask = pa.array([keep(m) for m in table.column("model").to_pylist()], type=pa.bool_())
        rest = table.filter(mask)
        kept += rest.num_rows
        dropped += table.num_rows - rest.num_rows
        if rest.num_rows == table.num_rows:
            continue
        if rest.num_rows:
            write_parquet_atomic(rest, policy / f"part-{writer}-{n:06d}.parquet")
        path.unlink()
        removed += 1
    log.info("pruned %s: %d policy rows kept, %d dropped (%d shards replaced)", cache_dir, kept,
             dropped, removed)  # fmt: skip
    return {"kept": kept, "dropped": dropped, "shards_replaced": removed}


__all__ = [
    "KINDS",
    "LEAN_SCHEMA",
    "POLICY_SCHEMA",
    "SCHEMAS",
    "ShardStore",
    "hit_rate",
    "new_writer_id",
    "prune",
    "shard_files",
    "summary",
    "write_run_record",
]
