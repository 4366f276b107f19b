"""Policy embeddings of proof states: the model digest and an append-only, resumable Parquet cache.

The cache directory (``results/iter_{i}/embeddings/``) holds ``part-NNNNNN.parquet`` files with one
row per embedded state — ``model_digest``, ``state_hash``, ``embedding`` (float32 list) — written to a
hidden temporary name, fsynced and renamed, every ``checkpoint_every`` states.  Nothing written is
rewritten: a re-run reads what is there and embeds only the states whose (model digest, state hash)
is missing.  A part that cannot be read (truncated by a full disk, a bad copy) is named in a warning,
moved aside as ``part-….parquet.corrupt`` and its states are embedded again.  ``manifest.json`` is
written last by the stage.

The *embedding-model digest* ties embeddings, EBMs and policies together: it fingerprints the model
directory's files (sizes, plus the bytes of small files and 16 sampled 1 MiB windows of large ones:
a merged LoRA changes every projection, so a sample sees it) and the pooling.  A served model with no
local directory is fingerprinted by its name.  Example::

    >>> import numpy as np, tempfile
    >>> d = tempfile.mkdtemp()
    >>> embed = lambda texts: np.ones((len(texts), 4), np.float32)
    >>> precompute({"h1": "⊢ p", "h2": "⊢ q"}, embed, d, digest="m", checkpoint_every=1).embedded
    2
    >>> precompute({"h1": "⊢ p", "h3": "⊢ r"}, embed, d, digest="m", checkpoint_every=1).embedded
    1
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from burnqed.trajectory import write_parquet_atomic

log = logging.getLogger(__name__)

_PART = re.compile(r"^part-(\d{6,})\.parquet$")
_SMALL_FILE = 64 << 20  # files up to 64 MiB are hashed whole
_WINDOW = 1 << 20
_WINDOWS = 16

CACHE_SCHEMA = pa.schema(
    [
        pa.field("model_digest", pa.string(), nullable=False),  # embedding_model_digest()
        pa.field("state_hash", pa.string(), nullable=False),  # burnqed.search.tree.state_hash
        pa.field("embedding", pa.list_(pa.float32()), nullable=False),  # (d,)
    ]
)


class EmbeddingError(RuntimeError):
    """The embeddings asked for cannot be produced or found (the message names what is missing)."""


# --------------------------------------------------------------------------------------------
# Digest


def _file_fingerprint(path: Path, h: Any) -> None:
    size = path.stat().st_size
    h.update(f"{path.name}\0{size}\0".encode())
    with path.open("rb") as f:
        if size <= _SMALL_FILE:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
            return
        for k in range(_WINDOWS):
            f.seek((size - _WINDOW) * k // (_WINDOWS - 1))
            h.update(f.read(_WINDOW))


def model_digest(model: str | Path, pooling: str) -> str:
    """Fingerprint of the weights at ``model`` (a local directory) or of its served name + pooling."""
    from burnqed.determinism import RUN_SPECIFIC_FILES

    h = hashlib.sha256(f"burnqed-embedding-v1\0pooling={pooling}\0".encode())
    path = Path(model)
    if path.is_dir():
        files = sorted(
            p
            for p in path.iterdir()
            if p.is_file()
            and not p.name.startswith(".")
            and not p.name.startswith("burnqed_")
            and p.name not in RUN_SPECIFIC_FILES  # dates and wall times: not the weights
        )
        if not files:
            raise EmbeddingError(f"{path}: model directory is empty")
        for f in files:
            _file_fingerprint(f, h)
    else:
        h.update(f"served:{model}".encode())
    return h.hexdigest()[:16]


def embedding_model_digest(generator: Any) -> str:
    """The digest of a policy backend's embeddings (``model_id`` + pooling; HTTP servers pool the
    last token, as the in-process backend's default ``pooling="last"`` does)."""
    return model_digest(generator.model_id, getattr(generator, "pooling", "last"))


# --------------------------------------------------------------------------------------------
# Cache


def _part_ids(directory: Path) -> list[int]:
    if not directory.is_dir():
        return []
    return sorted(int(m.group(1)) for p in directory.iterdir() if (m := _PART.match(p.name)))


def _part(directory: Path, pid: int) -> Path:
    return directory / f"part-{pid:06d}.parquet"


def read_cache(cache_dir: str | Path, digest: str) -> tuple[dict[str, np.ndarray], list[str]]:
    """``state_hash → (d,) float32`` for ``digest``, and the parts moved aside as unreadable.

    An unreadable part is renamed ``*.corrupt`` (never deleted) so its states are embedded again.
    """
    cache_dir = Path(cache_dir)
    vectors: dict[str, np.ndarray] = {}
    bad: list[str] = []
    for pid in _part_ids(cache_dir):
        path = _part(cache_dir, pid)
        try:
            table = pq.read_table(path)
            if table.schema.names[:3] != CACHE_SCHEMA.names:
                raise ValueError(f"columns {table.schema.names}, expected {CACHE_SCHEMA.names}")
        except Exception as e:
            log.warning(
                "embedding cache part %s unreadable (%s: %s): moved aside, its states are "
                "embedded again",
                path,
                type(e).__name__,
                str(e)[:200],
            )
            os.replace(path, path.with_name(path.name + ".corrupt"))
            bad.append(str(path))
            continue
        table = table.filter(pc.equal(table.column("model_digest"), digest))
        if not table.num_rows:
            continue
        hashes = table.column("state_hash").to_pylist()
        flat = table.column("embedding").combine_chunks().flatten().to_numpy()
        matrix = flat.astype(np.float32, copy=False).reshape(table.num_rows, -1)  # (n, d)
        for sh, row in zip(hashes, matrix, strict=True):
            vectors.setdefault(sh, row)
    return vectors, bad


