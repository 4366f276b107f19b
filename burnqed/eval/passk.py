"""pass@k: the unbiased estimator from n attempts with c successes, and its confidence interval.

For one theorem with ``n`` attempts of which ``c`` proved it, the probability that ``k`` attempts
drawn without replacement from the ``n`` contain a proof is ``1 − C(n−c, k) / C(n, k)`` (Chen et al.
2021): an unbiased estimate of the theorem's pass@k.  The benchmark's pass@k is the mean over the
theorems evaluated.

**What the interval covers.**  The benchmark's theorems are treated as an iid sample from a
population of theorems; each theorem's value (its pass@k estimate, or solved-or-not) lies in
[0, 1], and the target is the population mean ``μ`` — the rate a fresh draw of theorems of this
kind would show, not the rate of these particular theorems.  The interval is a 95 % two-sided
interval whose coverage is *guaranteed* at every μ, number of theorems ``m``, attempts and k
(each tail at most 2.5 %), not only approximately for large ``m``:

- **0/1 values** (a solve rate; pass@k with k = n): the exact Clopper–Pearson interval of
  ``S = Σ x`` successes in ``m`` Bernoulli(μ) trials.
- **values in [0, 1]** (pass@k with k < n): the interval that inverts Bentkus' bound.  Any [0, 1]
  variable with mean μ is dominated in convex order by a Bernoulli(μ) (Hoeffding 1963, JASA 58:
  13–30, §4), so ``S ≤cx B ~ Binomial(m, μ)`` and, by Markov on ``(S − h)₊``,
  ``P(S ≥ t) ≤ inf_{h<t} E(B − h)₊ / (t − h)`` (Bentkus 2004, "On Hoeffding's inequalities",
  Ann. Probab. 32: 1650–1673).  The infimum is taken at an integer ``h`` (the ratio is monotone
  between the kinks of ``E(B − h)₊``).  The lower end is the smallest μ whose bound on
  ``P(S ≥ s_observed)`` exceeds 2.5 %; the upper end is the same for ``1 − x``.

Both depend on the data only through ``S`` and ``m``, and both are found by bisection on μ
(60 halvings: exact to float precision).  Neither uses the sample variance, which is what made the
previous interval (Wilson's with an effective sample size ``p(1−p)/Var(mean)``) undercover when
per-theorem rates sit near 0 or 1 (0.905 at Beta(0.05, 2) rates, 4 attempts, 60 theorems).  The
price is width where the values are fractional and far from 0/1: the bound treats every theorem as
if it were solved all-or-nothing.  ``tests/eval/test_passk.py`` computes the coverage exactly (the
distribution of ``S`` on its lattice) over a grid of rates near 0 and 1, attempts 1–8, every k and
10–244 theorems.

Example::

    >>> pass_at_k(n=4, c=1, k=2)
    0.5
    >>> lo, hi = mean_ci([1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0])   # Clopper–Pearson, 6/8
    >>> round(lo, 3), round(hi, 3)
    (0.349, 0.968)
    >>> lo, hi = mean_ci([0.5, 0.25, 1.0, 0.75, 0.0, 1.0, 0.5, 1.0])  # fractional: Bentkus
    >>> round(lo, 3), round(hi, 3)
    (0.237, 0.918)
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np

CONFIDENCE = 0.95
_HALVINGS = 60


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one theorem from ``c`` successes in ``n`` attempts (``1 <= k <= n``)."""
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    if n - c < k:
        return 1.0
    # 1 − Π_{i=n−c+1..n} (1 − k/i): the ratio of binomials without huge integers.
    return 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


@functools.cache
def _log_comb(m: int) -> np.ndarray:
    """``log C(m, j)`` for j = 0..m."""
    return math.lgamma(m + 1) - np.array(
        [math.lgamma(i + 1) + math.lgamma(m - i + 1) for i in range(m + 1)]
    )


def _binomial_pmf(m: int, mu: np.ndarray) -> np.ndarray:
    """``(len(mu), m + 1)`` Binomial(m, μ) probabilities (log-space, exact at μ = 0 and 1)."""
    j = np.arange(m + 1, dtype=np.float64)
    log_comb = _log_comb(m)
    mu = np.asarray(mu, dtype=np.float64)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        log_p = (
            log_comb
            + np.where(j > 0, j * np.log(mu), 0.0)
            + np.where(j < m, (m - j) * np.log1p(-mu), 0.0)
        )
    return np.exp(log_p)


