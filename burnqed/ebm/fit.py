"""The energy's weight against the log-prob, fitted on the pool searches' decisions with
out-of-fold energies (issue 30 §3; ``search.energy_weight: fitted``).

The pool searches' trees give decisions (:func:`burnqed.value.frontier.choice_sets`).  Theorems
are dealt into ``ebm.fit_folds`` folds (:meth:`burnqed.split.TheoremSplit.folds`); per fold a head
is trained exactly as the EBM is (same groups, config and seed) but without that fold's theorems,
and scores that fold's open nodes — so no state's energy comes from a head that trained on its
theorem.  Each open node's features are the priority's log-prob term (``cum_logprob /
max(depth, 1)^k`` with the pool search's own ``depth_normalisation``, or with ``ebm.fit_depth``
the :data:`burnqed.value.fit.DEPTH_GRID` value the fit prefers, which the search then uses as the
depth twin's) and that energy; the
conditional logit (:func:`burnqed.value.fit.cross_fit`, within the weights a priority can
express: log-prob ≥ 0, energy ≤ 0) gives weights, cross-fitted by theorem too, and the search's
two weights per unit of ``logprob_weight`` (:func:`burnqed.value.fit.priority_weights`: the
energy's relative to the log-prob's, or the energy alone where the fit gives the log-prob weight
0).  The EBM's ``ebm.json`` keeps them under ``energy_weight`` (``priority``) with the fit's
log-likelihood (in sample and held out) and the out-of-fold frontier top-1 of log-prob alone,
energy alone and the fitted sum.  The held-out figures are measured on the decisions of the run's
held-out theorems only (:mod:`burnqed.split`: SFT's validation and test theorems), so neither the
head and weight that score a held-out decision nor the policy that embeds its states trained on its
theorem.

Example::

    block = fit_energy_weight(vectors, data, groups, cfg, dirs=dirs, work=Path("ebm.partial/folds"))
    block["priority"], block["heldout_frontier_top1"]["sum"]
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from burnqed.config import EBMConfig
from burnqed.split import TheoremSplit
from burnqed.trajectory import MANIFEST, read_nodes
from burnqed.value.fit import (
    DEPTH_GRID,
    fit_depth_normalisation,
    heldout_decisions,
    heldout_log_likelihood,
    priority_weights,
)
from burnqed.value.frontier import choice_sets, logprob_term, top1_gain, top1_hit, top1_rates

log = logging.getLogger(__name__)

FEATURES = ("logprob", "energy")
SIGNS = (1, -1)  # a priority α · L − β · E with α, β ≥ 0
_COLUMNS = ["theorem", "attempt", "node_id", "parent_id", "state", "state_hash", "solved",
            "duplicate_of", "depth", "expansion_index", "step", "on_proof_path", "cum_logprob"]  # fmt: skip


def _search_setting(d: Path, *keys: str) -> Any:
    """The value at ``keys`` of the manifest of a trajectory directory (or of its parent, for a
    shard): ``"config", "max_depth"`` the search config's, ``"order"`` the manifest's own; None
    when neither has it."""
    for m in (d / MANIFEST, d.parent / MANIFEST):
        if m.is_file():
            v: Any = json.loads(m.read_text(encoding="utf-8"))
            for key in keys:
                v = v.get(key) if isinstance(v, dict) else None
            if v is not None:
                return v
    return None


RANDOM_ORDER = "random-order searches"
EVERY_SEARCH = "every pool search"


def pool_decisions(dirs: Sequence[Path], theorems: set[str]) -> tuple[list, dict]:
    """The choice sets of the searches in ``dirs`` over ``theorems`` (the decontaminated ones),
    and the search settings they were made with (``depth_normalisation``; ``decisions_from``;
    ``decisions_temperature``, the sampling temperatures of the searches used).

    Where some of the searches popped their frontier in a seeded random order (the noise search,
    ``search.noise_order: random``; manifest ``order``), only the decisions of those are used
    (``decisions_from`` :data:`RANDOM_ORDER`, else :data:`EVERY_SEARCH`).  A search that pops by
    log-prob finds the proof paths log-prob leads to: wherever it popped an on-path node, log-prob
    ranked one first by construction, so on its decisions any other priority can only tie or lose
    (docs/value-model.md measured it: a value that wins live lost there).  A random order favours
    no priority, so a weight fitted on its decisions, and a gain judged on them, are not tilted
    toward the log-prob."""
    random_dirs = [d for d in dirs if _search_setting(d, "order") == "random"]
    if random_dirs:
        dirs = random_dirs
    sets, k, temperatures = [], set(), set()
    for src, d in enumerate(dirs):
        rows = [
            {**r, "attempt": (src, r["attempt"])}  # the same theorem in two searches: two trees
            for r in read_nodes(d).table.select(_COLUMNS).to_pylist()
            if r["theorem"] in theorems
        ]
        depth = _search_setting(d, "config", "max_depth")
        if (t := _search_setting(d, "sampling", "temperature")) is not None:
            temperatures.add(float(t))
        if (normalisation := _search_setting(d, "config", "depth_normalisation")) is not None:
            k.add(normalisation)
        sets.extend(choice_sets(rows, max_depth=int(depth) if depth else 1 << 30))
    if len(k) > 1:
        raise ValueError(f"the pool searches used different depth_normalisation values: {k}")
    return sets, {"depth_normalisation": float(next(iter(k), 0.0)),
                  "decisions_from": RANDOM_ORDER if random_dirs else EVERY_SEARCH,
                  "decisions_temperature": sorted(temperatures)}  # fmt: skip


def score_states(
    head: Any, vectors: Mapping[str, np.ndarray], data: Any, need: set[tuple[str, str]]
) -> dict[tuple[str, str], float]:
    """``head``'s energy of each (theorem, state hash) in ``need``, against the theorem's goal."""
    head = head.eval()
    dev = next(head.parameters()).device
    order = sorted(need)
    out: dict[tuple[str, str], float] = {}
    with torch.no_grad():
        for i in range(0, len(order), 512):
            chunk = order[i : i + 512]
            zs = torch.from_numpy(np.stack([vectors[h] for _, h in chunk])).float().to(dev)
            zg = torch.from_numpy(np.stack([vectors[data.goal[t]] for t, _ in chunk]))
            es = head(zs, zg.float().to(dev)).float().cpu().numpy()
            out.update(zip(chunk, es.tolist(), strict=True))
    return out


def fit_energy_weight(
    vectors: Mapping[str, np.ndarray],
    data: Any,
    groups: Any,
    cfg: EBMConfig,
    *,
    dirs: Sequence[Path],
    work: Path,
    split: TheoremSplit,
    device: str = "auto",
) -> dict:
    """The ``energy_weight`` block of ``ebm.json`` (module docstring); fold heads are trained in
    ``work`` (removed after)."""
    from burnqed.ebm.train import train_head

    sets, settings = pool_decisions(dirs, set(data.goal))
    theorems = sorted({c.theorem for c in sets})
    if len(theorems) < cfg.fit_folds:
        return _no_fit(sets, theorems, f"fewer theorems with decisions than ebm.fit_folds "
                       f"({cfg.fit_folds})", settings)  # fmt: skip
    folds = split.folds(theorems, cfg.fit_folds)
    k = settings["depth_normalisation"]
    energies: dict[tuple, float] = {}  # (theorem, state hash) → out-of-fold energy
    for f in range(cfg.fit_folds):
        in_fold = np.array([folds.get(t, -1) == f for t in groups.theorem])
        if in_fold.all():
            raise ValueError(f"fold {f} holds every group's theorem: nothing to train its head on")
        fold_groups = replace(groups, heldout=in_fold)  # the fold: measured, never trained on
        r = train_head(vectors, fold_groups, cfg, work_dir=work / f"fold_{f}", seed=split.seed,
                       device=device)  # fmt: skip
        need = {(c.theorem, n["state_hash"]) for c in sets if folds[c.theorem] == f
                for n in c.open}  # fmt: skip
        energies.update(score_states(r.head, vectors, data, need))
    shutil.rmtree(work, ignore_errors=True)
    block = fitted_block(
        sets, energies, folds, depth_normalisation=k, heldout=split.held_out(theorems),
        depth_grid=DEPTH_GRID if cfg.fit_depth else None,
        scheme="energies of each fold of theorems from a head trained without them; held-out "
        "figures on the split's held-out theorems, from weights fitted without their fold; the "
        "weight used: the fit on all",
    )  # fmt: skip
    return {**block, **decisions_source(settings)}


def decisions_source(settings: Mapping[str, Any]) -> dict:
    """Where the decisions came from, for an ``energy_weight`` block: the kind of search and its
    sampling temperature.  The temperature matters: a proof found at a high temperature takes
    tactics the policy rates unlikely, so on its decisions the log-prob ranks the on-path node
    first less often than under the eval's sampling (docs/value-model.md measured it)."""
    return {k: settings[k] for k in ("decisions_from", "decisions_temperature")}


