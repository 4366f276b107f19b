"""Sequential stopping for a study's primaries: group-sequential boundaries on the seed-level
t-statistic, so a study stops when its answer is clear and keeps its type-I error at α.

A study with interim looks tests each primary at seed counts ``n_1 < … < n_K`` (the registered
total last).  At look ``k`` the statistic is the one-sample t-statistic of the first ``n_k``
per-seed differences ``d_s`` (``n_k − 1`` degrees of freedom); the primary is rejected at look ``k``
iff ``|t_k| ≥ c_k`` (two-sided), and the study stops there.

- **Boundaries for z** (the canonical joint distribution: independent increments, ``Corr(Z_j,
  Z_k) = √(n_j/n_k)``), with the crossing probabilities computed by the recursive numerical
  integration of Armitage, McPherson & Rowe (1969) on Jennison & Turnbull's grid (*Group
  Sequential Methods with Applications to Clinical Trials*, 2000, ch. 19;
  :func:`exit_probabilities`): the classical O'Brien–Fleming boundaries ``C/√t_k``
  (:func:`obrien_fleming`), and Lan–DeMets alpha spending of O'Brien–Fleming type
  (:func:`obf_spending`, :func:`lan_demets`), which the study uses: the boundary at each look
  spends ``α(t_k) − α(t_{k−1})`` at the look's actual information fraction ``t_k = n_k/N``, so a
  look may fall at any count (seeds in flight at a look finish and join the next one) and the
  final analysis spends what is left.
- **On the t scale** (:class:`SequentialDesign`): boundaries derived for z are anti-conservative
  for t on few seeds, so each look's z boundary is converted through its nominal two-sided tail
  probability to the t quantile with ``n_k − 1`` df (Jennison & Turnbull's significance-level
  approach, §3.8), then *checked* by a deterministic Monte-Carlo simulation of null studies at the
  planned counts (normal differences; optionally also a previous study's, resampled and centred:
  :func:`resampled`); if a simulated rejection rate is more than 2 Monte-Carlo standard errors
  from α, a common scale factor on the t boundaries is calibrated on the same simulated studies
  (the ``1 − α`` quantile of ``max_k |t_k|/c_k``, the largest any sampler needs).
  :meth:`SequentialDesign.calibrated` runs it at registration (under a second a sampler); the
  registration records the factor and the check (:meth:`SequentialDesign.to_dict`).
- **Futility, non-binding**: at an interim look with at least ``futility_from`` of the planned
  seeds (default one half), a primary whose pooled estimate is at or below 0 stops for futility
  (Wieand, Schroeder & O'Fallon, 1994: the estimate on the wrong side at half the information).
  A primary is confirmed only with a positive estimate, and from half the seeds one at or below 0
  seldom ends above the final boundary: at the power a study is planned for, the rule costs a
  fraction of a point of it (:func:`power`).  The efficacy boundaries are computed without it, so
  ignoring it never raises the type-I error, and obeying it can only lower it: it only removes
  paths that might later have rejected.
- **At a look** :func:`interim_decision` says only ``"stop for efficacy"``, ``"stop for
  futility"`` or ``"go on"`` (an interim look is an unblinding: no estimate is shown before the
  end); :func:`final_analysis` gives the estimate, the stage-wise-ordering p-value (Jennison &
  Turnbull §8.4) and the repeated confidence interval (ch. 9) at the stopping look, on the
  calibrated t scale.
- :func:`simulate` — the rejection rate of a design over simulated studies, vectorised, for any
  sampler of per-seed differences and any schedule of looks; :func:`power` — the same at a planned
  effect with normal differences, for planning.
- **Several primaries**: each is monitored with its own design at ``α/m`` (Bonferroni at the
  interims, as the report's intervals are), stops when its own boundary or futility rule says so
  (its later seeds do not reopen it), and the study stops when every primary has; at the end
  Holm's step-down runs over the primaries' stage-wise p-values, each a valid p-value of its own.

Example: looks at 8, 16, 24, 32 and 40 seeds, two-sided α 0.05 (the z boundaries of five
equally spaced looks are the published ones: Jennison & Turnbull Table 2.3 gives the classical
O'Brien–Fleming constant 2.040; Lan–DeMets spending of O'Brien–Fleming type, e.g. rpact's
``getDesignGroupSequential(kMax = 5, alpha = 0.05, sided = 2, typeOfDesign = "asOF")``)::

    >>> [round(float(z), 2) for z in obrien_fleming([0.2, 0.4, 0.6, 0.8, 1.0], 0.05)]
    [4.56, 3.23, 2.63, 2.28, 2.04]
    >>> [round(float(z), 3) for z in lan_demets([0.2, 0.4, 0.6, 0.8, 1.0], 0.05)]
    [4.877, 3.357, 2.68, 2.29, 2.031]
    >>> plan = SequentialDesign.calibrated([8, 16, 24, 32, 40], 0.05)
    >>> plan.check["samplers"]["normal"]["rate"], round(plan.scale, 4)
    (0.051515, 1.0066)
    >>> [round(float(c), 2) for c in plan.boundaries(plan.looks)]
    [15.7, 4.22, 2.96, 2.43, 2.11]
    >>> d = [0.02, -0.01, 0.03, 0.0, 0.01, 0.02, -0.02, 0.01, 0.02, 0.03]
    >>> interim_decision(d, [10], plan)  # the first look came at 10 seeds: spends α(10/40)
    'go on'
    >>> r = final_analysis(d, [10], plan, final=True)  # had the study ended there
    >>> r["rejected"], round(r["p_value"], 3)
    (False, 0.068)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import numpy as np

from burnqed.study.stats import t_abs_cdf

EFFICACY, FUTILITY, GO_ON = "stop for efficacy", "stop for futility", "go on"
DECISIONS = (EFFICACY, FUTILITY, GO_ON)

# A sampler of per-seed differences: ``sampler(rng, (studies, seeds))`` → an array of that shape.
Sampler = Callable[[np.random.Generator, tuple[int, int]], np.ndarray]

# The grid of Jennison & Turnbull §19.2: 6r − 1 points per look (12r − 1 with Simpson's midpoints);
# r = 32 puts the crossing probabilities within about 1e-8 of their limit.
GRID_R = 32

_erfc = np.frompyfunc(math.erfc, 1, 1)


def _root(g: Callable[[float], float], lo: float, hi: float, *, tol: float = 1e-13) -> float:
    """The root of the decreasing ``g`` in ``[lo, hi]`` (``hi`` when ``g(hi) ≥ 0``, ``lo`` when
    ``g(lo) ≤ 0``): regula falsi with the Illinois step, a dozen evaluations where bisection takes
    forty (for a boundary each is a recursion), to ``tol`` relative to ``max(1, |x|)``."""
    g_lo, g_hi = g(lo), g(hi)
    if g_hi >= 0:  # beyond the bracket: the boundary is out of reach either way
        return hi
    if g_lo <= 0:
        return lo
    side = 0
    x = lo
    for _ in range(200):
        x = (lo * g_hi - hi * g_lo) / (g_hi - g_lo)
        gx = g(x)
        if abs(gx) < 1e-15 or hi - lo < tol * max(1.0, abs(x)):
            break
        if gx > 0:
            lo, g_lo = x, gx
            if side == 1:
                g_hi /= 2
            side = 1
        else:
            hi, g_hi = x, gx
            if side == -1:
                g_lo /= 2
            side = -1
    return x


# --------------------------------------------------------------------------------------------
# The normal and Student's t tails, accurate far out (the first looks' boundaries sit at 1e-6 and
# below, where 1 − cdf would have lost every digit)


def norm_sf(x: np.ndarray | float) -> np.ndarray:
    """``P(Z ≥ x)`` for a standard normal Z, elementwise, to full relative precision in the tail."""
    return np.asarray(_erfc(np.asarray(x, dtype=float) / math.sqrt(2)), dtype=float) / 2


def norm_isf(p: float) -> float:
    """The x with ``P(Z ≥ x) = p``, ``0 < p < 1`` (on the log of the tail: :func:`_root`)."""
    if not 0 < p < 1:
        raise ValueError(f"p must be in (0, 1), got {p}")
    return _root(lambda x: _log(float(norm_sf(x))) - math.log(p), -40.0, 40.0)


def _log(p: float) -> float:
    return math.log(max(p, 1e-320))  # a tail that underflows stays below any target


def _phi(x: np.ndarray) -> np.ndarray:
    return np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


def t_tail(t: np.ndarray | float, df: int) -> np.ndarray:
    """Two-sided ``P(|T| ≥ |t|)`` for ``T ~ t(df)``, elementwise, accurate in the far tail.

    Far out (``t² > df``) it is the regularised incomplete beta ``I_x(df/2, 1/2)`` at ``x = df/(df
    + t²)``, summed as ``x^a/(a·B(a, 1/2)) · Σ_n a/(a+n) · (1/2)_n/n! · x^n`` (x ≤ ½: 60 terms
    reach double precision); nearer the centre it is ``1 −`` :func:`burnqed.study.stats.t_abs_cdf`,
    which has every digit there.

    >>> round(float(t_tail(2.228138852, 10)), 9), float(t_tail(1e6, 7)) > 0
    (0.05, True)
    """
    if int(df) != df or df < 1:
        raise ValueError(f"df must be a positive integer, got {df}")
    t = np.abs(np.asarray(t, dtype=float))
    a = df / 2
    with np.errstate(divide="ignore", invalid="ignore"):
        x = df / (df + t * t)
        term = np.ones_like(x)
        total = np.ones_like(x)
        coef = 1.0
        for n in range(1, 61):
            coef *= (n - 0.5) / n
            term = coef * a / (a + n) * x**n
            total = total + term
        log_pre = (
            a * np.log(x) - math.log(a) - (math.lgamma(a) + math.lgamma(0.5) - math.lgamma(a + 0.5))
        )
        far = np.exp(log_pre) * total
    near = 1.0 - t_abs_cdf(np.where(np.isfinite(t), t, 0.0), df)
    return np.where(np.isinf(t), 0.0, np.where(x <= 0.5, far, near))


def t_isf(p: float, df: int) -> float:
    """The ``t ≥ 0`` with two-sided ``P(|T| ≥ t) = p`` for ``T ~ t(df)`` (on the logs of the tail
    and of t, where a far tail is nearly a power of t: :func:`_root`); infinite when ``p`` is 0."""
    if p <= 0:
        return math.inf
    if p >= 1:
        return 0.0
    return math.exp(_root(lambda u: _log(float(t_tail(math.exp(u), df))) - math.log(p), -20, 70))


# --------------------------------------------------------------------------------------------
# Crossing probabilities of the canonical joint distribution (Jennison & Turnbull ch. 19)


def _grid(lo: float, hi: float, mean: float, r: int) -> tuple[np.ndarray, np.ndarray]:
    """Jennison & Turnbull's grid for one look, trimmed to the continuation region ``(lo, hi)``,
    with Simpson's midpoints and weights; empty when the region is."""
    i = np.arange(1, 6 * r, dtype=float)
    x = mean + np.where(
        i < r,
        -3 - 4 * np.log(r / i),
        np.where(i <= 5 * r, -3 + 3 * (i - r) / (2 * r), 3 + 4 * np.log(r / (6 * r - i))),
    )
    a, b = max(lo, x[0]), min(hi, x[-1])
    if not a < b:
        return np.empty(0), np.empty(0)
    y = np.unique(np.concatenate([[a], x[(x > a) & (x < b)], [b]]))
    width = np.diff(y)
    z = np.empty(2 * len(y) - 1)
    z[0::2], z[1::2] = y, (y[:-1] + y[1:]) / 2
    w = np.zeros_like(z)
    w[0:-1:2] += width / 6
    w[1::2] += 4 * width / 6
    w[2::2] += width / 6
    return z, w


