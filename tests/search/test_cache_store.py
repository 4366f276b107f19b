"""The expansion cache's storage: append-only shards, one writer each — two processes writing at
once lose and corrupt nothing, a reader meanwhile sees only whole shards — and ``burnqed cache
stats`` / ``prune --keep-models``."""

from __future__ import annotations

import json
import multiprocessing

import pyarrow.parquet as pq
import pytest

from burnqed.cli import main as cli_main
from burnqed.search.cache import model_fingerprint
from burnqed.search.cache_store import (
    LEAN_SCHEMA,
    POLICY_SCHEMA,
    ShardStore,
    shard_files,
    write_run_record,
)

ROWS = 1500  # per writer; 100 a shard: 15 shards each, written while the other writes too


def lean_row(writer: int, i: int) -> dict:
    return {"key": f"w{writer}-{i}", "text": f"h{i} : p{writer}\n⊢ q", "error_kind": None,
            "error": None, "cost_s": 0.001 * i, "state_digest": None}  # fmt: skip


def write_many(directory: str, writer: int, start) -> None:
    store = ShardStore(directory, LEAN_SCHEMA, settings="s", flush_rows=100, flush_s=1e9)
    start.wait()  # both writers go at once
    for i in range(ROWS):
        store.put(lean_row(writer, i))
        if writer == 1 and i % 7 == 0:
            store.put(lean_row(0, i))  # a key the other process writes too: the same answer
    store.flush()


def test_two_processes_writing_shards_at_once_lose_and_corrupt_nothing(tmp_path):
    directory = tmp_path / "cache" / "lean"
    ctx = multiprocessing.get_context("spawn")  # no inherited threads (pyarrow's pools)
    start = ctx.Barrier(3)
    procs = [ctx.Process(target=write_many, args=(str(directory), w, start)) for w in (0, 1)]
    for p in procs:
        p.start()
    start.wait()
    # A reader while they write: it sees whole shards only, never a half-written one.
    reader = ShardStore(directory, LEAN_SCHEMA, settings="s")
    while any(p.is_alive() for p in procs):
        reader.refresh()
        assert reader.skipped == [] and reader.conflicts == 0
    for p in procs:
        p.join()
        assert p.exitcode == 0
    reader.refresh()
    after = ShardStore(directory, LEAN_SCHEMA, settings="s")
    for store in (reader, after):
        assert len(store) == 2 * ROWS and store.skipped == [] and store.conflicts == 0
        for w in (0, 1):
            for i in (0, 7, ROWS - 1):
                assert store.get(f"w{w}-{i}") == {k: v for k, v in lean_row(w, i).items()
                                                   if k != "key"}  # fmt: skip
    shards = shard_files(directory)
    assert len({s.name.rsplit("-", 1)[0] for s in shards}) == 2  # one writer name each
    assert sum(pq.read_metadata(s).num_rows for s in shards) == 2 * ROWS + (ROWS + 6) // 7
    assert not [p for p in directory.iterdir() if p.name.startswith(".")]  # no temporary left


def test_a_key_written_twice_with_different_answers_is_a_conflict_and_the_first_stands(tmp_path):
    a = ShardStore(tmp_path / "lean", LEAN_SCHEMA, settings="s", writer="a")
    a.put(lean_row(0, 1))
    a.flush()
    b = ShardStore(tmp_path / "lean", LEAN_SCHEMA, settings="s", writer="b")
    b._index.clear()  # a writer that did not see a's shard
    b.put({**lean_row(0, 1), "text": "⊢ other", "cost_s": 9.0})
    b.put({**lean_row(0, 2)})
    b.flush()
    c = ShardStore(tmp_path / "lean", LEAN_SCHEMA, settings="s")
    assert c.conflicts == 1 and c.get("w0-1")["text"] == lean_row(0, 1)["text"]
    # The cost the clock measured is not part of the answer: no conflict for it.
    d = ShardStore(tmp_path / "other", LEAN_SCHEMA, settings="s", writer="d")
    d.put(lean_row(0, 1))
    d.flush()
    e = ShardStore(tmp_path / "other", LEAN_SCHEMA, settings="s", writer="e")
    e._index.clear()
    e.put({**lean_row(0, 1), "cost_s": 5.0})
    e.flush()
    assert ShardStore(tmp_path / "other", LEAN_SCHEMA, settings="s").conflicts == 0


