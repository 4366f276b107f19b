"""The study's statistics: Student's t against published quantiles, the pooled tests by hand, Holm,
the power analysis against a textbook figure, and — over thousands of simulated studies with planted
per-seed effects and seed-to-seed variation — the pooled intervals' coverage at their nominal level."""

from __future__ import annotations

import math

import numpy as np
import pytest

from burnqed.study import stats

# Two-sided critical values t_{0.975, df} (any t table).
T975 = {1: 12.7062, 2: 4.3027, 3: 3.1824, 4: 2.7764, 5: 2.5706, 9: 2.2622, 10: 2.2281, 30: 2.0423}


@pytest.mark.parametrize("df", sorted(T975))
def test_t_quantiles_match_the_table(df):
    assert stats.t_quantile(0.975, df) == pytest.approx(T975[df], abs=1e-4)
    # and the cdf inverts it
    assert float(stats.t_two_sided_p(T975[df], df)) == pytest.approx(0.05, abs=1e-4)


def test_t_test_and_hartung_knapp_by_hand():
    d = [0.03, 0.02, 0.0]
    r = stats.t_test(d)
    mean, sd = sum(d) / 3, np.std(d, ddof=1)
    assert r["estimate"] == pytest.approx(mean)
    assert r["se"] == pytest.approx(sd / math.sqrt(3))
    assert r["high"] - r["estimate"] == pytest.approx(T975[2] * sd / math.sqrt(3), rel=1e-4)
    # Hartung–Knapp with equal within-seed variances and τ² = 0 is the t-test's estimate.
    b, c, n = [10, 10, 10], [4, 4, 4], [100, 100, 100]
    hk = stats.hartung_knapp(b, c, n)
    assert hk["estimate"] == pytest.approx(0.06) and hk["tau2"] == 0
    # Spread between seeds larger than within them: τ² > 0, and the estimate moves toward the
    # unweighted mean.
    hk = stats.hartung_knapp([30, 2, 15], [2, 30, 3], [100, 100, 100])
    assert hk["tau2"] > 0 and hk["p_value"] > 0.3
    assert stats.t_test([0.0, 0.0, 0.0])["p_value"] == 1.0
    assert stats.t_test([0.1]) is None


def test_a_collapsed_seed_keeps_a_finite_weight_and_counts_as_zero():
    hk = stats.hartung_knapp([15, 8, 0], [4, 1, 0], [400, 400, 400])
    assert math.isfinite(hk["estimate"]) and 0 < hk["estimate"] < 15 / 400
    assert stats.within_variance(0, 0, 400) > 0


def test_stratified_holm_and_sign_agreement():
    s = stats.stratified_count_test([15, 8, 0], [4, 1, 0])
    assert (s["gained"], s["lost"], s["fixed_effect"]) == (23, 5, True)
    assert stats.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert stats.holm([0.5, 0.001]) == pytest.approx([0.5, 0.002])
    a = stats.sign_agreement([0.1, 0.0, -0.2, 0.3], pooled=0.05)
    assert (a["agree"], a["seeds"], a["positive"], a["negative"]) == (2, 4, 2, 1)
    assert "all_by_chance" not in a
    assert a["sign_test_p"] == 1.0  # 2 against 1, the zero dropped: P(X ≤ 1 | 3, ½) · 2 = 1


def test_the_sign_test_p_is_the_binomial_tail_for_the_observed_count():
    # learning-d3's primaries (issue 59): 9 positive / 16 negative and 18 / 7 of 27, 2 zeros each.
    assert stats.sign_test_p(9, 16) == pytest.approx(0.2295, abs=1e-4)
    assert stats.sign_test_p(18, 7) == pytest.approx(0.0433, abs=1e-4)
    assert stats.sign_test_p(5, 0) == stats.sign_test_p(0, 5) == pytest.approx(2 / 2**5)
    d = [0.01] * 9 + [-0.01] * 16 + [0.0] * 2
    assert stats.sign_agreement(d, pooled=-0.005)["sign_test_p"] == stats.sign_test_p(9, 16)


def test_power_matches_the_textbook_and_seeds_needed_grows_with_holm():
    # One-sample t, d = 1, n = 10, two-sided α = 0.05: power 0.803 (G*Power).
    assert stats.t_test_power(1.0, 1.0, 10, 0.05) == pytest.approx(0.803, abs=0.002)
    one = stats.seeds_needed(1.0, 1.0, alpha=0.05)
    two = stats.seeds_needed(1.0, 1.0, alpha=0.05, comparisons=2)
    assert one == 10 and two > one
    assert stats.seeds_needed(3.0, 1.0, alpha=0.05) <= 5  # roughly 3 SD for k = 3..4
    assert stats.seeds_needed(0.0, 1.0, alpha=0.05) is None


def _simulate(studies: int, seeds: int, rng: np.random.Generator):
    """Studies of ``seeds`` seeds: each seed's true difference drawn around MU with seed-to-seed
    SD TAU (a new benchmark draw and new models), then 400 theorems' paired outcomes."""
    mu, tau, n, discordant = 0.03, 0.025, 400, 0.15
    true = rng.normal(mu, tau, (studies, seeds))
    pb = np.clip((discordant + true) / 2, 0, 1)
    pc = np.clip((discordant - true) / 2, 0, 1)
    probs = np.stack([pb.ravel(), pc.ravel(), (1 - pb - pc).ravel()], axis=1)
    counts = rng.multinomial(n, probs).reshape(studies, seeds, 3)
    b, c = counts[..., 0], counts[..., 1]
    return mu, b, c, np.full_like(b, n)


@pytest.mark.parametrize("seeds", [3, 5, 10])
def test_the_pooled_intervals_cover_at_their_nominal_level(seeds):
    rng = np.random.default_rng(44 + seeds)
    studies, level = 4000, 1 - 0.05 / 2  # the Bonferroni level of two primaries
    mu, b, c, n = _simulate(studies, seeds, rng)
    d = (b - c) / n
    for r in (stats.t_test_arrays(d, level=level),
              stats.hartung_knapp_arrays(d, stats.within_variance(b, c, n), level=level)):  # fmt: skip
        covered = float(np.mean((r["low"] <= mu) & (mu <= r["high"])))
        assert abs(covered - level) < 0.02, (seeds, covered)


def test_the_coverage_check_can_fail_a_fixed_effect_interval():
    """The same simulation catches an interval that ignores seed-to-seed variation: the
    fixed-effect (inverse-variance, normal) interval under-covers by far more than 2 points."""
    rng = np.random.default_rng(7)
    mu, b, c, n = _simulate(4000, 5, rng)
    d, w = (b - c) / n, 1 / stats.within_variance(b, c, n)
    est = (w * d).sum(axis=1) / w.sum(axis=1)
    half = 2.2414 * np.sqrt(1 / w.sum(axis=1))  # z at 1 − 0.025/2
    covered = float(np.mean(np.abs(est - mu) <= half))
    assert covered < 0.975 - 0.1
