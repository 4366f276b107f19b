"""Reports: one iteration (``results/iter_{i}/report/``) and across iterations (``results/report/``).

Numbers come from DuckDB SQL over the eval's trajectory parts (burnqed.eval.summary: proved rate,
proof depth and node distributions, candidates per expansion raw and unique, error classes, time
split; energy histograms below) and from the eval JSONs; Python only arranges the few aggregated
rows into markdown and plots.  Go/no-go gates (burnqed.report.gates) are flagged at the top; every
comparison a report judges (gains, the EBM ablation, the learning check) shows its paired test —
exact McNemar p and the theorems gained and lost (burnqed.eval.paired) — and the EBM ablation lists
the theorems solved with the EBM only and without it only.  How attempts ended (per budget), the
non-deterministic events (0 in a reproducible run), statement defects and the Lean pool's counters
come from the eval JSON (burnqed.outcomes).  Every report renders on an empty or all-failed run:
missing numbers read "–" or "not available", plots say "no data" on labelled axes.

Example::

    run_iteration(eval_json=Path("results/iter_1/eval.json"),
                  trajectories=Path("results/iter_1/eval"), out_dir=Path("results/iter_1/report"),
                  cfg=params["report"], baseline=Path("results/baseline/eval.json"),
                  previous=Path("results/iter_0/eval.json"),
                  no_ebm=Path("results/iter_1/eval_no_ebm.json"),
                  ebm_metrics=Path("results/iter_1/ebm_metrics.json"),
                  ebm_dir=Path("models/iter_1/ebm"))
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from burnqed.config import ReportConfig
from burnqed.eval.compare import compare, compare_markdown, load_evals
from burnqed.eval.configs import config_comparisons, configs_markdown
from burnqed.eval.paired import format_p, paired_test, summary_line
from burnqed.eval.stage import model_stopped, stopped_text, write_json
from burnqed.eval.summary import QUERIES, rows, summarise, summary_markdown
from burnqed.eval.table import eval_markdown, fmt, markdown_table, outcomes_markdown, pct
from burnqed.report import plots, tree
from burnqed.report.gates import FLAGGED, evaluate_gates, load_ebm_metrics, overall

log = logging.getLogger(__name__)

ENERGY_HIST = """
with e as (select ebm_energy as x, on_proof_path as pos from nodes
           where ebm_energy is not null and isfinite(ebm_energy)),
     r as (select min(x) as lo, max(x) as hi from e)
select coalesce(least(floor((x - lo) / nullif((hi - lo) / {bins}, 0)), {bins} - 1), 0)::int
           as bin,
       any_value(lo) as lo, any_value(hi) as hi,
       count(*) filter (where pos) as on_proof_path,
       count(*) filter (where not pos) as other
