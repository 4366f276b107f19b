"""The whole expert-iteration loop as one Snakemake DAG, shrunken, the way a user runs the demo:
baseline, two iterations (SFT, merge, EBM, search + noise search, pool selection), evals with the
EBM ablation and the search-longer control, reports and ``results/compare.md`` (the default target,
the headline), then the ``ablations`` target on it (the attribution set, nothing of the first run
again); its Snakemake report, also opened in Chromium.  Then the pre-emption story and reproducibility in one second
run: ``snakemake`` for iteration 1's search killed with SIGKILL during iteration 0's search
(unlock, the same command), then with Ctrl-C during iteration 1's search (the same command
again), finishes without redoing finished jobs or attempts, and with the rest of the loop gives
the same numbers, proofs, models and EBMs as the first run, to the bit (clock-time fields aside).
The first run is without the expansion cache, the second with it, empty at its start (issue 31's
acceptance: the cache changes what answers cost, never what is found; compare.md states its hit
rates).

Two loops in all (the first, and the second killed twice), not one per check: each is minutes
on 2 cores, and the two run at once (tests/workflow/loops.py; the clean one also serves
test_demo_workflow.py and test_dvc.py).  Marked ``slow``; ``.ci/run`` runs it as its own step.
"""

from __future__ import annotations

import base64
import io
import itertools
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
from PIL import Image

from burnqed.determinism import reproducible_digests
from burnqed.eval.stage import without_run_specific
from burnqed.eval.table import pct
from burnqed.trajectory import finished_attempts, read_summary
from tests.browser.conftest import WALK, dump_dom, find_chromium, screenshot
from tests.workflow.conftest import demo_env, snakemake
from tests.workflow.loops import TEST_THEOREMS

pytestmark = [pytest.mark.slow, pytest.mark.timeout(5400)]

REPO = Path(__file__).resolve().parents[2]


def test_rule_all_builds_the_whole_loop(loop):
    for path in (
        "results/baseline/eval.json",
        "results/iter_0/eval.json",
        "results/iter_0/eval_longer.json",
        "results/iter_1/eval.json",
        "results/iter_1/eval_no_ebm.json",
        "results/iter_1/search_pool.jsonl",
        "results/iter_1/ebm_metrics.json",
        "models/iter_1/ebm/ebm.safetensors",
        "models/iter_1/merged/config.json",
        "results/iter_0/report/report.md",
        "results/iter_1/report/report.md",
        "results/report/report.md",
        "results/compare.md",
        "results/compute.md",
        "results/compute/expert_iteration.json",
        "results/compute/search_only.json",
    ):
        assert (loop / path).is_file(), path
    evals = {
        k: json.loads((loop / f"results/{k}.json").read_text())
        for k in ("baseline/eval", "iter_0/eval", "iter_1/eval", "iter_1/eval_no_ebm")
    }
    for e in evals.values():
        assert e["status"]["complete"] and e["status"]["evaluated_theorems"] == TEST_THEOREMS
    # The ablation: same theorems and seeds, without the EBM.
    assert evals["iter_1/eval"]["provenance"]["ebm"]["path"] == "models/iter_1/ebm"
    assert evals["iter_1/eval_no_ebm"]["provenance"]["ebm"] is None
    longer = json.loads((loop / "results/iter_0/eval_longer.json").read_text())
    assert longer["budgets"] == [8, 16] and longer["budget_factor"] == 2
    compare = json.loads((loop / "results/compare.json").read_text())
    assert [r["label"] for r in compare["rows"]] == ["baseline", "iter_0", "iter_1"]
    assert [c["label"] for c in compare["controls"]] == ["iter_0 search ×2"]
    assert len(compare["learning"]["steps"]) == 2 and compare["learning"]["complete"]
    report = (loop / "results/report/report.md").read_text()
    assert "## Search-pool selection" in report and "| iter_1 |" in report
    # Iteration 1's SFT learned from iteration 0's verified proofs (normal and noise searches).
    summary = json.loads((loop / "models/iter_1/adapter/training_summary.json").read_text())
    assert summary["warm_start"] and summary["validation"]["trajectory"]


