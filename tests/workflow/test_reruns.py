"""What a change outside the sections reruns, on the whole demo DAG (the ``ablations`` target: the
default target and the attribution set): the instruction-set pin (``cpu_isa``) every job, a new
Lean toolchain, Mathlib or Pantograph every search and eval; and that ``ablations`` after the
default target reruns none of its jobs.

No job runs: every output of the tiny demo overlay is made empty and ``snakemake --touch`` records
the jobs as done (Snakemake's records, params included), so a dry run afterwards plans exactly what
the change reruns.  The Lean project and the REPL are stand-ins: a ``lean-toolchain``, a
``lake-manifest.json`` and a script answering ``--version``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from tests.workflow.conftest import snakemake

PROJECT = "lean/project"
MANIFEST = {"name": "demo", "packages": [{"name": "mathlib", "rev": "2f65ba7f"}]}
# Rules that run a search against the REPL: they must rerun when Lean changes.
SEARCHES = ("search_shard", "search_noise_shard", "search_baseline_shard", "search_pool_select")
# The whole demo DAG: `ablations` builds the default target and the attribution set on it.
WHOLE = ("ablations",)


def job_stats(out: str) -> dict[str, int]:
    if "Job stats:" not in out:
        assert "Nothing to be done" in out, out[-3000:]
        return {}
    table = out.split("Job stats:")[1].split("\n\n")[0]
    return {
        rule: int(n) for rule, n in re.findall(r"(?m)^(\w+)\s+(\d+)$", table) if rule != "total"
    }


def planned(work: Path, *targets: str) -> dict[str, int]:
    """What ``snakemake -n`` plans for ``targets`` (default: the whole DAG), by rule."""
    r = snakemake(work, *(targets or WHOLE), "-n", "--quiet", "rules")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return job_stats(r.stdout + r.stderr)


def set_repl_version(work: Path, version: str) -> None:
    repl = work / PROJECT / "repl"
    repl.write_text(f'#!/bin/sh\n[ "$1" = --version ] && echo "{version}"\n', encoding="utf-8")
    repl.chmod(0o755)


def record_done(work: Path, *targets: str) -> dict[str, int]:
    """Make every output of ``targets``' jobs empty and record the jobs as done (``--touch``);
    the jobs by rule."""
    r = snakemake(work, *targets, "--summary")
    assert r.returncode == 0, r.stderr[-3000:]
    for line in r.stdout.splitlines()[1:]:
        out = work / line.split("\t")[0]
        if out.suffix:  # a file; the directory outputs (models, reports) have no suffix
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text("", encoding="utf-8")
        else:
            out.mkdir(parents=True, exist_ok=True)
    r = snakemake(work, *targets, "--touch", "--forceall", "--cores", "1")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return job_stats(r.stdout + r.stderr)


def lean_repo(make_tiny_repo, dest: Path) -> Path:
    """The tiny demo repository with a stand-in Lean project and REPL."""
    work = make_tiny_repo(dest, lean={"project_path": PROJECT, "repl_command": ["./repl"]})
    (work / PROJECT).mkdir(parents=True)
    (work / PROJECT / "lean-toolchain").write_text("leanprover/lean4:v4.9.0\n", encoding="utf-8")
    (work / PROJECT / "lake-manifest.json").write_text(json.dumps(MANIFEST), encoding="utf-8")
    set_repl_version(work, "0.3.4")
    return work


@pytest.fixture(scope="module")
def touched(tmp_path_factory, make_tiny_repo) -> tuple[Path, dict[str, int]]:
    """The tiny demo repository with every job recorded as done; and the whole DAG's job counts."""
    work = lean_repo(make_tiny_repo, tmp_path_factory.mktemp("reruns") / "w")
    whole = record_done(work, *WHOLE)
    assert planned(work) == {}  # recorded: nothing to do
    return work, whole


