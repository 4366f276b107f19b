"""The expansion cache re-checks and evicts Lean answers (issue 48): a planted wrong failure and a
planted wrong success are caught — by the sampled re-checks, or where Lean rebuilds a cached state —
evicted, and the attempt ends with its true result (the live search's), never an ``error``; the
corrected answers are what the next run is served.  Also: a stored answer that cost more than
today's ``tactic_timeout_s`` is not served, and the re-check draws do not move the search's."""

from __future__ import annotations

import asyncio
import hashlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from burnqed.config import LeanConfig, PolicyConfig, SearchConfig
from burnqed.lean.pool import LeanPool, TacticFailure
from burnqed.policy import Candidate, SamplingParams, generation_of
from burnqed.search.answered import AnswerRefuted
from burnqed.search.cache import (
    CachedSource,
    CacheSpec,
    lean_settings,
    policy_settings,
    settings_digest,
    start_key,
    statement_digest,
    tactic_key,
    theorem_record,
)
from burnqed.search.cache_store import LEAN_SCHEMA, ShardStore, read_shard, shard_files
from burnqed.search.sources import LiveSource
from burnqed.search.stage import search_to_dir
from burnqed.theorems import Theorem
from tests.replay.test_replay import rows
from tests.search.fakes import ToyEnv, ToySession, ToySuccess, toy_theorems

CFG = SearchConfig(max_nodes=8, max_depth=20, num_candidates=4, concurrency=3,
                   expansions_per_step=1, max_error_fraction=1.0)  # fmt: skip
SAMPLING = SamplingParams(n=4, temperature=1.0)
LEAN = LeanConfig(repl_command=("toy",), imports=())
THEOREMS = toy_theorems(8, seed=3, low=4, high=9)
WRONG_STATE = "x : Nat\n⊢ reach 50"  # what the planted wrong successes print (no live state does)


@dataclass
class SeedChoicePolicy:
    """Candidate ``j`` is a function of (prompt, its seed) — one of four tactics, each with its
    own log-probability (``bogus``, which always fails, the likeliest): a root's ``bogus`` child,
    were it a success, is the next node popped."""

    tactics: tuple[tuple[str, float], ...] = (
        ("bogus", -0.1), ("step 1", -0.5), ("step 2", -0.8), ("split 2", -1.2),
    )  # fmt: skip
    model_id: str = "seed-choice"
    candidates_independent_of_n = True
    asked: list[int] = field(default_factory=list)

    def raw_candidates(self, prompts: Sequence[str], params: SamplingParams, seeds=None):
        self.asked.append(sum(len(s) for s in seeds))
        out = []
        for p, ss in zip(prompts, seeds, strict=True):
            picks = [hashlib.sha256(f"{p}\0{s}".encode()).digest()[0] % 4 for s in ss]
            out.append([Candidate(*self.tactics[i], 1) for i in picks])
        return out

    def generate(self, prompts, params, seeds=None):
        return [generation_of(r) for r in self.raw_candidates(prompts, params, seeds)]

    def embed(self, texts):
        raise NotImplementedError


def keys(policy) -> dict:
    return {
        "policy": policy_settings(policy, PolicyConfig(backend="transformers", device="cpu")),
        "lean": lean_settings(LEAN, "toy 1.0"),
    }


def search(out: Path, env, cache: Path | None, *, recheck: float = 0.0, timeout=None) -> dict:
    policy = SeedChoicePolicy()
    spec = None
    if cache is not None:
        k = keys(policy)
        spec = CacheSpec(cache, policy=k["policy"], lean=k["lean"], recheck=recheck,
                         recheck_seed=11, tactic_timeout_s=timeout)  # fmt: skip
    return asyncio.run(search_to_dir(THEOREMS, policy, env, CFG, out, sampling=SAMPLING, seed=7,
                                     cache=spec))  # fmt: skip


def plant(cache: Path, change) -> list[str]:
    """Rewrite the cache's Lean shards with ``change(row)`` applied (a row, or None to keep it as
    it is); returns the keys changed."""
    changed = []
    for path in shard_files(cache / "lean"):
        table = read_shard(path, [f.name for f in LEAN_SCHEMA], None)
        out = []
        for row in table.to_pylist():
            new = change(row)
            if new is not None:
                changed.append(row["key"])
                row = {**row, **new}
            out.append(row)
        pq.write_table(pa.Table.from_pylist(out, schema=LEAN_SCHEMA), path)
    return changed


