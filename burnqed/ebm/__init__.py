"""The energy-based value model (SPEC §4.6): policy embeddings → goal-conditioned energy head.

Modules: :mod:`~burnqed.ebm.embeddings` (model digest, append-only embedding cache),
:mod:`~burnqed.ebm.groups` (labelled states, InfoNCE groups, split by theorem),
:mod:`~burnqed.ebm.head` (``GoalConditionedEnergyHead``), :mod:`~burnqed.ebm.train` (InfoNCE training,
health aborts, resume), :mod:`~burnqed.ebm.scorer` (the EBM directory, search's value model),
:mod:`~burnqed.ebm.quality` (embedding-quality metrics and plots), :mod:`~burnqed.ebm.stage`
(``run_embed`` / ``run_train`` / ``run_metrics``), :mod:`~burnqed.ebm.command` (``burnqed ebm``).

Example (what ``burnqed search --ebm DIR`` does through ``burnqed.search.value``)::

    from burnqed.ebm import load_value_model
    value = load_value_model(Path("models/iter_1/ebm"), generator)
    value.energies(states, goals)       # (n,) float32, lower = more provable
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def searches_before(iteration: int) -> list[str]:
    """The search outputs the EBM of ``iteration`` learns from (SPEC §3): every earlier iteration's
    search, plus iteration 0's high-temperature noise search (diverse negatives)."""
    if iteration < 1:
        raise ValueError(
            f"iteration {iteration}: iteration 0 has no EBM (nothing was searched yet)"
        )
    return ["results/iter_0/search_noise"] + [f"results/iter_{j}/search" for j in range(iteration)]


def load_value_model(path: Path, generator: Any) -> Any:
    """The EBM at ``path`` as a :class:`~burnqed.search.value.ValueModel` (imports torch lazily)."""
    from burnqed.ebm.scorer import load_value_model as load

    return load(Path(path), generator)


__all__ = ["load_value_model", "searches_before"]
