"""The compute comparison's target (rule compute_report, results/compute.md): planned on the tiny
workflow, it searches every later iteration's pool again with iteration 0's model and no value
model; the default target plans none of it (the demo's jobs do not change)."""

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
def plans(tmp_path_factory, make_tiny_repo, run_snakemake) -> tuple[dict, dict]:
    work = make_tiny_repo(tmp_path_factory.mktemp("compute") / "w", iterations=ITERATIONS)
    out = []
    for target in (["results/compute.md"], []):
        r = run_snakemake(work, "-n", *target)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        out.append(planned(r.stdout + r.stderr))
    return out[0], out[1]


def test_the_target_plans_a_search_only_control_per_later_iteration(plans):
    compute, _ = plans
    shards = {j["output"]: j for j in compute["search_only_shard"]}
    assert sorted(shards) == [
        f"results/iter_{i}/search_only/shard_0/manifest.json" for i in range(1, ITERATIONS)
    ]
    for i in range(1, ITERATIONS):
        job = shards[f"results/iter_{i}/search_only/shard_0/manifest.json"]
        # iteration 0's model, iteration i's own pool, no value model
        assert job["input"].split(", ") == [
            "models/iter_0/merged",
            f"results/iter_{i}/search_pool.jsonl",
        ]
    (report,) = compute["compute_report"]
    assert report["output"] == "results/compute.json, results/compute.md"
    inputs = report["input"].split(", ")
    assert inputs == [
        *(f"results/iter_{i}/search/manifest.json" for i in range(ITERATIONS)),
        *(f"results/iter_{i}/search_only/manifest.json" for i in range(1, ITERATIONS)),
        *(f"models/iter_{i}/adapter" for i in range(ITERATIONS)),
    ]
    # the last iteration's own search too, which the default target does not build
    searched = {j["output"] for j in compute["search_shard"]}
    assert f"results/iter_{ITERATIONS - 1}/search/shard_0/manifest.json" in searched


def test_the_default_target_plans_none_of_it(plans):
    _, default = plans
    assert not {"search_only_shard", "search_only", "compute_report"} & default.keys()
    searched = {j["output"] for j in default["search_shard"]}
    assert f"results/iter_{ITERATIONS - 1}/search/shard_0/manifest.json" not in searched


def test_an_iteration_0_control_is_no_job(make_tiny_repo, run_snakemake, tmp_path: Path):
    """Iteration 0's control is iteration 0's search itself: no rule makes another."""
    work = make_tiny_repo(tmp_path / "w")
    r = run_snakemake(work, "-n", "results/iter_0/search_only/manifest.json")
    out = r.stdout + r.stderr
    assert r.returncode != 0
    assert "Missing input files for rule search_only:" in out
    assert "results/iter_0/search_only/shard_0/manifest.json" in out
