"""The value model's effect on a search, from its tree rows; the fitted energy weight's resolution."""

from __future__ import annotations

import pytest

from burnqed.search.value import DEFAULT_WEIGHT, resolve_energy_weight
from burnqed.value.effect import value_effect


def node(i, parent, *, lp, energy, on_path=False, popped=None, state=None):
    return dict(theorem="t", attempt=0, node_id=i, parent_id=parent, state=state or f"s{i}",
                solved=False, duplicate_of=None, depth=0 if parent is None else 1,
                expansion_index=popped, step=popped, on_proof_path=on_path, cum_logprob=lp,
                ebm_energy=energy)  # fmt: skip


def tree(energies):
    """The root expands into three children (log-probs −1, −2, −4); one more pop follows."""
    e1, e2, e3 = energies
    return [
        node(0, None, lp=0.0, energy=None, on_path=True, popped=0),
        node(1, 0, lp=-1.0, energy=e1, popped=1),
        node(2, 0, lp=-2.0, energy=e2, on_path=True),
        node(3, 0, lp=-4.0, energy=e3),
    ]


def effect(rows, weight=1.0, logprob_weight=1.0):
    return value_effect(rows, max_depth=50, depth_normalisation=0.0,
                        logprob_weight=logprob_weight, energy_weight=weight)  # fmt: skip


def test_spans_are_of_the_weighted_energy_and_of_the_logprob_term():
    e = effect(tree([0.0, -0.5, 1.0]), weight=2.0)
    assert e["median_sibling_span"] == {"energy": 3.0, "logprob": 3.0, "ratio": 1.0,
                                        "energy_alone": False, "parents": 1}  # fmt: skip


def test_an_energy_that_ranks_alone_has_an_unbounded_ratio_and_changes_against_log_prob_alone():
    # Log-prob weight 0 (the fit's limit): the priority is −energy; "changed" is judged against
    # the log-prob term alone, which would pop node 1 (−1), not the energy's node 3 (energy −1).
    e = effect(tree([0.0, 0.5, -1.0]), weight=1.0, logprob_weight=0.0)
    assert e["median_sibling_span"]["energy_alone"] and e["median_sibling_span"]["ratio"] is None
    assert e["median_sibling_span"]["logprob"] == 0.0 and e["median_sibling_span"]["energy"] == 1.5
    assert e["pops_changed"]["changed"] == 1
    # Energies that agree with the log-prob's order change nothing.
    assert effect(tree([-1.0, 0.0, 1.0]), logprob_weight=0.0)["pops_changed"]["changed"] == 0


def test_a_pop_is_changed_when_the_energy_reorders_the_top_node():
    # Energy 0 / −2 / 0: node 2 (−2 + 2 = 0) beats node 1 (−1): changed; the pop is a decision.
    e = effect(tree([0.0, -2.0, 0.0]))
    assert e["pops_changed"] == {"pops": 1, "changed": 1, "fraction": 1.0}
    assert e["decisions_changed"]["fraction"] == 1.0
    # A small energy leaves the log-prob's order alone.
    assert effect(tree([0.0, -0.5, 0.0]))["pops_changed"]["changed"] == 0
    # At weight 0 nothing changes.
    assert effect(tree([0.0, -2.0, 0.0]), weight=0.0)["pops_changed"]["changed"] == 0


def test_fitted_weight_comes_from_the_artifact_and_scales_with_the_logprob_weight():
    meta = {"energy_weight": {"priority": {"logprob": 1.0, "energy": 0.4},
                              "fit": {"log_likelihood": -3.0}}}  # fmt: skip
    got = resolve_energy_weight("fitted", meta, logprob_weight=2.5)
    assert got["value"] == pytest.approx(1.0) and got["source"] == "fitted"
    assert got["logprob_weight"] == 2.5
    assert got["fit"]["fit"]["log_likelihood"] == -3.0
    fixed = resolve_energy_weight(7.0, meta, logprob_weight=1.0)
    assert (fixed["value"], fixed["logprob_weight"]) == (7.0, 1.0)
    # The energy alone: the search's log-prob weight is 0, the energy's logprob_weight.
    alone = {"energy_weight": {"priority": {"logprob": 0.0, "energy": 1.0}}}
    got = resolve_energy_weight("fitted", alone, logprob_weight=2.5)
    assert (got["value"], got["logprob_weight"]) == (2.5, 0.0)
    # An artifact from before the log-prob weight was fitted: its ratio.
    older = resolve_energy_weight("fitted", {"energy_weight": {"per_logprob_weight": 0.4}},
                                  logprob_weight=1.0)  # fmt: skip
    assert (older["value"], older["logprob_weight"]) == (0.4, 1.0)
    old = resolve_energy_weight("fitted", {}, logprob_weight=1.0)  # an artifact without a fit
    assert old["value"] == DEFAULT_WEIGHT and old["source"].startswith("default")