def _exits_at(h, z, info_prev, info, drift, upper, lower) -> tuple[float, float]:
    """Probabilities of continuing to the previous look with ``Z`` in its grid (``h``: density ×
    weight on ``z``) and then being above ``upper``, below ``lower`` at this look."""
    delta = info - info_prev
    base = z * math.sqrt(info_prev) + drift * delta  # mean of Z_k √I_k given Z_{k-1} = z
    sd = math.sqrt(delta)
    up = float(h @ norm_sf((upper * math.sqrt(info) - base) / sd))
    down = float(h @ norm_sf((base - lower * math.sqrt(info)) / sd))
    return up, down


def _advance(h, z, info_prev, info, drift, upper, lower, r) -> tuple[np.ndarray, np.ndarray]:
    """The weighted density of ``Z_k`` on this look's continuation region, from the previous."""
    mean = drift * math.sqrt(info)
    z_new, w_new = _grid(lower, upper, mean, r)
    if not len(z_new) or not len(z):
        return np.empty(0), np.empty(0)
    delta = info - info_prev
    sd = math.sqrt(delta)
    u = (z_new[:, None] * math.sqrt(info) - z[None, :] * math.sqrt(info_prev) - drift * delta) / sd
    dens = (math.sqrt(info) / sd) * (_phi(u) @ h)
    return w_new * dens, z_new