def test_the_default_target_compares_expert_iteration_with_search_only(loop):
    """Polu's comparison, built by the README's command (issue 61): each arm's search of
    iteration 1 — expert iteration's with its model and value model, search only's with iteration
    0's model and its own seeds — on the theorems iteration 0's searches left; the curves, the
    paired test on the cumulative solved indicator, and every trainer's token count beside."""
    c = json.loads((loop / "results/compute.json").read_text())
    pool = (loop / "data/theorems/search_pool.jsonl").read_text().splitlines()
    assert c["pool_theorems"] == len(pool) and c["stopped"] == {}
    only = c["searches"]["iter_1 search only"]
    ei = c["searches"]["iter_1 search"]
    assert only["model"].endswith("models/iter_0/merged") and only["ebm"] is None
    assert only["seed_salt"] == "search_only/iter_1" and ei["seed_salt"] == "search/iter_1"
    assert ei["model"].endswith("models/iter_1/merged") and ei["ebm"].endswith("models/iter_1/ebm")
    assert ei["value_scorings"] > 0 and only["value_scorings"] == 0
    curves = c["curves"]
    assert curves["expert iteration"][0] == curves["search only"][0]  # iteration 0's searches
    (t,) = c["paired"]
    assert t["theorems"] == len(pool) and t["reasons"] == [], t["reasons"]
    for k, v in c["training"]["iterations"].items():
        assert v["tokens"]["total"] > v["tokens"]["completion"] > 0, k
    assert c["training"]["iterations"]["iter_1"]["tokens"]["value"] > 0  # joint training's rows
    arm = json.loads((loop / "results/compute/search_only.json").read_text())
    assert arm["kind"] == "burnqed pool curve" and arm["status"]["complete"]
    assert arm["benchmark"]["role"] == "pool"


def test_the_benchmark_comparison_adds_one_salted_eval_to_the_loop(loop, tmp_path):
    """Part 3's registered secondary (burnqed.eval.benchmark_curves) on the demo, in a copy of the
    finished loop (its new eval is a look at the confirmation benchmark; the loop other tests read
    stays as it was): the target runs only iteration 0's model's eval again for iteration 1, with
    a salt of its own, and the union of both arms' evals; iteration 0's eval is both arms' first
    step, and a theorem counts once."""
    work = tmp_path / "w"
    shutil.copytree(loop, work, symlinks=True)
    target = "results/compute/benchmark_expert_iteration.json"
    r = snakemake(work, "--cores", "2", target, env=demo_env())
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-8000:]
    assert {rule for rule, _ in _ran(r.stdout + r.stderr)} == {"eval_search_only",
                                                               "compute_benchmark"}  # fmt: skip
    again = json.loads((work / "results/iter_1/eval_search_only.json").read_text())
    first = json.loads((work / "results/iter_0/eval.json").read_text())
    prov = again["provenance"]
    assert prov["seeds"]["seed_salt"] == "eval_search_only/iter_1" and prov["ebm"] is None
    assert prov["model"] == first["provenance"]["model"]  # iteration 0's model, not retrained
    assert prov["sampling"]["seed"] != first["provenance"]["sampling"]["seed"]  # fresh draws
    assert again["look"]["benchmark"] == first["look"]["benchmark"]  # a look, recorded as one
    c = json.loads((work / "results/compute/benchmark.json").read_text())
    curves = c["curves"]
    assert curves["expert iteration"][0] == curves["search only"][0]
    evals = {"expert iteration": ["iter_0/eval.json", "iter_1/eval.json"],
             "search only": ["iter_0/eval.json", "iter_1/eval_search_only.json"]}  # fmt: skip
    for arm, files in evals.items():
        union = set().union(*(set(json.loads((work / "results" / f).read_text())
                                  ["solved_theorems"]) for f in files))  # fmt: skip
        assert curves[arm][-1]["proved"] == len(union), arm
    (t,) = c["paired"]
    assert t["theorems"] == first["status"]["expected_theorems"] and t["reasons"] == []
    arm = json.loads((work / target).read_text())
    assert arm["kind"] == "burnqed pool curve" and arm["benchmark"]["role"] == "confirmation"


