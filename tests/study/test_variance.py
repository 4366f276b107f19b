"""Where an effect's spread across seeds comes from (burnqed.study.variance, issue 45 §1)."""

from __future__ import annotations

import numpy as np
import pytest

from burnqed.study.variance import decompose


def _simulate(rng, *, seeds: int, reruns: int, tau: float, flip: float, n: int = 400) -> list:
    """Runs of ``seeds`` seeds: each seed's models fix a per-theorem outcome (gained, lost or the
    same; the net effect around 0.03 with training spread ``tau``), and each run of its evals
    re-samples the outcome of a share ``flip`` of the theorems (search sampling)."""
    runs = []
    for s in range(seeds):
        effect = 0.03 + tau * rng.standard_normal()
        pg = min(max(0.15 + effect / 2, 0.0), 0.3)
        base = rng.choice([1, -1, 0], size=n, p=[pg, 0.3 - pg, 0.7])
        for r in range(1 + reruns):
            x = base.copy()
            redo = rng.random(n) < flip
            x[redo] = rng.choice([1, -1, 0], size=int(redo.sum()), p=[pg, 0.3 - pg, 0.7])
            runs.append({"seed": s, "search_seed": s if r == 0 else 1000 + r,
                         "gained": int((x == 1).sum()), "lost": int((x == -1).sum()),
                         "theorems": n})  # fmt: skip
    return runs


def test_the_decomposition_finds_the_source_that_was_planted():
    """Planted training spread shows up as 'training and data'; outcomes fixed by the models and
    theorems (no eval-sampling noise) leave the within-seed variance to 'benchmark theorems';
    evals that re-sample most outcomes put it in 'search sampling'."""
    rng = np.random.default_rng(0)
    train = decompose(_simulate(rng, seeds=40, reruns=1, tau=0.05, flip=0.0))
    assert train["shares"]["training and data"] > 0.6
    assert train["components"]["search sampling"] == 0.0  # reruns equal the main run
    bench = decompose(_simulate(rng, seeds=40, reruns=1, tau=0.0, flip=0.0))
    assert bench["shares"]["benchmark theorems"] > 0.6
    search = decompose(_simulate(rng, seeds=40, reruns=2, tau=0.0, flip=0.9))
    assert search["shares"]["search sampling"] > 0.6
    # the components of the main runs add up to the between-seed variance when training's is > 0
    c = train["components"]
    assert train["between_seed_variance"] == pytest.approx(
        c["training and data"] + train["within_seed_variance"]
    )


def test_without_reruns_the_search_share_is_unknown_and_one_seed_is_refused():
    runs = [{"seed": s, "search_seed": s, "gained": 10 + s, "lost": 5, "theorems": 400}
            for s in range(3)]  # fmt: skip
    d = decompose(runs)
    assert d["components"]["search sampling"] is None and d["search_reruns"] == 0
    assert d["shares"]["search sampling"] is None
    with pytest.raises(ValueError, match="at least two"):
        decompose(runs[:1])
