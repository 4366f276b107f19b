"""Frontier top-1 split by whether a decision's open nodes share a depth."""

from __future__ import annotations

from burnqed.value.frontier import ChoiceSet, same_depth, top1_rates


def choice(theorem: str, depths: list[int], on_path: int) -> ChoiceSet:
    return ChoiceSet(theorem=theorem, attempt=0, expansion=1, popped=0, open=tuple(
        {"node_id": j, "depth": d, "on_proof_path": j == on_path} for j, d in enumerate(depths)))  # fmt: skip


def test_same_depth_rates_keep_only_the_decisions_whose_open_nodes_share_a_depth():
    sets = [choice("a", [1, 1], 0), choice("a", [1, 2], 1), choice("b", [2, 2, 2], 2),
            choice("c", [1, 3], 0)]  # fmt: skip
    assert [same_depth(c) for c in sets] == [True, False, True, False]
    hits = {"logprob": [True, False, False, True], "energy": [False, True, True, False]}
    rates = top1_rates(hits, sets, [c.theorem for c in sets])
    assert rates["all"]["logprob"]["rate"] == 0.5 and rates["all"]["logprob"]["decisions"] == 4
    assert (
        rates["same_depth"]["logprob"]["rate"],
        rates["same_depth"]["logprob"]["decisions"],
    ) == (0.5, 2)
    assert rates["same_depth"]["energy"]["rate"] == 0.5
    # the same-depth decisions are the first and third: log-prob got the first, energy the third
    only = top1_rates({"x": [True, True, False, True]}, sets, [c.theorem for c in sets])
    assert only["same_depth"]["x"]["rate"] == 0.5 and only["all"]["x"]["rate"] == 0.75
