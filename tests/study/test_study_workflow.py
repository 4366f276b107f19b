"""A registered study of a tiny design, for real (``pytest -m slow``): `burnqed study register`,
the commit, `burnqed study run` — a protocol-2 registration (cores, arguments, each primary's
fallback, the planned effects its rule is simulated at), three seeds, two at a time
(``--parallel 2``), each a Snakemake run in its own directory — and the report: per-seed and pooled figures, Holm, sign agreement,
labelled confirmatory; its looks go into the ledger and the study stays confirmatory.  The three
seeds cost 4.8–5.2 CPU-minutes (user + sys, the base model most of each seed): about 4 minutes on
2 idle cores one at a time; measured on the shared 2-core machine, 9.0 minutes of wall at a load
average of ~5, 14.5 at ~10."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.workflow.conftest import make_repo, tiny_env
from tests.workflow.loops import LOOP

# The shrunken loop's data and training (tests/workflow/loops.py), smaller: 8 benchmark theorems,
# a base model of 60 steps, one iteration.  Iteration 0 against the base model and iteration 0's
# doubled search against it are the two primaries (the same code as any comparison's).
OVERRIDES = {
    "iterations": 1,
    "data": {**LOOP["data"], "proplogic": {**LOOP["data"]["proplogic"], "test_theorems": 8}},
    "lean": LOOP["lean"],
    "model": {"tiny": {**LOOP["model"]["tiny"], "steps": 60, "warmup_steps": 5}},
    "sft": LOOP["sft"],
    "search": LOOP["search"],
    "eval": {"budgets": [2, 4]},
}
TARGETS = ["results/baseline/eval.json", "results/iter_0/eval.json",
           "results/iter_0/eval_longer.json"]  # fmt: skip
REGISTRATION = {
    "study": "tiny",
    "protocol": 2,
    "description": "the study machinery on a tiny design (tests/study/test_study_workflow.py)",
    "design": {"configfiles": ["params.yaml", "config/demo.yaml", "tiny.yaml"], "overrides": {},
               "targets": TARGETS, "cores": 2, "snakemake_args": []},
    "comparisons": {
        "primary": [
            {"name": "iteration 0 vs the base model", "treatment": "results/iter_0/eval.json",
             "control": "results/baseline/eval.json", "budget": 4, "varies": "model",
             "fallback": {"difference": 0, "why": "a stopped iteration 0 ships the base model"}},
            {"name": "search x2 vs iteration 0", "treatment": "results/iter_0/eval_longer.json",
             "control": "results/iter_0/eval.json", "budget": [4, 8], "varies": "budget",
             "fallback": {"difference": 0, "why": "a stopped iteration 0 has neither"}},
        ],
        "secondary": [
            {"name": "iteration 0 vs the base model at 2 nodes",
             "treatment": "results/iter_0/eval.json", "control": "results/baseline/eval.json",
             "budget": 2, "varies": "model"},
        ],
    },
    "analysis": {"alpha": 0.05, "test": "hartung-knapp", "seeds": 3,
                 "power": {"from": "made up: the test checks the machinery, not an effect",
                           "comparisons": [
                               {"name": "iteration 0 vs the base model", "mean": 0.5,
                                "sd_planned": 0.05},
                               {"name": "search x2 vs iteration 0", "mean": 0.5,
                                "sd_planned": 0.05}]},
                 "decision": {"rule": "each primary: Holm-adjusted p < alpha, estimate > 0",
                              "every_seed_positive": False}},
}  # fmt: skip


def burnqed(repo: Path, *args: str, timeout: float = 3300) -> subprocess.CompletedProcess:
    env = tiny_env(PYTHONPATH=str(repo))  # the repository's burnqed (a link to this checkout's)
    r = subprocess.run([sys.executable, "-m", "burnqed.cli", *args], cwd=repo, env=env,
                       capture_output=True, text=True, timeout=timeout)  # fmt: skip
    assert r.returncode == 0, (args, r.stdout[-3000:], r.stderr[-3000:])
    return r


@pytest.mark.slow
@pytest.mark.timeout(3600)  # a loaded machine; idle: minutes (the docstring)
def test_a_registered_study_runs_three_seeds_and_reports_them(tmp_path):
    repo = make_repo(tmp_path / "repo", profiles=True, link_code=True, **OVERRIDES)
    reg = repo / "studies/tiny/registration.yaml"
    reg.parent.mkdir(parents=True)
    reg.write_text(yaml.safe_dump(REGISTRATION, sort_keys=False), encoding="utf-8")
    burnqed(repo, "study", "register", str(reg.relative_to(repo)))
    registered = yaml.safe_load(reg.read_text())
    assert {"base_model", "sft", "merge", "eval", "eval_longer"} <= set(
        registered["design"]["rules"]
    )
    for cmd in (["git", "add", "-A"], ["git", "commit", "-qm", "Register the tiny study"]):
        subprocess.run(cmd, cwd=repo, env=tiny_env(), check=True, capture_output=True)
    seeds = [int(s) for s in burnqed(repo, "study", "seeds", str(reg)).stdout.split()]
    assert len(seeds) == 3

    start = time.monotonic()
    # Two seeds at once, each Snakemake with 2 cores (the third when one ends).
    out = burnqed(repo, "study", "run", "studies/tiny/registration.yaml", "--cores", "2",
                  "--parallel", "2").stdout  # fmt: skip
    print(f"study_wall_s={time.monotonic() - start:.0f}")
    r = json.loads((reg.parent / "report.json").read_text())
    failed = [c for c in r["checks"] if not c["ok"]]
    assert "study tiny: confirmatory" in out and not failed, (out, failed)
    assert r["label"] == "confirmatory"
    assert r["seeds"] == sorted(seeds) and r["test"] == "hartung-knapp"
    benches = set()
    for s in seeds:
        work = reg.parent / "seeds" / f"seed_{s}"
        for f in TARGETS:
            e = json.loads((work / f).read_text())
            assert e["provenance"]["seeds"]["seed"] == s and e["look"]["seed"] == s
            benches.add(e["benchmark"]["sha256"])
    assert len(benches) == 3  # each seed its own benchmark draw
    # each seed's record: one session with its wall time and Snakemake's status; the report's cost
    for s in seeds:
        rec = json.loads((reg.parent / "seeds" / f"seed_{s}" / "study_run.json").read_text())
        (session,) = rec["sessions"]
        assert session["returncode"] == 0 and session["wall_s"] > 0 and session["finished_at"]
        assert session["parallel"] == 2
        assert r["cost"]["per_seed_wall_s"][str(s)] == session["wall_s"] / 2
    assert r["cost"]["seeds_timed"] == 3 and r["cost"]["median_wall_s"] > 0
    primaries = [c for c in r["comparisons"] if c["kind"] == "primary"]
    assert len(primaries) == 2 and len(r["comparisons"]) == 3
    for c in r["comparisons"]:
        assert [x["seed"] for x in c["per_seed"]] == sorted(seeds)
        assert all(x["theorems"] == 8 and x["verdict"] != "undecided" for x in c["per_seed"])
        p = c["pooled"]
        assert p["seeds"] == 3 and p["t_test"] and p["hartung_knapp"]
        assert p["p_value"] == p["hartung_knapp"]["p_value"]
        assert p["stratified"]["gained"] == sum(x["gained"] for x in c["per_seed"])
        assert 0 <= p["sign_agreement"]["agree"] <= 3
    assert sorted(c["holm_p"] for c in primaries)[-1] >= max(
        c["pooled"]["p_value"] for c in primaries
    )
    md = (reg.parent / "report.md").read_text()
    assert "CONFIRMATORY" in md and md.count("- Holm-adjusted p = ") == 2
    assert all(str(s) in md for s in seeds)
    assert (reg.parent / "forest.png").stat().st_size > 10_000  # per seed and pooled, drawn

    # The study's looks go into the ledger; the study stays confirmatory (they are its own).
    evals = sorted(
        str(p.relative_to(repo)) for p in (reg.parent / "seeds").rglob("results/*/eval*.json")
    )
    burnqed(repo, "ledger", "add", *evals)
    assert len((repo / "ledger/looks.jsonl").read_text().splitlines()) == 9
    assert "confirmatory" in burnqed(repo, "study", "report", str(reg)).stdout
    r = json.loads((reg.parent / "report.json").read_text())
    assert [x["in_ledger"] for x in r["looks"]["per_seed"]] == [3, 3, 3]