def _write_part(cache_dir: Path, pid: int, digest: str, hashes: list[str], vecs: list) -> Path:
    table = pa.Table.from_arrays(
        [
            pa.array([digest] * len(hashes), pa.string()),
            pa.array(hashes, pa.string()),
            pa.array([np.asarray(v, np.float32) for v in vecs], pa.list_(pa.float32())),
        ],
        schema=CACHE_SCHEMA,
    )
    path = _part(cache_dir, pid)
    write_parquet_atomic(table, path)
    return path


@dataclass(frozen=True)
class PrecomputeStats:
    requested: int  # unique states asked for
    cached: int  # already in the cache for this digest
    embedded: int  # embedded by this call
    parts_written: int
    corrupt_parts: tuple[str, ...]  # parts moved aside as unreadable (their states re-embedded)
    dim: int  # embedding width (0 when nothing is cached or embedded)


def precompute(
    texts: Mapping[str, str],
    embed: Callable[[Sequence[str]], np.ndarray],
    cache_dir: str | Path,
    *,
    digest: str,
    checkpoint_every: int,
    batch_size: int = 64,
) -> PrecomputeStats:
    """Embed every ``state_hash → text`` of ``texts`` missing from the cache; append parts.

    A part is written every ``checkpoint_every`` embedded states (and at the end), so a kill loses
    at most that many.  ``embed`` is the policy backend's ``embed`` (``(n, d)`` float32).
    """
    from burnqed.progress import Progress

    if checkpoint_every < 1 or batch_size < 1:
        raise ValueError("checkpoint_every and batch_size must be >= 1")
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    for stale in cache_dir.glob(".part-*.tmp"):  # killed mid-write: never renamed, never counted
        stale.unlink()
    cached, bad = read_cache(cache_dir, digest)
    missing = [h for h in texts if h not in cached]
    dim = len(next(iter(cached.values()))) if cached else 0
    log.info(
        "embeddings: %d states, %d cached for model %s, %d to embed → %s",
        len(texts),
        len(texts) - len(missing),
        digest,
        len(missing),
        cache_dir,
    )
    ids = _part_ids(cache_dir) + [
        int(m.group(1))
        for p in cache_dir.glob("part-*.parquet.corrupt")
        if (m := re.match(r"part-(\d+)", p.name))
    ]
    next_id = max(ids) + 1 if ids else 0
    buf_h: list[str] = []
    buf_v: list[np.ndarray] = []
    parts = 0
    bar = Progress(log, "embed", total=len(missing), unit="states")
    try:
        for start in range(0, len(missing), batch_size):
            chunk = missing[start : start + batch_size]
            vecs = np.asarray(embed([texts[h] for h in chunk]), dtype=np.float32)
            if vecs.ndim != 2 or vecs.shape[0] != len(chunk):
                raise EmbeddingError(
                    f"embed returned shape {vecs.shape} for a batch of {len(chunk)} texts"
                )
            if dim and vecs.shape[1] != dim:
                raise EmbeddingError(
                    f"{cache_dir}: embeddings of width {vecs.shape[1]}, the cache holds {dim} for "
                    f"model {digest}"
                )
            dim = vecs.shape[1]
            buf_h.extend(chunk)
            buf_v.extend(vecs)
            bar.update(len(chunk))
            while len(buf_h) >= checkpoint_every:
                _write_part(
                    cache_dir, next_id, digest, buf_h[:checkpoint_every], buf_v[:checkpoint_every]
                )
                next_id, parts = next_id + 1, parts + 1
                del buf_h[:checkpoint_every], buf_v[:checkpoint_every]
                log.info("embeddings: checkpoint, %d/%d embedded", start + len(chunk), len(missing))
        if buf_h:
            _write_part(cache_dir, next_id, digest, buf_h, buf_v)
            parts += 1
    finally:
        bar.close()
    return PrecomputeStats(
        requested=len(texts),
        cached=len(texts) - len(missing),
        embedded=len(missing),
        parts_written=parts,
        corrupt_parts=tuple(bad),
        dim=dim,
    )


def lookup(vectors: Mapping[str, np.ndarray], hashes: Sequence[str], *, where: str) -> np.ndarray:
    """``(len(hashes), d)`` rows of ``vectors``; a missing hash is an error naming ``where``."""
    missing = [h for h in hashes if h not in vectors]
    if missing:
        raise EmbeddingError(
            f"{where}: {len(missing)} state(s) have no embedding (e.g. {missing[0]}); "
            "run `burnqed ebm embed` for this model first"
        )
    return np.stack([vectors[h] for h in hashes]) if hashes else np.zeros((0, 0), np.float32)
