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

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from burnqed.value.frontier import logprob_term

if TYPE_CHECKING:
    import numpy as np

    from burnqed.config import SearchConfig
    from burnqed.policy import TacticGenerator

log = logging.getLogger(__name__)


@runtime_checkable
class ValueModel(Protocol):
    """Batched state scoring; synchronous (search calls it from a worker thread)."""

    def energies(self, states: Sequence[str], goals: Sequence[str]) -> np.ndarray:
        """``(len(states),)`` energies of ``states[i]`` for proving ``goals[i]``; lower = better."""
        ...


def value_meta(value_model: Any) -> Mapping[str, Any] | None:
    """The artifact metadata a value model carries (``meta``), if any."""
    return getattr(value_model, "meta", None)


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
    score = logprob_weight * logprob_term(cum_logprob, depth, depth_normalisation)
    if energy is not None:
        score -= energy_weight * energy
    return score


FITTED = "fitted"
DEFAULT_WEIGHT = 1.0  # `fitted` with a value model whose artifact holds no fit


def resolve_energy_weight(
    configured: float | str, meta: Mapping[str, Any] | None, *, logprob_weight: float
) -> dict[str, Any]:
    """The weights a search with a value model uses, and where they come from: ``value``, the
    energy's — the configured number, or (``fitted``) ``logprob_weight`` × the fit in the value
    model's artifact ``meta`` (``energy_weight.priority``, :mod:`burnqed.value.fit`) — and
    ``logprob_weight``, the log-prob term's: the configured one, or 0 where the fit lets the
    energy rank alone (it gave the log-prob term weight 0).  An artifact without a fit (a head
    exported from joint training without the pool searches) gets :data:`DEFAULT_WEIGHT`, said so.

    >>> r = resolve_energy_weight("fitted", {"energy_weight": {"priority": {"logprob": 1.0,
    ...     "energy": 0.5}}}, logprob_weight=2.0)
    >>> r["value"], r["logprob_weight"]
    (1.0, 2.0)
    >>> r = resolve_energy_weight("fitted", {"energy_weight": {"priority": {"logprob": 0.0,
    ...     "energy": 1.0}}}, logprob_weight=2.0)
    >>> r["value"], r["logprob_weight"]
    (2.0, 0.0)
    >>> resolve_energy_weight(3.0, None, logprob_weight=1.0)["source"]
    'search.energy_weight'
    """
    if configured != FITTED:
        return {"value": float(configured), "logprob_weight": float(logprob_weight),
                "source": "search.energy_weight", "fit": None}  # fmt: skip
    fit = (meta or {}).get("energy_weight") or {}
    weights = fit.get("priority")
    if weights is None and fit.get("per_logprob_weight") is not None:  # an older artifact
        weights = {"logprob": 1.0, "energy": float(fit["per_logprob_weight"])}
    if weights is None:
        why = fit.get("reason") or "the value model's artifact holds no fitted weight"
        log.warning("search.energy_weight fitted: %s; using %g", why, DEFAULT_WEIGHT)
        return {"value": DEFAULT_WEIGHT, "logprob_weight": float(logprob_weight),
                "source": f"default ({why})", "fit": fit or None}  # fmt: skip
    out = {"value": logprob_weight * float(weights["energy"]),
           "logprob_weight": logprob_weight * float(weights["logprob"]),
           "source": "fitted", "fit": fit}  # fmt: skip
    if fit.get("depth_normalisation_fitted"):
        # The depth twin (burnqed.value.features): its depth term was fitted with its weights.
        out["depth_normalisation"] = float(fit["depth_normalisation"])
    return out


def weighted(cfg: SearchConfig, resolved: Mapping[str, Any]) -> SearchConfig:
    """``cfg`` with the weights :func:`resolve_energy_weight` ``resolved`` (numbers from here on),
    and the depth normalisation where the value model's fit chose it."""
    cfg = dataclasses.replace(cfg, energy_weight=float(resolved["value"]),
                              logprob_weight=float(resolved["logprob_weight"]))  # fmt: skip
    if resolved.get("depth_normalisation") is not None:
        cfg = dataclasses.replace(cfg, depth_normalisation=float(resolved["depth_normalisation"]))
    return cfg


def load_value_model(path: Path, generator: TacticGenerator) -> ValueModel:
    """The value model at ``path``: the feature value when it is one (``features.json``,
    :mod:`burnqed.value.features`: its kind is its artifact's, so ``--ebm`` and the rules take
    either), else the trained EBM, embedding states with ``generator`` (``burnqed.ebm``)."""
    from burnqed.value.features import is_feature_value, load_feature_value

    if is_feature_value(Path(path)):
        return load_feature_value(Path(path), generator)
    try:
        from burnqed.ebm import load_value_model as load_ebm
    except ImportError as e:
        raise RuntimeError(
            f"--ebm {path}: the EBM package (burnqed.ebm.load_value_model) is not available: {e}"
        ) from None
    if not Path(path).exists():
        raise FileNotFoundError(f"--ebm {path}: no such EBM directory")
    return load_ebm(Path(path), generator=generator)
