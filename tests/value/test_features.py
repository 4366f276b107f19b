"""The feature value (burnqed.value.features): features of printed states, the fit, the batch path."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from burnqed.config import SearchConfig
from burnqed.search.engine import search_all
from burnqed.search.value import ValueModel, load_value_model
from burnqed.split import TheoremSplit
from burnqed.trajectory import TrajectoryWriter, read_nodes
from burnqed.value.features import (
    FEATURES,
    FeatureValue,
    fit_features,
    state_features,
    write_feature_value,
)
from burnqed.value.fit import DEPTH_GRID
from burnqed.value.frontier import ChoiceSet
from tests.search.fakes import RandomToyPolicy, ToyEnv, toy_theorems


def test_goals_and_hypotheses_of_a_printed_state():
    state = "a b c : Prop\nh₁ : a ∧\n  b\nh₂ : c\n⊢ a\n\ncase inr\nx : Nat\n⊢ x = x"
    assert state_features(state, len) == (2, 6, len(state))
    assert state_features("no goals", lambda s: 3) == (0, 0, 3)
    assert state_features("⊢ p → p", len)[:2] == (1, 0)


SPLIT = TheoremSplit(0.25, 0.25, seed=0)


def _node(i: int, state: str, logprob: float, on_path: bool, depth: int = 1) -> dict:
    return {"node_id": i, "state": state, "cum_logprob": logprob, "depth": depth,
            "on_proof_path": on_path}  # fmt: skip


def test_the_depth_twin_fits_its_depth_term_and_the_open_goals():
    """Decisions whose on-path node is drawn by softmax(cum / depth − goals) at mixed depths: the
    depth twin (goals only, the depth normalisation fitted on DEPTH_GRID) chooses k = 1 and a goals
    weight near −1, and the search takes that k from its artifact."""
    from burnqed.search.value import resolve_energy_weight, weighted

    rng = np.random.default_rng(1)
    sets = []
    for d in range(1500):
        goals = rng.integers(1, 4, size=4)
        depth = rng.integers(1, 5, size=4)
        cum = -depth * rng.uniform(0.5, 2.5, size=4)  # log-probs fall with every tactic
        u = cum / depth - 1.0 * goals
        pick = rng.choice(4, p=np.exp(u - u.max()) / np.exp(u - u.max()).sum())
        states = ["\n\n".join(["⊢ q"] * int(g)) for g in goals]
        sets.append(ChoiceSet(theorem=f"t{d % 60}", attempt=0, expansion=1, popped=0, open=tuple(
            _node(j, states[j], float(cum[j]), j == pick, int(depth[j])) for j in range(4))))  # fmt: skip
    block = fit_features(sets, lambda s: 10, depth_normalisation=0.0, folds=5, split=SPLIT,
                         features=("goals",), depth_grid=DEPTH_GRID)  # fmt: skip
    fit = block["energy_weight"]
    assert block["features"] == ["goals"] and fit["features"] == ["logprob", "goals"]
    assert fit["depth_normalisation"] == 1.0 and fit["depth_normalisation_fitted"] is True
    assert max(fit["depth_grid"], key=fit["depth_grid"].get) == "1.0"
    assert fit["fit"]["weights"]["goals"] == pytest.approx(-1.0, abs=0.2)
    resolved = resolve_energy_weight("fitted", {"energy_weight": fit}, logprob_weight=1.0)
    cfg = weighted(SearchConfig(depth_normalisation=0.0), resolved)
    assert cfg.depth_normalisation == 1.0 and cfg.energy_weight == pytest.approx(
        1 / fit["fit"]["weights"]["logprob"]
    )
    # an unknown feature is refused
    with pytest.raises(ValueError, match="each must be one of"):
        fit_features(sets, len, depth_normalisation=0.0, folds=5, split=SPLIT, features=("x",))


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
    block = fit_features(sets, lambda s: 10, depth_normalisation=0.0, folds=5, split=SPLIT)
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
    # the held-out figures are measured on the split's held-out theorems' decisions only
    held = SPLIT.held_out({c.theorem for c in sets})
    assert block["energy_weight"]["heldout"] == {
        "theorems": len(held),
        "decisions": sum(c.theorem in held for c in sets),
    }
    assert top1["logprob"]["decisions"] == block["energy_weight"]["heldout"]["decisions"] < 1500
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
