"""The value-model configurations of an iteration, judged with the paired test.

For an iteration ``i >= 1`` (reference ``value-model-v2.md`` §4; ``rules/common.smk``
``value_configs``), each configuration is one policy with one value head, evaluated with and without
that head on the same theorems with the same seeds (:mod:`burnqed.policy` ``candidate_seeds``), so
every comparison below is paired:

======  ==================================  =============================================
config  policy                              value head
======  ==================================  =============================================
A       iteration ``i-1``'s model           decoupled EBM on its frozen embeddings
S       iteration ``i``, SFT-only           decoupled EBM on its frozen embeddings
B       iteration ``i``, jointly trained    decoupled EBM on its frozen embeddings
C       iteration ``i``, jointly trained    the head trained jointly (the main line)
======  ==================================  =============================================

Without a value head, A is iteration ``i-1``'s model without one (iteration 0's own eval at
``i = 1``, iteration ``i-1``'s ``eval_no_ebm`` after: its ``eval.json`` has a value model), and B
and C share iteration ``i``'s ``eval_no_ebm``.  The questions (each an exact McNemar test at the
largest shared budget, :mod:`burnqed.eval.paired`, varying the factor named — any other difference
between the two evals leaves it undecided, the field named):

- **S → B** (the model): did the joint loss protect or improve the embeddings (same data, same
  steps)?
- **B → C** (the value model): did live gradients help the head (same policy, same searches)?
- **A → C** (the model): the whole effect of one iteration with joint training;
- and for each configuration, its value head against none (the EBM ablation: the value model).
  **C against its no-EBM twin is the primary comparison**, declared before the run (issue 30 §7);
  the four ablations together are also reported with Holm's correction (``p_holm``), since looking
  at four and reporting the best would otherwise overstate it.

Beside them, the embedding metrics of each configuration's EBM data (``ebm_metrics.json``): the
scale-free centroid separation, the linear probe's balanced accuracy, and the EBM's held-out rank-1
(tie-corrected) overall and on states at depth ≥ 4, where the reproduced system measured it.

With ``sft.mode: sft`` the main line is SFT-only with a decoupled EBM and only A is built beside it:
the section then holds A → main and the two ablations.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from burnqed.eval.paired import format_p, notes_lines, paired_test, table_cells, table_headers
from burnqed.eval.table import markdown_table, pct

CONFIGS = ("A", "S", "B", "C")
PRIMARY = "C"  # the pre-declared comparison: C against its no-EBM twin at the largest budget
# (from, to, question, the factor the pair varies: burnqed.eval.paired.FACTORS)
QUESTIONS = (
    ("S", "B", "did the joint loss protect the embeddings?", "model"),
    ("B", "C", "did live gradients help the head?", "value model"),
    ("A", "C", "the whole effect", "model"),
)


def config_comparisons(
    iteration: int,
    evals: Mapping[str, Mapping[str, Any]],
    metrics: Mapping[str, Mapping[str, Any] | None],
) -> dict[str, Any]:
    """The configurations section of iteration ``iteration`` as a JSON-able dict.

    ``evals``: eval JSONs keyed ``A``, ``S``, ``B``, ``C`` (with the value head) and ``A0``, ``S0``,
    ``B0``, ``C0`` (without); ``metrics``: ``ebm_metrics.json`` of each of ``A``…``C``.  A missing
    configuration is left out of every comparison that needs it.
    """
    rows = []
    for c in CONFIGS:
        if c not in evals:
            continue
        e, e0 = evals[c], evals.get(f"{c}0")
        rows.append(
            {
                "config": c,
                "label": e.get("label"),
                "rate": _top_rate(e),
                "rate_no_ebm": _top_rate(e0) if e0 else None,
                "ablation": paired_test(e0, e, varies="value model") if e0 else None,
                "embeddings": embedding_summary(metrics.get(c)),
            }
        )
    for r, p in zip(rows, holm([(r["ablation"] or {}).get("p_value") for r in rows]), strict=True):
        if r["ablation"] is not None:
            r["ablation"] = {**r["ablation"], "p_holm": p, "primary": r["config"] == PRIMARY}
    questions = []
    for a, b, why, varies in QUESTIONS:
        if a in evals and b in evals:
            questions.append({"from": a, "to": b, "question": why,
                              "test": paired_test(evals[a], evals[b], varies=varies)})  # fmt: skip
    return {"iteration": iteration, "configs": rows, "questions": questions,
            "features": feature_comparison(evals)}  # fmt: skip


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjustment of ``p_values`` (None: no test, left out of the family).

    >>> holm([0.01, 0.04, None, 0.03])
    [0.03, 0.06, None, 0.06]
    """
    present = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    out: list[float | None] = [None] * len(p_values)
    m, running = len(present), 0.0
    for k, (p, i) in enumerate(present):
        running = max(running, min(1.0, (m - k) * p))
        out[i] = round(running, 12)
    return out