def test_an_unreadable_shard_is_skipped_and_its_answers_asked_again(tmp_path):
    s = ShardStore(tmp_path / "lean", LEAN_SCHEMA, settings="s", writer="a")
    s.put(lean_row(0, 1))
    s.flush()
    (tmp_path / "lean" / "part-b-000000.parquet").write_bytes(b"PAR1 truncated")
    r = ShardStore(tmp_path / "lean", LEAN_SCHEMA, settings="s")
    assert len(r) == 1 and r.skipped == [str(tmp_path / "lean" / "part-b-000000.parquet")]


def policy_row(key: str, model: str) -> dict:
    return {"key": key, "model": model, "text": "intro h", "logprob": -0.5, "num_tokens": 3,
            "finish_reason": "stop", "cost_s": 0.01}  # fmt: skip


def test_cache_stats_and_prune_keep_models(tmp_path, capsys):
    cache = tmp_path / "cache"
    kept_model = tmp_path / "kept"
    kept_model.mkdir()
    (kept_model / "model.safetensors").write_bytes(b"kept weights")
    kept, other = model_fingerprint(str(kept_model)), "0123456789abcdef"
    s = ShardStore(cache / "policy", POLICY_SCHEMA, settings="s1", writer="a")
    for i in range(3):
        s.put(policy_row(f"k{i}", kept))
    for i in range(3, 8):
        s.put(policy_row(f"k{i}", other))
    s.flush()
    lean = ShardStore(cache / "lean", LEAN_SCHEMA, settings="s2", writer="a")
    lean.put(lean_row(0, 1))
    lean.flush()
    write_run_record(cache, "a", {"policy": {"candidates": {"hits": 3, "misses": 1}},
                                  "lean": {"hits": 1, "misses": 3}, "starts": {"hits": 0,
                                  "misses": 2}})  # fmt: skip
    assert cli_main(["cache", "stats", str(cache), "--json"]) == 0
    st = json.loads(capsys.readouterr().out)
    assert st["kinds"]["policy"]["rows"] == 8 and st["kinds"]["lean"]["rows"] == 1
    assert st["kinds"]["policy"]["rows_by_model"] == {other: 5, kept: 3}
    assert st["hit_rates"]["policy"]["hit_rate"] == 0.75 and st["hit_rates"]["lean"]["hits"] == 1
    assert st["runs"] == 1 and st["bytes"] > 0
    assert cli_main(["cache", "stats", str(cache)]) == 0
    assert "| policy | 1 | 8 |" in capsys.readouterr().out
    # Prune by the model's directory: the other model's answers go, Lean's stay.
    assert cli_main(["cache", "prune", str(cache), "--keep-models", str(kept_model)]) == 0
    after = ShardStore(cache / "policy", POLICY_SCHEMA, settings="s1")
    assert sorted(after._index) == ["k0", "k1", "k2"]
    assert len(ShardStore(cache / "lean", LEAN_SCHEMA, settings="s2")) == 1
    # By the digest `stats` lists, too; a digest that matches no answer held is refused (issue 63:
    # cb4cd23 kept nothing and dropped every answer).
    assert cli_main(["cache", "prune", str(cache), "--keep-models", kept]) == 0
    assert sorted(ShardStore(cache / "policy", POLICY_SCHEMA, settings="s1")._index) == [
        "k0",
        "k1",
        "k2",
    ]
    assert cli_main(["cache", "prune", str(cache), "--keep-models", "ffff"]) == 2
    assert "no policy answers of that model here" in capsys.readouterr().err
    assert len(ShardStore(cache / "policy", POLICY_SCHEMA, settings="s1")) == 3


def test_cache_commands_name_a_missing_directory(tmp_path, capsys):
    assert cli_main(["cache", "stats", str(tmp_path / "nowhere")]) == 2
    assert "no such cache directory" in capsys.readouterr().err
    assert cli_main(["cache", "prune", str(tmp_path)]) == 2
    assert "--keep-models" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["policy", "lean"])
def test_rows_of_other_settings_are_not_loaded(tmp_path, kind):
    schema = POLICY_SCHEMA if kind == "policy" else LEAN_SCHEMA
    row = policy_row("k", "m") if kind == "policy" else lean_row(0, 0)
    a = ShardStore(tmp_path, schema, settings="one")
    a.put(row)
    a.flush()
    assert len(ShardStore(tmp_path, schema, settings="one")) == 1
    assert len(ShardStore(tmp_path, schema, settings="two")) == 0