def _start(info, drift, upper, lower, r) -> tuple[float, float, np.ndarray, np.ndarray]:
    mean = drift * math.sqrt(info)
    up, down = float(norm_sf(upper - mean)), float(norm_sf(mean - lower))
    z, w = _grid(lower, upper, mean, r)
    return up, down, w * _phi(z - mean), z


def exit_probabilities(
    upper: Sequence[float],
    lower: Sequence[float],
    information: Sequence[float],
    *,
    drift: float = 0.0,
    r: int = GRID_R,
) -> tuple[np.ndarray, np.ndarray]:
    """Per look, the probability that a path first leaves the continuation region
    ``(lower_k, upper_k)`` at that look, above and below: ``Z_k`` with mean ``drift·√I_k`` and
    independent increments (``information`` on any scale: seed counts will do; ``drift`` is the
    mean of Z per √information).  ``±inf`` boundaries are allowed.

    >>> up, down = exit_probabilities([1.96], [-1.96], [1.0])
    >>> round(float(up[0] + down[0]), 4)
    0.05
    """
    upper, lower = np.asarray(upper, float), np.asarray(lower, float)
    info = np.asarray(information, float)
    if np.any(np.diff(info) <= 0) or info[0] <= 0:
        raise ValueError(f"information must be positive and increase, got {info.tolist()}")
    up, down = np.zeros(len(info)), np.zeros(len(info))
    up[0], down[0], h, z = _start(info[0], drift, upper[0], lower[0], r)
    for k in range(1, len(info)):
        if len(z):
            up[k], down[k] = _exits_at(h, z, info[k - 1], info[k], drift, upper[k], lower[k])
            if k + 1 < len(info):
                h, z = _advance(h, z, info[k - 1], info[k], drift, upper[k], lower[k], r)
    return up, down