def feature_comparison(evals: Mapping[str, Mapping[str, Any]]) -> dict[str, Any] | None:
    """The feature value (``F``, the EBM's control) against the main line's policy without a value
    model (``C0``), live and as its replay predicted it (``F_replay``: replayed over ``C0``'s trees
    before the live eval ran); None when neither was evaluated."""
    base = evals.get("C0")
    out: dict[str, Any] = {}
    for key, name in (("F", "live"), ("F_replay", "replay")):
        e = evals.get(key)
        if e is not None:
            out[name] = {"label": e.get("label"), "rate": _top_rate(e),
                         "test": paired_test(base, e, varies="value model") if base else None}  # fmt: skip
    return out or None


def _top_rate(e: Mapping[str, Any]) -> dict[str, Any]:
    top = max(e["budgets"])
    b = next(x for x in e["by_budget"] if x["budget"] == top)
    return {"budget": top, "rate": b["rate"], "solved": b["solved"]}


def embedding_summary(m: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The figures the section shows from one ``ebm_metrics.json`` (None when there is none)."""
    if not m:
        return None
    ebm = m.get("ebm") or {}
    deep = ebm.get("heldout_rank1_depth_ge4") or {}
    return {
        "centroid_separation": m.get("centroid_separation"),
        "probe_balanced_accuracy": (m.get("linear_probe") or {}).get("balanced_accuracy"),
        "rank1": ebm.get("heldout_rank1"),
        "tie_rate": ebm.get("heldout_tie_rate"),
        "rank1_depth_ge4": deep.get("rank1"),
        "groups_depth_ge4": deep.get("groups"),
        "chance": ebm.get("chance"),
        "rank1_by_depth": {
            k: v.get("rank1") for k, v in (ebm.get("heldout_rank1_by_depth") or {}).items()
        },
    }


def _f(x: float | None, fmt: str = ".3f") -> str:
    return "–" if x is None else format(x, fmt)


def configs_markdown(section: Mapping[str, Any]) -> list[str]:
    """Markdown lines: the configurations' table, the three questions and the ablations."""
    i = section["iteration"]
    out = [f"## Value-model configurations, iteration {i}", ""]
    if not section["configs"]:
        return [*out, "No configuration evaluated.", ""]
    rows = []
    for r in section["configs"]:
        emb = r["embeddings"] or {}
        ab = r["ablation"]
        rows.append([
            r["config"], r["label"] or "", f"{pct(r['rate']['rate'])} ({r['rate']['budget']})",
            pct(r["rate_no_ebm"]["rate"]) if r["rate_no_ebm"] else "–",
            "–" if ab is None else f"+{ab['gained']}/−{ab['lost']}, p {format_p(ab['p_value'])}"
            + ("" if ab.get("p_holm") is None else f" (Holm {format_p(ab['p_holm'])})")
            + (" **primary**" if ab.get("primary") else "") + f", {ab['verdict']}"
            if ab["gained"] is not None else ab["verdict"],
            _f(emb.get("centroid_separation")), _f(emb.get("probe_balanced_accuracy")),
            _f(emb.get("rank1")), f"{_f(emb.get('rank1_depth_ge4'))} ({emb.get('groups_depth_ge4', 0)})"
            if emb else "–",
        ])  # fmt: skip
    out += [
        markdown_table(
            ["config", "eval", "with EBM", "without", "EBM vs none (paired)", "centroid sep.",
             "probe bal. acc.", "EBM rank-1", "rank-1 depth ≥ 4 (groups)"],
            rows,
        ),
        "",
        "Rank-1 counts a tie among t candidates as 1/t; chance is "
        f"{_f((section['configs'][0]['embeddings'] or {}).get('chance'))}.",
        "",
    ]  # fmt: skip
    ablations = [(f"{r['config']} EBM vs none", r["ablation"]) for r in section["configs"]
                 if r["ablation"] is not None]  # fmt: skip
    named = [(f"{q['from']} → {q['to']}", q["test"]) for q in section["questions"]]
    if section["questions"]:
        out += [
            markdown_table(
                ["comparison", "question", *table_headers()],
                [[n, q["question"], *table_cells(q["test"])]
                 for (n, _), q in zip(named, section["questions"], strict=True)],
            ),
            "",
        ]  # fmt: skip
    feats = section.get("features") or {}
    if feats:
        cells = []
        for name in ("live", "replay"):
            f = feats.get(name)
            t = (f or {}).get("test") or {}
            cells += ["–"] if f is None else [
                f"{pct(f['rate']['rate'])} ({f['rate']['budget']}); "
                + (f"+{t['gained']}/−{t['lost']}, p {format_p(t['p_value'])}"
                   if t.get("gained") is not None else "undecided")
            ]  # fmt: skip
        out += [
            "The feature value (goals, hypotheses, tokens; fitted on the pool) against C's policy "
            "without a value model, and its replay prediction over that eval's trees:",
            "",
            markdown_table(["value", "live (paired vs none)", "replay prediction"],
                           [["features", *cells]]),
            "",
        ]  # fmt: skip
    lines = [f"- {n}: undecided — {r}" for n, t in [*ablations, *named] for r in t["reasons"]]
    lines += notes_lines([*ablations, *named])
    return [*out, *lines, ""] if lines else out
