"""The demo's summary: every figure the README and docs/ quote, in one small JSON file.

``results/summary.json`` (rule ``summary``, rules/report.smk) is built from what the run already
wrote — ``results/compare.json`` (solve rates per eval and budget, how unsolved attempts ended, the
learning check, the value-model configurations), ``data/tactic_pairs/filter_report.json``
(decontamination) and the jobs' benchmark files (peak memory, :mod:`burnqed.eval.memory`) — so a
figure in the docs is a key here, never a number copied by hand.  ``docs/summary.json`` is the
committed copy the docs are checked against (``tests/workflow/test_docs.py``);
``burnqed report docs results`` (:mod:`burnqed.report.docs`) refreshes it, the budget-curve PNG
(:func:`draw`, a function of the summary alone) and the generated doc text.

Figures the demo does not write yet (measured by hand: the energy spans of open siblings, the
energy-weight sweep, the training losses the docs quote) live under ``manual`` in the committed
copy, each with how it was measured, and a refresh carries them over.

The demo writes two (rules/report.smk): ``results/summary.json``, the default target's (the
headline: the learning check, C against its two twins), and ``results/ablations/summary.json``, the
``ablations`` target's, which adds the attribution set; ``run.target`` says which, and the second
lists under ``run.ablations_only`` the figures only it builds (:data:`ABLATIONS_ONLY`,
:func:`ablations_only`): with them removed (:func:`headline_view`) it states what the first does.
``docs/summary.json`` is a copy of the second.

Keys (``SUMMARY_KEYS``): ``kind``, ``run`` (seed, evidence, target), ``benchmark`` (name, split, sha256, theorems), ``pass_n``,
``budgets``, ``evals`` (label → theorems, rates/solved/ended_by per budget, and ``model_stopped``
when a guard stopped the model's training — it is the previous iteration's; iterations in order,
then the controls), ``learning`` (verdict, steps and controls: before, after, budgets, gained,
lost, p), ``configs`` (per iteration: rates with and without the value head, the paired
questions, the embedding metrics and their ranges), ``compute`` (Polu's comparison on the search
pool, ``results/compute.json``: each arm's cumulative curve, the paired test after each iteration,
the tokens each training saw, the iterations a guard stopped; None with one iteration),
``detectable`` (what the benchmark can detect),
``decontamination``, ``memory``, ``manual``.

Example::

    >>> c = {"budgets": [1, 2], "pass_n": 1, "benchmark": {"name": "b", "split": "test"},
    ...      "rows": [{"label": "baseline", "theorems": 4, "complete": True,
    ...                "rates": {"1": 0.25, "2": 0.5}, "solved": {"1": 1, "2": 2},
    ...                "ended_by": {"1": None, "2": None}}],
    ...      "controls": [], "learning": {"verdict": "undecided", "steps": [], "controls": []}}
    >>> s = build(c)
    >>> s["evals"]["baseline"]["rates"], s["detectable"][0]["gained"]
    ({'1': 0.25, '2': 0.5}, 6)
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from burnqed.config import InputError
from burnqed.eval.configs import prediction_figures
from burnqed.eval.memory import peak_memory
from burnqed.eval.paired import ALPHA, mcnemar_p
from burnqed.eval.passk import interval_from_sums

log = logging.getLogger(__name__)

KIND = "burnqed summary"
SUMMARY_KEYS = ("kind", "run", "benchmark", "pass_n", "budgets", "evals", "learning", "configs",
                "compute", "detectable", "decontamination", "memory", "manual")  # fmt: skip
# What one run is evidence of: a single seed's figures describe that seed's draws (its theorems,
# benchmark and models), not the method; only a pre-registered study over fresh seeds confirms
# (burnqed.study, docs/confirmation.md).
EXPLORATORY = "exploratory"
# Discordant theorem counts at which the docs say what a paired test can detect.
DISCORDANT = (6, 20, 40)
# The summary's figures only the `ablations` target builds, as paths (``*``: every item of a list):
# the value-model configurations beside the main line (A, S, B), the replays, the feature value,
# the questions between configurations, the EBM metrics; Holm's correction over the four
# configurations' claims (the default target's compare has C's claim alone, whose Holm p is its
# p); the value goal (it checks the feature value and its live replay); and the whole run's peak
# memory.  tests/report/test_summary.py checks that the default target's summary of the same run
# is the ablations' one without them.
ABLATIONS_ONLY = (
    "configs.*.rates.A", "configs.*.rates.S", "configs.*.rates.B", "configs.*.rates.C.replay",
    "configs.*.rates.C.vs_stronger.p_holm", "configs.*.replay_coverage", "configs.*.features",
    "configs.*.goal", "configs.*.questions", "configs.*.embeddings", "configs.*.embedding_ranges",
    "memory",
)  # fmt: skip
TARGETS = ("default", "ablations")


def _walk(node: Any, parts: Sequence[str], at: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """The concrete paths of ``node`` that ``parts`` (a path of :data:`ABLATIONS_ONLY`) names."""
    if not parts:
        return [at]
    head, rest = parts[0], parts[1:]
    if head == "*" and isinstance(node, list):
        return [p for i, x in enumerate(node) for p in _walk(x, rest, (*at, str(i)))]
    if isinstance(node, Mapping) and head in node:
        return _walk(node[head], rest, (*at, head))
    return []


def ablations_only(summary: Mapping[str, Any]) -> list[str]:
    """The paths (``configs.0.rates.A``) of the summary's figures only the ``ablations`` target
    builds (:data:`ABLATIONS_ONLY`), those the summary holds.

    >>> ablations_only({"configs": [{"rates": {"A": {}, "C": {"replay": None}}}], "memory": None})
    ['configs.0.rates.A', 'configs.0.rates.C.replay', 'memory']
    """
    return [".".join(p) for pattern in ABLATIONS_ONLY for p in _walk(summary, pattern.split("."))]


def headline_view(summary: Mapping[str, Any]) -> dict[str, Any]:
    """``summary`` without what only the ``ablations`` target builds (nor ``run.target`` and
    ``run.ablations_only``): what the default target's summary of the same run states.

    >>> headline_view({"run": {"seed": 0, "target": "ablations"}, "memory": {"jobs": 3}})
    {'run': {'seed': 0}, 'memory': None}
    """
    out = json.loads(json.dumps(summary))
    for path in ablations_only(summary):
        *parents, last = path.split(".")
        node = out
        for p in parents:
            node = node[int(p)] if isinstance(node, list) else node[p]
        if path == "memory":  # a key of every summary: the run's own peak, not this one's
            node[last] = None
        else:
            del node[last]
    for key in ("target", "ablations_only"):
        (out.get("run") or {}).pop(key, None)
    return out


def _test(t: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("before", "after", "budget_before", "budget_after", "gained", "lost", "p_value")
    return {k: t.get(k) for k in keys}


def _claim(t: Mapping[str, Any]) -> dict[str, Any]:
    """A claim's paired test with its verdict, Holm-adjusted p and whether it is the primary one:
    what a sentence of the docs may say about it (tests/workflow/test_docs.py checks them)."""
    return {**_test(t), **{k: t.get(k) for k in ("verdict", "p_holm", "primary")}}


# A step of an arm's cumulative curve as the summary keeps it (burnqed.eval.compute.curve).
CURVE_KEYS = ("step", "proved", "pool", "pass_rate", "nodes_expanded", "tokens", "value_scorings")


def compute_figures(compute: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """What the docs quote of Polu's comparison (``results/compute.json``,
    :mod:`burnqed.eval.compute`): per arm, the cumulative pool pass rate and search compute after
    each step; the paired test of the two arms after each iteration from the first (counts, p,
    verdict); the tokens each training's optimizer steps saw (None where a summary predates the
    count); the iterations whose training a guard stopped."""
    if not compute:
        return None
    training = ((compute.get("training") or {}).get("iterations")) or {}
    return {
        "pool_theorems": compute.get("pool_theorems"),
        "curves": {arm: [{k: step.get(k) for k in CURVE_KEYS} for step in steps]
                   for arm, steps in (compute.get("curves") or {}).items()},
        "paired": [{"iteration": t.get("iteration"), **_test(t), "verdict": t.get("verdict")}
                   for t in compute.get("paired") or []],
        "training_tokens": {name: (t.get("tokens") or {}).get("total")
                            for name, t in training.items()},
        "stopped": sorted(compute.get("stopped") or {}),
    }  # fmt: skip


def detectable(theorems: int | None, discordant: Sequence[int] = DISCORDANT) -> list[dict]:
    """For each number of changed theorems, the fewest gained (against the rest lost) that an
    exact McNemar test at :data:`ALPHA` calls real, and the points that is of ``theorems``."""
    out = []
    for d in discordant:
        g = next((g for g in range(d + 1) if mcnemar_p(g, d - g) < ALPHA and g > d - g), None)
        out.append({"changed": d, "gained": g, "lost": None if g is None else d - g,
                    "points": None if g is None or not theorems else (2 * g - d) / theorems})  # fmt: skip
    return out


def _configs(section: Mapping[str, Any]) -> dict[str, Any]:
    rates = {r["config"]: {"with": (r.get("rate") or {}).get("rate"),
                           "without": (r.get("rate_no_ebm") or {}).get("rate"),
                           "depth_twin": (r.get("rate_depth_twin") or {}).get("rate"),
                           "ablation": _test(r["ablation"]) if r.get("ablation") else None,
                           "vs_depth_twin": _test(r["vs_depth_twin"])
                           if r.get("vs_depth_twin") else None,
                           "stronger_twin": r.get("stronger_twin"),
                           "vs_stronger": _claim(r["vs_stronger"])
                           if r.get("vs_stronger") else None}
             for r in section.get("configs") or []}  # fmt: skip
    emb = {r["config"]: r.get("embeddings") for r in section.get("configs") or []}
    ranges = {}
    for key in ("centroid_separation", "probe_balanced_accuracy", "rank1", "rank1_depth_ge4"):
        for name, which in (("decoupled", ("A", "S", "B")), ("all", ("A", "S", "B", "C"))):
            xs = [(emb.get(c) or {}).get(key) for c in which]
            xs = [x for x in xs if x is not None]
            ranges[f"{key}_{name}"] = [min(xs), max(xs)] if xs else None
    for r in section.get("configs") or []:
        rp = r.get("replay")
        # A recording-only replay's rate and test are over the theorems it covers (coverage).
        rates[r["config"]]["replay"] = None if not rp else {
            "rate": (rp.get("rate") or {}).get("rate"), "solved": (rp.get("rate") or {}).get("solved"),
            "test": _test(rp["test"]) if rp.get("test") else None,
            **prediction_figures(rp),
            "unexpanded": rp.get("unexpanded"), "oracle_ceiling": rp.get("oracle_ceiling")}  # fmt: skip
        rates[r["config"]]["value_model"] = r.get("value_model")
    feats = {k: None if not f else {"rate": (f.get("rate") or {}).get("rate"),
                                    "solved": (f.get("rate") or {}).get("solved"),
                                    "test": _test(f["test"]) if f.get("test") else None,
                                    "value_model": f.get("value_model"),
                                    **({"live": bool(f.get("live"))} if k == "replay" else {})}
             for k, f in (section.get("features") or {}).items() if k != "agreement"}  # fmt: skip
    if (section.get("features") or {}).get("agreement"):  # replay against live, theorem by theorem
        feats["agreement"] = section["features"]["agreement"]
    return {
        "iteration": section.get("iteration"),
        "rates": rates,
        "replay_coverage": section.get("replay_coverage"),
        "features": feats or None,
        "goal": section.get("goal"),
        "questions": {
            f"{q['from']}→{q['to']}": _test(q["test"]) for q in section.get("questions") or []
        },
        "embeddings": emb,
        "embedding_ranges": ranges,
    }


def build(
    compare: Mapping[str, Any],
    *,
    pairs_report: Mapping[str, Any] | None = None,
    memory: Mapping[str, Any] | None = None,
    manual: Mapping[str, Any] | None = None,
    seed: int | None = None,
    target: str = "default",
    compute: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The summary (module docstring) of ``compare`` (``results/compare.json``, or the
    ``ablations`` target's ``results/ablations/compare.json``: ``target``), the tactic pairs'
    ``filter_report.json``, :func:`burnqed.eval.memory.peak_memory`'s figures and the compute
    comparison's ``results/compute.json``."""
    if target not in TARGETS:
        raise ValueError(f"summary target {target!r}: one of {', '.join(TARGETS)}")
    bench = dict(compare.get("benchmark") or {})
    rows = [*compare["rows"], *(compare.get("controls") or [])]
    theorems = max((r["theorems"] for r in rows), default=None)
    bench["theorems"] = theorems
    evals = {r["label"]: {"theorems": r["theorems"], "complete": r["complete"],
                          "rates": r["rates"], "solved": r["solved"], "ended_by": r["ended_by"],
                          # only when a guard stopped the model's training (issue 61)
                          **({"model_stopped": r["model_stopped"]} if r.get("model_stopped")
                             else {})}
             for r in rows}  # fmt: skip
    lc = compare.get("learning") or {}
    decontam = (pairs_report or {}).get("decontamination")
    keep = ("mode", "benchmark_statements", "theorems_checked", "contaminated_theorems",
            "rows_dropped", "states_checked")  # fmt: skip
    out = {
        "kind": KIND,
        # the run's seed, what its figures are evidence of (one seed: exploratory), the target
        "run": {"seed": seed, "evidence": EXPLORATORY, "target": target},
        "benchmark": bench,
        "pass_n": compare.get("pass_n"),
        "budgets": compare["budgets"],
        "evals": evals,
        "learning": {
            "verdict": lc.get("verdict"),
            "steps": [_test(t) for t in lc.get("steps") or []],
            "controls": [_test(t) for t in lc.get("controls") or []],
        },
        "configs": [_configs(s) for s in compare.get("configs") or []],
        "compute": compute_figures(compute),
        "detectable": detectable(theorems),
        "decontamination": {k: decontam.get(k) for k in keep} if decontam else None,
        "memory": dict(memory) if memory else None,
        "manual": dict(manual or {}),
    }
    if target == "ablations":
        out["run"]["ablations_only"] = ablations_only(out)
    return out


