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
shards and removes old ones (and the temporaries killed writers left: ``stats`` lists them apart).

A row's ``key`` is the digest of everything that decides its answer (:mod:`burnqed.search.cache`),
its ``settings`` the digest of the run-wide part of it (model, backend, toolchain, …): a run loads
only the rows of its own settings, and ``settings/<digest>.json`` says what each digest stands for
(the toolchain and REPL of Lean answers: what ``stats`` lists and ``prune --lean --toolchain``
matches).  A Lean row also keeps its question — the theorem, the tactics from its root to the state,
the tactic — which the index does not load: ``burnqed cache verify`` asks Lean again from it.  Two
rows with one key hold the same answer (both were computed from the same inputs by deterministic
code); one that differs is counted as a ``conflict`` (a non-determinism the cache makes visible),
whether read from two shards or put while another is held, and the first one stands.  A failure's
message is compared with its metavariables renumbered (:func:`normalise_message`): Lean numbers
``?m.N`` in the order it makes them, so another process's numbers are the same answer.

**Eviction.**  An answer Lean refutes (a re-check, a rebuild, ``cache verify``) is evicted: a
tombstone row (the key and the digest of the evicted answer) in ``<kind>/evicted/``, written like a
shard; every reader drops that answer for that key, and the next live answer is stored anew (a
tombstone names one answer, so the new one stands).

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

import contextlib
import hashlib
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
# One theorem start or tactic application: the printed state, or the failure; and the question.
LEAN_SCHEMA = pa.schema(
    [
        pa.field("key", pa.string(), nullable=False),  # start_key / tactic_key
        pa.field("settings", pa.string(), nullable=False),
        pa.field("text", pa.string()),  # the new state as Lean prints it; null: it failed
        pa.field("error_kind", pa.string()),  # TacticFailure.kind, or "statement" (StartError)
        pa.field("error", pa.string()),  # the failure's message
        pa.field("cost_s", pa.float64(), nullable=False),  # Lean seconds it cost
        # The check beside the key: the digest of the state the tactic ran on as Lean printed it
        # (burnqed.search.cache.state_digest; null: a start, or a row from before it was kept).
        pa.field("state_digest", pa.string()),
        # The question, for `burnqed cache verify` (not loaded into the index): the theorem as JSON
        # (burnqed.search.cache.theorem_record), the tactics from its root to the state, the tactic
        # (null: a start).  Null in rows written before it was kept.
        pa.field("theorem", pa.string()),
        pa.field("path", pa.list_(pa.string())),
        pa.field("tactic", pa.string()),
    ]
)
QUESTION_COLUMNS = ("theorem", "path", "tactic")
SCHEMAS = {"policy": POLICY_SCHEMA, "lean": LEAN_SCHEMA}
# An evicted answer: every reader drops the answer of that digest under that key.
EVICTION_SCHEMA = pa.schema(
    [
        pa.field("key", pa.string(), nullable=False),
        pa.field("settings", pa.string(), nullable=False),
        pa.field("answer", pa.string(), nullable=False),  # answer_digest of the evicted answer
        pa.field("reason", pa.string(), nullable=False),  # what refuted it
    ]
)
EVICTED = "evicted"  # <kind>/evicted/part-*.parquet: tombstones
SETTINGS = "settings"  # settings/<digest>.json: what a settings digest stands for
# Metavariable and unique-name numbers Lean hands out in the order it creates them: another process
# (another history of elaboration) numbers them otherwise, so they are no part of an answer.
_RENUMBERED = re.compile(r"(\?[mu]\.|_uniq\.)\d+")
_TEMPORARY = re.compile(r"^\.part-.*\.tmp$")  # a shard being written (or a killed writer's)
STALE_TEMPORARY_S = 3600.0  # prune removes temporaries older than this (a write takes seconds)


def new_writer_id() -> str:
    """A name no other process's shards have: start time, pid and 24 random bits."""
    return f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}-{secrets.token_hex(3)}"