def _ran(log: str) -> set[tuple[str, str]]:
    """(rule, wildcards) of every job a Snakemake run's log says it started."""
    jobs = set()
    for block in re.split(r"\n(?=(?:local)?rule \w+:\n)", log)[1:]:
        rule = block.split()[1].rstrip(":")
        lines = itertools.takewhile(lambda line: line.startswith("    "), block.splitlines()[1:])
        fields = dict(line.strip().split(": ", 1) for line in lines if ": " in line)
        jobs.add((rule, fields.get("wildcards", "")))
    return jobs


# What only `ablations` runs: the configurations beside the main line, the replays, the feature
# value, the EBM metrics, its compare and summary (configuration A's EBM is the default target's:
# joint training's warm start).
ATTRIBUTION = {
    "sft_only", "merge_sft_only", "ebm_embed_config", "ebm_train_config", "ebm_metrics_config",
    "eval_config", "eval_config_no_ebm", "eval_config_depth_twin", "replay_config", "replay_ebm",
    "value_features", "live_replay_features", "eval_features", "ebm_metrics", "compare_ablations",
    "summary_ablations", "ablations",
}  # fmt: skip


def test_the_default_target_is_the_headline_and_ablations_builds_the_rest_on_it(loops, loop):
    """The README's command built the headline — every iteration, the baseline, the search-longer
    control, C against its two twins, the reports, compare and summary — and none of the
    attribution set; ``ablations`` then ran only the attribution set's jobs, none of the first
    command's again (it reuses every artifact), and its compare holds every configuration."""
    headline, attribution = (_ran(r.stdout) for r in loops.clean_runs)
    rules = {rule for rule, _ in headline}
    assert {"eval_baseline", "eval", "eval_longer", "eval_no_ebm", "eval_depth_twin", "report",
            "report_cross", "compare", "summary", "search_only_shard", "compute_report",
            "all"} <= rules  # fmt: skip
    assert not rules & (ATTRIBUTION - {"ebm_embed_config", "ebm_train_config"}), rules
    assert {w for r, w in headline if r.startswith("ebm_") and "c=" in w} == {"i=1, c=A"}
    assert not headline & attribution, sorted(headline & attribution)
    assert {rule for rule, _ in attribution} == ATTRIBUTION
    compare = json.loads((loop / "results/compare.json").read_text())
    (section,) = compare["configs"]
    assert [r["config"] for r in section["configs"]] == ["C"] and section["features"] is None
    full = json.loads((loop / "results/ablations/compare.json").read_text())
    (section,) = full["configs"]
    assert [r["config"] for r in section["configs"]] == ["A", "S", "B", "C"]
    assert full["learning"] == compare["learning"] and full["rows"] == compare["rows"]
    summary = json.loads((loop / "results/summary.json").read_text())
    whole = json.loads((loop / "results/ablations/summary.json").read_text())
    assert summary["run"]["target"] == "default" and whole["run"]["target"] == "ablations"
    assert "configs.0.rates.A" in whole["run"]["ablations_only"]


def _report(loop: Path, name: str, *targets: str) -> Path:
    """`snakemake --report NAME [TARGET…]` (with the run's shrinking overlay too) after the loop."""
    r = snakemake(loop, "--report", name, *targets, env=demo_env())
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-8000:]
    return loop / name


def _embedded(report: Path) -> set[str]:
    page = report.read_text(encoding="utf-8")
    return set(re.findall(r"data:[\w/+.-]+;charset=\w+;filename=([\w.-]+);base64,", page))


@pytest.fixture(scope="module")
def loop_report(loop) -> Path:
    """docs/demo.md's `snakemake --report report.html ablations --configfile config/demo.yaml`
    after the loop: the report of everything it built."""
    return _report(loop, "report_ablations.html", "ablations")


# The default target's plots: each iteration's report's, then the cross report's.
HEADLINE_PLOTS = {"budget_curve.png", "anytime.png", "energy_hist.png", "proof_depth.png",
                  "nodes_hist.png", "budget_curves.png", "iterations.png"}  # fmt: skip


