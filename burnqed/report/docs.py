"""The docs' generated parts: ``burnqed report docs [RESULTS]`` refreshes them all.

- ``docs/summary.json``: the run's ``results/ablations/summary.json`` (:mod:`burnqed.report.summary`;
  the ``ablations`` target's, since the docs quote the attribution set, every figure only it builds
  listed under ``run.ablations_only`` and marked where a block shows it), with the ``manual``
  figures of the committed copy carried over where the run has none;
- ``docs/budget_curves.png``: the README's figure, drawn from the summary alone
  (:func:`burnqed.report.summary.draw`), so it cannot show other numbers than the summary;
- the blocks between ``<!-- generated: NAME -->`` and ``<!-- end generated -->`` in README.md and
  docs/*.md (:data:`BLOCKS`: the solve-rate table, the value-model table and its goal;
  ``study:NAME``, a committed study report's headline, :func:`study_headline`, and
  ``study-brief:NAME``, an earlier study's, :func:`study_brief`; and
  ``ledger:SINCE..UNTIL``, the tracked ledger's looks in that window, run by run,
  :func:`burnqed.eval.ledger.window_markdown`);
- ``docs/configuration.md``: every knob of ``params.yaml`` by stage, from the schema's descriptions
  and the file's own comments (:func:`configuration_markdown`), with the demo overlay's value.

Without ``RESULTS`` only what depends on the committed files is regenerated (the PNG, the blocks,
the configuration page); ``tests/workflow/test_docs.py`` fails when any of them is not current.

Example::

    >>> text = "a\\n<!-- generated: x -->\\nold\\n<!-- end generated -->\\nb\\n"
    >>> replace_blocks(text, {"x": "new"})
    'a\\n<!-- generated: x -->\\nnew\\n<!-- end generated -->\\nb\\n'
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from burnqed.config import InputError
from burnqed.eval.compute import stopped_text
from burnqed.eval.configs import (
    goal_table,
    prediction_text,
    span_text,
    weight_text,
)
from burnqed.eval.ledger import LEDGER, parse_time, read_ledger, window_markdown
from burnqed.eval.paired import format_p
from burnqed.eval.table import markdown_table, pct
from burnqed.report.summary import draw

log = logging.getLogger(__name__)

SUMMARY, FIGURE, CONFIGURATION = "summary.json", "budget_curves.png", "configuration.md"
# Other seeds' runs of the demo, published beside seed 0's (docs/summary.json), each exploratory:
# docs/runs/seed_<seed>.json, and their solve rates side by side in SEED_FIGURE.
RUNS, SEED_FIGURE = "runs", "seed_curves.png"
LEDGER_BLOCK = "ledger:"
# How a page marks a figure only the `ablations` target builds (its section names the target so;
# tests/workflow/test_docs.py checks every such claim's section and the blocks).
ABLATIONS = "`ablations`"
BLOCK_RE = re.compile(r"(<!-- generated: (\S+) -->\n)(.*?)(<!-- end generated -->)", re.S)


def target_of(summary: Mapping[str, Any]) -> str:
    """The Snakemake target whose run the summary describes (``run.target``); a summary written
    before the demo had two targets describes the whole demo, what ``ablations`` builds now."""
    return (summary.get("run") or {}).get("target") or "ablations"


def summary_file(results: Path) -> Path:
    """The summary of a finished run's ``results/`` that the docs publish: the ``ablations``
    target's (every figure the docs quote); a ``results/summary.json`` written before the demo had
    two targets (no ``run.target``) stands for it.  One line naming what to build otherwise."""
    results = Path(results)
    full = results / "ablations" / SUMMARY
    if full.is_file():
        return full
    old = results / SUMMARY
    if old.is_file() and "target" not in (
        json.loads(old.read_text(encoding="utf-8")).get("run") or {}
    ):
        return old
    raise InputError(
        f"{full}: missing; the docs quote the attribution set: build it with `snakemake --cores 2 "
        "ablations --configfile config/demo.yaml` (the default target writes only the headline's "
        f"{old})"
    )


def solve_table(summary: Mapping[str, Any]) -> str:
    """Solve rate per eval (rows: iterations, then controls) and node budget (columns)."""
    budgets = summary["budgets"]
    names = {"baseline": "baseline (untuned base)"}
    rows = []
    for label, e in summary["evals"].items():
        cells = [pct(e["rates"][str(b)]) if e["rates"].get(str(b)) is not None else "–"
                 for b in budgets]  # fmt: skip
        rows.append([names.get(label, label), *cells])
    return markdown_table(["eval", *[f"{b} nodes" for b in budgets]], rows)


def _num(x: Any, fmt: str) -> str:
    return "–" if x is None else format(x, fmt)


def shipped_configs(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The value-model configurations the docs quote: the last iteration's, whose model and value
    model the run ships (``configs`` holds one entry per iteration after iteration 0; ``{}``
    when the run has none)."""
    return dict((summary.get("configs") or [{}])[-1])