from e, r group by 1 order by 1
"""


def _load(path: Path | None) -> dict | None:
    if path is None:
        return None
    return json.loads(Path(path).read_text(encoding="utf-8"))


def energy_histogram(con: Any, bins: int) -> dict:
    """Binned ebm_energy of on-proof-path vs other nodes: ``{"left": [...], "width", ...}``."""
    hist = rows(con, ENERGY_HIST.format(bins=int(bins)))
    if not hist:
        return {"left": [], "width": None, "on_proof_path": [], "other": []}
    lo, hi = hist[0]["lo"], hist[0]["hi"]
    width = (hi - lo) / bins if hi > lo else 1.0
    return {
        "left": [lo + r["bin"] * width for r in hist],
        "width": width,
        "on_proof_path": [r["on_proof_path"] for r in hist],
        "other": [r["other"] for r in hist],
    }


def _curve(e: Mapping[str, Any] | None) -> dict:
    """The node-budget step curve, from budget 1 (0 % before the first proof) to the largest: a
    theorem counts from budget ``first_proof_expansion + 1`` on, where a run with that budget
    performs the expansion that proves it — the rule of the per-budget rates (the markers).  Not
    the anytime node axis, which charges the proof's whole step (what a run that stops at the
    proof spends; burnqed.eval.metrics)."""
    rows = [r for r in (e or {}).get("per_theorem") or [] if r.get("evaluated")]
    firsts = [r["first_proof_expansion"] + 1 for r in rows
              if r.get("first_proof_expansion") is not None]  # fmt: skip
    if not firsts:
        return {"x": [], "y": []}
    xs = sorted(set(firsts))
    ys = [sum(f <= x for f in firsts) / len(rows) for x in xs]  # ≤ benchmark-size lists
    if xs[0] > 1:
        xs, ys = [1, *xs], [0.0, *ys]
    last = max(e.get("budgets") or [xs[-1]])
    if last > xs[-1]:
        xs, ys = [*xs, last], [*ys, ys[-1]]
    return {"x": xs, "y": ys}


def _markers(e: Mapping[str, Any]) -> dict:
    bb = e.get("by_budget") or []
    return {
        "x": [b["budget"] for b in bb],
        "y": [b["rate"] for b in bb],
        "lo": [(b["ci95"] or [0, 0])[0] for b in bb],
        "hi": [(b["ci95"] or [0, 0])[1] for b in bb],
    }


def _name(e: Mapping[str, Any]) -> str:
    st = e["status"]
    return e.get("label", "eval") + ("" if st["complete"] else f" ({st['label']})")


def _paired_cell(t: Mapping[str, Any] | None) -> str:
    if not t or t.get("gained") is None:
        return "–"
    return f"+{t['gained']} −{t['lost']}, p = {format_p(t['p_value'])}"


def gates_markdown(gates: Sequence[Mapping[str, Any]]) -> str:
    verdict = overall(list(gates))
    table = markdown_table(
        ["gate", "value", "target", "red line", "verdict", "paired test (gained, lost, p)", "note"],
        [
            [g["description"], fmt(g["value"], 3),
             "paired test" if g["gate"] == "ebm_gain" else fmt(g["target"], 3),
             fmt(g["red_line"], 3), g["verdict"].upper(), _paired_cell(g.get("paired")), g["note"]]
            for g in gates
        ],
    )  # fmt: skip
    flagged = [f"{g['description']} ({g['verdict']})" for g in gates if g["verdict"] in FLAGGED]
    head = f"## Go/no-go: **{verdict.upper()}**"
    if flagged:
        head += "\n\nFlagged: " + "; ".join(flagged)
    return f"{head}\n\n{table}\n"


def _names(theorems: Sequence[str], limit: int = 50) -> str:
    shown = ", ".join(theorems[:limit]) or "none"
    return shown + (f", … ({len(theorems) - limit} more)" if len(theorems) > limit else "")


def ablation_markdown(current: Mapping[str, Any], no_ebm: Mapping[str, Any] | None) -> str:
    if no_ebm is None:
        return "EBM ablation: not available (no EBM in this iteration).\n"
    without = {b["budget"]: b for b in no_ebm["by_budget"]}
    table = markdown_table(
        ["budget", f"with EBM ({current['status']['label']})",
         f"without EBM ({no_ebm['status']['label']})", "Δ"],
        [
            [str(b["budget"]), pct(b["rate"]), pct(without.get(b["budget"], {}).get("rate")),
             "–" if b["rate"] is None or without.get(b["budget"], {}).get("rate") is None
             else f"{100 * (b['rate'] - without[b['budget']]['rate']):+.1f} pts"]
            for b in current["by_budget"]
        ],
    )  # fmt: skip
    t = paired_test(no_ebm, current, varies="value model")
    return (
        f"EBM ablation (same theorems and seeds):\n\n{table}\n\n"
        f"Paired test, with vs without the EBM: {summary_line(t)}.\n\n"
        f"- solved with the EBM only ({len(t['gained_theorems'])}): {_names(t['gained_theorems'])}\n"
        f"- solved without the EBM only ({len(t['lost_theorems'])}): {_names(t['lost_theorems'])}\n"
    )


def embedding_markdown(ebm: Mapping[str, Any] | None) -> str:
    if ebm is None:
        return "Embedding metrics: not available.\n"
    shown = {
        k: v
        for k, v in ebm["all"].items()
        if isinstance(v, int | float) and not isinstance(v, bool)
    }
    if ebm.get("ebm_rank1_key") and ebm["ebm_rank1_key"] not in shown:
        shown[ebm["ebm_rank1_key"]] = ebm["ebm_rank1"]
    table = markdown_table(["metric", "value"], [[k, fmt(v, 4)] for k, v in sorted(shown.items())])
    return f"Embedding metrics ({', '.join(ebm['sources'])}):\n\n{table}\n"


def search_trees(
    current: Mapping[str, Any], trajectories: Path, out: Path, *, limit: int
) -> dict[str, list[dict]]:
    """Search-tree pages (burnqed.report.tree) under ``out/trees/`` for the theorems this eval newly
    solved (vs the previous eval) and those it left unsolved, at most ``limit`` pages per list."""
    per = current.get("per_theorem") or []
    lists = {
        "newly solved": list((current.get("previous") or {}).get("newly_solved") or []),
        "unsolved": [r["theorem"] for r in per if r["evaluated"] and not r["proved_attempts"]],
    }
    if not trajectories.is_dir():
        return {k: [] for k in lists}
    return {k: tree.write_trees(trajectories, out / "trees", v, limit=limit)
            for k, v in lists.items()}  # fmt: skip


def trees_markdown(trees: Mapping[str, Sequence[Mapping[str, Any]]], trajectories: Path) -> str:
    """The report's links to the tree pages; the ``burnqed tree`` command for those without one."""
    out = ["## Search trees", ""]
    for kind, entries in trees.items():
        pages = [e for e in entries if e["file"]]
        links = ", ".join(
            f"[{e['theorem']}](trees/{e['file']}) ({e['status']}, ended by {e['ended_by']})"
            for e in pages
        )
        out.append(f"- {kind} ({len(entries)}): {links or 'none'}")
        rest = [e for e in entries if not e["file"]]
        if rest:
            out.append(
                f"  - {len(rest)} more without a page ({_names([e['theorem'] for e in rest], 10)});"
                f" render one with `burnqed tree {trajectories} --theorem KEY --out tree.html`"
            )
    return "\n".join(out) + "\n"


