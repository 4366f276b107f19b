"""Centroid separation means the same thing whatever the pooling: scale-free, ≈ 0 without signal at
any sample size, and the same verdict on L2-normalised and unnormalised embeddings."""

from __future__ import annotations

import numpy as np
import pytest

from burnqed.ebm.quality import centroid_separation


def _states(n_pos: int, n_neg: int, *, offset: float, dim: int = 64, seed: int = 0):
    """Raw "hidden states": a large shared component, ± ``offset`` along one direction by class,
    isotropic noise (norm ≈ 1 per state)."""
    rng = np.random.default_rng(seed)
    u = rng.standard_normal(dim)
    u /= np.linalg.norm(u)
    common = 4.0 * rng.standard_normal(dim) / np.sqrt(dim)
    y = np.arange(n_pos + n_neg) < n_pos
    x = common + np.where(y, offset / 2, -offset / 2)[:, None] * u
    return x + rng.standard_normal((len(y), dim)) / np.sqrt(dim), y


def _normalise(x: np.ndarray) -> np.ndarray:  # policy.pooling: last
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_separation_is_scale_free_and_agrees_across_poolings():
    x, y = _states(200, 800, offset=1.0)
    raw_l2, raw = centroid_separation(40.0 * x, y)  # mean-pooled hidden states: large norms
    norm_l2, normed = centroid_separation(_normalise(x), y)
    assert centroid_separation(x, y)[1] == pytest.approx(raw)  # a global scale changes nothing
    assert raw_l2 > 30 and norm_l2 < 0.5  # the raw distance says nothing across poolings
    assert raw == pytest.approx(1.0, abs=0.1) and normed == pytest.approx(raw, rel=0.2)


@pytest.mark.parametrize(("n_pos", "n_neg"), [(10, 40), (100, 400), (1000, 4000)])
def test_separation_is_near_0_without_signal_at_any_sample_size(n_pos, n_neg):
    # Undebiased, the ratio sits at ≈ sqrt(1/n₊ + 1/n₋) (0.35 at 10 + 40 states, above the red
    # line 0.3); debiased, its median over draws is ≈ 0 and every draw stays below the red line.
    seps = []
    for seed in range(10):
        x, y = _states(n_pos, n_neg, offset=0.0, seed=seed)
        seps.append(centroid_separation(_normalise(x), y)[1])
    floor = np.sqrt(1 / n_pos + 1 / n_neg)
    assert np.median(seps) < 0.2 * floor and max(seps) < min(0.3, floor), seps


def test_degenerate_inputs():
    x = np.ones((6, 4))
    y = np.array([True, True, False, False, False, False])
    assert centroid_separation(x, y) == (0.0, 0.0)  # every state the same point: total collapse
    assert centroid_separation(x, np.ones(6, bool)) == (None, None)  # one class only
    two_points = np.where(y[:, None], 1.0, 0.0) * np.ones((6, 4))
    assert centroid_separation(two_points, y) == (2.0, None)  # no spread: undefined
