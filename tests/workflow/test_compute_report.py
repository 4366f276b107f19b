"""The compute comparison (rule compute_report, results/compute.md) in the default target: planned
on the tiny workflow with three iterations, each arm searches its own pool chain — expert iteration
its own searches (the last iteration's too), search only iteration 0's model on the pool theorems
it has not proved — and iteration 0's searches are both arms' first step."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

ITERATIONS = 3


def planned(out: str) -> dict[str, list[dict[str, str]]]:
    """Rule → the fields (output, input, wildcards, …) of each job in a ``snakemake -n`` plan."""
    jobs: dict[str, list[dict[str, str]]] = {}
    for block in out.split("\nrule ")[1:]:
        rule, rest = block.split(":\n", 1)
        lines = itertools.takewhile(lambda line: line.startswith("    "), rest.splitlines())
        jobs.setdefault(rule, []).append(dict(ln.strip().split(": ", 1) for ln in lines))
    return jobs


@pytest.fixture(scope="module")
def plan(tmp_path_factory, make_tiny_repo, run_snakemake) -> dict:
    """The default target's plan."""
    work = make_tiny_repo(tmp_path_factory.mktemp("compute") / "w", iterations=ITERATIONS)
    r = run_snakemake(work, "-n")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return planned(r.stdout + r.stderr)


def test_the_default_target_builds_the_comparison_of_every_iteration(plan):
    assert "compute_report" in plan, "the default target plans no compute comparison"
    (report,) = plan["compute_report"]
    assert report["output"].split(", ") == [
        "results/compute.json",
        "results/compute.md",
        "results/compute/expert_iteration.json",
        "results/compute/search_only.json",
    ]
    assert report["input"].split(", ") == [
        "data/theorems/search_pool.jsonl",
        # iteration 0's searches: both arms' first step
        "results/iter_0/search/manifest.json",
        "results/iter_0/search_noise/manifest.json",
        *(f"results/iter_{i}/search/manifest.json" for i in range(1, ITERATIONS)),
        *(f"results/iter_{i}/search_only/manifest.json" for i in range(1, ITERATIONS)),
        "models/base",
        *(f"models/iter_{i}/adapter" for i in range(ITERATIONS)),
    ]
    # the last iteration's own search too: expert iteration's last step
    searched = {j["output"] for j in plan["search_shard"]}
    assert f"results/iter_{ITERATIONS - 1}/search/shard_0/manifest.json" in searched


def test_search_only_searches_its_own_pool_chain_with_iteration_0s_model(plan):
    shards = {j["output"]: j for j in plan["search_only_shard"]}
    assert sorted(shards) == [
        f"results/iter_{i}/search_only/shard_0/manifest.json" for i in range(1, ITERATIONS)
    ]
    # iteration 1: both arms have searched only iteration 0's searches — the same pool
    assert shards["results/iter_1/search_only/shard_0/manifest.json"]["input"].split(", ") == [
        "models/iter_0/merged",
        "results/iter_1/search_pool.jsonl",
    ]
    # iteration 2: the pool theorems search only has not proved (not expert iteration's leftovers)
    assert shards["results/iter_2/search_only/shard_0/manifest.json"]["input"].split(", ") == [
        "models/iter_0/merged",
        "results/iter_2/search_only_pool.jsonl",
    ]
    (select,) = plan["search_only_pool_select"]
    assert select["output"].split(", ") == [
        "results/iter_2/search_only_pool.jsonl",
        "results/iter_2/search_only_pool.jsonl.meta.json",
    ]
    assert select["input"].split(", ") == [
        "data/theorems/search_pool.jsonl",
        "results/iter_0/search/manifest.json",
        "results/iter_0/search_noise/manifest.json",
        "results/iter_1/search_only/manifest.json",
    ]


def test_an_iteration_0_search_only_is_no_job(make_tiny_repo, run_snakemake, tmp_path: Path):
    """Iteration 0's searches are both arms' first step: no rule makes another."""
    work = make_tiny_repo(tmp_path / "w")
    r = run_snakemake(work, "-n", "results/iter_0/search_only/manifest.json")
    out = r.stdout + r.stderr
    assert r.returncode != 0
    assert "Missing input files for rule search_only:" in out
    assert "results/iter_0/search_only/shard_0/manifest.json" in out


def test_the_benchmark_comparison_evaluates_iteration_0s_model_again_outside_the_default_target(
    plan, make_tiny_repo, run_snakemake, tmp_path: Path
):
    """Part 3's secondary (burnqed.eval.benchmark_curves): rule compute_benchmark unions every
    iteration's eval against iteration 0's model evaluated again for each later iteration, with a
    salt of its own (rule eval_search_only); a study registers it, the default target has none."""
    assert "eval_search_only" not in plan and "compute_benchmark" not in plan
    work = make_tiny_repo(tmp_path / "w", iterations=ITERATIONS)
    r = run_snakemake(work, "-n", "-p", "results/compute/benchmark_expert_iteration.json")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    jobs = planned(r.stdout + r.stderr)
    (curves,) = jobs["compute_benchmark"]
    assert curves["input"].split(", ") == [
        "data/benchmarks/proplogic_test.jsonl",
        *(f"results/iter_{i}/eval.json" for i in range(ITERATIONS)),
        *(f"results/iter_{i}/eval_search_only.json" for i in range(1, ITERATIONS)),
    ]
    again = {j["output"]: j for j in jobs["eval_search_only"]}
    assert sorted(again) == [
        f"results/iter_{i}/eval_search_only.json" for i in range(1, ITERATIONS)
    ]
    for j in again.values():
        assert j["input"].split(", ")[0] == "models/iter_0/merged"
    # iteration 0's eval is both arms' first step: no search-only eval of it
    r = run_snakemake(work, "-n", "results/iter_0/eval_search_only.json")
    assert r.returncode != 0


def test_the_exported_head_waits_for_its_depth_twin_only_where_it_may_fall_back_to_it(
    plan, make_tiny_repo, run_snakemake, tmp_path: Path
):
    """``ebm.fallback: depth_twin`` (burnqed.train.joint.export_joint_ebm; the demo's, design P4):
    iteration i's head is exported beside its depth twin, which it ships where its fitted weight is
    0; with ``fallback: none`` (params.yaml's) the export does not need the twin."""
    work = make_tiny_repo(tmp_path / "w", iterations=ITERATIONS, ebm={"fallback": "none"})
    r = run_snakemake(work, "-n")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert all(
        "depth_twin" not in j["input"] for j in planned(r.stdout + r.stderr)["ebm_export_joint"]
    )
    jobs = {j["output"]: j for j in plan["ebm_export_joint"]}
    for i in range(1, ITERATIONS):
        assert f"models/iter_{i}/depth_twin" in jobs[f"models/iter_{i}/ebm"]["input"].split(", ")