def run_iteration(
    *,
    eval_json: Path,
    trajectories: Path,
    out_dir: Path,
    cfg: Mapping[str, Any],
    baseline: Path | None = None,
    previous: Path | None = None,
    no_ebm: Path | None = None,
    ebm_metrics: Path | None = None,
    ebm_dir: Path | None = None,
    configs: Mapping[str, Mapping[str, Path]] | None = None,
) -> dict:
    """Write ``out_dir/report.md``, ``report.json`` and the PNGs of one iteration's eval.
    ``configs``: ``{"iteration": i, "evals": {key: eval JSON}, "metrics": {config: JSON}}`` of the
    iteration's value-model configurations (:mod:`burnqed.eval.configs`)."""
    from burnqed.trajectory import open_duckdb

    rcfg = ReportConfig.from_dict(cfg)
    current = _load(eval_json)
    section = None
    if configs:
        section = config_comparisons(
            int(configs["iteration"]),
            {k: _load(Path(v)) for k, v in configs["evals"].items()},
            {k: _load(Path(v)) for k, v in (configs.get("metrics") or {}).items()},
        )
    base, prev, ablation = _load(baseline), _load(previous), _load(no_ebm)
    ebm = load_ebm_metrics(ebm_metrics, ebm_dir)
    con, skipped = open_duckdb(Path(trajectories))
    try:
        stats = summarise(con)
        energy = energy_histogram(con, rcfg.energy_bins)
    finally:
        con.close()
    stats["skipped_parts"] = skipped
    stats["directory"] = str(trajectories)
    gates = evaluate_gates(
        rcfg,
        current=current,
        baseline=base,
        previous=prev,
        no_ebm=ablation,
        ebm=ebm,
        unique_candidates=stats["candidates"]["unique_avg"],
    )
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    label = _name(current)
    others = {_name(e): e for e in (prev, base) if e is not None}  # iter_0: both are the baseline
    if ablation is not None:
        others["without EBM"] = ablation
    plots.budget_curves(
        {label: _curve(current), **{k: _curve(e) for k, e in others.items()}},
        out / "budget_curve.png",
        title=f"Solve rate by node budget — {label}",
        markers={label: _markers(current)},
    )
    plots.anytime_curves(current.get("anytime") or {}, out / "anytime.png",
                         title=f"Anytime solve rate — {label}")  # fmt: skip
    series = {}
    if energy["left"]:
        series = {
            "on a proof path": (energy["left"], energy["on_proof_path"]),
            "other nodes": (energy["left"], energy["other"]),
        }
    plots.histogram(series, out / "energy_hist.png", xlabel="EBM energy (lower = more provable)",
                    ylabel="nodes", title=f"EBM energies — {label}", width=energy["width"])  # fmt: skip
    depth = stats["proof_depth"]
    plots.histogram({"proofs": ([r["depth"] for r in depth], [r["proofs"] for r in depth])},
                    out / "proof_depth.png", xlabel="proof length (tactics)", ylabel="proofs",
                    title=f"Proof depth — {label}")  # fmt: skip
    nodes = stats["nodes_hist"]
    plots.histogram({"attempts": ([r["nodes_expanded"] for r in nodes], [r["attempts"] for r in nodes])},
                    out / "nodes_hist.png", xlabel="nodes expanded per attempt", ylabel="attempts",
                    title=f"Nodes per attempt — {label}")  # fmt: skip
    trees = search_trees(current, Path(trajectories), out, limit=rcfg.tree_files)
    t = stats["time_split"]
    stopped = model_stopped(current)
    md = [
        f"# Report: {label}",
        "",
        f"Status: **{current['status']['label']}** — {current['status']['denominator']}.",
        "",
        *([f"> **{stopped_text(label, stopped)}.**", ""] if stopped else []),
        gates_markdown(gates),
        "## Solve rate",
        "",
        eval_markdown(current),
        "![budget curve](budget_curve.png)",
        "",
        "![anytime curves](anytime.png)",
        "",
        "## How attempts ended",
        "",
        outcomes_markdown(current),
        trees_markdown(trees, Path(trajectories)),
        "## EBM",
        "",
        ablation_markdown(current, ablation),
        embedding_markdown(ebm),
        "![energy histogram](energy_hist.png)",
        "",
        *(configs_markdown(section) if section else []),
        "## Trajectories",
        "",
        summary_markdown(stats),
        "Time split: of "
        f"{fmt(t['attempt_wall_s'], 1)} s of attempt wall time, {fmt(t['generation_wait_s'], 1)} s "
        f"were spent waiting for generation; Lean calls took {fmt(t['lean_s'], 1)} s (summed: "
        "calls of one expansion overlap); value scoring is not timed in the trajectories.",
        "",
        "![proof depth](proof_depth.png)",
        "",
        "![nodes per attempt](nodes_hist.png)",
        "",
    ]
    (out / "report.md").write_text("\n".join(md), encoding="utf-8")
    result = {
        "kind": "burnqed report",
        "eval": str(eval_json),
        "status": current["status"]["label"],
        # a guard stopped the model's training: it is the previous iteration's (issue 61)
        "model_stopped": stopped,
        "verdict": overall(gates),
        "gates": gates,
        "trajectory_stats": stats,
        "energy_histogram": energy,
        "ebm_metrics": ebm,
        "configs": section,
        "search_trees": trees,
    }
    write_json(out / "report.json", result)
    log.info("report %s: %s → %s", label, overall(gates), out / "report.md")
    return result