def table_rows(cache: Path) -> list[dict]:
    """Every row of the cache's Lean shards, with its question."""
    return [r for path in shard_files(cache / "lean")
            for r in read_shard(path, [f.name for f in LEAN_SCHEMA], None).to_pylist()]  # fmt: skip


def wrong_success(row: dict) -> dict | None:
    """A root's failing ``bogus`` made a success."""
    if row["tactic"] == "bogus" and row["path"] == [] and row["text"] is None:
        return {"text": WRONG_STATE, "error_kind": None, "error": None}
    return None


def no_errors(directory: Path) -> bool:
    return all(r["status"] != "error" for r in rows(directory, summary=True))


def test_a_wrong_success_is_evicted_where_lean_rebuilds_it_and_the_attempt_redone_live(tmp_path):
    """Re-checks off: the planted success is caught when a question below it goes live and Lean
    cannot rebuild the step.  (On d670ec8 each such attempt ended in ``error``.)"""
    cache = tmp_path / "cache"
    search(tmp_path / "live", ToyEnv(), None)
    search(tmp_path / "fill", ToyEnv(), cache)
    planted = plant(cache, wrong_success)
    assert len(planted) >= 3, planted
    block = search(tmp_path / "cached", ToyEnv(), cache)["cache"]
    assert no_errors(tmp_path / "cached")
    assert rows(tmp_path / "cached") == rows(tmp_path / "live")
    assert rows(tmp_path / "cached", summary=True) == rows(tmp_path / "live", summary=True)
    assert block["evicted"] == {"rebuild": len(planted)}
    assert block["states"]["redone_attempts"] == len(planted)
    assert block["lean"]["hits"] > 0  # the rest still came from the cache
    # The evicted answers are gone for every reader; the live ones stand in their place.
    store = ShardStore(cache / "lean", LEAN_SCHEMA, settings=settings_digest(keys(
        SeedChoicePolicy())["lean"]))  # fmt: skip
    assert all(store.get(k)["text"] is None for k in planted)
    again = search(tmp_path / "again", ToyEnv(), cache)["cache"]
    assert rows(tmp_path / "again") == rows(tmp_path / "live")
    assert again["evicted"] == {} and again["states"]["redone_attempts"] == 0
    assert again["lean"]["misses"] == 0 and again["states"]["disagreements"] == 0


def test_rechecks_catch_a_wrong_failure_and_a_wrong_success_before_the_search_uses_them(tmp_path):
    cache = tmp_path / "cache"
    search(tmp_path / "live", ToyEnv(), None)
    proof = {(r["theorem"], r["tactic"]) for r in rows(tmp_path / "live") if r["on_proof_path"]}
    assert proof  # the test can tell
    search(tmp_path / "fill", ToyEnv(), cache)
    by_name = {t.name: t for t in THEOREMS}

    failures = []

    def wrong(row: dict) -> dict | None:
        if (new := wrong_success(row)) is not None:
            return new
        name = next(n for n, t in by_name.items() if theorem_record(t) == row["theorem"])
        if row["path"] == [] and row["text"] is not None and (name, row["tactic"]) in proof:
            failures.append(row["key"])  # a first step of a proof made a failure
            return {"text": None, "error_kind": "error", "error": "planted: cannot lower"}
        return None

    planted = plant(cache, wrong)
    block = search(tmp_path / "cached", ToyEnv(), cache, recheck=1.0)["cache"]
    assert no_errors(tmp_path / "cached")
    assert rows(tmp_path / "cached") == rows(tmp_path / "live")
    assert rows(tmp_path / "cached", summary=True) == rows(tmp_path / "live", summary=True)
    r = block["rechecks"]
    assert failures and len(planted) >= len(failures) + 3
    assert r["fraction"] == 1.0 and r["disagreed"] == len(planted)
    assert r["asked"] == r["agreed"] + r["disagreed"] + r["inconclusive"] > len(planted)
    assert block["evicted"] == {"recheck": len(planted)}
    # Caught before anything was built on them; each attempt that met one is redone live all the
    # same (other answers it was served may be as wrong), and equals the live search.
    met = {row["theorem"] for row in table_rows(cache) if row["key"] in planted}
    assert block["states"]["redone_attempts"] == len(met)
    # The next run, re-checking nothing, is served the corrected answers.
    again = search(tmp_path / "again", ToyEnv(), cache)["cache"]
    assert rows(tmp_path / "again") == rows(tmp_path / "live")
    assert again["lean"]["misses"] == 0 and again["evicted"] == {}


