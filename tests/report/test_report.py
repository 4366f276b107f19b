"""Reports render from real (toy) evals, empty and all-failed runs included; gates are flagged at
the top; plots are real PNGs of the documented size with labelled axes."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.image
import numpy as np
import pytest

from burnqed.cli import main as cli_main
from burnqed.config import ReportConfig
from burnqed.report import plots
from burnqed.report.stage import run_cross, run_iteration
from burnqed.theorems import read_theorems
from tests.eval.conftest import write_benchmark
from tests.report.conftest import make_eval
from tests.search.fakes import FixedPolicy, RandomToyPolicy, ToyEnv, toy_theorems

PNGS = ("budget_curve.png", "anytime.png", "energy_hist.png", "proof_depth.png", "nodes_hist.png")
CFG = ReportConfig().to_dict()


def assert_real_png(path: Path) -> None:
    img = matplotlib.image.imread(path)
    assert img.shape[:2] == (plots.SIZE_PX[1], plots.SIZE_PX[0]), img.shape
    rgb = img[..., :3]
    ink = np.mean(np.any(rgb < 0.9, axis=-1))  # share of non-white pixels: axes, text, data
    assert ink > 0.01 and float(rgb.std()) > 0.02, (path, ink)


@pytest.fixture()
def bench(tmp_path) -> Path:
    return write_benchmark(tmp_path, toy_theorems(8, seed=5, low=3, high=12), name="toy")


def test_iteration_report_flags_gates_and_shows_every_section(tmp_path, bench, embedding_runs):
    base = make_eval(tmp_path, bench, "baseline", RandomToyPolicy(seed=1))
    cur = make_eval(tmp_path, bench, "iter_1", RandomToyPolicy(seed=2))
    no_ebm = tmp_path / "iter_1" / "eval_no_ebm.json"
    no_ebm.write_text(base.read_text())
    # Embedding metrics and EBM as the EBM stage wrote them, for embeddings that collapsed the way
    # the reproduced system's did (the label offset cut by 80 %).
    collapsed = embedding_runs["collapse80"]
    out = tmp_path / "iter_1" / "report"
    result = run_iteration(eval_json=cur, trajectories=tmp_path / "iter_1" / "eval", out_dir=out,
                           cfg=CFG, baseline=base, previous=base, no_ebm=no_ebm,
                           ebm_metrics=collapsed["metrics"], ebm_dir=collapsed["ebm"])  # fmt: skip
    gates = {g["gate"]: g for g in result["gates"]}
    written = json.loads(collapsed["metrics"].read_text())
    assert gates["centroid_separation"]["verdict"] == "no-go"  # the reproduced collapse
    assert gates["centroid_separation"]["value"] == written["centroid_separation"]
    assert gates["probe_balanced_accuracy"]["value"] == written["linear_probe"]["balanced_accuracy"]
    assert gates["ebm_rank1"]["value"] == written["ebm"]["heldout_rank1"]  # held-out, not train
    cur_e, base_e = json.loads(cur.read_text()), json.loads(base.read_text())
    cur_rate, base_rate = cur_e["by_budget"][-1]["rate"], base_e["by_budget"][-1]["rate"]
    assert gates["gain_vs_baseline"]["value"] == pytest.approx(cur_rate - base_rate)
    assert gates["ebm_gain"]["value"] == pytest.approx(cur_rate - base_rate)
    paired = gates["ebm_gain"]["paired"]
    cur_solved, base_solved = set(cur_e["solved_theorems"]), set(base_e["solved_theorems"])
    assert paired["gained_theorems"] == sorted(cur_solved - base_solved)
    assert paired["lost_theorems"] == sorted(base_solved - cur_solved)
    assert result["verdict"] == "no-go"
    md = (out / "report.md").read_text(encoding="utf-8")
    top = md.split("## Solve rate")[0]
    assert "## Go/no-go: **NO-GO**" in top and "embedding centroid separation" in top
    assert f"| +{paired['gained']} −{paired['lost']}, p = " in top  # the paired test, per gate
    assert "complete 8/8" in md and "EBM ablation (same theorems and seeds)" in md
    assert f"solved with the EBM only ({paired['gained']}): " in md
    assert f"solved without the EBM only ({paired['lost']}): " in md
    assert f"centroid_separation | {written['centroid_separation']:.4f}" in md
    assert "ebm.heldout_tie_rate | 0.0000" in md  # the tie rate beside rank-1
    # How attempts ended: per budget, the clock's events (0: reproducible), defects, the pool.
    assert "## How attempts ended" in md and "| budget | ended: proof | ended: budget |" in md
    for b in cur_e["by_budget"]:
        row = f"| {b['budget']} | {b['ended_by'].get('proof', 0)} | {b['ended_by'].get('budget', 0)} |"
        assert row in md
    assert (
        "Non-deterministic events: tactic wall timeouts 0, attempt timeouts 0 (reproducible)." in md
    )
    assert "Statement defects: none." in md
    pool = cur_e["provenance"]["search_manifest"]["lean_pool"]
    assert f"| verifications | {pool['verifications']} | whole-file proof checks" in md
    for name in PNGS:
        assert f"]({name})" in md
        assert_real_png(out / name)


def test_an_older_eval_without_the_new_fields_says_not_recorded(tmp_path, bench):
    cur = make_eval(tmp_path, bench, "iter_0", RandomToyPolicy(seed=2))
    e = json.loads(cur.read_text())
    e["provenance"]["search_manifest"] = None
    for key in ("nondeterministic_events", "statement_defects"):
        del e[key]
    cur.write_text(json.dumps(e))
    run_iteration(eval_json=cur, trajectories=tmp_path / "iter_0" / "eval",
                  out_dir=tmp_path / "report", cfg=CFG)  # fmt: skip
    md = (tmp_path / "report" / "report.md").read_text(encoding="utf-8")
    assert "Lean pool counters: not recorded" in md
    assert (
        "Non-deterministic events: not recorded." in md and "Statement defects: not recorded." in md
    )


@pytest.mark.parametrize("kind", ["empty", "all_failed"])
def test_reports_render_on_empty_and_all_failed_runs(tmp_path, bench, kind):
    policy = FixedPolicy({"bogus": -0.1})  # one tactic, always rejected: never proves anything
    cur = make_eval(tmp_path, bench, "iter_0", policy, searched=0 if kind == "empty" else None)
    e = json.loads(cur.read_text())
    assert e["cumulative"]["solved"] == 0
    assert e["status"]["label"] == ("partial 0/8" if kind == "empty" else "complete 8/8")
    out = tmp_path / "iter_0" / "report"
    result = run_iteration(eval_json=cur, trajectories=tmp_path / "iter_0" / "eval", out_dir=out,
                           cfg=CFG, baseline=cur, previous=cur)  # fmt: skip
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "Embedding metrics: not available." in md
    assert "EBM ablation: not available" in md
    if kind == "empty":
        assert "partial 0/8" in md and result["verdict"] == "n/a"  # no rate, no candidates
    else:
        # One distinct candidate per expansion: the diversity alarm fires, at the top.
        assert {g["gate"]: g["verdict"] for g in result["gates"]}["unique_candidates"] == "no-go"
        flagged = next(
            ln for ln in md.split("## Solve rate")[0].splitlines() if ln.startswith("Flagged:")
        )
        assert "unique candidates per expansion (diversity alarm) (no-go)" in flagged
        # nothing solved before or after: no gain, whatever the target (not a go)
        assert "solve rate − baseline's (largest budget) (no measurable effect)" in flagged
    for name in PNGS:
        assert_real_png(out / name)
    cross = tmp_path / "report"
    run_cross(evals=[cur], out_dir=cross, cfg=CFG)
    assert_real_png(cross / "budget_curves.png") or assert_real_png(cross / "iterations.png")
    assert "not available" in (cross / "report.md").read_text(encoding="utf-8")


def test_cross_report_over_three_iterations(tmp_path, bench, capsys, embedding_runs):
    paths = [
        make_eval(tmp_path, bench, "baseline", RandomToyPolicy(seed=1)),
        make_eval(tmp_path, bench, "iter_0", RandomToyPolicy(seed=2)),
        make_eval(tmp_path, bench, "iter_1", RandomToyPolicy(seed=3), searched=5),
    ]
    metrics = tmp_path / "iter_1" / "ebm_metrics.json"
    metrics.write_text(
        embedding_runs["healthy"]["metrics"].read_text()
    )  # as the EBM stage wrote it
    no_ebm = tmp_path / "iter_1" / "eval_no_ebm.json"
    no_ebm.write_text(paths[1].read_text())
    rc = cli_main(["report", "cross", *map(str, paths), "--ebm-metrics", str(metrics),
                   "--no-ebm", str(no_ebm), "--out", str(tmp_path / "report")])  # fmt: skip
    assert rc == 0
    md = (tmp_path / "report" / "report.md").read_text(encoding="utf-8")
    assert "iter_1 (partial 5/8)" in md and "## Go/no-go by iteration" in md
    m = json.loads(metrics.read_text())
    assert (
        f"| iter_1 | {m['centroid_separation']:.3f} | {m['centroid_l2']:.3f} | "
        f"{m['linear_probe']['balanced_accuracy']:.3f} | {m['ebm']['heldout_rank1']:.3f} | 0.000 |"
    ) in md
    js = json.loads((tmp_path / "report" / "report.json").read_text())
    assert [g["label"] for g in js["iterations"]] == ["iter_0", "iter_1"]
    for it in js["iterations"]:  # every iteration's trajectories feed its diversity gate
        (uc,) = [g for g in it["gates"] if g["gate"] == "unique_candidates"]
        assert uc["value"] is not None
    # The ablation against iteration 0's eval standing in as "without the EBM": partial → undecided.
    (ab,) = js["ablations"]
    assert ab["iteration"] == "iter_1" and ab["paired"]["verdict"] == "undecided"
    assert "| iter_1 | " in md.split("## EBM ablation")[1].split("## Embedding")[0]
    assert "## How attempts ended (largest budget)" in md
    assert "| baseline | " in md.split("## How attempts ended")[1]
    for name in ("budget_curves.png", "iterations.png"):
        assert_real_png(tmp_path / "report" / name)


def test_every_plot_labels_its_axes_with_and_without_data(tmp_path):
    labelled = [
        plots.budget_curves({}, tmp_path / "a.png"),
        plots.budget_curves({"x": {"x": [1, 5], "y": [0.2, 0.5]}}, tmp_path / "b.png"),
        plots.anytime_curves({}, tmp_path / "c.png", title="t"),
        plots.anytime_curves(
            {"lean_s": [[0.1, 0.2]], "tokens": [[3, 0.2]], "wall_s": [[1, 0.2]]},
            tmp_path / "d.png",
            title="t",
        ),
        plots.histogram({}, tmp_path / "e.png", xlabel="x", ylabel="y", title="t"),
        plots.per_iteration([], tmp_path / "f.png"),
        plots.per_iteration(
            [{"label": "iter_0", "rate": 0.3, "ci95": [0.2, 0.4], "cumulative_rate": 0.3}],
            tmp_path / "g.png",
        ),
    ]
    for labels in labelled:
        assert labels and all(x and y for x, y in labels), labels
    for f in "abcdefg":
        assert_real_png(tmp_path / f"{f}.png")


def test_cli_report_iteration_reports_an_errored_attempt_apart(tmp_path, bench, repo_root):
    first = next(iter(read_theorems(bench))).name
    env = ToyEnv(crash_starts={first: 1})  # its REPL dies: an infrastructure error, not a result
    cur = make_eval(tmp_path, bench, "iter_0", RandomToyPolicy(seed=2), env=env)
    out = tmp_path / "iter_0" / "report"
    rc = cli_main(["report", "iteration", "--params", str(repo_root / "params.yaml"),
                   "--eval", str(cur), "--out", str(out)])  # fmt: skip
    assert rc == 0
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "partial 7/8" in md.split("## Go/no-go")[0]
    assert "errored attempts: reason (not counted as results) | attempts" in md
    assert "| ReplError" in md  # the reason the attempt failed


def test_statement_defects_and_clock_events_are_shown(tmp_path):
    from burnqed.theorems import Theorem

    bad = Theorem(name="bad", formal_statement="theorem bad : nonsense := by\n")  # no "reach n"
    bench = write_benchmark(tmp_path, [*toy_theorems(3, seed=5, low=3, high=8), bad], name="toy")
    cur = make_eval(tmp_path, bench, "iter_0", RandomToyPolicy(seed=2))
    e = json.loads(cur.read_text())
    assert [d["theorem"] for d in e["statement_defects"]] == ["bad"]  # as the eval stage lists it
    # A run where the clock decided (the toy logic has no wall clock): say so at once.
    e["nondeterministic_events"] = {"tactic_wall_timeouts": 2, "attempt_timeouts": 1}
    cur.write_text(json.dumps(e))
    run_iteration(eval_json=cur, trajectories=tmp_path / "iter_0" / "eval",
                  out_dir=tmp_path / "report", cfg=CFG)  # fmt: skip
    md = (tmp_path / "report" / "report.md").read_text(encoding="utf-8")
    assert "- Statement defects (Lean rejects the statement; unsolved, in the denominator): 1" in md
    assert "  - bad: statement: " in md
    assert "**Non-deterministic events: tactic wall timeouts 2, attempt timeouts 1**" in md
    ended = md.split("## How attempts ended")[1]
    row = next(ln for ln in ended.splitlines() if ln.startswith("| 12 |"))
    assert row.split("|")[6].strip() == "1"  # ended: statement, at the largest budget


def test_budget_axes_are_labelled_at_the_budgets_as_numbers(tmp_path, monkeypatch):
    """matplotlib's own log labels (2×10⁰, 3×10⁰) collided on the docs' narrow seed panels: each
    budget plot labels its log axis at the budgets themselves, no minor labels."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([1, 8], [0, 1])
    plots._budget_axis(ax, [4, 1, 2, 3, 6, 8, 2])
    fig.canvas.draw()
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "3", "4", "6", "8"]
    assert not any(t.get_text() for t in ax.get_xticklabels(minor=True))
    assert ax.get_xscale() == "log"
    plt.close(fig)
    seen = []
    real = plots._budget_axis
    monkeypatch.setattr(
        plots, "_budget_axis", lambda a, b: (seen.append(sorted(set(b))), real(a, b))
    )
    m = {"x": [1, 2, 4], "y": [0.1, 0.2, 0.3], "lo": [0.0, 0.1, 0.2], "hi": [0.2, 0.3, 0.4]}
    plots.seed_budget_curves({"seed 0": {"iter_0": m}, "seed 1": {"iter_0": m}}, tmp_path / "s.png",
                             title="t")  # fmt: skip
    plots.budget_curves({"iter_0": {"x": [1, 2, 3, 4], "y": [0.1, 0.2, 0.2, 0.3]}},
                        tmp_path / "b.png", markers={"iter_0": m})  # fmt: skip
    assert seen == [[1, 2, 4]] * 3
