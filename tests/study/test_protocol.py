"""Registration protocol 2 (issue 59): what a registration may say and what the checks see,
through the real entry points — `burnqed study register|report`, `burnqed search`, the study
runner and a study directory.  Each test names the hole it closes: a fixed seed, a look at the
same benchmark under another seed, a rule that cannot be met, a seed the design stops, a search
on a test benchmark, an unfinished study's figures, the environment, interim looks."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path

import pytest
import yaml

from burnqed.cli import main as cli_main
from burnqed.config import InputError
from burnqed.eval.ledger import look_record, read_ledger, write_ledger
from burnqed.study import registration as regfile
from burnqed.study.stage import RUN_RECORD, report
from tests.study.test_report import LOOKED, RULES, fake_snakemake, make_study, registration

REPO = Path(__file__).resolve().parents[2]
PACKAGES = {"torch": "2.13.0", "numpy": "2.4.6"}


def registration2(**analysis) -> dict:
    """The synthetic registration at protocol 2: cores, Snakemake arguments, the environment,
    each primary's fallback and planned effect (a rule met with probability ~1)."""
    reg = copy.deepcopy(registration(**analysis))
    reg["protocol"] = 2
    reg["design"].update(cores=2, snakemake_args=[], environment={"packages": PACKAGES})
    learning, value = reg["comparisons"]["primary"]
    learning["fallback"] = {"treatment": "results/iter_0/eval.json",
                            "why": "a stopped iteration 1 ships iteration 0's model"}  # fmt: skip
    value["fallback"] = {"difference": 0, "why": "no value model ships: the search is its twin"}
    reg["analysis"]["power"] = {
        "from": "made up",
        "comparisons": [{"name": "learning", "mean": 0.15, "sd_planned": 0.03},
                        {"name": "value model", "mean": 0.1, "sd_planned": 0.03}],
    }  # fmt: skip
    return reg


def workflow_files(root: Path) -> None:
    """The config files a protocol-2 runner reads (the design's seeds), from this checkout."""
    (root / "params.yaml").symlink_to(REPO / "params.yaml")
    (root / "config").symlink_to(REPO / "config")
    (root / "constraints.txt").write_text("torch==2.13.0\nnumpy==2.4.6\n")


def sessions2(path: Path, seeds: list[int], **session) -> None:
    """Each seed's study_run.json with one session as protocol 2's runner writes it."""
    for s in seeds:
        rec = path.parent / "seeds" / f"seed_{s}" / RUN_RECORD
        r = json.loads(rec.read_text())
        one = {"rules": RULES, "packages": PACKAGES, "cores": 2, "snakemake_args": [], **session}
        rec.write_text(json.dumps({**r, "sessions": [one]}))


def report_of(path: Path, root: Path, **kw) -> dict:
    """The study's report; a refusal is this test's failure, named (code without protocol 2
    refuses its registrations)."""
    try:
        return report(path, root=root, **kw)
    except InputError as e:
        raise AssertionError(f"the study's report was refused: {e}") from None


def register_cli(reg: dict, tmp_path: Path, capsys) -> tuple[int, str]:
    """`burnqed study register` of ``reg`` (its digests left for the command to write); the exit
    status and stderr, after checking that a refusal wrote nothing."""
    reg = copy.deepcopy(reg)
    for key in ("rules", "environment"):
        reg["design"].pop(key, None)
    path = tmp_path / "registration.yaml"
    path.write_text(yaml.safe_dump(reg, sort_keys=False), encoding="utf-8")
    before = path.read_bytes()
    rc = cli_main(["study", "register", str(path), "--root", str(REPO)])
    if rc != 0:
        assert path.read_bytes() == before  # nothing written
    return rc, capsys.readouterr().err


# --------------------------------------------------------------------------------------------
# Seeds