def test_the_recheck_sample_is_drawn_apart_from_the_search(tmp_path):
    """A fraction re-checks about that share of the hits, the same ones for the same seed, and
    the trees are the live ones whatever it draws."""
    cache = tmp_path / "cache"
    search(tmp_path / "live", ToyEnv(), None)
    search(tmp_path / "fill", ToyEnv(), cache)
    first = search(tmp_path / "a", ToyEnv(), cache, recheck=0.3)["cache"]
    second = search(tmp_path / "b", ToyEnv(), cache, recheck=0.3)["cache"]
    total = first["lean"]["hits"] + first["rechecks"]["asked"]
    assert 0.15 * total < first["rechecks"]["asked"] < 0.45 * total
    assert first["rechecks"] == second["rechecks"]  # the same seed draws the same hits
    assert first["rechecks"]["agreed"] == first["rechecks"]["asked"]
    assert rows(tmp_path / "a") == rows(tmp_path / "b") == rows(tmp_path / "live")


class SlowSession(ToySession):
    """Every tactic costs ``env.cost_s`` of Lean; past ``env.limit_s`` the REPL's timeout fires."""

    async def apply(self, state, tactic):
        r = await super().apply(state, tactic)
        if self.env.limit_s is not None and self.env.cost_s > self.env.limit_s:
            return TacticFailure("timeout", "interrupt (lean.tactic_timeout_s)", self.env.limit_s)
        if isinstance(r, ToySuccess):
            return ToySuccess(r.state, r.messages, self.env.cost_s)
        return TacticFailure(r.kind, r.message, self.env.cost_s)


class SlowEnv(ToyEnv):
    def __init__(self, cost_s: float, limit_s: float | None) -> None:
        super().__init__()
        self.cost_s, self.limit_s = cost_s, limit_s

    async def start(self, theorem):
        await super().start(theorem)
        return SlowSession(self, theorem)


def test_an_answer_that_cost_more_than_todays_tactic_timeout_is_not_served(tmp_path):
    cache = tmp_path / "cache"
    search(tmp_path / "fill", SlowEnv(2.0, None), cache, timeout=None)  # stored at 2 s each
    generous = search(tmp_path / "generous", SlowEnv(2.0, 5.0), cache, timeout=5.0)["cache"]
    assert generous["lean"]["misses"] == 0 and generous["not_served"] == {}
    # Under a 1 s limit a live run times out on every tactic: so does the run through the cache.
    search(tmp_path / "live", SlowEnv(2.0, 1.0), None)
    tight = search(tmp_path / "tight", SlowEnv(2.0, 1.0), cache, timeout=1.0)["cache"]
    assert rows(tmp_path / "tight") == rows(tmp_path / "live")
    assert any("timeout" in (r["error"] or "") for r in rows(tmp_path / "live"))
    assert tight["lean"]["hits"] == 0 and tight["not_served"]["over_time_limit"] > 0
    assert tight["not_stored"]["timeout"] > 0 and tight["evicted"] == {}  # kept for other limits


