"""Where the spread of an effect across seeds comes from (issue 45 §1): the trained models, the
benchmark's theorems, or the evals' sampling.

A seed decides a demo run's generated data, its benchmark draw, its training and its evals'
sampling (params.yaml ``seeds``: each can be varied alone).  For one comparison the per-run paired
difference is ``d = (gained − lost) / theorems`` (:func:`burnqed.study.stats.paired_difference`).
Its variance across seeds is what a study's seed-level test faces (and what its power analysis
needs); it splits, by the moment method, into

- **search sampling** — the variance of ``d`` between runs of one seed whose evals differ only in
  ``seeds.search`` (the same models and benchmark; only the evals rerun): the pooled sample
  variance within those groups (None without such reruns);
- **the benchmark's theorems** — the rest of the within-seed variance: McNemar's variance of a mean
  paired difference over the benchmark's theorems (:func:`burnqed.study.stats.within_variance`:
  the theorems drawn, each outcome random through its search), averaged over the runs, minus the
  search part;
- **training and data** — the between-seed variance beyond the within-seed one (DerSimonian and
  Laird's moment estimate of τ², floored at 0): what a new seed's models add.

With few seeds each component is rough (a variance from k seeds has k − 1 degrees of freedom); the
shares say which source dominates, not its size to a digit.

Example::

    >>> runs = [{"seed": 1, "search_seed": 1, "gained": 12, "lost": 4, "theorems": 400},
    ...         {"seed": 1, "search_seed": 9, "gained": 10, "lost": 5, "theorems": 400},
    ...         {"seed": 2, "search_seed": 2, "gained": 3, "lost": 9, "theorems": 400},
    ...         {"seed": 3, "search_seed": 3, "gained": 15, "lost": 2, "theorems": 400}]
    >>> d = decompose(runs)
    >>> d["seeds"], d["search_reruns"], round(d["between_seed_variance"] * 1e4, 2)
    (3, 1, 6.06)
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from burnqed.study import stats

COMPONENTS = ("training and data", "benchmark theorems", "search sampling")


def _var(xs: Sequence[float]) -> float | None:
    if len(xs) < 2:
        return None
    m = sum(xs) / len(xs)
    return sum((x - m) ** 2 for x in xs) / (len(xs) - 1)


def decompose(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The components (module docstring) of one comparison's ``runs``: each ``{seed, search_seed,
    gained, lost, theorems}``, ``seed`` naming what the run trained and drew (runs of one ``seed``
    differ only in their evals' ``search_seed``); a run whose ``search_seed`` is its ``seed`` is
    that seed's main run (the between-seed spread is taken over those; the first run of a seed
    where none is)."""
    by_seed: dict[Any, list[Mapping[str, Any]]] = defaultdict(list)
    for r in runs:
        if r.get("theorems"):
            by_seed[r["seed"]].append(r)
    if len(by_seed) < 2:
        raise ValueError(f"{len(by_seed)} seed(s): the spread between seeds needs at least two")

    def d(r: Mapping[str, Any]) -> float:
        return stats.paired_difference(r["gained"], r["lost"], r["theorems"])

    def v(r: Mapping[str, Any]) -> float:
        return float(stats.within_variance(r["gained"], r["lost"], r["theorems"]))

    main = [next((r for r in rs if r.get("search_seed") == r["seed"]), rs[0])
            for rs in by_seed.values()]  # fmt: skip
    between = _var([d(r) for r in main])
    within = stats.mean_within_variance(main)
    # search sampling: the pooled variance of d within seeds that reran their evals
    ss, df = 0.0, 0
    for rs in by_seed.values():
        if len(rs) >= 2:
            ds = [d(r) for r in rs]
            ss += _var(ds) * (len(ds) - 1)
            df += len(ds) - 1
    search = ss / df if df else None
    parts = {
        "training and data": max(0.0, between - within),
        "benchmark theorems": max(0.0, within - (search or 0.0)),
        "search sampling": search,
    }
    known = sum(x for x in parts.values() if x is not None)
    return {
        "seeds": len(by_seed),
        "search_reruns": sum(len(rs) - 1 for rs in by_seed.values()),
        "per_seed": [
            {"seed": r["seed"], "difference": d(r), "within_variance": v(r)} for r in main
        ],
        "mean_difference": sum(d(r) for r in main) / len(main),
        "between_seed_variance": between,
        "between_seed_sd": math.sqrt(between),
        "within_seed_variance": within,
        "components": parts,
        "shares": {k: (None if x is None or not known else x / known) for k, x in parts.items()},
    }


def decomposition_markdown(name: str, dec: Mapping[str, Any]) -> list[str]:
    """One comparison's decomposition as markdown lines (variances in (percentage points)²)."""

    def pp2(x: float | None) -> str:
        return "–" if x is None else f"{1e4 * x:.2f}"

    def share(x: float | None) -> str:
        return "–" if x is None else f"{100 * x:.0f} %"

    rows = [f"| {k} | {pp2(dec['components'][k])} | {share(dec['shares'][k])} |"
            for k in COMPONENTS]  # fmt: skip
    return [
        f"**{name}** — {dec['seeds']} seeds, {dec['search_reruns']} eval rerun(s) with another "
        f"search seed; mean difference {100 * dec['mean_difference']:+.2f} points, between-seed SD "
        f"{100 * dec['between_seed_sd']:.2f} points:",
        "",
        "| source | variance of d, (points)² | share |",
        "|---|---|---|",
        *rows,
        "",
    ]


__all__ = ["COMPONENTS", "decompose", "decomposition_markdown"]
