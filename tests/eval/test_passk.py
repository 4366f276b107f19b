"""pass@k equals exact combinatorics on enumerated cases; its interval covers at least 95 % everywhere:
computed exactly over a grid of rates near 0 and 1, attempts, k and benchmark sizes, and by simulation
at the point where the previous interval (Wilson with an effective sample size) covered 0.905."""

from __future__ import annotations

import itertools
from fractions import Fraction
from math import comb, lgamma

import numpy as np
import pytest

from burnqed.eval.passk import (
    _upper_tail_bound,
    interval_from_sums,
    mean_ci,
    pass_at_k,
    pass_at_k_table,
)


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


def test_interval_of_0_1_values_is_clopper_pearsons_and_stays_in_range():
    # Clopper–Pearson 95 % for 3/20 and 0/10 (published tables: 0.032–0.379, 0–0.308).
    lo, hi = mean_ci([1.0] * 3 + [0.0] * 17)
    assert (round(lo, 3), round(hi, 3)) == (0.032, 0.379)
    assert mean_ci([0.0] * 10) == (0.0, pytest.approx(0.3085, abs=1e-4))
    assert mean_ci([1.0] * 10)[1] == 1.0 and mean_ci([1.0] * 10)[0] == pytest.approx(
        0.6915, abs=1e-4
    )
    # Fractional values: never narrower than the 0/1 interval of the same total.
    frac = mean_ci([0.15] * 20, binary=False)
    assert frac[0] <= lo and frac[1] >= hi


def test_interval_ends_at_the_observed_mean_where_the_tail_bound_crosses_2_5_percent():
    for binary, total in ((True, 17.0), (False, 17.25)):
        lo, hi = interval_from_sums([total], 60, binary=binary)
        below = _upper_tail_bound(np.array([total]), 60, lo - 1e-9, binary=binary)[0]
        above = _upper_tail_bound(np.array([total]), 60, lo + 1e-9, binary=binary)[0]
        assert below <= 0.025 < above  # lo is where the test stops rejecting
        assert lo[0] < total / 60 < hi[0]


def _beta_binomial(n: int, a: float, b: float) -> np.ndarray:
    """P(c successes in n attempts) when a theorem's solve probability is Beta(a, b)."""
    logb = lambda x, y: lgamma(x) + lgamma(y) - lgamma(x + y)  # noqa: E731
    return np.array(
        [comb(n, c) * np.exp(logb(c + a, n - c + b) - logb(a, b)) for c in range(n + 1)]
    )


def _binomial(n: int, p: float) -> np.ndarray:
    return np.array([comb(n, c) * p**c * (1 - p) ** (n - c) for c in range(n + 1)])


# Per-theorem solve probability: near 0, near 1, U-shaped, flat, and point masses (incl. 0 and 1).
RATES = {
    "Beta(0.05, 2)": lambda n: _beta_binomial(n, 0.05, 2.0),
    "Beta(2, 0.05)": lambda n: _beta_binomial(n, 2.0, 0.05),
    "Beta(0.5, 0.5)": lambda n: _beta_binomial(n, 0.5, 0.5),
    "Beta(1, 1)": lambda n: _beta_binomial(n, 1.0, 1.0),
    **{f"p={p}": (lambda n, p=p: _binomial(n, p)) for p in (0, 0.002, 0.05, 0.3, 0.95, 0.998, 1)},
}
ATTEMPTS, THEOREMS = (1, 2, 4, 8), (10, 30, 60, 244)


def _crossing(m: int, mu: np.ndarray, *, binary: bool) -> np.ndarray:
    """Per μ, the total t* above which the upper-tail test rejects μ (inf: never), by bisection."""
    lo, hi = m * mu, np.full_like(mu, float(m))
    never = _upper_tail_bound(hi, m, mu, binary=binary) > 0.025
    for _ in range(60):
        mid = (lo + hi) / 2
        rejected = _upper_tail_bound(mid, m, mu, binary=binary) <= 0.025
        lo, hi = np.where(rejected, lo, mid), np.where(rejected, mid, hi)
    return np.where(never, np.inf, hi)


