"""rules/ebm.smk wired into the DAG: iteration 1's search takes the EBM, built from iteration 0."""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

from tests import snakemake_cli
from tests.snakemake_cli import SNAKEMAKE

REPO = Path(__file__).resolve().parents[2]


def _blocks(stdout: str) -> list[dict[str, str]]:
    """The dry run's job blocks: {"rule": ..., "input": ..., "output": ...}."""
    jobs = []
    for block in re.split(r"\n(?=rule \w+:)", stdout):
        m = re.match(r"rule (\w+):", block)
        if m:
            job = {"rule": m.group(1)}
            for key in ("input", "output"):
                found = re.search(rf"^\s+{key}: (.*)$", block, re.M)
                job[key] = found.group(1) if found else ""
            jobs.append(job)
    return jobs


def test_iteration_1_search_takes_the_ebm_of_iteration_0s_searches(tmp_path):
    for name in ("Snakefile", "params.yaml"):
        shutil.copy(REPO / name, tmp_path / name)
    for name in ("rules", "config", "workflow"):
        shutil.copytree(REPO / name, tmp_path / name)
    (tmp_path / "burnqed").symlink_to(REPO / "burnqed")  # the code digests hash the package
    env = {**os.environ, "PYTHONPATH": str(REPO),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}  # fmt: skip
    r = snakemake_cli.run(
        [SNAKEMAKE, "-n", "results/iter_1/search/manifest.json", "results/iter_1/ebm_metrics.json",
         *(f"results/iter_1/configs/{c}/ebm_metrics.json" for c in "ASB"),
         "--configfile", "config/demo.yaml"],
        cwd=tmp_path, env=env, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    jobs = {(j["rule"], j["output"]): j for j in _blocks(r.stdout)}
    search0 = jobs[("search_shard", "results/iter_0/search/shard_0/manifest.json")]
    search1 = jobs[("search_shard", "results/iter_1/search/shard_0/manifest.json")]
    assert "ebm" not in search0["input"]
    assert "models/iter_1/ebm" in search1["input"].split(", ")
    embed = jobs[("ebm_embed", "results/iter_1/embeddings/manifest.json")]
    assert set(embed["input"].split(", ")) == {
        "models/iter_1/merged",
        "results/iter_0/search/manifest.json",
        "results/iter_0/search_noise/manifest.json",
    }
    # sft.mode joint (the default): the main line's EBM is the head trained with the adapter (C) ...
    # Its energy weight is fitted on the pool decisions of theorems neither it nor its warm start
    # (A's EBM) trained on, embedded by the merged joint model; the demo (design P4, ebm.fallback:
    # depth_twin) ships the iteration's depth twin where that weight is 0.
    joint = jobs[("ebm_export_joint", "models/iter_1/ebm")]
    assert set(joint["input"].split(", ")) == {
        "models/iter_1/adapter", "models/iter_1/merged", "models/iter_1/configs/A/ebm",
        "results/iter_1/embeddings/manifest.json", "results/iter_0/search/manifest.json",
        "results/iter_0/search_noise/manifest.json", "data/benchmarks/proplogic_test.jsonl",
        "models/iter_1/depth_twin",
    }  # fmt: skip
    # ... and the decoupled EBMs of the configurations: B on the main line's embeddings, A on the
    # previous model's, S on the SFT-only model's, all from the same searches.
    b = jobs[("ebm_train_config", "models/iter_1/configs/B/ebm")]
    assert "results/iter_1/embeddings/manifest.json" in b["input"].split(", ")
    for c, model in (("A", "models/iter_0/merged"), ("S", "models/iter_1/configs/S/merged")):
        e = jobs[("ebm_embed_config", f"results/iter_1/configs/{c}/embeddings/manifest.json")]
        assert set(e["input"].split(", ")) == {
            model, "results/iter_0/search/manifest.json", "results/iter_0/search_noise/manifest.json"
        }  # fmt: skip
    metrics = [j for (rule, _), j in jobs.items() if rule == "ebm_metrics"]
    assert len(metrics) == 1 and "models/iter_1/ebm" in metrics[0]["input"]
