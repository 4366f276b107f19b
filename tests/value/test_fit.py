"""The conditional-logit fit recovers known weights from synthetic decisions; cross-fitting never
judges a decision with weights fitted on its theorem; the energy weight is the weights' ratio."""

from __future__ import annotations

import numpy as np
import pytest

from burnqed.value.fit import (
    cross_fit,
    energy_weight,
    fit_conditional_logit,
    log_likelihoods,
    theorem_folds,
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
    folds = theorem_folds(theorems, 4, seed=0)
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


def test_energy_weight_is_the_ratio_of_the_fitted_weights():
    # Priority α·L − β·E with α = 2 ranks like 1.0·L − 0.25·E when β = 2 · 0.25.
    assert energy_weight([1.0, -0.25], 2.0) == pytest.approx(0.5)
    assert energy_weight([1.0, 0.3], 1.0) == 0.0  # an energy that ranks backwards gets no weight
