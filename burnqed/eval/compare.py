"""Compare evals across iterations: iterations as rows (baseline first), budgets as columns,
cumulative solved, a delta row, the theorems each iteration newly solves, and the learning check.

Only evals of the same benchmark file (same sha256) and attempts (pass_n) are compared; anything else
is refused naming both files.  A partial eval stays labelled ``partial n/N`` in its row.

The learning check judges each step (baseline → iter_0 → iter_1 …) and the last iteration against
each search-longer control (an earlier model given more search instead of more training) with the
paired test of :mod:`burnqed.eval.paired` (exact McNemar on "solved at the budget", α = 0.05 per
comparison): a step *rises* and a control is *beaten* only when the test says ``better``.  The check
passes when every step rises and every control is beaten; it fails when one does not, or when an eval
it rests on is partial; it is undecided when there is no control (nothing shows that training, not
search, made the difference) or a comparison is undecided.  A step varies the model (with its value
model), a control the budget against training; evals that differ in anything else — seed,
candidates, sampling, nodes per step, threads, instruction set, benchmark
(:data:`burnqed.eval.paired.COMPARED_FIELDS`) — leave the comparison undecided, the field named.
Every comparison is shown with its p-value and the theorems that changed each way.  An eval whose
model's training a guard stopped (the previous iteration's model: :func:`burnqed.eval.stage.model_stopped`)
is named above the table, with the step and the reason.  On a
confirmation benchmark ``compare.md`` says how many distinct designs have looked at it with this
seed: the ledger of looks plus this run's own (:mod:`burnqed.eval.ledger`).

Example::

    burnqed compare results/baseline/eval.json results/iter_*/eval.json \\
        --control results/iter_0/eval_longer.json --out results/compare.md
"""

from __future__ import annotations

import itertools
import json
import logging
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from burnqed.eval.configs import configs_markdown
from burnqed.eval.ledger import looks_in, looks_markdown, looks_summary, read_ledger
from burnqed.eval.memory import memory_markdown, peak_memory
from burnqed.eval.paired import (
    ALPHA,
    BETTER,
    NO_EFFECT,
    TEST,
    UNDECIDED,
    WORSE,
    notes_lines,
    paired_test,
    table_cells,
    table_headers,
    temperature_of,
)
from burnqed.eval.stage import model_stopped, stopped_text
from burnqed.eval.table import markdown_table, pct

log = logging.getLogger(__name__)

PASS, FAIL = "pass", "fail"


class CompareError(ValueError):
    """Evals that cannot be compared (different benchmark or attempts); names the files."""


def _order(label: str) -> tuple[int, str]:
    if label == "baseline":
        return (-1, label)
    m = re.fullmatch(r"iter_(\d+)", label)
    return (int(m.group(1)), label) if m else (1 << 30, label)


def _same_benchmark(evals: Sequence[tuple[Path, Mapping[str, Any]]], first_path, first) -> None:
    for p, e in evals:
        for key, get in (
            ("benchmark sha256", lambda x: (x.get("benchmark") or {}).get("sha256")),
            ("pass_n", lambda x: x.get("pass_n")),
        ):
            if get(e) != get(first):
                raise CompareError(
                    f"{p} and {first_path} differ in {key} ({get(e)} vs {get(first)}): "
                    "not comparable"
                )


