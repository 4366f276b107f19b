"""Decision metrics on a tiny tree whose answers are worked out by hand, and the oracle's ceiling.

The countdown theorem ``reach 4`` with a policy that always proposes ``split 2`` (log-prob −0.1),
``step 2`` (−1) and ``step 3`` (−3), one pop a step:

- expansion 0, the root [4]: ``split 2`` → [2, 2], ``step 2`` → [2], ``step 3`` → [1];
- expansion 1, [2, 2] (the best log-prob): an error, a duplicate of [2], an error;
- expansion 2, [2]: an error, ``step 2`` → no goals: the proof (root → [2] → solved).

Decisions (≥ 2 open nodes, one on the proof path [2]): expansion 1 (open [2, 2], [2], [1]) and
expansion 2 (open [2], [1]: error and duplicate edges are never open).  Log-prob ranks [2, 2] then [2] first: top-1 1/2.  The toy value
(the sum of the goals: [2, 2] 4, [2] 2, [1] 1) ranks [1] first both times: 0/2.  Their sum at
energy weight 1 ranks [2] first both times (−3 against −4.1 and −4): 2/2.  The oracle pops [2]
right after the root: the proof at expansion 1, solved within a budget of 2, where the recording
(proof at expansion 2) needs 3.
"""

from __future__ import annotations

import asyncio

import pytest

from burnqed.config import SearchConfig
from burnqed.policy import SamplingParams
from burnqed.replay.decisions import find_decisions, top1_rate
from burnqed.replay.stage import (
    _decision_rows,
    decision_priorities,
    replay_search,
    solved_by_budget,
)
from burnqed.search.recorded import OracleValue, RecordedSource, Recording
from burnqed.search.stage import search_to_dir
from tests.search.fakes import FixedPolicy, ToyEnv, ToyValue, toy_theorem

POLICY = {"split 2": -0.1, "step 2": -1.0, "step 3": -3.0}


@pytest.fixture()
def recording(tmp_path):
    cfg = SearchConfig(max_nodes=10, num_candidates=3, expansions_per_step=1, concurrency=2,
                       energy_weight=1.0)  # fmt: skip
    theorems = [toy_theorem("four", 4), toy_theorem("four_again", 4)]
    asyncio.run(search_to_dir(theorems, FixedPolicy(POLICY), ToyEnv(), cfg, tmp_path / "rec",
                              sampling=SamplingParams(n=3)))  # fmt: skip
    return tmp_path / "rec", cfg, theorems


def test_frontier_top1_of_each_priority_on_the_hand_worked_tree(recording):
    rec_dir, cfg, _ = recording
    rows = _decision_rows(rec_dir)
    priorities = decision_priorities(rows, cfg, ToyValue())
    decisions = find_decisions(rows, max_depth=cfg.max_depth, priorities=priorities)
    got = [(d.theorem, d.expansion, d.open_nodes, d.on_path, d.top1) for d in decisions]
    for name in ("four", "four_again"):  # two theorems, the same tree
        assert [g[1:] for g in got if g[0] == name] == [
            (1, 3, 1, {"logprob": False, "value": False, "sum": True}),
            (2, 2, 1, {"logprob": True, "value": False, "sum": True}),
        ]
    assert top1_rate(decisions, "logprob") == {"rate": 0.5, "se": 0.0, "decisions": 4}
    assert top1_rate(decisions, "value")["rate"] == 0.0
    assert top1_rate(decisions, "sum")["rate"] == 1.0
    # A run with budget 2 makes only the decision at expansion 1.
    assert top1_rate(decisions, "logprob", budget=2) == {"rate": 0.0, "se": 0.0, "decisions": 2}
    assert top1_rate(decisions, "logprob", budget=1)["decisions"] == 0


def test_the_oracle_pops_the_proof_path_first(recording):
    rec_dir, cfg, theorems = recording
    rec = Recording.read(rec_dir)
    run = asyncio.run(replay_search(theorems, RecordedSource(rec), cfg,
                                    sampling=SamplingParams(n=3), seed=0,
                                    value_model=OracleValue(rec)))  # fmt: skip
    assert [r.proof_expansion for r in run.results] == [1, 1]
    assert solved_by_budget(run.results, [1, 2, 3]) == {1: 0, 2: 2, 3: 2}
    logprob = asyncio.run(replay_search(theorems, RecordedSource(rec), cfg,
                                        sampling=SamplingParams(n=3), seed=0))  # fmt: skip
    assert solved_by_budget(logprob.results, [1, 2, 3]) == {1: 0, 2: 0, 3: 2}  # the recording
    assert run.inexact_from == {} and logprob.inexact_from == {}


def test_the_bootstrap_standard_error_varies_with_the_theorems():
    from burnqed.replay.decisions import Decision

    ds = [Decision(f"t{i}", 0, 1, 2, 1, {"p": i % 2 == 0}) for i in range(10)]
    r = top1_rate(ds, "p")
    assert r["rate"] == 0.5 and r["decisions"] == 10
    # Binomial-like: sqrt(0.25 / 10) ≈ 0.158, within bootstrap noise.
    assert 0.12 < r["se"] < 0.2
    assert top1_rate(ds[:1], "p")["se"] is None  # one theorem: no spread to resample
