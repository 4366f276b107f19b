"""A cache that cannot serve a wrong Lean answer (issue 63).  A Lean answer is keyed on the theorem
and the tactic path from its root, not on the printed state: a scripted stand-in REPL that prints
two different states alike gets two keys (cb4cd23 served one state's answer to the other).  A
disagreement redoes live every attempt that went on from the answer: a planted wrong failure that
one attempt was served and another's re-check refutes is redone in both, and the eval's count is
the live one (cb4cd23 left the first attempt unsolved); a proof Lean rejects whole that went
through a planted wrong step has its path asked again, the step evicted and the attempt redone
(cb4cd23 marked the proof rejected and searched on from the wrong state)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from burnqed.config import LeanConfig, PolicyConfig, SearchConfig
from burnqed.lean.pool import TacticFailure, Verdict
from burnqed.policy import Candidate, SamplingParams, generation_of
from burnqed.search.cache import CachedSource, CacheSpec, lean_settings, policy_settings
from burnqed.search.sources import LiveSource
from burnqed.search.stage import search_to_dir
from burnqed.theorems import Theorem
from tests.replay.test_replay import rows
from tests.search.fakes import ToyEnv, ToySuccess, toy_theorem
from tests.search.test_cache_recheck import SeedChoicePolicy, plant, table_rows

LEAN = LeanConfig(repl_command=("toy",), imports=())

# -- two states Lean prints alike -----------------------------------------------------------------

CAST = Theorem(name="cast", formal_statement="theorem cast (x y : ℕ) (h : x = y) : True := by\n")
PRINTED_ALIKE = "x y : ℕ\nh : x = y\n⊢ ↑x = ↑y"  # over ℤ and over ℝ: the coercion's target hidden


@dataclass(frozen=True)
class CastState:
    sid: int
    text: str
    depth: int
    over: str | None  # what the printed state does not show: the type the casts go to

    @property
    def solved(self) -> bool:
        return self.text == "no goals"


class CastSession:
    """The scripted REPL's session: ``cast over ℤ`` and ``cast over ℝ`` on the root give two
    states printed alike; ``exact_mod_cast h`` closes the one over ℤ and fails on the other."""

    def __init__(self, env: CastEnv) -> None:
        self.env = env
        self.root = CastState(0, "x y : ℕ\nh : x = y\n⊢ True", 0, None)
        self._next = 0

    async def apply(self, state: CastState, tactic: str):
        self.env.asked.append((state.over, tactic))
        self._next += 1
        if state.over is None and tactic in ("cast over ℤ", "cast over ℝ"):
            return ToySuccess(CastState(self._next, PRINTED_ALIKE, 1, tactic[-1]), (), 0.01)
        if state.over == "ℤ" and tactic == "exact_mod_cast h":
            return ToySuccess(CastState(self._next, "no goals", 2, "ℤ"), (), 0.01)
        return TacticFailure("error", f"{tactic}: type mismatch over {state.over}", 0.01)

    async def close(self) -> None:
        pass


class CastEnv:
    def __init__(self) -> None:
        self.asked: list[tuple[str | None, str]] = []

    async def start(self, theorem: Theorem) -> CastSession:
        return CastSession(self)

    async def verify(self, theorem: Theorem, tactics: Sequence[str]) -> Verdict:
        ok = list(tactics) == ["cast over ℤ", "exact_mod_cast h"]
        return Verdict(ok=ok, reasons=() if ok else ("rejected",), file="", axioms=())


def test_two_states_printed_alike_get_two_keys(tmp_path):
    cache, env = tmp_path / "cache", CastEnv()
    settings = lean_settings(LEAN, "cast 1.0")

    async def attempt(via: str):
        source = CachedSource(LiveSource(None, env), cache, policy=None, lean=settings)
        session = await source.start(CAST, 0)
        try:
            cast = await session.apply(session.root, via)
            closed = await session.apply(cast.state, "exact_mod_cast h")
        finally:
            await session.close()
            source.close()
        return cast, closed, source.stats()

    over_int, closed_int, _ = asyncio.run(attempt("cast over ℤ"))
    over_real, closed_real, block = asyncio.run(attempt("cast over ℝ"))
    assert over_int.state.text == over_real.state.text == PRINTED_ALIKE  # the test can tell
    assert closed_int.state.solved
    assert getattr(closed_real, "state", None) is None, "served the ℤ state's answer over ℝ"
    assert ("ℝ", "exact_mod_cast h") in env.asked  # Lean was asked about the state over ℝ
    assert block["lean"]["hits"] == 0 and block["lean"]["misses"] == 2
    keys = {r["key"] for r in table_rows(cache) if r["tactic"] == "exact_mod_cast h"}
    assert len(keys) == 2, "the two states share one key"


# -- a wrong failure served to one attempt, refuted in another ------------------------------------


@dataclass
class StepOne:
    """Proposes ``step 1`` for every candidate, whatever its seed (each still keyed by its own
    seed): every attempt of a theorem asks Lean the same questions along one path."""

    model_id: str = "step-one"
    candidates_independent_of_n = True

    def raw_candidates(self, prompts: Sequence[str], params: SamplingParams, seeds=None):
        return [[Candidate("step 1", -0.1, 2) for _ in ss] for ss in seeds]

    def generate(self, prompts, params, seeds=None):
        return [generation_of(r) for r in self.raw_candidates(prompts, params, seeds)]


TWO_ATTEMPTS = SearchConfig(max_nodes=10, max_depth=20, num_candidates=2, attempts=2,
                            concurrency=4, expansions_per_step=1, max_error_fraction=1.0)  # fmt: skip
THREE = [toy_theorem(f"t{i}", n) for i, n in enumerate((3, 4, 5))]


def search(out: Path, policy, theorems, cfg: SearchConfig, cache: Path | None, *,
           recheck: float = 0.0) -> dict:  # fmt: skip
    spec = None
    if cache is not None:
        spec = CacheSpec(
            cache,
            policy=policy_settings(policy, PolicyConfig(backend="transformers", device="cpu")),
            lean=lean_settings(LEAN, "toy 1.0"),
            recheck=recheck,
            recheck_seed=3,
        )
    return asyncio.run(search_to_dir(theorems, policy, ToyEnv(), cfg, out, cache=spec,
                                     sampling=SamplingParams(n=cfg.num_candidates,
                                                             temperature=1.0), seed=7))  # fmt: skip


def test_a_planted_wrong_failure_is_redone_live_and_the_eval_count_corrected(tmp_path, monkeypatch):
    """Attempt 0 is served the planted failures; attempt 1's re-checks refute them.  The draw is
    pinned (attempt 1 re-checks every hit, attempt 0 none) so the test does not hang on a hash."""
    cache = tmp_path / "cache"
    live = search(tmp_path / "live", StepOne(), THREE, TWO_ATTEMPTS, None)
    assert live["statuses"] == {"proved": 6}  # the test can tell
    search(tmp_path / "fill", StepOne(), THREE, TWO_ATTEMPTS, cache)
    planted = plant(cache, lambda row: {"text": None, "error_kind": "error", "error": "planted"}
                    if row["tactic"] and row["text"] else None)  # fmt: skip
    assert len(planted) == 3 + 4 + 5
    monkeypatch.setattr(CachedSource, "_recheck_drawn",
                        lambda self, key, theorem, attempt: attempt == 1)  # fmt: skip
    cached = search(tmp_path / "cached", StepOne(), THREE, TWO_ATTEMPTS, cache, recheck=0.5)
    assert cached["statuses"] == live["statuses"], "the eval's count kept a refuted failure"
    assert rows(tmp_path / "cached", summary=True) == rows(tmp_path / "live", summary=True)
    assert rows(tmp_path / "cached") == rows(tmp_path / "live")
    block = cached["cache"]
    assert block["rechecks"]["disagreed"] == len(planted)
    assert block["evicted"] == {"recheck": len(planted)}
    assert block["states"]["redone_attempts"] == 6 and block["stale_attempts"] == 0
    again = search(tmp_path / "again", StepOne(), THREE, TWO_ATTEMPTS, cache)  # corrected for good
    assert again["statuses"] == live["statuses"] and again["cache"]["lean"]["misses"] == 0


# -- a proof Lean rejects whole, through a planted wrong success -----------------------------------

ONE_ATTEMPT = SearchConfig(max_nodes=8, max_depth=20, num_candidates=4, concurrency=3,
                           expansions_per_step=1, max_error_fraction=1.0)  # fmt: skip


def test_a_rejected_proof_through_a_cached_wrong_step_is_evicted_and_redone(tmp_path):
    """The root's failing ``bogus`` planted as a proof (``no goals``): Lean rejects the proof
    whole, the path is asked again, the step evicted and the attempt redone live."""
    theorems = [toy_theorem(f"toy{i}", n) for i, n in enumerate((4, 5, 6, 7))]
    cache = tmp_path / "cache"
    search(tmp_path / "live", SeedChoicePolicy(), theorems, ONE_ATTEMPT, None)
    search(tmp_path / "fill", SeedChoicePolicy(), theorems, ONE_ATTEMPT, cache)

    def closes(row: dict) -> dict | None:
        if row["tactic"] == "bogus" and row["path"] == [] and row["text"] is None:
            return {"text": "no goals", "error_kind": None, "error": None}
        return None

    planted = plant(cache, closes)
    assert planted  # the test can tell
    cached = search(tmp_path / "cached", SeedChoicePolicy(), theorems, ONE_ATTEMPT, cache)
    assert rows(tmp_path / "cached") == rows(tmp_path / "live"), "searched on from a wrong step"
    assert rows(tmp_path / "cached", summary=True) == rows(tmp_path / "live", summary=True)
    block = cached["cache"]
    assert block["evicted"] == {"rejected_proof": len(planted)}
    assert block["rejected_proofs"]["refuted"] == len(planted)
    assert block["states"]["redone_attempts"] == len(planted)
    live = json.loads((tmp_path / "live" / "manifest.json").read_text())
    assert cached["statuses"] == live["statuses"]
