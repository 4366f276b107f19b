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
from burnqed.eval.stage import run as eval_run
from burnqed.report import plots
from burnqed.report.stage import run_cross, run_iteration
from burnqed.theorems import read_theorems
from burnqed.trajectory import TrajectoryWriter
from tests.eval.conftest import LEAN, POLICY, SEARCH, toy_search, write_benchmark
from tests.search.fakes import FixedPolicy, RandomToyPolicy, ToyEnv, toy_theorems

PNGS = ("budget_curve.png", "anytime.png", "energy_hist.png", "proof_depth.png", "nodes_hist.png")
CFG = ReportConfig().to_dict()


def assert_real_png(path: Path) -> None:
    img = matplotlib.image.imread(path)
    assert img.shape[:2] == (plots.SIZE_PX[1], plots.SIZE_PX[0]), img.shape
    rgb = img[..., :3]
    ink = np.mean(np.any(rgb < 0.9, axis=-1))  # share of non-white pixels: axes, text, data
    assert ink > 0.01 and float(rgb.std()) > 0.02, (path, ink)


def make_eval(
    root: Path, benchmark: Path, label: str, policy, *, searched=None, budgets=(4, 12), env=None
):
    """A toy search of ``searched`` (default: the whole benchmark) scored by the eval stage."""
    theorems = list(read_theorems(benchmark))
    traj = root / label / "eval"
    if searched == 0:
        TrajectoryWriter(traj).close()  # an empty run: the directory, no attempts
    else:
        toy_search(traj, theorems[:searched], policy, max_nodes=max(budgets), env=env)
    cfg = {"budgets": list(budgets), "pass_n": 1, "num_candidates": 4, "benchmark": "toy"}
    eval_run(model="m", benchmark=benchmark, trajectories=traj, out=root / label / "eval.json",
             cfg=cfg, search=SEARCH, lean=LEAN, policy=POLICY, run_search=False)  # fmt: skip
    return root / label / "eval.json"


@pytest.fixture()
def bench(tmp_path) -> Path:
    return write_benchmark(tmp_path, toy_theorems(8, seed=5, low=3, high=12), name="toy")


def test_iteration_report_flags_gates_and_shows_every_section(tmp_path, bench):
    base = make_eval(tmp_path, bench, "baseline", RandomToyPolicy(seed=1))
    cur = make_eval(tmp_path, bench, "iter_1", RandomToyPolicy(seed=2))
    no_ebm = tmp_path / "iter_1" / "eval_no_ebm.json"
    no_ebm.write_text(base.read_text())
    (tmp_path / "iter_1" / "ebm_metrics.json").write_text(
        json.dumps({"centroid_l2": 1.33, "probe_accuracy": 0.91, "spectrum": {"top1": 0.4}})
    )
    ebm_dir = tmp_path / "ebm"
    ebm_dir.mkdir()
    (ebm_dir / "metrics.json").write_text(
        json.dumps({"train": {"rank1": 0.9}, "heldout": {"rank1": 0.62}})
    )
    out = tmp_path / "iter_1" / "report"
    result = run_iteration(eval_json=cur, trajectories=tmp_path / "iter_1" / "eval", out_dir=out,
                           cfg=CFG, baseline=base, previous=base, no_ebm=no_ebm,
                           ebm_metrics=tmp_path / "iter_1" / "ebm_metrics.json", ebm_dir=ebm_dir)  # fmt: skip
    gates = {g["gate"]: g for g in result["gates"]}
    assert gates["centroid_l2"]["verdict"] == "no-go"  # the published collapse value
    assert gates["probe_accuracy"]["verdict"] == "go"
    assert gates["ebm_rank1"]["value"] == 0.62  # held-out, not train
    cur_rate = json.loads(cur.read_text())["by_budget"][-1]["rate"]
    base_rate = json.loads(base.read_text())["by_budget"][-1]["rate"]
    assert gates["gain_vs_baseline"]["value"] == pytest.approx(cur_rate - base_rate)
    assert gates["ebm_gain"]["value"] == pytest.approx(cur_rate - base_rate)
    assert result["verdict"] == "no-go"
    md = (out / "report.md").read_text(encoding="utf-8")
    top = md.split("## Solve rate")[0]
    assert "## Go/no-go: **NO-GO**" in top and "embedding centroid L2" in top.split("|")[0]
    assert "complete 8/8" in md and "EBM ablation (same theorems and seeds)" in md
    assert "centroid_l2 | 1.3300" in md and "heldout.rank1 | 0.6200" in md
    for name in PNGS:
        assert f"]({name})" in md
        assert_real_png(out / name)


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
        assert "Flagged: unique candidates per expansion" in md.split("## Solve rate")[0]
    for name in PNGS:
        assert_real_png(out / name)
    cross = tmp_path / "report"
    run_cross(evals=[cur], out_dir=cross, cfg=CFG)
    assert_real_png(cross / "budget_curves.png") or assert_real_png(cross / "iterations.png")
    assert "not available" in (cross / "report.md").read_text(encoding="utf-8")


def test_cross_report_over_three_iterations(tmp_path, bench, capsys):
    paths = [
        make_eval(tmp_path, bench, "baseline", RandomToyPolicy(seed=1)),
        make_eval(tmp_path, bench, "iter_0", RandomToyPolicy(seed=2)),
        make_eval(tmp_path, bench, "iter_1", RandomToyPolicy(seed=3), searched=5),
    ]
    (tmp_path / "iter_1" / "ebm_metrics.json").write_text(json.dumps({"centroid_l2": 6.4}))
    rc = cli_main(["report", "cross", *map(str, paths), "--ebm-metrics",
                   str(tmp_path / "iter_1" / "ebm_metrics.json"), "--out", str(tmp_path / "report")])  # fmt: skip
    assert rc == 0
    md = (tmp_path / "report" / "report.md").read_text(encoding="utf-8")
    assert "iter_1 (partial 5/8)" in md and "## Go/no-go by iteration" in md
    assert "| iter_1 | 6.400 | – | – |" in md
    js = json.loads((tmp_path / "report" / "report.json").read_text())
    assert [g["label"] for g in js["iterations"]] == ["iter_0", "iter_1"]
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
