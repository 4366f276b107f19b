"""The energy weight's block with its depth normalisation fitted (``ebm.fit_depth``, issue 61 P2):
the log-prob term at the grid's best k, marked for the search; without it, the searches' own k."""

from __future__ import annotations

import numpy as np
import pytest

from burnqed.config import EBMConfig, SearchConfig
from burnqed.ebm.fit import fitted_block
from burnqed.search.value import resolve_energy_weight, weighted
from burnqed.value.fit import DEPTH_GRID
from burnqed.value.frontier import ChoiceSet


def _planted(n: int = 1500, seed: int = 3) -> tuple[list[ChoiceSet], dict, dict]:
    """Decisions whose on-path node is drawn by softmax(cum / depth − energy) at mixed depths, each
    open node's energy beside it, and the theorems dealt into 5 folds."""
    rng = np.random.default_rng(seed)
    sets, energies = [], {}
    for d in range(n):
        depth = rng.integers(1, 5, size=4)
        cum = -depth * rng.uniform(0.5, 2.5, size=4)  # log-probs fall with every tactic
        energy = rng.normal(size=4)
        u = cum / depth - energy
        pick = rng.choice(4, p=np.exp(u - u.max()) / np.exp(u - u.max()).sum())
        theorem = f"t{d % 60}"
        nodes = []
        for j in range(4):
            h = f"{d}-{j}"
            energies[theorem, h] = float(energy[j])
            nodes.append({"node_id": j, "state_hash": h, "cum_logprob": float(cum[j]),
                          "depth": int(depth[j]), "on_proof_path": j == pick})  # fmt: skip
        sets.append(ChoiceSet(theorem=theorem, attempt=0, expansion=1, popped=0, open=tuple(nodes)))
    folds = {f"t{i}": i % 5 for i in range(60)}
    return sets, energies, folds


def test_a_fitted_depth_normalisation_is_the_grids_best_and_the_search_takes_it():
    sets, energies, folds = _planted()
    block = fitted_block(sets, energies, folds, depth_normalisation=0.0, scheme="planted",
                         heldout=None, depth_grid=DEPTH_GRID)  # fmt: skip
    assert block["depth_normalisation"] == 1.0 and block["depth_normalisation_fitted"] is True
    assert max(block["depth_grid"], key=block["depth_grid"].get) == "1.0"
    assert set(block["depth_grid"]) == {str(k) for k in DEPTH_GRID}
    w = block["fit"]["weights"]
    assert w["logprob"] == pytest.approx(1.0, abs=0.2) and w["energy"] == pytest.approx(
        -1.0, abs=0.2
    )
    resolved = resolve_energy_weight("fitted", {"energy_weight": block}, logprob_weight=1.0)
    cfg = weighted(SearchConfig(depth_normalisation=0.0), resolved)
    assert cfg.depth_normalisation == 1.0
    assert cfg.energy_weight == pytest.approx(block["priority"]["energy"])


def test_without_the_grid_the_block_keeps_the_searches_depth_normalisation():
    """The default (``ebm.fit_depth: false``): the searches' k, recorded as the number it is (a loop
    variable once overwrote it with the last decision's held-out flag), and not marked fitted, so
    the search keeps its own."""
    sets, energies, folds = _planted(n=600)
    held = {f"t{i}" for i in range(0, 60, 4)}
    block = fitted_block(sets, energies, folds, depth_normalisation=0.5, scheme="planted",
                         heldout=held)  # fmt: skip
    assert block["depth_normalisation"] == 0.5 and type(block["depth_normalisation"]) is float
    assert "depth_normalisation_fitted" not in block and "depth_grid" not in block
    resolved = resolve_energy_weight("fitted", {"energy_weight": block}, logprob_weight=1.0)
    assert weighted(SearchConfig(depth_normalisation=0.5), resolved).depth_normalisation == 0.5


def test_the_setting_defaults_off_and_is_a_boolean():
    assert EBMConfig().fit_depth is False and EBMConfig.from_dict({"fit_depth": True}).fit_depth