def test_ablations_after_the_default_target_runs_only_the_attribution_set(touched, tmp_path,
                                                                         make_tiny_repo):  # fmt: skip
    """The default target done, ``ablations`` plans none of its jobs again (it reuses every
    artifact): only the attribution set — configurations A's (but its EBM, joint training's warm
    start), S's and B's jobs, the replays, the feature value, the EBM metrics — and its compare
    and summary; together the two are the whole DAG."""
    _, whole = touched
    work = lean_repo(make_tiny_repo, tmp_path / "w")
    headline = record_done(work)
    assert planned(work, "all") == {}
    rest = planned(work)
    assert {"eval", "eval_no_ebm", "eval_depth_twin", "eval_longer", "eval_baseline", "sft",
            "search_shard", "ebm_export_joint", "report", "compare", "summary"} <= set(headline)  # fmt: skip
    assert set(rest) == {
        "sft_only", "merge_sft_only", "ebm_embed_config", "ebm_train_config", "ebm_metrics",
        "ebm_metrics_config", "eval_config", "eval_config_no_ebm", "eval_config_depth_twin",
        "value_features", "live_replay_features", "eval_features", "replay_ebm", "replay_config",
        "compare_ablations", "summary_ablations", "ablations",
    }, rest  # fmt: skip
    both = {r: headline.get(r, 0) + rest.get(r, 0) for r in {*headline, *rest} - {"all"}}
    assert both == whole


def test_the_instruction_set_pin_reruns_every_job(touched):
    work, whole = touched
    overlay = work / "tiny.yaml"
    before = overlay.read_bytes()
    try:
        overlay.write_text(yaml.safe_dump({**yaml.safe_load(before), "cpu_isa": "native"}))
        plan = planned(work)
    finally:
        overlay.write_bytes(before)
    assert plan == whole and plan["eval"] == 2 and plan["tactic_pairs"] == 1


