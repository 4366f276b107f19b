"""Tables of an eval: the terminal table (rich) and markdown, both labelled complete/partial, and
how its attempts ended (:func:`outcomes_markdown`).

Every table carries the eval's status label (``complete N/N`` or ``partial n/N``) in its title or
first line, so a partial evaluation is never read as a complete one.

Example::

    >>> print(markdown_table(["budget", "solved"], [["100", "3/10"]]))
    | budget | solved |
    |---|---|
    | 100 | 3/10 |
"""

from __future__ import annotations

import io
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from burnqed.outcomes import END_REASONS, NONDETERMINISTIC_EVENTS, POOL_COUNTERS

log = logging.getLogger(__name__)

BUDGET_HEADERS = [
    "budget",
    "solved",
    "rate",
    "95% CI",
    "avg nodes",
    "avg time (s)",
    "median time (s)",
]


def fmt(x: Any, digits: int = 1) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


def pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def ci(interval: Sequence[float] | None) -> str:
    return "–" if not interval else f"{100 * interval[0]:.1f}–{100 * interval[1]:.1f}%"


def budget_rows(result: Mapping[str, Any]) -> list[list[str]]:
    """One row per budget (the seed's table): budget, solved, rate, CI, avg nodes, avg time."""
    return [
        [
            str(b["budget"]),
            f"{b['solved']}/{b['theorems']}",
            pct(b["rate"]),
            ci(b["ci95"]),
            fmt(b["avg_nodes"]),
            fmt(b["avg_time_s"], 2),
            fmt(b["median_time_s"], 2),
        ]
        for b in result["by_budget"]
    ]


def title(result: Mapping[str, Any]) -> str:
    bench = result.get("benchmark") or {}
    name = bench.get("name") and f"{bench.get('name')}_{bench.get('split')}"
    return (
        f"{result.get('label', 'eval')} on {name or 'benchmark'} — {result['status']['label']}, "
        f"pass@{result['pass_n']}"
    )


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"

    return "\n".join([line(headers), "|" + "---|" * len(headers), *(line(r) for r in rows)])


def eval_markdown(result: Mapping[str, Any]) -> str:
    """Markdown summary of one eval: status line, budget table, pass@k, errors, newly solved."""
    st = result["status"]
    out = [f"**{title(result)}**", ""]
    if not st["complete"]:
        out += [
            f"> **partial {st['evaluated_theorems']}/{st['expected_theorems']}**: "
            f"{st['attempts_errored']} attempts errored, {st['attempts_missing']} missing; "
            "rates are over the evaluated theorems only.",
            "",
        ]
    out += [markdown_table(BUDGET_HEADERS, budget_rows(result)), ""]
    passk = result.get("pass_at_k") or []
    if passk:
        out += [
            markdown_table(
                ["k", f"pass@k ({st['label']})", "95% CI"],
                [[str(p["k"]), pct(p["pass_at_k"]), ci(p["ci95"])] for p in passk],
            ),
            "",
        ]
    if result.get("errors"):
        out += [f"Errored attempts (not in any denominator): {len(result['errors'])}", ""]
    prev = result.get("previous")
    if prev:
        out += [
            f"Newly solved vs {prev.get('label')}: {len(prev['newly_solved'])} "
            f"({', '.join(prev['newly_solved'][:20]) or 'none'}); "
            f"no longer solved: {len(prev['no_longer_solved'])}",
            "",
        ]
    return "\n".join(out)


def _count_events(events: Mapping[str, Any] | None) -> str:
    if not events:
        return "not recorded"
    return ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in events.items())


def outcomes_markdown(result: Mapping[str, Any]) -> str:
    """How attempts ended (:mod:`burnqed.outcomes`): per budget, why a run with that budget stops
    and the events the clock decided; statement defects; the Lean pool's counters ("not recorded"
    where an older eval has none)."""
    budgets = result.get("by_budget") or []
    rows = [
        [str(b["budget"]), *(str((b.get("ended_by") or {}).get(r, 0)) for r in END_REASONS),
         *(str((b.get("nondeterministic_events") or {}).get(k, "–")) for k in NONDETERMINISTIC_EVENTS)]
        for b in budgets
    ]  # fmt: skip
    headers = ["budget", *(f"ended: {r}" for r in END_REASONS),
               *(k.replace("_", " ") for k in NONDETERMINISTIC_EVENTS)]  # fmt: skip
    out = [
        "Why a run with each budget stops (attempts per reason) and the events the clock decided:",
        "",
        markdown_table(headers, rows) if rows else "no budgets",
        "",
    ]
    events = result.get("nondeterministic_events")
    if events is None:
        out.append("- Non-deterministic events: not recorded.")
    elif any(events.values()):
        out.append(
            f"- **Non-deterministic events: {_count_events(events)}** — a wall-clock backstop "
            "decided some results, so a rerun may differ (a reproducible run shows 0)."
        )
    else:
        out.append(f"- Non-deterministic events: {_count_events(events)} (reproducible).")
    defects = result.get("statement_defects")
    if defects is None:
        out.append("- Statement defects: not recorded.")
    elif defects:
        out.append(
            f"- Statement defects (Lean rejects the statement; unsolved, in the denominator): "
            f"{len(defects)}"
        )
        out += [f"  - {d['theorem']}: {d.get('reason') or '–'}" for d in defects]
    else:
        out.append("- Statement defects: none.")
    pool = ((result.get("provenance") or {}).get("search_manifest") or {}).get("lean_pool")
    out.append("")
    if pool:
        known = [k for k in POOL_COUNTERS if k in pool]
        keys = known + sorted(k for k in pool if k not in POOL_COUNTERS)
        out += [
            markdown_table(["Lean pool counter", "count", "meaning"],
                           [[k, fmt(pool[k]), POOL_COUNTERS.get(k, "")] for k in keys]),
        ]  # fmt: skip
    else:
        out.append("Lean pool counters: not recorded (the search manifest has none).")
    return "\n".join(out) + "\n"


def render_rich(result: Mapping[str, Any], *, width: int = 110) -> str:
    """The terminal table (rich), rendered to text."""
    from rich.console import Console
    from rich.table import Table

    heading = title(result)
    table = Table(title=heading, min_width=len(heading) + 2)  # the status label never wraps
    for h in BUDGET_HEADERS:
        table.add_column(h, justify="right")
    for row in budget_rows(result):
        table.add_row(*row)
    buf = io.StringIO()
    Console(file=buf, width=width, force_terminal=False, color_system=None).print(table)
    return buf.getvalue()


def log_table(result: Mapping[str, Any]) -> None:
    log.info("\n%s", render_rich(result))
