"""Compare evals across iterations: iterations as rows (baseline first), budgets as columns,
cumulative solved, a delta row, and the theorems each iteration newly solves.

Only evals of the same benchmark file (same sha256) and attempts (pass_n) are compared; anything else
is refused naming both files.  A partial eval stays labelled ``partial n/N`` in its row.

Example::

    burnqed compare results/baseline/eval.json results/iter_*/eval.json --out results/compare.md
"""

from __future__ import annotations

import itertools
import json
import logging
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from burnqed.eval.table import markdown_table, pct

log = logging.getLogger(__name__)


class CompareError(ValueError):
    """Evals that cannot be compared (different benchmark or attempts); names the files."""


def _order(label: str) -> tuple[int, str]:
    if label == "baseline":
        return (-1, label)
    m = re.fullmatch(r"iter_(\d+)", label)
    return (int(m.group(1)), label) if m else (1 << 30, label)


def load_evals(paths: Sequence[Path]) -> list[tuple[Path, dict]]:
    evals = []
    for p in paths:
        try:
            e = json.loads(Path(p).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as err:
            raise CompareError(f"{p}: not a readable eval JSON ({err})") from None
        if e.get("kind") != "burnqed eval":
            raise CompareError(f"{p}: not a burnqed eval JSON (kind={e.get('kind')!r})")
        evals.append((Path(p), e))
    evals.sort(key=lambda pe: _order(pe[1].get("label") or pe[0].parent.name))
    first_path, first = evals[0] if evals else (None, None)
    for p, e in evals[1:]:
        for key, get in (
            ("benchmark sha256", lambda x: (x.get("benchmark") or {}).get("sha256")),
            ("pass_n", lambda x: x.get("pass_n")),
        ):
            if get(e) != get(first):
                raise CompareError(
                    f"{p} and {first_path} differ in {key} ({get(e)} vs {get(first)}): "
                    "not comparable"
                )
    return evals


def compare(evals: Sequence[tuple[Path, Mapping[str, Any]]]) -> dict:
    """The comparison as a JSON-able dict (rows in iteration order)."""
    budgets = sorted({b for _, e in evals for b in e["budgets"]})
    rows, union, prev_solved = [], set(), None
    for path, e in evals:
        solved = set(e.get("solved_theorems", []))
        union |= solved
        by_budget = {b["budget"]: b for b in e["by_budget"]}
        rows.append(
            {
                "label": e.get("label") or path.parent.name,
                "file": str(path),
                "status": e["status"]["label"],
                "complete": e["status"]["complete"],
                "theorems": e["status"]["evaluated_theorems"],
                "rates": {
                    str(b): by_budget[b]["rate"] if b in by_budget else None for b in budgets
                },
                "solved": {
                    str(b): by_budget[b]["solved"] if b in by_budget else None for b in budgets
                },
                "cumulative_solved": len(union),
                "cumulative_rate": len(union) / e["status"]["expected_theorems"]
                if e["status"]["expected_theorems"]
                else None,
                "newly_solved": sorted(solved - prev_solved) if prev_solved is not None else None,
                "no_longer_solved": sorted(prev_solved - solved)
                if prev_solved is not None
                else None,
                "errored_attempts": e["status"]["attempts_errored"],
            }
        )
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
        "learning": learning_check(rows),
        "pass_n": evals[0][1]["pass_n"] if evals else None,
        "benchmark": (evals[0][1].get("benchmark") or {}) if evals else {},
        "rows": rows,
        "delta": delta,
        "all_complete": all(r["complete"] for r in rows),
    }


def _top(row: Mapping[str, Any]) -> float | None:
    """A row's solve rate at the largest budget it was evaluated at."""
    rated = [(int(b), r) for b, r in row["rates"].items() if r is not None]
    return max(rated)[1] if rated else None


def learning_check(rows: Sequence[Mapping[str, Any]], controls: Sequence[Mapping] = ()) -> dict:
    """Does the loop learn?  Each iteration's solve rate at its largest budget above the row before
    it (baseline first), and the last iteration above every search-longer control (an earlier
    model given more search instead of more training).  Partial rows fail the check."""
    steps = [
        {"from": a["label"], "to": b["label"], "from_rate": _top(a), "to_rate": _top(b)}
        for a, b in itertools.pairwise(rows)
    ]
    for s in steps:
        s["rises"] = None not in (s["from_rate"], s["to_rate"]) and s["to_rate"] > s["from_rate"]
    last = rows[-1] if rows else None
    versus = [
        {
            "control": c["label"],
            "control_rate": _top(c),
            "last": last["label"],
            "last_rate": _top(last),
        }
        for c in controls
        if last is not None
    ]
    for v in versus:
        v["beats"] = None not in (v["control_rate"], v["last_rate"]) and (
            v["last_rate"] > v["control_rate"]
        )
    complete = all(r["complete"] for r in [*rows, *controls])
    return {
        "steps": steps,
        "controls": versus,
        "rises_every_iteration": bool(steps) and all(s["rises"] for s in steps),
        "beats_controls": all(v["beats"] for v in versus),
        "complete": complete,
    }


def _points(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:+.1f} pts"