def load_evals(paths: Sequence[Path]) -> list[tuple[Path, dict]]:
    evals = []
    for p in paths:
        try:
            e = json.loads(Path(p).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as err:
            raise CompareError(f"{p}: not a readable eval JSON ({err})") from None
        if e.get("kind") not in ("burnqed eval", "burnqed replay"):  # a replay is an eval's twin
            raise CompareError(f"{p}: not a burnqed eval JSON (kind={e.get('kind')!r})")
        evals.append((Path(p), e))
    evals.sort(key=lambda pe: _order(pe[1].get("label") or pe[0].parent.name))
    if evals:
        _same_benchmark(evals[1:], *evals[0])
    return evals


def _row(path: Path, e: Mapping[str, Any], budgets: Sequence[int], label: str) -> dict:
    by_budget = {b["budget"]: b for b in e["by_budget"]}
    return {
        "label": label,
        "file": str(path),
        "status": e["status"]["label"],
        "complete": e["status"]["complete"],
        "theorems": e["status"]["evaluated_theorems"],
        "temperature": temperature_of(e),
        "rates": {str(b): by_budget[b]["rate"] if b in by_budget else None for b in budgets},
        "solved": {str(b): by_budget[b]["solved"] if b in by_budget else None for b in budgets},
        # why a run with each budget stops (burnqed.outcomes.END_REASONS); None: not recorded
        "ended_by": {str(b): by_budget[b].get("ended_by") if b in by_budget else None
                     for b in budgets},
        # a guard stopped the model's training: it is the previous iteration's (issue 61)
        "model_stopped": model_stopped(e),
    }  # fmt: skip


def compare(
    evals: Sequence[tuple[Path, Mapping[str, Any]]],
    controls: Sequence[tuple[Path, Mapping[str, Any]]] = (),
) -> dict:
    """The comparison as a JSON-able dict (rows in iteration order).  ``controls`` (search-longer
    evals) are rows of their own, checked against the last iteration, never mixed into the
    iteration rows, deltas or cumulative counts."""
    if evals:
        _same_benchmark(controls, *evals[0])
    budgets = sorted({b for _, e in [*evals, *controls] for b in e["budgets"]})
    rows, union, prev_solved = [], set(), None
    for path, e in evals:
        solved = set(e.get("solved_theorems", []))
        union |= solved
        row = _row(path, e, budgets, e.get("label") or path.parent.name)
        expected = e["status"]["expected_theorems"]
        row.update(
            cumulative_solved=len(union),
            cumulative_rate=len(union) / expected if expected else None,
            newly_solved=sorted(solved - prev_solved) if prev_solved is not None else None,
            no_longer_solved=sorted(prev_solved - solved) if prev_solved is not None else None,
            errored_attempts=e["status"]["attempts_errored"],
        )
        rows.append(row)
        prev_solved = solved
    delta = None
    if len(rows) >= 2:
        a, b = rows[-2], rows[-1]
        delta = {
            "from": a["label"],
            "to": b["label"],
            "rates": {
                k: (b["rates"][k] - a["rates"][k])
                if a["rates"][k] is not None and b["rates"][k] is not None
                else None
                for k in b["rates"]
            },
            "cumulative_rate": (b["cumulative_rate"] or 0) - (a["cumulative_rate"] or 0),
        }
    return {
        "kind": "burnqed compare",
        "budgets": budgets,
        "learning": learning_check([e for _, e in evals], [e for _, e in controls]),
        "pass_n": evals[0][1]["pass_n"] if evals else None,
        "benchmark": (evals[0][1].get("benchmark") or {}) if evals else {},
        "rows": rows,
        "controls": [_row(p, e, budgets, e.get("label") or p.stem) for p, e in controls],
        "delta": delta,
        "all_complete": all(r["complete"] for r in rows),
    }


def _top(e: Mapping[str, Any]) -> int | None:
    return max(e["budgets"]) if e.get("budgets") else None


def _judge(tests: Sequence[Mapping[str, Any]], key: str) -> bool | None:
    """True when every test says better; False when one is partial or says otherwise; else None."""
    if not tests:
        return None
    if any(not t["complete"] or t["verdict"] in (WORSE, NO_EFFECT) for t in tests):
        return False
    return True if all(t[key] for t in tests) else None


def learning_check(
    evals: Sequence[Mapping[str, Any]], controls: Sequence[Mapping[str, Any]] = ()
) -> dict:
    """Does the loop learn?  ``evals`` in iteration order (baseline first); ``controls`` are the
    search-longer evals the last iteration must beat (module docstring)."""
    steps = []
    for a, b in itertools.pairwise(evals):
        t = paired_test(a, b, varies="model")  # at the largest budget both share
        t["rises"] = t["complete"] and t["verdict"] == BETTER
        steps.append(t)
    last = evals[-1] if evals else None
    versus = []
    for c in controls:
        if last is None:
            break
        # Each at its own largest budget: the control's is the larger search it stands for.
        t = paired_test(c, last, varies="budget", budget=(_top(c), _top(last)))
        t["beats"] = t["complete"] and t["verdict"] == BETTER
        versus.append(t)
    rises, beats = _judge(steps, "rises"), _judge(versus, "beats")
    reasons = []
    if not steps:
        reasons.append("fewer than two evals: no learning step to judge")
    if not versus:
        reasons.append(
            "no search-longer control given (`burnqed compare … --control eval_longer.json`): "
            "nothing shows that training, not more search, made the difference"
        )
    for name, t in [*((f"{t['before']} → {t['after']}", t) for t in steps),
                    *((f"{t['after']} vs control {t['before']}", t) for t in versus)]:  # fmt: skip
        if not t["complete"]:
            reasons.append(
                f"{name}: fails — a partial eval cannot show learning ({'; '.join(t['reasons'])})"
            )
        elif t["verdict"] in (WORSE, NO_EFFECT):
            reasons.append(f"{name}: {t['verdict']} (p = {t['p_value']:.3g})")
        elif t["verdict"] == UNDECIDED:
            reasons.append(f"{name}: undecided — {'; '.join(t['reasons'])}")
    if rises is False or beats is False:
        verdict = FAIL
    elif rises and beats:
        verdict = PASS
    else:
        verdict = UNDECIDED
    return {
        "test": TEST,
        "alpha": ALPHA,
        "steps": steps,
        "controls": versus,
        "rises_every_iteration": rises,
        "beats_controls": beats,
        "verdict": verdict,
        "reasons": reasons,
        "complete": all(t["complete"] for t in [*steps, *versus]),
    }


def _points(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:+.1f} pts"


def _rate_cells(r: Mapping[str, Any], budgets: Sequence[int]) -> list[str]:
    return [
        "–" if r["rates"].get(str(b)) is None
        else f"{pct(r['rates'][str(b)])} ({r['solved'][str(b)]}/{r['theorems']})"
        for b in budgets
    ]  # fmt: skip


def _temperature(t: float | None) -> str:
    return "–" if t is None else f"{t:g}"


def _mark(t: Mapping[str, Any], key: str) -> str:
    if t[key]:
        return "✓"
    return "?" if t["complete"] and t["verdict"] == UNDECIDED else "✗"


def learning_markdown(lc: Mapping[str, Any]) -> list[str]:
    """The learning check: verdict, one table row per judged comparison, and the reasons."""
    if not lc:
        return []
    out = [
        f"## Does the loop learn? **{lc['verdict'].upper()}**",
        "",
        f"Each comparison: {lc['test']} over the theorems both evals evaluated, solved or not at "
        f"the budget shown, α = {lc['alpha']:g}; gained = solved by the later eval only, lost = by "
        "the earlier only.",
        "",
    ]
    rows, named = [], []
    for t in lc["steps"]:
        named.append((f"{t['before']} → {t['after']}", t))
        rows.append([_mark(t, "rises"), named[-1][0], *table_cells(t)])
    for t in lc["controls"]:
        named.append((f"{t['after']} vs control {t['before']}", t))
        rows.append([_mark(t, "beats"), named[-1][0], *table_cells(t)])
    if rows:
        out += [markdown_table(["", "comparison", *table_headers()], rows), ""]
    out += [f"- {r}" for r in lc["reasons"]]
    out += notes_lines(named)
    return [*out, ""]


def ended_by_markdown(c: Mapping[str, Any]) -> list[str]:
    """Why the attempts of each eval (controls too) stopped at each budget: unsolved attempts end by
    spending the budget (where ordering — the value model — could still change a result) or by the
    frontier dying out (where it cannot)."""
    rows = []
    for r in [*c["rows"], *(c.get("controls") or [])]:
        cells = []
        for b in c["budgets"]:
            split = (r.get("ended_by") or {}).get(str(b))
            if split is None:
                cells.append("–")
                continue
            unsolved = sum(v for k, v in split.items() if k != "proof")
            rest = [
                f"{k} {v}"
                for k, v in split.items()
                if k not in ("proof", "budget", "frontier") and v
            ]
            cells.append(
                f"{split.get('budget', 0)} / {split.get('frontier', 0)}"
                + (f" ({', '.join(rest)})" if rest else "")
                + f" of {unsolved}"
            )
        rows.append([r["label"], *cells])
    if all(cell == "–" for row in rows for cell in row[1:]):
        return []  # evals from before attempts recorded why they ended
    return [
        "## How unsolved attempts ended",
        "",
        "Per budget: attempts that ended by spending the budget / by their frontier dying out (and any "
        "other reason: timeout, statement, fault) of the attempts unsolved at that budget.  Only the "
        "first can a better ordering of the frontier — the value model — turn into a proof.",
        "",
        markdown_table(["eval", *[f"{b} nodes" for b in c["budgets"]]], rows),
        "",
    ]


def cache_rows(
    evals: Sequence[tuple[Path, Mapping[str, Any]]], refuted_max: float = 0.0
) -> list[dict]:
    """What the expansion cache answered and saved in each eval that ran through it (its ``cache``
    block: :mod:`burnqed.search.cache`), one row per file, in the order given — with what Lean
    refuted of it: re-checks that disagreed, answers evicted (by cause), conflicts, attempts
    redone live and attempts written before an answer they used was evicted (``stale``).  A row is
    ``flagged`` when its evicted answers and conflicts pass ``refuted_max`` of its Lean questions
    (``report.cache_refuted_max``), or when any attempt is stale (its result may be wrong)."""
    out, seen = [], set()
    for path, e in evals:
        block = e.get("cache")
        if not block or str(path) in seen:
            continue
        seen.add(str(path))
        policy, lean = block.get("policy") or {}, block.get("lean") or {}
        cands = policy.get("candidates") or {}
        states, rechecks = block.get("states") or {}, block.get("rechecks") or {}
        evicted = dict(block.get("evicted") or {})
        questions = lean.get("hits", 0) + lean.get("misses", 0)
        refuted = sum(evicted.values()) + int(block.get("conflicts") or 0)
        stale = int(block.get("stale_attempts") or 0)
        share = refuted / questions if questions else float(refuted > 0)
        out.append(
            {
                "file": str(path),
                "label": e.get("label"),
                "policy_hits": cands.get("hits", 0),
                "policy_candidates": cands.get("hits", 0) + cands.get("misses", 0),
                "policy_hit_rate": policy.get("hit_rate"),
                "expansions_answered": (policy.get("expansions") or {}).get("hits", 0),
                "lean_hits": lean.get("hits", 0),
                "lean_questions": questions,
                "lean_hit_rate": lean.get("hit_rate"),
                "rebuilds": states.get("rebuilds", 0),
                "disagreements": states.get("disagreements", 0),
                "rechecks_asked": rechecks.get("asked", 0),
                "rechecks_disagreed": rechecks.get("disagreed", 0),
                "evicted": evicted,
                "conflicts": int(block.get("conflicts") or 0),
                "redone_attempts": states.get("redone_attempts", 0),
                "stale_attempts": stale,
                "refuted": refuted,
                "refuted_share": share,
                "flagged": share > refuted_max or stale > 0,
                "policy_saved_s": policy.get("saved_s", 0.0),
                "lean_net_saved_s": lean.get("net_saved_s", 0.0),
            }
        )
    return out


def cache_markdown(rows: Sequence[Mapping[str, Any]], refuted_max: float = 0.0) -> list[str]:
    """The expansion cache's section of ``compare.md``: hit rates, what Lean refuted of the
    cache and the time saved per eval; a flag on each eval past ``refuted_max``; "the same
    results as without it" only when nothing it served was refuted and no attempt is stale."""
    if not rows:
        return []
    table = [
        [r["file"], f"{pct(r['policy_hit_rate'])} ({r['policy_hits']}/{r['policy_candidates']})",
         str(r["expansions_answered"]),
         f"{pct(r['lean_hit_rate'])} ({r['lean_hits']}/{r['lean_questions']})",
         str(r["rebuilds"]), str(r["disagreements"]),
         f"{r['rechecks_disagreed']}/{r['rechecks_asked']}",
         ", ".join(f"{k} {v}" for k, v in sorted(r["evicted"].items())) or "0",
         str(r["conflicts"]), str(r["redone_attempts"]), str(r["stale_attempts"]),
         f"{r['policy_saved_s']:.1f}", f"{r['lean_net_saved_s']:.1f}",
         "**flagged**" if r["flagged"] else ""]
        for r in rows
    ]  # fmt: skip
    saved = sum(r["policy_saved_s"] for r in rows), sum(r["lean_net_saved_s"] for r in rows)
    headers = ["eval", "policy hits", "expansions answered", "Lean hits", "rebuilds",
               "disagreements", "re-checks disagreed", "evicted", "conflicts", "redone",
               "stale", "policy s saved", "Lean s saved (net)", ""]  # fmt: skip
    refuted = sum(r["refuted"] for r in rows)
    stale = sum(r["stale_attempts"] for r in rows)
    flagged = [r["file"] for r in rows if r["flagged"]]
    if refuted == 0 and stale == 0:
        verdict = (
            "Nothing the cache served was refuted — no re-check or rebuild disagreed, no proof "
            "through it was rejected for a wrong step, no conflict — so these are the results "
            "without it, as far as Lean's re-checks can tell "
            f"({sum(r['rechecks_asked'] for r in rows)} asked, none disagreed)."
        )
    else:
        verdict = (
            f"Lean refuted {refuted} answer(s) the cache held (evicted, or conflicting); every "
            "attempt of these evals that was served one was redone live"
            + (f", but {stale} attempt(s) were written before and may be wrong" if stale else "")
            + ".  Answers no re-check reached may be wrong the same way: compare with a run "
            "without the cache (`--config cache=`) before trusting these results."
        )
    out = [
        "## Expansion cache",
        "",
        "What each eval's answers came from (burnqed.search.cache): policy candidates and Lean "
        "tactic outcomes answered from the cache, expansions that needed no model call, states "
        "rebuilt in Lean below cached answers, rebuilt states Lean printed otherwise "
        "(disagreements), re-checks of cached answers that Lean answered otherwise, answers "
        "evicted (by cause), conflicts (one key, two answers: a non-determinism), attempts redone "
        "live because an answer they went on from was refuted, attempts written before that "
        "(stale), and the generation and Lean seconds saved (the cost recorded with each answer; "
        "Lean net of the rebuilds).",
        "",
    ]
    if flagged:
        out += [
            f"> **Flagged** (evicted answers and conflicts above {100 * refuted_max:g} % of an "
            f"eval's Lean questions, `report.cache_refuted_max`, or a stale attempt): "
            f"{', '.join(flagged)}.",
            "",
        ]
    return [
        *out,
        markdown_table(headers, table),
        "",
        verdict,
        "",
        f"In all: {saved[0]:.1f} s of generation and {saved[1]:.1f} s of Lean saved.",
        "",
    ]


def compare_markdown(c: Mapping[str, Any]) -> str:
    bench = c.get("benchmark") or {}
    head = (
        f"# Solve rate by iteration — {bench.get('name')}_{bench.get('split')} "
        f"(sha256 {str(bench.get('sha256'))[:12]}), pass@{c['pass_n']}"
    )
    headers = [
        "iteration",
        "status",
        "T",
        *[f"{b} nodes" for b in c["budgets"]],
        "cumulative",
        "newly solved",
    ]
    rows = []
    for r in c["rows"]:
        label = r["label"] if r["complete"] else f"{r['label']} ({r['status']})"
        cells = [label, r["status"], _temperature(r.get("temperature")),
                 *_rate_cells(r, c["budgets"])]  # fmt: skip
        cells.append(f"{pct(r['cumulative_rate'])} ({r['cumulative_solved']})")
        cells.append("–" if r["newly_solved"] is None else str(len(r["newly_solved"])))
        rows.append(cells)
    d = c.get("delta")
    if d:
        rows.append(
            [
                f"Δ {d['to']} − {d['from']}",
                "",
                "",
                *[_points(d["rates"].get(str(b))) for b in c["budgets"]],
                _points(d["cumulative_rate"]),
                "",
            ]
        )
    out = [head, ""]
    stopped = [r for r in [*c["rows"], *(c.get("controls") or [])] if r.get("model_stopped")]
    for r in stopped:
        out += [f"> **{stopped_text(r['label'], r['model_stopped'])}.**", ""]
    if not c["all_complete"]:
        partial = ", ".join(f"{r['label']} {r['status']}" for r in c["rows"] if not r["complete"])
        out += [f"> **Not all evals are complete**: {partial}.", ""]
    out += [markdown_table(headers, rows), ""]
    out += looks_markdown(c.get("looks"))
    controls = c.get("controls") or []
    if controls:
        out += ["## Search-longer controls", ""]
        out += [
            markdown_table(
                ["control", "status", "T", *[f"{b} nodes" for b in c["budgets"]]],
                [[r["label"], r["status"], _temperature(r.get("temperature")),
                  *_rate_cells(r, c["budgets"])] for r in controls],
            ),
            "",
        ]  # fmt: skip
    out += ended_by_markdown(c)
    out += memory_markdown(c.get("memory"))
    out += learning_markdown(c.get("learning") or {})
    for section in c.get("configs") or []:
        out += configs_markdown(section)
    out += cache_markdown(c.get("cache") or [], c.get("cache_refuted_max") or 0.0)
    out += ["## Newly solved theorems", ""]
    for r in c["rows"]:
        if r["newly_solved"] is not None:
            names = ", ".join(r["newly_solved"]) or "none"
            out.append(f"- **{r['label']}** ({len(r['newly_solved'])}): {names}")
    return "\n".join(out) + "\n"


def run(
    *,
    evals: Sequence[Path],
    out_md: Path,
    out_json: Path | None = None,
    controls: Sequence[Path] = (),
    configs: Mapping[int, Mapping[str, Mapping[str, Path]]] | None = None,
    benchmarks: Path | None = None,
    ledger: Path | None = None,
    cache_refuted_max: float = 0.0,
) -> dict:
    """Write the comparison of ``evals`` as markdown (and JSON); returns the JSON dict.
    ``controls`` (search-longer evals, ``eval_longer.json``) are shown apart and checked against
    the last iteration, never mixed into the iteration rows, deltas or cumulative counts.
    ``configs``: per iteration, ``{"evals": {key: eval JSON}, "metrics": {config: ebm_metrics}}``
    of its value-model configurations (:mod:`burnqed.eval.configs`).  ``benchmarks``: the
    directory of the run's Snakemake benchmark files, whose peak memory (of the jobs finished so
    far: every eval and what they rest on) is shown (:mod:`burnqed.eval.memory`).  ``ledger``:
    the ledger of looks (``ledger/looks.jsonl``; absent: empty), read to count the designs that
    have looked at the benchmark with this seed, beside this run's own looks
    (:mod:`burnqed.eval.ledger`).  ``cache_refuted_max`` (``report.cache_refuted_max``): the
    share of an eval's Lean questions whose cached answers Lean may refute before the expansion
    cache's section flags it (:func:`cache_rows`)."""
    from burnqed.eval.configs import config_comparisons
    from burnqed.eval.stage import write_json

    if not evals:
        raise CompareError("no eval JSON given")
    loaded_evals = load_evals(evals)
    loaded_controls = load_evals(controls) if controls else []
    c = compare(loaded_evals, loaded_controls)
    c["configs"] = []
    every = [*loaded_evals, *loaded_controls]
    for i, paths in sorted((configs or {}).items()):
        by_path = dict(load_evals([Path(v) for v in paths["evals"].values()]))
        every += list(by_path.items())
        loaded = {k: by_path[Path(v)] for k, v in paths["evals"].items()}
        metrics = {k: json.loads(Path(v).read_text(encoding="utf-8"))
                   for k, v in (paths.get("metrics") or {}).items()}  # fmt: skip
        c["configs"].append(config_comparisons(int(i), loaded, metrics))
    c["memory"] = (
        peak_memory(Path(benchmarks)) if benchmarks and Path(benchmarks).is_dir() else None
    )
    c["cache"] = cache_rows(every, cache_refuted_max)
    c["cache_refuted_max"] = cache_refuted_max
    first = loaded_evals[0][1]
    c["looks"] = looks_summary(
        read_ledger(Path(ledger)) if ledger is not None else [],
        [r for _, e in every for r in looks_in(e)],
        benchmark=first.get("benchmark") or {},
        seed=((first.get("provenance") or {}).get("seeds") or {}).get("seed"),
        ledger=ledger,
    )
    Path(out_md).parent.mkdir(parents=True, exist_ok=True)
    Path(out_md).write_text(compare_markdown(c), encoding="utf-8")
    if out_json is not None:
        write_json(Path(out_json), c)
    log.info(
        "compared %d evals (%d controls) → %s: learning check %s",
        len(c["rows"]), len(c["controls"]), out_md, c["learning"]["verdict"],
    )  # fmt: skip
    return c
