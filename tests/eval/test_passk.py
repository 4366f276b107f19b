"""pass@k equals exact combinatorics on enumerated cases; its interval covers at the nominal rate."""

from __future__ import annotations

import itertools
from fractions import Fraction
from math import comb

import numpy as np
import pytest

from burnqed.eval.passk import mean_ci, pass_at_k, pass_at_k_table, wilson


@pytest.mark.parametrize("n", range(1, 9))
def test_pass_at_k_equals_the_fraction_of_k_subsets_holding_a_success(n):
    for c in range(n + 1):
        outcomes = [True] * c + [False] * (n - c)
        for k in range(1, n + 1):
            subsets = list(itertools.combinations(outcomes, k))
            enumerated = Fraction(sum(any(s) for s in subsets), len(subsets))
            formula = 1 - Fraction(comb(n - c, k), comb(n, k))
            assert enumerated == formula
            assert pass_at_k(n, c, k) == pytest.approx(float(formula), abs=1e-12), (n, c, k)


def test_pass_at_k_is_stable_for_large_n():
    # C(200, 100) overflows a float; the product form does not.
    assert pass_at_k(200, 1, 100) == pytest.approx(0.5)
    assert pass_at_k(200, 0, 100) == 0.0 and pass_at_k(200, 150, 100) == 1.0
    assert pass_at_k(1000, 3, 10) == pytest.approx(
        float(1 - Fraction(comb(997, 10), comb(1000, 10)))
    )


@pytest.mark.parametrize("bad", [(3, 4, 1), (3, 1, 0), (3, 1, 4), (3, -1, 1)])
def test_pass_at_k_rejects_impossible_counts(bad):
    n, c, k = bad
    with pytest.raises(ValueError, match="pass@k needs"):
        pass_at_k(n, c, k)


def test_table_is_the_mean_over_theorems_for_every_k():
    counts = [(4, 0, 3), (4, 1, 2), (4, 4, 1)]  # (attempts, successes, theorems)
    table = pass_at_k_table(counts, 4)
    assert [r["k"] for r in table] == [1, 2, 3, 4]
    for r in table:
        k = r["k"]
        expected = (3 * 0 + 2 * pass_at_k(4, 1, k) + 1 * 1.0) / 6
        assert r["pass_at_k"] == pytest.approx(expected)
        lo, hi = r["ci95"]
        assert 0 <= lo <= r["pass_at_k"] <= hi <= 1
    assert table[0]["pass_at_k"] == pytest.approx((2 * 0.25 + 1) / 6)
    assert table[-1]["pass_at_k"] == pytest.approx(3 / 6)  # k = n: any success
    assert pass_at_k_table([], 2) == [
        {"k": 1, "theorems": 0, "pass_at_k": None, "ci95": None},
        {"k": 2, "theorems": 0, "pass_at_k": None, "ci95": None},
    ]


def test_interval_of_0_1_values_is_wilsons_and_stays_in_range():
    x = [1.0] * 3 + [0.0] * 17
    assert mean_ci(x) == pytest.approx(wilson(0.15, 19))
    assert mean_ci([0.0] * 10)[0] == 0.0 and mean_ci([1.0] * 10)[1] == 1.0
    assert mean_ci([0.0] * 10)[1] > 0.2  # zero successes in 10 is not certainty


@pytest.mark.parametrize(
    ("theorems", "n", "k", "beta"),
    [
        (100, 1, 1, (0.6, 1.0)),  # pass@1 from one attempt: a proportion
        (244, 1, 1, (0.3, 1.0)),  # miniF2F-sized, a hard benchmark
        (100, 8, 1, (0.5, 1.0)),  # pass@1 estimated from 8 attempts
        (100, 8, 4, (0.5, 1.0)),
        (60, 4, 2, (0.3, 2.0)),
        (100, 8, 8, (0.5, 1.0)),  # k = n
    ],
)
def test_interval_coverage_by_simulation_is_within_2_points_of_95(theorems, n, k, beta):
    # Each replication draws a benchmark of theorems (per-theorem solve probability ~ Beta) and
    # n attempts per theorem; the estimand is the population pass@k E[1 − (1 − p)^k].
    rng = np.random.default_rng(1234 + 7 * n + k)
    a, b = beta
    truth = 1 - np.exp(
        np.sum(np.log(np.arange(b, b + k)) - np.log(np.arange(a + b, a + b + k)))
    )  # E[(1 − p)^k] = B(a, b + k) / B(a, b)
    per_c = np.array([pass_at_k(n, c, k) for c in range(n + 1)])
    reps = 2000
    p = rng.beta(a, b, size=(reps, theorems))
    c = rng.binomial(n, p)
    hits = 0
    for row in c:
        lo, hi = mean_ci(per_c[row])
        hits += lo <= truth <= hi
    assert abs(hits / reps - 0.95) <= 0.02, hits / reps