def value_table(summary: Mapping[str, Any]) -> str:
    """The value-model configurations of the last iteration (:func:`shipped_configs`): with the
    value head, its replay prediction, its two twins (no value model; the depth twin) and the claim
    against the stronger one (paired, Holm), the head's held-out rank-1 against chance, and what the
    energy could do (its fitted weight, sibling span against the log-prob's, decisions changed)."""
    if not summary.get("configs"):
        return "No value-model configuration in this run.\n"
    rows = []
    cfg = shipped_configs(summary)
    emb = cfg.get("embeddings") or {}
    for c, r in cfg["rates"].items():
        rp, v, vs = r.get("replay") or {}, r.get("value_model") or {}, r.get("vs_stronger") or {}
        e = emb.get(c) or {}
        rows.append([
            c, pct(r["with"]), replay_text(rp), pct(r["without"]),
            pct(r.get("depth_twin")),
            "–" if vs.get("gained") is None else
            f"{r['stronger_twin']}: +{vs['gained']}/−{vs['lost']}, p {vs['p_value']:.3f}"
            + ("" if vs.get("p_holm") is None else f" (Holm {vs['p_holm']:.3f})")
            + f", {vs['verdict']}",
            "–" if e.get("rank1") is None else f"{e['rank1']:.3f} ({e.get('chance', 0):.2f})",
            weight_text(v), span_text(v), _num(v.get("decisions_changed"), ".1%"),
        ])  # fmt: skip
    table = markdown_table(
        ["config", "with EBM", "replay prediction", "log-prob twin", "depth twin",
         "vs the stronger twin", "held-out rank-1 (chance)", "energy weight", "span ratio",
         "decisions changed"], rows)  # fmt: skip
    if target_of(summary) != "ablations":
        return table
    return table.rstrip("\n") + (
        f"\n\nBuilt by the {ABLATIONS} target only: rows A, S and B, the replay predictions, the "
        "held-out rank-1 (the EBM metrics) and the Holm p, over the four configurations' claims; "
        "the default target's `results/compare.md` has C's row with its two twins, its claim and "
        "its energy's reach (Holm over C's claim alone: its p).\n"
    )


def replay_text(rp: Mapping[str, Any] | None) -> str:
    """The value table's replay cell: a recording-only replay's gained/lost on the theorems it
    covers and its coverage of attempts (it cannot gain at the twin's budget); a live replay is an
    equality check.  A summary written before replays reported coverage gives its rate."""
    if not rp:
        return "–"
    if rp.get("live"):
        return "live replay (equality check)"
    if "coverage" not in rp:  # a summary from before coverage (issue 44)
        return pct(rp["rate"])
    if rp.get("gained") is None:
        return f"undecided ({pct(rp['coverage'])} covered)"
    bound = "" if rp.get("max_gain") is None else f", gain ≤ {rp['max_gain']}"
    return f"+{rp['gained']}/−{rp['lost']} on {pct(rp['coverage'])} covered{bound}"


def value_goal(summary: Mapping[str, Any]) -> str:
    """The value model's goal and acceptance checks (:func:`burnqed.eval.configs.value_goal`)."""
    goal = shipped_configs(summary).get("goal")
    if not goal:
        return "No goal measured in this run.\n"
    rp = goal["replay_prediction"]
    # A summary from before coverage (issue 44) gives a solved count.
    said = prediction_text(rp) if isinstance(rp, Mapping) or rp is None else str(rp)
    head = (f"**{goal['verdict'].upper()}**: C solves {goal['live']} with its EBM and "
            f"{goal['no_ebm']} without; its replay predicted {said}; the oracle "
            f"ceiling is {goal['oracle_ceiling']}.\n\n")  # fmt: skip
    if target_of(summary) == "ablations":  # it checks the feature value and its live replay
        head = f"Built by the {ABLATIONS} target only. " + head
    return head + goal_table(goal)


def _claim_cell(t: Mapping[str, Any] | None, name: str | None = None) -> str:
    if not t or t.get("gained") is None:
        return "–"
    p = t.get("p_value")
    return (f"{name + ': ' if name else ''}+{t['gained']}/−{t['lost']}"
            f"{'' if p is None else f', p {format_p(p)}'}")  # fmt: skip


