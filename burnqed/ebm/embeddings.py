"""Policy embeddings of proof states: the model digest and an append-only, resumable Parquet cache.

The cache directory (``results/iter_{i}/embeddings/``) holds ``part-NNNNNN.parquet`` files with one
row per embedded state — ``embedding_key``, ``state_hash``, ``embedding`` (float32 list) — written to
a hidden temporary name, fsynced and renamed, every ``checkpoint_every`` states.  Nothing written is
rewritten: a re-run reads what is there and embeds only the states whose (embedding key, state hash)
is missing.  A part that cannot be read (truncated by a full disk, a bad copy) is named in a warning,
moved aside as ``part-….parquet.corrupt`` and its states are embedded again.  ``manifest.json`` is
written last by the stage.

The *embedding-model digest* ties embeddings, EBMs and policies together: it fingerprints the model
directory's files — each file's name and whole bytes (:func:`~burnqed.provenance.file_digest`, read
once and remembered by the file's identity on disk), so two checkpoints that differ in one byte
anywhere differ (a sample of a large file's bytes would not see a fine-tune that touched only some
tensors) — and the pooling.  A served model with no local directory is fingerprinted by its name.
It is what an EBM is checked against at search time, and (:func:`weights_digest`) what joint
training's resume key holds of the weights it starts from.

The *embedding key* decides which cached rows a run may reuse: a digest of
:func:`embedding_settings`, everything besides the text that decides a vector — the model digest
(weights, tokenizer, pooling), the backend, the code that embeds (the
:func:`~burnqed.provenance.code_digest` of :mod:`burnqed.policy.backend`, which reaches every
backend's ``embed`` and :func:`~burnqed.policy.transformers_backend.pool_hidden`), and for the
in-process backend the resolved dtype and device, torch's and transformers' versions, and the CPU's
instruction set in use (or the GPU's name).  A state is embedded as the policy's prompt for it
(:func:`burnqed.data.prompt.embed_states`; that module's code digest, which reaches
:mod:`burnqed.policy.embedding`'s tokenisation and pooling, is in the key too).  Rows under another key stay in the
cache, unused (a run with the old settings reuses them again).  The code digest covers a whole
module closure, so an edit anywhere in it (``burnqed/config.py`` too) re-embeds: stale vectors cost
more than a re-embedding.  Example::

    >>> import numpy as np, tempfile
    >>> d = tempfile.mkdtemp()
    >>> embed = lambda texts: np.ones((len(texts), 4), np.float32)
    >>> precompute({"h1": "⊢ p", "h2": "⊢ q"}, embed, d, key="k", checkpoint_every=1).embedded
    2
    >>> precompute({"h1": "⊢ p", "h3": "⊢ r"}, embed, d, key="k", checkpoint_every=1).embedded
    1
    >>> precompute({"h1": "⊢ p"}, embed, d, key="other settings", checkpoint_every=1).embedded
    1
"""

from __future__ import annotations

import hashlib
import json
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

from burnqed.isa import VARIABLES
from burnqed.provenance import file_digest
from burnqed.trajectory import write_parquet_atomic

log = logging.getLogger(__name__)

_PART = re.compile(r"^part-(\d{6,})\.parquet$")

CACHE_SCHEMA = pa.schema(
    [
        pa.field("embedding_key", pa.string(), nullable=False),  # embedding_key()
        pa.field("state_hash", pa.string(), nullable=False),  # burnqed.search.tree.state_hash
        pa.field("embedding", pa.list_(pa.float32()), nullable=False),  # (d,)
    ]
)
# Parts written before the embedding key (keyed by the model digest alone): never reused.
_UNKEYED_COLUMNS = ["model_digest", "state_hash", "embedding"]

# The environment variables that choose the CPU kernels' instruction set (the pin's: ATen's dispatch,
# MKL's conditional numerical reproducibility, oneDNN's ISA cap, numpy's dispatch): read at import,
# they decide an embedding's last digits on a CPU, and torch reports only the first back.
ISA_VARIABLES = VARIABLES


class EmbeddingError(RuntimeError):
    """The embeddings asked for cannot be produced or found (the message names what is missing)."""


