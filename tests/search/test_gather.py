"""Gathering a sharded search's manifests."""

from __future__ import annotations

import json

import pytest

from burnqed.search.stage import MANIFEST, gather_shards


def shard(tmp_path, k, statuses):
    d = tmp_path / f"shard_{k}"
    d.mkdir()
    attempts = sum(statuses.values())
    (d / MANIFEST).write_text(
        json.dumps(
            {"attempts": attempts, "theorems": attempts, "statuses": statuses, "node_rows": 10 * k}
        )
    )
    return d


def test_totals_over_shards(tmp_path):
    a = shard(tmp_path, 0, {"proved": 3, "failed": 1})
    b = shard(tmp_path, 1, {"proved": 1, "timeout": 3})
    m = gather_shards(shards=[a, b], out=tmp_path / MANIFEST)
    assert m["attempts"] == 8
    assert m["statuses"] == {"proved": 4, "failed": 1, "timeout": 3}
    assert m["solve_rate"] == pytest.approx(0.5)
    assert m["node_rows"] == 10
    assert json.loads((tmp_path / MANIFEST).read_text()) == m


def test_unfinished_shard_is_named(tmp_path):
    a = shard(tmp_path, 0, {"proved": 1})
    missing = tmp_path / "shard_1"
    missing.mkdir()
    with pytest.raises(FileNotFoundError, match=r"shard_1.*unfinished"):
        gather_shards(shards=[a, missing], out=tmp_path / MANIFEST)
    assert not (tmp_path / MANIFEST).exists()


def test_errors_are_counted_apart_and_an_over_limit_shard_is_refused(tmp_path):
    a = shard(tmp_path, 0, {"proved": 3, "failed": 1, "error": 2})
    m = gather_shards(shards=[a], out=tmp_path / MANIFEST)
    assert m["attempts"] == 6 and m["results"] == 4 and m["errors"]["count"] == 2
    assert m["solve_rate"] == pytest.approx(0.75)  # 3 of the 4 results, not 3 of 6 attempts
    bad = shard(tmp_path, 1, {"error": 4})
    manifest = json.loads((bad / MANIFEST).read_text())
    manifest.update(error_limit_exceeded=True, errors={"count": 4, "by_reason": {"ReplError": 4}})
    (bad / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(RuntimeError, match=r"shard_1.*infrastructure errors.*resume"):
        gather_shards(shards=[a, bad], out=tmp_path / "gathered.json")
