"""Go/no-go gates: each metric against its target and red line (``params.yaml`` ``report``), or —
for the EBM ablation — against the paired test.

Threshold gates: ``go`` at or above the target, ``watch`` between the red line and the target,
``no-go`` below the red line, ``n/a`` when the metric is not available (no EBM yet, no baseline, …).
The EBM ablation (``ebm_gain``, varying the value model) is judged by the exact McNemar test of
:mod:`burnqed.eval.paired` on the theorems both evals evaluated: ``go`` only when the EBM is
``better``, ``no-go`` when ``worse``, ``no measurable effect`` otherwise; ``undecided`` when the
test is (a partial eval, evals that differ in more than the value model, …).  A gain gate (varying
the model) is checked by its paired test the same way in both directions: a gain at its target is
``go`` and a loss below the red line ``no-go`` only when the test says ``better`` / ``worse``; a
difference chance explains shows ``no measurable effect``, one the test cannot judge (a partial
eval, evals that differ in more than the model, nothing to pair) ``undecided`` — so a partial eval
never shows ``go``.  Between the two lines a gain gate stays ``watch`` unless its evals differ in
more than the model (``undecided``).  Every gate comparing two evals carries its paired test
(p-value, theorems gained and lost) and, when undecided, the test's reasons in its note.  The
overall verdict is the worst gate: no-go < watch < no measurable effect < undecided < go (n/a is
left out).

The embedding gates read what the writers write: ``results/iter_{i}/ebm_metrics.json``
(:func:`burnqed.ebm.stage.run_metrics`: ``centroid_separation``, ``linear_probe.balanced_accuracy``,
``ebm.heldout_rank1`` and ``ebm.heldout_tie_rate``) and, for rank-1 without an EBM in the metrics,
``models/iter_{i}/ebm/ebm.json`` (:func:`burnqed.ebm.stage.run_train`: ``heldout.rank1``).

Example::

    >>> verdict(1.4, target=2.0, red_line=1.5)
    'no-go'
    >>> overall([{"verdict": "go"}, {"verdict": "no measurable effect"}, {"verdict": "n/a"}])
    'no measurable effect'
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from burnqed.config import ReportConfig
from burnqed.ebm.groups import chance_bound
from burnqed.eval.paired import BETTER, NO_EFFECT, UNDECIDED, WORSE, paired_test

log = logging.getLogger(__name__)

GO, WATCH, NO_GO, NA = "go", "watch", "no-go", "n/a"
# Worst first; n/a is not a verdict on anything and is left out of the overall one.
ORDER = {NO_GO: 0, WATCH: 1, NO_EFFECT: 2, UNDECIDED: 3, GO: 4}
FLAGGED = (NO_GO, WATCH, NO_EFFECT, UNDECIDED)
PAIRED_VERDICT = {BETTER: GO, WORSE: NO_GO, NO_EFFECT: NO_EFFECT, UNDECIDED: UNDECIDED}

GATES = (
    "gain_vs_baseline",
    "gain_vs_previous",
    "ebm_gain",
    "centroid_separation",
    "probe_balanced_accuracy",
    "ebm_rank1",
    "unique_candidates",
)
DESCRIPTIONS = {
    "gain_vs_baseline": "solve rate − baseline's (largest budget)",
    "gain_vs_previous": "solve rate − previous iteration's (largest budget)",
    "ebm_gain": "EBM ablation: with − without (paired test, same theorems and seeds)",
    "centroid_separation": "embedding centroid separation (distance / within-class spread)",
    "probe_balanced_accuracy": "embedding linear-probe balanced accuracy",
    "ebm_rank1": "EBM held-out rank-1 accuracy (ties count 1/t)",
    "unique_candidates": "unique candidates per expansion (diversity alarm)",
}
# Why a paired test leaves a comparison undecided that a rate difference must not ignore either:
# the evals differ in more than the model (burnqed.eval.paired.differences) or share no budget.
_NOT_COMPARABLE = ("different ", "no budget", "has no budget")
# What a threshold verdict on a difference claims, and the paired verdict that must back it.
_BACKED_BY = {GO: BETTER, NO_GO: WORSE}


def chance_line(ebm: Mapping[str, Any]) -> float | None:
    """Chance rank-1 plus two binomial standard errors over the held-out groups: a rank-1 below it
    cannot be told from chance (whatever the group size), so the rank-1 gate's red line is at least
    this (None without the chance and the group count).

    >>> round(chance_line({"ebm_chance": 0.25, "ebm_groups": 12}), 3)
    0.5
    """
    p, n = ebm.get("ebm_chance"), ebm.get("ebm_groups")
    return None if not p or not n else chance_bound(p, n)


def verdict(value: float | None, *, target: float, red_line: float) -> str:
    if value is None:
        return NA
    if value >= target:
        return GO
    return WATCH if value >= red_line else NO_GO


def overall(gates: list[Mapping[str, Any]]) -> str:
    known = [g["verdict"] for g in gates if g["verdict"] in ORDER]
    return min(known, key=ORDER.__getitem__) if known else NA


def top_rate(e: Mapping[str, Any] | None) -> float | None:
    if not e or not e.get("by_budget"):
        return None
    return e["by_budget"][-1]["rate"]


def checked_by_paired(v: str, test: Mapping[str, Any] | None) -> str:
    """A threshold verdict ``v`` on the difference of two evals, checked by their paired test:
    ``go`` / ``no-go`` stand only when the test says ``better`` / ``worse``; otherwise the test's
    ``no measurable effect``, or ``undecided`` (a partial eval, not comparable, or the test points
    the other way).  ``watch`` stands unless the evals are not comparable.

    >>> checked_by_paired("no-go", {"verdict": "no measurable effect", "reasons": []})
    'no measurable effect'
    >>> checked_by_paired("go", {"verdict": "undecided", "reasons": ["partial eval: x partial 3/8"]})
    'undecided'
    """
    if test is None or v not in (GO, WATCH, NO_GO):
        return v
    t = test["verdict"]
    if v == WATCH:
        not_comparable = any(r.startswith(_NOT_COMPARABLE) for r in test["reasons"])
        return UNDECIDED if t == UNDECIDED and not_comparable else v
    if t == _BACKED_BY[v]:
        return v
    return NO_EFFECT if t == NO_EFFECT else UNDECIDED


def _comparison(
    before: Mapping[str, Any] | None, after: Mapping[str, Any] | None, *, varies: str
) -> tuple[float | None, str, dict | None]:
    """(rate of ``after`` − rate of ``before`` at each one's largest budget, note, paired test)."""
    ra, rb = top_rate(before), top_rate(after)
    if ra is None or rb is None:
        return None, "not available", None
    test = paired_test(before, after, varies=varies)
    notes = [f"{x['label']} {x['status']['label']}" for x in (before, after)
             if not x["status"]["complete"]]  # fmt: skip
    return rb - ra, ("from a partial eval: " + ", ".join(notes)) if notes else "", test


def load_ebm_metrics(metrics_json: Path | None, ebm_dir: Path | None) -> dict | None:
    """Embedding metrics of an iteration from what the EBM stage writes (module docstring): the
    gated values, every scalar (flattened keys) for the report's table, and the sources read.
    None when neither file exists."""
    metrics: dict[str, Any] = {}
    sources = []
    if metrics_json is not None and Path(metrics_json).is_file():
        metrics = json.loads(Path(metrics_json).read_text(encoding="utf-8"))
        sources.append(str(metrics_json))
    ebm = metrics.get("ebm") or {}
    rank1, ties, rank1_from = ebm.get("heldout_rank1"), ebm.get("heldout_tie_rate"), None
    if rank1 is not None:
        rank1_from = "ebm.heldout_rank1"
    elif ebm_dir is not None and (Path(ebm_dir) / "ebm.json").is_file():
        meta = json.loads((Path(ebm_dir) / "ebm.json").read_text(encoding="utf-8"))
        held = meta.get("heldout") or {}
        if held.get("rank1") is not None:
            rank1, ties, rank1_from = held["rank1"], held.get("tie_rate"), "heldout.rank1"
            sources.append(str(Path(ebm_dir) / "ebm.json"))
    if not sources:
        return None
    return {
        "centroid_separation": metrics.get("centroid_separation"),
        "centroid_l2": metrics.get("centroid_l2"),
        "probe_balanced_accuracy": (metrics.get("linear_probe") or {}).get("balanced_accuracy"),
        "ebm_rank1": rank1,
        "ebm_rank1_key": rank1_from,
        "ebm_tie_rate": ties,
        # what chance scores and over how many held-out groups (the rank-1 gate's floor)
        "ebm_chance": ebm.get("chance"),
        "ebm_groups": ebm.get("heldout_groups"),
        "all": {
            k: v
            for k, v in _flatten(metrics).items()
            if isinstance(v, int | float | str | bool) or v is None
        },
        "sources": sources,
    }


def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def evaluate_gates(
    cfg: ReportConfig,
    *,
    current: Mapping[str, Any],
    baseline: Mapping[str, Any] | None = None,
    previous: Mapping[str, Any] | None = None,
    no_ebm: Mapping[str, Any] | None = None,
    ebm: Mapping[str, Any] | None = None,
    unique_candidates: float | None = None,
) -> list[dict]:
    """Every gate of :data:`GATES`: value, target, red line, verdict, note and (comparisons) the
    paired test."""
    e = ebm or {}
    ties = e.get("ebm_tie_rate")
    rank1_note = f"tie rate {ties:.1%}" if ties is not None else ""
    values: dict[str, tuple[float | None, str, dict | None]] = {
        "gain_vs_baseline": _comparison(baseline, current, varies="model"),
        "gain_vs_previous": _comparison(previous, current, varies="model"),
        "ebm_gain": _comparison(no_ebm, current, varies="value model"),
        "centroid_separation": (e.get("centroid_separation"), "", None),
        "probe_balanced_accuracy": (e.get("probe_balanced_accuracy"), "", None),
        "ebm_rank1": (e.get("ebm_rank1"), rank1_note, None),
        "unique_candidates": (unique_candidates, "", None),
    }
    gates = []
    for name in GATES:
        value, note, test = values[name]
        if name == "ebm_gain":
            target = red = None
            v = NA if test is None else PAIRED_VERDICT[test["verdict"]]
        else:
            target, red = getattr(cfg, f"{name}_target"), getattr(cfg, f"{name}_red_line")
            if name == "ebm_rank1" and (floor := chance_line(e)) is not None and floor > red:
                red, note = floor, ", ".join(x for x in (note, "red line: chance + 2 SE") if x)
                target = max(target, red)
            # a gain (or loss) the paired test cannot tell from chance is not a go (no-go)
            v = checked_by_paired(verdict(value, target=target, red_line=red), test)
        reasons = []
        if v == UNDECIDED and test is not None and test["verdict"] != UNDECIDED:
            reasons = [f"the paired test says {test['verdict']}: the rates point the other way"]
        elif v == UNDECIDED and test is not None:
            # the partial eval is named in the note already
            reasons = [r for r in test["reasons"] if not r.startswith("partial eval")]
        note = "; ".join(x for x in (note, *reasons) if x)
        gates.append(
            {
                "gate": name,
                "description": DESCRIPTIONS[name],
                "value": value,
                "target": target,
                "red_line": red,
                "verdict": v,
                "note": note or ("not available" if value is None else ""),
                "paired": test,
            }
        )
    return gates