# --------------------------------------------------------------------------------------------
# Digest


def _file_fingerprint(path: Path, h: Any) -> None:
    """A file's name and whole bytes (their sha256, remembered by the file's identity on disk)."""
    h.update(f"{path.name}\0{file_digest(path)}\0".encode())


def _directory_fingerprint(path: Path, h: Any) -> None:
    from burnqed.determinism import RUN_SPECIFIC_FILES

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


def model_digest(model: str | Path, pooling: str) -> str:
    """Fingerprint of the weights at ``model`` (a local directory) or of its served name, the
    pooling and the text embedded (:data:`burnqed.data.prompt.EMBEDDED_TEXT`)."""
    from burnqed.data.prompt import EMBEDDED_TEXT as TEXT

    # The text embedded (a state's prompt since v2): an EBM of raw-state vectors never matches.
    # v3: every file whole (v2 sampled 16 windows of a file over 64 MiB).
    h = hashlib.sha256(f"burnqed-embedding-v3\0text={TEXT}\0pooling={pooling}\0".encode())
    path = Path(model)
    if path.is_dir():
        _directory_fingerprint(path, h)
    else:
        h.update(f"served:{model}".encode())
    return h.hexdigest()[:16]


def weights_digest(directory: str | Path) -> str:
    """Fingerprint of the weights in ``directory`` (a model or an adapter), as :func:`model_digest`
    takes it, without a pooling: what a training checkpoint that starts from them is keyed by."""
    h = hashlib.sha256(b"burnqed-weights-v2\0")
    _directory_fingerprint(Path(directory), h)
    return h.hexdigest()[:16]


def embedding_model_digest(generator: Any) -> str:
    """The digest of a policy backend's embeddings (``model_id`` + pooling; HTTP servers pool the
    last token, as the in-process backend's default ``pooling="last"`` does)."""
    return model_digest(generator.model_id, getattr(generator, "pooling", "last"))


def _hardware(device: str) -> dict[str, Any]:
    """What decides the in-process backend's floating-point results on ``device``: the GPU's name,
    or the CPU instruction set torch dispatches to and the variables that choose it."""
    import torch

    if device.startswith("cuda"):
        return {"gpu": torch.cuda.get_device_name(torch.device(device))}
    return {
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        **{name: os.environ.get(name) for name in ISA_VARIABLES},
    }


def embedding_settings(generator: Any, policy: Mapping[str, Any]) -> dict[str, Any]:
    """Everything besides a state's text that decides its embedding by ``generator`` (opened with
    the ``policy`` section): see the module docstring.  A backend that does not report its dtype
    or device (a fake) is taken at the configured ones.

    >>> class Served:  # an HTTP backend: the server decides dtype and hardware
    ...     model_id, pooling = "served-model", "last"
    >>> s = embedding_settings(Served(), {"backend": "sglang", "server_url": "http://h:1",
    ...                                   "embedding_server_url": "http://h:2"})
    >>> sorted(s), s["server"]
    (['backend', 'code', 'model_digest', 'server'], 'http://h:2')
    """
    from burnqed.config import PolicyConfig
    from burnqed.provenance import code_digest, package_versions

    cfg = PolicyConfig.from_dict(policy)
    settings: dict[str, Any] = {
        "model_digest": embedding_model_digest(generator),  # weights, tokenizer, pooling
        "backend": cfg.backend,
        # open_generator and every backend it opens: each one's embed; the text a state is
        # embedded as (its prompt), the tokenisation, truncation and pooling.
        "code": code_digest("burnqed.policy.backend", "burnqed.data.prompt"),
    }
    if cfg.backend != "transformers":
        # The server computes the vectors: how it was started (its dtype, deterministic mode) is
        # what this process knows of it.
        command = cfg.embedding_server_command
        settings["server"] = cfg.embedding_server_url or (list(command) if command else None)
        return settings
    device = str(getattr(generator, "device", cfg.device))
    settings.update(
        dtype=str(getattr(generator, "dtype", cfg.dtype)).removeprefix("torch."),
        device=device,
        packages=package_versions(("torch", "transformers")),
        hardware=_hardware(device),
    )
    return settings