def shard_files(directory: Path) -> list[Path]:
    """The complete shards of one kind (hidden temporary files are not yet shards)."""
    if not Path(directory).is_dir():
        return []
    return sorted(p for p in Path(directory).iterdir() if _SHARD.match(p.name))


def normalise_message(message: str | None) -> str | None:
    """A failure's message as an answer compares it: ``?m.N``, ``?u.N`` and ``_uniq.N`` renumbered
    (a renumbering is the same answer, not a conflict).

    >>> normalise_message("don't know how to synthesize placeholder ?m.1234 for ?u.7")
    "don't know how to synthesize placeholder ?m.N for ?u.N"
    """
    return None if message is None else _RENUMBERED.sub(r"\1N", message)


def answer_digest(answer: Any) -> str:
    """The digest a tombstone names an answer by (:meth:`ShardStore.answer`)."""
    text = json.dumps(list(answer), default=str, ensure_ascii=False)
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def read_shard(path: Path, columns: list[str], settings: str | None) -> pa.Table:
    """The ``columns`` of a shard that it has (older shards lack the question columns; a missing
    one reads as nulls), its rows of ``settings`` only when given."""
    present = set(pq.read_schema(path).names)
    table = pq.read_table(
        path,
        columns=[c for c in columns if c in present],
        filters=None if settings is None else [("settings", "=", settings)],
    )
    for c in columns:
        if c not in table.column_names:
            table = table.append_column(c, pa.nulls(table.num_rows))
    return table


