"""The expansion cache (issue 31) on the toy logic: a search through it equals the search without
it, a rerun is answered from it, a changed key component — model file, heartbeat limit,
temperature, prompt format, toolchain version, salt — gives no hits of its kind, infrastructure
errors and wall-clock timeouts are never served from it, and its block reports what it saved."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from burnqed.config import LeanConfig, PolicyConfig, SearchConfig
from burnqed.lean.errors import ReplError
from burnqed.lean.pool import TacticFailure
from burnqed.policy import Candidate, Generation, SamplingParams, generation_of, salted_seed
from burnqed.search.cache import CacheSpec, lean_settings, policy_settings
from burnqed.search.stage import search_to_dir
from tests.replay.test_replay import rows
from tests.search.fakes import RandomToyPolicy, ToyEnv, ToySession, _seed, toy_theorems

CFG = SearchConfig(max_nodes=8, max_depth=20, num_candidates=4, concurrency=3,
                   expansions_per_step=1, max_error_fraction=1.0)  # fmt: skip
SAMPLING = SamplingParams(n=4, temperature=1.0)
LEAN = LeanConfig(repl_command=("toy",), imports=())
THEOREMS = toy_theorems(8, seed=3, low=3, high=9)


@dataclass
class SeededToyPolicy(RandomToyPolicy):
    """RandomToyPolicy with a backend's per-seed path: candidate ``j`` is a function of (prompt,
    its seed) alone, whatever ``n`` the call asks for, and every call is recorded."""

    candidates_independent_of_n = True
    asked: list[int] = field(default_factory=list)  # candidates sampled, per call

    def raw_candidates(
        self, prompts: Sequence[str], params: SamplingParams, seeds=None
    ) -> list[list[Candidate | None]]:
        assert seeds is not None and all(len(s) == params.n for s in seeds)
        self.asked.append(sum(len(s) for s in seeds))
        pool = [t for t in self.tactics if self.allow_cheat or t != "cheat"]
        out = []
        for p, ss in zip(prompts, seeds, strict=True):
            rngs = [random.Random(_seed(self.seed, p, s)) for s in ss]
            out.append([Candidate(r.choice(pool), -r.random() * 3, r.randint(1, 5)) for r in rngs])
        return out

    def generate(self, prompts, params, seeds=None) -> list[Generation]:
        return [generation_of(r) for r in self.raw_candidates(prompts, params, seeds)]


def keys(policy, lean: LeanConfig = LEAN, repl: str = "toy 1.0", model=None) -> dict:
    """The run-wide key parts the search stage computes (through the real key functions)."""
    if model is not None:
        policy.model_id = str(model)
    return {
        "policy": policy_settings(policy, PolicyConfig(backend="transformers", device="cpu")),
        "lean": lean_settings(lean, repl),
    }


def search(out: Path, policy, env, cache: Path | None, *, sampling=SAMPLING, seed=7, key=None,
           cfg=CFG) -> dict:  # fmt: skip
    spec = None
    if cache is not None:
        k = key or keys(policy)
        spec = CacheSpec(cache, policy=k["policy"], lean=k["lean"])
    return asyncio.run(search_to_dir(THEOREMS, policy, env, cfg, out, sampling=sampling,
                                     seed=seed, cache=spec))  # fmt: skip


def test_a_search_through_the_cache_equals_the_live_one_and_a_rerun_is_answered_from_it(tmp_path):
    cache = tmp_path / "cache"
    search(tmp_path / "a", SeededToyPolicy(seed=1), ToyEnv(), None)  # A: no cache
    empty = search(tmp_path / "b", SeededToyPolicy(seed=1), ToyEnv(), cache)["cache"]  # B: misses
    policy, env = SeededToyPolicy(seed=1), ToyEnv()
    full = search(tmp_path / "c", policy, env, cache)["cache"]  # C: hits
    live = rows(tmp_path / "a")
    assert rows(tmp_path / "b") == live and rows(tmp_path / "c") == live  # trees, node by node
    assert rows(tmp_path / "b", summary=True) == rows(tmp_path / "a", summary=True)
    assert rows(tmp_path / "c", summary=True) == rows(tmp_path / "a", summary=True)
    assert any(r["on_proof_path"] for r in live) and any(r["error"] for r in live)  # it can tell
    expansions = sum(r["expansion_index"] is not None for r in live)
    candidates = 4 * expansions
    # B asked everything live and stored it.
    assert empty["policy"]["candidates"] == {"hits": 0, "misses": candidates}
    assert empty["lean"]["hits"] == 0 and empty["lean"]["misses"] > 0
    assert empty["starts"] == {"hits": 0, "misses": 8}
    assert empty["written"]["policy"] == candidates
    # C asked neither the model nor Lean (only the whole-file checks of its proofs run live, and
    # the paths of the proofs Lean rejects whole — ``cheat`` — are asked again, and stand).
    rejected = full["rejected_proofs"]
    assert rejected["through_cache"] > 0 and rejected["refuted"] == 0
    assert policy.asked == [] and env.applies == rejected["steps_asked"] and env.open_sessions == 0
    assert full["states"]["redone_attempts"] == 0 and full["evicted"] == {}
    assert full["policy"]["candidates"] == {"hits": candidates, "misses": 0}
    assert full["policy"]["expansions"] == {"hits": expansions, "misses": 0, "uncached": 0}
    assert full["policy"]["hit_rate"] == 1.0 and full["lean"]["hit_rate"] == 1.0
    assert full["lean"]["hits"] == empty["lean"]["misses"] and full["starts"]["hits"] == 8
    assert full["written"] == {"policy": 0, "lean": 0}
    proved = sum(r["status"] == "proved" for r in rows(tmp_path / "a", summary=True))
    assert proved and len(env.verifications) >= proved  # verified live, every proof
    assert full["policy"]["saved_s"] > 0 and full["lean"]["saved_s"] > 0
    assert full["conflicts"] == 0 and full["states"]["disagreements"] == 0


def test_each_checkpoint_writes_the_cached_answers_before_its_attempts_commit(
    tmp_path, monkeypatch
):
    """The cache writes what it holds before each checkpoint commits its attempts: a run killed
    after that (SIGKILL: no ``close``) has every answer of the attempts its resume will not redo
    on disk.  (Buffered until 1000 rows or 60 s, a killed demo search lost them: a rerun from
    scratch then missed where it should have hit.)"""
    import dataclasses

    from burnqed import trajectory

    cache = tmp_path / "cache"
    shards: list[int] = []  # policy shards on disk as each summary part commits
    write = trajectory.write_parquet_atomic

    def spy(table, path, *args, **kwargs):
        if path.parent.name == trajectory.SUMMARY_DIR:
            shards.append(len(list((cache / "policy").glob("part-*.parquet"))))
        return write(table, path, *args, **kwargs)

    monkeypatch.setattr(trajectory, "write_parquet_atomic", spy)
    cfg = dataclasses.replace(CFG, checkpoint_every=3)
    block = search(tmp_path / "a", SeededToyPolicy(seed=1), ToyEnv(), cache, cfg=cfg)["cache"]
    assert len(shards) == 3  # 8 attempts: parts of 3, 3 and 2
    assert shards[0] >= 1 and shards == sorted(shards), shards
    assert block["written"]["policy"] == block["policy"]["candidates"]["misses"] > 0


# -- a changed key component gives no hits of its kind -------------------------------------------


def fill(tmp_path, **kw) -> Path:
    cache = tmp_path / "cache"
    first = search(tmp_path / "first", SeededToyPolicy(seed=1), ToyEnv(), cache, **kw)["cache"]
    assert first["written"]["policy"] > 0 and first["written"]["lean"] > 0
    return cache


def test_a_changed_temperature_gives_no_policy_hits(tmp_path):
    cache = fill(tmp_path)
    same = search(tmp_path / "same", SeededToyPolicy(seed=1), ToyEnv(), cache)["cache"]
    other = SamplingParams(n=4, temperature=0.8)
    changed = search(tmp_path / "t", SeededToyPolicy(seed=1), ToyEnv(), cache, sampling=other)
    assert same["policy"]["hit_rate"] == 1.0
    assert changed["cache"]["policy"]["candidates"]["hits"] == 0
    assert changed["cache"]["lean"]["hits"] > 0  # Lean does not depend on the temperature


def test_a_changed_salt_gives_no_policy_hits(tmp_path):
    cache = fill(tmp_path)
    salted = salted_seed(7, "search/iter_1")  # a later iteration's own draws
    changed = search(tmp_path / "s", SeededToyPolicy(seed=1), ToyEnv(), cache, seed=salted)
    assert changed["cache"]["policy"]["candidates"]["hits"] == 0
    assert changed["cache"]["policy"]["candidates"]["misses"] > 0


def test_a_changed_prompt_format_gives_no_policy_hits(tmp_path, monkeypatch):
    cache = fill(tmp_path)
    from burnqed.data.prompt import format_prompt

    monkeypatch.setattr(
        "burnqed.search.engine.format_prompt", lambda state: format_prompt(state) + "\n"
    )
    changed = search(tmp_path / "p", SeededToyPolicy(seed=1), ToyEnv(), cache)["cache"]
    assert changed["policy"]["candidates"]["hits"] == 0
    assert changed["lean"]["hits"] > 0 and changed["starts"]["hits"] == 8


def test_a_changed_model_file_gives_no_policy_hits(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"weights v1")
    (model / "tokenizer.json").write_text("{}")
    cache = tmp_path / "cache"
    search(tmp_path / "first", SeededToyPolicy(seed=1), ToyEnv(), cache,
           key=keys(SeededToyPolicy(seed=1), model=model))  # fmt: skip
    same = search(tmp_path / "same", SeededToyPolicy(seed=1), ToyEnv(), cache,
                  key=keys(SeededToyPolicy(seed=1), model=model))["cache"]  # fmt: skip
    (model / "model.safetensors").write_bytes(b"weights v2")  # same size, other weights
    changed = search(tmp_path / "m", SeededToyPolicy(seed=1), ToyEnv(), cache,
                     key=keys(SeededToyPolicy(seed=1), model=model))["cache"]  # fmt: skip
    assert same["policy"]["hit_rate"] == 1.0
    assert changed["policy"]["candidates"]["hits"] == 0 and changed["lean"]["hit_rate"] == 1.0


def test_a_changed_heartbeat_limit_gives_no_lean_hits(tmp_path):
    cache = fill(tmp_path)
    lean = LeanConfig(repl_command=("toy",), imports=(), tactic_heartbeats=400000)
    changed = search(tmp_path / "h", SeededToyPolicy(seed=1), ToyEnv(), cache,
                     key=keys(SeededToyPolicy(seed=1), lean=lean))["cache"]  # fmt: skip
    assert changed["lean"]["hits"] == 0 and changed["starts"]["hits"] == 0
    assert changed["lean"]["misses"] > 0 and changed["policy"]["hit_rate"] == 1.0


def test_a_changed_toolchain_version_gives_no_lean_hits(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "lean-toolchain").write_text("leanprover/lean4:v4.9.0\n")
    lean = LeanConfig(repl_command=("toy",), imports=(), project_path=str(project))
    cache = tmp_path / "cache"
    search(tmp_path / "first", SeededToyPolicy(seed=1), ToyEnv(), cache,
           key=keys(SeededToyPolicy(seed=1), lean=lean))  # fmt: skip
    same = search(tmp_path / "same", SeededToyPolicy(seed=1), ToyEnv(), cache,
                  key=keys(SeededToyPolicy(seed=1), lean=lean))["cache"]  # fmt: skip
    (project / "lean-toolchain").write_text("leanprover/lean4:v4.10.0\n")
    changed = search(tmp_path / "v", SeededToyPolicy(seed=1), ToyEnv(), cache,
                     key=keys(SeededToyPolicy(seed=1), lean=lean))["cache"]  # fmt: skip
    assert same["lean"]["hit_rate"] == 1.0
    assert changed["lean"]["hits"] == 0 and changed["starts"]["hits"] == 0
    assert changed["policy"]["hit_rate"] == 1.0


# -- what is never stored --------------------------------------------------------------------------


class FlakySession(ToySession):
    """A toy session whose ``step 1`` hits the wall-clock backstop and whose ``split 2`` breaks the
    REPL, while ``env.flaky`` is set; every application is counted by tactic."""

    async def apply(self, state, tactic):
        self.env.asked[tactic] += 1
        if self.env.flaky and tactic == "step 1":
            return TacticFailure("timeout", "no answer within 5 s (lean.tactic_timeout_s)", 5.0)
        if self.env.flaky and tactic == "split 2":
            raise ReplError("worker0: pid 1 exited (code -9) during goal.tactic")
        return await super().apply(state, tactic)


class FlakyEnv(ToyEnv):
    def __init__(self, *, flaky: bool, **kw) -> None:
        super().__init__(**kw)
        self.flaky = flaky
        self.asked: Counter[str] = Counter()

    async def start(self, theorem):
        await super().start(theorem)  # crash_starts: an infrastructure error starting it
        self.open_sessions += 1
        return FlakySession(self, theorem)


def test_infrastructure_errors_and_wall_clock_timeouts_are_never_served_from_the_cache(tmp_path):
    cache = tmp_path / "cache"
    crashing = THEOREMS[0].name
    first = FlakyEnv(flaky=True, crash_starts={crashing: 1})
    block = search(tmp_path / "first", SeededToyPolicy(seed=1), first, cache)["cache"]
    summary = rows(tmp_path / "first", summary=True)
    assert first.asked["step 1"] and first.asked["split 2"]  # both happened
    assert block["not_stored"]["timeout"] == first.asked["step 1"]
    assert {r["theorem"] for r in summary if r["status"] == "error"} >= {crashing}
    # The rerun on a healthy REPL asks Lean again exactly where the first run had no answer.
    second = FlakyEnv(flaky=False)
    again = search(tmp_path / "second", SeededToyPolicy(seed=1), second, cache)["cache"]
    assert again["starts"]["misses"] >= 1  # the crashed start was not stored
    assert second.asked["step 1"] > 0 and second.asked["split 2"] > 0
    assert again["lean"]["hits"] > 0 and "timeout" not in again["not_stored"]
    # And what it got now is the live answer, as a search without the cache gets it.
    search(tmp_path / "live", SeededToyPolicy(seed=1), FlakyEnv(flaky=False), None)
    assert rows(tmp_path / "second") == rows(tmp_path / "live")


def test_unseeded_sampling_is_never_cached(tmp_path):
    cache = tmp_path / "cache"
    policy = SeededToyPolicy(seed=1)
    block = search(tmp_path / "u", policy, ToyEnv(), cache, seed=None)["cache"]
    assert block["written"]["policy"] == 0 and block["policy"]["expansions"]["uncached"] > 0
    assert block["written"]["lean"] > 0


def test_a_backend_without_per_candidate_answers_leaves_the_policy_uncached(tmp_path):
    block = search(tmp_path / "r", RandomToyPolicy(seed=1), ToyEnv(), tmp_path / "cache")["cache"]
    assert not block["policy"]["cached"] and "per-candidate" in block["policy"]["why_not"]
    assert block["written"]["policy"] == 0 and block["written"]["lean"] > 0


@pytest.mark.parametrize(
    ("policy", "cached"),
    [
        ({"backend": "sglang"}, True),  # params.yaml's command: --enable-deterministic-inference
        ({"backend": "sglang", "server_command": ["python", "-m", "sglang.launch_server"]}, False),
    ],
)
def test_an_sglang_server_without_deterministic_inference_is_not_cached(tmp_path, policy, cached):
    gen = SeededToyPolicy(seed=1)
    settings = policy_settings(gen, policy)
    spec_keys = {"policy": settings, "lean": lean_settings(LEAN, "toy")}
    block = search(tmp_path / "o", gen, ToyEnv(), tmp_path / "cache", key=spec_keys)["cache"]
    assert block["policy"]["cached"] is cached
    assert (block["written"]["policy"] > 0) is cached