def test_a_fixed_benchmark_seed_changes_every_rules_digests_and_is_refused(tmp_path, capsys):
    """`seeds.benchmark: 0` would run every study seed on seed 0's benchmark: it changes each
    rule's `seeds` digest, and registering it — as an override or in a config file — is refused
    naming the key, before any dry run."""
    config = regfile.merged_config(REPO, {"configfiles": ["params.yaml", "config/demo.yaml"]})
    fixed = {**config, "seeds": {**(config.get("seeds") or {}), "benchmark": 0}}
    here = regfile.rule_digests(REPO, config, ["eval", "sft"])
    there = regfile.rule_digests(REPO, fixed, ["eval", "sft"])
    assert regfile.differing_rules(here, there) == ["eval", "sft"]
    assert all(here[r]["seeds"] != there[r]["seeds"] and here[r]["code"] == there[r]["code"]
               for r in ("eval", "sft"))  # fmt: skip

    reg = registration2()
    reg["design"]["overrides"] = {"seeds": {"benchmark": 0}}
    rc, err = register_cli(reg, tmp_path, capsys)
    assert rc == 2 and "design.overrides.seeds" in err

    overlay = tmp_path / "fixed.yaml"
    overlay.write_text("seeds:\n  benchmark: 0\n")
    reg = registration2()
    reg["design"]["configfiles"] = ["params.yaml", "config/demo.yaml", str(overlay)]
    rc, err = register_cli(reg, tmp_path, capsys)
    assert rc == 2 and "fixes seeds.benchmark: 0" in err


def test_protocol_2_digests_the_workflow_text_and_the_threads(tmp_path):
    """A rule's `workflow` digest covers its block and the workflow's shared text (another rule's
    block changes nothing); `threads` moves every rule's digest; protocol 1 keeps its two keys."""
    import shutil

    root = tmp_path / "repo"
    shutil.copytree(REPO / "rules", root / "rules")
    shutil.copy(REPO / "Snakefile", root / "Snakefile")
    for f in ("params.yaml", "burnqed", "workflow"):
        (root / f).symlink_to(REPO / f)
    config = regfile.merged_config(root, {"configfiles": ["params.yaml"]})
    before = regfile.rule_digests(root, config, ["eval", "sft"])
    assert set(before["eval"]) == {"code", "config", "workflow", "threads", "seeds"}
    assert set(regfile.rule_digests(root, config, ["eval"], protocol=1)["eval"]) == {
        "code", "config"}  # fmt: skip
    smk = root / "rules" / "model.smk"
    smk.write_text(smk.read_text().replace("rule sft:", "rule sft:\n    # an edit", 1))
    after = regfile.rule_digests(root, config, ["eval", "sft"])
    assert after["eval"] == before["eval"] and after["sft"]["workflow"] != before["sft"]["workflow"]
    common = root / "rules" / "common.smk"
    common.write_text(common.read_text() + "\n# an input function's neighbour\n")
    assert regfile.rule_digests(root, config, ["eval"])["eval"]["workflow"] != (
        before["eval"]["workflow"])  # fmt: skip
    hot = {**config, "threads": {**config["threads"], "train": 1}}
    assert regfile.rule_digests(root, hot, ["eval"])["eval"]["threads"] != (
        regfile.rule_digests(root, config, ["eval"])["eval"]["threads"])  # fmt: skip


# --------------------------------------------------------------------------------------------
# Looks


