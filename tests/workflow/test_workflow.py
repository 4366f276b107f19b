"""The workflow itself: lint, dry runs of every shipped config, config errors at workflow start, CLI help."""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests import snakemake_cli
from tests.snakemake_cli import SNAKEMAKE

REPO = Path(__file__).resolve().parents[2]
OVERLAYS = sorted((REPO / "config").glob("*.yaml"))


def tool_env() -> dict[str, str]:
    """This environment with the virtualenv's scripts (snakemake, burnqed) first on PATH."""
    return dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")


def snakemake(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return snakemake_cli.run([SNAKEMAKE, *args], cwd=cwd, env=tool_env(), timeout=300)


def test_a_forked_plan_is_a_fresh_processs_plan(tmp_path):
    """The tests plan through tests/snakemake_cli.py (each command a fork of a process that imported
    Snakemake): the same command in a fresh process plans the same jobs with the same log header,
    but for the date and workflow id, and for the order of the jobs, which follows the hash seed."""
    args = ["-n", "-s", str(REPO / "Snakefile"), "--directory", str(REPO),
            "--configfile", str(REPO / "config/demo.yaml")]  # fmt: skip
    env = tool_env()
    fresh = subprocess.run(
        [SNAKEMAKE, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    forked = snakemake(*args, cwd=tmp_path)  # (the server's own directory is this checkout)
    assert fresh.returncode == forked.returncode == 0, forked.stdout[-2000:] + forked.stderr

    def lines(out: str) -> list[tuple[str, ...]]:
        """Each line's words, sorted (a reason lists its files in hash order), lines sorted."""
        drop = re.compile(r"^\s*(Date|Workflow ID): |^\[\w{3} \w{3} +\d+ [\d:]+ \d{4}\]$")
        return sorted(tuple(sorted(re.split(r"[,;]?\s+", line.strip())))
                      for line in out.splitlines() if not drop.match(line))  # fmt: skip

    assert lines(forked.stdout) == lines(fresh.stdout)
    assert lines(forked.stderr) == lines(fresh.stderr)
    assert "Job stats:" in forked.stdout and f"Run directory: {tmp_path}" in forked.stdout


def test_lint_is_clean():
    r = snakemake("--lint")
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("overlay", [None, *OVERLAYS], ids=lambda o: o.name if o else "params.yaml")
def test_dry_run_of_every_shipped_config(overlay, tmp_path):
    args = ["-n", "--quiet", "rules", "--directory", str(REPO)]
    if overlay:
        args += ["--configfile", str(overlay)]
    r = snakemake(*args)
    assert r.returncode == 0, r.stdout + r.stderr


def test_invalid_params_stop_the_workflow_naming_the_key(tmp_path):
    params = yaml.safe_load((REPO / "params.yaml").read_text(encoding="utf-8"))
    params["search"]["max_nodes"] = -5
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(params, allow_unicode=True), encoding="utf-8")
    r = snakemake("-n", "--configfile", str(bad))
    assert r.returncode != 0
    assert "search.max_nodes: -5 is less than the minimum of 1" in r.stdout + r.stderr


def test_cli_help_lists_the_subcommands():
    r = subprocess.run(
        [sys.executable, "-m", "burnqed.cli", "--help"], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    from burnqed.cli import COMMANDS

    for name in COMMANDS:
        assert name in r.stdout
    assert set(COMMANDS) >= {"data", "search"}


@pytest.mark.parametrize("profile", ["local", "gpu"])
def test_dry_run_with_each_machine_profile(profile):
    # (The slurm profile needs snakemake-executor-plugin-slurm: tests/workflow/test_profiles.py.)
    args = ["-n", "--profile", f"workflow/profiles/{profile}"]
    if profile == "local":
        args += ["--configfile", "config/demo.yaml"]
    r = snakemake(*args)
    assert r.returncode == 0, r.stdout + r.stderr


def test_minif2f_benchmark_through_the_workflow(tmp_path, minif2f_path):
    """Offline: `burnqed data fetch minif2f --from FILE`, then Snakemake builds the pinned splits."""
    for name in ("Snakefile", "params.yaml"):
        shutil.copy(REPO / name, tmp_path / name)
    for name in ("rules", "workflow"):
        shutil.copytree(REPO / name, tmp_path / name)
    env = tool_env()
    fetch = subprocess.run(
        [sys.executable, "-m", "burnqed.cli", "data", "fetch", "minif2f", "--from", str(minif2f_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert fetch.returncode == 0, fetch.stderr
    targets = ["data/benchmarks/minif2f_test.jsonl", "data/benchmarks/minif2f_valid.jsonl"]
    r = snakemake("--cores", "1", *targets, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "fetch_benchmark" not in r.stdout + r.stderr  # the local copy was used, not downloaded
    for target in targets:
        rows = (tmp_path / target).read_text(encoding="utf-8").splitlines()
        assert len(rows) == 244
        meta = json.loads((tmp_path / target.replace(".jsonl", ".meta.json")).read_text())
        assert meta["rows"] == 244
        assert meta["source_sha256"] == (
            "d6654c88476ff14db19d57dea25bd955a240525fb52171e460f89d98f83d7dd5"
        )


def test_later_iterations_and_the_baseline_resolve(tmp_path):
    """SFT of iteration 2 needs adapter 1 and every earlier search; the baseline searches models/base."""
    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    r = snakemake("-n", "-s", str(REPO / "Snakefile"), "--directory", str(tmp_path),
                  "--configfile", str(REPO / "config" / "demo.yaml"), "--",
                  "models/iter_2/adapter", "results/baseline/search/manifest.json")  # fmt: skip
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    stats = dict(
        (line.split()[0], int(line.split()[1]))
        for line in out.split("Job stats:")[1].splitlines()[2:]
        if len(line.split()) == 2 and line.split()[1].isdigit()
    )
    assert stats["sft"] == 3 and stats["merge"] == 2 and stats["search_shard"] == 2
    assert stats["search_baseline_shard"] == 1 and stats["search_noise_shard"] == 1
    blocks = out.split("rule ")
    sft2 = next(b for b in blocks if b.startswith("sft:") and "models/iter_2/adapter" in b)
    inputs = sft2.split("input:")[1].split("\n")[0]
    for needed in ("models/iter_1/adapter", "results/iter_0/search/manifest.json",
                   "results/iter_1/search/manifest.json",
                   "results/iter_0/search_noise/manifest.json",
                   "data/benchmarks/proplogic_test.jsonl"):  # fmt: skip
        assert needed in inputs, sft2
    baseline = next(b for b in blocks if b.startswith("search_baseline_shard:"))
    assert "models/base" in baseline.split("input:")[1].split("\n")[0]


def test_each_iterations_report_reads_the_headline_of_its_iteration(tmp_path):
    """The default target's iteration reports read the headline only: iteration i's eval, the
    iteration before it (the baseline for 0), and for i >= 1 C's two twins (no EBM; the depth
    twin) and its EBM — none of the attribution set (configurations, replays, the feature value,
    EBM metrics; configuration A's twin at i = 2, iteration 1's eval_no_ebm, is C's twin of
    iteration 1 only in iteration 1's report) — the demo overlay with `iterations: 3`, planned.
    Configuration A's pairing with the previous model without a value model is its replay's and
    compare_ablations' (test_each_replay_reads_its_configurations_twin_ebm_and_policy)."""
    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    r = snakemake("-n", "-s", str(REPO / "Snakefile"), "--directory", str(tmp_path),
                  "--configfile", str(REPO / "config" / "demo.yaml"), "--config", "iterations=3",
                  "--", "results/iter_1/report", "results/iter_2/report")  # fmt: skip
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    reports = {
        b.split("output: ")[1].split("\n")[0]: set(b.split("input: ")[1].split("\n")[0].split(", "))
        for b in out.split("rule ")
        if b.startswith("report:")
    }  # fmt: skip
    for i in (1, 2):
        assert reports[f"results/iter_{i}/report"] == {
            f"results/iter_{i}/eval.json", f"results/iter_{i - 1}/eval.json",
            "results/baseline/eval.json", f"results/iter_{i}/eval_no_ebm.json",
            f"results/iter_{i}/eval_depth_twin.json", f"models/iter_{i}/ebm",
        }, i  # fmt: skip


def test_proofnet_benchmark_through_the_workflow(tmp_path):
    """Offline, from a clean copy: `burnqed data fetch proofnet --from FILE`, then Snakemake builds
    ProofNet-test (186 rows, unique keys); a modified copy is refused naming the expected hash."""
    proofnet = REPO.parent / "shared" / "data" / "proofnet" / "proofnet.jsonl"
    for name in ("Snakefile", "params.yaml"):
        shutil.copy(REPO / name, tmp_path / name)
    for name in ("rules", "workflow"):
        shutil.copytree(REPO / name, tmp_path / name)
    env = tool_env()

    def fetch(src: Path) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "burnqed.cli", "data", "fetch", "proofnet", "--from", str(src)],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip

    tampered = tmp_path / "tampered.jsonl"
    tampered.write_bytes(proofnet.read_bytes().replace(b"exercise_3_3", b"exercise_3_4", 1))
    bad = fetch(tampered)
    assert bad.returncode != 0
    assert "expected 4a4d4fd69f45d6180830f12a73adb8a7e04915f651f3fa44a2877082fe252132" in bad.stderr
    assert not (tmp_path / "data" / "raw" / "benchmarks" / "proofnet.jsonl").exists()
    assert fetch(proofnet).returncode == 0
    target = "data/benchmarks/proofnet_test.jsonl"
    r = snakemake("--cores", "1", target, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = [json.loads(line) for line in (tmp_path / target).read_text("utf-8").splitlines()]
    assert len(rows) == 186 and {r["split"] for r in rows} == {"test"}
    keys = [r.get("key", r["name"]) for r in rows]
    assert len(set(keys)) == 186 and any("@test:" in k for k in keys)
    meta = json.loads((tmp_path / target.replace(".jsonl", ".meta.json")).read_text())
    assert meta["rows"] == 186 and meta["source_sha256"].startswith("4a4d4fd6")


def _job_counts(out: str) -> dict[str, int]:
    stats = out.split("Job stats:")[1].splitlines()[2:]
    return {
        line.split()[0]: int(line.split()[1])
        for line in stats
        if len(line.split()) == 2 and line.split()[1].isdigit()
    }


# What only the `ablations` target builds (rules/common.smk attribution_files), by rule, with
# configuration A's EBM apart: joint training's warm start, the default target builds it.
ATTRIBUTION = ("sft_only", "merge_sft_only", "ebm_metrics", "ebm_metrics_config", "eval_config",
               "eval_config_no_ebm", "eval_config_depth_twin", "value_features",
               "live_replay_features", "eval_features", "replay_ebm", "replay_config",
               "compare_ablations", "summary_ablations")  # fmt: skip


@pytest.mark.parametrize(
    "overlay", [None, REPO / "config" / "demo.yaml"], ids=["params.yaml", "demo.yaml"]
)
def test_the_default_target_plans_the_headline_and_ablations_the_whole_loop(overlay, tmp_path):
    """`snakemake -n` (rule all, the default target) plans the headline: every iteration (SFT +
    merge, an EBM per later iteration, the searches that feed them), the baseline, each
    iteration's eval, the search-longer control, and per later iteration C against its two twins
    (no EBM; the depth twin), the reports, compare and summary — none of the attribution set.
    `snakemake -n ablations` plans the whole loop: the headline and, beside it, configurations A,
    S and B with their evals and twins, the replays, the feature value, the EBM metrics, and the
    attribution set's own compare and summary."""
    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    args = ["-n", "-s", str(REPO / "Snakefile"), "--directory", str(tmp_path)]
    if overlay:
        args += ["--configfile", str(overlay)]
    n = yaml.safe_load((overlay or REPO / "params.yaml").read_text())["iterations"]
    assert n == 3  # the demo runs design P4's three iterations, as params.yaml does
    plans = {}
    for target in ((), ("ablations",)):  # targets before --configfile, which takes several files
        r = snakemake(*target, *args)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        plans[target] = _job_counts(r.stdout + r.stderr)
    headline, whole = plans[()], plans[("ablations",)]
    expected = {
        "base_model": 1,
        "sft": n,
        "merge": n,
        "ebm_embed": n - 1,
        # sft.mode joint (the default): the main line's EBM is the head trained with the adapter,
        # warm-started from configuration A's EBM
        "ebm_export_joint": n - 1,
        "ebm_embed_config": n - 1,
        "ebm_train_config": n - 1,
        # every iteration's own search, the last one's too: expert iteration's steps in the
        # compute comparison (Polu's: each arm's search of the pool theorems it has not proved)
        "search_shard": n,
        "search_only_shard": n - 1,  # the search-only arm: iteration 0's model, its own pools
        "search_only": n - 1,
        "search_only_pool_select": (n - 2) or None,  # iteration 1's pool is expert iteration's own
        "compute_report": 1,
        "search_noise_shard": 1,
        "search_pool_select": n - 1,
        "eval_baseline": 1,
        "eval": n,
        "eval_longer": 1,
        # C against its two twins: without the EBM, and with the depth twin (fitted per iteration)
        "eval_no_ebm": n - 1,
        "value_depth_twin": n - 1,
        "eval_depth_twin": n - 1,
        "report": n,
        "report_cross": 1,
        "compare": 1,
        "summary": 1,
    }
    assert {k: headline.get(k) for k in expected} == expected
    assert not set(headline) & set(ATTRIBUTION), headline
    expected.update({
        "all": None,  # `ablations` takes rule all's inputs, not rule all
        "ablations": 1,
        # the value-model configurations of every iteration >= 1: A, S, B with decoupled EBMs
        # (A and S on their own models' embeddings, B on the main line's), S without its EBM
        "sft_only": n - 1,
        "merge_sft_only": n - 1,
        "ebm_embed_config": 2 * (n - 1),
        "ebm_train_config": 3 * (n - 1),
        "ebm_metrics": n - 1,
        "ebm_metrics_config": 3 * (n - 1),
        "eval_config": 3 * (n - 1),
        "eval_config_no_ebm": n - 1,
        # the depth twins of A's and S's policies (B's and C's is iteration i's)
        "eval_config_depth_twin": 2 * (n - 1),
        # the feature value (the EBM's control): fitted, replayed over eval_no_ebm, evaluated
        "value_features": n - 1,
        "live_replay_features": n - 1,
        "eval_features": n - 1,
        # each configuration's EBM replayed over its no-EBM twin's trees: C, and A, S, B
        "replay_ebm": n - 1,
        "replay_config": 3 * (n - 1),
        "compare_ablations": 1,
        "summary_ablations": 1,
    })  # fmt: skip
    assert {k: whole.get(k) for k in expected} == expected
    # The whole loop is the default target's jobs and the attribution set's: before the split
    # (cb4cd23) the default target planned 53 jobs on the demo, every one of them here but rule
    # all, beside `ablations` and its compare and summary; the compute comparison (issue 61) added
    # five to both (iteration 1's search and the search-only arm's, shard and gather each, and
    # the report): 36 and 60 at two iterations.  Design P4's third iteration adds 17 to the
    # default target (its SFT and merge, EBM, searches, evals, report; iteration 2's pools of both
    # arms) and 22 more to the attribution set (its configurations, replays, feature value).
    if overlay:
        assert (headline["total"], whole["total"]) == (36 + 17, 60 + 17 + 22)


def _planned_jobs(out: str, rule: str) -> dict[str, set[str]]:
    """Output file → input files of each job of ``rule`` in a ``snakemake -n`` plan."""
    jobs = {}
    for block in out.split(f"\nrule {rule}:\n")[1:]:
        # the job's fields are the indented lines after its rule line
        lines = itertools.takewhile(lambda line: line.startswith("    "), block.splitlines())
        fields = dict(line.strip().split(": ", 1) for line in lines)
        jobs[fields["output"]] = set(fields["input"].split(", "))
    return jobs


def test_each_replay_reads_its_configurations_twin_ebm_and_policy(tmp_path):
    """The replay prediction of each configuration reads its no-EBM twin's eval (A: iteration 0's
    eval at i = 1, i-1's eval_no_ebm at i = 2), its EBM and its policy — and not the live eval
    with the EBM (no ordering edge: the replay is a function of the twin's trees and the EBM)."""
    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    targets = ["results/iter_1/replay.json", "results/iter_1/configs/S/replay.json",
               *(f"results/iter_{i}/configs/{c}/replay.json" for i in (1, 2) for c in "AB")]  # fmt: skip
    r = snakemake("-n", "-s", str(REPO / "Snakefile"), "--directory", str(tmp_path), *targets)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    jobs = {**_planned_jobs(out, "replay_ebm"), **_planned_jobs(out, "replay_config")}
    assert set(jobs) == set(targets)
    assert jobs["results/iter_1/replay.json"] == {
        "results/iter_1/eval_no_ebm.json", "models/iter_1/ebm", "models/iter_1/merged"}  # fmt: skip
    for i, c, twin, model in [
        (1, "A", "results/iter_0/eval.json", "models/iter_0/merged"),
        (2, "A", "results/iter_1/eval_no_ebm.json", "models/iter_1/merged"),
        (1, "S", "results/iter_1/configs/S/eval_no_ebm.json", "models/iter_1/configs/S/merged"),
        (1, "B", "results/iter_1/eval_no_ebm.json", "models/iter_1/merged"),
        (2, "B", "results/iter_2/eval_no_ebm.json", "models/iter_2/merged"),
    ]:
        ebm = f"models/iter_{i}/configs/{c}/ebm"
        assert jobs[f"results/iter_{i}/configs/{c}/replay.json"] == {twin, ebm, model}, (i, c)


def test_the_last_iterations_eval_needs_every_stage_before_it(tmp_path):
    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    r = snakemake("-n", "-s", str(REPO / "Snakefile"), "--directory", str(tmp_path),
                  "results/iter_2/eval.json")  # fmt: skip
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    jobs = _job_counts(out)
    assert jobs["eval_baseline"] == 1 and jobs["eval"] == 3
    assert jobs["sft"] == jobs["merge"] == 3 and jobs["ebm_export_joint"] == 2
    # the joint head's energy weight is fitted on its held-out theorems' states, embedded by the
    # joint model (the embeddings metrics and B use too)
    assert jobs["ebm_embed"] == 2
    assert jobs["search_shard"] == 2 and jobs["search_noise_shard"] == 1


@pytest.mark.parametrize("benchmark", ["minif2f_test", "proofnet_test"])
def test_any_registered_benchmark_split_is_planned_for_evaluation(benchmark, tmp_path):
    """`eval.benchmark` names any registered split: the eval (and the decontamination of the
    training data against it) is planned from the registry's fetch and split rules."""
    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    overlay = tmp_path / "bench.yaml"
    overlay.write_text(yaml.safe_dump({"eval": {"benchmark": benchmark}}), encoding="utf-8")
    r = snakemake("-n", "-s", str(REPO / "Snakefile"), "--directory", str(tmp_path),
                  "results/iter_0/eval.json", "--configfile", str(overlay))  # fmt: skip
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    name = benchmark.split("_")[0]
    assert f"data/raw/benchmarks/{name}.jsonl" in out
    assert (
        f"data/benchmarks/{benchmark}.jsonl" in out
        and f"data/benchmarks/{benchmark}.meta.json" in out
    )
    eval_job = out.split("rule eval:")[1].split("\n\n")[0]
    assert f"data/benchmarks/{benchmark}.jsonl" in eval_job


def _plan(out: str) -> list[tuple[str, dict[str, str]]]:
    """(rule, fields) of every job of a ``snakemake -n`` plan."""
    jobs = []
    for block in re.split(r"\n(?=(?:local)?rule \w+:\n)", out)[1:]:
        rule = block.split()[1].rstrip(":")
        lines = itertools.takewhile(lambda line: line.startswith("    "), block.splitlines()[1:])
        jobs.append((rule, dict(line.strip().split(": ", 1) for line in lines)))
    return jobs


def _demo_plan(tmp_path: Path, *targets: str) -> list[tuple[str, dict[str, str]]]:
    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    # Targets before --configfile, which takes several files.
    r = snakemake(*targets, "-n", "-F", "-s", str(REPO / "Snakefile"), "--directory", str(tmp_path),
                  "--configfile", str(REPO / "config/demo.yaml"))  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return _plan(r.stdout)


def test_the_critical_path_runs_first_and_twins_wait_for_nothing_they_do_not_read(tmp_path):
    """Priorities follow the demo's critical path (rules/common.smk TIERS): each job of the chain
    data → base → iteration 0's training → its searches → A's EBM → joint training outranks any
    two jobs off it that are ready beside it; and the no-EBM twins, which read no EBM, do not wait
    for their evals with the EBM (ready first, they fill the expansion cache for them).  On the
    whole loop (`ablations`: the default target and the attribution set)."""
    jobs = _demo_plan(tmp_path, "ablations")
    prio = {(rule, f.get("wildcards", "")): int(f.get("priority", 0)) for rule, f in jobs}
    chain = [("base_model", ""), ("sft", "i=0"), ("search_shard", "i=0, shard=0"),
             ("ebm_embed_config", "i=1, c=A"), ("sft", "i=1")]  # fmt: skip
    off = [("eval_baseline", ""), ("eval_longer", "i=1"), ("sft_only", "i=1"),
           ("ebm_embed_config", "i=1, c=S"), ("eval_config", "i=1, c=A")]  # fmt: skip
    lower = [other for other in off if other != ("sft_only", "i=1")]
    for job in chain:
        assert all(prio[job] > 2 * prio[other] for other in lower), job
    assert prio[("sft", "i=1")] > prio[("sft_only", "i=1")]  # both take both cores
    inputs = {(rule, f.get("output")): set(f.get("input", "").split(", ")) for rule, f in jobs}
    twins = {"results/iter_1/eval_no_ebm.json": "results/iter_1/eval.json",
             "results/iter_1/configs/S/eval_no_ebm.json": "results/iter_1/configs/S/eval.json"}  # fmt: skip
    for (rule, output), read in inputs.items():
        if output in twins:
            assert twins[output] not in read and not any("/ebm" in p for p in read), (rule, read)
            assert prio[(rule, "i=1")] > prio[("eval", "i=1")], rule


def test_the_threads_settings_reach_the_rules_and_their_priorities(tmp_path):
    """params.yaml `threads` sets the trainings', merges' and value-model jobs' threads
    (config/demo-levers.yaml: one each but for the base model and iteration 0's SFT): the threads
    Snakemake plans for each job on 2 cores, and its priority, which ranks a one-thread job as
    one."""
    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    r = snakemake("-n", "-F", "--cores", "2", "-s", str(REPO / "Snakefile"), "--directory",
                  str(tmp_path), "--configfile", str(REPO / "config/demo.yaml"),
                  str(REPO / "config/demo-levers.yaml"))  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    jobs = _plan(r.stdout)
    threads = {(rule, f.get("wildcards", "")): int(f.get("threads", 1)) for rule, f in jobs}
    assert {job for job, n in threads.items() if n > 1} == {
        ("base_model", ""),
        ("sft", "i=0"),
        ("search_pool_select", "i=1"),
        ("search_pool_select", "i=2"),  # design P4's third iteration: both arms' pools
        ("search_only_pool_select", "i=2"),
    }
    prio = {(rule, f.get("wildcards", "")): int(f.get("priority", 0)) for rule, f in jobs}
    assert prio[("base_model", "")] == 2 * 3**8 + 1  # threads.base stays 2
    assert prio[("sft", "i=0")] == 2 * 3**7 + 1 and prio[("sft", "i=1")] == 3**6
    assert prio[("merge", "i=0")] == 3**7 and prio[("ebm_embed_config", "i=1, c=A")] == 3**6
    default = {(rule, f.get("wildcards", "")): int(f.get("priority", 0))
               for rule, f in _demo_plan(tmp_path)}  # fmt: skip
    assert default[("sft", "i=0")] == 2 * 3**7 + 1
    assert default[("ebm_embed_config", "i=1, c=A")] == 2 * 3**6 + 1


def test_a_study_seed_plans_its_five_evals_and_what_they_need(tmp_path):
    """`snakemake study_seed` on the demo (design P4: three iterations): iteration 2's eval, its
    no-EBM twin and its depth twin (with the depth twin's fit; the stronger twin is C's control),
    iteration 1's eval and its search-longer control, and what they read (A's EBM of each later
    iteration as joint training's warm start, each later iteration's depth twin as its head's
    fallback; iteration 0's and the baseline eval, each the next one's `previous`) — no
    configuration evals, replays, feature value, EBM metrics, reports, compare or the search-only
    arm."""
    counts: dict[str, int] = {}
    for rule, _ in _demo_plan(tmp_path, "study_seed"):
        counts[rule] = counts.get(rule, 0) + 1
    assert counts == {
        "proplogic_benchmark_split": 2, "tactic_pairs": 1, "search_pool": 1, "base_model": 1,
        "sft": 3, "merge": 3, "search_shard": 2, "search": 2, "search_noise_shard": 1,
        "search_noise": 1, "search_pool_select": 1, "ebm_embed_config": 2, "ebm_train_config": 2,
        "ebm_embed": 2, "ebm_export_joint": 2, "eval_baseline": 1, "eval": 3, "eval_longer": 1,
        "eval_no_ebm": 1, "value_depth_twin": 2, "eval_depth_twin": 1, "study_seed": 1,
    }  # fmt: skip
