"""results/summary.json and the peak memory it and compare.md show: built from what a run wrote
(eval JSONs through compare, Snakemake's benchmark files), the figure drawn from the summary alone."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread

from burnqed.eval.compare import run as compare_run
from burnqed.eval.memory import peak_memory
from burnqed.eval.paired import mcnemar_p
from burnqed.report.summary import SUMMARY_KEYS, detectable, draw
from burnqed.report.summary import run as summary_run
from tests.eval.conftest import write_benchmark
from tests.report.conftest import make_eval
from tests.search.fakes import RandomToyPolicy, toy_theorems


@pytest.fixture()
def bench(tmp_path) -> Path:
    return write_benchmark(tmp_path, toy_theorems(8, seed=5, low=3, high=12), name="toy")


def _bench(root: Path, name: str, s: float, rss: float, end: float) -> None:
    p = root / name
    p.parent.mkdir(parents=True, exist_ok=True)
    # Snakemake's columns (9.x), one row per repeat
    p.write_text("s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
                 f"{s}\t0:00:01\t{rss}\t1\t1\t1\t0\t0\t0\t0\n", encoding="utf-8")  # fmt: skip
    os.utime(p, (end, end))


def test_peak_memory_is_the_largest_job_and_the_largest_sum_of_jobs_running_at_once(tmp_path):
    # a: [0, 100] 300 MB; b: [90, 150] 200 MB; c: [140, 200] 250 MB; d: [300, 310] 400 MB
    _bench(tmp_path, "data/a.tsv", 100, 300, 100)
    _bench(tmp_path, "search/b.tsv", 60, 200, 150)
    _bench(tmp_path, "search/c.tsv", 60, 250, 200)
    _bench(tmp_path, "eval/d.tsv", 10, 400, 310)
    (tmp_path / "eval" / "empty.tsv").write_text("s\tmax_rss\n", encoding="utf-8")  # no row yet
    m = peak_memory(tmp_path)
    assert m["jobs"] == 4 and m["job_peak_mb"] == 400 and m["job_peak"]["job"] == "eval/d"
    assert m["run_peak_mb"] == 500  # a + b (b + c = 450; d alone 400): never a + b + c
    assert m["wall_s"] == 310
    assert peak_memory(tmp_path / "eval" / "nothing") is None


def _evals(tmp_path: Path, bench: Path) -> list[Path]:
    return [make_eval(tmp_path, bench, label, RandomToyPolicy(seed=s))
            for label, s in (("baseline", 1), ("iter_0", 2), ("iter_1", 3))]  # fmt: skip


def test_summary_holds_the_figures_of_compare_and_memory_and_compare_md_shows_the_peak(
    tmp_path, bench
):
    evals = _evals(tmp_path, bench)
    benchmarks = tmp_path / "logs" / "benchmarks"
    _bench(benchmarks, "eval/iter_0.tsv", 50, 123.4, 1000)
    _bench(benchmarks, "eval/iter_1.tsv", 50, 210.0, 1020)
    c = compare_run(evals=evals, out_md=tmp_path / "compare.md", out_json=tmp_path / "compare.json",
                    benchmarks=benchmarks)  # fmt: skip
    md = (tmp_path / "compare.md").read_text(encoding="utf-8")
    assert "## Peak memory" in md and "**210 MB**" in md and "**333 MB**" in md
    pairs = {"decontamination": {"mode": "drop", "theorems_checked": 60, "contaminated_theorems": 2,
                                 "rows_dropped": 5, "benchmark_statements": 8}}  # fmt: skip
    (tmp_path / "filter_report.json").write_text(json.dumps(pairs), encoding="utf-8")
    s = summary_run(compare_json=tmp_path / "compare.json", out=tmp_path / "summary.json",
                    pairs_report=tmp_path / "filter_report.json", benchmarks=benchmarks)  # fmt: skip
    assert s == json.loads((tmp_path / "summary.json").read_text(encoding="utf-8"))
    assert tuple(s) == SUMMARY_KEYS
    assert list(s["evals"]) == ["baseline", "iter_0", "iter_1"]
    for row in c["rows"]:
        assert s["evals"][row["label"]]["rates"] == row["rates"]
        assert s["evals"][row["label"]]["ended_by"] == row["ended_by"]
    for got, t in zip(s["learning"]["steps"], c["learning"]["steps"], strict=True):
        assert (got["gained"], got["lost"], got["p_value"]) == (
            t["gained"],
            t["lost"],
            t["p_value"],
        )
    assert s["learning"]["verdict"] == c["learning"]["verdict"]
    assert s["decontamination"]["contaminated_theorems"] == 2
    assert s["memory"]["job_peak_mb"] == 210.0 and s["memory"]["run_peak_mb"] == 333.4


def test_detectable_is_the_fewest_gains_an_exact_mcnemar_test_calls_real():
    d = {x["changed"]: x for x in detectable(400)}
    for n, x in d.items():
        g = x["gained"]
        assert mcnemar_p(g, n - g) < 0.05 <= mcnemar_p(g - 1, n - g + 1)
    assert (d[6]["gained"], d[20]["gained"], d[40]["gained"]) == (6, 15, 27)
    assert d[40]["points"] == 14 / 400


def test_the_figure_is_a_function_of_the_summary(tmp_path):
    s = json.loads(
        (Path(__file__).parents[2] / "docs" / "summary.json").read_text(encoding="utf-8")
    )
    draw(s, tmp_path / "a.png")
    draw(s, tmp_path / "b.png")
    assert np.array_equal(imread(tmp_path / "a.png"), imread(tmp_path / "b.png"))
    s["evals"]["iter_1"]["rates"]["4"], s["evals"]["iter_1"]["solved"]["4"] = 0.9, 360
    draw(s, tmp_path / "c.png")
    assert not np.array_equal(imread(tmp_path / "a.png"), imread(tmp_path / "c.png"))


def test_the_feature_values_replay_agreement_reaches_the_summary():
    """compare's features section: live and replay become rates; the replay's agreement with live
    (burnqed.eval.configs.replay_agreement) is carried whole, not read as a rate."""
    from burnqed.report.summary import _configs

    agreement = {"budget": 4, "exact": 289, "agree": 289, "differ": [], "inexact": 111,
                 "live_vs_twin_inexact": {"gained": 13, "lost": 2}}  # fmt: skip
    live = {"label": "iter_1 features", "rate": {"budget": 4, "rate": 0.228, "solved": 91}}
    out = _configs({"configs": [], "features": {"live": {**live, "test": None},
                                                "agreement": agreement}})  # fmt: skip
    assert out["features"]["agreement"] == agreement
    assert out["features"]["live"] == {
        "rate": 0.228,
        "solved": 91,
        "test": None,
        "value_model": None,
    }


def test_a_replay_prediction_reaches_the_summary_and_the_docs_with_its_coverage():
    """A recording-only replay's figures are its effect on the covered theorems, its coverage and
    its bound — the value table and the goal say so; a live replay is named an equality check; a
    summary from before coverage keeps its rate."""
    from burnqed.report.docs import replay_text, value_table
    from burnqed.report.summary import _configs

    test = {"gained": 0, "lost": 2, "p_value": 0.5, "before": "iter_1 no EBM",
            "after": "iter_1 C (replay)", "budget_before": 4, "budget_after": 4}  # fmt: skip
    replay = {"live": False, "rate": {"budget": 4, "rate": 0.06, "solved": 2}, "test": test,
              "coverage": {"attempts": 40, "covered": 32, "coverage": 0.8},
              "covered_theorems": 32, "uncovered": {"theorems": 8, "recorded_solved": 8},
              "max_gain": 0, "unexpanded": 9, "oracle_ceiling": 12}  # fmt: skip
    row = {"config": "C", "rate": {"rate": 0.35}, "rate_no_ebm": {"rate": 0.3}, "ablation": None,
           "replay": replay, "value_model": None, "embeddings": None}  # fmt: skip
    cov = {"replays": 1, "attempts": 40, "covered": 32, "coverage": 0.8}
    out = _configs({"configs": [row], "replay_coverage": cov})
    rp = out["rates"]["C"]["replay"]
    assert (rp["gained"], rp["lost"], rp["coverage"], rp["max_gain"], rp["live"]) == (
        0, 2, 0.8, 0, False)  # fmt: skip
    assert (rp["covered_theorems"], rp["uncovered_theorems"]) == (32, 8)
    assert out["replay_coverage"] == cov
    assert "| C | 35.0% | +0/−2 on 80.0% covered, gain ≤ 0 | 30.0% |" in value_table(
        {"configs": [out]}
    )
    assert replay_text({"live": True}) == "live replay (equality check)"
    assert replay_text({"rate": 0.195}) == "19.5%"  # docs/summary.json before coverage


def _target_compares(tmp_path: Path) -> dict[str, dict]:
    """compare of one run as the two targets write it: the default target's (C against its two
    twins) and the ablations target's (every configuration, replays, the feature value, metrics)."""
    from tests.eval.test_compare import _write, synthetic_eval
    from tests.eval.test_configs import NAMES, _metrics, _replay, _value_model

    def ev(label: str, n: int, start: int = 0) -> dict:
        return synthetic_eval(label, {64: NAMES[start:n]}, 40, 40, theorems=NAMES)

    evals = {
        "baseline": ev("baseline", 6), "iter_0": ev("iter_0", 10), "longer": ev("iter_0 search ×2", 13),
        "C": ev("iter_1", 25), "C0": ev("iter_1 no EBM", 12), "CD": ev("iter_1 depth twin", 14),
        "A": ev("iter_1 A", 11), "AD": ev("iter_1 A depth twin", 12), "S": ev("iter_1 S", 12),
        "S0": ev("iter_1 S no EBM", 12), "SD": ev("iter_1 S depth twin", 9), "B": ev("iter_1 B", 15),
        "F": ev("iter_1 features", 20),
        "C_replay": _replay("iter_1 C (replay)", NAMES[1:8], uncovered=NAMES[8:12],
                            twin_solved=NAMES[:12]),
        "A_replay": _replay("iter_1 A (replay)", NAMES[1:10]),
        "F_replay": _replay("iter_1 features (live replay)", NAMES[:20], live=True),
    }  # fmt: skip
    evals["C"]["value_model"] = _value_model(2.5)
    paths = dict(zip(evals, _write(tmp_path, evals), strict=True))
    metrics = {}
    for c, sep in (("A", 0.9), ("S", 0.2), ("B", 0.6), ("C", 0.8)):
        metrics[c] = tmp_path / f"{c}_metrics.json"
        metrics[c].write_text(json.dumps(_metrics(sep, 0.5, 0.4)), encoding="utf-8")
    full = {k: paths[k] for k in ("A", "AD", "S", "S0", "SD", "B", "C", "C0", "CD", "F",
                                  "C_replay", "A_replay", "F_replay")}  # fmt: skip
    full.update(A0=paths["iter_0"], B0=paths["C0"], BD=paths["CD"])
    sets = {
        "default": {"evals": {k: full[k] for k in ("C", "C0", "CD")}, "metrics": {}},
        "ablations": {"evals": full, "metrics": metrics},
    }
    out = {}
    for target, configs in sets.items():
        d = tmp_path / target
        d.mkdir()
        out[target] = compare_run(
            evals=[paths["baseline"], paths["iter_0"], paths["C"]], controls=[paths["longer"]],
            out_md=d / "compare.md", configs={1: {"iteration": 1, **configs}},
        )  # fmt: skip
    return out


