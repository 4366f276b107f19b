"""What a registered decision rule will do: its probability of being met, simulated at the planned
effects before any seed runs.

A rule that cannot be met is no test: "every seed positive" on k seeds has probability
``Φ(δ/σ)^k`` — below 1e-4 at 29 seeds for the learning study's value primary, whatever its
t-test's power — and a registration that prints such a number but runs anyway has decided its
answer in advance.  :func:`simulate_rule` runs the whole registered rule on simulated studies:
each primary's per-seed differences normal with its planned mean and spread
(``analysis.power.comparisons``: ``mean``, ``sd_planned``), a seed the design stops with the
planned probability (``analysis.power.abort_rate``) standing at its registered fallback
(``fallback_mean``, or exactly 0 for ``difference: 0``), the registered test on all the seeds,
Holm over the primaries, a positive pooled estimate, and ``every_seed_positive`` when registered.
``burnqed study register`` refuses a rule met with probability below :data:`MIN_PROBABILITY`.

The primaries are simulated independently (their seeds are the same, their differences are not
modelled as correlated: with positive correlation the chance that both are confirmed is higher,
so the figure errs low).  The Hartung–Knapp test is simulated as the t-test: with equal
within-seed variances, as the planned ones are, the two are the same statistic.  Simulations use a
fixed generator seed: a registration gives the same figure on every machine.

Example::

    >>> plans = {"a": {"mean": 0.02, "sd": 0.02, "fallback_mean": 0.0, "fallback_exact": True,
    ...                "abort_rate": 0.0}}
    >>> r = simulate_rule(plans, alpha=0.05, seeds=20, every_seed_positive=False, studies=4000)
    >>> r["met"] > 0.9
    True
    >>> simulate_rule(plans, alpha=0.05, seeds=20, every_seed_positive=True, studies=4000)["met"] < 0.05
    True
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from burnqed.study import stats

MIN_PROBABILITY = 0.5
STUDIES = 20_000
GENERATOR_SEED = 20261202


def holm_arrays(p: np.ndarray) -> np.ndarray:
    """Holm-adjusted p-values along the last axis (primaries) of ``p`` (studies × primaries)."""
    p = np.asarray(p, dtype=float)
    m = p.shape[-1]
    order = np.argsort(p, axis=-1, kind="stable")
    ranked = np.take_along_axis(p, order, axis=-1) * (m - np.arange(m))
    adjusted = np.minimum(1.0, np.maximum.accumulate(ranked, axis=-1))
    out = np.empty_like(adjusted)
    np.put_along_axis(out, order, adjusted, axis=-1)
    return out


def simulate_differences(
    plans: Mapping[str, Mapping[str, Any]], *, seeds: int, studies: int, rng: np.random.Generator
) -> dict[str, np.ndarray]:
    """Per primary, simulated per-seed differences (studies × seeds) at the plan: normal with its
    mean and spread; a stopped seed (one draw shared by the primaries: the design stops the seed)
    at its fallback."""
    first = next(iter(plans.values()))
    aborted = rng.random((studies, seeds)) < first.get("abort_rate", 0.0)
    out = {}
    for name, plan in plans.items():
        d = rng.normal(plan["mean"], plan["sd"], (studies, seeds))
        fb = plan.get("fallback_mean")
        if fb is not None:
            # A fallback of difference 0 is exactly 0 (the shipped system is the control); a
            # fallback eval's difference varies like the comparison's own.
            if plan.get("fallback_exact"):
                stand = np.full_like(d, fb)
            else:
                stand = rng.normal(fb, plan["sd"], (studies, seeds))
            d = np.where(aborted, stand, d)
        out[name] = d
    return out


def simulate_rule(
    plans: Mapping[str, Mapping[str, Any]],
    *,
    alpha: float,
    seeds: int,
    every_seed_positive: bool,
    studies: int = STUDIES,
    seed: int = GENERATOR_SEED,
    sequential=None,
) -> dict[str, Any]:
    """The registered rule on ``studies`` simulated studies (module docstring): the share in which
    every primary is confirmed (``met``, with its Monte-Carlo standard error) and each primary's
    own share.  With interim looks (``sequential``, one design at α/m for every primary) each
    primary's share is its design's confirmations (rejections with a positive estimate,
    futility obeyed) and ``met`` their product — Bonferroni at α/m where the report's Holm may
    recycle α, so the figure errs low."""
    if sequential is not None:
        return _simulate_sequential(plans, sequential, studies=studies, seed=seed)
    rng = np.random.default_rng(seed)
    names = list(plans)
    d = simulate_differences(plans, seeds=seeds, studies=studies, rng=rng)
    p = np.stack([stats.t_test_arrays(d[n])["p_value"] for n in names], axis=-1)
    adjusted = holm_arrays(p)
    confirmed = []
    for j, n in enumerate(names):
        ok = (adjusted[:, j] < alpha) & (d[n].mean(axis=-1) > 0)
        if every_seed_positive:
            ok &= (d[n] > 0).all(axis=-1)
        confirmed.append(ok)
    met = np.logical_and.reduce(confirmed)
    share = float(met.mean())
    return {
        "met": share,
        "se": math.sqrt(share * (1 - share) / studies),
        "per_primary": {n: float(c.mean()) for n, c in zip(names, confirmed, strict=True)},
        "studies": studies,
        "generator_seed": seed,
        "method": "simulated studies at the planned effects: per-seed differences normal with "
        "each primary's planned mean and sd_planned, stopped seeds at their fallback, the "
        "registered test on every seed, Holm over the primaries, a positive pooled estimate"
        + (", every seed positive" if every_seed_positive else ""),
    }


def _mixture(plan: Mapping[str, Any]):
    """A sampler of one primary's per-seed differences at its plan: normal, a stopped seed
    (probability ``abort_rate``) at its fallback."""

    def sampler(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
        d = rng.normal(plan["mean"], plan["sd"], shape)
        fb, rate = plan.get("fallback_mean"), plan.get("abort_rate", 0.0)
        if fb is not None and rate > 0:
            stand = np.full(shape, fb) if plan.get("fallback_exact") else rng.normal(
                fb, plan["sd"], shape)  # fmt: skip
            d = np.where(rng.random(shape) < rate, stand, d)
        return d

    return sampler


def _simulate_sequential(plans, design, *, studies: int, seed: int) -> dict[str, Any]:
    from burnqed.study.sequential import simulate

    futility = design.futility_from is not None
    per = {n: simulate(design, _mixture(p), studies=studies, seed=seed + i,
                       futility=futility)["positive"]
           for i, (n, p) in enumerate(plans.items())}  # fmt: skip
    share = float(np.prod(list(per.values())))
    return {
        "met": share,
        "se": math.sqrt(share * (1 - share) / studies),
        "per_primary": per,
        "studies": studies,
        "generator_seed": seed,
        "method": "simulated sequential studies at the planned effects, per primary: its "
        f"design at α/m (looks {list(design.looks)}), futility "
        f"{'obeyed' if futility else 'none'}, stopped seeds at their fallback; met = the product "
        "of the primaries' confirmation rates (independent primaries, Bonferroni)",
    }