@pytest.mark.parametrize("change", ["toolchain", "mathlib", "pantograph"])
def test_a_new_lean_toolchain_mathlib_or_pantograph_reruns_every_search_and_eval(touched, change):
    work, whole = touched
    project = work / PROJECT
    before = {p: p.read_bytes() for p in project.iterdir()}
    try:
        if change == "toolchain":
            (project / "lean-toolchain").write_text("leanprover/lean4:v4.10.0\n", encoding="utf-8")
        elif change == "mathlib":
            manifest = {**MANIFEST, "packages": [{"name": "mathlib", "rev": "0123abcd"}]}
            (project / "lake-manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
        else:
            set_repl_version(work, "0.3.5")
        plan = planned(work)
    finally:
        for p, data in before.items():
            p.write_bytes(data)
    evals = {rule: n for rule, n in whole.items() if rule.startswith("eval")}
    # baseline, iterations, controls, configurations, the feature value, the depth twins (iteration
    # 1's model, configurations A's and S's)
    assert len(evals) == 9 and sum(evals.values()) == 13
    assert {"search_shard", "search_noise_shard", "search_pool_select"} <= set(whole)
    for rule in (*evals, *(r for r in SEARCHES if r in whole)):
        assert plan.get(rule) == whole[rule], (rule, plan)
    # What does not run Lean stays: the data, the base model, iteration 0's training.
    for rule in ("tactic_pairs", "search_pool", "proplogic_benchmark_split", "base_model"):
        assert rule not in plan, plan
    assert plan["sft"] == whole["sft"] - 1  # iteration 1's, which learns from the searches


def test_the_expansion_cache_is_a_machine_setting_that_reruns_nothing(touched):
    """Turning the cache off or moving it (params.yaml ``cache``, or the README's ``--config
    cache=`` for the demo without it) plans no job; each search and eval job gets it as its
    ``expansion_cache`` resource, not as a param, and without it none."""
    work, _ = touched
    overlay = work / "tiny.yaml"
    before = overlay.read_bytes()
    try:
        for value in (None, "elsewhere/cache"):
            overlay.write_text(yaml.safe_dump({**yaml.safe_load(before), "cache": value}))
            assert planned(work) == {}, value
        # The share of Lean hits re-checked live (issue 48) is a machine setting too.
        overlay.write_text(yaml.safe_dump({**yaml.safe_load(before), "cache_recheck": 0.5}))
        assert planned(work) == {}
    finally:
        overlay.write_bytes(before)
    r = snakemake(work, *WHOLE, "-n", "--quiet", "rules", "--config", "cache=")
    assert r.returncode == 0 and job_stats(r.stdout + r.stderr) == {}, r.stdout + r.stderr
    targets = ("results/iter_0/eval.json", "results/iter_0/search/shard_0/manifest.json")
    for extra, resource in (((), "expansion_cache=results/cache"),  # config/demo.yaml's
                            (("--config", "cache="), None)):  # fmt: skip
        r = snakemake(work, "-n", "-f", *targets, *extra)
        assert r.returncode == 0, r.stderr[-3000:]
        jobs = re.split(r"\n(?=(?:local)?rule \w+:)", r.stdout)
        for rule in ("eval", "search_shard"):
            (block,) = [b for b in jobs if b.startswith(f"rule {rule}:")]
            if resource:
                assert resource in block, block
            else:
                assert "expansion_cache" not in block, block
            # params.yaml's re-check share reaches each job as a string resource (Snakemake
            # rounds a numeric one), cache or not.
            assert "cache_recheck=0.02" in block, block


def test_the_no_ebm_twins_wait_for_nothing_they_do_not_read(touched):
    """Each no-EBM twin (iteration i's, and configuration S's) reads no EBM and does not wait for
    its eval with the EBM: it is ready first and fills the expansion cache for it (its priority,
    rules/common.smk TIERS, runs it first); the one order-only input left is the feature value's
    eval after its replay prediction (the prediction is made before the live figure exists).
    The plan reruns nothing (the DAG above plans no job)."""
    work, _ = touched
    r = snakemake(work, *WHOLE, "--dag", "--forceall")
    assert r.returncode == 0, r.stderr[-3000:]
    rule_of = dict(re.findall(r"(?m)^\s*(\d+)\[label = \"(\w+)", r.stdout))
    edges = {(rule_of[a], rule_of[b]) for a, b in re.findall(r"(\d+) -> (\d+)", r.stdout)}
    assert ("eval", "eval_no_ebm") not in edges
    assert ("eval_config", "eval_config_no_ebm") not in edges
    assert ("live_replay_features", "eval_features") in edges


def _planned_with(work: Path, **changes) -> dict[str, int]:
    overlay = work / "tiny.yaml"
    before = overlay.read_bytes()
    try:
        overlay.write_text(yaml.safe_dump({**yaml.safe_load(before), **changes}))
        return planned(work)
    finally:
        overlay.write_bytes(before)


def test_the_seed_split_keeps_a_runs_jobs_and_each_seed_reruns_only_what_it_samples(touched):
    """params.yaml `seeds` (issue 45 §1): each null is `seed`, so naming every one as `seed` reruns
    nothing (a run made before the split keeps its jobs, and so its bytes); the evals' own seed
    reruns the evals and what reads them, never a training or pool search; the benchmark's reruns
    the held-out sets and what is decontaminated against them or evaluated on them, not the pool."""
    work, whole = touched
    seed = yaml.safe_load((work / "tiny.yaml").read_bytes()).get("seed", 0)
    same = {k: seed for k in ("data", "benchmark", "train", "search")}
    assert _planned_with(work, seeds=same) == {}
    search = _planned_with(work, seeds={**same, "search": seed + 7})
    assert {"eval", "eval_longer", "eval_baseline", "compare"} <= set(search)
    assert not {"sft", "base_model", "ebm_train_config", "search_shard", "search_noise_shard",
                "proplogic_benchmark_split", "tactic_pairs"} & set(search)  # fmt: skip
    assert search["eval"] == whole["eval"]
    bench = _planned_with(work, seeds={**same, "benchmark": seed + 7})
    assert bench["proplogic_benchmark_split"] == whole["proplogic_benchmark_split"] - 1  # not valid
    assert {"tactic_pairs", "eval"} <= set(bench)  # decontaminated against test; evaluated on it