def test_the_readmes_report_holds_the_headlines_plots_and_tables(loop):
    """The README's `snakemake --report report.html --configfile config/demo.yaml`: the default
    target's marked outputs — the iterations' and the cross report's plots, the evals, the reports
    and compare.md — and not the attribution set's (the EBM's embedding plots)."""
    embedded = _embedded(_report(loop, "report.html"))
    assert embedded >= HEADLINE_PLOTS, HEADLINE_PLOTS - embedded
    assert {"eval.json", "report.md", "compare.md"} <= embedded
    assert not {"pca_by_label.png", "pca_by_depth.png"} & embedded


def test_snakemake_report_of_the_loop_holds_every_plot_and_table(loop, loop_report):
    """One self-contained file with every marked output of the loop (`ablations` built)."""
    page = loop_report.read_text(encoding="utf-8")
    embedded = _embedded(loop_report)
    plots = {*HEADLINE_PLOTS, "pca_by_label.png", "pca_by_depth.png"}  # iteration 1's embeddings
    assert plots <= embedded, plots - embedded
    assert {"eval.json", "report.md", "compare.md"} <= embedded
    for path in ("results/iter_1/report/budget_curve.png", "results/iter_1/ebm_plots/pca_by_label.png",
                 "results/report/budget_curves.png", "results/compare.md",
                 "results/ablations/compare.md",
                 "results/baseline/eval.json", "results/iter_0/eval.json"):  # fmt: skip
        assert path in page, path
    for category in ("baseline", "iteration 0", "iteration 1", "across iterations"):
        assert category in page, category
    # The iteration reports link the search trees they wrote beside them.
    md = (loop / "results/iter_1/report/report.md").read_text(encoding="utf-8")
    assert "## Search trees" in md
    pages = list((loop / "results/iter_1/report/trees").glob("*.html"))
    assert pages and all(f"(trees/{p.name})" in md for p in pages)


@pytest.mark.browser
def test_the_loops_report_opens_in_chromium_with_its_plots(loop_report, tmp_path):
    """The demo's own report (the shrunken loop's, built by Snakemake from the rules' outputs) in
    headless Chromium: it renders, walking its menu (iteration 1 → report, → EBM and embeddings;
    across iterations → report, → compare) lists the plots and tables, and every embedded PNG is
    not blank.  Marked ``browser`` as well: ``.ci/run`` installs Chromium before the ``slow`` step,
    and its ``browser`` step leaves this one to it."""
    chromium = find_chromium()
    pixels = screenshot(chromium, loop_report.as_uri(), tmp_path / "report.png")
    assert float(pixels.std()) > 0.05, "blank screenshot"
    page = loop_report.read_text(encoding="utf-8")
    dom = dump_dom(chromium, loop_report.as_uri())
    assert "burnqed: Lean 4 theorem proving by expert iteration." in dom  # workflow.rst rendered
    for category in ("baseline", "iteration 0", "iteration 1", "across iterations"):
        assert category in dom, category
    at = page.rfind("</body>")
    for steps, paths in (
        (["iteration 1", "report"], ["results/iter_1/report/budget_curve.png",
                                     "results/iter_1/report/anytime.png",
                                     "results/iter_1/report/report.md"]),
        (["iteration 1", "EBM and embeddings"], ["results/iter_1/ebm_plots/pca_by_label.png"]),
        (["across iterations", "report"], ["results/report/budget_curves.png"]),
        (["across iterations", "compare"], ["results/compare.md"]),
    ):  # fmt: skip
        walk = tmp_path / "walk.html"
        walk.write_text(page[:at] + WALK % json.dumps(steps) + page[at:], encoding="utf-8")
        dom = dump_dom(chromium, walk.as_uri())
        for path in paths:
            assert f">{path}<" in dom, (steps, path)
    pngs = re.findall(
        r"data:image/png;charset=\w+;filename=([\w.-]+);base64,([A-Za-z0-9+/=]+)", page
    )
    assert len(pngs) >= 9
    for name, data in pngs:
        img = np.asarray(Image.open(io.BytesIO(base64.b64decode(data))).convert("RGB"))
        assert img.std() > 5, f"{name} is blank"