def curves(summary: Mapping[str, Any]) -> tuple[dict, dict]:
    """Step curves and 95 % markers (:func:`burnqed.report.plots.budget_curves`) of every eval's
    per-budget rates; the interval is the eval's own (Clopper–Pearson over 0/1 per-theorem values,
    :mod:`burnqed.eval.passk`), recomputed from the solved counts."""
    lines, markers = {}, {}
    for label, e in summary["evals"].items():
        pts = [(int(b), r, e["solved"][b]) for b, r in e["rates"].items() if r is not None]
        if not pts:
            continue
        xs, ys, ks = zip(*sorted(pts), strict=True)
        lo, hi = interval_from_sums(list(ks), int(e["theorems"]), binary=True)
        lines[label] = {"x": list(xs), "y": list(ys)}
        markers[label] = {"x": list(xs), "y": list(ys), "lo": [float(x) for x in lo],
                          "hi": [float(x) for x in hi]}  # fmt: skip
    return lines, markers


def draw(summary: Mapping[str, Any], out: Path) -> None:
    """The README's figure: solve rate by node budget of every eval of the summary."""
    from burnqed.report import plots

    lines, markers = curves(summary)
    bench = summary.get("benchmark") or {}
    plots.budget_curves(
        lines,
        Path(out),
        title=f"Solve rate by node budget — {bench.get('name')}_{bench.get('split')}, "
        f"{bench.get('theorems')} theorems, pass@{summary.get('pass_n')}",
        markers=markers,
    )


def run(
    *,
    compare_json: Path,
    out: Path,
    pairs_report: Path | None = None,
    benchmarks: Path | None = None,
    seed: int | None = None,
    target: str = "default",
    compute_json: Path | None = None,
) -> dict[str, Any]:
    """Write ``results/summary.json`` (the ``summary`` rule; ``results/ablations/summary.json``,
    rule ``summary_ablations``, with ``target`` ablations) of the run with ``seed``."""
    from burnqed.eval.stage import write_json

    def read(p: Path | None) -> dict | None:
        return json.loads(Path(p).read_text(encoding="utf-8")) if p and Path(p).is_file() else None

    memory = peak_memory(Path(benchmarks)) if benchmarks and Path(benchmarks).is_dir() else None
    if compute_json is not None and not Path(compute_json).is_file():
        raise InputError(f"{compute_json}: missing (rule compute_report writes it)")
    s = build(read(compare_json), pairs_report=read(pairs_report), memory=memory, seed=seed,
              target=target, compute=read(compute_json))  # fmt: skip
    write_json(Path(out), s)
    log.info("summary of %d evals → %s", len(s["evals"]), out)
    return s