def test_a_look_at_the_same_benchmark_under_another_search_seed_is_found(tmp_path):
    """Freshness matches a look on benchmark content and models, not only on the seed: a look at
    a study seed's benchmark (same sha256) under another search seed makes the study
    exploratory; a look after the report was first written does not flip it."""
    path, seeds = make_study(tmp_path / "repo")
    root = tmp_path / "repo"
    assert report(path, root=root)["label"] == "confirmatory"
    probe = {"kind": "burnqed look", "seed": 999,
             "benchmark": {"name": "proplogic", "split": "test", "sha256": f"bench{seeds[1]}"},
             "design": {"model": "another", "value_model": None, "search_config": "x"},
             "looked_at": "2026-01-15T00:00:00+00:00", "label": "a development probe"}  # fmt: skip
    write_ledger(root / "ledger/looks.jsonl", [probe])
    (path.parent / "report.json").unlink()  # the report as first written, before the probe
    r = report(path, root=root)
    bad = [c for c in r["checks"] if not c["ok"]]
    assert r["label"] == "exploratory" and [c["check"] for c in bad] == ["fresh seeds"]
    assert f"sha256 bench{seeds[1]}"[:19] in bad[0]["detail"] and "seed 999" in bad[0]["detail"]
    # the same model on another benchmark is a look at it too
    other = {**probe, "benchmark": {**probe["benchmark"], "sha256": "elsewhere"},
             "design": {**probe["design"], "model": "m1"}}  # fmt: skip
    write_ledger(root / "ledger/looks.jsonl", [other])
    (path.parent / "report.json").unlink()
    assert report(path, root=root)["label"] == "exploratory"
    # written before the probe, the report stays confirmatory when it is regenerated
    write_ledger(root / "ledger/looks.jsonl", [])
    first = report(path, root=root)
    assert first["label"] == "confirmatory" and first["first_written_at"]
    later = {**probe, "looked_at": "2099-01-01T00:00:00+00:00"}
    write_ledger(root / "ledger/looks.jsonl", [later])
    again = report(path, root=root)
    assert again["label"] == "confirmatory" and again["first_written_at"] == first[
        "first_written_at"]  # fmt: skip


def test_a_search_on_a_test_benchmark_writes_a_look(tmp_path, monkeypatch, repo_root):
    """`burnqed search` on a confirmation benchmark (its .meta.json says proplogic test) records
    its look: look.json beside the trajectories and a record in the ledger; a theorem file of no
    confirmation role records none."""
    from burnqed.theorems import write_theorems
    from tests.search.fakes import RandomToyPolicy, ToyEnv, toy_theorems
    from tests.search.test_stage import _fake_backends

    monkeypatch.chdir(tmp_path)  # the default ledger, ledger/looks.jsonl, is the checkout's
    ledger = tmp_path / "ledger" / "looks.jsonl"

    def search(theorems: Path, out: str) -> int:
        with _fake_backends(monkeypatch, RandomToyPolicy(seed=4), ToyEnv()):
            return cli_main(["search", "--params", str(repo_root / "params.yaml"), "--theorems",
                             str(theorems), "--model", "models/x", "--out", str(tmp_path / out),
                             "--max-nodes", "5"])  # fmt: skip

    bench = tmp_path / "proplogic_test.jsonl"
    write_theorems(bench, toy_theorems(4, seed=1, low=2, high=4))
    bench.with_suffix(".meta.json").write_text(json.dumps({"benchmark": "proplogic",
                                                           "split": "test"}))  # fmt: skip
    assert search(bench, "on_test") == 0
    looks = read_ledger(ledger)
    assert len(looks) == 1, "a search of a confirmation benchmark recorded no look"
    (look,) = looks
    assert look["benchmark"]["name"] == "proplogic" and look["benchmark"]["split"] == "test"
    assert look["counts"]["expected"] == 4 and look["label"] == "burnqed search"
    assert json.loads((tmp_path / "on_test" / "look.json").read_text())["seed"] == look["seed"]

    pool = tmp_path / "proplogic_valid.jsonl"
    write_theorems(pool, toy_theorems(4, seed=2, low=2, high=4))
    pool.with_suffix(".meta.json").write_text(json.dumps({"benchmark": "proplogic",
                                                          "split": "valid"}))  # fmt: skip
    assert search(pool, "on_pool") == 0
    assert len(read_ledger(ledger)) == 1 and not (tmp_path / "on_pool" / "look.json").exists()


