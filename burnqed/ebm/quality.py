"""Embedding-quality metrics: is there anything in the policy's embeddings for an EBM to learn?

Per iteration (``results/iter_{i}/ebm_metrics.json`` + PNGs in ``results/iter_{i}/ebm_plots/``):

- ``centroid_separation`` (the gated number): the distance between the centroid of proof-path
  states and that of off-path states, over the within-class spread (the root mean square of a
  state's distance to its own class centroid, the two classes weighted equally).  It is scale-free,
  so it means the same thing whatever the pooling: ``policy.pooling: last`` L2-normalises every
  embedding (which bounds any raw distance by 2), ``mean`` does not.  The squared distance is
  debiased for sampling (``E d² = Δ² + tr Σ₊/n₊ + tr Σ₋/n₋``; the estimated noise terms are
  subtracted, floored at 0), so a label-free embedding reads ≈ 0 at any number of states; ≈ 1 when
  the centroids lie as far apart as a state lies from its own centroid.  The test that sets its
  go/no-go thresholds (``tests/report/test_gates.py``): healthy synthetic embeddings ≈ 1, the same
  with the label offset cut by 80 % (the reproduced system's 6.40 → 1.33) ≈ 0.2, all near one point
  ≈ 0.
- ``centroid_l2``: the raw centroid distance, kept to compare with the reproduced system's numbers
  (6.40 → 1.33 when a fresh LoRA collapsed its embeddings; mean-pooled, unnormalised) — not
  comparable across poolings, so not gated.
- ``linear_probe``: logistic regression proof-path vs off-path on standardised embeddings, trained and
  measured on theorems split apart; accuracy, balanced accuracy and the majority-class baseline.
- ``sibling_distance``: mean L2 distance between states sharing a parent, and its ratio to the mean
  distance of random pairs (near 0: the model cannot tell the search's alternatives apart).
- ``variance_spectrum``: top explained-variance ratios and the effective rank (exp of the entropy of
  the normalised covariance eigenvalues).
- with a trained EBM: energies of held-out positives vs negatives (histogram), their rank-1 (a tie
  among t candidates counts 1/t) and the tie rate (burnqed.ebm.stage.run_metrics).

Plots: a 2-D PCA coloured by label and by depth, the energy histogram.

Example::

    metrics = embedding_metrics(vectors, data, seed=0, split=split)   # dict, JSON-ready
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from burnqed.ebm.groups import Groups, StateData
from burnqed.split import TheoremSplit

log = logging.getLogger(__name__)

MAX_POINTS = 20000  # states used for PCA, probe and plots (sampled when more)


def _labelled(data: StateData, vectors: Mapping[str, np.ndarray], seed: int):
    """Unique (theorem, state) rows: embedding, label (on a proof path), depth, theorem."""
    pos = data.positives()
    rows: dict[tuple[str, str], int] = {}
    for t, h, d in zip(data.theorem, data.state_hash, data.depth, strict=True):
        if (t, h) not in rows or d < rows[(t, h)]:
            rows[(t, h)] = d
    keys = sorted(rows)
    if len(keys) > MAX_POINTS:
        keys = sorted(random.Random(seed).sample(keys, MAX_POINTS))
    x = np.stack([vectors[h] for _, h in keys]).astype(np.float64)
    y = np.array([h in pos.get(t, ()) for t, h in keys])
    depth = np.array([rows[k] for k in keys])
    theorems = [t for t, _ in keys]
    return x, y, depth, theorems


def _probe(
    x: np.ndarray, y: np.ndarray, train: np.ndarray, seed: int, *, verdicts: bool = False
) -> dict[str, Any]:
    """Class-balanced logistic regression on standardised features (LBFGS, L2 1e-3);
    ``verdicts``: also whether it classified each held-out row right (``correct``, in row order)."""
    if train.sum() == 0 or (~train).sum() == 0 or len(set(y[train])) < 2:
        return {"accuracy": None, "balanced_accuracy": None, "majority_baseline": None}
    mu, sd = x[train].mean(0), x[train].std(0) + 1e-6
    xs = torch.tensor((x - mu) / sd, dtype=torch.float32)
    yt = torch.tensor(y, dtype=torch.float32)
    torch.manual_seed(seed)
    w = torch.zeros(x.shape[1], requires_grad=True)
    b = torch.zeros(1, requires_grad=True)
    tr = torch.from_numpy(train)
    p_pos = float(y[train].mean())
    weight = torch.where(yt[tr] > 0, 0.5 / p_pos, 0.5 / (1 - p_pos))
    opt = torch.optim.LBFGS([w, b], max_iter=200, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        logits = xs[tr] @ w + b
        loss = (
            torch.nn.functional.binary_cross_entropy_with_logits(logits, yt[tr], weight=weight)
            + 1e-3 * w.square().sum()
        )
        loss.backward()
        return loss

    opt.step(closure)
    with torch.no_grad():
        pred = ((xs[~tr] @ w + b) > 0).numpy()
    yt_ho = y[~train]
    recalls = [float((pred[yt_ho == c] == c).mean()) for c in (False, True) if (yt_ho == c).any()]
    out = {
        "accuracy": float((pred == yt_ho).mean()),
        "balanced_accuracy": float(np.mean(recalls)),
        "majority_baseline": float(max(yt_ho.mean(), 1 - yt_ho.mean())),
        "train_states": int(train.sum()),
        "heldout_states": int((~train).sum()),
    }
    if verdicts:
        out["correct"] = [bool(v) for v in pred == yt_ho]
    return out


def _sibling_distance(data: StateData, vectors: Mapping[str, np.ndarray], seed: int) -> dict:
    rng = random.Random(seed)
    by_parent: dict[tuple, list[str]] = {}
    for pk, h in zip(data.parent_key, data.state_hash, strict=True):
        if pk is not None:
            by_parent.setdefault(pk, []).append(h)
    pairs = [
        (a, b) for hs in by_parent.values() for i, a in enumerate(hs) for b in hs[i + 1 :] if a != b
    ]
    if len(pairs) > MAX_POINTS:
        pairs = rng.sample(pairs, MAX_POINTS)
    hashes = list(data.texts)
    rand = [
        (rng.choice(hashes), rng.choice(hashes)) for _ in range(min(MAX_POINTS, 4 * len(hashes)))
    ]

    def mean_dist(ps):
        return (
            float(np.mean([np.linalg.norm(vectors[a] - vectors[b]) for a, b in ps])) if ps else None
        )

    sib, rnd = mean_dist(pairs), mean_dist(rand)
    return {
        "mean": sib,
        "random_pair_mean": rnd,
        "ratio": sib / rnd if sib is not None and rnd else None,
        "pairs": len(pairs),
    }


def linear_probe(
    x: np.ndarray, y: np.ndarray, *, seed: int = 0, verdicts: bool = False
) -> dict[str, Any]:
    """The probe of :func:`embedding_metrics` on rows that already come from held-out theorems
    (joint training's monitor): fitted on a seeded half of them, measured on the other half — the
    same half for the same rows and seed, so two readings judge the same states; ``verdicts``: each
    of those states' right or wrong (``correct``)."""
    train = np.random.default_rng(seed).random(len(y)) < 0.5
    return _probe(x, y, train, seed, verdicts=verdicts)


def centroid_separation(x: np.ndarray, y: np.ndarray) -> tuple[float | None, float | None]:
    """``(centroid_l2, centroid_separation)`` of embeddings ``x`` (N, d) labelled ``y`` (N,) bool.

    The separation (module docstring) is 0.0 when every state is the same point, None when a class
    is empty or each class is a single point.
    """
    if not y.any() or y.all():
        return None, None
    pos, off = x[y], x[~y]
    pos_c, off_c = pos.mean(0), off.mean(0)  # (d,)
    distance = float(np.linalg.norm(pos_c - off_c))
    s_pos = float(np.square(pos - pos_c).sum(1).mean())  # mean squared distance to the centroid
    s_off = float(np.square(off - off_c).sum(1).mean())
    spread = math.sqrt((s_pos + s_off) / 2)
    if spread == 0:
        return distance, (0.0 if distance == 0 else None)
    # E‖μ̂₊ − μ̂₋‖² = Δ² + tr Σ₊/n₊ + tr Σ₋/n₋, and s·n/(n − 1) estimates tr Σ without bias.
    noise = s_pos / max(len(pos) - 1, 1) + s_off / max(len(off) - 1, 1)
    return distance, math.sqrt(max(distance**2 - noise, 0.0)) / spread


def embedding_metrics(
    vectors: Mapping[str, np.ndarray],
    data: StateData,
    *,
    seed: int = 0,
    split: TheoremSplit,
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The metrics (JSON-ready) and the arrays the plots need; the linear probe is trained on the
    ``split``'s training theorems and measured on its held-out ones."""
    x, y, depth, theorems = _labelled(data, vectors, seed)
    centroid, separation = centroid_separation(x, y)
    held = split.held_out(theorems)
    train = np.array([t not in held for t in theorems])
    xc = x - x.mean(0)
    eig = (
        np.clip(np.linalg.eigvalsh(np.cov(xc, rowvar=False)), 0, None)[::-1]
        if len(x) > 1
        else np.ones(1)
    )
    p = eig / eig.sum() if eig.sum() > 0 else eig
    nz = p[p > 0]
    eff_rank = float(math.exp(-(nz * np.log(nz)).sum())) if nz.size else 0.0
    _u, _s, vt = np.linalg.svd(xc, full_matrices=False)
    pca2 = xc @ vt[:2].T if vt.shape[0] >= 2 else np.zeros((len(x), 2))
    metrics = {
        "states": len(x),
        "positives": int(y.sum()),
        "dim": int(x.shape[1]),
        "mean_norm": float(np.linalg.norm(x, axis=1).mean()),
        "centroid_l2": centroid,
        "centroid_separation": separation,
        "linear_probe": _probe(x, y, train, seed),
        "sibling_distance": _sibling_distance(data, vectors, seed),
        "variance_spectrum": {
            "top_explained_variance": [float(v) for v in p[:10]],
            "effective_rank": eff_rank,
        },
    }
    return metrics, {"pca2": pca2, "label": y, "depth": depth}


@torch.no_grad()
def group_energies(head, vectors: Mapping[str, np.ndarray], groups: Groups) -> np.ndarray:
    """``(G, 1 + K)`` energies of ``groups`` (column 0: the positive)."""
    if not len(groups):
        return np.zeros((0, 0), np.float32)
    dev = next(head.parameters()).device
    zs = torch.from_numpy(np.stack([np.stack([vectors[h] for h in g]) for g in groups.states]))
    zg = torch.from_numpy(np.stack([vectors[h] for h in groups.goals])).unsqueeze(1)
    return head.eval()(zs.to(dev), zg.to(dev)).float().cpu().numpy()


def plot(
    arrays: Mapping[str, np.ndarray], energies: np.ndarray | None, out_dir: Path
) -> list[Path]:
    """PNG plots into ``out_dir``: PCA by label, PCA by depth, energy histogram (with an EBM)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    pca, y, depth = arrays["pca2"], arrays["label"], arrays["depth"]
    fig, ax = plt.subplots(figsize=(6, 5))
    ax.scatter(pca[~y, 0], pca[~y, 1], s=4, alpha=0.4, label="off proof path")
    ax.scatter(pca[y, 0], pca[y, 1], s=8, alpha=0.8, label="on proof path")
    ax.set(title="State embeddings (PCA) by label", xlabel="PC 1", ylabel="PC 2")
    ax.legend()
    written.append(out_dir / "pca_by_label.png")
    fig.savefig(written[-1], dpi=100, bbox_inches="tight")
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(6, 5))
    sc = ax.scatter(pca[:, 0], pca[:, 1], c=depth, s=4, cmap="viridis")
    fig.colorbar(sc, label="depth")
    ax.set(title="State embeddings (PCA) by depth", xlabel="PC 1", ylabel="PC 2")
    written.append(out_dir / "pca_by_depth.png")
    fig.savefig(written[-1], dpi=100, bbox_inches="tight")
    plt.close(fig)
    if energies is not None and energies.size:
        fig, ax = plt.subplots(figsize=(6, 4))
        lo, hi = float(energies.min()), float(energies.max())
        if hi <= lo:  # every energy the same (collapsed embeddings): one visible bin around it
            lo, hi = lo - 0.5, hi + 0.5
        bins = np.linspace(lo, hi, 40)
        ax.hist(energies[:, 1:].ravel(), bins=bins, alpha=0.6, density=True, label="negatives")
        ax.hist(energies[:, 0], bins=bins, alpha=0.6, density=True, label="positives")
        ax.set(title="EBM energies, held-out groups (lower = more provable)", xlabel="energy")
        ax.legend()
        written.append(out_dir / "energy_hist.png")
        fig.savefig(written[-1], dpi=100, bbox_inches="tight")
        plt.close(fig)
    return written
