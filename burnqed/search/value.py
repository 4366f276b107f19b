"""The value-model interface search uses, and the priority that combines it with the policy.

A value model maps (proof state, theorem goal) pairs to energies — lower means more provable (SPEC
§4.6).  Search collects the states its expansions produce across all theorems in flight and scores
them in batches of up to ``search.batch_encode_size``; the real model (the goal-conditioned EBM over
policy embeddings) lives in ``burnqed.ebm`` and is loaded with :func:`load_value_model`.  Nothing here
imports anything heavy.

Example::

    >>> import numpy as np
    >>> class LengthValue:                      # a toy value model: long states look harder
    ...     def energies(self, states, goals):
    ...         return np.array([len(s) / 10 for s in states], dtype=np.float32)
    >>> isinstance(LengthValue(), ValueModel)
    True
    >>> priority(-2.0, depth=2, depth_normalisation=1.0, energy=0.5,
    ...          logprob_weight=1.0, energy_weight=2.0)
    -2.0
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np

    from burnqed.policy import TacticGenerator


@runtime_checkable
class ValueModel(Protocol):
    """Batched state scoring; synchronous (search calls it from a worker thread)."""

    def energies(self, states: Sequence[str], goals: Sequence[str]) -> np.ndarray:
        """``(len(states),)`` energies of ``states[i]`` for proving ``goals[i]``; lower = better."""
        ...


def priority(
    cum_logprob: float,
    *,
    depth: int,
    depth_normalisation: float,
    energy: float | None,
    logprob_weight: float,
    energy_weight: float,
) -> float:
    """Frontier key, higher first: ``α · cumlogprob / max(depth, 1)^k − β · energy``.

    ``k = depth_normalisation`` (BFS-Prover's length normalisation: without it deep nodes, whose
    cumulative logprob only falls, are starved); the energy term is dropped without a value model.
    """
    score = cum_logprob
    if depth_normalisation:
        score /= max(depth, 1) ** depth_normalisation
    score *= logprob_weight
    if energy is not None:
        score -= energy_weight * energy
    return score


def load_value_model(path: Path, generator: TacticGenerator) -> ValueModel:
    """The trained EBM at ``path``, embedding states with ``generator`` (``burnqed.ebm``)."""
    try:
        from burnqed.ebm import load_value_model as load_ebm
    except ImportError as e:
        raise RuntimeError(
            f"--ebm {path}: the EBM package (burnqed.ebm.load_value_model) is not available: {e}"
        ) from None
    if not Path(path).exists():
        raise FileNotFoundError(f"--ebm {path}: no such EBM directory")
    return load_ebm(Path(path), generator=generator)