def seed_row(summary: Mapping[str, Any]) -> dict[str, Any]:
    """One run's headline comparisons, as the per-seed table shows them: each learning step and the
    search-longer control (gained/lost, p), C against its stronger twin, the feature value against
    C (two-sided), the learning verdict, the value goal's verdict, what the run is evidence of."""
    lc = summary.get("learning") or {}
    cfg = shipped_configs(summary)
    c = (cfg.get("rates") or {}).get("C") or {}
    f_vs_c = None
    for chk in (cfg.get("goal") or {}).get("checks") or []:
        if chk["check"].startswith("the feature value does not beat C"):
            f_vs_c = chk.get("value")
    return {
        "seed": (summary.get("run") or {}).get("seed"),
        "steps": lc.get("steps") or [],
        "controls": lc.get("controls") or [],
        "learning": lc.get("verdict"),
        "stronger_twin": c.get("stronger_twin"),
        "vs_stronger": c.get("vs_stronger"),
        "features_vs_c": f_vs_c,
        "goal": (cfg.get("goal") or {}).get("verdict"),
        "evidence": (summary.get("run") or {}).get("evidence"),
    }


def seeds_table(runs: Sequence[Mapping[str, Any]]) -> str:
    """The demo's runs side by side, one row a seed (each its own theorems, benchmark and models):
    the learning steps, the last iteration against the search-longer control, C against its
    stronger twin, the feature value against C, the verdicts — every row exploratory (one seed)."""
    if not runs:
        return "No run published.\n"
    rows = []
    for r in sorted((seed_row(s) for s in runs), key=lambda x: (x["seed"] is None, x["seed"])):
        steps = r["steps"]
        rows.append([
            "–" if r["seed"] is None else str(r["seed"]),
            _claim_cell(steps[-1] if steps else None),
            _claim_cell(r["controls"][-1] if r["controls"] else None),
            _claim_cell(r["vs_stronger"], r["stronger_twin"]),
            _claim_cell(r["features_vs_c"]),
            r["learning"] or "–", r["goal"] or "–", r["evidence"] or "–",
        ])  # fmt: skip
    return markdown_table(
        ["seed", "last iteration vs the one before", "last iteration vs the search-longer control",
         "C vs its stronger twin", f"the feature value vs C ({ABLATIONS})", "learning check",
         f"value goal ({ABLATIONS})", "evidence"], rows)  # fmt: skip


def draw_runs(runs: Sequence[Mapping[str, Any]], out: Path) -> None:
    """Per-seed budget curves: a panel per run (:func:`burnqed.report.plots.seed_budget_curves`)."""
    from burnqed.report import plots
    from burnqed.report.summary import curves

    panels = {}
    for s in sorted(runs, key=lambda x: ((x.get("run") or {}).get("seed") is None,
                                         (x.get("run") or {}).get("seed"))):  # fmt: skip
        seed = (s.get("run") or {}).get("seed")
        panels[f"seed {seed}"] = curves(s)[1]
    bench = (runs[0].get("benchmark") or {}) if runs else {}
    plots.seed_budget_curves(panels, Path(out), title=(
        f"Solve rate by node budget, one panel a seed (exploratory) — {bench.get('name')}_"
        f"{bench.get('split')}, {bench.get('theorems')} theorems"))  # fmt: skip


def read_runs(docs: Path) -> list[dict[str, Any]]:
    """Seed 0's committed summary and every published run (:data:`RUNS`)."""
    runs = [json.loads((docs / SUMMARY).read_text(encoding="utf-8"))]
    for f in sorted((docs / RUNS).glob("seed_*.json")):
        runs.append(json.loads(f.read_text(encoding="utf-8")))
    return runs


# Committed study reports (`burnqed study report`): studies/<name>/report.json is the block
# `study:<name>` (a withdrawn registration's study has none).
STUDIES = "studies"


def study_reports(root: Path) -> dict[str, dict[str, Any]]:
    """``{name: report.json}`` of every study under ``root/studies`` with a committed report and
    no ``WITHDRAWN.md``."""
    out = {}
    for f in sorted((Path(root) / STUDIES).glob("*/report.json")):
        if not (f.parent / "WITHDRAWN.md").is_file():
            out[f.parent.name] = json.loads(f.read_text(encoding="utf-8"))
    return out


def _points(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:+.2f}"


def _short(control: str) -> str:
    """``results/iter_1/eval_depth_twin.json`` → ``depth twin``."""
    stem = Path(control).stem.removeprefix("eval").strip("_")
    return stem.replace("_", " ") or Path(control).parent.name