class ShardStore:
    """The rows of one kind with one ``settings`` digest: read from every shard at start (and again
    on :meth:`refresh`), looked up by key, and new rows appended as this process's own shards;
    answers refuted by Lean evicted (:meth:`evict`: module docstring).

    Thread-safe: the search looks candidates up on its event loop while the generator's thread
    adds what the model answered.  A shard that cannot be read (a bad copy) is skipped with a
    warning; its answers are asked again.  ``description``: what the settings digest stands for,
    written once beside the shards (``settings/<digest>.json``) with this writer's first shard.
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
        description: Mapping[str, Any] | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.schema = schema
        self.settings = settings
        self.writer = writer or new_writer_id()
        self.flush_rows = flush_rows
        self.flush_s = flush_s
        self.description = description
        # Written: every column but key and settings; indexed: the answer and its cost.
        self._columns = [f.name for f in schema if f.name not in ("key", "settings")]
        self._names = [n for n in self._columns if n not in QUESTION_COLUMNS]
        self._index: dict[str, tuple] = {}  # key → the row's values in self._names order
        self._evicted: dict[str, set[str]] = {}  # key → digests of its evicted answers
        self._seen: set[str] = set()  # shard names read (or written) by this store
        self._buffer: list[tuple[str, tuple]] = []  # (key, values in self._columns order)
        self._tombstones: list[tuple[str, str, str]] = []  # (key, answer digest, reason)
        self._shards_written = 0
        self._last_flush = time.monotonic()
        self._lock = threading.Lock()
        self.loaded = 0  # rows read from shards
        self.written = 0  # rows this store wrote
        self.conflicts = 0  # a key read or put twice with different answers
        self.evicted = 0  # answers this store evicted
        self.dropped: list[str] = []  # keys whose held answer another writer's tombstone dropped
        self.skipped: list[str] = []  # shards that could not be read
        self.refresh()

    def __len__(self) -> int:
        return len(self._index)

    def refresh(self) -> int:
        """Read the shards and tombstones other processes finished since the last call (tombstones
        first, so a row evicted meanwhile is not served); returns the rows added."""
        for path in shard_files(self.directory / EVICTED):
            if f"{EVICTED}/{path.name}" in self._seen:
                continue
            self._seen.add(f"{EVICTED}/{path.name}")
            try:
                table = read_shard(path, ["key", "answer"], self.settings)
            except (OSError, pa.ArrowException) as e:
                log.warning("%s: unreadable tombstones skipped (%s)", path, e)
                self.skipped.append(str(path))
                continue
            with self._lock:
                for key, digest in zip(table.column("key").to_pylist(),
                                       table.column("answer").to_pylist(), strict=True):  # fmt: skip
                    self._evicted.setdefault(key, set()).add(digest)
                    known = self._index.get(key)
                    if known is not None and answer_digest(self.answer(known)) == digest:
                        del self._index[key]
                        self.dropped.append(key)
        added = 0
        for path in shard_files(self.directory):
            if path.name in self._seen:
                continue
            self._seen.add(path.name)
            try:
                table = read_shard(path, ["key", *self._names], self.settings)
            except (OSError, pa.ArrowException) as e:  # a bad copy, or pruned meanwhile
                log.warning("%s: unreadable cache shard skipped (%s)", path, e)
                self.skipped.append(str(path))
                continue
            columns = [table.column(n).to_pylist() for n in self._names]
            keys = table.column("key").to_pylist()
            with self._lock:
                for key, *values in zip(keys, *columns, strict=True):
                    row = tuple(values)
                    gone = self._evicted.get(key)
                    if gone and answer_digest(self.answer(row)) in gone:
                        continue
                    known = self._index.get(key)
                    if known is None:
                        self._index[key] = row
                        added += 1
                    elif self.answer(known) != self.answer(row):
                        self.conflicts += 1
            self.loaded += table.num_rows
        if added:
            log.debug("%s: %d cached answers read", self.directory, added)
        return added

    def answer(self, row: tuple | Mapping[str, Any]) -> tuple:
        """The part of a row that is the answer: not what it cost (the clock decided that), and a
        failure's message with its metavariables renumbered (:func:`normalise_message`)."""
        if isinstance(row, Mapping):
            row = tuple(row.get(n) for n in self._names)
        return tuple(
            normalise_message(v) if n == "error" else v
            for n, v in zip(self._names, row, strict=True)
            if n != "cost_s"
        )

    def get(self, key: str) -> dict[str, Any] | None:
        row = self._index.get(key)
        return None if row is None else dict(zip(self._names, row, strict=True))

    def put(self, row: Mapping[str, Any]) -> None:
        """Add an answer (``key`` and the schema's other fields but ``settings``; the question
        columns may be left out); it is written with the next shard — when ``flush_rows`` are
        waiting or ``flush_s`` have passed.  A key held already keeps its answer; a different
        one is counted as a conflict."""
        values = tuple(row.get(n) for n in self._columns)
        indexed = tuple(row.get(n) for n in self._names)
        with self._lock:
            known = self._index.get(row["key"])
            if known is not None:
                if self.answer(known) != self.answer(indexed):
                    self.conflicts += 1
                    log.warning("%s: key %s answered otherwise than the answer held (kept)",
                                self.directory, row["key"])  # fmt: skip
                return
            self._index[row["key"]] = indexed
            self._buffer.append((row["key"], values))
            due = (
                len(self._buffer) >= self.flush_rows
                or time.monotonic() - self._last_flush >= self.flush_s
            )
        if due:
            self.flush()

    def evict(self, key: str, reason: str) -> bool:
        """Drop the answer held under ``key`` (Lean refuted it: ``reason``), here and — through a
        tombstone written with the next flush — for every reader; False when none is held."""
        with self._lock:
            known = self._index.pop(key, None)
            if known is None:
                return False
            digest = answer_digest(self.answer(known))
            self._evicted.setdefault(key, set()).add(digest)
            self._tombstones.append((key, digest, reason))
            self.evicted += 1
        log.warning("%s: evicted the answer of key %s: %s", self.directory, key, reason)
        return True

    def flush(self) -> None:
        """Write the waiting tombstones and rows, each as a new shard of this writer's (nothing
        when none wait); the settings' description with the first."""
        with self._lock:
            rows, self._buffer = self._buffer, []
            tombstones, self._tombstones = self._tombstones, []
            self._last_flush = time.monotonic()
            if not rows and not tombstones:
                return
            number = self._shards_written
            self._shards_written += 1
            name = f"part-{self.writer}-{number:06d}.parquet"
            self._seen.update((name, f"{EVICTED}/{name}"))
        self.directory.mkdir(parents=True, exist_ok=True)
        if self.description is not None and number == 0:
            write_settings_description(self.directory.parent, self.settings, self.description)
        if tombstones:  # first: a reader never sees a refuted answer come back
            (self.directory / EVICTED).mkdir(exist_ok=True)
            data = {
                "key": [k for k, _, _ in tombstones],
                "settings": [self.settings] * len(tombstones),
                "answer": [d for _, d, _ in tombstones],
                "reason": [r for _, _, r in tombstones],
            }
            write_parquet_atomic(pa.Table.from_pydict(data, schema=EVICTION_SCHEMA),
                                 self.directory / EVICTED / name)  # fmt: skip
        if rows:
            data = {"key": [k for k, _ in rows], "settings": [self.settings] * len(rows)}
            for i, n in enumerate(self._columns):
                data[n] = [v[i] for _, v in rows]
            write_parquet_atomic(pa.Table.from_pydict(data, schema=self.schema),
                                 self.directory / name)  # fmt: skip
            self.written += len(rows)