def obrien_fleming(
    fractions: Sequence[float], alpha: float, *, sided: int = 2, r: int = GRID_R
) -> np.ndarray:
    """The classical O'Brien–Fleming z boundaries ``C/√t_k`` at information fractions
    ``t_k`` (the last 1), with ``C`` such that the overall type-I error is ``alpha`` (two-sided:
    symmetric, ``alpha`` in all; one-sided: upper only).  Needs every look's fraction in advance."""
    t = np.asarray(fractions, float)
    if sided not in (1, 2):
        raise ValueError(f"sided must be 1 or 2, got {sided}")

    def excess(c: float) -> float:  # on the log scale, where the error is nearly linear in c
        up, down = exit_probabilities(
            c / np.sqrt(t), -c / np.sqrt(t) if sided == 2 else np.full(len(t), -np.inf), t, r=r
        )
        return math.log(float(up.sum() + down.sum())) - math.log(alpha)

    return _root(excess, 0.1, 20.0) / np.sqrt(t)


def obf_spending(fractions: Sequence[float] | float, alpha: float, *, sided: int = 2) -> np.ndarray:
    """The Lan–DeMets spending function of O'Brien–Fleming type: the type-I error spent by
    information fraction ``t``.  Two-sided ``alpha`` (half to each side, symmetric): ``α(t) = 4 −
    4Φ(z_{1−α/4}/√t)`` in all, i.e. ``2 − 2Φ(z_{1−α/4}/√t)`` a side, gsDesign's ``sfLDOF`` at the
    one-sided ``α/2`` (keaven.github.io/gsDesign/reference/sfLDOF.html: ``f(t; α) = 2 −
    2Φ(Φ⁻¹(1 − α/2)/√t)`` for one-sided α; gsMeanFreq's two-sided ``OBF``: ``4 − 4Φ(Φ⁻¹(1 −
    α/4)/√t)``).  One-sided: ``2 − 2Φ(z_{1−α/2}/√t)``.  ``α(t) = α`` for ``t ≥ 1``.

    >>> round(float(obf_spending(0.5, 0.05)), 5)
    0.00305
    """
    t = np.asarray(fractions, float)
    per_side = alpha / sided
    z = norm_isf(per_side / 2)
    with np.errstate(divide="ignore"):
        spent = sided * 2 * norm_sf(z / np.sqrt(np.maximum(t, 0.0)))
    return np.where(t >= 1, alpha, np.where(t <= 0, 0.0, np.minimum(spent, alpha)))


