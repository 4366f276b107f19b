"""The conditional-logit fit recovers known weights from synthetic decisions; cross-fitting never
judges a decision with weights fitted on its theorem; a fit within a priority's bounds is the
best such weights; the priority's weights are the fitted weights' ratio, or the energy alone."""

from __future__ import annotations

import numpy as np
import pytest

from burnqed.split import TheoremSplit
from burnqed.value.fit import (
    cross_fit,
    fit_conditional_logit,
    log_likelihoods,
    priority_weights,
)


def synthetic(w: np.ndarray, *, decisions: int = 3000, seed: int = 0):
    """Decisions of 2–8 open nodes with N(0, 1) features; the chosen node is drawn from the
    softmax of ``x · w`` (the model the fit assumes); a tenth of them also mark a second node on
    the path (a duplicate of it: the same features)."""
    rng = np.random.default_rng(seed)
    X, chosen, theorems = [], [], []
    for i in range(decisions):
        n = int(rng.integers(2, 9))
        x = rng.standard_normal((n, len(w)))
        p = np.exp(x @ w - (x @ w).max())
        j = rng.choice(n, p=p / p.sum())
        c = np.zeros(n, bool)
        c[j] = True
        if i % 10 == 0:
            x = np.vstack([x, x[j]])
            c = np.append(c, True)
        X.append(x)
        chosen.append(c)
        theorems.append(f"t{i // 10}")
    return X, chosen, theorems


def test_the_fit_recovers_known_weights():
    w = np.array([1.5, -0.8, 0.3])
    X, chosen, _ = synthetic(w)
    fit = fit_conditional_logit(X, chosen)
    np.testing.assert_allclose(fit.weights, w, atol=0.12)
    assert fit.decisions == len(X)
    # The maximum: the true and zero weights explain the decisions less well.
    assert fit.log_likelihood >= log_likelihoods(X, chosen, w).sum()
    assert fit.log_likelihood > log_likelihoods(X, chosen, np.zeros(3)).sum() + 500


def test_an_uninformative_feature_gets_no_weight():
    X, chosen, _ = synthetic(np.array([1.0, 0.0]))
    assert abs(fit_conditional_logit(X, chosen).weights[1]) < 0.1


def test_cross_fitting_judges_each_fold_with_weights_fitted_without_its_theorems():
    X, chosen, theorems = synthetic(np.array([1.0, -1.0]), decisions=1000)
    folds = TheoremSplit(0.1, 0.1, seed=0).folds(theorems, 4)
    assert sorted(set(folds.values())) == [0, 1, 2, 3]
    cf = cross_fit(X, chosen, theorems, folds)
    expect = 0.0
    for f, w in enumerate(cf.heldout_weights):
        out = [i for i, t in enumerate(theorems) if folds[t] != f]
        refit = fit_conditional_logit([X[i] for i in out], [chosen[i] for i in out]).weights
        np.testing.assert_allclose(w, refit)
        inside = [i for i, t in enumerate(theorems) if folds[t] == f]
        expect += log_likelihoods([X[i] for i in inside], [chosen[i] for i in inside], w).sum()
    assert cf.heldout_log_likelihood == pytest.approx(expect)
    # Out of fold explains less than in sample, but far more than no weights.
    assert cf.heldout_log_likelihood < cf.fit.log_likelihood
    assert cf.heldout_log_likelihood > log_likelihoods(X, chosen, np.zeros(2)).sum() + 100


def test_a_fit_within_bounds_equals_the_free_fit_when_that_is_within_them():
    X, chosen, _ = synthetic(np.array([1.0, -0.5]), decisions=1000)
    free = fit_conditional_logit(X, chosen)
    bounded = fit_conditional_logit(X, chosen, signs=(1, -1))
    np.testing.assert_allclose(bounded.weights, free.weights)


def test_a_weight_that_would_cross_its_bound_is_fixed_at_zero_and_the_rest_refitted():
    # The log-prob term ranks backwards (its true weight is negative), the energy forwards: a
    # priority α · L − β · E cannot give L a negative weight, so the best it can do is α = 0.
    X, chosen, _ = synthetic(np.array([-0.4, -1.0]), decisions=1500)
    assert fit_conditional_logit(X, chosen).weights[0] < -0.2
    bounded = fit_conditional_logit(X, chosen, signs=(1, -1))
    assert bounded.weights[0] == 0.0
    alone = fit_conditional_logit([x[:, 1:] for x in X], chosen).weights[0]
    assert bounded.weights[1] == pytest.approx(alone) and alone < -0.8
    # It is the maximum over the quadrant: no weights within the bounds explain the decisions
    # better (penalised as the fit is).
    lam = 1e-3 * len(X)

    def objective(w):
        return log_likelihoods(X, chosen, w).sum() - 0.5 * lam * float(np.dot(w, w))

    best = objective(bounded.weights)
    for wl in (0.0, 0.05, 0.2):
        for we in (-1.5, -1.0, -0.9, -0.5, 0.0):
            assert objective(np.array([wl, we])) <= best + 1e-9
    # Cross-fitting keeps every fold's weights within the bounds too.
    theorems = [f"t{i // 10}" for i in range(len(X))]
    cf = cross_fit(
        X, chosen, theorems, TheoremSplit(0.1, 0.1, seed=0).folds(theorems, 3), signs=(1, -1)
    )
    assert all(w[0] >= 0 and w[1] <= 0 for w in cf.heldout_weights)


def test_the_priority_weights_are_the_ratio_or_the_energy_alone():
    # Priority α·L − β·E ranks like 1.0·L − 0.25·E when β / α = 0.25.
    assert priority_weights(1.0, 0.25) == {"logprob": 1.0, "energy": 0.25}
    assert priority_weights(4.0, 1.0) == {"logprob": 1.0, "energy": 0.25}
    # A log-prob weight of 0 is the limit β / α → ∞: the energy ranks alone.
    assert priority_weights(0.0, 0.3) == {"logprob": 0.0, "energy": 1.0}
    assert priority_weights(1e-9, 0.3)["energy"] > 1e8  # continuous with that limit
    # An energy that ranks backwards (value weight ≤ 0) gets none.
    assert priority_weights(1.0, -0.3) == {"logprob": 1.0, "energy": 0.0}
    assert priority_weights(0.0, 0.0) == {"logprob": 1.0, "energy": 0.0}