def test_a_cached_step_the_pool_cannot_rebuild_is_refuted_and_evicted(tmp_path):
    """The pool's path (``adopt``, rebuilt by ``goal.load``/replay): a cached success Lean rejects
    is named by the pool's ``AdoptedStateError``, mapped to the cached step, evicted, and its
    attempt marked for a live redo."""
    lean = LeanConfig(repl_command=(sys.executable, "-m", "burnqed.proplogic"), imports=(),
                      workers=1, spares=0, verifiers=1)  # fmt: skip
    thm = Theorem(name="t", formal_statement="theorem t (p q : Prop) : p ∧ q → q ∧ p := by\n")
    settings = lean_settings(lean, "proplogic")
    digest = settings_digest(settings)
    statement = statement_digest(thm)
    root = "p q : Prop\n⊢ p ∧ q → q ∧ p"
    bogus = tactic_key(start_key(digest, statement), "exact foo")
    store = ShardStore(tmp_path / "cache" / "lean", LEAN_SCHEMA, settings=digest)
    store.put({"key": start_key(digest, statement), "text": root, "error_kind": None,
               "error": None, "cost_s": 0.1})  # fmt: skip
    store.put({"key": bogus, "text": "p q : Prop\nh : p ∧ q\n⊢ q ∧ p", "error_kind": None,
               "error": None, "cost_s": 0.1})  # fmt: skip
    store.flush()

    async def main():
        async with LeanPool(lean) as pool:
            source = CachedSource(LiveSource(None, pool), tmp_path / "cache", policy=None,
                                  lean=settings)  # fmt: skip
            session = await source.start(thm, 0)
            wrong = await session.apply(session.root, "exact foo")  # the planted success: a hit
            assert wrong.state.text.startswith("p q : Prop\nh :")
            try:
                await session.apply(wrong.state, "exact h.2")  # a miss below it: goes live
            except AnswerRefuted as e:
                refuted = e
            finally:
                await session.close()
            source.close()
            return source, refuted

    source, refuted = asyncio.run(main())
    assert refuted.sid == 1 and refuted.live_text is None
    assert source.lean_store.get(bogus) is None and source.stats()["evicted"] == {"rebuild": 1}
    assert source.redo("t", 0) is True and source.redo("t", 0) is False  # redone once, live
    # A new reader does not see the evicted answer either.
    assert ShardStore(tmp_path / "cache" / "lean", LEAN_SCHEMA, settings=digest).get(bogus) is None


def test_a_cached_state_the_pool_rebuilds_printed_otherwise_is_evicted_and_redone(tmp_path):
    """burnqed's propositional REPL through the pool (``adopt``, ``goal.load``/replay): a cached
    first step of a proof planted with another printed state is caught when the pool rebuilds it
    below a live question; the attempt is redone live and equals the live search."""
    from burnqed.data.proplogic import generate_theorems
    from tests.search.test_cache_proplogic import RawTracedPolicy
    from tests.search.test_proplogic_pool import trace_steps

    theorems = generate_theorems(8, seed=5, min_depth=3, max_depth=5)
    lean = LeanConfig(repl_command=(sys.executable, "-m", "burnqed.proplogic"), imports=(),
                      workers=2)  # fmt: skip
    small = SearchConfig(max_nodes=3, max_depth=12, num_candidates=6, concurrency=3,
                         expansions_per_step=1, max_error_fraction=1.0)  # fmt: skip
    large = SearchConfig(**{**small.to_dict(), "max_nodes": 10})
    run = {"sampling": SamplingParams(n=6, temperature=1.0), "seed": 7}
    cache = tmp_path / "cache"

    async def main():
        async with LeanPool(lean) as pool:
            policy = RawTracedPolicy(await trace_steps(pool, theorems))
            spec = CacheSpec(
                cache,
                policy=policy_settings(policy, PolicyConfig(backend="transformers", device="cpu")),
                lean=lean_settings(lean, "proplogic"),
            )
            await search_to_dir(theorems, policy, pool, large, tmp_path / "live", **run)
            await search_to_dir(theorems, policy, pool, small, tmp_path / "fill", cache=spec,
                                **run)  # fmt: skip
            first = {(r["theorem"], r["tactic"]) for r in rows(tmp_path / "live")
                     if r["on_proof_path"] and r["depth"] == 1}  # fmt: skip
            names = {theorem_record(t): t.key for t in theorems}

            def otherwise(row):
                if row["path"] == [] and row["text"] and (names[row["theorem"]],
                                                          row["tactic"]) in first:  # fmt: skip
                    return {"text": row["text"].replace("⊢ ", "⊢ ¬¬")}
                return None

            planted = plant(cache, otherwise)
            before = pool.stats()
            block = (await search_to_dir(theorems, policy, pool, large, tmp_path / "cached",
                                         cache=spec, **run))["cache"]  # fmt: skip
            return planted, block, pool.stats()["disagreements"] - before["disagreements"]

    planted, block, disagreements = asyncio.run(main())
    assert planted and disagreements >= 1
    assert no_errors(tmp_path / "cached")
    assert rows(tmp_path / "cached") == rows(tmp_path / "live")
    assert rows(tmp_path / "cached", summary=True) == rows(tmp_path / "live", summary=True)
    assert 1 <= block["evicted"]["rebuild"] <= len(planted)
    assert block["states"]["redone_attempts"] == block["evicted"]["rebuild"]