def _study_lead(r: Mapping[str, Any], name: str) -> list[str]:
    """A study report's first lines: its label, registration and decision; per primary the pooled
    difference with its interval, p, Holm p and the seeds whose difference is positive."""
    prim = [c for c in r["comparisons"] if c["kind"] == "primary"]
    rc = r.get("registration_commit") or {}
    part = r.get("partial")
    lines = [
        f"**{r['label'].upper()}** — study `{name}` "
        f"([report](studies/{name}/report.md), registration committed in "
        f"{(rc.get('commit') or '–')[:7]} on {(rc.get('date') or '–')[:10]}): "
        + (
            f"{part['seeds']} of {part['registered']} registered seeds finished, interim"
            if part
            else f"{len(r['seeds'])} seeds"
            + (
                f" finished and {len(r['aborted'])} aborted of {len(r['registered_seeds'])} "
                "registered"
                if r.get("aborted")
                else ""
            )
        )
        + f"; α {r['alpha']:g}, Holm over the {len(prim)} primar{'y' if len(prim) == 1 else 'ies'}, "
        f"{r['test_description']}. "
        f"Decision: **{r['decision']['verdict']}**.",
        "",
    ]
    said = {True: "confirmed", False: "not confirmed", None: "undecided"}
    rows = []
    for c in prim:
        p = c["pooled"]
        t = _deciding(c)
        interval = "–" if not t else f"[{_points(t['low'])}, {_points(t['high'])}]"
        rows.append([
            c["name"], f"{_points(p['estimate'])} {interval}",
            "–" if p["p_value"] is None else format_p(p["p_value"]),
            "–" if c.get("holm_p") is None else format_p(c["holm_p"]),
            f"{p['positive']} of {p['seeds'] + len(r.get('aborted') or [])}",
            said[c.get("confirmed")],
        ])  # fmt: skip
    level = prim[0]["pooled"]["level"] if prim else 1 - r["alpha"]
    sq = next((c["sequential"] for c in prim if c["pooled"]["decides"] == "sequential"
               and (c.get("sequential") or {}).get("stopped_at")), None)  # fmt: skip
    if sq:
        over = sq.get("over_run") or []
        late = (
            f"; the {f'{len(over)} seeds' if len(over) > 1 else 'seed'} in flight then "
            f"({', '.join(map(str, over))}) finished and {'are' if len(over) > 1 else 'is'} "
            "in the tables, not in the estimate"
            if over
            else ""
        )
        lines[0] += (
            f" The study stopped at its interim look {sq['stopped_at']}, on {sq['seeds']} of "
            f"{sq['registered']} seeds ({sq['decision']}): each primary's estimate, repeated "
            f"interval and p are that look's{late}."
        )
    lines += [
        markdown_table(
            [
                "primary",
                f"pooled difference, points [{100 * level:.1f} % interval]",
                "p",
                "Holm p",
                "seeds positive",
                "result",
            ],
            rows,
        ),
    ]
    return lines


