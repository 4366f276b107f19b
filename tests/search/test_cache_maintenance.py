"""Looking after an expansion cache (issue 48): ``burnqed cache verify`` asks Lean again the
questions a real store keeps and evicts what Lean now refutes; ``prune --lean --toolchain|--all``
drops the Lean answers of a toolchain; ``prune --keep-models`` refuses a model path that is not
here (d670ec8 dropped its answers silently) and goes on past an unreadable shard; a differing answer
put under a held key is a conflict; evictions reach every reader; temporaries killed writers left
are listed apart by ``stats`` and removed by ``prune``."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from burnqed.cli import main as cli_main
from burnqed.config import LeanConfig, PolicyConfig, SearchConfig, load_params
from burnqed.data.proplogic import generate_theorems
from burnqed.lean.pool import LeanPool
from burnqed.policy import SamplingParams
from burnqed.search.cache import CacheSpec, lean_settings, policy_settings, settings_digest
from burnqed.search.cache_store import (
    LEAN_SCHEMA,
    POLICY_SCHEMA,
    ShardStore,
    read_shard,
    shard_files,
    summary,
)
from burnqed.search.stage import check_repl, search_to_dir
from tests.search.fakes import ToyEnv
from tests.search.test_cache import SeededToyPolicy, keys, search
from tests.search.test_cache_proplogic import RawTracedPolicy
from tests.search.test_cache_recheck import plant
from tests.search.test_cache_store import lean_row, policy_row
from tests.search.test_proplogic_pool import trace_steps

REPO = Path(__file__).resolve().parents[2]


# -- the store ------------------------------------------------------------------------------------


def test_a_different_answer_put_under_a_held_key_is_a_conflict(tmp_path):
    s = ShardStore(tmp_path / "lean", LEAN_SCHEMA, settings="s")
    s.put(lean_row(0, 1))
    s.put({**lean_row(0, 1), "cost_s": 7.0})  # the clock's figure is not the answer
    assert s.conflicts == 0
    s.put({**lean_row(0, 1), "text": "⊢ other"})
    assert s.conflicts == 1 and s.get("w0-1")["text"] == lean_row(0, 1)["text"]


def test_a_failure_message_renumbered_is_the_same_answer_not_a_conflict(tmp_path):
    """Lean numbers metavariables in the order it makes them: another process's ``?m.N`` is the
    same failure (cb4cd23 counted it a conflict); another message is not."""
    s = ShardStore(tmp_path / "lean", LEAN_SCHEMA, settings="s")
    failure = {**lean_row(0, 1), "text": None, "error_kind": "error",
               "error": "typeclass instance problem is stuck ?m.1234 : Type ?u.56"}  # fmt: skip
    s.put(failure)
    s.put({**failure, "error": "typeclass instance problem is stuck ?m.98 : Type ?u.7"})
    assert s.conflicts == 0, "a renumbered metavariable is a conflict"
    s.put({**failure, "error": "unknown identifier 'foo'"})
    assert s.conflicts == 1


def test_an_eviction_reaches_every_reader_and_a_new_answer_stands(tmp_path):
    a = ShardStore(tmp_path / "lean", LEAN_SCHEMA, settings="s", writer="a")
    a.put(lean_row(0, 1))
    a.put(lean_row(0, 2))
    a.flush()
    b = ShardStore(tmp_path / "lean", LEAN_SCHEMA, settings="s", writer="b")
    assert b.evict("w0-1", "verify: refuted") and not b.evict("w0-9", "absent")
    b.put({**lean_row(0, 1), "text": "⊢ what Lean says"})
    b.flush()
    a.refresh()  # a reader that held the old answer drops it for the new one, no conflict
    assert a.get("w0-1")["text"] == "⊢ what Lean says" and a.get("w0-2") is not None
    c = ShardStore(tmp_path / "lean", LEAN_SCHEMA, settings="s")  # so does a new reader
    assert c.get("w0-1")["text"] == "⊢ what Lean says"
    assert a.conflicts == c.conflicts == 0
    assert ShardStore(tmp_path / "lean", LEAN_SCHEMA, settings="other").get("w0-1") is None
    assert summary(tmp_path)["kinds"]["lean"]["evicted"] == 1


def test_stats_lists_temporaries_apart_and_prune_removes_stale_ones(tmp_path, capsys):
    s = ShardStore(tmp_path / "lean", LEAN_SCHEMA, settings="s")
    s.put(lean_row(0, 1))
    s.flush()
    before = summary(tmp_path)["bytes"]
    stale = tmp_path / "lean" / ".part-killed-000003.parquet.tmp"
    stale.write_bytes(b"x" * 100_000)
    fresh = tmp_path / "lean" / ".part-writing-000000.parquet.tmp"
    fresh.write_bytes(b"y" * 10)
    old = time.time() - 7200
    os.utime(stale, (old, old))
    st = summary(tmp_path)
    assert st["bytes"] == before and st["kinds"]["lean"]["rows"] == 1
    assert st["temporaries"] == {"files": 2, "bytes": 100_010}
    assert cli_main(["cache", "stats", str(tmp_path)]) == 0
    assert "2 temporary file(s)" in capsys.readouterr().out
    assert cli_main(["cache", "prune", str(tmp_path), "--lean", "--toolchain", "s"]) == 0
    assert not stale.exists() and fresh.exists()  # a writer may still be writing that one


def one_models_answers(tmp_path) -> Path:
    """A cache holding three policy answers of the model ``0123456789abcdef``."""
    cache = tmp_path / "cache"
    s = ShardStore(cache / "policy", POLICY_SCHEMA, settings="s1", writer="a")
    for i in range(3):
        s.put(policy_row(f"k{i}", "0123456789abcdef"))
    s.flush()
    return cache


def test_prune_keep_models_refuses_a_model_path_that_is_not_here(tmp_path, capsys):
    cache = one_models_answers(tmp_path)
    code = cli_main(["cache", "prune", str(cache), "--keep-models", "models/iter_1/merged"])
    assert code == 2 and "no such model directory here" in capsys.readouterr().err
    assert len(ShardStore(cache / "policy", POLICY_SCHEMA, settings="s1")) == 3  # nothing went
    # Its digest (what `stats` lists) keeps it; the served name of another model drops nothing.
    assert cli_main(["cache", "prune", str(cache), "--keep-models", "0123456789abcdef"]) == 0
    assert len(ShardStore(cache / "policy", POLICY_SCHEMA, settings="s1")) == 3


def test_prune_goes_on_past_an_unreadable_shard(tmp_path):
    cache = tmp_path / "cache"
    s = ShardStore(cache / "policy", POLICY_SCHEMA, settings="s1", writer="a")
    s.put(policy_row("k0", "gone"))
    s.put(policy_row("k1", "kept"))
    s.flush()
    bad = cache / "policy" / "part-b-000000.parquet"
    bad.write_bytes(b"PAR1 truncated")
    assert cli_main(["cache", "prune", str(cache), "--keep-models", "kept"]) == 0
    left = ShardStore(cache / "policy", POLICY_SCHEMA, settings="s1")
    assert sorted(left._index) == ["k1"] and bad.exists()


# -- prune --lean on a real store ------------------------------------------------------------------


def two_toolchains(tmp_path, cache) -> dict[str, str]:
    """Fill ``cache`` from two Lean projects pinned to v4.9.0 and v4.10.0; their settings
    digests by version."""
    digests = {}
    for version in ("v4.9.0", "v4.10.0"):
        project = tmp_path / version
        project.mkdir()
        (project / "lean-toolchain").write_text(f"leanprover/lean4:{version}\n")
        lean = LeanConfig(repl_command=("toy",), imports=(), project_path=str(project))
        k = keys(SeededToyPolicy(seed=1), lean=lean)
        digests[version] = settings_digest(k["lean"])
        search(tmp_path / version / "out", SeededToyPolicy(seed=1), ToyEnv(), cache, key=k)
    return digests


def test_prune_lean_drops_the_answers_of_one_toolchain_or_all(tmp_path, capsys):
    cache = tmp_path / "cache"
    digests = two_toolchains(tmp_path, cache)
    st = summary(cache)
    held = st["kinds"]["lean"]["rows_by_settings"]
    assert set(held) == set(digests.values())
    assert held[digests["v4.9.0"]]["lean_toolchain"] == "leanprover/lean4:v4.9.0"
    policy_rows, rows_9 = st["kinds"]["policy"]["rows"], held[digests["v4.9.0"]]["rows"]
    assert cli_main(["cache", "stats", str(cache)]) == 0
    assert "leanprover/lean4:v4.10.0" in capsys.readouterr().out
    # An unknown toolchain names what is held, and prunes nothing.
    assert cli_main(["cache", "prune", str(cache), "--lean", "--toolchain", "v4.8.0"]) == 2
    assert "leanprover/lean4:v4.9.0" in capsys.readouterr().err
    assert cli_main(["cache", "prune", str(cache), "--lean"]) == 2
    assert "--toolchain T, or --all" in capsys.readouterr().err
    assert cli_main(["cache", "prune", str(cache), "--lean", "--toolchain", "v4.9.0"]) == 0
    after = summary(cache)
    assert set(after["kinds"]["lean"]["rows_by_settings"]) == {digests["v4.10.0"]}
    assert after["kinds"]["lean"]["rows"] == st["kinds"]["lean"]["rows"] - rows_9
    assert after["kinds"]["policy"]["rows"] == policy_rows  # the model's answers stay
    assert cli_main(["cache", "prune", str(cache), "--lean", "--all"]) == 0
    assert shard_files(cache / "lean") == [] and summary(cache)["kinds"]["policy"]["rows"]


# -- verify on a real store ------------------------------------------------------------------------


def verify_overlay(tmp_path, *, workers: int) -> Path:
    """A config overlay: the cache under ``tmp_path``, the propositional REPL as Lean."""
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(yaml.safe_dump({
        "cache": str(tmp_path / "cache"),
        "lean": {"repl_command": ["python", "-m", "burnqed.proplogic"], "imports": [],
                 "workers": workers, "spares": 0, "verifiers": 1},
    }))  # fmt: skip
    return overlay


def test_cache_verify_evicts_planted_wrong_answers_of_a_real_store(tmp_path, capsys):
    overlay = verify_overlay(tmp_path, workers=2)
    params = load_params(REPO / "params.yaml", [overlay])
    lean = LeanConfig.from_dict(params["lean"])
    theorems = generate_theorems(6, seed=5, min_depth=3, max_depth=4)
    cfg = SearchConfig(max_nodes=4, max_depth=12, num_candidates=6, concurrency=3,
                       expansions_per_step=1, max_error_fraction=1.0)  # fmt: skip

    repl_version = check_repl(lean)

    async def fill():
        async with LeanPool(lean) as pool:
            policy = RawTracedPolicy(await trace_steps(pool, theorems))
            spec = CacheSpec(
                tmp_path / "cache",
                policy=policy_settings(policy, PolicyConfig(backend="transformers", device="cpu")),
                lean=lean_settings(lean, repl_version),
            )
            await search_to_dir(theorems, policy, pool, cfg, tmp_path / "fill", cache=spec,
                                sampling=SamplingParams(n=6, temperature=1.0), seed=7)  # fmt: skip

    asyncio.run(fill())
    table = pa.concat_tables([read_shard(p, [f.name for f in LEAN_SCHEMA], None)
                              for p in shard_files(tmp_path / "cache" / "lean")])  # fmt: skip
    answers = table.to_pylist()
    success = next(r for r in answers if r["tactic"] and r["text"] and r["path"])
    failure = next(r for r in answers if r["tactic"] and r["error_kind"] == "error")
    planted = {
        success["key"]: {"text": None, "error_kind": "error", "error": "planted"},
        failure["key"]: {"text": "p : Prop\n⊢ p", "error_kind": None, "error": None},
    }
    plant(tmp_path / "cache", lambda row: planted.get(row["key"]))
    args = ["cache", "verify", "--params", str(REPO / "params.yaml"), "--configfile", str(overlay)]
    assert cli_main(args) == 1  # it found answers Lean refutes
    out = dict(line.split("=") for line in capsys.readouterr().out.split())
    assert out["disagreed"] == "2" and out["evicted"] == "2" and out["errors"] == "0"
    assert int(out["checked"]) == len(answers) == int(out["agreed"]) + 2 + int(out["unreachable"])
    digest = settings_digest(lean_settings(lean, repl_version))
    store = ShardStore(tmp_path / "cache" / "lean", LEAN_SCHEMA, settings=digest)
    assert store.get(success["key"])["text"] == success["text"]  # Lean's answers stand again
    assert store.get(failure["key"])["error_kind"] == "error"
    assert cli_main([*args, "--json", "--sample", "0.5"]) == 0  # nothing left to refute
    half = json.loads(capsys.readouterr().out)
    assert half["disagreed"] == 0 and 0 < half["checked"] < len(answers)
    assert cli_main([*args, "--sample", "0"]) == 2
    assert "--sample" in capsys.readouterr().err


def test_rows_written_without_their_question_are_counted_not_asked(tmp_path):
    """A store from before rows kept their question: verify says so instead of guessing."""
    shard = tmp_path / "lean" / "part-old-000000.parquet"
    shard.parent.mkdir(parents=True)
    old = pa.schema([f for f in LEAN_SCHEMA if f.name not in ("theorem", "path", "tactic")])
    lean = LeanConfig(repl_command=("toy",), imports=())
    digest = settings_digest(lean_settings(lean, "toy 1.0"))
    pq.write_table(pa.Table.from_pylist([{"key": "k", "settings": digest, "text": "⊢ p",
                                          "error_kind": None, "error": None, "cost_s": 0.1}],
                                        schema=old), shard)  # fmt: skip
    from burnqed.search.cache_verify import verify_async

    report = asyncio.run(verify_async(tmp_path, lean, "toy 1.0"))
    assert report["rows"] == 1 and report["no_question"] == 1 and report["checked"] == 0
    assert ShardStore(tmp_path / "lean", LEAN_SCHEMA, settings=digest).get("k")["text"] == "⊢ p"


def test_search_cache_recheck_option_rechecks_the_lean_hits(tmp_path, monkeypatch, capsys):
    """``burnqed search --cache DIR --cache-recheck F`` through the real pool: the second run asks
    Lean again every hit (F = 1) and Lean agrees; a fraction outside [0, 1] is refused first."""
    import sys

    from tests.search.test_errors import fake_policy
    from tests.search.test_errors import search as cli_search

    cache = tmp_path / "cache"
    repl = [sys.executable, "-m", "burnqed.proplogic"]
    with fake_policy(monkeypatch):
        assert cli_search(tmp_path / "a", repl, "--cache", str(cache)) == 0
        assert cli_search(tmp_path / "b", repl, "--cache", str(cache), "--cache-recheck", "1") == 0
        assert cli_search(tmp_path / "c", repl, "--cache", str(cache), "--cache-recheck", "2") == 2
    assert "cache_recheck: a fraction within [0, 1]" in capsys.readouterr().err
    block = json.loads((tmp_path / "b" / "out" / "manifest.json").read_text())["cache"]
    assert block["rechecks"]["fraction"] == 1.0
    assert block["rechecks"]["asked"] == block["rechecks"]["agreed"] > 0
    assert block["lean"]["hits"] == 0 and block["evicted"] == {}


# -- issue 63: the CLI refuses what would drop or check nothing ------------------------------------


def test_prune_keep_models_matching_nothing_refuses(tmp_path, capsys):
    """cb4cd23 warned and kept nothing: every model's answers went for a typo."""
    cache = one_models_answers(tmp_path)
    code = cli_main(["cache", "prune", str(cache), "--keep-models", "0123456789abcdeg"])
    assert code == 2, "a model name matching no answer dropped them all"
    assert "no policy answers of that model here (held: 0123456789abcdef)" in (
        capsys.readouterr().err
    )
    assert len(ShardStore(cache / "policy", POLICY_SCHEMA, settings="s1")) == 3  # nothing went


