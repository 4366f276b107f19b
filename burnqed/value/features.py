"""The feature value (issue 30 §6): a control for the EBM on features any Lean state has.

A printed proof state (:func:`burnqed.lean.goals.render_goals`: goals separated by a blank line,
each its hypotheses — ``p q : Prop`` names two — then ``⊢ target``; ``no goals`` when done) gives
three features (:data:`FEATURES`): its number of goals, its number of hypotheses and its length in
the policy's tokens.  Depth is not one of them: it enters through the priority's depth term, as it
does for the EBM.  Nothing here knows what logic the goals are in.

The weights are fitted on the pool searches' decisions like the EBM's energy weight
(:mod:`burnqed.value.fit`: a conditional logit over ``[log-prob term, features]``, the log-prob's
weight ``w_L ≥ 0``, cross-fitted by theorem for the held-out figures; the weights used are the fit
on every decision).  The energy is ``−w · f(state)`` (lower = better); the search adds it at
``energy_weight = logprob_weight / w_L`` (``energy_weight.priority`` of the artifact, resolved like
an EBM's by :func:`burnqed.search.value.resolve_energy_weight`), so its priority ranks nodes as the
fitted utility ``w_L · L + w · f`` does — by the features alone where ``w_L`` is 0.  :class:`FeatureValue` is a
:class:`~burnqed.search.value.ValueModel`: search scores it through the same batch path as the EBM.

Artifact: a directory with ``features.json`` (:data:`META`): the weights, the fit, and the policy
model whose tokenizer counts tokens.

Example::

    >>> state_features("p q : Prop\\nh : p\\n⊢ q ∨ p\\n\\ncase inr\\n⊢ p", lambda s: len(s))[:2]
    (2, 3)
    >>> state_features("no goals", len)
    (0, 0, 8)
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from burnqed.lean.goals import NO_GOALS
from burnqed.split import TheoremSplit
from burnqed.value.fit import (
    fit_depth_normalisation,
    heldout_decisions,
    heldout_log_likelihood,
    priority_weights,
)
from burnqed.value.frontier import logprob_term, top1_gain, top1_hit, top1_rates

log = logging.getLogger(__name__)

META = "features.json"
FEATURES = ("goals", "hypotheses", "tokens")


def state_features(state: str, count_tokens: Callable[[str], int]) -> tuple[int, int, int]:
    """``(goals, hypotheses, tokens)`` of a printed state (module docstring); a hypothesis line's
    names are the words before its first `` : `` (``p q : Prop`` is two); an indented line
    continues the line above it."""
    text = state.strip()
    if text == NO_GOALS or not text:
        return 0, 0, count_tokens(state)
    goals = hyps = 0
    for line in text.splitlines():
        if not line.strip() or line[:1].isspace():
            continue
        if line.startswith("⊢"):
            goals += 1
        elif " : " in line and not line.startswith("case "):
            hyps += len(line.split(" : ", 1)[0].split())
    return goals, hyps, count_tokens(state)


class FeatureValue:
    """:class:`~burnqed.search.value.ValueModel` of the fitted feature weights (module docstring)."""

    def __init__(self, weights: Mapping[str, float], count_tokens: Callable[[str], int], *,
                 meta: Mapping[str, Any] | None = None):  # fmt: skip
        # the features the artifact weighs (a subset of FEATURES: the depth twin weighs goals)
        self.w = np.array([float(weights.get(f, 0.0)) for f in FEATURES])
        self.count_tokens = count_tokens
        self.meta = dict(meta or {})  # features.json: the energy weight among it
        self.scored = 0  # states scored so far (tests)

    def energies(self, states: Sequence[str], goals: Sequence[str]) -> np.ndarray:
        if len(states) != len(goals):
            raise ValueError(f"{len(states)} states but {len(goals)} goals")
        self.scored += len(states)
        f = np.array([state_features(s, self.count_tokens) for s in states], float)
        return (-(f @ self.w) if len(states) else np.zeros(0)).astype(np.float32)


def token_counter(tokenizer: Any) -> Callable[[str], int]:
    """Token count of a text by ``tokenizer`` (a Hugging Face tokenizer), special tokens left out."""
    return lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"])


def fit_features(
    sets: Sequence, count_tokens: Callable[[str], int], *, depth_normalisation: float,
    folds: int, split: TheoremSplit, features: Sequence[str] = FEATURES,
    depth_grid: Sequence[float] | None = None,
) -> dict:  # fmt: skip
    """The feature weights fitted on the decisions ``sets``
    (:func:`burnqed.value.frontier.choice_sets`; their open nodes carry ``state``): the
    ``features.json`` block without the model — weights, fit, held-out log-likelihood and frontier
    top-1 of log-prob alone, the feature value alone and their sum, cross-fitted by theorem (the
    split's folds), the held-out figures on the split's held-out theorems.

    ``features``: which of :data:`FEATURES` the value uses.  ``depth_grid``: fit the priority's
    depth normalisation too — the value of the grid whose conditional logit has the highest
    log-likelihood on every decision (the weights used are fitted at it) — instead of taking the
    searches' own ``depth_normalisation``.  The depth twin (issue 44 §5) is ``features=("goals",)``
    with :data:`burnqed.value.fit.DEPTH_GRID`: a depth term and the number of open goals, the
    fairest control of a value that wins by diving deeper."""
    unknown = [f for f in features if f not in FEATURES]
    if unknown or not features:
        raise ValueError(f"features {list(features)}: each must be one of {list(FEATURES)}")
    theorems = sorted({c.theorem for c in sets})
    if len(theorems) < folds:
        raise ValueError(f"{len(theorems)} theorems with decisions, fewer than {folds} folds")
    cols = [FEATURES.index(f) for f in features]
    cache: dict[str, tuple[int, ...]] = {}

    def feats(state: str) -> tuple[int, ...]:
        if state not in cache:
            every = state_features(state, count_tokens)
            cache[state] = tuple(every[j] for j in cols)
        return cache[state]

    def design(k: float) -> list[np.ndarray]:
        return [np.array([[logprob_term(n["cum_logprob"], n["depth"], k), *feats(n["state"])]
                          for n in c.open], float) for c in sets]  # fmt: skip

    chosen = [np.array(c.on_path) for c in sets]
    names = [c.theorem for c in sets]
    fold_of = split.folds(theorems, folds)
    signs = (1, *(0 for _ in features))
    k, X, cf, grid = fit_depth_normalisation(
        design, chosen, names, fold_of, signs=signs,
        grid=depth_grid if depth_grid is not None else (depth_normalisation,),
    )  # fmt: skip
    w = cf.fit.weights
    keep = heldout_decisions(names, split.held_out(theorems))
    held_sets = [c for c, kept in zip(sets, keep, strict=True) if kept]
    held_names = [c.theorem for c in held_sets]
    held: dict[str, list] = {"logprob": [], "value": [], "sum": []}
    for c, xi, fold, kept in zip(sets, X, cf.decision_fold, keep, strict=True):
        if not kept:
            continue
        wf = cf.heldout_weights[fold]
        held["logprob"].append(top1_hit(c, xi[:, 0]))
        held["value"].append(top1_hit(c, xi[:, 1:] @ wf[1:]))
        held["sum"].append(top1_hit(c, xi @ wf))
    columns = ("logprob", *features)
    rates = top1_rates(held, held_sets, held_names)
    held_ll = heldout_log_likelihood(X, chosen, cf, keep)
    block = {
        # The energy −w · f carries the features' weights: its own weight is 1 per w_L.
        "priority": priority_weights(w[0], float(np.any(w[1:] != 0))),
        "features": list(columns),
        "fit": cf.fit.to_json(columns),
        "heldout_log_likelihood": held_ll,
        "heldout_log_likelihood_per_decision": held_ll / len(held_sets) if held_sets else None,
        "heldout_frontier_top1": rates["all"],
        # where the open nodes share a depth (what a small best-first search mostly faces)
        "heldout_frontier_top1_same_depth": rates["same_depth"],
        # The fitted sum against log-prob alone, paired by decision.
        "heldout_sum_gain": top1_gain(held["sum"], held["logprob"], held_names),
        "folds": folds,
        "decisions": len(sets),
        "theorems": len(theorems),
        # what the held-out figures are measured on: the split's held-out theorems with decisions
        "heldout": {"theorems": len(set(held_names)), "decisions": len(held_sets)},
        "depth_normalisation": k,
        "scheme": "the features of every open node; held-out figures on the split's held-out "
        "theorems, from weights fitted without their fold; the weights used: the fit on all",
    }
    if depth_grid is not None:
        # The search takes this depth normalisation from the artifact
        # (burnqed.search.value.resolve_energy_weight), with the weights fitted at it.
        block["depth_normalisation_fitted"] = True
        block["depth_grid"] = grid
    return {"weights": {f: float(v) for f, v in zip(features, w[1:], strict=True)},
            "features": list(features), "energy_weight": block}  # fmt: skip


def write_feature_value(out: Path, block: Mapping[str, Any], *, model: str | Path) -> dict:
    """``out/features.json``: the fitted ``block`` and the ``model`` whose tokenizer counts."""
    meta = {"kind": "features", "features": list(FEATURES), "model": str(model), **block}
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / META).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return meta


def is_feature_value(path: Path) -> bool:
    return (Path(path) / META).is_file()


def load_feature_value(path: Path, generator: Any = None) -> FeatureValue:
    """The feature value at ``path``; tokens counted by ``generator``'s tokenizer when it has one
    (the in-process backend), else by the tokenizer of the model the weights were fitted with."""
    meta = json.loads((Path(path) / META).read_text(encoding="utf-8"))
    tokenizer = getattr(generator, "tokenizer", None)
    if tokenizer is None:
        from burnqed.policy.lean_load import load_tokenizer

        tokenizer = load_tokenizer(meta["model"])
    log.info("feature value %s: weights %s", path, meta["weights"])
    return FeatureValue(meta["weights"], token_counter(tokenizer), meta=meta)


__all__ = ["FEATURES", "META", "FeatureValue", "fit_features", "is_feature_value",
           "load_feature_value", "state_features", "token_counter", "write_feature_value"]  # fmt: skip