def fitted_block(
    sets: Sequence, energies: Mapping[tuple, float], folds: Mapping[str, int], *,
    depth_normalisation: float, scheme: str, heldout: set[str] | None,
    depth_grid: Sequence[float] | None = None,
) -> dict:  # fmt: skip
    """The ``energy_weight`` block from decisions ``sets`` and each open node's energy
    (``energies[theorem, state hash]``, scored by a head that never trained on that theorem): the
    conditional logit on every decision (the weight used) and cross-fitted by ``folds`` (the
    held-out log-likelihood and frontier top-1, on the decisions of the ``heldout`` theorems;
    None: on all).  The log-prob term is taken at the searches' ``depth_normalisation``, or
    (``depth_grid``, ``ebm.fit_depth``) at the grid's value whose fit has the highest
    log-likelihood, which the block then marks for the search to use
    (``depth_normalisation_fitted``, as the depth twin's)."""

    def design(k: float) -> list[np.ndarray]:
        return [np.array([[logprob_term(n["cum_logprob"], n["depth"], k),
                           energies[c.theorem, n["state_hash"]]] for n in c.open])
                for c in sets]  # fmt: skip

    chosen = [np.array(c.on_path) for c in sets]
    names = [c.theorem for c in sets]
    k, X, cf, grid = fit_depth_normalisation(
        design, chosen, names, dict(folds), signs=SIGNS,
        grid=depth_grid if depth_grid is not None else (depth_normalisation,),
    )  # fmt: skip
    weights = priority_weights(cf.fit.weights[0], -cf.fit.weights[1])
    per_fold = [priority_weights(w[0], -w[1]) for w in cf.heldout_weights]
    keep = heldout_decisions(names, heldout)
    held_sets = [c for c, kept in zip(sets, keep, strict=True) if kept]
    held_names = [c.theorem for c in held_sets]
    held = {"logprob": [], "energy": [], "sum": []}
    for c, xi, fold, kept in zip(sets, X, cf.decision_fold, keep, strict=True):
        if not kept:
            continue
        w = per_fold[fold]
        held["logprob"].append(top1_hit(c, xi[:, 0]))
        held["energy"].append(top1_hit(c, -xi[:, 1]))
        held["sum"].append(top1_hit(c, w["logprob"] * xi[:, 0] - w["energy"] * xi[:, 1]))
    rates = top1_rates(held, held_sets, held_names)
    held_ll = heldout_log_likelihood(X, chosen, cf, keep)
    block = {
        # The priority's weights per unit of search.logprob_weight (log-prob term, energy).
        "priority": weights,
        "features": list(FEATURES),
        "fit": cf.fit.to_json(FEATURES),
        "heldout_log_likelihood": held_ll,
        "heldout_log_likelihood_per_decision": held_ll / len(held_sets) if held_sets else None,
        "heldout_frontier_top1": rates["all"],
        # where the open nodes share a depth (what a small best-first search mostly faces)
        "heldout_frontier_top1_same_depth": rates["same_depth"],
        # The fitted sum against log-prob alone, paired by decision (SE of the difference).
        "heldout_sum_gain": top1_gain(held["sum"], held["logprob"], held_names),
        "folds": max(folds.values()) + 1,
        "decisions": len(sets),
        "theorems": len(set(names)),
        # what the held-out figures are measured on: the split's held-out theorems with decisions
        "heldout": {"theorems": len(set(held_names)), "decisions": len(held_sets)},
        "depth_normalisation": k,
        "scheme": scheme,
    }
    if depth_grid is not None:
        # The search takes this depth normalisation from the artifact, with the weights fitted at
        # it (burnqed.search.value.resolve_energy_weight).
        block["depth_normalisation_fitted"] = True
        block["depth_grid"] = grid
    log.info(
        "priority weights %s per unit of logprob_weight (%d decisions, %d theorems); held-out "
        "frontier top-1: log-prob %.3f, energy %.3f, fitted sum %.3f",
        weights, len(sets), block["theorems"], *(block["heldout_frontier_top1"][n]["rate"]
                                               for n in ("logprob", "energy", "sum")),
    )  # fmt: skip
    return block