def _pool_table(pools: Sequence[Path]) -> str:
    rows = []
    for p in pools:
        meta = _load(Path(p))
        n = meta["counts"]
        rows.append([Path(p).parent.name, n["pool"], n["proved"], n["shallow"], n["probe"],
                     n["sampled_out"], n["selected"]])  # fmt: skip
    headers = ["iteration", "pool", "proved earlier", "shallow", "probe-solved", "sampled out",
               "searched"]  # fmt: skip
    return markdown_table(headers, rows) if rows else "none (a single iteration)"


def unique_candidates(trajectories: Path) -> float | None:
    """Mean unique candidates per expansion of a search output (None when it has none)."""
    from burnqed.trajectory import open_duckdb

    if not Path(trajectories).is_dir():
        return None
    con, _skipped = open_duckdb(Path(trajectories))
    try:
        return rows(con, QUERIES["candidates"])[0]["unique_avg"]
    finally:
        con.close()


def _outcome_row(label: str, e: Mapping[str, Any]) -> list[str]:
    """One iteration's line of the cross report's outcome table (at its largest budget)."""
    ended = e.get("ended_by")
    events = e.get("nondeterministic_events")
    defects = e.get("statement_defects")
    pool = ((e.get("provenance") or {}).get("search_manifest") or {}).get("lean_pool")
    return [
        label,
        "not recorded" if ended is None
        else ", ".join(f"{k} {v}" for k, v in ended.items()) or "–",
        "not recorded" if events is None else str(sum(events.values())),
        "not recorded" if defects is None else str(len(defects)),
        "not recorded" if not pool
        else ", ".join(f"{k} {pool[k]}" for k in ("restarts", "crashes", "hard_hangs") if k in pool)
        or "recorded (no restart counters)",
    ]  # fmt: skip


