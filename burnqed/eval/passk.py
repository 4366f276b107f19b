"""pass@k: the unbiased estimator from n attempts with c successes, and its confidence interval.

For one theorem with ``n`` attempts of which ``c`` proved it, the probability that ``k`` attempts
drawn without replacement from the ``n`` contain a proof is ``1 − C(n−c, k) / C(n, k)`` (Chen et al.
2021): an unbiased estimate of the theorem's pass@k.  The benchmark's pass@k is the mean over the
theorems evaluated.  Its interval treats the benchmark as a sample of theorems (the usual error bar
of an eval): a Wilson score interval with the *effective* sample size ``p(1−p) / Var(mean)``, where
``Var(mean)`` is the sample variance of the per-theorem estimates over the number of theorems.  For
0/1 values (k = n) that is the plain Wilson interval; for fractional values it shrinks the interval
by the variance the extra attempts remove, and it stays inside [0, 1] where a normal interval would
not.  ``tests/eval/test_passk.py`` checks the coverage by simulation.

Example::

    >>> pass_at_k(n=4, c=1, k=2)
    0.5
    >>> lo, hi = mean_ci([1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0])
    >>> round(lo, 3), round(hi, 3)
    (0.389, 0.934)
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

Z_95 = 1.959963984540054  # two-sided 95 % normal quantile


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one theorem from ``c`` successes in ``n`` attempts (``1 <= k <= n``)."""
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    if n - c < k:
        return 1.0
    # 1 − Π_{i=n−c+1..n} (1 − k/i): the ratio of binomials without huge integers.
    return 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def wilson(p: float, n_eff: float, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval of a proportion ``p`` observed on ``n_eff`` (effective) trials."""
    if n_eff <= 0:
        return 0.0, 1.0
    z2 = z * z
    centre = (p + z2 / (2 * n_eff)) / (1 + z2 / n_eff)
    half = z / (1 + z2 / n_eff) * math.sqrt(max(p * (1 - p) / n_eff + z2 / (4 * n_eff**2), 0.0))
    # Rounded: at p = 0 or 1 the bound is exactly 0 or 1, up to floating-point noise.
    return round(max(0.0, centre - half), 12), round(min(1.0, centre + half), 12)


def mean_ci(values: Sequence[float] | np.ndarray, z: float = Z_95) -> tuple[float, float]:
    """Interval for the mean of per-theorem estimates in [0, 1] (module docstring)."""
    x = np.asarray(values, dtype=np.float64)
    m = len(x)
    if m == 0:
        return 0.0, 1.0
    p = float(x.mean())
    var_mean = float(x.var(ddof=1)) / m if m > 1 else 0.0
    n_eff = p * (1 - p) / var_mean if var_mean > 0 else float(m)
    return wilson(p, n_eff, z)


def pass_at_k_table(counts: Sequence[tuple[int, int, int]], n: int) -> list[dict]:
    """pass@k for every ``k <= n`` from ``counts`` = [(attempts, successes, theorems), …].

    A theorem's value at ``k`` uses its own finished attempts (an errored attempt beside them is not
    a failure; burnqed.eval.metrics), and only theorems with at least ``k`` finished attempts enter
    pass@k (``theorems`` says how many did).  The per-theorem values depend only on (attempts,
    successes): the loop runs over those distinct pairs, never over theorems.
    """
    out = []
    for k in range(1, n + 1):
        rows = [(a, c, w) for a, c, w in counts if a >= k]
        per = np.array([pass_at_k(a, c, k) for a, c, _ in rows], dtype=np.float64)
        values = np.repeat(per, np.array([w for _, _, w in rows], dtype=np.int64))
        lo, hi = mean_ci(values) if len(values) else (None, None)
        out.append(
            {
                "k": k,
                "theorems": len(values),
                "pass_at_k": float(values.mean()) if len(values) else None,
                "ci95": [lo, hi] if len(values) else None,
            }
        )
    return out
