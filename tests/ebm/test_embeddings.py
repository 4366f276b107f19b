"""The embedding cache: killed midway it resumes with only the missing states; bad parts re-embedded."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from burnqed.ebm.embeddings import (
    EmbeddingError,
    lookup,
    model_digest,
    precompute,
    read_cache,
)
from tests.ebm.fakes import ToyEmbedder, toy_vector

REPO = Path(__file__).resolve().parents[2]
N = 120

# Embeds N toy states 10 at a time, 0.1 s per batch, a part every 20 states.
CHILD = """
import sys
from burnqed.ebm.embeddings import precompute
from tests.ebm.fakes import ToyEmbedder
n, out = int(sys.argv[1]), sys.argv[2]
texts = {f"h{i:04d}": f"x : Nat\\n⊢ reach {i}" for i in range(n)}
precompute(texts, ToyEmbedder(delay_s=0.1).embed, out, key="m1", checkpoint_every=20,
           batch_size=10)
"""


def _texts() -> dict[str, str]:
    return {f"h{i:04d}": f"x : Nat\n⊢ reach {i}" for i in range(N)}


def _parts(d: Path) -> list[Path]:
    return sorted(d.glob("part-*.parquet"))


def test_sigkill_midway_then_rerun_embeds_only_the_missing_states(tmp_path):
    out = tmp_path / "embeddings"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(N), str(out)], env=env, cwd=REPO)
    try:
        deadline = time.monotonic() + 60
        while len(_parts(out)) < 2:  # at least 40 states committed, well before the end (12 s)
            assert proc.poll() is None, "the embedding run ended before it could be killed"
            assert time.monotonic() < deadline, "no checkpoint within 60 s"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    cached, _ = read_cache(out, "m1")
    assert 40 <= len(cached) < N and len(cached) % 20 == 0  # whole parts only
    embedder = ToyEmbedder()
    stats = precompute(_texts(), embedder.embed, out, key="m1", checkpoint_every=20,
                       batch_size=10)  # fmt: skip
    assert stats.cached == len(cached)
    assert stats.embedded == len(embedder.embedded) == N - len(cached)
    assert set(embedder.embedded).isdisjoint({_texts()[h] for h in cached})
    vectors, bad = read_cache(out, "m1")
    assert len(vectors) == N and not bad
    np.testing.assert_allclose(vectors["h0007"], toy_vector(_texts()["h0007"]))
    assert not list(out.glob(".part-*.tmp"))


def test_truncated_part_is_named_and_its_states_embedded_again(tmp_path, caplog):
    out = tmp_path / "emb"
    texts = _texts()
    precompute(texts, ToyEmbedder().embed, out, key="m1", checkpoint_every=50, batch_size=10)
    parts = _parts(out)
    assert len(parts) == 3  # 50 + 50 + 20
    victim = parts[1]
    lost = set(pq.read_table(victim).column("state_hash").to_pylist())
    victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 2])
    embedder = ToyEmbedder()
    stats = precompute(texts, embedder.embed, out, key="m1", checkpoint_every=50, batch_size=10)
    assert str(victim) in caplog.text and "unreadable" in caplog.text
    assert stats.corrupt_parts == (str(victim),)
    assert stats.embedded == len(lost) == 50
    assert {h for h, t in texts.items() if t in set(embedder.embedded)} == lost
    assert victim.with_name(victim.name + ".corrupt").exists()  # moved aside, not deleted
    vectors, bad = read_cache(out, "m1")
    assert len(vectors) == N and not bad
    # A third run has nothing left to do.
    again = ToyEmbedder()
    assert precompute(texts, again.embed, out, key="m1", checkpoint_every=50).embedded == 0


def test_the_cache_is_keyed_by_the_embedding_key(tmp_path):
    texts = dict(list(_texts().items())[:10])
    precompute(texts, ToyEmbedder().embed, tmp_path, key="m1", checkpoint_every=4)
    other = ToyEmbedder()
    stats = precompute(texts, other.embed, tmp_path, key="m2", checkpoint_every=4)
    assert stats.cached == 0 and stats.embedded == 10  # other settings: everything again
    with pytest.raises(EmbeddingError, match="burnqed ebm embed"):
        lookup(read_cache(tmp_path, "m1")[0], ["h0000", "nope"], where="x")


def test_model_digest_follows_weights_and_pooling(tmp_path):
    m = tmp_path / "model"
    m.mkdir()
    (m / "config.json").write_text("{}")
    (m / "model.safetensors").write_bytes(b"\0" * 1000)
    d = model_digest(m, "last")
    assert model_digest(m, "last") == d
    assert model_digest(m, "mean") != d
    (m / "burnqed_merge.json").write_text("{}")  # burnqed's own notes are not weights
    assert model_digest(m, "last") == d
    (m / "model.safetensors").write_bytes(b"\0" * 999 + b"\1")  # a merged LoRA: new weights
    assert model_digest(m, "last") != d
    assert model_digest("served-name", "last") != model_digest("other-name", "last")


def test_a_part_from_before_embedding_keys_is_left_alone_and_not_reused(tmp_path):
    """Rows keyed by the model digest alone were made by unknown code, dtype and hardware: their
    states are embedded again, and the part is neither read nor taken for a corrupt one."""
    import pyarrow as pa

    texts = dict(list(_texts().items())[:4])
    old = pa.table(
        {
            "model_digest": ["m1"] * 4,
            "state_hash": list(texts),
            "embedding": [toy_vector(t).tolist() for t in texts.values()],
        }
    )
    pq.write_table(old, tmp_path / "part-000000.parquet")
    stats = precompute(texts, ToyEmbedder().embed, tmp_path, key="m1", checkpoint_every=4)
    assert stats.embedded == 4 and stats.corrupt_parts == ()
    assert (tmp_path / "part-000000.parquet").is_file() and not list(tmp_path.glob("*.corrupt"))
    assert [p.name for p in _parts(tmp_path)] == ["part-000000.parquet", "part-000001.parquet"]