def test_a_partial_report_without_the_flag_is_refused_and_an_unblinding_is_recorded(
    tmp_path, capsys
):
    """An unfinished study's figures: refused without --unblind (one line, nothing written);
    with it, written and recorded; the final report of a protocol-2 study then fails its 'blind
    until the end' check."""
    for reg, root in ((registration(), tmp_path / "p1"), (registration2(), tmp_path / "p2")):
        path, seeds = make_study(root, reg)
        sessions2(path, seeds)
        third = path.parent / "seeds" / f"seed_{seeds[2]}" / "results/iter_1/eval.json"
        kept = third.read_bytes()
        third.unlink()
        args = ["study", "report", str(path), "--root", str(root)]
        assert cli_main(args) == 2, "an unfinished study's figures were written without --unblind"
        err = capsys.readouterr().err
        assert "--unblind" in err and "2 of 3 registered seeds" in err
        assert not (path.parent / "report.json").exists()
        assert cli_main([*args, "--unblind"]) == 0
        (u,) = [json.loads(x) for x in (path.parent / "unblindings.jsonl").read_text().splitlines()]
        assert u["seeds"] == 2 and u["registered"] == 3
        third.write_bytes(kept)
    r = report_of(path, root)
    bad = [c for c in r["checks"] if not c["ok"]]
    assert [c["check"] for c in bad] == ["blind until the end"] and r["label"] == "exploratory"
    assert "Interim figures were read" in (path.parent / "report.md").read_text()


# --------------------------------------------------------------------------------------------
# Rules that can be met


def test_an_every_seed_rule_is_refused_for_its_simulated_probability(tmp_path, capsys):
    """Registration simulates the whole rule: every seed positive on 29 seeds at the learning
    study's value primary (mean 0.83 points, SD 1.38) is met with probability ~1e-4 — refused,
    naming analysis.decision and the probability, nothing written; the same effect without the
    every-seed gate is met often enough to register."""
    reg = registration2(seeds=29)
    reg["analysis"]["power"]["comparisons"] = [
        {"name": "learning", "mean": 0.03, "sd_planned": 0.01},
        {"name": "value model", "mean": 0.0083, "sd_planned": 0.0138},
    ]
    reg["analysis"]["decision"]["every_seed_positive"] = True
    rc, err = register_cli(reg, tmp_path, capsys)
    assert rc == 2 and "analysis.decision" in err and "probability" in err
    assert "every_seed_positive" in err
    got = float(err.split("probability ")[1].split()[0])
    assert got < 0.01
    reg["analysis"]["decision"]["every_seed_positive"] = False
    reg["analysis"]["power"]["comparisons"][1] = {"name": "value model", "mean": 0.02,
                                                  "sd_planned": 0.0138}  # fmt: skip
    r = regfile.rule_probability(reg)
    assert r["met"] > 0.9 and r["per_primary"]["value model"] > 0.9


def test_the_rules_probability_accounts_for_stopped_seeds_at_their_fallback():
    """A stopped seed stands at its fallback in the simulation: a value primary whose stopped
    seeds count d = 0 has a lower probability than without stops."""
    reg = registration2(seeds=12)
    reg["analysis"]["power"]["comparisons"][1] = {"name": "value model", "mean": 0.012,
                                                  "sd_planned": 0.015}  # fmt: skip
    from burnqed.study.planning import simulate_rule

    def chance() -> float:
        return simulate_rule(regfile.planned(reg), alpha=0.05, seeds=12,
                             every_seed_positive=False)["per_primary"]["value model"]  # fmt: skip

    none = chance()
    reg["analysis"]["power"]["abort_rate"] = 0.3
    reg["analysis"]["power"]["comparisons"][0]["fallback_mean"] = 0.0
    stopped = chance()
    assert stopped < none - 0.05


# --------------------------------------------------------------------------------------------
# Aborted seeds