def _upper_tail_bound(t: np.ndarray, m: int, mu: np.ndarray, *, binary: bool) -> np.ndarray:
    """A bound on ``P(S ≥ t)`` for a sum of ``m`` iid [0, 1] values with mean ``mu`` (row-wise):
    the binomial tail itself when the values are 0/1, else Bentkus' ``inf_h E(B − h)₊/(t − h)``."""
    p = _binomial_pmf(m, mu)  # (K, m + 1)
    j = np.arange(m + 1)
    t = np.asarray(t, dtype=np.float64)[:, None]
    if binary:
        return np.clip((p * (j >= t - 1e-9)).sum(1), 0.0, 1.0)
    # E(B − h)₊ for integer h = 0..m: Σ_{j>h} j p_j − h Σ_{j>h} p_j, from reversed cumulative sums.
    tail_p = np.cumsum(p[:, ::-1], axis=1)[:, ::-1]  # Σ_{j≥h} p_j
    tail_jp = np.cumsum((p * j)[:, ::-1], axis=1)[:, ::-1]  # Σ_{j≥h} j p_j
    excess = tail_jp - j * tail_p  # Σ_{j≥h} (j − h) p_j = Σ_{j>h} (j − h) p_j
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(j < t, excess / (t - j), np.inf)
    return np.clip(np.minimum(ratio.min(1), 1.0), 0.0, 1.0)


def _lower_bounds(sums: np.ndarray, m: int, alpha_tail: float, *, binary: bool) -> np.ndarray:
    """The smallest μ not rejected by the upper-tail test at each observed sum (vectorised)."""
    sums = np.asarray(sums, dtype=np.float64)
    lo, hi = np.zeros_like(sums), sums / m  # the bound is increasing in μ; at μ = s/m it is ≥ 1/2
    for _ in range(_HALVINGS):
        mid = (lo + hi) / 2
        rejected = _upper_tail_bound(sums, m, mid, binary=binary) <= alpha_tail
        lo, hi = np.where(rejected, mid, lo), np.where(rejected, hi, mid)
    return np.where(sums <= 0, 0.0, hi)


def interval_from_sums(
    sums: Sequence[float] | np.ndarray, m: int, *, binary: bool, confidence: float = CONFIDENCE
) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper ends for each total ``S`` of ``m`` values (module docstring)."""
    sums = np.clip(np.asarray(sums, dtype=np.float64), 0.0, m)
    tail = (1 - confidence) / 2
    lower = _lower_bounds(sums, m, tail, binary=binary)
    upper = 1.0 - _lower_bounds(m - sums, m, tail, binary=binary)  # the same bound for 1 − x
    return lower, upper


def mean_ci(
    values: Sequence[float] | np.ndarray,
    *,
    binary: bool | None = None,
    confidence: float = CONFIDENCE,
) -> tuple[float, float]:
    """Interval for the population mean of per-theorem values in [0, 1] (module docstring).

    ``binary``: whether the values are 0/1 *by design* (a solve rate, pass@k with k = n); None
    infers it from the values, which callers with fractional-by-design values must not rely on.
    """
    x = np.asarray(values, dtype=np.float64)
    m = len(x)
    if m == 0:
        return 0.0, 1.0
    if x.min() < 0 or x.max() > 1:
        raise ValueError("mean_ci needs values in [0, 1]")
    if binary is None:
        binary = bool(np.all((x == 0) | (x == 1)))
    lo, hi = interval_from_sums([float(x.sum())], m, binary=binary, confidence=confidence)
    # Rounded: at S = 0 or m the end is exactly 0 or 1, up to floating-point noise.
    return round(float(lo[0]), 12), round(float(hi[0]), 12)


def pass_at_k_table(counts: Sequence[tuple[int, int, int]], n: int) -> list[dict]:
    """pass@k for every ``k <= n`` from ``counts`` = [(attempts, successes, theorems), …].

    A theorem's value at ``k`` uses its own finished attempts (an errored attempt beside them is not
    a failure; burnqed.eval.metrics), and only theorems with at least ``k`` finished attempts enter
    pass@k (``theorems`` says how many did).  The per-theorem values depend only on (attempts,
    successes): the loop runs over those distinct pairs, never over theorems.  The values are 0/1
    by design when every theorem entering pass@k has exactly ``k`` attempts.
    """
    out = []
    for k in range(1, n + 1):
        rows = [(a, c, w) for a, c, w in counts if a >= k]
        per = np.array([pass_at_k(a, c, k) for a, c, _ in rows], dtype=np.float64)
        values = np.repeat(per, np.array([w for _, _, w in rows], dtype=np.int64))
        binary = all(a == k for a, _, _ in rows)
        lo, hi = mean_ci(values, binary=binary) if len(values) else (None, None)
        out.append(
            {
                "k": k,
                "theorems": len(values),
                "pass_at_k": float(values.mean()) if len(values) else None,
                "ci95": [lo, hi] if len(values) else None,
            }
        )
    return out
