"""The paired test every judged comparison uses: exact McNemar on "solved at the budget".

Two evals of the same benchmark are compared theorem by theorem, not by their solve rates: over the
theorems *both* evaluated (a theorem one of them did not evaluate — infrastructure errors, an
unfinished run — is left out and counted), each theorem is solved at the budget by both, by neither,
only by the later eval (*gained*) or only by the earlier (*lost*).  Under "no difference" a theorem
that changed is as likely to have been gained as lost, so the number gained among the ``b + c``
that changed is Binomial(b + c, 1/2); the exact two-sided p-value is
``min(1, 2·P(X ≤ min(b, c)))`` with ``X ~ Bin(b + c, 1/2)`` (``p = 1`` when nothing changed),
computed in exact integer arithmetic: no randomness, no approximation.

A theorem is solved at budget ``b`` when its ``budget_at_proof`` (the eval JSON's per-theorem rows,
:mod:`burnqed.eval.metrics`) is at most ``b``; ``b`` must be one of the eval's budgets.  The default
budget is the largest both evals share; a search-longer control is compared at each eval's own
largest budget (``budget=(b_before, b_after)``).

Verdicts (:data:`VERDICTS`), each comparison at :data:`ALPHA` = 0.05, two-sided, declared before
the data are seen (each learning step, each control, the EBM ablation, the value-model
configurations):

- ``better``: p < α and more theorems gained than lost;
- ``worse``: p < α and more lost than gained;
- ``no measurable effect``: p ≥ α — the counts that changed are what chance would give;
- ``undecided``: no evidence either way, with the reason — an eval is partial, the evals differ in
  more than the factor the comparison varies (below), they share no budget, or there is nothing to
  pair (no per-theorem rows, no theorem both evaluated).  The counts are still given when they exist.

**A pair varies one factor.**  Each comparison declares the factor it varies (``varies``, one of
:data:`FACTORS`): the ``model`` (a learning step, S → B, A → C: another policy with the value model
trained for it), the ``value model`` (an EBM ablation, B → C: the same policy), the ``budget``
(the search-longer control: an earlier model given more search against a later one given more
training), or ``training`` (expert iteration against search only, two pool curves of
:mod:`burnqed.eval.compute`: the models, value models and the value model's search temperature).  Every other field of :data:`COMPARED_FIELDS` — benchmark digest, attempts, seed,
candidates, temperature, top_p, max_new_tokens, nodes per step, torch threads, instruction set (the
``machine`` block), model, value model, budget factor — must be equal in the two evals, else the
comparison is ``undecided`` naming the field and both values (:func:`differences`): a difference
the paired test finds could come from any of them.  A field an eval does not record counts as
None: unrecorded in both is equal, recorded in one only is a difference.

Example::

    >>> mcnemar_p(30, 27) > 0.7, mcnemar_p(63, 13) < 1e-8
    (True, True)
    >>> mcnemar_p(0, 0), mcnemar_p(6, 0)
    (1.0, 0.03125)
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from math import comb
from typing import Any

log = logging.getLogger(__name__)

ALPHA = 0.05  # per pre-declared comparison, two-sided
BETTER = "better"
WORSE = "worse"
NO_EFFECT = "no measurable effect"
UNDECIDED = "undecided"
VERDICTS = (BETTER, WORSE, NO_EFFECT, UNDECIDED)
TEST = "exact two-sided McNemar (binomial test on the theorems solved by one eval only)"


def mcnemar_p(gained: int, lost: int) -> float:
    """Exact two-sided McNemar p-value of ``gained`` vs ``lost`` discordant theorems."""
    if gained < 0 or lost < 0:
        raise ValueError(f"counts must be >= 0, got gained={gained} lost={lost}")
    n = gained + lost
    if n == 0:
        return 1.0
    tail = sum(comb(n, i) for i in range(min(gained, lost) + 1))  # exact integers
    return min(1.0, 2 * tail / 2**n)  # int / int: correctly rounded, whatever the size


def format_p(p: float | None) -> str:
    if p is None:
        return "–"
    return f"{p:.2g}" if p < 0.001 else f"{p:.3f}"


def label_of(e: Mapping[str, Any]) -> str:
    return str(e.get("label") or "eval")


def temperature_of(e: Mapping[str, Any]) -> float | None:
    """The sampling temperature an eval's search used (``provenance.sampling.temperature``)."""
    t = _field("provenance", "sampling", "temperature")(e)
    return None if t is None else float(t)


def _field(*keys: str) -> Callable[[Mapping[str, Any]], Any]:
    """A getter of ``e[k1][k2]…``: None where a level is missing (an eval from before it existed)."""

    def get(e: Mapping[str, Any]) -> Any:
        x: Any = e
        for k in keys:
            x = x.get(k) if isinstance(x, Mapping) else None
        return x

    return get