def _no_fit(sets: Sequence, theorems: Sequence[str], why: str, settings: Mapping) -> dict:
    log.warning("energy weight: %s: no fit", why)
    return {"priority": None, "decisions": len(sets), "theorems": len(theorems), "reason": why,
            **decisions_source(settings)}  # fmt: skip


def fit_heldout_energy_weight(
    head: Any, vectors: Mapping[str, np.ndarray], data: Any, cfg: EBMConfig, *,
    dirs: Sequence[Path], heldout: set[str], split: TheoremSplit,
) -> dict:  # fmt: skip
    """The ``energy_weight`` block of a head that cannot be re-trained per fold (the joint head:
    one joint training per fold would be the whole adapter again): only the decisions of
    ``heldout`` theorems — those the head never trained on — are scored by ``head``; the weight is
    the conditional logit on them, its held-out figures cross-fitted by theorem among them."""
    sets, settings = pool_decisions(dirs, set(data.goal) & set(heldout))
    theorems = sorted({c.theorem for c in sets})
    if len(theorems) < cfg.fit_folds:
        return _no_fit(sets, theorems, f"{len(theorems)} held-out theorems with decisions, "
                       f"fewer than ebm.fit_folds ({cfg.fit_folds})", settings)  # fmt: skip
    energies = score_states(head, vectors, data, {(c.theorem, n["state_hash"]) for c in sets
                                                  for n in c.open})  # fmt: skip
    block = fitted_block(
        sets, energies, split.folds(theorems, cfg.fit_folds), heldout=None,
        depth_normalisation=settings["depth_normalisation"],
        depth_grid=DEPTH_GRID if cfg.fit_depth else None,
        scheme="energies by the exported head, only on theorems it never trained on (held out of "
        "its training and of its warm start's); held-out figures from weights fitted without "
        "each fold of those theorems; the weight used: the fit on all of them",
    )  # fmt: skip
    return {**block, "heldout_theorems": theorems, **decisions_source(settings)}


__all__ = ["FEATURES", "SIGNS", "decisions_source", "fit_energy_weight", "fit_heldout_energy_weight",
           "fitted_block", "pool_decisions"]  # fmt: skip
