"""The statistics of a study: per-seed paired differences pooled with the seed as the replicate.

Per seed ``s`` a comparison of two evals on the same theorems gives ``b_s`` gained, ``c_s`` lost
out of ``n_s`` paired theorems (exact McNemar per seed: :func:`burnqed.eval.paired.mcnemar_p`) and
the paired difference ``d_s = (b_s − c_s)/n_s`` (the treatment's solve rate minus the control's).
Across the ``k`` seeds:

- :func:`t_test` — a one-sample t-test of ``mean d_s = 0`` with ``k − 1`` degrees of freedom: every
  seed weighs the same, its spread is the seed-to-seed spread;
- :func:`hartung_knapp` — random effects: DerSimonian–Laird's between-seed variance ``τ²`` from
  the within-seed variances ``v_s`` (:func:`within_variance`), weights ``1/(v_s + τ²)``, and the
  Hartung–Knapp variance of the weighted mean, referred to t with ``k − 1`` degrees of freedom;
- :func:`stratified_count_test` — the *fixed-effect* count test, ``Σ b_s`` against ``Σ c_s``
  (Cochran–Mantel–Haenszel for matched pairs reduces to it): it speaks about these seeds' models and
  benchmark draws, not about new ones;
- :func:`sign_agreement` — how many seeds have the pooled sign, and the sign test of positive
  against negative seeds (:func:`sign_test_p`; reported, never a gate);
- :func:`holm` over the primary comparisons' p-values, and intervals at ``1 − α/m``
  (Bonferroni: Holm adjusts p-values, not intervals);
- :func:`seeds_needed` — the power analysis: the fewest seeds a one-sample t-test at ``α/m``
  (Holm's worst case, two-sided) needs for the target power, from development seeds' mean and
  standard deviation of ``d_s``.

scipy is not among burnqed's dependencies: Student's t is computed here for integer degrees of
freedom (the closed-form series of Abramowitz & Stegun 26.7.3–4; quantiles by bisection to double
precision) and the non-central t of the power analysis by quadrature over the chi distribution.
p-values below about 1e-15 print as 0.

Example::

    >>> round(t_quantile(0.975, 2), 4), round(t_quantile(0.975, 10), 4)
    (4.3027, 2.2281)
    >>> r = t_test([0.03, 0.02, 0.0])
    >>> round(r["estimate"], 4), round(r["p_value"], 3)
    (0.0167, 0.199)
    >>> holm([0.01, 0.04, 0.03])
    [0.03, 0.06, 0.06]
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from burnqed.eval.paired import mcnemar_p

T_TEST = "one-sample t-test on the per-seed paired differences (b_s − c_s)/n_s, k − 1 df"
HARTUNG_KNAPP = (
    "random effects: DerSimonian–Laird τ², Hartung–Knapp variance, t with k − 1 df, on the "
    "per-seed paired differences"
)
STRATIFIED = "fixed-effect stratified count test: exact McNemar on Σ b_s vs Σ c_s over all seeds"
TESTS = {"t": T_TEST, "hartung-knapp": HARTUNG_KNAPP}


# --------------------------------------------------------------------------------------------
# Student's t for integer degrees of freedom


def t_abs_cdf(t: np.ndarray | float, df: int) -> np.ndarray:
    """``P(|T| ≤ t)`` for ``T ~ t(df)``, ``t ≥ 0`` (Abramowitz & Stegun 26.7.3–4), elementwise."""
    if int(df) != df or df < 1:
        raise ValueError(f"df must be a positive integer, got {df}")
    df = int(df)
    t = np.abs(np.asarray(t, dtype=float))
    theta = np.arctan(t / math.sqrt(df))
    c2 = np.cos(theta) ** 2
    s = np.sin(theta)
    if df % 2 == 0:
        term, total = np.ones_like(t), np.ones_like(t)
        for j in range(2, df, 2):  # (1·3···(j−1))/(2·4···j) cos^j θ
            term = term * c2 * (j - 1) / j
            total = total + term
        out = s * total
    else:
        if df == 1:
            out = 2 * theta / math.pi
        else:
            term = np.cos(theta)
            total = term.copy()
            for j in range(3, df - 1, 2):  # (2·4···(j−1))/(1·3···j) cos^j θ
                term = term * c2 * (j - 1) / j
                total = total + term
            out = 2 / math.pi * (theta + s * total)
    return np.where(np.isinf(t), 1.0, np.clip(out, 0.0, 1.0))


def t_two_sided_p(t: np.ndarray | float, df: int) -> np.ndarray:
    """Two-sided p-value ``P(|T| ≥ |t|)``."""
    return 1.0 - t_abs_cdf(t, df)


def t_quantile(q: float, df: int) -> float:
    """The ``q`` quantile of t(df), ``0.5 < q < 1`` (bisection on :func:`t_abs_cdf`)."""
    if not 0.5 < q < 1:
        raise ValueError(f"q must be in (0.5, 1), got {q}")
    target = 2 * q - 1  # P(|T| <= x) = 2q - 1
    lo, hi = 0.0, 1.0
    while float(t_abs_cdf(hi, df)) < target:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        if float(t_abs_cdf(mid, df)) < target:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-15 * hi:
            break
    return (lo + hi) / 2


def normal_cdf(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    return 0.5 * np.vectorize(math.erfc)(-x / math.sqrt(2))


# --------------------------------------------------------------------------------------------
# Per-seed differences and their pooling


def paired_difference(gained: int, lost: int, theorems: int) -> float:
    """``(b − c)/n``: the treatment's solve rate minus the control's on the paired theorems."""
    if theorems <= 0:
        raise ValueError(f"no paired theorem (n = {theorems})")
    return (gained - lost) / theorems


def within_variance(gained, lost, theorems) -> np.ndarray:
    """The variance of ``(b − c)/n`` within one seed (the mean of n per-theorem differences in
    {−1, 0, 1}), with ½ added to each discordant count: a seed with no discordant theorem (a value
    model that collapsed to its twin) keeps a finite weight and counts as the 0 it is."""
    b, c, n = (np.asarray(x, dtype=float) for x in (gained, lost, theorems))
    bb, cc = b + 0.5, c + 0.5
    return ((bb + cc) / n - ((bb - cc) / n) ** 2) / n


def mean_within_variance(rows: Sequence[Mapping[str, Any]]) -> float:
    """The mean of :func:`within_variance` over ``rows`` (each ``{gained, lost, theorems}``): the
    spread of a seed's ``d`` that its benchmark's sampling alone gives.

    >>> round(1e4 * mean_within_variance([{"gained": 12, "lost": 4, "theorems": 400}] * 2), 2)
    1.05
    """
    return sum(float(within_variance(r["gained"], r["lost"], r["theorems"])) for r in rows) / len(
        rows
    )


def _interval(estimate, se, df, level) -> tuple[Any, Any]:
    q = t_quantile(0.5 + level / 2, df)
    return estimate - q * se, estimate + q * se


def _p(estimate, se, df) -> np.ndarray:
    """Two-sided p of ``estimate/se`` on t(df); se = 0: 0 when the estimate is not 0, else 1."""
    estimate, se = np.asarray(estimate, float), np.asarray(se, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(se > 0, estimate / np.where(se > 0, se, 1), np.where(estimate != 0, np.inf, 0))
    return t_two_sided_p(t, df)


def t_test_arrays(d: np.ndarray, *, level: float = 0.95) -> dict[str, np.ndarray]:
    """:func:`t_test` over the last axis of ``d`` (studies × seeds), vectorised."""
    d = np.asarray(d, dtype=float)
    k = d.shape[-1]
    mean = d.mean(axis=-1)
    se = d.std(axis=-1, ddof=1) / math.sqrt(k)
    lo, hi = _interval(mean, se, k - 1, level)
    return {"estimate": mean, "se": se, "low": lo, "high": hi, "p_value": _p(mean, se, k - 1)}


def hartung_knapp_arrays(d, v, *, level: float = 0.95) -> dict[str, np.ndarray]:
    """:func:`hartung_knapp` over the last axis of ``d`` and ``v`` (studies × seeds), vectorised."""
    d, v = np.asarray(d, dtype=float), np.asarray(v, dtype=float)
    k = d.shape[-1]
    w = 1 / v
    sw = w.sum(axis=-1)
    fixed = (w * d).sum(axis=-1) / sw
    q = (w * (d - fixed[..., None]) ** 2).sum(axis=-1)
    c = sw - (w**2).sum(axis=-1) / sw
    tau2 = np.maximum(0.0, (q - (k - 1)) / c)
    ws = 1 / (v + tau2[..., None])
    sws = ws.sum(axis=-1)
    mu = (ws * d).sum(axis=-1) / sws
    var = (ws * (d - mu[..., None]) ** 2).sum(axis=-1) / ((k - 1) * sws)
    se = np.sqrt(var)
    lo, hi = _interval(mu, se, k - 1, level)
    return {
        "estimate": mu,
        "se": se,
        "low": lo,
        "high": hi,
        "p_value": _p(mu, se, k - 1),
        "tau2": tau2,
    }


def _scalars(r: dict[str, np.ndarray]) -> dict[str, float]:
    return {k: float(v) for k, v in r.items()}


def t_test(d: Sequence[float], *, level: float = 0.95) -> dict[str, float] | None:
    """One-sample t-test of the per-seed differences ``d`` (mean, standard error, ``level``
    interval, two-sided p); None with fewer than 2 seeds."""
    if len(d) < 2:
        return None
    return {
        "test": T_TEST,
        "seeds": len(d),
        "level": level,
        **_scalars(t_test_arrays(d, level=level)),
    }


def hartung_knapp(
    gained: Sequence[int], lost: Sequence[int], theorems: Sequence[int], *, level: float = 0.95
) -> dict[str, float] | None:
    """Random-effects pooling of the per-seed differences (module docstring); None with fewer
    than 2 seeds."""
    if len(gained) < 2:
        return None
    d = [paired_difference(b, c, n) for b, c, n in zip(gained, lost, theorems, strict=True)]
    r = hartung_knapp_arrays(d, within_variance(gained, lost, theorems), level=level)
    return {"test": HARTUNG_KNAPP, "seeds": len(d), "level": level, **_scalars(r)}


def stratified_count_test(gained: Sequence[int], lost: Sequence[int]) -> dict[str, Any]:
    b, c = int(sum(gained)), int(sum(lost))
    return {
        "test": STRATIFIED,
        "gained": b,
        "lost": c,
        "p_value": mcnemar_p(b, c),
        "fixed_effect": True,
    }


def sign_test_p(positive: int, negative: int) -> float:
    """The exact two-sided sign test: ``positive`` seeds above 0 against ``negative`` below it
    (seeds at exactly 0 dropped before counting), binomial with p = ½ — exact McNemar on the two
    counts, which is the same test.

    >>> round(sign_test_p(9, 16), 3), round(sign_test_p(18, 7), 3), sign_test_p(0, 0)
    (0.23, 0.043, 1.0)
    """
    return mcnemar_p(positive, negative)


def sign_agreement(d: Sequence[float], pooled: float) -> dict[str, Any]:
    """Seeds whose difference has the sign of the pooled estimate (a 0 agrees with neither), and
    the sign test of the positive against the negative seeds (zeros dropped): how likely a split
    at least this uneven is when each seed is as likely to fall either side of 0."""
    sign = int(np.sign(pooled))
    agree = sum(1 for x in d if sign != 0 and int(np.sign(x)) == sign)
    positive, negative = sum(1 for x in d if x > 0), sum(1 for x in d if x < 0)
    return {
        "agree": agree,
        "seeds": len(d),
        "sign": sign,
        "positive": positive,
        "negative": negative,
        "sign_test_p": sign_test_p(positive, negative),
    }


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


# --------------------------------------------------------------------------------------------
# Power


def t_test_power(effect: float, sd: float, seeds: int, alpha: float) -> float:
    """Power of the two-sided one-sample t-test at ``alpha`` with ``seeds`` seeds when the
    per-seed differences are normal with this mean and standard deviation: ``P(|T'| > t_crit)``
    for the non-central t with ``seeds − 1`` df and non-centrality ``effect/sd·√seeds``, by
    quadrature over the chi distribution of the sample standard deviation."""
    if seeds < 2:
        return 0.0
    if sd <= 0:
        return 1.0 if effect != 0 else alpha
    df = seeds - 1
    delta = abs(effect) / sd * math.sqrt(seeds)
    crit = t_quantile(1 - alpha / 2, df)
    # W = sqrt(V/df), V ~ chi²(df): density of u = sqrt(V) ∝ u^(df−1) e^(−u²/2).
    u = np.linspace(1e-9, math.sqrt(df) + 12, 20001)
    logf = (df - 1) * np.log(u) - u**2 / 2 - ((df / 2 - 1) * math.log(2) + math.lgamma(df / 2))
    f = np.exp(logf)
    w = u / math.sqrt(df)
    tail = (1 - normal_cdf(crit * w - delta)) + normal_cdf(-crit * w - delta)
    return float(np.trapezoid(f * tail, u) / np.trapezoid(f, u))


def chi2_cdf(x: float, df: int) -> float:
    """``P(X ≤ x)`` for ``X ~ χ²(df)``: the regularised lower incomplete gamma ``P(df/2, x/2)``
    (series below ``a + 1``, Lentz's continued fraction above; Numerical Recipes §6.2).

    >>> round(chi2_cdf(2 * -math.log(0.8), 2), 6)  # χ²(2) is exponential with mean 2
    0.2
    """
    if x <= 0:
        return 0.0
    a, z = df / 2, x / 2
    lg = math.lgamma(a)
    if z < a + 1:
        term = total = 1 / a
        n = a
        for _ in range(10_000):
            n += 1
            term *= z / n
            total += term
            if abs(term) < abs(total) * 1e-16:
                break
        return total * math.exp(-z + a * math.log(z) - lg)
    b = z + 1 - a
    c, d = 1 / 1e-300, 1 / b
    h = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = 1e-300 if abs(d) < 1e-300 else d
        c = b + an / c
        c = 1e-300 if abs(c) < 1e-300 else c
        d = 1 / d
        h *= d * c
        if abs(d * c - 1) < 1e-16:
            break
    return 1 - math.exp(-z + a * math.log(z) - lg) * h


def chi2_quantile(q: float, df: int) -> float:
    """The ``q`` quantile of χ²(df), by bisection on :func:`chi2_cdf`."""
    lo, hi = 0.0, max(1.0, 2.0 * df)
    while chi2_cdf(hi, df) < q:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if chi2_cdf(mid, df) < q else (lo, mid)
    return (lo + hi) / 2


def sd_upper_bound(sd: float, seeds: int, *, level: float = 0.8) -> float:
    """The one-sided ``level`` upper confidence bound of a standard deviation estimated from
    ``seeds`` values: ``sd·√((k−1)/χ²_{1−level}(k−1))`` — about 2× the estimate at 3 seeds (2 df):
    what planning on three development seeds' spread must allow for.

    >>> round(sd_upper_bound(1.0, 3), 3)
    2.117
    """
    df = seeds - 1
    return sd * math.sqrt(df / chi2_quantile(1 - level, df))


def every_seed_positive(effect: float, sd: float, seeds: int) -> float:
    """The chance that all ``seeds`` per-seed differences are positive when each is normal with mean
    ``effect`` and standard deviation ``sd`` (independent seeds): ``Φ(effect/sd)^seeds`` — what a
    registered ``every_seed_positive`` rule costs on top of the test.

    >>> round(every_seed_positive(1.0, 1.0, 5), 3), every_seed_positive(-1.0, 0.0, 3)
    (0.422, 0.0)
    """
    if sd <= 0:
        return 1.0 if effect > 0 else 0.0
    return float(normal_cdf(np.array(effect / sd)) ** seeds)


def seeds_needed(
    effect: float,
    sd: float,
    *,
    alpha: float,
    comparisons: int = 1,
    power: float = 0.8,
    max_seeds: int = 1000,
) -> int | None:
    """The fewest seeds (≥ 2) whose two-sided one-sample t-test at ``alpha/comparisons`` (Holm's
    worst case: the smallest p meets α/m) reaches ``power`` for a mean per-seed difference
    ``effect`` with seed-to-seed standard deviation ``sd``; None when ``max_seeds`` do not, or when
    ``effect`` is not positive: a study confirms a primary only with a positive pooled estimate, so
    no number of seeds confirms an effect the development seeds put at or below 0.

    >>> seeds_needed(-1.0, 1.0, alpha=0.05) is None, seeds_needed(1.0, 1.0, alpha=0.05) > 2
    (True, True)
    """
    level = alpha / comparisons
    if effect <= 0:
        return None

    def enough(k: int) -> bool:
        return t_test_power(effect, sd, k, level) >= power

    # The power rises with the seeds: double to a count that is enough, then bisect below it
    # (a few dozen power evaluations, not one per count up to max_seeds).
    lo, hi = 1, 2  # lo: not enough (one seed has no test); hi: the count tried
    while not enough(hi):
        if hi >= max_seeds:
            return None
        lo, hi = hi, min(2 * hi, max_seeds)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if enough(mid) else (mid, hi)
    return hi