def test_prune_lean_toolchain_matches_a_whole_version_not_a_word(tmp_path, capsys):
    """cb4cd23 matched any word of a label: ``lean4`` (of ``leanprover/lean4:…``) dropped every
    toolchain's answers."""
    cache = tmp_path / "cache"
    digests = two_toolchains(tmp_path, cache)
    for word in ("lean4", "leanprover", "4", "v4.9", "toy"):
        code = cli_main(["cache", "prune", str(cache), "--lean", "--toolchain", word])
        assert code == 2, f"--toolchain {word} matched a word, not a whole version"
        assert "nothing pruned" in capsys.readouterr().err
    assert set(summary(cache)["kinds"]["lean"]["rows_by_settings"]) == set(digests.values())
    assert cli_main(["cache", "prune", str(cache), "--lean", "--toolchain", "4.9.0"]) == 0
    assert set(summary(cache)["kinds"]["lean"]["rows_by_settings"]) == {digests["v4.10.0"]}


def test_cache_verify_that_checked_nothing_says_so_and_exits_non_zero(tmp_path, capsys):
    """An empty cache, a sample that draws no row, a cache of another REPL's answers: cb4cd23
    printed zeros and exited 0, as if every answer had been checked and had stood."""
    overlay = verify_overlay(tmp_path, workers=1)
    (tmp_path / "cache").mkdir()
    args = ["cache", "verify", "--params", str(REPO / "params.yaml"), "--configfile", str(overlay)]
    assert cli_main(args) == 3, "a verify that checked nothing exited 0"
    captured = capsys.readouterr()
    assert "checked nothing" in captured.err and "checked=0" in captured.out


def test_the_recheck_draws_are_seeded_by_the_job(tmp_path, monkeypatch):
    """Two runs of one search job re-check the same hits (cb4cd23 drew from a fresh random seed
    per run: a re-check could not be repeated)."""
    import sys

    from tests.search.test_errors import fake_policy
    from tests.search.test_errors import search as cli_search

    cache = tmp_path / "cache"
    repl = [sys.executable, "-m", "burnqed.proplogic"]
    with fake_policy(monkeypatch):
        assert cli_search(tmp_path / "a", repl, "--cache", str(cache)) == 0
        for run in ("b", "c"):
            assert cli_search(tmp_path / run, repl, "--cache", str(cache), "--cache-recheck",
                              "0.5") == 0  # fmt: skip
    b, c = (json.loads((tmp_path / r / "out" / "manifest.json").read_text())["cache"]["rechecks"]
            for r in ("b", "c"))  # fmt: skip
    assert b["seed"] == c["seed"], "the re-check draws are not seeded"
    assert b == c and b["asked"] > 0 and b["agreed"] == b["asked"]
