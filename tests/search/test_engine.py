"""The search engine against fakes: correctness, best-first order, batching, anytime budgets."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from burnqed.config import SearchConfig
from burnqed.search import search_all
from burnqed.search.value import priority
from tests.search.fakes import (
    FixedPolicy,
    RandomToyPolicy,
    ToyEnv,
    ToyValue,
    step,
    toy_theorem,
    toy_theorems,
)


def _run(theorems, policy, env, cfg, **kw):
    return asyncio.run(search_all(theorems, policy, env, cfg, keep_trees=True, **kw))


def _replays(theorem_goal: int, proof) -> bool:
    goals: tuple[int, ...] = (theorem_goal,)
    for t in proof:
        if t == "cheat":
            return False
        out = step(goals, t)
        if isinstance(out, str):
            return False
        goals = out
    return not goals


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    k=st.sampled_from([1, 2, 4]),
    use_value=st.booleans(),
    depth_normalisation=st.sampled_from([0.0, 0.5, 1.0]),
    max_depth=st.integers(2, 12),
    max_nodes=st.integers(1, 40),
)
def test_found_proofs_verify_and_trees_keep_their_invariants(
    seed, k, use_value, depth_normalisation, max_depth, max_nodes
):
    theorems = toy_theorems(6, seed=seed, low=2, high=9)
    cfg = SearchConfig(
        max_nodes=max_nodes,
        max_depth=max_depth,
        num_candidates=6,
        concurrency=3,
        depth_normalisation=depth_normalisation,
        timeout_s=60,
    )
    env = ToyEnv()
    results = _run(
        theorems,
        RandomToyPolicy(seed=seed),
        env,
        dataclasses.replace(cfg, expansions_per_step=k),
        value_model=ToyValue() if use_value else None,
    )
    assert sorted(r.theorem for r in results) == [t.name for t in theorems]
    goals = {t.name: int(t.formal_statement.split("reach ")[1].split()[0]) for t in theorems}
    for r in results:
        r.check(cfg)
        assert r.status in ("proved", "failed")
        if r.status == "proved":
            # The proof replays as a whole file from the statement: no cheat, no goal left.
            assert _replays(goals[r.theorem], r.proof), r.proof
            assert (r.theorem, r.proof, True) in env.verifications
        # Every solved state that verification refused is a failed node, never a proof.
        for n in r.tree.nodes:
            if n.solved and n.status == "failed":
                assert n.error.startswith("verification")
        # The result carries the verifier's verdict and its reasons for each refused proof.
        assert r.rejected_proofs == len(r.rejections)
        refused = [v for v in env.verifications if v[0] == r.theorem and not v[2]]
        assert len(refused) == r.rejected_proofs
    assert env.open_sessions == 0, "every proof session is closed"
    accepted = [v for v in env.verifications if v[2]]
    assert all("cheat" not in tactics for _, tactics, _ in accepted)


def test_a_cheat_is_rejected_and_a_real_proof_is_found():
    """`cheat` closes the goal step by step and is tried first; verification refuses it (the
    reason is kept), and the search goes on to a proof that verifies."""
    thm = toy_theorem("t", 3)
    policy = FixedPolicy({"cheat": -0.1, "step 1": -0.5, "step 3": -2.0})
    cfg = SearchConfig(max_nodes=10, max_depth=5, num_candidates=3, concurrency=1, timeout_s=60)
    env = ToyEnv()
    (r,) = _run([thm], policy, env, cfg)
    r.check(cfg)
    assert r.status == "proved" and r.verified and "cheat" not in r.proof
    assert ("t", ("cheat",), False) in env.verifications
    assert ("t", r.proof, True) in env.verifications
    assert r.rejected_proofs >= 1 and r.rejections[0] == "declaration uses 'sorryAx'"


def test_verified_is_the_verdict_not_the_presence_of_a_proof():
    """A verifier that answers neither yes nor no (ok=None) proves nothing."""

    class Undecided(ToyEnv):
        async def verify(self, theorem, tactics):
            v = await super().verify(theorem, tactics)
            return dataclasses.replace(v, ok=None, reasons=("verifier crashed",))

    cfg = SearchConfig(max_nodes=4, max_depth=5, num_candidates=2, concurrency=1, timeout_s=60)
    (r,) = _run([toy_theorem("t", 1)], FixedPolicy({"step 1": -0.1}), Undecided(), cfg)
    assert r.status == "failed" and not r.verified and r.proof is None
    assert r.rejections and all(x == "verifier crashed" for x in r.rejections)


def _assert_best_first(tree, k: int, max_nodes: int, max_depth: int) -> None:
    """Replay the frontier step by step: each step popped exactly its k best open nodes."""
    expanded = sorted((n for n in tree.nodes if n.expanded), key=lambda n: n.expansion_index)
    steps = [list(g) for _, g in itertools.groupby(expanded, key=lambda n: n.step)]
    done = 0
    for group in steps:
        s = group[0].step
        frontier = [
            n
            for n in tree.nodes
            if n.is_state
            and not n.solved
            and n.depth < max_depth
            and (n.parent_id < 0 or tree.nodes[n.parent_id].step < s)
            and not (n.expanded and n.step < s)
        ]
        best = sorted(frontier, key=lambda n: (-n.priority, n.node_id))
        assert len(group) == min(k, len(frontier), max_nodes - done)
        assert [n.node_id for n in group] == [n.node_id for n in best[: len(group)]]
        done += len(group)


@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("depth_normalisation", [0.0, 1.0])
def test_expansion_order_is_best_first(k, depth_normalisation):
    policy = FixedPolicy(
        {
            "step 1": -0.7,
            "split 2": -0.4,
            "step 2": -1.1,
            "noop": -0.05,
            "bogus": -0.01,
            "step 3": -2.5,
        }
    )
    cfg = SearchConfig(
        max_nodes=30,
        max_depth=8,
        num_candidates=6,
        concurrency=1,
        depth_normalisation=depth_normalisation,
    )
    cfg = dataclasses.replace(cfg, expansions_per_step=k)
    (r,) = _run([toy_theorem("t", 40)], policy, ToyEnv(), cfg)
    r.check(cfg)
    tree = r.tree
    assert tree.expansions == 30  # reach 40 needs more than 30 expansions of these tactics
    for n in tree.nodes[1:]:
        if n.is_state:
            expected = priority(
                n.cum_logprob,
                depth=n.depth,
                depth_normalisation=depth_normalisation,
                energy=None,
                logprob_weight=1.0,
                energy_weight=1.0,
            )
            assert n.priority == pytest.approx(expected)
    _assert_best_first(tree, k, cfg.max_nodes, cfg.max_depth)
    # A fixed policy makes the order non-trivial: not simply breadth-first by node id.
    order = [n.node_id for n in sorted(tree.nodes, key=lambda n: n.expansion_index) if n.expanded]
    assert order != sorted(order)


def test_value_model_reorders_the_frontier():
    policy = FixedPolicy({"step 1": -0.2, "step 3": -3.0})
    cfg = SearchConfig(
        max_nodes=6,
        max_depth=20,
        num_candidates=2,
        concurrency=1,
        energy_weight=2.0,
        expansions_per_step=1,
    )
    (plain,) = _run([toy_theorem("t", 12)], policy, ToyEnv(), cfg)
    (valued,) = _run(
        [toy_theorem("t", 12)], FixedPolicy(policy.logprobs), ToyEnv(), cfg, value_model=ToyValue()
    )
    _assert_best_first(valued.tree, 1, 6, 20)
    # The likelier `step 1` wins alone; energy (sum of goals) makes `step 3` branches win.
    assert plain.proof is None and valued.status == "proved"
    assert all(
        n.ebm_energy is not None
        for n in valued.tree.nodes[1:]
        if n.is_state and not n.solved and n.depth < cfg.max_depth
    )


def test_a_fit_that_gives_the_log_prob_no_weight_lets_the_energy_rank_alone():
    """``search.energy_weight: fitted`` with an artifact whose fit gave the log-prob term weight 0
    (:func:`burnqed.value.fit.priority_weights`): every node's priority is minus its energy at
    ``logprob_weight``, and the search pops in that order."""

    @dataclasses.dataclass
    class FittedAlone(ToyValue):
        meta: dict = dataclasses.field(default_factory=lambda: {
            "energy_weight": {"priority": {"logprob": 0.0, "energy": 1.0}}})  # fmt: skip

    policy = FixedPolicy({"step 1": -0.2, "step 3": -3.0})
    cfg = SearchConfig(max_nodes=6, max_depth=20, num_candidates=2, concurrency=1,
                       logprob_weight=2.0, expansions_per_step=1)  # fmt: skip
    assert cfg.energy_weight == "fitted"
    (r,) = _run([toy_theorem("t", 12)], policy, ToyEnv(), cfg, value_model=FittedAlone())
    states = [n for n in r.tree.nodes[1:] if n.is_state and n.ebm_energy is not None]
    assert states and all(n.priority == pytest.approx(-2.0 * n.ebm_energy) for n in states)
    assert r.status == "proved"  # the energy (sum of goals) leads to `step 3`'s branches
    _assert_best_first(r.tree, 1, 6, 20)


@dataclasses.dataclass
class SlowPolicy(RandomToyPolicy):
    """A generator whose every call takes ``call_s`` (one call at a time, like a GPU)."""

    call_s: float = 0.02

    def generate(self, prompts, params, seeds=None):
        time.sleep(self.call_s)
        return super().generate(prompts, params, seeds)


def test_generation_and_value_scoring_are_batched_across_theorems():
    """Requests that arrive while the generator works go out together in its next call."""
    policy, value = SlowPolicy(seed=3, allow_cheat=False), ToyValue()
    cfg = SearchConfig(
        max_nodes=40, num_candidates=4, concurrency=6, batch_generate_size=4, batch_encode_size=8
    )
    results = _run(
        toy_theorems(24, seed=1, low=10, high=30),
        policy,
        ToyEnv(latency_s=0.001),
        cfg,
        value_model=value,
    )
    assert len(results) == 24
    # Six searches, mostly waiting on the generator: calls of 4 and of the 2 left over.
    assert sum(policy.batch_sizes) / len(policy.batch_sizes) > 2
    assert max(policy.batch_sizes) == 4  # capped at batch_generate_size, and reached
    assert max(value.batch_sizes) > 1 and max(value.batch_sizes) <= 8
    # Every expansion was one prompt in some batch.
    assert sum(policy.batch_sizes) == sum(r.nodes_expanded for r in results)
    assert policy.calls[0].n == 4 and policy.calls[0].temperature == cfg.temperature_with_ebm


def test_an_idle_generator_never_waits_for_a_batch_to_fill():
    """Continuous batching: a request that finds the generator idle is sent at once, alone if need
    be, even while other searches are busy in Lean and could add to the batch later."""

    class LateEnv(ToyEnv):
        """Theorems `slow…` take 0.5 s to start; the others start at once."""

        async def start(self, theorem):
            if theorem.name.startswith("slow"):
                await asyncio.sleep(0.5)
            return await super().start(theorem)

    policy = RandomToyPolicy(seed=3, allow_cheat=False)
    cfg = SearchConfig(max_nodes=1, num_candidates=2, concurrency=3, batch_generate_size=32)
    t0 = time.perf_counter()
    sent: list[float] = []
    generate = policy.generate

    def timed(prompts, params, seeds=None):
        sent.append(time.perf_counter() - t0)
        return generate(prompts, params, seeds)

    policy.generate = timed
    # The slow searches begin first, so they are live when `fast` asks the generator.
    theorems = [toy_theorem("slow1", 5), toy_theorem("slow2", 5), toy_theorem("fast", 5)]
    results = _run(theorems, policy, LateEnv(), cfg)
    assert [r.nodes_expanded for r in results] == [1, 1, 1]
    # `fast` was sent alone at once, not held for the two searches that could still join it.
    assert policy.batch_sizes[0] == 1 and sent[0] < 0.25
    assert sum(policy.batch_sizes) == 3 and all(t >= 0.5 for t in sent[1:])


@pytest.mark.parametrize("k", [1, 3])
def test_solve_rate_at_every_budget_matches_separate_runs(k):
    theorems = toy_theorems(16, seed=7, low=6, high=22)
    big = SearchConfig(
        max_nodes=60, max_depth=30, num_candidates=4, concurrency=5, expansions_per_step=k
    )
    full = _run(theorems, RandomToyPolicy(seed=11), ToyEnv(), big)
    by_name = {r.theorem: r for r in full}
    rates = []
    for b in (1, 4, 9, 17, 33):
        cfg = dataclasses.replace(big, max_nodes=b)
        small = _run(theorems, RandomToyPolicy(seed=11), ToyEnv(), cfg)
        for r in small:
            assert by_name[r.theorem].solved_within(b) == (r.status == "proved"), (r.theorem, b)
            if r.status == "proved":
                assert r.proof == by_name[r.theorem].proof
        rates.append(sum(r.status == "proved" for r in small))
    assert rates == sorted(rates) and rates[0] < rates[-1], rates  # budgets matter here


def test_timeout_and_start_error_are_recorded():
    bad = dataclasses.replace(
        toy_theorem("bad", 3), formal_statement="theorem bad : nonsense := by\n"
    )
    cfg = SearchConfig(
        max_nodes=10_000, max_depth=50, num_candidates=4, concurrency=2, timeout_s=0.3
    )
    results = _run(
        [toy_theorem("slow", 10_000), bad],
        RandomToyPolicy(seed=1, allow_cheat=False),
        ToyEnv(latency_s=0.03),  # slow enough that the clock ends "slow" before its frontier
        cfg,
    )
    by = {r.theorem: r for r in results}
    assert by["slow"].status == "timeout" and "timeout" in by["slow"].reasons[0]
    assert 0 < by["slow"].nodes_expanded < 10_000
    by["slow"].check(cfg)  # the interrupted step was rolled back
    # Lean rejected the statement: a result (unsolved, listed), not an infrastructure error.
    assert by["bad"].status == "statement_error" and by["bad"].ended_by == "statement"
    assert "statement" in by["bad"].reasons[0]
    assert by["bad"].nodes_total == 0


def test_max_depth_bounds_the_tree():
    cfg = SearchConfig(max_nodes=200, max_depth=3, num_candidates=4, concurrency=1)
    (r,) = _run(
        [toy_theorem("deep", 50)], RandomToyPolicy(seed=2, allow_cheat=False), ToyEnv(), cfg
    )
    assert r.status == "failed" and "frontier empty" in r.reasons[0]
    assert max(n.depth for n in r.tree.nodes) == 3
    assert all(not n.expanded for n in r.tree.nodes if n.depth == 3)
    r.check(cfg)