def write_settings_description(
    cache_dir: Path, digest: str, description: Mapping[str, Any]
) -> None:
    """``settings/<digest>.json``: what a settings digest stands for (once; atomic)."""
    d = Path(cache_dir) / SETTINGS
    target = d / f"{digest}.json"
    if target.exists():
        return
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / f".{digest}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(description, indent=2, sort_keys=True, default=str) + "\n",
                   encoding="utf-8")  # fmt: skip
    os.replace(tmp, target)


def settings_descriptions(cache_dir: Path) -> dict[str, dict]:
    """Every ``settings/<digest>.json`` of a cache directory, by digest."""
    out = {}
    d = Path(cache_dir) / SETTINGS
    for f in sorted(d.glob("*.json")) if d.is_dir() else []:
        with contextlib.suppress(OSError, ValueError):
            out[f.stem] = json.loads(f.read_text(encoding="utf-8"))
    return out


def lean_label(description: Mapping[str, Any] | None) -> dict[str, Any]:
    """The toolchain and REPL a Lean settings description names (what ``stats`` lists and
    ``prune --lean --toolchain`` matches): the project's ``lean-toolchain``, ``lean --version`` and
    the REPL's ``--version`` text (None where unknown)."""
    d = description or {}
    project = d.get("lean_project") or {}
    toolchain = ((d.get("environment") or {}).get("toolchain")) or {}
    return {
        "lean_toolchain": project.get("lean_toolchain"),
        "lean_version": toolchain.get("version"),
        "repl_version": d.get("repl_version"),
    }


def temporaries(cache_dir: Path) -> list[Path]:
    """Shards being written now, or left by writers killed while writing (``.part-*.tmp``)."""
    root = Path(cache_dir)
    return sorted(f for f in root.rglob(".part-*.tmp") if f.is_file()) if root.is_dir() else []


def _dir_bytes(path: Path) -> int:
    """Bytes of the files under ``path``, temporaries (:func:`temporaries`) not counted."""
    if not path.is_dir():
        return 0
    return sum(f.stat().st_size for f in path.rglob("*")
               if f.is_file() and not _TEMPORARY.match(f.name))  # fmt: skip