def test_the_next_pool_excludes_what_iteration_0_proved(loop):
    proved = set()
    for d in ("results/iter_0/search/shard_0", "results/iter_0/search_noise/shard_0"):
        for r in read_summary(loop / d).table.to_pylist():
            if r["status"] == "proved" and r["verified"]:
                proved.add(r["theorem"])
    pool = [json.loads(line) for line in (loop / "results/iter_1/search_pool.jsonl").open()]
    meta = json.loads((loop / "results/iter_1/search_pool.jsonl.meta.json").read_text())
    assert proved and meta["counts"]["proved"] == len(proved)
    assert not {t.get("key") or t["name"] for t in pool} & proved
    assert meta["counts"]["selected"] == len(pool)


def _evals(work: Path) -> dict[str, dict]:
    """Every eval JSON of a loop without its clock-time and scheduling fields, its machine block and
    its expansion-cache block (burnqed.eval.stage.CLOCK_FIELDS, SCHEDULE_FIELDS, MACHINE_FIELDS,
    CACHE_FIELDS)."""
    return {
        str(p.relative_to(work)): without_run_specific(json.loads(p.read_text()))
        for p in sorted((work / "results").rglob("eval*.json"))
    }


def _proofs(work: Path) -> dict[str, list]:
    """Every search's attempts with their status and proof, by search directory."""
    out = {}
    for shard in sorted((work / "results").rglob("shard_*")):
        rows = read_summary(shard).table.to_pylist()
        out[str(shard.relative_to(work))] = sorted(
            (r["theorem"], r["attempt"], r["status"], json.dumps(r.get("proof"), sort_keys=True))
            for r in rows
        )
    return out


def _models(work: Path) -> dict[str, dict[str, str]]:
    """The digests of every adapter, merged model and EBM (run-specific files aside)."""
    dirs = [*work.glob("models/iter_*/adapter"), *work.glob("models/iter_*/merged"),
            *work.glob("models/iter_*/ebm"), *work.glob("models/iter_*/configs/*/*")]  # fmt: skip
    return {str(d.relative_to(work)): reproducible_digests(d) for d in sorted(dirs) if d.is_dir()}


def _same_as(loop: Path, work: Path) -> None:
    """``work`` holds every eval, proof, adapter, model and EBM ``loop`` holds, the same to the bit
    (both ran iteration 1's own search: the compute comparison's; the killed run resumed it)."""
    first, second = _evals(loop), _evals(work)
    assert len(first) >= 9 and list(first) == list(second)
    for name in first:
        assert first[name] == second[name], name
    proofs = _proofs(work)
    assert {k: proofs.get(k) for k in _proofs(loop)} == _proofs(loop)
    models = _models(loop)
    assert {"models/iter_1/merged", "models/iter_1/ebm", "models/iter_1/configs/B/ebm"} <= set(
        models
    )
    assert models == _models(work)


def _cache_blocks(work: Path) -> dict[str, dict | None]:
    """The ``cache`` block of every eval JSON of a loop, by path (null: run without the cache)."""
    return {
        str(p.relative_to(work)): json.loads(p.read_text()).get("cache")
        for p in sorted((work / "results").rglob("eval*.json"))
    }


def test_a_run_killed_with_sigkill_and_rerun_gives_the_uninterrupted_numbers(loop, resumed):
    """Every eval, proof, adapter, model and EBM of the killed and resumed run (its jobs outside
    the killed searches are a clean second run) is the first run's, to the bit — and the first
    ran without the expansion cache, the second with it, empty at its start (issue 31's
    acceptance: run A off, run B on and empty, the resume with B's cache)."""
    for r in (resumed.rerun, resumed.rest):
        assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-8000:]
    manifest = resumed.work / "results/iter_0/search/shard_0/manifest.json"
    assert json.loads(manifest.read_text())["resumed"] is True
    _same_as(loop, resumed.work)
    # The clean loop ran without the cache; here every eval went through it, some answered from
    # it, and no rebuilt state or repeated answer disagreed.
    assert set(_cache_blocks(loop).values()) == {None}
    blocks = _cache_blocks(resumed.work)
    assert len(blocks) >= 9 and None not in blocks.values()
    assert sum(b["policy"]["candidates"]["hits"] for b in blocks.values()) > 0, blocks
    assert sum(b["lean"]["hits"] for b in blocks.values()) > 0, blocks
    for name, b in blocks.items():
        assert b["states"]["disagreements"] == 0 and b["conflicts"] == 0, (name, b)
        assert b["policy"]["candidates"]["misses"] + b["policy"]["candidates"]["hits"] > 0, name
    assert list((resumed.work / "results/cache/policy").glob("part-*.parquet"))
    # The hit path of the resume itself: Ctrl-C flushed what iteration 1's search had asked, and
    # the same command, redoing the attempts that were under way, answered them from there.
    manifest = resumed.work / "results/iter_1/search/shard_0/manifest.json"
    search = json.loads(manifest.read_text())["cache"]
    assert search["starts"]["hits"] + search["policy"]["candidates"]["hits"] > 0, search
    assert search["states"]["disagreements"] == 0 and search["conflicts"] == 0, search