def _deciding(c: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The pooled test that decides a comparison, with ``low`` and ``high``: a sequential
    design's repeated interval, else the registered fixed-sample test's."""
    p = c["pooled"]
    if p["decides"] == "sequential":
        return c.get("sequential")
    return p.get("t_test") if p["decides"] == "t" else p.get("hartung_knapp")


def study_secondaries(r: Mapping[str, Any]) -> str:
    """A study's secondaries, one row each (they decide nothing): the pooled difference with its
    unadjusted interval, p, and the seeds whose difference is positive."""
    rows = []
    for c in (c for c in r["comparisons"] if c["kind"] == "secondary"):
        p, t = c["pooled"], _deciding(c)
        rows.append([
            c["name"],
            f"{_points(p['estimate'])} "
            + ("–" if not t else f"[{_points(t['low'])}, {_points(t['high'])}]"),
            "–" if p["p_value"] is None else format_p(p["p_value"]),
            f"{p['positive']} of {p['seeds'] + len(r.get('aborted') or [])}",
        ])  # fmt: skip
    level = next((c["pooled"]["level"] for c in r["comparisons"] if c["kind"] == "secondary"), 0)
    return markdown_table(
        ["secondary (decides nothing)", f"pooled difference, points [{100 * level:.0f} % interval]",
         "p", "seeds positive"], rows)  # fmt: skip


def study_brief(r: Mapping[str, Any], name: str) -> str:
    """``study-brief:<name>``: an earlier study's headline, once a later one holds the README's —
    :func:`study_headline`'s lead (label, registration, decision, the primaries pooled) and a link
    to its report's seeds and pictures."""
    return "\n".join([
        *_study_lead(r, name),
        "",
        f"Per seed, and the forest plot: [studies/{name}/report.md](studies/{name}/report.md).",
    ]) + "\n"  # fmt: skip


def study_headline(r: Mapping[str, Any], name: str) -> str:
    """A study report (``burnqed study report``'s JSON) as the README's headline:
    :func:`_study_lead`; then one row a seed with each primary's gained/lost and difference (the
    control taken, where the registration lists several); then the report's pictures
    (:func:`burnqed.study.stage.draw_pictures`): the forest plot, and the pool curves where the
    report holds them."""
    prim = [c for c in r["comparisons"] if c["kind"] == "primary"]
    lines = [*_study_lead(r, name), ""]
    lines += [
        "Per seed, each with its own theorems, benchmark and models: theorems gained/lost against "
        "the control, and d = their difference over the paired theorems, in points.",
        "",
    ]
    by_seed: dict[int, list[str]] = {s: [] for s in r["seeds"]}
    for c in prim:
        listed = isinstance(c["control"], list)
        for x in c["per_seed"]:
            stopped = sorted((r.get("stopped_trainings") or {}).get(str(x["seed"])) or {})
            notes = [
                f" (iteration {it.removeprefix('iter_')}'s training stopped)" for it in stopped
            ]
            by_seed[x["seed"]].append(
                f"{_short(x['control']) + ': ' if listed else ''}+{x['gained']}/−{x['lost']}, "
                f"d {_points(x['difference'])}" + "".join(notes)
            )
    for x in r.get("aborted") or []:
        where = str(x.get("reason") or "").split(":")[0]  # e.g. "joint step 50"
        error = str(x.get("error") or "").rsplit(".", 1)[-1]
        by_seed[x["seed"]] = [f"aborted ({error}, {where})"] + ["aborted"] * (len(prim) - 1)
    lines.append(
        markdown_table(
            ["seed", *[c["name"] for c in prim]],
            [[str(s), *cells] for s, cells in sorted(by_seed.items())],
        )
    )
    if r.get("aborted"):
        lines += ["", _aborted_note(r, prim)]
    if r.get("stopped_trainings") is not None:
        lines += ["", stopped_text(r["stopped_trainings"])]
    if any(c["kind"] == "secondary" for c in r["comparisons"]):
        lines += ["", study_secondaries(r)]
    cost = r.get("cost") or {}
    if cost.get("median_wall_s") is not None:
        lines += [
            "",
            f"A seed cost {cost['median_wall_s'] / 60:.1f} min of wall time (median of "
            f"{cost['seeds_timed']} timed"
            + (
                f"; {cost['parallel']} seeds at a time, each charged its share"
                if cost.get("parallel", 1) > 1
                else ""
            )
            + ").",
        ]
    lines += ["", f"![The study's per-seed differences and pooled intervals, one panel a comparison]"
                  f"(studies/{name}/forest.png)"]  # fmt: skip
    if r.get("pool_curves"):
        lines += ["", "![Both arms' cumulative pool pass rate, against the iterations searched and "
                      "the node expansions: each seed thin, the pooled curve bold]"
                      f"(studies/{name}/curves.png)"]  # fmt: skip
    return "\n".join(lines) + "\n"


def _aborted_note(r: Mapping[str, Any], prim: Sequence[Mapping[str, Any]]) -> str:
    """The headline's sentence on aborted seeds: how they count, and the sensitivity analysis."""
    n = len(r["aborted"])
    sens = [
        f"{c['name']} {_points(c['sensitivity']['estimate'])}, Holm p "
        f"{format_p(c['sensitivity']['holm_p'])}"
        for c in prim
        if c.get("sensitivity") and "holm_p" in c["sensitivity"]
    ]
    post = [
        f"{c['name']} {_points(c['post_hoc_fallback']['pooled']['estimate'])}, Holm p "
        f"{format_p(c['post_hoc_fallback']['pooled']['holm_p'])}"
        for c in prim
        if "holm_p" in ((c.get("post_hoc_fallback") or {}).get("pooled") or {})
    ]
    if all(c.get("analysis") == "fallback" for c in prim):
        only = [
            f"{c['name']} {_points(c['finished_only']['estimate'])}"
            for c in prim
            if c.get("finished_only")
        ]
        return (
            f"{n} seed{'s' if n > 1 else ''} stopped by the design (a training guard): each "
            "counts at its registered fallback in the figures above, as its user would have "
            "shipped it" + (f"; on the finished seeds only: {'; '.join(only)}" if only else "")
            + (f"; with the stopped seeds at d = 0: {'; '.join(sens)}" if sens else "") + "."
        )  # fmt: skip
    return (
        f"{n} seed{'s' if n > 1 else ''} aborted by the design (a training guard stopped "
        "iteration 1): not positive for either primary; the pooled figures above are on the "
        "seeds that finished"
        + (f"; with the aborted seeds at d = 0: {'; '.join(sens)}" if sens else "")
        + (
            f"; **post hoc**, each aborted seed shipping its iteration 0: {'; '.join(post)}"
            if post
            else ""
        )
        + "."
    )


# Generated blocks of all the published runs.
RUN_BLOCKS: dict[str, Callable[[Sequence[Mapping[str, Any]]], str]] = {
    "seeds-table": seeds_table,
}

# Generated blocks by name: the text each is, from the summary.
BLOCKS: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "solve-table": solve_table,
    "value-table": value_table,
    "value-goal": value_goal,
}


def replace_blocks(text: str, blocks: Mapping[str, str]) -> str:
    """``text`` with each generated block's body replaced (unknown names are an error)."""

    def sub(m: re.Match) -> str:
        if m.group(2) not in blocks:
            raise KeyError(f"unknown generated block {m.group(2)!r} (known: {sorted(blocks)})")
        return m.group(1) + blocks[m.group(2)].rstrip("\n") + "\n" + m.group(4)

    return BLOCK_RE.sub(sub, text)