def _artifact(key: str) -> Callable[[Mapping[str, Any]], Any]:
    """The identity of the model or EBM an eval used: its content digest, else (a hub id, a path
    not on this machine) its path; None without one (no EBM)."""

    def get(e: Mapping[str, Any]) -> Any:
        a = _field("provenance", key)(e)
        return (a.get("sha256") or a.get("path")) if isinstance(a, Mapping) else a

    return get


# What two evals must share to be compared, where an eval JSON records it (burnqed.eval.stage: the
# search's sampling block and config; the `machine` block of burnqed.determinism).  One list, so a
# new field that decides results is added once.
COMPARED_FIELDS: tuple[tuple[str, Callable[[Mapping[str, Any]], Any]], ...] = (
    ("benchmark", _field("benchmark", "sha256")),
    ("attempts (pass_n)", _field("pass_n")),
    ("seed", _field("provenance", "seeds", "seed")),
    ("candidates", _field("provenance", "sampling", "n")),
    ("temperature", _field("provenance", "sampling", "temperature")),
    ("top_p", _field("provenance", "sampling", "top_p")),
    ("max_new_tokens", _field("provenance", "sampling", "max_new_tokens")),
    ("nodes per step", _field("provenance", "config", "search", "expansions_per_step")),
    ("torch threads", _field("machine", "torch_threads")),  # CPU log-probs move with it
    ("instruction set", _field("machine", "cpu_capability")),  # and with the kernels' ISA
    ("model", _artifact("model")),
    ("value model", _artifact("ebm")),
    ("budget factor", _field("budget_factor")),  # the search-longer control's multiplier
)
# The factor a comparison varies → the fields of COMPARED_FIELDS it may differ in.
FACTORS: dict[str, tuple[str, ...]] = {
    # a learning step or another policy: its value model comes with it (none at iteration 0)
    "model": ("model", "value model"),
    # an EBM ablation or another head: the same policy
    "value model": ("value model",),
    # the search-longer control: an earlier model with more search against a later, trained one
    "budget": ("budget factor", "model", "value model"),
    # expert iteration against search only on the search pool (burnqed.eval.compute's pool
    # curves): training, and with it the model, the value model and the search temperature the
    # value model brings (search.temperature_with_ebm)
    "training": ("model", "value model", "temperature"),
}


def _shown(x: Any) -> str:
    if x is None:
        return "not recorded"
    if isinstance(x, float):
        return f"{x:g}"
    return str(x)


def differences(before: Mapping[str, Any], after: Mapping[str, Any], *, varies: str) -> list[str]:
    """Why ``before`` and ``after`` (eval JSONs) differ in more than ``varies`` (a key of
    :data:`FACTORS`): one line per field of :data:`COMPARED_FIELDS` outside the factor whose values
    differ, naming it and both values.

    >>> a = {"label": "iter_0", "provenance": {"seeds": {"seed": 0}, "model": {"sha256": "m0"}}}
    >>> b = {"label": "iter_1", "provenance": {"seeds": {"seed": 1}, "model": {"sha256": "m1"}}}
    >>> differences(a, b, varies="model")
    ['different seed: iter_0 0, iter_1 1 — only the model may differ']
    >>> differences(a, {**a, "machine": {"torch_threads": 2}}, varies="value model")
    ['different torch threads: iter_0 not recorded, iter_0 2 — only the value model may differ']
    """
    if varies not in FACTORS:
        raise ValueError(f"varies={varies!r}: expected one of {', '.join(FACTORS)}")
    out = []
    for name, get in COMPARED_FIELDS:
        x, y = get(before), get(after)
        if name not in FACTORS[varies] and x != y:
            out.append(
                f"different {name}: {label_of(before)} {_shown(x)}, {label_of(after)} {_shown(y)}"
                f" — only the {varies} may differ"
            )
    return out


def solved_at(e: Mapping[str, Any], budget: int) -> dict[str, bool] | None:
    """Theorems the eval evaluated → solved at ``budget`` (None without per-theorem rows)."""
    rows = e.get("per_theorem")
    if rows is None:
        return None
    return {
        r["theorem"]: r.get("budget_at_proof") is not None and r["budget_at_proof"] <= budget
        for r in rows
        if r.get("evaluated")
    }


def _budgets(
    before: Mapping[str, Any], after: Mapping[str, Any], budget: int | tuple[int, int] | None
) -> tuple[int | None, int | None, str | None]:
    """(budget of before, budget of after, why not) — each must be one of its eval's budgets."""
    ba, bb = set(before.get("budgets") or []), set(after.get("budgets") or [])
    if budget is None:
        shared = ba & bb
        if not shared:
            return None, None, f"no budget in common ({sorted(ba)} vs {sorted(bb)})"
        return max(shared), max(shared), None
    x, y = budget if isinstance(budget, tuple) else (budget, budget)
    missing = [
        f"{label_of(e)} has no budget {b}" for e, b, have in ((before, x, ba), (after, y, bb))
        if b not in have
    ]  # fmt: skip
    return (x, y, None) if not missing else (None, None, "; ".join(missing))