def run_cross(
    *,
    evals: Sequence[Path],
    out_dir: Path,
    cfg: Mapping[str, Any],
    no_ebm: Sequence[Path] = (),
    ebm_metrics: Sequence[Path] = (),
    controls: Sequence[Path] = (),
    pools: Sequence[Path] = (),
) -> dict:
    """The cross-iteration report: compare table (with the search-longer ``controls`` and the
    learning check), per-iteration gates (unique candidates read from each eval's trajectories,
    beside its JSON), budget curves per iteration, the per-iteration curve, ablations with their
    paired tests, embedding metrics, how attempts ended, and the search-pool selection (``pools``:
    the ``.meta.json`` of each later iteration's pool) by iteration."""
    rcfg = ReportConfig.from_dict(cfg)
    loaded = load_evals(evals)
    c = compare(loaded, load_evals(controls) if controls else [])
    by_dir = {Path(p).parent.name: _load(p) for p in no_ebm}
    ebm_by_dir = {Path(p).parent.name: load_ebm_metrics(Path(p), None) for p in ebm_metrics}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    base = next((e for _, e in loaded if e.get("label") == "baseline"), None)
    iteration_gates, prev = [], None
    current_by_dir = {}
    for path, e in loaded:
        key = path.parent.name
        current_by_dir[key] = e
        if e.get("label") != "baseline":
            gates = evaluate_gates(rcfg, current=e, baseline=base, previous=prev,
                                   no_ebm=by_dir.get(key), ebm=ebm_by_dir.get(key),
                                   unique_candidates=unique_candidates(path.with_suffix("")))  # fmt: skip
            iteration_gates.append({"label": e["label"], "verdict": overall(gates), "gates": gates})
        prev = e
    plots.budget_curves({_name(e): _curve(e) for _, e in loaded}, out / "budget_curves.png",
                        title="Solve rate by node budget, per iteration",
                        markers={_name(e): _markers(e) for _, e in loaded})  # fmt: skip
    per_it = [
        {"label": _name(e), "rate": e["by_budget"][-1]["rate"], "ci95": e["by_budget"][-1]["ci95"],
         "cumulative_rate": r["cumulative_rate"]}
        for r, (_, e) in zip(c["rows"], loaded, strict=True)
    ]  # fmt: skip
    plots.per_iteration(per_it, out / "iterations.png")
    gate_rows = [
        [g["label"], g["verdict"].upper(),
         "; ".join(f"{x['gate']} {x['verdict']}"
                   + (f" (+{x['paired']['gained']} −{x['paired']['lost']}, "
                      f"p = {format_p(x['paired']['p_value'])})"
                      if x.get("paired") and x["paired"]["gained"] is not None else "")
                   for x in g["gates"] if x["verdict"] != "n/a") or "–"]
        for g in iteration_gates
    ]  # fmt: skip
    ablations, ablation_rows, ablation_lists = [], [], []
    for key, e in sorted(by_dir.items()):
        with_ebm = current_by_dir.get(key)
        t = paired_test(e, with_ebm, varies="value model") if with_ebm is not None else None
        ablations.append({"iteration": key, "paired": t})
        ablation_rows.append(
            [key, pct(with_ebm["by_budget"][-1]["rate"]) if with_ebm else "–",
             pct(e["by_budget"][-1]["rate"]), e["status"]["label"],
             *(_paired_cells(t))]
        )  # fmt: skip
        if t is not None:
            ablation_lists += [
                f"- **{key}** with the EBM only ({len(t['gained_theorems'])}): "
                f"{_names(t['gained_theorems'])}; without it only ({len(t['lost_theorems'])}): "
                f"{_names(t['lost_theorems'])}",
                *(f"- **{key}** undecided — {r}" for r in t["reasons"]),
            ]
    ebm_rows = [
        [key, fmt(m["centroid_separation"], 3), fmt(m["centroid_l2"], 3),
         fmt(m["probe_balanced_accuracy"], 3), fmt(m["ebm_rank1"], 3), fmt(m["ebm_tie_rate"], 3)]
        for key, m in sorted(ebm_by_dir.items())
        if m is not None
    ]  # fmt: skip
    md = [
        compare_markdown(c),
        "## Go/no-go by iteration",
        "",
        markdown_table(["iteration", "verdict", "gates"], gate_rows) if gate_rows else "none",
        "",
        "![budget curves](budget_curves.png)",
        "",
        "![per iteration](iterations.png)",
        "",
        "## EBM ablation (largest budget; paired test on the theorems both evaluated)",
        "",
        markdown_table(["iteration", "with EBM", "without EBM", "status (without)",
                        "gained", "lost", "p (McNemar)", "verdict"], ablation_rows)
        if ablation_rows
        else "not available",
        "",
        *ablation_lists,
        *([""] if ablation_lists else []),
        "## Embedding metrics",
        "",
        markdown_table(["iteration", "centroid separation", "centroid_l2 (raw)",
                        "probe balanced accuracy", "EBM rank-1", "rank-1 tie rate"], ebm_rows)
        if ebm_rows
        else "not available (no `results/iter_{i}/ebm_metrics.json` given: the demo builds them "
        "with its `ablations` target, beside `results/ablations/compare.md`)",
        "",
        "## How attempts ended (largest budget)",
        "",
        markdown_table(["eval", "ended by", "non-deterministic events (0: reproducible)",
                        "statement defects", "Lean pool"],
                       [_outcome_row(_name(e), e) for _, e in loaded]),
        "",
        "## Search-pool selection (theorems excluded before each later iteration's search)",
        "",
        _pool_table(pools),
        "",
    ]  # fmt: skip
    (out / "report.md").write_text("\n".join(md), encoding="utf-8")
    result = {"kind": "burnqed cross report", "compare": c, "iterations": iteration_gates,
              "ablations": ablations}  # fmt: skip
    write_json(out / "report.json", result)
    log.info("cross-iteration report of %d evals → %s", len(loaded), out / "report.md")
    return result


def _paired_cells(t: Mapping[str, Any] | None) -> list[str]:
    if t is None:
        return ["–", "–", "–", "not available"]
    n = lambda x: "–" if x is None else str(x)  # noqa: E731
    return [n(t["gained"]), n(t["lost"]), format_p(t["p_value"]), t["verdict"]]
