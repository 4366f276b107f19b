"""Reports: one iteration (``results/iter_{i}/report/``) and across iterations (``results/report/``).

Numbers come from DuckDB SQL over the eval's trajectory parts (burnqed.eval.summary: proved rate,
proof depth and node distributions, candidates per expansion raw and unique, error classes, time
split; energy histograms below) and from the eval JSONs; Python only arranges the few aggregated
rows into markdown and plots.  Go/no-go gates (burnqed.report.gates) are flagged at the top.  Every
report renders on an empty or all-failed run: missing numbers read "–" or "not available", plots say
"no data" on labelled axes.

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
from burnqed.eval.stage import write_json
from burnqed.eval.summary import rows, summarise, summary_markdown
from burnqed.eval.table import eval_markdown, fmt, markdown_table, pct
from burnqed.report import plots
from burnqed.report.gates import evaluate_gates, load_ebm_metrics, overall

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
    """The node-budget step curve, from budget 1 (0 % before the first proof) to the largest."""
    pts = ((e or {}).get("anytime") or {}).get("nodes") or []
    if not pts:
        return {"x": [], "y": []}
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
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


def gates_markdown(gates: Sequence[Mapping[str, Any]]) -> str:
    verdict = overall(list(gates))
    table = markdown_table(
        ["gate", "value", "target", "red line", "verdict", "note"],
        [
            [g["description"], fmt(g["value"], 3), fmt(g["target"], 3), fmt(g["red_line"], 3),
             g["verdict"].upper(), g["note"]]
            for g in gates
        ],
    )  # fmt: skip
    flagged = [g["description"] for g in gates if g["verdict"] in ("no-go", "watch")]
    head = f"## Go/no-go: **{verdict.upper()}**"
    if flagged:
        head += "\n\nFlagged: " + "; ".join(flagged)
    return f"{head}\n\n{table}\n"


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
    return f"EBM ablation (same theorems and seeds):\n\n{table}\n"


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
) -> dict:
    """Write ``out_dir/report.md``, ``report.json`` and the PNGs of one iteration's eval."""
    from burnqed.trajectory import open_duckdb

    rcfg = ReportConfig.from_dict(cfg)
    current = _load(eval_json)
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
    t = stats["time_split"]
    md = [
        f"# Report: {label}",
        "",
        f"Status: **{current['status']['label']}** — {current['status']['denominator']}.",
        "",
        gates_markdown(gates),
        "## Solve rate",
        "",
        eval_markdown(current),
        "![budget curve](budget_curve.png)",
        "",
        "![anytime curves](anytime.png)",
        "",
        "## EBM",
        "",
        ablation_markdown(current, ablation),
        embedding_markdown(ebm),
        "![energy histogram](energy_hist.png)",
        "",
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
        "verdict": overall(gates),
        "gates": gates,
        "trajectory_stats": stats,
        "energy_histogram": energy,
        "ebm_metrics": ebm,
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
    learning check), per-iteration gates, budget curves per iteration, the per-iteration curve,
    ablations, embedding metrics and the search-pool selection (``pools``: the ``.meta.json`` of
    each later iteration's pool) by iteration."""
    rcfg = ReportConfig.from_dict(cfg)
    loaded = load_evals(evals)
    c = compare(loaded, load_evals(controls) if controls else [])
    by_dir = {Path(p).parent.name: _load(p) for p in no_ebm}
    ebm_by_dir = {Path(p).parent.name: load_ebm_metrics(Path(p), None) for p in ebm_metrics}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    base = next((e for _, e in loaded if e.get("label") == "baseline"), None)
    iteration_gates, prev = [], None
    for path, e in loaded:
        key = path.parent.name
        if e.get("label") != "baseline":
            gates = evaluate_gates(rcfg, current=e, baseline=base, previous=prev,
                                   no_ebm=by_dir.get(key), ebm=ebm_by_dir.get(key))  # fmt: skip
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
         "; ".join(f"{x['gate']} {x['verdict']}" for x in g["gates"] if x["verdict"] != "n/a") or "–"]
        for g in iteration_gates
    ]  # fmt: skip
    ablation_rows = [
        [key, pct(e["by_budget"][-1]["rate"]), f"{e['status']['label']}"]
        for key, e in sorted(by_dir.items())
    ]
    ebm_rows = [
        [key, fmt(m["centroid_l2"], 3), fmt(m["probe_accuracy"], 3), fmt(m["ebm_rank1"], 3)]
        for key, m in sorted(ebm_by_dir.items())
        if m is not None
    ]
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
        "## EBM ablation (solve rate without the EBM, largest budget)",
        "",
        markdown_table(["iteration", "without EBM", "status"], ablation_rows)
        if ablation_rows
        else "not available",
        "",
        "## Embedding metrics",
        "",
        markdown_table(["iteration", "centroid_l2", "probe accuracy", "EBM rank-1"], ebm_rows)
        if ebm_rows
        else "not available",
        "",
        "## Search-pool selection (theorems excluded before each later iteration's search)",
        "",
        _pool_table(pools),
        "",
    ]
    (out / "report.md").write_text("\n".join(md), encoding="utf-8")
    result = {"kind": "burnqed cross report", "compare": c, "iterations": iteration_gates}
    write_json(out / "report.json", result)
    log.info("cross-iteration report of %d evals → %s", len(loaded), out / "report.md")
    return result