def paired_test(
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    *,
    varies: str,
    budget: int | tuple[int, int] | None = None,
    alpha: float = ALPHA,
) -> dict[str, Any]:
    """``after`` against ``before`` (two eval JSONs): counts, p-value and verdict (module docstring).

    ``varies``: the factor the comparison varies (a key of :data:`FACTORS`); any other difference
    between the evals leaves it undecided.  ``budget``: one budget for both, ``(budget of before,
    budget of after)``, or None for the largest budget both share.
    """
    reasons = differences(before, after, varies=varies)
    t_before, t_after = temperature_of(before), temperature_of(after)
    partial = [
        f"{label_of(e)} {(e.get('status') or {}).get('label')}"
        for e in (before, after)
        if not (e.get("status") or {}).get("complete")
    ]
    if partial:
        reasons.append("partial eval: " + ", ".join(partial))
    b_before, b_after, why = _budgets(before, after, budget)
    out: dict[str, Any] = {
        "test": TEST,
        "before": label_of(before),
        "after": label_of(after),
        "varies": varies,
        "budget_before": b_before,
        "budget_after": b_after,
        "temperature": {"before": t_before, "after": t_after},
        "alpha": alpha,
        "theorems": 0,
        "left_out": {},
        "gained": None,
        "lost": None,
        "both": None,
        "neither": None,
        "gained_theorems": [],
        "lost_theorems": [],
        "p_value": None,
        "complete": not partial,
    }
    if why:
        reasons.append(why)
    else:
        sa, sb = solved_at(before, b_before), solved_at(after, b_after)
        if sa is None or sb is None:
            missing = [label_of(e) for e, s in ((before, sa), (after, sb)) if s is None]
            reasons.append(f"no per-theorem rows in {', '.join(missing)}")
        else:
            paired = sorted(sa.keys() & sb.keys())
            out["left_out"] = {
                f"evaluated by {label_of(before)} only": len(sa.keys() - sb.keys()),
                f"evaluated by {label_of(after)} only": len(sb.keys() - sa.keys()),
            }
            gained = [t for t in paired if sb[t] and not sa[t]]
            lost = [t for t in paired if sa[t] and not sb[t]]
            out.update(
                theorems=len(paired),
                gained=len(gained),
                lost=len(lost),
                both=sum(sa[t] and sb[t] for t in paired),
                neither=sum(not sa[t] and not sb[t] for t in paired),
                gained_theorems=gained,
                lost_theorems=lost,
                p_value=mcnemar_p(len(gained), len(lost)),
            )
            if not paired:
                reasons.append("no theorem evaluated by both")
    if reasons:
        verdict = UNDECIDED
    elif out["p_value"] < alpha:
        verdict = BETTER if out["gained"] > out["lost"] else WORSE
    else:
        verdict = NO_EFFECT
    out.update(verdict=verdict, reasons=reasons)
    return out


def budget_text(t: Mapping[str, Any]) -> str:
    a, b = t.get("budget_before"), t.get("budget_after")
    if a is None:
        return "–"
    return f"{a}" if a == b else f"{a} vs {b}"


def left_out_text(t: Mapping[str, Any]) -> str:
    parts = [f"{n} {why}" for why, n in (t.get("left_out") or {}).items() if n]
    return "; ".join(parts)


def summary_line(t: Mapping[str, Any]) -> str:
    """One line: verdict, counts each way, p, budget, and why it is undecided."""
    line = (
        f"{t['verdict']}: gained {t['gained'] if t['gained'] is not None else '–'}, lost "
        f"{t['lost'] if t['lost'] is not None else '–'}, exact McNemar p = {format_p(t['p_value'])}"
        f", at {budget_text(t)} nodes"
    )
    extra = list(t.get("reasons", []))
    if left_out_text(t):
        extra.append(f"left out: {left_out_text(t)}")
    return line + (f" ({'; '.join(extra)})" if extra else "")


def table_headers() -> list[str]:
    return ["budget", "gained", "lost", "both", "neither", "paired", "p (McNemar)", "verdict"]


def table_cells(t: Mapping[str, Any]) -> list[str]:
    """The :func:`table_headers` cells of one test."""

    def n(x: int | None) -> str:
        return "–" if x is None else str(x)

    return [
        budget_text(t), n(t["gained"]), n(t["lost"]), n(t["both"]), n(t["neither"]),
        n(t["theorems"]), format_p(t["p_value"]), t["verdict"],
    ]  # fmt: skip


def notes_lines(tests: Sequence[tuple[str, Mapping[str, Any]]]) -> list[str]:
    """Markdown bullet lines: the theorems each named test left out (its reasons for being
    undecided are the caller's to word)."""
    lines = []
    for name, t in tests:
        if left_out_text(t):
            lines.append(f"- {name}: left out {left_out_text(t)}")
    return lines