def spending_boundaries(
    information: Sequence[float], spent: Sequence[float], *, sided: int = 2, r: int = GRID_R
) -> np.ndarray:
    """z boundaries at looks with this ``information`` that spend the cumulative type-I error
    ``spent[k]`` by look ``k``: look k's boundary leaves ``spent[k] − spent[k−1]`` to cross there
    for the first time (two-sided: symmetric, half above and half below; one-sided: above, none
    below).  A look that spends nothing has an infinite boundary."""
    info = np.asarray(information, float)
    spent = np.asarray(spent, float)
    if len(spent) != len(info):
        raise ValueError("one cumulative spend per look")
    if np.any(np.diff(spent) < -1e-15):
        raise ValueError(f"cumulative spend must not decrease, got {spent.tolist()}")
    increments = np.diff(np.concatenate([[0.0], spent]))
    bounds = np.empty(len(info))

    def low(b: float) -> float:
        return -b if sided == 2 else -math.inf

    bounds[0] = norm_isf(increments[0] / sided) if increments[0] > 0 else math.inf
    h, z = _start(info[0], 0.0, bounds[0], low(bounds[0]), r)[2:]
    for k in range(1, len(info)):
        target = increments[k]
        if target <= 0 or not len(z):
            bounds[k] = math.inf
        else:

            def excess(b: float, k: int = k, h=h, z=z, target: float = target) -> float:
                up, down = _exits_at(h, z, info[k - 1], info[k], 0.0, b, low(b))
                return math.log(max(up + down, 1e-300)) - math.log(target)

            bounds[k] = _root(excess, 0.0, 37.0)
        if k + 1 < len(info):
            h, z = _advance(h, z, info[k - 1], info[k], 0.0, bounds[k], low(bounds[k]), r)
    return bounds


def lan_demets(
    fractions: Sequence[float], alpha: float, *, sided: int = 2, r: int = GRID_R
) -> np.ndarray:
    """z boundaries of O'Brien–Fleming-type alpha spending (:func:`obf_spending`) at these
    information fractions (each look spends ``α(t_k) − α(t_{k−1})``; a fraction of 1 spends the
    rest)."""
    t = np.asarray(fractions, float)
    return spending_boundaries(t, obf_spending(t, alpha, sided=sided), sided=sided, r=r)


# --------------------------------------------------------------------------------------------
# The seed-level t-statistic at each look