def compare_markdown(c: Mapping[str, Any]) -> str:
    bench = c.get("benchmark") or {}
    head = (
        f"# Solve rate by iteration — {bench.get('name')}_{bench.get('split')} "
        f"(sha256 {str(bench.get('sha256'))[:12]}), pass@{c['pass_n']}"
    )
    headers = [
        "iteration",
        "status",
        *[f"{b} nodes" for b in c["budgets"]],
        "cumulative",
        "newly solved",
    ]
    rows = []
    for r in c["rows"]:
        label = r["label"] if r["complete"] else f"{r['label']} ({r['status']})"
        cells = [label, r["status"]]
        for b in c["budgets"]:
            rate, solved = r["rates"][str(b)], r["solved"][str(b)]
            cells.append("–" if rate is None else f"{pct(rate)} ({solved}/{r['theorems']})")
        cells.append(f"{pct(r['cumulative_rate'])} ({r['cumulative_solved']})")
        cells.append("–" if r["newly_solved"] is None else str(len(r["newly_solved"])))
        rows.append(cells)
    d = c.get("delta")
    if d:
        rows.append(
            [
                f"Δ {d['to']} − {d['from']}",
                "",
                *[_points(d["rates"].get(str(b))) for b in c["budgets"]],
                _points(d["cumulative_rate"]),
                "",
            ]
        )
    out = [head, ""]
    if not c["all_complete"]:
        partial = ", ".join(f"{r['label']} {r['status']}" for r in c["rows"] if not r["complete"])
        out += [f"> **Not all evals are complete**: {partial}.", ""]
    out += [markdown_table(headers, rows), ""]
    controls = c.get("controls") or []
    if controls:
        out += ["## Search-longer controls", ""]
        out += [
            markdown_table(
                ["control", "status", *[f"{b} nodes" for b in c["budgets"]]],
                [
                    [r["label"], r["status"]]
                    + [
                        "–" if r["rates"].get(str(b)) is None
                        else f"{pct(r['rates'][str(b)])} ({r['solved'][str(b)]}/{r['theorems']})"
                        for b in c["budgets"]
                    ]
                    for r in controls
                ],
            ),
            "",
        ]  # fmt: skip
    lc = c.get("learning") or {}
    if lc.get("steps"):
        out += ["## Does the loop learn? (solve rate at each row's largest budget)", ""]
        for st in lc["steps"]:
            mark = "✓" if st["rises"] else "✗"
            out.append(
                f"- {mark} {st['from']} {pct(st['from_rate'])} → {st['to']} {pct(st['to_rate'])}"
            )
        for v in lc.get("controls", []):
            mark = "✓" if v["beats"] else "✗"
            out.append(
                f"- {mark} {v['last']} {pct(v['last_rate'])} vs control {v['control']} "
                f"{pct(v['control_rate'])}"
            )
        if not lc.get("complete"):
            out.append("- (not every eval is complete: the check is not final)")
        out.append("")
    out += ["## Newly solved theorems", ""]
    for r in c["rows"]:
        if r["newly_solved"] is not None:
            names = ", ".join(r["newly_solved"]) or "none"
            out.append(f"- **{r['label']}** ({len(r['newly_solved'])}): {names}")
    return "\n".join(out) + "\n"


def _control_row(path: Path, e: Mapping[str, Any], budgets: Sequence[int]) -> dict:
    by_budget = {b["budget"]: b for b in e["by_budget"]}
    return {
        "label": e.get("label") or path.stem,
        "file": str(path),
        "status": e["status"]["label"],
        "complete": e["status"]["complete"],
        "theorems": e["status"]["evaluated_theorems"],
        "rates": {str(b): by_budget[b]["rate"] if b in by_budget else None for b in budgets},
        "solved": {str(b): by_budget[b]["solved"] if b in by_budget else None for b in budgets},
    }


def add_controls(c: dict, controls: Sequence[tuple[Path, Mapping[str, Any]]]) -> dict:
    """``c`` with the search-longer ``controls`` as rows of their own (budgets widened to theirs)
    and the learning check against them; never mixed into deltas or cumulative counts."""
    if not controls:
        return c
    for p, e in controls:
        if e.get("pass_n") != c.get("pass_n") or (e.get("benchmark") or {}).get("sha256") != (
            c.get("benchmark") or {}
        ).get("sha256"):
            raise CompareError(
                f"{p}: another benchmark or pass_n than the iterations: not comparable"
            )
    budgets = sorted({*c["budgets"], *(b for _, e in controls for b in e["budgets"])})
    c["budgets"] = budgets
    for r in c["rows"]:
        for key in ("rates", "solved"):
            r[key] = {str(b): r[key].get(str(b)) for b in budgets}
    c["controls"] = [_control_row(p, e, budgets) for p, e in controls]
    c["learning"] = learning_check(c["rows"], c["controls"])
    return c


def run(
    *,
    evals: Sequence[Path],
    out_md: Path,
    out_json: Path | None = None,
    controls: Sequence[Path] = (),
) -> dict:
    """Write the comparison of ``evals`` as markdown (and JSON); returns the JSON dict.
    ``controls`` (search-longer evals, ``eval_longer.json``) are shown apart and checked against
    the last iteration, never mixed into the iteration rows, deltas or cumulative counts."""
    from burnqed.eval.stage import write_json

    if not evals:
        raise CompareError("no eval JSON given")
    c = add_controls(compare(load_evals(evals)), load_evals(controls) if controls else [])
    Path(out_md).parent.mkdir(parents=True, exist_ok=True)
    Path(out_md).write_text(compare_markdown(c), encoding="utf-8")
    if out_json is not None:
        write_json(Path(out_json), c)
    log.info("compared %d evals → %s", len(c["rows"]), out_md)
    return c
