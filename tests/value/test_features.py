"""The feature value (burnqed.value.features): features of printed states, the fit, the batch path."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from burnqed.config import SearchConfig
from burnqed.search.engine import search_all
from burnqed.search.value import ValueModel, load_value_model
from burnqed.trajectory import TrajectoryWriter, read_nodes
from burnqed.value.features import (
    FEATURES,
    FeatureValue,
    fit_features,
    state_features,
    write_feature_value,
)
from burnqed.value.frontier import ChoiceSet
from tests.search.fakes import RandomToyPolicy, ToyEnv, toy_theorems


def test_goals_and_hypotheses_of_a_printed_state():
    state = "a b c : Prop\nh₁ : a ∧\n  b\nh₂ : c\n⊢ a\n\ncase inr\nx : Nat\n⊢ x = x"
    assert state_features(state, len) == (2, 6, len(state))
    assert state_features("no goals", lambda s: 3) == (0, 0, 3)
    assert state_features("⊢ p → p", len)[:2] == (1, 0)


def _node(i: int, state: str, logprob: float, on_path: bool) -> dict:
    return {"node_id": i, "state": state, "cum_logprob": logprob, "depth": 1,
            "on_proof_path": on_path}  # fmt: skip


def test_the_fit_recovers_a_planted_preference_for_fewer_goals():
    """Synthetic decisions whose on-path node is drawn by softmax(L − 1.5·goals): the fitted
    weights come back near (1, −1.5, 0, 0)."""
    rng = np.random.default_rng(0)
    sets = []
    for d in range(1500):
        goals = rng.integers(1, 5, size=4)
        lp = rng.normal(-2, 1, size=4)
        u = lp - 1.5 * goals
        pick = rng.choice(4, p=np.exp(u - u.max()) / np.exp(u - u.max()).sum())
        states = ["\n\n".join(["h : p\n⊢ q"] * int(g)) for g in goals]
        sets.append(ChoiceSet(theorem=f"t{d % 60}", attempt=0, expansion=1, popped=0, open=tuple(
            _node(j, states[j], float(lp[j]), j == pick) for j in range(4))))  # fmt: skip
    block = fit_features(sets, lambda s: 10, depth_normalisation=0.0, folds=5)
    w = block["energy_weight"]["fit"]["weights"]
    assert w["logprob"] == pytest.approx(1.0, abs=0.15)
    # hypotheses move with goals here (one per goal): their sum is what is identified
    assert w["goals"] + w["hypotheses"] == pytest.approx(-1.5, abs=0.2)
    assert block["energy_weight"]["priority"] == {
        "logprob": 1.0,
        "energy": pytest.approx(1 / w["logprob"]),
    }
    top1 = block["energy_weight"]["heldout_frontier_top1"]
    assert top1["sum"]["rate"] > top1["logprob"]["rate"] + 2 * top1["sum"]["se"]
    # every open node here is at depth 1: the same-depth figures are the figures
    assert block["energy_weight"]["heldout_frontier_top1_same_depth"] == top1
    # the value's energy ranks like the fitted utility: fewer goals, lower energy
    value = FeatureValue(block["weights"], lambda s: 10)
    e = value.energies(["⊢ q", "h : p\n⊢ q\n\nh : p\n⊢ q"], ["g", "g"])
    assert e[0] < e[1]


class _Tokens:
    """A stand-in policy tokenizer: one token per character."""

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": list(range(len(text)))}


def test_the_feature_value_scores_through_the_search_batch_path(tmp_path):
    write_feature_value(tmp_path / "features", {"weights": {f: -0.1 for f in FEATURES},
                        "energy_weight": {"priority": {"logprob": 1.0, "energy": 2.0}}},
                        model="unused")  # fmt: skip
    gen = RandomToyPolicy(seed=0, allow_cheat=False)
    gen.tokenizer = _Tokens()  # what the in-process backend carries
    value = load_value_model(tmp_path / "features", gen)
    assert isinstance(value, ValueModel) and isinstance(value, FeatureValue)
    cfg = SearchConfig(max_nodes=8, num_candidates=4, concurrency=4, batch_encode_size=8)

    async def go():
        with TrajectoryWriter(tmp_path / "t", checkpoint_every=4) as w:
            return await search_all(toy_theorems(4, seed=5), gen, ToyEnv(), cfg, writer=w,
                                    value_model=value)  # fmt: skip

    asyncio.run(go())
    nodes = read_nodes(tmp_path / "t").table.to_pylist()
    scored = [n for n in nodes if n["ebm_energy"] is not None and n["state"] is not None]
    assert scored and value.scored >= len(scored)
    for n in scored:  # the energy recorded is the features' (weights −0.1 each)
        assert n["ebm_energy"] == pytest.approx(0.1 * sum(state_features(n["state"], len)),
                                                rel=1e-5)  # fmt: skip