# --------------------------------------------------------------------------------------------
# configuration.md


def key_comments(text: str) -> dict[tuple[str, ...], str]:
    """Each mapping key of a YAML file (its dotted path) → its comment: the full-line comments
    right above it and the one after it on its line.  List items are not keys (they are part of
    their key's value)."""
    out: dict[tuple[str, ...], str] = {}
    stack: list[tuple[int, str]] = []  # (indent, key) of the enclosing keys
    above: list[str] = []
    in_list: int | None = None  # indent of a list being skipped
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            above = []
            continue
        indent = len(line) - len(line.lstrip())
        if stripped.startswith("#"):
            above.append(stripped.lstrip("#").strip())
            continue
        if in_list is not None and indent > in_list:
            above = []
            continue
        in_list = None
        if stripped.startswith("- "):
            in_list = indent - 1  # the items and what they hold
            above = []
            continue
        m = re.match(r"([A-Za-z_][\w-]*):(.*)$", stripped)
        if not m:
            above = []
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, m.group(1)))
        rest = m.group(2)
        inline = rest.split(" #", 1)[1].strip() if " #" in rest else ""
        out[tuple(k for _, k in stack)] = " ".join([*above, inline]).strip()
        above = []
    return out


def _resolve(node: Mapping[str, Any], schema: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = node.get("$ref")
    if ref and ref.startswith("#/$defs/"):
        return {
            **schema["$defs"][ref.split("/")[-1]],
            **{k: v for k, v in node.items() if k != "$ref"},
        }
    return node


def _kind(node: Mapping[str, Any], schema: Mapping[str, Any]) -> str:
    """A short type of a schema node: ``integer ≥ 1``, ``one of a, b``, ``number > 0 or null``."""
    node = _resolve(node, schema)
    if "oneOf" in node or "anyOf" in node:
        return " or ".join(_kind(n, schema) for n in node.get("oneOf") or node["anyOf"])
    if "enum" in node:
        return "one of " + ", ".join(f"`{v}`" for v in node["enum"])
    t = node.get("type", "any")
    t = " or ".join(t) if isinstance(t, list) else t
    bounds = [f"{op} {node[k]}" for k, op in (("minimum", "≥"), ("exclusiveMinimum", ">"),
                                               ("maximum", "≤"), ("exclusiveMaximum", "<"))
              if k in node]  # fmt: skip
    return " ".join([t, ", ".join(bounds)]).strip()


def _value(v: Any) -> str:
    return "`" + json.dumps(v, ensure_ascii=False) + "`"


def _walk(node, schema, path, values, overlay, comments, lines, depth):
    node = _resolve(node, schema)
    for key, sub in (node.get("properties") or {}).items():
        p = (*path, key)
        sub = _resolve(sub, schema)
        name = ".".join(p)
        has_children = "properties" in sub and isinstance(values.get(key), dict)
        if depth == 0:
            lines += [f"## `{name}`", ""]
            if has_children:  # a scalar's description and comment go on its own line below
                lines += [(sub.get("description") or "").strip().rstrip(".") + ".", ""]
                lines += [comments[p], ""] if comments.get(p) else []
        if has_children:
            _walk(sub, schema, p, values.get(key) or {}, (overlay or {}).get(key), comments,
                  lines, depth + 1)  # fmt: skip
            if depth == 0:
                lines.append("")
            continue
        default = _value(values[key]) if key in values else "(unset)"
        demo = ""
        if isinstance(overlay, dict) and key in overlay and overlay[key] != values.get(key):
            demo = f"; demo {_value(overlay[key])}"
        desc = (sub.get("description") or "").strip()
        comment = comments.get(p, "")
        lines.append(f"- **`{name}`** = {default}{demo} — {_kind(sub, schema)}. {desc}"
                     + (f" *params.yaml:* {comment}" if comment else ""))  # fmt: skip
        if depth == 0:
            lines.append("")


def configuration_markdown(root: Path) -> str:
    """``docs/configuration.md`` of the checkout at ``root``: every key of the schema by section,
    its default (params.yaml), the demo's value where config/demo.yaml changes it, its type and
    range, the schema's description and params.yaml's comment."""
    root = Path(root)
    schema = yaml.safe_load((root / "burnqed" / "params.schema.yaml").read_text(encoding="utf-8"))
    text = (root / "params.yaml").read_text(encoding="utf-8")
    values = yaml.safe_load(text)
    overlay = yaml.safe_load((root / "config" / "demo.yaml").read_text(encoding="utf-8")) or {}
    lines = [
        "# Configuration: every knob of `params.yaml`, by stage",
        "",
        "<!-- Generated by `burnqed report docs` from burnqed/params.schema.yaml, params.yaml's comments",
        "     and config/demo.yaml: edit those, not this file (tests/workflow/test_docs.py checks it). -->",
        "",
        "`params.yaml` holds every knob of the science; it is validated against "
        "`burnqed/params.schema.yaml` when the workflow starts and when the CLI loads it (an unknown "
        "key, wrong type or out-of-range value fails naming the key). Overlays in `config/` change "
        "only what differs (`config/demo.yaml` for the CPU demo, `config/a100-7b.yaml` for one 80 GB "
        "GPU). Machine settings (cores, GPUs, memory) live in the rules and `workflow/profiles/`. "
        "Each rule receives only its own section (docs/architecture.md, The stages). Each entry: the key, its "
        "default, the demo's value where the demo overlay changes it, its type and range, the "
        "schema's description and params.yaml's comment.",
        "",
    ]
    _walk(schema, schema, (), values, overlay, key_comments(text), lines, 0)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).rstrip("\n") + "\n"


