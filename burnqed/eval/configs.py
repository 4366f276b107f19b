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

Beside each live figure, the **replay prediction** (issue 30 §7, issue 44 §6; key ``{c}_replay``,
:mod:`burnqed.replay.stage`): the configuration's EBM searching its no-EBM twin's recorded trees
again without ``--live``.  It is scored only on the attempts it could replay exactly (every pop one
the twin expanded: its *coverage*, covered attempts / all), paired with the twin there; the
theorems it could not cover are counted apart, never as failures.  Over the twin's trees it cannot
solve a theorem the twin did not prove within its own budget, so at that budget it cannot gain: it
can show what the priority would lose, not what it would win (``max_gain``, stated beside the
figure).  A ``--live`` replay (the feature value's, ``F``, the EBM's control, against C's twin) is no
prediction but an equality check: it must equal the live eval of its priority theorem by theorem
(:func:`replay_agreement`: "live replay = live eval: N of N equal").

Beside them, the embedding metrics of each configuration's EBM data (``ebm_metrics.json``): the
scale-free centroid separation, the linear probe's balanced accuracy, and the EBM's held-out rank-1
(tie-corrected) overall and on states at depth ≥ 4, where the reproduced system measured it.

With ``sft.mode: sft`` the main line is SFT-only with a decoupled EBM and only A is built beside it:
the section then holds A → main and the two ablations.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from burnqed.eval.paired import (
    ALPHA,
    BETTER,
    UNDECIDED,
    format_p,
    notes_lines,
    paired_test,
    solved_at,
    table_cells,
    table_headers,
)
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

    ``evals``: eval JSONs keyed ``A``, ``S``, ``B``, ``C`` (with the value head), ``A0``, ``S0``,
    ``B0``, ``C0`` (without), ``A_replay``…``C_replay`` (the head's replay over the twin's trees)
    and ``F``, ``F_replay`` (the feature value); ``metrics``: ``ebm_metrics.json`` of each of
    ``A``…``C``.  A missing configuration is left out of every comparison that needs it.
    """
    rows = []
    for c in CONFIGS:
        if c not in evals:
            continue
        e, e0, ed = evals[c], evals.get(f"{c}0"), evals.get(f"{c}D")
        ablation = paired_test(e0, e, varies="value model") if e0 else None
        vs_depth = paired_test(ed, e, varies="value model") if ed else None
        stronger = stronger_twin(e0, ed)
        rows.append(
            {
                "config": c,
                "label": e.get("label"),
                "rate": _top_rate(e),
                "rate_no_ebm": _top_rate(e0) if e0 else None,
                "rate_depth_twin": _top_rate(ed) if ed else None,
                # against the log-prob twin (no value model) and against the depth twin
                "ablation": ablation,
                "vs_depth_twin": vs_depth,
                # The claim's control: the stronger twin (module docstring).
                "stronger_twin": stronger,
                "vs_stronger": {"log-prob": ablation, "depth": vs_depth}.get(stronger),
                "replay": replay_prediction(evals.get(f"{c}_replay"), e0, live=e),
                "value_model": value_summary(e),
                "embeddings": embedding_summary(metrics.get(c)),
            }
        )
    claims = [(r["vs_stronger"] or {}).get("p_value") for r in rows]
    for r, p in zip(rows, holm(claims), strict=True):
        if r["vs_stronger"] is not None:
            r["vs_stronger"] = {**r["vs_stronger"], "p_holm": p, "primary": r["config"] == PRIMARY}
    questions = []
    for a, b, why, varies in QUESTIONS:
        if a in evals and b in evals:
            questions.append({"from": a, "to": b, "question": why,
                              "test": paired_test(evals[a], evals[b], varies=varies)})  # fmt: skip
    section = {"iteration": iteration, "configs": rows, "questions": questions,
               "features": feature_comparison(evals)}  # fmt: skip
    section["replay_coverage"] = replay_coverage(
        [r["replay"] for r in rows] + [(section["features"] or {}).get("replay")]
    )
    section["goal"] = value_goal(section, evals)
    return section


TWINS = (
    "log-prob",
    "depth",
)  # the no-value twin; the depth twin (open goals + a fitted depth term)


def stronger_twin(
    logprob_twin: Mapping[str, Any] | None, depth_twin: Mapping[str, Any] | None
) -> str | None:
    """Which twin a value model's claim is judged against: the one that solves more at the largest
    budget, the depth twin on a tie (it is built to be the fairer control); the one there is when
    only one was evaluated; None without either.  A rule fixed before any eval, so choosing it
    cannot favour the value model: it always takes the harder control.

    >>> e = lambda n: {"budgets": [4], "by_budget": [{"budget": 4, "rate": n / 10, "solved": n}]}
    >>> stronger_twin(e(3), e(2)), stronger_twin(e(2), e(2)), stronger_twin(e(2), None)
    ('log-prob', 'depth', 'log-prob')
    """
    if logprob_twin is None or depth_twin is None:
        return None if logprob_twin is None and depth_twin is None else (
            "log-prob" if depth_twin is None else "depth")  # fmt: skip
    return "log-prob" if _top_rate(logprob_twin)["solved"] > _top_rate(depth_twin)["solved"] \
        else "depth"  # fmt: skip


def replay_coverage(predictions: Sequence[Mapping[str, Any] | None]) -> dict[str, Any] | None:
    """Over every recording-only replay of the section (:func:`replay_prediction`s without
    ``--live``): attempts, covered attempts and their ratio at each one's top budget; None without
    one.

    >>> p = lambda a, c: {"live": False, "coverage": {"attempts": a, "covered": c}}
    >>> replay_coverage([p(400, 200), None, p(400, 300), {"live": True}])
    {'replays': 2, 'attempts': 800, 'covered': 500, 'coverage': 0.625}
    """
    cov = [p["coverage"] for p in predictions if p and not p.get("live") and p.get("coverage")]
    if not cov:
        return None
    attempts, covered = sum(c["attempts"] for c in cov), sum(c["covered"] for c in cov)
    return {"replays": len(cov), "attempts": attempts, "covered": covered,
            "coverage": covered / attempts if attempts else None}  # fmt: skip


def value_summary(e: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """What an eval's ``value_model`` block (:func:`burnqed.eval.stage.value_model_block`) says, in
    the few figures compare.md shows: the energy weight and where it came from, the fit's held-out
    frontier top-1 (log-prob, value, fitted sum) and the sum's paired gain over log-prob in standard
    errors, the median sibling spans and the fraction of decisions the value changed.

    >>> v = value_summary({"value_model": {"energy_weight": {"value": 2.0, "source": "fitted",
    ...     "fit": {"heldout_sum_gain": {"difference": 0.1, "se": 0.04, "in_se": 2.5}}},
    ...     "effect": {"median_sibling_span": {"energy": 1.0, "logprob": 2.0, "ratio": 0.5},
    ...                "decisions_changed": {"pops": 10, "changed": 3, "fraction": 0.3}}}})
    >>> v["weight"], v["span_ratio"], v["decisions_changed"], v["heldout_gain"]["in_se"]
    (2.0, 0.5, 0.3, 2.5)
    """
    vm = (e or {}).get("value_model")
    if not vm:
        return None
    w = vm.get("energy_weight") or {}
    fit = w.get("fit") or {}
    eff = vm.get("effect") or {}
    span = eff.get("median_sibling_span") or {}
    dec = eff.get("decisions_changed") or {}
    return {
        "weight": w.get("value"),
        "logprob_weight": w.get("logprob_weight"),  # 0 where the fit let the energy rank alone
        "source": w.get("source"),
        "heldout_top1": fit.get("heldout_frontier_top1"),
        "heldout_top1_same_depth": fit.get("heldout_frontier_top1_same_depth"),
        "heldout_gain": fit.get("heldout_sum_gain"),
        # the sampling temperature(s) of the searches whose decisions the fit used
        "decisions_temperature": fit.get("decisions_temperature"),
        "span_energy": span.get("energy"),
        "span_logprob": span.get("logprob"),
        "span_ratio": span.get("ratio"),
        "energy_alone": bool(span.get("energy_alone")),
        "decisions": dec.get("pops"),
        "decisions_changed": dec.get("fraction"),
        # the value directory ships its depth twin for a head fitted to weight 0 (ebm.fallback)
        "fallback_for": ((e.get("provenance") or {}).get("ebm") or {}).get("fallback_for"),
    }


# The value model's goal and its acceptance (issue 30), each a check compare.md states.
GOAL_NET_FRACTION = 0.02  # C beats its twin by >= 8 theorems net of 400
GOAL_SE = 2.0  # held-out: the fitted sum beats log-prob alone by >= 2 bootstrap SE
GOAL_SPAN_RATIO = 0.3  # the weighted energy's sibling span against the log-prob's
GOAL_DECISIONS = 0.1  # decisions whose pop the energy changed
# The span ratio where the fit gave the log-prob term weight 0: the energy alone ranks.
ENERGY_ALONE = "energy alone (log-prob weight 0)"


def weight_text(v: Mapping[str, Any]) -> str:
    """The energy weight of a :func:`value_summary`, or that the energy ranks alone.

    >>> weight_text({"weight": 1.0, "logprob_weight": 0.0}), weight_text({"weight": 57.0})
    ('energy alone', '57')
    """
    if v.get("logprob_weight") == 0 and v.get("weight"):
        return "energy alone"
    return "–" if v.get("weight") is None else format(v["weight"], ".3g")


def same_depth_text(v: Mapping[str, Any], value: str = "energy") -> str:
    """A :func:`value_summary`'s held-out frontier top-1 where the open nodes share a depth:
    log-prob / value / sum (decisions).

    >>> r = lambda x: {"rate": x, "se": 0.05, "decisions": 200}
    >>> same_depth_text({"heldout_top1_same_depth": {"logprob": r(0.46), "energy": r(0.405),
    ...                                              "sum": r(0.38)}})
    '0.460 / 0.405 / 0.380 (200)'
    """
    top = v.get("heldout_top1_same_depth") or {}
    if not top:
        return "–"
    rates = [_f((top.get(n) or {}).get("rate")) for n in ("logprob", value, "sum")]
    return " / ".join(rates) + f" ({(top.get('logprob') or {}).get('decisions', 0)})"


def span_text(v: Mapping[str, Any]) -> str:
    """A :func:`value_summary`'s span ratio (∞ where the energy ranks alone)."""
    if v.get("energy_alone"):
        return "∞"
    return "–" if v.get("span_ratio") is None else format(v["span_ratio"], ".2f")


def value_goal(section: Mapping[str, Any], evals: Mapping[str, Any]) -> dict[str, Any] | None:
    """The value model's checks for the main line C (None without C): the goal — C beats its
    **stronger twin** (:func:`stronger_twin`) by ``GOAL_NET_FRACTION`` of the theorems net at the
    largest budget, the paired test's verdict ``better`` — and the measured points beside it (the
    feature value against C, two-sided; the energy's reach: span ratio, decisions changed; the
    feature value live against its replay: equal theorem by theorem, where a ``--live`` replay is an
    equality check and a recording-only one can speak), with C's replay prediction (on the
    theorems it covers) and oracle ceiling.  ``met``
    per check: True, False, or None (not measured, or the paired test undecided: a comparison whose
    evals differ in more than the value model says nothing).  Checks marked ``diagnostic`` are
    shown, not judged: the held-out frontier top-1 gain (at 13–22 held-out theorems it cannot
    resolve the effects the live test sees) and the head's held-out rank-1 against chance."""
    c = next((r for r in section["configs"] if r["config"] == "C"), None)
    if c is None:
        return None
    vs, vm = c.get("vs_stronger") or {}, c.get("value_model") or {}
    theorems = (evals.get("C") or {}).get("theorems") or len((evals.get("C") or {}).get(
        "per_theorem") or []) or None  # fmt: skip
    decided = vs.get("verdict") not in (None, UNDECIDED) and vs.get("gained") is not None
    net = vs["gained"] - vs["lost"] if decided else None
    need = None if not theorems else math.ceil(GOAL_NET_FRACTION * theorems)
    f_vs_c = paired_test(evals["C"], evals["F"], varies="value model") \
        if "F" in evals and "C" in evals else None  # fmt: skip
    feats = section.get("features") or {}
    agreement = feats.get("agreement")
    if (feats.get("replay") or {}).get("live"):
        replay_check = (
            "the feature value's live replay = its live eval (an equality check of replay)",
            None if not agreement else f"{agreement['agree']} of {agreement['exact']} equal",
            None if not agreement else agreement["agree"] == agreement["exact"],
        )
    else:
        replay_check = (
            "where its replay covered it, the feature value's live eval agrees theorem by theorem",
            None if not agreement else agreement_text(agreement),
            None if not agreement else agreement["agree"] == agreement["exact"],
        )
    gain = vm.get("heldout_gain") or {}
    emb = c.get("embeddings") or {}

    def check(name: str, value: Any, met: bool | None, diagnostic: bool = False) -> dict[str, Any]:
        return {"check": name, "value": value, "met": met, "diagnostic": diagnostic}

    twin = c.get("stronger_twin") or "–"
    f_decided = bool(f_vs_c) and f_vs_c["verdict"] != UNDECIDED and f_vs_c["gained"] is not None
    checks = [
        check(f"C vs its stronger twin ({twin}): net ≥ {need} theorems, paired test better "
              f"(p < {ALPHA:g})", None if not decided else
              {"net": net, "p_value": vs.get("p_value"), "verdict": vs.get("verdict")},
              None if not decided or need is None else vs["verdict"] == BETTER and net >= need),
        check("the feature value does not beat C (paired, two-sided)", None if not f_decided else
              {"gained": f_vs_c["gained"], "lost": f_vs_c["lost"], "p_value": f_vs_c["p_value"],
               "verdict": f_vs_c["verdict"]},
              None if not f_decided else f_vs_c["verdict"] != BETTER),
        check(f"sibling span of energy_weight · energy ≥ {GOAL_SPAN_RATIO:g} × log-prob's",
              ENERGY_ALONE if vm.get("energy_alone") else vm.get("span_ratio"),
              True if vm.get("energy_alone") else None if vm.get("span_ratio") is None
              else vm["span_ratio"] >= GOAL_SPAN_RATIO),
        check(f"the energy changes ≥ {GOAL_DECISIONS:.0%} of decisions", vm.get("decisions_changed"),
              None if vm.get("decisions_changed") is None
              else vm["decisions_changed"] >= GOAL_DECISIONS),
        check(*replay_check),
        check(f"diagnostic: held-out pool decisions, fitted sum over log-prob in SE (was a goal at "
              f"≥ {GOAL_SE:g} SE)", gain.get("in_se"),
              None if gain.get("in_se") is None else gain["in_se"] >= GOAL_SE, diagnostic=True),
        check("diagnostic: the head's held-out rank-1 above chance", None if emb.get("rank1") is None
              else {"rank1": round(emb["rank1"], 3), "chance": emb.get("chance")},
              None if emb.get("rank1") is None or emb.get("chance") is None
              else emb["rank1"] > emb["chance"], diagnostic=True),
    ]  # fmt: skip
    known = [x["met"] for x in checks if not x["diagnostic"]]
    verdict = "met" if all(m is True for m in known) else (
        "not met" if any(m is False for m in known) else "undecided")  # fmt: skip
    rp = c.get("replay") or {}
    return {"verdict": verdict, "checks": checks, "stronger_twin": c.get("stronger_twin"),
            "replay_prediction": prediction_figures(rp) if rp else None,
            "oracle_ceiling": rp.get("oracle_ceiling"),
            "live": (c.get("rate") or {}).get("solved"),
            "no_ebm": None if not evals.get("C0") else _top_rate(evals["C0"])["solved"],
            "depth_twin": None if not evals.get("CD") else _top_rate(evals["CD"])["solved"]}  # fmt: skip


def prediction_figures(p: Mapping[str, Any]) -> dict[str, Any]:
    """A :func:`replay_prediction`'s figures the goal and the summary quote: live (an equality
    check) or not; on the covered theorems gained, lost and p, how many they are and the coverage
    of attempts, the uncovered apart, and the most it could gain.

    >>> t = {"gained": 0, "lost": 4, "p_value": 0.125, "theorems": 211}
    >>> prediction_figures({"live": False, "test": t, "max_gain": 0, "covered_theorems": 211,
    ...     "coverage": {"attempts": 400, "covered": 211, "coverage": 0.5275},
    ...     "uncovered": {"theorems": 189, "recorded_solved": 20}})["coverage"]
    0.5275
    """
    t = p.get("test") or {}
    return {
        "live": bool(p.get("live")),
        "gained": t.get("gained"),
        "lost": t.get("lost"),
        "p_value": t.get("p_value"),
        "covered_theorems": p.get("covered_theorems"),
        "coverage": (p.get("coverage") or {}).get("coverage"),
        "uncovered_theorems": (p.get("uncovered") or {}).get("theorems"),
        "max_gain": p.get("max_gain"),
    }


def prediction_text(f: Mapping[str, Any] | None) -> str:
    """:func:`prediction_figures` in words (what compare.md's goal and the docs say).

    >>> prediction_text({"live": False, "gained": 0, "lost": 4, "covered_theorems": 211,
    ...                  "coverage": 0.5275, "uncovered_theorems": 189, "max_gain": 0})
    '+0/−4 on the 211 theorems it covers (52.8% of attempts; 189 uncovered apart), able to gain at most 0'
    """
    if not f:
        return "no replay"
    if f["live"]:
        return "a live replay (an equality check, not a prediction)"
    if f.get("gained") is None:
        return f"undecided on the {f['covered_theorems']} theorems it covers"
    apart = f"; {f['uncovered_theorems']} uncovered apart" if f.get("uncovered_theorems") else ""
    return (f"+{f['gained']}/−{f['lost']} on the {f['covered_theorems']} theorems it covers "
            f"({pct(f['coverage'])} of attempts{apart}), able to gain at most {f['max_gain']}")  # fmt: skip


def agreement_text(a: Mapping[str, Any]) -> str:
    """:func:`replay_agreement` in words.

    >>> agreement_text({"exact": 289, "agree": 289, "inexact": 111, "differ": [],
    ...                 "live_vs_twin_inexact": {"gained": 13, "lost": 2}})
    'agrees on 289 of 289; live vs none in the 111 uncovered theorems +13/−2'
    """
    text = f"agrees on {a['agree']} of {a['exact']}"
    if a["differ"]:
        text += f" (differs: {', '.join(a['differ'])})"
    inexact = a.get("live_vs_twin_inexact")
    if inexact is not None:
        text += (f"; live vs none in the {a['inexact']} uncovered theorems "
                 f"+{inexact['gained']}/−{inexact['lost']}")  # fmt: skip
    return text


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
    model (``C0``), live and replayed over ``C0``'s trees before the live eval ran (``F_replay``:
    with ``--live`` an equality check against the live eval, else a prediction on the theorems it
    covers); None when neither was evaluated."""
    base = evals.get("C0")
    out: dict[str, Any] = {}
    live = evals.get("F")
    if live is not None:
        out["live"] = {"label": live.get("label"), "rate": _top_rate(live),
                       "test": paired_test(base, live, varies="value model") if base else None,
                       "value_model": value_summary(live)}  # fmt: skip
    replay = replay_prediction(evals.get("F_replay"), base, live=live)
    if replay is not None:
        out["replay"] = replay
        if live is not None:
            out["agreement"] = replay_agreement(evals["F_replay"], live, base)
    return out or None


def replay_agreement(
    replay: Mapping[str, Any], live: Mapping[str, Any], twin: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """Where a replay and the live eval of the same priority differ, at the replay's top budget: a
    theorem is *exact* (covered) when none of its attempts needed an answer the recording lacked
    before that budget (the replay block's ``inexact_attempts``; every theorem of a ``--live``
    replay); there the two must agree theorem by theorem (else replay and search differ).
    ``live_vs_twin_inexact``: the live eval's gained and lost theorems against the ``twin`` (whose
    trees were replayed) that lie among the uncovered theorems — what the recording could not show.
    None without per-theorem rows.

    >>> row = lambda t, b: {"theorem": t, "evaluated": True, "budget_at_proof": b}
    >>> rep = {"budgets": [4], "per_theorem": [row("a", 2), row("b", None), row("c", None)],
    ...        "replay": {"inexact_attempts": [{"theorem": "c", "attempt": 0, "from_expansion": 1}]}}
    >>> live = {"budgets": [4], "per_theorem": [row("a", 2), row("b", None), row("c", 3)]}
    >>> twin = {"budgets": [4], "per_theorem": [row("a", 1), row("b", None), row("c", None)]}
    >>> a = replay_agreement(rep, live, twin)
    >>> a["exact"], a["agree"], a["inexact"], a["live_vs_twin_inexact"]
    (2, 2, 1, {'gained': 1, 'lost': 0})
    """
    budget = max(replay["budgets"])
    got, want = solved_at(replay, budget), solved_at(live, budget)
    if got is None or want is None:
        return None
    made_up = {
        x["theorem"]
        for x in (replay.get("replay") or {}).get("inexact_attempts") or []
        if x["from_expansion"] < budget
    }
    exact = [t for t in got if t not in made_up and t in want]
    inexact = [t for t in want if t in made_up]
    out: dict[str, Any] = {
        "budget": budget,
        "exact": len(exact),
        "agree": sum(got[t] == want[t] for t in exact),
        "differ": sorted(t for t in exact if got[t] != want[t])[:10],
        "inexact": len(inexact),
        "live_vs_twin_inexact": None,
    }
    before = solved_at(twin, budget) if twin is not None else None
    if before is not None:
        out["live_vs_twin_inexact"] = {
            "gained": sum(want[t] and not before.get(t, False) for t in inexact),
            "lost": sum(before.get(t, False) and not want[t] for t in inexact),
        }
    return out


def replay_prediction(
    replay: Mapping[str, Any] | None,
    twin: Mapping[str, Any] | None,
    live: Mapping[str, Any] | None = None,
) -> dict[str, Any] | None:
    """A replay at its top budget, as compare.md shows it; None without a replay.

    Without ``--live`` it is a prediction from the recording alone: ``coverage`` (attempts, covered,
    ratio), ``test``: its paired test against the ``twin`` whose trees it replayed, over the
    theorems it covers (its eval-shaped rows hold only those; the twin's others are left out and
    counted), ``uncovered`` (theorems apart, and how many the twin solved), ``max_gain`` (the most
    it could gain: 0 at the twin's own budget), the unexpanded pops and the oracle ceiling.  With
    ``--live`` it is an equality check: ``equality`` is :func:`replay_agreement` against ``live``,
    the live eval of its priority (None without one), ``live_expansions`` the states it expanded
    live because the recording never had.

    >>> e = {"label": "iter_1 C (replay)", "budgets": [4], "by_budget": [{"budget": 4,
    ...      "rate": 0.25, "solved": 10}], "replay": {"live": False, "by_budget": [{"budget": 4,
    ...      "coverage": {"attempts": 50, "covered": 40, "coverage": 0.8}, "covered_theorems": 40,
    ...      "uncovered": {"theorems": 10, "recorded_solved": 2}, "prediction": {"max_gain": 0},
    ...      "unexpanded": 12, "inexact_attempts": 10}]}}
    >>> p = replay_prediction(e, None)
    >>> p["coverage"]["covered"], p["uncovered"]["theorems"], p["max_gain"], p["live"], p["test"]
    (40, 10, 0, False, None)
    """
    if replay is None:
        return None
    rate = _top_rate(replay)
    block = replay.get("replay") or {}
    top = next((b for b in block.get("by_budget") or [] if b["budget"] == rate["budget"]), {})
    source = block.get("source") or {}
    is_live = bool(block.get("live"))
    return {
        "label": replay.get("label"),
        "live": is_live,
        "role": block.get("role"),
        "rate": rate,
        "test": paired_test(twin, replay, varies="value model") if twin else None,
        "coverage": top.get("coverage"),
        "covered_theorems": top.get("covered_theorems"),
        "uncovered": top.get("uncovered"),
        "max_gain": (top.get("prediction") or {}).get("max_gain"),
        "equality": replay_agreement(replay, live, twin) if is_live and live else None,
        "unexpanded": top.get("unexpanded"),
        "inexact_attempts": top.get("inexact_attempts"),
        "live_expansions": (source.get("expansions") or {}).get("live", 0) if is_live else None,
        "oracle_ceiling": top.get("oracle_ceiling"),  # a priority that knew the proof paths
    }


def paired_cell(p: Mapping[str, Any] | None, *, budget: bool = False, p_value: bool = False) -> str:
    """A live eval's or a replay's paired test as a table cell.  A live eval: ``rate;
    +gained/−lost`` (``undecided`` when the test is).  A recording-only replay: ``+gained/−lost on
    N covered (coverage of attempts, M apart); can gain ≤ G`` — no rate: its theorems are the
    covered ones.  A ``--live`` replay: ``live replay = live eval: N of N equal`` and the states
    it expanded live.

    >>> t = {"gained": 4, "lost": 1, "p_value": 0.375}
    >>> paired_cell({"rate": {"rate": 0.3, "budget": 8}, "test": t})
    '30.0%; +4/−1'
    >>> paired_cell({"rate": {"rate": 0.3, "budget": 8}, "test": t, "live": False,
    ...     "coverage": {"attempts": 40, "covered": 30, "coverage": 0.75}, "covered_theorems": 30,
    ...     "uncovered": {"theorems": 10, "recorded_solved": 3}, "max_gain": 0})
    '+4/−1 on 30 covered (75.0% of attempts, 10 apart); can gain ≤ 0'
    >>> paired_cell({"rate": {"rate": 0.3, "budget": 8}, "test": t, "live": True,
    ...     "equality": {"exact": 40, "agree": 40}, "live_expansions": 7})
    'live replay = live eval: 40 of 40 equal; 7 expanded live'
    """
    if p is None:
        return "–"
    t = p.get("test") or {}
    counts = "undecided" if t.get("gained") is None else f"+{t['gained']}/−{t['lost']}"
    counts += f", p {format_p(t['p_value'])}" if p_value and t.get("gained") is not None else ""
    if t.get("gained") is not None and t.get("verdict") == "undecided":  # counts, but no verdict
        counts += " (undecided)"
    at = f" ({p['rate']['budget']})" if budget else ""
    if p.get("live"):
        eq = p.get("equality")
        cell = ("live replay (no live eval to check)" if not eq
                else f"live replay = live eval{at}: {eq['agree']} of {eq['exact']} equal")  # fmt: skip
        return cell + (
            f"; {p['live_expansions']} expanded live" if p.get("live_expansions") else ""
        )
    if "coverage" not in p:  # a live eval
        return f"{pct(p['rate']['rate'])}{at}; {counts}"
    cov, apart = p.get("coverage") or {}, (p.get("uncovered") or {}).get("theorems")
    said = [f"{p['rate']['budget']} nodes"] if budget else []
    said += [f"{pct(cov.get('coverage'))} of attempts", *([f"{apart} apart"] if apart else [])]
    cell = f"{counts} on {p.get('covered_theorems')} covered ({', '.join(said)})"
    return cell + ("" if p.get("max_gain") is None else f"; can gain ≤ {p['max_gain']}")


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


def test_text(t: Mapping[str, Any] | None) -> str:
    """A paired test as a table cell: ``+gained/−lost, p P (Holm H) **primary**, verdict``.

    >>> test_text({"gained": 5, "lost": 1, "p_value": 0.21875, "verdict": "no measurable effect"})
    '+5/−1, p 0.219, no measurable effect'
    """
    if t is None:
        return "–"
    if t.get("gained") is None:
        return t["verdict"]
    return (f"+{t['gained']}/−{t['lost']}, p {format_p(t['p_value'])}"
            + ("" if t.get("p_holm") is None else f" (Holm {format_p(t['p_holm'])})")
            + (" **primary**" if t.get("primary") else "") + f", {t['verdict']}")  # fmt: skip


def _f(x: float | None, fmt: str = ".3f") -> str:
    return "–" if x is None else format(x, fmt)


# What compare.md says a replay can and cannot say (beside its table).
REPLAY_NOTE = (
    "Replay prediction: the EBM searching the no-EBM twin's recorded trees again (`burnqed "
    "replay`, without `--live`), paired with the twin only on the attempts it could replay "
    "exactly (every pop one the twin expanded; coverage = covered attempts / all); the theorems "
    "it could not cover are counted apart, never as failures. Over the twin's trees it cannot "
    "solve a theorem the twin did not prove within the twin's own budget, so at that budget it "
    "cannot gain one (can gain ≤ 0): it shows what the EBM's priority would lose, never what it "
    "would win. A `--live` replay predicts nothing: it is an equality check (live replay = live "
    "eval)."
)


def headline_lines(section: Mapping[str, Any]) -> list[str]:
    """What a section of the main line alone (the demo's default target: C and its two twins)
    leaves out, and where it is."""
    if [r["config"] for r in section["configs"]] != [PRIMARY]:
        return []
    return ["Only the main line here, C against its two twins (its Holm p is its p): the "
            "configurations beside it, the replays, the feature value and the EBM metrics are the "
            "attribution set (the demo's `ablations` target, `results/ablations/compare.md`).",
            ""]  # fmt: skip


def coverage_lines(cov: Mapping[str, Any] | None) -> list[str]:
    """The overall coverage of the section's recording-only replays (:func:`replay_coverage`)."""
    if not cov:
        return []
    return [f"Overall, the {cov['replays']} recording-only replays could replay {cov['covered']} "
            f"of {cov['attempts']} attempts exactly ({pct(cov['coverage'])}).", ""]  # fmt: skip


def configs_markdown(section: Mapping[str, Any]) -> list[str]:
    """Markdown lines: the configurations' table, the three questions and the ablations."""
    i = section["iteration"]
    out = [f"## Value-model configurations, iteration {i}", ""]
    if not section["configs"]:
        return [*out, "No configuration evaluated.", ""]
    rows = []
    for r in section["configs"]:
        emb = r["embeddings"] or {}
        rows.append([
            r["config"], r["label"] or "", f"{pct(r['rate']['rate'])} ({r['rate']['budget']})",
            paired_cell(r.get("replay")),
            pct(r["rate_no_ebm"]["rate"]) if r["rate_no_ebm"] else "–",
            pct(r["rate_depth_twin"]["rate"]) if r.get("rate_depth_twin") else "–",
            test_text(r["ablation"]), test_text(r.get("vs_depth_twin")),
            f"{r.get('stronger_twin') or '–'}: {test_text(r.get('vs_stronger'))}",
            _f(emb.get("centroid_separation")), _f(emb.get("probe_balanced_accuracy")),
            f"{_f(emb.get('rank1'))} (chance {_f(emb.get('chance'))})" if emb else "–",
            f"{_f(emb.get('rank1_depth_ge4'))} ({emb.get('groups_depth_ge4', 0)})" if emb else "–",
        ])  # fmt: skip
    out += [
        markdown_table(
            ["config", "eval", "with EBM", "replay prediction", "log-prob twin", "depth twin",
             "EBM vs log-prob twin", "EBM vs depth twin", "EBM vs the stronger twin (Holm)",
             "centroid sep.", "probe bal. acc.", "EBM held-out rank-1", "rank-1 depth ≥ 4 (groups)"],
            rows,
        ),
        "",
        "The twins: the same policy without a value model (log-prob twin), and with the depth twin "
        "— the number of open goals and a depth term, fitted on the same pool decisions and "
        "cross-fitted the same way. Each value model's claim is judged against the stronger twin "
        "(more solved at the largest budget; the depth twin on a tie), with Holm's correction "
        "over the configurations; C's is the pre-declared primary comparison.",
        "",
        *headline_lines(section),
        REPLAY_NOTE,
        "",
        *coverage_lines(section.get("replay_coverage")),
        "Rank-1 counts a tie among t candidates as 1/t, on the split's held-out theorems (SFT's "
        "validation and test theorems).",
        "",
    ]  # fmt: skip
    ablations = [(f"{r['config']} EBM vs {name}", r[key]) for r in section["configs"]
                 for key, name in (("ablation", "log-prob twin"), ("vs_depth_twin", "depth twin"))
                 if r.get(key) is not None]  # fmt: skip
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
        cells = [paired_cell(feats.get(name), budget=True, p_value=True)
                 for name in ("live", "replay")]  # fmt: skip
        live_replay = (feats.get("replay") or {}).get("live")
        what = ("its live replay over that eval's trees (an equality check, not a prediction)"
                if live_replay else "its replay prediction over that eval's trees")  # fmt: skip
        out += [
            "The feature value (goals, hypotheses, tokens; fitted on the pool) against C's policy "
            f"without a value model, and {what}:",
            "",
            markdown_table(["value", "live (paired vs none)",
                            "live replay" if live_replay else "replay prediction"],
                           [["features", *cells]]),
            "",
        ]  # fmt: skip
        fv = (feats.get("live") or {}).get("value_model") or {}
        if fv.get("heldout_top1"):
            top = {n: _f((fv["heldout_top1"].get(n) or {}).get("rate"))
                   for n in ("logprob", "value", "sum")}  # fmt: skip
            out += [f"Its fit's frontier top-1 on held-out pool decisions: log-prob {top['logprob']}, "
                    f"features {top['value']}, fitted sum {top['sum']}; where the open nodes share "
                    f"a depth, log-prob / features / sum: {same_depth_text(fv, 'value')}.", ""]  # fmt: skip
        if feats.get("agreement"):
            a = feats["agreement"]
            if live_replay:
                out += [f"Live replay = live eval, theorem by theorem at {a['budget']} nodes: "
                        f"{a['agree']} of {a['exact']} equal.", ""]  # fmt: skip
            else:
                out += [f"Replay against live, theorem by theorem at {a['budget']} nodes: on the "
                        f"{a['exact']} theorems the replay covered it {agreement_text(a)} (what "
                        "the recording could not answer).", ""]  # fmt: skip
    out += value_markdown(section)
    # A replay's test is undecided where it differs from its twin in more than the value model
    # (e.g. a model --allow-mismatch let through): say why, as for the other tests.
    replays = [(f"{r['config']} replay vs its twin", r["replay"]["test"])
               for r in section["configs"] if (r.get("replay") or {}).get("test")]  # fmt: skip
    lines = [f"- {n}: undecided — {r}" for n, t in [*ablations, *named, *replays]
             for r in t["reasons"]]  # fmt: skip
    lines += notes_lines([*ablations, *named])
    return [*out, *lines, ""] if lines else out


def value_markdown(section: Mapping[str, Any]) -> list[str]:
    """The value models' reach (weight, spans, decisions changed, held-out frontier top-1) and the
    goal's checks, as markdown lines (none when no eval had a value model)."""
    rows, notes = [], []
    for r in section["configs"]:
        v = r.get("value_model")
        if not v:
            continue
        if v.get("fallback_for"):  # the value directory ships its depth twin (ebm.fallback)
            notes += [f"> **{r['config']} ships its depth twin** (`ebm.fallback`): "
                      f"{v['fallback_for'].get('why')}.", ""]  # fmt: skip
        top = v.get("heldout_top1") or {}
        gain = v.get("heldout_gain") or {}

        def t1(name: str, top: Mapping[str, Any] = top) -> str:
            x = top.get(name) or {}
            return "–" if x.get("rate") is None else f"{x['rate']:.3f} ± {_f(x.get('se'))}"

        config = r["config"] + (" (its depth twin)" if v.get("fallback_for") else "")
        rows.append([
            config, f"{weight_text(v)} ({v['source'] or '–'})",
            f"{_f(v['span_energy'])} / {_f(v['span_logprob'])} ({span_text(v)})",
            "–" if v["decisions_changed"] is None
            else f"{v['decisions_changed']:.1%} of {v['decisions']}",
            t1("logprob"), t1("energy"), t1("sum"),
            "–" if gain.get("in_se") is None else f"{gain['difference']:+.3f} ({gain['in_se']:.1f} SE)",
            same_depth_text(v),
        ])  # fmt: skip
    out = notes
    if rows:
        temps = sorted({t for r in section["configs"] for t in
                        ((r.get("value_model") or {}).get("decisions_temperature") or [])})  # fmt: skip
        sampled = f", sampled at temperature {', '.join(f'{t:g}' for t in temps)}" if temps else ""
        out += [
            "What each value model could do to the search: its energy weight (fitted on the pool's "
            f"decisions{sampled}, cross-fitted by theorem; \"energy alone\" where the fit gave the log-prob "
            "term weight 0), the median sibling span of weight · energy against the log-prob "
            "term's, the decisions of the eval whose pop the energy changed, and the fit's frontier "
            "top-1 on held-out pool decisions (theorems no head or weight trained on), also on "
            "those whose open nodes share a depth (the choices a best-first search of a few nodes "
            "mostly makes):",
            "",
            markdown_table(["config", "energy weight", "sibling span: energy / log-prob (ratio)",
                            "decisions changed", "held-out top-1: log-prob", "energy", "fitted sum",
                            "sum − log-prob", "same depth: log-prob / energy / sum (decisions)"],
                           rows),
            "",
        ]  # fmt: skip
    goal = section.get("goal")
    if goal:
        out += [
            f"### The value model's goal: **{goal['verdict'].upper()}**",
            "",
            f"C solves {goal['live']} with its EBM, {goal['no_ebm']} without; its replay over the "
            f"no-EBM trees predicted {prediction_text(goal['replay_prediction'])}, and a priority "
            f"that knew the proof paths would solve {goal['oracle_ceiling']} (the oracle ceiling).",
            "",
            goal_table(goal),
            "",
        ]  # fmt: skip
    return out


def goal_table(goal: Mapping[str, Any]) -> str:
    """The goal's checks (:func:`value_goal`) as a markdown table: met (✓, ✗, ? not measured),
    the check, what was measured (compare.md and the docs' generated block both show it)."""
    mark = {True: "✓", False: "✗", None: "?"}
    # a diagnostic is shown in brackets: measured, not judged

    def shown(x: Any) -> str:
        if isinstance(x, dict):
            return ", ".join(f"{k} {format_p(v) if k == 'p_value' else v}" for k, v in x.items())
        return "–" if x is None else (f"{x:.3g}" if isinstance(x, float) else str(x))

    return markdown_table(["", "check", "measured"],
                          [[f"({mark[x['met']]})" if x.get("diagnostic") else mark[x["met"]],
                            x["check"], shown(x["value"])]
                           for x in goal["checks"]])  # fmt: skip