def test_compare_states_the_expansion_caches_hit_rates_and_saving_per_eval(resumed):
    """``results/ablations/compare.md`` of the cached run (issue 31 §6; the whole loop's compare,
    the default target's ``results/compare.md`` has the headline's evals): its "Expansion cache"
    table has a
    row for every eval — the baseline, both iterations, the search-longer control, the no-EBM
    twins (iteration 1's, S's) and the configurations A, S, B — with the policy and Lean hit
    rates and the seconds saved its eval JSON's ``cache`` block holds."""
    work = resumed.work
    blocks = _cache_blocks(work)
    twins_and_configs = {"results/iter_1/eval_no_ebm.json", "results/iter_1/configs/S/eval_no_ebm.json",
                         "results/iter_0/eval_longer.json",
                         *(f"results/iter_1/configs/{c}/eval.json" for c in "ASB")}  # fmt: skip
    assert twins_and_configs <= set(blocks), sorted(blocks)
    rows = {r["file"]: r for r in
            json.loads((work / "results/ablations/compare.json").read_text())["cache"]}  # fmt: skip
    assert set(rows) == set(blocks), (sorted(rows), sorted(blocks))
    md = (work / "results/ablations/compare.md").read_text(encoding="utf-8")
    assert "## Expansion cache" in md
    for name, row in rows.items():
        b = blocks[name]
        assert row["policy_hit_rate"] == b["policy"]["hit_rate"] is not None, name
        assert row["lean_hit_rate"] == b["lean"]["hit_rate"] is not None, name
        assert row["policy_saved_s"] == b["policy"]["saved_s"], name
        assert row["lean_net_saved_s"] == b["lean"]["net_saved_s"], name
        assert f"| {name} | {pct(row['policy_hit_rate'])} (" in md, name
    assert "s of generation and" in md


def test_a_killed_run_resumes_without_redoing_finished_jobs_or_attempts(resumed):
    work, shard = resumed.work, resumed.work / "results/iter_1/search/shard_0"
    r = resumed.rerun
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-8000:]
    assert resumed.done_before
    times_after = {p: p.stat().st_mtime_ns for p in resumed.times_before}
    assert times_after == resumed.times_before  # not redone
    for name, data in resumed.parts_before.items():  # the parts written before Ctrl-C are kept
        assert (shard / "summary" / name).read_bytes() == data
    pool = [json.loads(line) for line in (work / "results/iter_1/search_pool.jsonl").open()]
    done_after, skipped = finished_attempts(shard)
    # config/demo.yaml searches each pool theorem several times (search.attempts)
    attempts = yaml.safe_load((REPO / "config/demo.yaml").read_text())["search"]["attempts"]
    every = {(t.get("key") or t["name"], a) for t in pool for a in range(attempts)}
    assert skipped == [] and done_after == every
    manifest = json.loads((shard / "manifest.json").read_text())
    assert manifest["resumed"] is True
    log = (work / "logs/search/iter_1_shard_0.log").read_text()
    assert f"{len(every) - len(resumed.done_before)} to do" in log, log[-3000:]
    r = snakemake(work, "--cores", "2", "-n", resumed.target, env=demo_env())
    assert "Nothing to be done" in r.stdout + r.stderr