# --------------------------------------------------------------------------------------------


def study_found(r: Mapping[str, Any], registration: Mapping[str, Any] | None, name: str) -> str:
    """``study-found:<name>``: what a study found against what development planned, per primary —
    the pooled estimate and Holm p beside the development mean, the seeds positive with the sign
    test, the spread the seeds realised against the planned one and the power that left, and the
    share of the between-seed variance beyond the benchmark's sampling (McNemar): every figure
    from the committed report and registration, none typed."""
    plans = {
        x.get("name"): x
        for x in (((registration or {}).get("analysis") or {}).get("power") or {}).get(
            "comparisons"
        )
        or []
    }
    finished, aborted = len(r["seeds"]), len(r.get("aborted") or [])
    stop = r.get("stopped_early")
    stopped = (
        f" (stopped at its interim look {stop['look']}, on {stop['count']}: the estimates' seeds)"
        if stop
        else ""
    )
    lines = [
        f"**What the study found** (`studies/{name}/report.md`, {r['label']}, {finished} seeds "
        f"finished{stopped} and {aborted} aborted of {len(r['registered_seeds'])}; generated "
        "from its report and registration):",
        "",
    ]
    for c in (c for c in r["comparisons"] if c["kind"] == "primary"):
        p, plan, rp = c["pooled"], plans.get(c["name"]) or {}, c.get("realised") or {}
        beyond = rp.get("beyond_mcnemar_share")
        sa = p["sign_agreement"]
        dev = plan.get("mean")
        lines.append(
            f"- {c['name']}: {_points(p['estimate'])} points pooled (Holm p "
            f"{format_p(c['holm_p'])}"
            + (f"; development mean {_points(dev)}" if dev is not None else "")
            + f"), {sa.get('positive', p.get('positive'))} of {finished} seeds positive"
            + (f" (sign test p {format_p(sa['sign_test_p'])})" if "sign_test_p" in sa else "")
            + (
                f"; the seeds' SD {abs(100 * rp['realised_sd']):.2f} points against "
                f"{abs(100 * rp['planned_sd']):.2f} planned"
                + (
                    (
                        f", so the power at the planned effect stayed {rp['power_realised']:.2f}"
                        if f"{rp['power_realised']:.2f}" == f"{rp['power_planned']:.2f}"
                        else f", so the power at the planned effect was "
                        f"{rp['power_realised']:.2f}, not {rp['power_planned']:.2f}"
                    )
                    if rp["planned_mean"] > 0
                    else " (a planned mean at or below 0 gave it no power)"
                )
                if rp.get("planned_sd")
                else ""
            )
            + (
                f"; {100 * beyond:.0f} % of the between-seed variance is beyond what the "
                "benchmark's sampling (McNemar) gives"
                if beyond is not None
                else ""
            )
            + ("." if not c.get("post_hoc_fallback") else "")
            + (
                f"; post hoc, each aborted seed at its fallback: "
                f"{_points(c['post_hoc_fallback']['pooled']['estimate'])} points (Holm p "
                f"{format_p(c['post_hoc_fallback']['pooled']['holm_p'])})."
                if c.get("post_hoc_fallback")
                else ""
            )
        )
    return "\n".join(lines)


def study_power_table(registration: Mapping[str, Any]) -> str:
    """``study-power:<name>``: the registration's power analysis (``burnqed study power`` on the
    development runs) as a table, from the committed registration."""
    power = (registration.get("analysis") or {}).get("power") or {}
    rows = []
    for x in power.get("comparisons") or []:
        at = next((k for k in x if k.startswith("power_at_")), None)
        every = next((k for k in x if k.startswith("every_seed_positive_at_")), None)
        rows.append(
            [
                x["name"],
                ", ".join(f"{100 * v:+.2f}" for v in x.get("per_seed_difference") or []),
                _points(x.get("mean")),
                f"{100 * x['sd']:.2f}" if x.get("sd") is not None else "–",
                f"{100 * x['within_sd']:.2f}" if x.get("within_sd") is not None else "–",
                str(x.get("seeds_needed") or "none (mean ≤ 0)"),
                f"{x[at]:.2f}" if at else "–",
                f"{x[every]:.1e}" if every else "–",
            ]
        )
    seeds = registration["analysis"]["seeds"]
    return markdown_table(
        ["primary", "per-seed d, points", "mean", "SD between seeds", "SD from the benchmark",
         "seeds for 80 % power at α/2", f"power at {seeds}", f"every seed positive at {seeds}"],
        rows,
    )  # fmt: skip