def test_a_stopped_seed_counts_at_its_registered_fallback(tmp_path):
    """The registered fallback is the primary analysis: the stopped seed's iteration-0 eval
    stands for iteration 1 (learning: d of iter_0 against iter_0, 0 here), the value primary's
    d = 0; the seeds that finished and the stopped one at d = 0 are beside it."""
    path, seeds = make_study(tmp_path / "repo", registration2())
    sessions2(path, seeds)
    stopped = path.parent / "seeds" / f"seed_{seeds[1]}"
    for f in ("results/iter_1/eval.json", "results/iter_1/eval_no_ebm.json"):
        (stopped / f).unlink()
    rec = json.loads((stopped / RUN_RECORD).read_text())
    rec["aborted"] = {"error": "burnqed.train.joint.JointTrainingError", "reason": "collapse",
                      "at": LOOKED}  # fmt: skip
    (stopped / RUN_RECORD).write_text(json.dumps(rec))
    r = report_of(path, tmp_path / "repo")
    assert r["label"] == "confirmatory", [c for c in r["checks"] if not c["ok"]]
    learning, value = (c for c in r["comparisons"] if c["kind"] == "primary")
    for c in (learning, value):
        assert c["analysis"] == "fallback" and c["pooled"]["seeds"] == 3
        (fb,) = c["fallback_rows"]
        assert fb["seed"] == seeds[1] and fb["difference"] == 0.0
        assert c["finished_only"]["seeds"] == 2 and c["sensitivity"]["aborted_at_zero"] == 1
    assert learning["fallback_rows"][0]["fallback"] == "results/iter_0/eval.json"
    assert value["fallback_rows"][0]["fallback"] == "difference 0"
    finished = [x["difference"] for x in learning["per_seed"]]
    assert learning["pooled"]["estimate"] == pytest.approx(sum(finished) / 3)
    md = (path.parent / "report.md").read_text()
    assert f"{seeds[1]} (fallback)" in md and "the 2 seeds that finished only" in md
    # A fallback file that is missing fails the check that every stopped seed has its result.
    (stopped / "results/iter_0/eval.json").unlink()
    r = report_of(path, tmp_path / "repo")
    assert [c["check"] for c in r["checks"] if not c["ok"]] == ["fallbacks"]


def test_a_protocol_2_primary_without_a_fallback_is_refused(tmp_path):
    reg = registration2()
    del reg["comparisons"]["primary"][0]["fallback"]
    with pytest.raises(InputError, match=r"comparisons.primary\[0\].fallback: missing"):
        regfile.validate(reg, tmp_path / "r.yaml")


# --------------------------------------------------------------------------------------------
# The runner: environment, arguments, interim looks


def test_the_runner_refuses_other_packages_cores_or_arguments(tmp_path, monkeypatch):
    path, seeds = make_study(tmp_path / "repo", registration2())
    root = tmp_path / "repo"
    workflow_files(root)
    stage = fake_snakemake(tmp_path, monkeypatch, path, seeds)
    commit = "c0ffee" * 6 + "c0ff"
    monkeypatch.setattr(stage, "git_state", lambda: {"commit": commit, "dirty": False})
    for f in (path.parent / "seeds").glob("seed_*/stash/*/eval*.json"):
        e = json.loads(f.read_text())
        e["provenance"]["git_commit"] = commit
        f.write_text(json.dumps(e))
    monkeypatch.setattr(
        regfile, "environment", lambda root: {"packages": {**PACKAGES, "torch": "2.14.1"}}
    )
    with pytest.raises(InputError, match=r"torch 2.14.1 \(registered 2.13.0\)"):
        stage.run(path, root=root)
    monkeypatch.setattr(regfile, "environment", lambda root: {"packages": PACKAGES})
    with pytest.raises(InputError, match=r"--cores 4: the registration's design\.cores is 2"):
        stage.run(path, root=root, cores=4)
    with pytest.raises(InputError, match="--snakemake-arg --config x=1: not in"):
        stage.run(path, root=root, snakemake_args=["--config", "x=1"])
    assert not any((path.parent / "seeds").glob("seed_*/fake.json"))  # no seed ran
    r = stage.run(path, root=root, snakemake_args=["--keep-going"])
    assert r["label"] == "confirmatory", [c for c in r["checks"] if not c["ok"]]
    rec = json.loads((path.parent / "seeds" / f"seed_{seeds[0]}" / RUN_RECORD).read_text())
    assert rec["sessions"][0]["packages"] == PACKAGES and rec["sessions"][0]["cores"] == 2
    # the study's looks are in the ledger, merged by the runner itself
    assert len(read_ledger(root / "ledger/looks.jsonl")) == 9