def test_the_default_targets_summary_is_the_ablations_one_without_what_only_ablations_builds(
    tmp_path,
):
    """One run's two summaries: the ``ablations`` target's, with the figures it alone builds removed
    (``headline_view``), states exactly what the default target's does; and every figure it lists
    as its own (``run.ablations_only``) the default target's summary lacks or states otherwise —
    the configurations, the replays, the feature value, the metrics, Holm over four claims (C's
    alone: its p), the goal and the whole run's memory."""
    from burnqed.report.summary import ABLATIONS_ONLY, ablations_only, build, headline_view

    c = _target_compares(tmp_path)
    memory = {"default": {"jobs": 30, "run_peak_mb": 900.0}, "ablations": {"jobs": 54, "run_peak_mb": 1400.0}}  # fmt: skip
    default, abl = (
        build(c[t], memory=memory[t], seed=0, target=t) for t in ("default", "ablations")
    )
    assert (default["run"]["target"], abl["run"]["target"]) == ("default", "ablations")
    assert "ablations_only" not in default["run"]
    assert abl["run"]["ablations_only"] == ablations_only(abl)
    assert headline_view(abl) == headline_view(default)
    # C's figures the default target states are the ablations' ones: its rates, twins, claim.
    cd, ca = default["configs"][0]["rates"]["C"], abl["configs"][0]["rates"]["C"]
    assert cd["vs_stronger"]["p_value"] == ca["vs_stronger"]["p_value"] < 0.05
    assert cd["vs_stronger"]["p_holm"] == cd["vs_stronger"]["p_value"] < ca["vs_stronger"]["p_holm"]

    def at(s: dict, path: str):
        node = s
        for part in path.split("."):
            if isinstance(node, list):
                node = node[int(part)]
            elif part in node:
                node = node[part]
            else:
                return "missing"
        return node

    listed = abl["run"]["ablations_only"]
    for pattern in ABLATIONS_ONLY:  # each declared figure is there, and is the ablations' own
        prefix = pattern.replace(".*.", ".0.")
        assert prefix in listed, pattern
        assert at(default, prefix) != at(abl, prefix), pattern
    with pytest.raises(ValueError, match="summary target 'all'"):
        build(c["default"], target="all")
    # The default target's compare.md says what it leaves out and where it is.
    note = "Only the main line here, C against its two twins (its Holm p is its p)"
    assert note in (tmp_path / "default" / "compare.md").read_text(encoding="utf-8")
    assert note not in (tmp_path / "ablations" / "compare.md").read_text(encoding="utf-8")


def test_the_docs_publish_the_ablations_targets_summary_and_refuse_the_headlines_alone(tmp_path):
    """``burnqed report docs RESULTS`` publishes ``RESULTS/ablations/summary.json`` (the docs quote
    the attribution set); a ``results/summary.json`` from before the demo had two targets (no
    ``run.target``: its default built everything) stands for it; the default target's alone is
    refused in one line naming the command that builds the rest."""
    from burnqed.config import InputError
    from burnqed.report.docs import summary_file

    results = tmp_path / "results"
    results.mkdir()
    (results / "summary.json").write_text(json.dumps({"run": {"seed": 0}}), encoding="utf-8")
    assert summary_file(results) == results / "summary.json"  # a run before the split
    (results / "summary.json").write_text(
        json.dumps({"run": {"seed": 0, "target": "default"}}), encoding="utf-8"
    )
    with pytest.raises(InputError, match=r"ablations/summary.json: missing.*snakemake --cores 2 "
                                         r"ablations --configfile config/demo.yaml"):  # fmt: skip
        summary_file(results)
    (results / "ablations").mkdir()
    (results / "ablations" / "summary.json").write_text("{}", encoding="utf-8")
    assert summary_file(results) == results / "ablations" / "summary.json"