def study_registrations(root: Path) -> dict[str, dict[str, Any]]:
    """``{name: registration}`` of the studies :func:`study_reports` lists."""
    return {
        n: yaml.safe_load((Path(root) / STUDIES / n / "registration.yaml").read_text("utf-8"))
        for n in study_reports(root)
    }


def current_blocks(
    root: Path, summary: Mapping[str, Any], published: Sequence[Mapping[str, Any]]
) -> dict[str, str]:
    """Every generated block's text: the summary's, the published runs', the studies'."""
    blocks = {name: make(summary) for name, make in BLOCKS.items()}
    blocks.update({name: make(published) for name, make in RUN_BLOCKS.items()})
    reports = study_reports(root)
    blocks.update({f"study:{n}": study_headline(r, n) for n, r in reports.items()})
    blocks.update({f"study-brief:{n}": study_brief(r, n) for n, r in reports.items()})
    regs = study_registrations(root)
    blocks.update({f"study-found:{n}": study_found(r, regs.get(n), n)
                   for n, r in reports.items()})  # fmt: skip
    blocks.update({f"study-power:{n}": study_power_table(reg) for n, reg in regs.items()})
    blocks.update(ledger_blocks(root))
    return blocks


def ledger_blocks(root: Path) -> dict[str, str]:
    """``ledger:SINCE..UNTIL`` for each such block the pages hold: the tracked ledger's looks in
    that window (ISO 8601 times; either side empty: open)."""
    names = {
        m.group(2)
        for page in doc_files(root)
        for m in BLOCK_RE.finditer(page.read_text(encoding="utf-8"))
        if m.group(2).startswith(LEDGER_BLOCK)
    }
    records = read_ledger(Path(root) / LEDGER) if names else []
    out = {}
    for name in names:
        since, sep, until = name.removeprefix(LEDGER_BLOCK).partition("..")
        if not sep:
            raise InputError(f"generated block {name!r}: not {LEDGER_BLOCK}SINCE..UNTIL")
        out[name] = window_markdown(
            records,
            parse_time(since, f"block {name}") if since else None,
            parse_time(until, f"block {name}") if until else None,
        )
    return out


def doc_files(root: Path) -> list[Path]:
    """README.md and every docs/*.md: the pages the checks cover."""
    return [Path(root) / "README.md", *sorted((Path(root) / "docs").glob("*.md"))]


def refresh(root: Path, results: Path | None = None, runs: Sequence[Path] = ()) -> list[Path]:
    """Regenerate the docs' generated parts in the checkout ``root`` (module docstring); with
    ``results``, first take ``results/summary.json`` as the new committed summary; each of ``runs``
    (another seed's results/) is published as ``docs/runs/seed_<seed>.json``.  Returns the files
    written."""
    root = Path(root)
    docs = root / "docs"
    committed = docs / SUMMARY
    written = []
    if results is not None:
        new = json.loads(summary_file(results).read_text(encoding="utf-8"))
        old = json.loads(committed.read_text(encoding="utf-8")) if committed.is_file() else {}
        # Figures measured by hand stay until the run writes them itself.
        new["manual"] = {**(old.get("manual") or {}), **(new.get("manual") or {})}
        committed.write_text(json.dumps(new, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        written.append(committed)
    for r in runs:
        path = summary_file(r)
        new = json.loads(path.read_text(encoding="utf-8"))
        seed = (new.get("run") or {}).get("seed")
        if seed is None:
            raise ValueError(f"{path}: no run.seed recorded: rerun its `summary` rule")
        out = docs / RUNS / f"seed_{seed}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(new, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        written.append(out)
    summary = json.loads(committed.read_text(encoding="utf-8"))
    draw(summary, docs / FIGURE)
    written.append(docs / FIGURE)
    published = read_runs(docs)
    draw_runs(published, docs / SEED_FIGURE)
    written.append(docs / SEED_FIGURE)
    (docs / CONFIGURATION).write_text(configuration_markdown(root), encoding="utf-8")
    written.append(docs / CONFIGURATION)
    blocks = current_blocks(root, summary, published)
    for page in doc_files(root):
        text = page.read_text(encoding="utf-8")
        new_text = replace_blocks(text, blocks)
        if new_text != text:
            page.write_text(new_text, encoding="utf-8")
            written.append(page)
    log.info("refreshed %s", ", ".join(str(p.relative_to(root)) for p in written))
    return written