def t_statistics(d: np.ndarray, counts: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """The mean and the one-sample t-statistic of the first ``n_k`` columns of ``d`` (studies ×
    seeds, or one study's seeds) for each count: arrays ``(..., K)``.  A look whose differences
    are all equal has t = 0 at mean 0, else ±inf."""
    d = np.asarray(d, dtype=float)
    means, ts = [], []
    for n in counts:
        x = d[..., :n]
        m = x.mean(axis=-1)
        se = np.sqrt(((x - m[..., None]) ** 2).sum(axis=-1) / (n - 1) / n)
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(se > 0, m / np.where(se > 0, se, 1.0), np.sign(m) * np.inf)
        means.append(m)
        ts.append(np.where(np.isnan(t), 0.0, t))
    return np.stack(means, axis=-1), np.stack(ts, axis=-1)


def _check_counts(counts: Sequence[int]) -> list[int]:
    c = [int(n) for n in counts]
    if not c or c[0] < 2 or any(b <= a for a, b in pairwise(c)):
        raise ValueError(f"look counts must increase from at least 2 seeds, got {list(counts)}")
    return c


# --------------------------------------------------------------------------------------------
# The design a registration declares


@dataclass(frozen=True)
class SequentialDesign:
    """Looks at the planned seed counts ``looks`` (the registered total last), two-sided
    ``alpha``, O'Brien–Fleming-type Lan–DeMets spending converted to the t scale and multiplied by
    ``scale`` (1 unless the Monte-Carlo check failed: ``check``), futility from ``futility_from``
    of the planned seeds (None: no futility rule)."""

    looks: tuple[int, ...]
    alpha: float
    scale: float = 1.0
    futility_from: float | None = 0.5
    check: Mapping[str, Any] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "looks", tuple(_check_counts(self.looks)))
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must be in (0, 1), got {self.alpha}")
        if self.futility_from is not None and not 0 <= self.futility_from <= 1:
            raise ValueError(f"futility_from must be in [0, 1], got {self.futility_from}")

    @property
    def total(self) -> int:
        return self.looks[-1]

    def is_final(self, counts: Sequence[int]) -> bool:
        return counts[-1] >= self.total

    def spent(self, counts: Sequence[int], *, final: bool | None = None) -> np.ndarray:
        """Cumulative two-sided α spent by each look at these actual counts: ``α(n_k/N)``, and all
        of it at the final look (``final``: default, when the last count reaches the total)."""
        counts = _check_counts(counts)
        spent = obf_spending(np.minimum(np.asarray(counts, float) / self.total, 1.0), self.alpha)
        if self.is_final(counts) if final is None else final:
            spent[-1] = self.alpha
        return spent

    def z_boundaries(self, counts: Sequence[int], *, final: bool | None = None) -> np.ndarray:
        """The z boundaries at looks with these actual seed counts (information ∝ seeds)."""
        return spending_boundaries(np.asarray(counts, float), self.spent(counts, final=final))

    def boundaries(self, counts: Sequence[int], *, final: bool | None = None) -> np.ndarray:
        """The t boundaries at looks with these actual counts: each z boundary's nominal
        two-sided tail as a t quantile with ``n_k − 1`` df, times ``scale``."""
        z = self.z_boundaries(counts, final=final)
        return np.array(
            [
                self.scale * t_isf(2 * float(norm_sf(b)), n - 1)
                for b, n in zip(z, counts, strict=True)
            ]
        )

    def z_equivalent(self, t: float, seeds: int) -> float:
        """The z with the same nominal tail as ``t`` on ``seeds − 1`` df, as calibrated:
        ``|t| ≥ c_k`` iff this is ``≥`` the look's z boundary."""
        p = float(t_tail(abs(t) / self.scale, seeds - 1))
        return math.inf if p <= 0 else norm_isf(p / 2)

    def to_dict(self) -> dict[str, Any]:
        """What a registration records (:meth:`from_dict` reads it back)."""
        return {
            "looks": list(self.looks),
            "alpha": self.alpha,
            "spending": "Lan-DeMets, O'Brien-Fleming type, two-sided",
            "statistic": "one-sample t on the per-seed differences, nominal levels as t quantiles",
            "scale": self.scale,
            "futility_from": self.futility_from,
            "check": dict(self.check) if self.check else None,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SequentialDesign:
        return cls(
            looks=tuple(d["looks"]),
            alpha=float(d["alpha"]),
            scale=float(d.get("scale", 1.0)),
            futility_from=d.get("futility_from", 0.5),
            check=d.get("check"),
        )

    @classmethod
    def calibrated(
        cls,
        looks: Sequence[int],
        alpha: float,
        *,
        futility_from: float | None = 0.5,
        null_samplers: Mapping[str, Sampler] | None = None,
        studies: int = 200_000,
        seed: int = 0,
    ) -> SequentialDesign:
        """The design at the planned ``looks``, its t boundaries checked by ``studies`` simulated
        null studies per sampler of per-seed differences (each with ``np.random.default_rng(seed)``:
        the same figures on every run).  By default one sampler, standard normal differences: the
        t-statistic's null distribution does not depend on their spread, so it stands for every
        normal study.  ``null_samplers`` replaces it (name → sampler, e.g. ``{"normal":
        standard_normal, "previous study": resampled(d)}``): differences resampled from a previous
        study of the same comparison carry its skew and its ties, which the normal does not.

        The check passes when every sampler's rejection rate is within 2 Monte-Carlo SE of
        ``alpha`` (within 1 SE the calibration would add as much noise as it removes; beyond 2 the
        conversion is off).  Otherwise the t boundaries are multiplied by the largest factor any
        sampler needs to reject at exactly ``alpha`` on its studies, so that none exceeds it.
        ``check`` records it all: per sampler the rate before, the factor it needs and the rate
        after."""
        samplers = dict(null_samplers) if null_samplers else {"normal": standard_normal}
        plain = cls(tuple(looks), alpha, 1.0, futility_from)
        bounds = plain.boundaries(plain.looks)
        se = math.sqrt(alpha * (1 - alpha) / studies)
        ratios = {k: _max_ratio(f, plain.looks, bounds, studies, seed) for k, f in samplers.items()}
        rates = {k: float(np.mean(r >= 1.0)) for k, r in ratios.items()}
        passed = all(abs(rate - alpha) <= 2 * se for rate in rates.values())
        # Rejected iff max_k |t_k|/c_k ≥ 1; with the boundaries scaled by λ, iff it is ≥ λ: the
        # factor a sampler needs is the 1 − α quantile of that maximum over its studies.
        needs = {k: float(np.quantile(r, 1 - alpha, method="higher")) for k, r in ratios.items()}
        scale = 1.0 if passed else max(needs.values())
        check = {
            "studies": studies,
            "seed": seed,
            "se": se,
            "passed": passed,
            "scale": scale,
            "samplers": {
                k: {"rate": rates[k], "needs": needs[k], "rate_after": float(np.mean(r >= scale))}
                for k, r in ratios.items()
            },
        }
        return cls(plain.looks, alpha, scale, futility_from, check)


def standard_normal(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    """Standard normal per-seed differences: :meth:`SequentialDesign.calibrated`'s null sampler."""
    return rng.standard_normal(shape)


def resampled(values: Sequence[float]) -> Sampler:
    """A sampler that draws per-seed differences with replacement from ``values`` centred at their
    mean: a previous study's differences under no effect, with their skew, spread and ties."""
    centred = np.asarray(values, dtype=float)
    centred = centred - centred.mean()

    def sampler(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
        return rng.choice(centred, size=shape)

    return sampler


def _max_ratio(
    sampler: Sampler, counts: Sequence[int], bounds: np.ndarray, studies: int, seed: int
) -> np.ndarray:
    """``max_k |t_k|/c_k`` per simulated study (in chunks, one RNG stream: deterministic)."""
    rng = np.random.default_rng(seed)
    out = []
    for start in range(0, studies, 20_000):
        n = min(20_000, studies - start)
        _, t = t_statistics(sampler(rng, (n, counts[-1])), counts)
        out.append(np.max(np.abs(t) / bounds, axis=-1))
    return np.concatenate(out)


# --------------------------------------------------------------------------------------------
# At a look, and at the end


def _one_study(differences: Sequence[float], counts: Sequence[int]) -> tuple[np.ndarray, list[int]]:
    d = np.asarray(differences, dtype=float)
    counts = _check_counts(counts)
    if counts[-1] != len(d):
        raise ValueError(
            f"the last look's count {counts[-1]} is not the number of differences {len(d)}"
        )
    return d, counts


def interim_decision(
    differences: Sequence[float], counts: Sequence[int], design: SequentialDesign
) -> str:
    """At an interim look: ``"stop for efficacy"`` when ``|t| ≥`` the look's boundary (either
    sign: the two-sided test rejects; whether the primary is *confirmed* needs a positive estimate
    and is the final analysis's to say), ``"stop for futility"`` when the look has at least
    ``futility_from`` of the planned seeds and the mean difference is at or below 0, else ``"go
    on"``.  ``differences``: every seed finished by this look, in the order they became available
    (look j's are the first ``counts[j]``); ``counts``: the seed counts of every look so far, this
    one last.  Nothing else is returned: the runner shows only the decision.  The final look
    (the registered total) is :func:`final_analysis`'s."""
    d, counts = _one_study(differences, counts)
    if design.is_final(counts):
        raise ValueError(
            f"{counts[-1]} seeds is the final look (the design's total is {design.total}): "
            "use final_analysis"
        )
    mean, t = t_statistics(d, counts[-1:])
    if abs(float(t[0])) >= float(design.boundaries(counts)[-1]):
        return EFFICACY
    futility_look = (
        design.futility_from is not None and counts[-1] >= design.futility_from * design.total
    )
    if futility_look and float(mean[0]) <= 0:
        return FUTILITY
    return GO_ON


def stagewise_p(
    z: float, counts: Sequence[int], design: SequentialDesign, *, final: bool | None = None
) -> float:
    """Two-sided p-value of the stage-wise ordering (Jennison & Turnbull §8.4) for a study that
    stopped at the last of ``counts`` with z-equivalent ``z``: the chance under no effect of
    crossing at an earlier look, or of reaching this one with ``|Z| ≥ |z|``, i.e. ``α(t_{k−1}) +
    P(continue to k, |Z_k| ≥ |z|)``.  At most ``α`` iff the study rejected there."""
    counts = _check_counts(counts)
    upper = np.concatenate([design.z_boundaries(counts, final=final)[:-1], [abs(z)]])
    up, down = exit_probabilities(upper, -upper, np.asarray(counts, float))
    return min(1.0, float(up.sum() + down.sum()))


def final_analysis(
    differences: Sequence[float],
    counts: Sequence[int],
    design: SequentialDesign,
    *,
    final: bool | None = None,
) -> dict[str, Any]:
    """The analysis at the look the study stopped at (the last of ``counts``: an interim look
    that stopped it, or the final one), accounting for the looks before it:

    - ``estimate``, ``se``, ``t`` (``seeds − 1`` df), the look's t ``boundary`` and ``rejected``
      (``|t| ≥ boundary``; "confirmed" further needs a positive estimate);
    - ``p_value``: :func:`stagewise_p` of the calibrated z-equivalent of t; at an interim stop
      without a crossing (futility) at least ``alpha`` — such a study rejects nothing, and a
      futility stop is not an outcome the boundaries order;
    - ``low``, ``high``: the repeated confidence interval at level ``1 − alpha`` (Jennison &
      Turnbull ch. 9): ``estimate ± boundary·se``, which covers with probability ``1 − alpha``
      simultaneously at every look, so it stays valid whichever look stopped the study.

    ``final``: whether this look is the final analysis (spends all of α): by default when the
    last count reaches the design's total; pass True when the study ended short of it (aborted
    seeds)."""
    d, counts = _one_study(differences, counts)
    is_final = design.is_final(counts) if final is None else final
    n = counts[-1]
    mean, t = t_statistics(d, [n])
    estimate, t = float(mean[0]), float(t[0])
    se = float(d.std(ddof=1) / math.sqrt(n))
    boundary = float(design.boundaries(counts, final=is_final)[-1])
    rejected = abs(t) >= boundary
    p = stagewise_p(design.z_equivalent(t, n), counts, design, final=is_final)
    if not is_final and not rejected:
        p = max(p, design.alpha)
    return {
        "look": len(counts),
        "seeds": n,
        "counts": counts,
        "final": is_final,
        "estimate": estimate,
        "se": se,
        "t": t,
        "df": n - 1,
        "boundary": boundary,
        "rejected": bool(rejected),
        "p_value": p,
        "level": 1 - design.alpha,
        "low": estimate - boundary * se,
        "high": estimate + boundary * se,
    }


# --------------------------------------------------------------------------------------------
# Simulated studies


def simulate(
    design: SequentialDesign,
    sampler: Sampler,
    *,
    counts: Sequence[int] | None = None,
    studies: int = 10_000,
    seed: int = 0,
    futility: bool = False,
) -> dict[str, Any]:
    """Run ``studies`` simulated studies of the design, vectorised: each draws its per-seed
    differences from ``sampler`` and looks at ``counts`` (default the planned looks; the last is
    the final analysis), stopping at the first look whose ``|t|`` reaches its boundary — and,
    with ``futility``, at an interim look the futility rule stops (binding: the power it leaves).
    Returns the rejection ``rate`` (two-sided), its Monte-Carlo ``se``, ``positive`` (rejections
    with a positive estimate: confirmations), per look the fraction stopping for ``efficacy`` and
    for ``futility``, and the ``expected_seeds``.  Under no effect and without futility the rate
    is the type-I error."""
    counts = _check_counts(design.looks if counts is None else counts)
    bounds = design.boundaries(counts, final=True)
    interim_futile = [
        futility
        and design.futility_from is not None
        and k + 1 < len(counts)
        and n >= design.futility_from * design.total
        for k, n in enumerate(counts)
    ]
    rng = np.random.default_rng(seed)
    efficacy = np.zeros(len(counts))
    futile = np.zeros(len(counts))
    positive = 0
    seeds_used = 0.0
    for start in range(0, studies, 20_000):
        n_studies = min(20_000, studies - start)
        mean, t = t_statistics(sampler(rng, (n_studies, counts[-1])), counts)
        alive = np.ones(n_studies, dtype=bool)
        stop_look = np.full(n_studies, len(counts) - 1)  # a study that never stops ends at the last
        for k in range(len(counts)):
            stop = alive & (np.abs(t[:, k]) >= bounds[k])
            efficacy[k] += stop.sum()
            positive += int((stop & (mean[:, k] > 0)).sum())
            if interim_futile[k]:
                futile_here = alive & ~stop & (mean[:, k] <= 0)
                futile[k] += futile_here.sum()
                stop |= futile_here
            stop_look[stop] = k
            alive &= ~stop
        seeds_used += float(np.asarray(counts)[stop_look].sum())
    rate = float(efficacy.sum() / studies)
    return {
        "studies": studies,
        "counts": counts,
        "rate": rate,
        "se": math.sqrt(max(rate * (1 - rate), 1e-12) / studies),
        "positive": positive / studies,
        "efficacy": (efficacy / studies).tolist(),
        "futility": (futile / studies).tolist(),
        "expected_seeds": seeds_used / studies,
    }


def power(
    design: SequentialDesign,
    effect: float,
    sd: float,
    *,
    counts: Sequence[int] | None = None,
    studies: int = 20_000,
    seed: int = 1,
    futility: bool = True,
) -> dict[str, Any]:
    """:func:`simulate` with normal per-seed differences of mean ``effect`` and standard
    deviation ``sd``: ``positive`` is the chance of confirming (a rejection with a positive
    estimate), ``expected_seeds`` what the study costs on average; ``futility`` applies the rule
    as if binding (the power a study that obeys it keeps)."""

    def sampler(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
        return effect + sd * rng.standard_normal(shape)

    return simulate(design, sampler, counts=counts, studies=studies, seed=seed, futility=futility)