def grid_coverage() -> list[tuple[str, int, int, int, float]]:
    """``(rates, attempts n, k, theorems m, coverage)`` at every grid point, computed exactly.

    The interval depends on the data only through the total S, so it covers μ exactly when S lies
    strictly between two crossings; P(S in there) is computed from S's exact distribution on its
    lattice (multiples of 1/C(n, k), an m-fold convolution by FFT).  The interval itself is checked
    against the crossings at the lattice points on either side of each.
    """
    points = []  # (rates, n, k, m, coverage)
    checks: dict[tuple[int, bool], list[tuple[float, bool, float]]] = {}
    for m in THEOREMS:
        for binary in (True, False):
            grid = [(name, n, k) for name in RATES for n in ATTEMPTS for k in range(1, n + 1)
                    if (k == n) == binary]  # fmt: skip
            dists, lattices, mus = [], [], []
            for name, n, k in grid:
                p_c = RATES[name](n)
                d = comb(n, k)
                lattice = np.array([d - comb(n - c, k) for c in range(n + 1)])  # d · pass@k
                dists.append(p_c)
                lattices.append((lattice, d))
                mus.append(float(np.dot(p_c, lattice / d)))
            mu = np.array(mus)
            upper = _crossing(m, mu, binary=binary)  # covered from below iff S < upper
            # Covered from above iff m − S < the crossing for 1 − x (kept reflected: m − tiny = m).
            reflected = _crossing(m, 1 - mu, binary=binary)
            for (name, n, k), p_c, (lattice, d), mu_i, lo_r, hi_t in zip(
                grid, dists, lattices, mus, reflected, upper, strict=True
            ):
                one = np.zeros(d + 1)
                np.add.at(one, lattice, p_c)
                size = m * d + 1
                p_s = np.clip(np.fft.irfft(np.fft.rfft(one, size) ** m, size), 0, None)
                s = np.arange(size) / d
                covered = (np.arange(size)[::-1] / d < lo_r) & (s < hi_t)  # m − s, exactly
                points.append((name, n, k, m, float(p_s[covered].sum() / p_s.sum())))
                for t in (m - lo_r, hi_t):  # the lattice points on either side of each crossing
                    if np.isfinite(t) and 0 < t < m:
                        below, above = s[s <= t - 1e-6], s[s >= t + 1e-6]
                        for x in (below.max(initial=-1), above.min(initial=-1)):
                            if x >= 0:
                                inside = bool(covered[round(x * d)])
                                checks.setdefault((m, binary), []).append((x, inside, mu_i))
    for (m, binary), rows in checks.items():
        sums = np.array([x for x, _, _ in rows])
        lo, hi = interval_from_sums(sums, m, binary=binary)
        for (x, inside, mu_i), a, b in zip(rows, lo, hi, strict=True):
            assert (a <= mu_i <= b) == inside, (m, binary, x, mu_i, a, b)
    return points


def test_interval_coverage_is_at_least_95_percent_on_the_whole_grid_computed_exactly():
    points = grid_coverage()
    assert len(points) == len(RATES) * 15 * len(THEOREMS)
    worst = min(points, key=lambda p: p[-1])
    assert worst[-1] >= 0.95 - 1e-9, worst  # guaranteed: each tail at most 2.5 %
    # Not vacuous: somewhere the interval is tight (coverage close to its nominal 95 %).
    assert min(p[-1] for p in points if p[0] == "p=0.3" and p[1] == p[2] == 1) < 0.97


def test_interval_covers_where_the_effective_sample_size_interval_did_not():
    """The review's reproduction, simulated: per-theorem rates Beta(0.05, 2), 4 attempts, 60
    theorems, pass@1 — Wilson with the effective sample size covered 0.905.  20,000 benchmarks."""
    rng = np.random.default_rng(2024)
    reps, m, n, k = 20_000, 60, 4, 1
    per_c = np.array([pass_at_k(n, c, k) for c in range(n + 1)])
    values = per_c[rng.binomial(n, rng.beta(0.05, 2.0, size=(reps, m)))]  # (reps, m)
    truth = 0.05 / 2.05  # pass@1 is the mean solve probability E[p] = a / (a + b)
    # The interval depends on the values only through their total: one per distinct total.
    assert mean_ci(values[0], binary=False) == mean_ci(np.sort(values[0])[::-1], binary=False)
    assert mean_ci([0.5, 0.5], binary=False) == mean_ci([1.0, 0.0], binary=False)
    totals, inverse = np.unique(values.sum(1), return_inverse=True)
    lo, hi = interval_from_sums(totals, m, binary=False)
    coverage = ((lo <= truth) & (truth <= hi))[inverse.ravel()].mean()
    assert coverage >= 0.95, coverage
