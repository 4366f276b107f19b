"""The eval and report rules run for real under Snakemake (shims, branch() inputs, outputs): the
baseline and iteration-0 evals of a tiny model through burnqed's propositional REPL, then the
iteration-0 report.  Only these rules are allowed, so the model and benchmark are given, not built."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from burnqed.config import ProplogicConfig
from burnqed.data.benchmarks import build_proplogic_benchmark
from burnqed.policy.tiny import build_tiny_model
from burnqed.theorems import read_theorems
from tests import snakemake_cli
from tests.snakemake_cli import SNAKEMAKE

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SMALL = {
    "lean": {"workers": 1},
    "search": {"concurrency": 2, "timeout_s": 30, "batch_generate_size": 4},
    "eval": {"budgets": [2, 4], "num_candidates": 2, "benchmark": "proplogic_test"},
}


# ~1 minute on a busy 2-core machine (three jobs, each starting torch and a REPL); the stage code is
# covered by tests/eval/test_eval.py and the DAG by the dry runs of tests/workflow.
@pytest.mark.slow
def test_eval_and_report_rules_run_under_snakemake(tmp_path):
    work = tmp_path / "w"
    work.mkdir()
    for name in ("Snakefile", "params.yaml"):
        shutil.copy(REPO / name, work / name)
    for name in ("rules", "workflow", "config"):
        shutil.copytree(REPO / name, work / name)
    (work / "burnqed").symlink_to(REPO / "burnqed")
    (work / "small.yaml").write_text(yaml.safe_dump(SMALL), encoding="utf-8")
    cfg = ProplogicConfig(theorems=30, max_depth=2, test_theorems=3)
    (bench,) = build_proplogic_benchmark(out_dir=work / "data/benchmarks", cfg=cfg, seed=0,
                                         splits=["test"])  # fmt: skip
    corpus = [t.formal_statement for t in read_theorems(bench)] + ["intro h", "exact h"]
    build_tiny_model(work / "models/base", corpus, vocab_size=300, hidden_size=64, heads=2)
    shutil.copytree(work / "models/base", work / "models/iter_0/merged")
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")
    r = snakemake_cli.run(
        # Options taking several values end at the next option: the target goes first.
        [SNAKEMAKE, "results/iter_0/report", "--cores", "2", "--allowed-rules", "eval_baseline",
         "eval", "report", "--configfile", "config/demo.yaml", "small.yaml"],
        cwd=work, env=env, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-6000:]
    base = json.loads((work / "results/baseline/eval.json").read_text())
    it0 = json.loads((work / "results/iter_0/eval.json").read_text())
    for e, label in ((base, "baseline"), (it0, "iter_0")):
        assert e["label"] == label and e["status"]["label"] == "complete 3/3"
        assert [b["budget"] for b in e["by_budget"]] == [2, 4]
        assert e["provenance"]["config"]["search"]["max_nodes"] == 4
        assert e["provenance"]["model"]["sha256"]  # a local directory: digested
        assert e["benchmark"]["name"] == "proplogic" and e["provenance"]["ebm"] is None
    assert base["previous"] is None and it0["previous"]["label"] == "baseline"
    md = (work / "results/iter_0/report/report.md").read_text(encoding="utf-8")
    assert md.startswith("# Report: iter_0") and "## Go/no-go:" in md
    assert (work / "results/iter_0/report/budget_curve.png").stat().st_size > 1000
    assert "complete 3/3" in (work / "logs/eval/iter_0.log").read_text(encoding="utf-8")