def summary(cache_dir: Path) -> dict[str, Any]:
    """What ``burnqed cache stats`` prints: per kind, shards, rows, bytes (and for the policy, rows
    per model digest); the runs recorded in ``runs/`` and their hit rates by kind."""
    cache_dir = Path(cache_dir)
    out: dict[str, Any] = {"dir": str(cache_dir), "bytes": _dir_bytes(cache_dir), "kinds": {}}
    descriptions = settings_descriptions(cache_dir)
    for kind in KINDS:
        shards = shard_files(cache_dir / kind)
        rows = 0
        models: Counter[str] = Counter()
        settings: Counter[str] = Counter()
        for s in shards:
            try:
                rows += pq.read_metadata(s).num_rows
                if kind == "policy":
                    models.update(pq.read_table(s, columns=["model"]).column("model").to_pylist())
                else:
                    settings.update(
                        pq.read_table(s, columns=["settings"]).column("settings").to_pylist()
                    )
            except (OSError, pa.ArrowException) as e:
                log.warning("%s: unreadable cache shard (%s)", s, e)
        evicted = 0
        for s in shard_files(cache_dir / kind / EVICTED):
            with contextlib.suppress(OSError, pa.ArrowException):
                evicted += pq.read_metadata(s).num_rows
        out["kinds"][kind] = {
            "shards": len(shards),
            "rows": rows,
            "evicted": evicted,
            "bytes": _dir_bytes(cache_dir / kind),
            **({"rows_by_model": dict(models.most_common())} if kind == "policy" else {}),
            **(
                {"rows_by_settings": {d: {"rows": n, **lean_label(descriptions.get(d))}
                                      for d, n in settings.most_common()}}
                if kind == "lean" else {}
            ),
        }  # fmt: skip
    temps = temporaries(cache_dir)
    out["temporaries"] = {"files": len(temps), "bytes": sum(f.stat().st_size for f in temps)}
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


def prune(
    cache_dir: Path,
    keep: Callable[[str], bool],
    *,
    kind: str = "policy",
    column: str = "model",
) -> dict[str, int]:
    """Drop the rows of ``kind`` whose ``column`` value ``keep`` refuses — the policy rows of the
    models not kept (``column="model"``), the Lean rows of a toolchain (``kind="lean"``,
    ``column="settings"``) — with the tombstones of dropped settings: each shard that loses rows is
    replaced by a new shard with the rest (written before the old one is removed, so a reader sees
    every kept row at any moment; run it while no search uses the cache, or its readers may skip a
    shard removed under them).  A shard that cannot be read is left as it is and counted.
    Temporaries older than :data:`STALE_TEMPORARY_S` (killed writers') are removed.  Returns
    counts."""
    directory = Path(cache_dir) / kind
    writer = new_writer_id()
    kept = dropped = removed = unreadable = 0
    groups = [(directory, shard_files(directory)), (directory / EVICTED,
              shard_files(directory / EVICTED))]  # fmt: skip
    for where, shards in groups:
        for n, path in enumerate(shards):
            try:
                table = pq.read_table(path)
            except (OSError, pa.ArrowException) as e:
                log.warning("%s: unreadable cache shard left as it is (%s)", path, e)
                unreadable += 1
                continue
            if column not in table.column_names:  # a policy tombstone has no model: kept
                continue
            mask = pa.array([keep(v) for v in table.column(column).to_pylist()], type=pa.bool_())
            rest = table.filter(mask)
            if where == directory:
                kept += rest.num_rows
                dropped += table.num_rows - rest.num_rows
            if rest.num_rows == table.num_rows:
                continue
            if rest.num_rows:
                write_parquet_atomic(rest, where / f"part-{writer}-{n:06d}.parquet")
            path.unlink()
            removed += 1
    stale = 0
    for f in temporaries(cache_dir):
        with contextlib.suppress(OSError):
            if time.time() - f.stat().st_mtime > STALE_TEMPORARY_S:
                f.unlink()
                stale += 1
    log.info("pruned %s: %d %s rows kept, %d dropped (%d shards replaced, %d unreadable, "
             "%d stale temporaries removed)", cache_dir, kept, kind, dropped, removed, unreadable,
             stale)  # fmt: skip
    return {"kept": kept, "dropped": dropped, "shards_replaced": removed,
            "unreadable": unreadable, "temporaries_removed": stale}  # fmt: skip


__all__ = [
    "EVICTED",
    "EVICTION_SCHEMA",
    "KINDS",
    "LEAN_SCHEMA",
    "POLICY_SCHEMA",
    "QUESTION_COLUMNS",
    "SCHEMAS",
    "ShardStore",
    "answer_digest",
    "hit_rate",
    "lean_label",
    "new_writer_id",
    "normalise_message",
    "prune",
    "read_shard",
    "settings_descriptions",
    "shard_files",
    "summary",
    "temporaries",
    "write_run_record",
    "write_settings_description",
]