def test_interim_looks_show_only_decisions_and_stop_the_study(tmp_path, monkeypatch):
    """Looks at 3 and 6 of 6 seeds: at the interim look the runner records per primary only the
    decision (no estimate), every primary crosses its boundary, the study stops — no fourth seed
    starts — and the report analyses the 3 seeds of the look with its stage-wise p."""
    from burnqed.study.sequential import SequentialDesign

    reg = registration2(seeds=6)
    reg["analysis"]["sequential"] = {"looks": [3, 6], "futility": True}
    design = SequentialDesign(looks=(3, 6), alpha=0.025, scale=0.01)  # every look crosses
    reg["analysis"]["sequential"]["design"] = design.to_dict()
    path, seeds = make_study(tmp_path / "repo", reg)
    all_seeds = regfile.derive_seeds(subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=tmp_path / "repo", capture_output=True,
        text=True).stdout.strip(), 6)  # fmt: skip
    for s in all_seeds[3:]:  # three more seeds' evals, like the first three's
        d = path.parent / "seeds" / f"seed_{s}"
        for f in ("results/iter_0/eval.json", "results/iter_1/eval.json",
                  "results/iter_1/eval_no_ebm.json"):  # fmt: skip
            src = json.loads((path.parent / "seeds" / f"seed_{seeds[0]}" / f).read_text())
            src["provenance"]["seeds"]["seed"] = s
            src["benchmark"]["sha256"] = f"bench{s}"
            src["look"] = look_record(src, looked_at=LOOKED)
            (d / f).parent.mkdir(parents=True, exist_ok=True)
            (d / f).write_text(json.dumps(src))
        (d / RUN_RECORD).write_text("{}")
    workflow_files(tmp_path / "repo")
    stage = fake_snakemake(tmp_path, monkeypatch, path, all_seeds)
    monkeypatch.setattr(regfile, "environment", lambda root: {"packages": PACKAGES})
    r = stage.run(path, root=tmp_path / "repo")
    state = json.loads((path.parent / "seeds" / "sequential.json").read_text())
    (look,) = state["looks"]
    assert look["count"] == 3 and set(look["decisions"].values()) == {"stop for efficacy"}
    assert set(look) == {"count", "seeds", "at", "decisions"}  # no estimate at a look
    assert state["stopped"]["count"] == 3
    ran = [s for s in all_seeds if (path.parent / "seeds" / f"seed_{s}" / "fake.json").exists()]
    assert len(ran) == 3
    for c in (c for c in r["comparisons"] if c["kind"] == "primary"):
        sq = c["sequential"]
        assert sq["stopped_at"] == 1 and sq["seeds"] == 3 and c["pooled"]["decides"] == "sequential"
        assert c["pooled"]["p_value"] == sq["p_value"]
    assert r["partial"] is None
    assert "sequential (decides)" in (path.parent / "report.md").read_text()
    from burnqed.report.docs import study_headline

    assert ("The study stopped at its interim look 1, on 3 of 6 seeds (stop for efficacy): each "
            "primary's estimate, repeated interval and p are that look's.") in study_headline(
        r, "seq")  # fmt: skip
    # The forest plot marks the sequential estimate as the deciding one, not a fixed-sample test.
    from burnqed.study.analysis import forest_rows

    for c in (c for c in r["comparisons"] if c["kind"] == "primary"):
        pooled = forest_rows(c)[len(c["per_seed"]) :]
        assert [x[0] for x in pooled] == ["sequential, look 1, 3 seeds (decides)", "t-test",
                                          "Hartung–Knapp"]  # fmt: skip
        sq = c["sequential"]
        assert pooled[0][1:] == (sq["estimate"], sq["low"], sq["high"])
        # The README's headline quotes the look's estimate and repeated interval.
        row = f"| {c['name']} | {100 * sq['estimate']:+.2f} [{100 * sq['low']:+.2f}, "
        assert row in study_headline(r, "seq")
        # Without a sequential design the registered test decides, and is drawn first.
        for test, want in [("t", ["t-test (decides)", "Hartung–Knapp"]),
                           ("hartung-knapp", ["Hartung–Knapp (decides)", "t-test"])]:  # fmt: skip
            fixed = {**c, "pooled": {**c["pooled"], "decides": test}}
            assert [x[0] for x in forest_rows(fixed)[len(c["per_seed"]) :]] == want