def embedding_key(settings: Mapping[str, Any]) -> str:
    """The cache key of :func:`embedding_settings` (16 hex digits).

    >>> embedding_key({"dtype": "float32"}) != embedding_key({"dtype": "bfloat16"})
    True
    """
    text = json.dumps(settings, sort_keys=True, default=str)
    return hashlib.sha256(f"burnqed-embedding-key-v1\0{text}".encode()).hexdigest()[:16]


# --------------------------------------------------------------------------------------------
# Cache


def _part_ids(directory: Path) -> list[int]:
    if not directory.is_dir():
        return []
    return sorted(int(m.group(1)) for p in directory.iterdir() if (m := _PART.match(p.name)))


def _part(directory: Path, pid: int) -> Path:
    return directory / f"part-{pid:06d}.parquet"


def read_cache(cache_dir: str | Path, key: str) -> tuple[dict[str, np.ndarray], list[str]]:
    """``state_hash → (d,) float32`` for the embedding ``key``, and the parts moved aside as
    unreadable.

    An unreadable part is renamed ``*.corrupt`` (never deleted) so its states are embedded again.
    A part written before embedding keys existed is left alone and not read (its settings are
    unknown).
    """
    cache_dir = Path(cache_dir)
    vectors: dict[str, np.ndarray] = {}
    bad: list[str] = []
    for pid in _part_ids(cache_dir):
        path = _part(cache_dir, pid)
        try:
            table = pq.read_table(path)
            if table.schema.names[:3] == _UNKEYED_COLUMNS:
                log.info("embedding cache part %s predates embedding keys: not reused", path)
                continue
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
        table = table.filter(pc.equal(table.column("embedding_key"), key))
        if not table.num_rows:
            continue
        hashes = table.column("state_hash").to_pylist()
        flat = table.column("embedding").combine_chunks().flatten().to_numpy()
        matrix = flat.astype(np.float32, copy=False).reshape(table.num_rows, -1)  # (n, d)
        for sh, row in zip(hashes, matrix, strict=True):
            vectors.setdefault(sh, row)
    return vectors, bad


def _write_part(cache_dir: Path, pid: int, key: str, hashes: list[str], vecs: list) -> Path:
    table = pa.Table.from_arrays(
        [
            pa.array([key] * len(hashes), pa.string()),
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
    cached: int  # already in the cache under this embedding key
    embedded: int  # embedded by this call
    parts_written: int
    corrupt_parts: tuple[str, ...]  # parts moved aside as unreadable (their states re-embedded)
    dim: int  # embedding width (0 when nothing is cached or embedded)


def precompute(
    texts: Mapping[str, str],
    embed: Callable[[Sequence[str]], np.ndarray],
    cache_dir: str | Path,
    *,
    key: str,
    checkpoint_every: int,
    batch_size: int = 64,
) -> PrecomputeStats:
    """Embed every ``state_hash → text`` of ``texts`` missing from the cache under the embedding
    ``key`` (:func:`embedding_key`); append parts.

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
    cached, bad = read_cache(cache_dir, key)
    missing = [h for h in texts if h not in cached]
    dim = len(next(iter(cached.values()))) if cached else 0
    log.info(
        "embeddings: %d states, %d cached under key %s, %d to embed → %s",
        len(texts),
        len(texts) - len(missing),
        key,
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
                    f"{cache_dir}: embeddings of width {vecs.shape[1]}, the cache holds {dim} "
                    f"under key {key}"
                )
            dim = vecs.shape[1]
            buf_h.extend(chunk)
            buf_v.extend(vecs)
            bar.update(len(chunk))
            while len(buf_h) >= checkpoint_every:
                _write_part(
                    cache_dir, next_id, key, buf_h[:checkpoint_every], buf_v[:checkpoint_every]
                )
                next_id, parts = next_id + 1, parts + 1
                del buf_h[:checkpoint_every], buf_v[:checkpoint_every]
                log.info("embeddings: checkpoint, %d/%d embedded", start + len(chunk), len(missing))
        if buf_h:
            _write_part(cache_dir, next_id, key, buf_h, buf_v)
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
