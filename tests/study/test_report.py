"""A study's report on synthetic eval JSONs: confirmatory when the run matches its committed
registration; a digest mismatch, a seed already in the ledger, a registration edited after its
commit or evals on a development split make it exploratory; per-seed and pooled figures, Holm and
sign agreement; a collapsed seed counts as 0.  The registration's checks and `burnqed study`'s
commands (register refuses what it cannot digest; power; seeds)."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
import yaml

from burnqed.cli import main as cli_main
from burnqed.config import InputError
from burnqed.eval.ledger import look_record, read_ledger, write_ledger
from burnqed.eval.paired import format_p
from burnqed.report.docs import study_brief, study_headline, study_reports
from burnqed.study import registration as regfile
from burnqed.study.stage import RUN_RECORD, power, report

RULES = {"eval": {"code": "c0de", "config": "c0f1"}, "sft": {"code": "5f70", "config": "5f71"}}
THEOREMS = [f"t{i}" for i in range(40)]
REGISTERED = "2026-01-01T00:00:00+00:00"
LOOKED = "2026-02-01T00:00:00+00:00"


def registration(**analysis) -> dict:
    return {
        "study": "synthetic",
        "description": "the statistics on made-up evals",
        "design": {
            "configfiles": ["params.yaml", "config/demo.yaml"],
            "overrides": {},
            "targets": ["results/iter_0/eval.json", "results/iter_1/eval.json",
                        "results/iter_1/eval_no_ebm.json"],
            "rules": RULES,
        },
        "comparisons": {
            "primary": [
                {"name": "learning", "treatment": "results/iter_1/eval.json",
                 "control": "results/iter_0/eval.json", "varies": "model", "budget": 4},
                {"name": "value model", "treatment": "results/iter_1/eval.json",
                 "control": "results/iter_1/eval_no_ebm.json", "varies": "value model"},
            ],
            "secondary": [],
        },
        "analysis": {"alpha": 0.05, "test": "t", "seeds": 3,
                     "power": {"from": "development seeds 0, 1, 2"},
                     "decision": {"rule": "Holm-adjusted p < α and a positive pooled estimate",
                                  "every_seed_positive": False}, **analysis},
    }  # fmt: skip


def eval_json(label, model, ebm, solved, *, seed, split="test"):
    e = {
        "kind": "burnqed eval",
        "label": label,
        "budget_factor": 1,
        "budgets": [2, 4],
        "pass_n": 1,
        "status": {"complete": True, "label": "complete", "evaluated_theorems": len(THEOREMS),
                   "expected_theorems": len(THEOREMS)},
        "by_budget": [{"budget": 4, "solved": len(solved)}],
        "per_theorem": [{"theorem": t, "evaluated": True,
                         "budget_at_proof": 1 if t in solved else None} for t in THEOREMS],
        "benchmark": {"name": "proplogic", "split": split, "sha256": f"bench{seed}"},
        "provenance": {"model": {"sha256": model}, "ebm": {"sha256": ebm} if ebm else None,
                       "seeds": {"seed": seed}, "sampling": {"temperature": 0.8},
                       "config": {"search": {"max_nodes": 4}}},
    }  # fmt: skip
    if split == "test":
        e["look"] = look_record(e, looked_at=LOOKED)
    return e


# Per seed: the theorems iter_0, iter_1 and iter_1 without its EBM solve (the third seed: C
# collapsed to its twin).
PLAN = [
    tuple({f"t{i}" for i in r} for r in row)
    for row in [(range(0, 10), range(0, 16), range(0, 12)),
                (range(0, 8), range(2, 18), range(0, 15)),
                (range(0, 12), range(1, 20), range(1, 20))]
]  # fmt: skip


def git(root: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_AUTHOR_DATE": REGISTERED,
           "GIT_COMMITTER_DATE": REGISTERED}  # fmt: skip
    subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)


def make_study(root: Path, reg: dict | None = None, *, split="test") -> tuple[Path, list[int]]:
    """A git repository with a committed registration and one directory per derived seed holding
    the compared evals and the run record a `burnqed study run` would write."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q")
    path = root / "studies/synthetic/registration.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(regfile.dump(reg or registration()), encoding="utf-8")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "register")
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                            text=True).stdout.strip()  # fmt: skip
    seeds = regfile.derive_seeds(commit, 3)
    for s, (i0, i1, twin) in zip(seeds, PLAN, strict=True):
        d = path.parent / "seeds" / f"seed_{s}"
        files = {
            "results/iter_0/eval.json": eval_json("iter_0", "m0", None, i0, seed=s, split=split),
            "results/iter_1/eval.json": eval_json("iter_1", "m1", "e1", i1, seed=s, split=split),
            "results/iter_1/eval_no_ebm.json": eval_json("iter_1 no EBM", "m1", None, twin,
                                                         seed=s, split=split),
        }  # fmt: skip
        for f, e in files.items():
            (d / f).parent.mkdir(parents=True, exist_ok=True)
            (d / f).write_text(json.dumps(e))
        (d / RUN_RECORD).write_text(json.dumps({"seed": s, "rules": RULES,
                                                "started_at": LOOKED}))  # fmt: skip
    return path, seeds


def test_a_run_that_matches_its_registration_is_confirmatory(tmp_path):
    path, seeds = make_study(tmp_path / "repo")
    r = report(path, root=tmp_path / "repo")
    assert r["label"] == "confirmatory", [c for c in r["checks"] if not c["ok"]]
    assert r["seeds"] == sorted(seeds) and all(c["ok"] for c in r["checks"])
    learning, value = r["comparisons"]
    # Per seed: gained/lost and exact McNemar; d = (b − c)/n.
    by_seed = {x["seed"]: x for x in learning["per_seed"]}
    first = by_seed[seeds[0]]
    assert (first["gained"], first["lost"], first["theorems"]) == (6, 0, 40)
    assert first["difference"] == pytest.approx(6 / 40) and first["p_value"] == pytest.approx(
        1 / 32
    )
    # The collapsed seed (C = its twin) counts as 0, never dropped.
    collapsed = {x["seed"]: x for x in value["per_seed"]}[seeds[2]]
    assert (collapsed["gained"], collapsed["lost"], collapsed["difference"]) == (0, 0, 0.0)
    assert value["pooled"]["seeds"] == 3
    # Pooled: both seed-level tests at the Bonferroni level, the count test, signs, Holm.
    p = learning["pooled"]
    assert p["level"] == pytest.approx(0.975) and p["decides"] == "t"
    assert p["t_test"]["estimate"] == pytest.approx((6 / 40 + 8 / 40 + 7 / 40) / 3)
    assert p["hartung_knapp"]["p_value"] is not None
    assert p["stratified"]["fixed_effect"] and p["stratified"]["gained"] == 6 + 10 + 8
    assert p["sign_agreement"]["agree"] == 3 and value["pooled"]["sign_agreement"]["agree"] == 2
    holm = sorted([learning["holm_p"], value["holm_p"]])
    raw = sorted([learning["pooled"]["p_value"], value["pooled"]["p_value"]])
    assert holm[0] == pytest.approx(2 * raw[0])
    assert learning["confirmed"] and not value["confirmed"]
    assert r["decision"]["verdict"] == "not met (confirmatory)"
    md = (path.parent / "report.md").read_text()
    assert "CONFIRMATORY" in md and "Holm-adjusted p" in md and "sign agreement" in md
    assert json.loads((path.parent / "report.json").read_text())["label"] == "confirmatory"
    assert (path.parent / "forest.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Each seed's benchmark was looked at by its three designs, none in the (empty) ledger.
    assert [x["designs"] for x in r["looks"]["per_seed"]] == [3, 3, 3]


def test_an_aborted_seed_is_named_counts_not_positive_and_has_a_sensitivity_analysis(tmp_path):
    """A seed the design stopped (study_run.json's ``aborted``) leaves the study whole, not
    partial: named with its reason; pooled tests on the finished seeds, "every seed positive"
    false, and the t-test with it at d = 0 beside them (Holm over the primaries); its own evals'
    looks (the baseline's too), in the ledger, keep the seeds fresh; the headline names it."""
    root = tmp_path / "repo"
    reg = registration()
    reg["analysis"]["decision"]["every_seed_positive"] = True
    path, seeds = make_study(root, reg)
    stopped = path.parent / "seeds" / f"seed_{seeds[1]}"
    shutil.rmtree(stopped / "results" / "iter_1")
    base = eval_json("baseline", "m00", None, {"t1"}, seed=seeds[1])
    (stopped / "results/baseline").mkdir()
    (stopped / "results/baseline/eval.json").write_text(json.dumps(base))
    reason = "joint step 50: held-out probe_accuracy fell to 0.529, below its red line 0.6"
    (stopped / RUN_RECORD).write_text(json.dumps({
        "seed": seeds[1], "rules": RULES, "started_at": LOOKED,
        "sessions": [{"rules": RULES, "started_at": LOOKED, "wall_s": 9.0, "returncode": 1}],
        "aborted": {"error": "burnqed.train.joint.JointTrainingError", "reason": reason,
                    "at": LOOKED}}))  # fmt: skip
    looks = [json.loads(f.read_text())["look"] for f in (path.parent / "seeds").rglob("eval*.json")]
    write_ledger(root / "ledger/looks.jsonl", looks)
    r = report(path, root=root)
    assert r["label"] == "confirmatory", [c for c in r["checks"] if not c["ok"]]
    assert r["partial"] is None and r["seeds"] == sorted({seeds[0], seeds[2]})
    assert r["aborted"] == [{"seed": seeds[1], "error": "burnqed.train.joint.JointTrainingError",
                             "reason": reason, "at": LOOKED}]  # fmt: skip
    learning, value = r["comparisons"]
    d = [x["difference"] for x in learning["per_seed"]]
    assert learning["pooled"]["seeds"] == 2 and all(x > 0 for x in d)
    assert not learning["pooled"]["every_seed_positive"]  # the aborted seed is not positive
    sens = learning["sensitivity"]
    assert sens["seeds"] == 3 and sens["aborted_at_zero"] == 1
    assert sens["estimate"] == pytest.approx(sum(d) / 3)
    raw = sorted([learning["sensitivity"]["p_value"], value["sensitivity"]["p_value"]])
    assert min(learning["sensitivity"]["holm_p"], value["sensitivity"]["holm_p"]) == (
        pytest.approx(2 * raw[0])
    )
    assert not learning["confirmed"] and r["decision"]["verdict"] == "not met (confirmatory)"
    md = (path.parent / "report.md").read_text()
    assert "**Aborted by the design** (1 of the 3 registered seeds)" in md
    assert f"- seed {seeds[1]}: {reason} (`burnqed.train.joint.JointTrainingError`)" in md
    assert "- sensitivity, the 1 aborted seed(s) at d = 0 (one-sample t-test over 3 seeds)" in md
    assert "- every seed positive: no (2 of 2 finished seeds positive; 1 aborted, counted" in md
    assert "not positive on every seed, as registered)" in md
    assert "(sign test, zeros dropped: 2 positive, 0 negative, p = 0.500)" in md
    text = study_headline(r, "synthetic")
    assert f"| {seeds[1]} | aborted (JointTrainingError, joint step 50) | aborted |" in text
    assert ": 2 seeds finished and 1 aborted of 3 registered;" in text
    assert "1 seed aborted by the design" in text and "of 3 |" in text


def test_a_digest_mismatch_makes_it_exploratory(tmp_path):
    path, seeds = make_study(tmp_path / "repo")
    rec = path.parent / "seeds" / f"seed_{seeds[1]}" / RUN_RECORD
    changed = {**RULES, "sft": {"code": "refactored", "config": "5f71"}}
    rec.write_text(json.dumps({"seed": seeds[1], "rules": changed, "started_at": LOOKED}))
    r = report(path, root=tmp_path / "repo")
    assert r["label"] == "exploratory"
    bad = [c for c in r["checks"] if not c["ok"]]
    assert [c["check"] for c in bad] == ["digests"] and "sft" in bad[0]["detail"]


# The second: a look recorded by hand (an eval from before looks were recorded), its day only;
# the final report compares it with its own first-writing time, which has an offset: it is that
# day's start (UTC), so it is checked like any other.
@pytest.mark.parametrize("looked_at", ["2025-12-01T00:00:00+00:00", "2025-12-01"])
def test_a_seed_already_in_the_ledger_makes_it_exploratory(tmp_path, looked_at):
    root = tmp_path / "repo"
    path, seeds = make_study(root)
    # Someone looked at the second seed before the study, with another design.
    early = eval_json("peek", "m9", None, {"t1"}, seed=seeds[1])
    early["look"]["looked_at"] = looked_at
    write_ledger(root / "ledger/looks.jsonl", [{**early["look"], "label": "peek"}])
    r = report(path, root=root)
    assert r["label"] == "exploratory" and r["first_written_at"] is not None
    bad = [c for c in r["checks"] if not c["ok"]]
    assert [c["check"] for c in bad] == ["fresh seeds"] and str(seeds[1]) in bad[0]["detail"]
    assert f"on {looked_at}" in bad[0]["detail"]
    assert r["looks"]["per_seed"][sorted(seeds).index(seeds[1])]["in_ledger"] == 1
    # The study's own looks, added to the ledger after it ran, do not count against it.
    own = [json.loads((path.parent / "seeds" / f"seed_{s}" / f).read_text())["look"]
           for s in seeds for f in ("results/iter_0/eval.json", "results/iter_1/eval.json")]  # fmt: skip
    write_ledger(root / "ledger/looks.jsonl", own)
    assert report(path, root=root)["label"] == "confirmatory"
    assert len(read_ledger(root / "ledger/looks.jsonl")) == 6
    # Nor does a look at another seed and benchmark, dated the same way.
    other = eval_json("peek", "m9", None, {"t1"}, seed=max(seeds) + 1)
    other["look"]["looked_at"] = looked_at
    other["look"]["benchmark"] = {**other["look"]["benchmark"], "sha256": "f" * 64}
    write_ledger(root / "ledger/looks.jsonl", [*own, {**other["look"], "label": "peek"}])
    assert report(path, root=root)["label"] == "confirmatory"


def test_an_edited_registration_or_a_development_split_is_exploratory(tmp_path):
    path, _ = make_study(tmp_path / "a")
    path.write_text(path.read_text().replace("alpha: 0.05", "alpha: 0.1"))
    r = report(path, root=tmp_path / "a")
    assert r["label"] == "exploratory"
    assert [c["check"] for c in r["checks"] if not c["ok"]] == ["registration committed"]
    path, _ = make_study(tmp_path / "b", split="dev")
    r = report(path, root=tmp_path / "b")
    assert [c["check"] for c in r["checks"] if not c["ok"]] == ["confirmation benchmark"]


def test_hartung_knapp_can_decide_and_every_seed_positive_is_a_registered_rule(tmp_path):
    path, _ = make_study(tmp_path / "repo", registration(test="hartung-knapp"))
    r = report(path, root=tmp_path / "repo")
    learning = r["comparisons"][0]
    assert learning["pooled"]["decides"] == "hartung-knapp"
    assert learning["pooled"]["p_value"] == learning["pooled"]["hartung_knapp"]["p_value"]
    reg = registration()
    reg["analysis"]["decision"]["every_seed_positive"] = True
    reg["comparisons"]["primary"][1]["name"] = "value model (every seed)"
    path, _ = make_study(tmp_path / "strict", reg)
    r = report(path, root=tmp_path / "strict")
    assert not r["comparisons"][1]["confirmed"]  # seed 3 is 0, not positive


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda r: r["analysis"].update(test="z"), "analysis.test"),
        (lambda r: r["analysis"].update(seeds=1), "analysis.seeds"),
        (lambda r: r["design"].update(overrides={"seed": 3}), "design.overrides.seed"),
        (lambda r: r["comparisons"]["primary"][0].update(varies="colour"), "varies"),
        (
            lambda r: r["comparisons"]["primary"][0].update(control="x.json"),
            "not in design.targets",
        ),
        (lambda r: r["design"].pop("rules"), "burnqed study register"),
    ],
)
def test_a_bad_registration_is_refused_naming_the_key(tmp_path, edit, message):
    reg = registration()
    edit(reg)
    path = tmp_path / "registration.yaml"
    path.write_text(yaml.safe_dump(reg), encoding="utf-8")
    with pytest.raises(InputError, match=message) as e:
        regfile.load(path)
    assert str(path) in str(e.value)


def test_seeds_come_from_the_commit_and_report_needs_a_commit(tmp_path, capsys):
    assert regfile.derive_seeds("abc", 3) == regfile.derive_seeds("abc", 3)
    assert regfile.derive_seeds("abc", 3) != regfile.derive_seeds("abd", 3)
    assert all(10_000 <= s < 100_000 for s in regfile.derive_seeds("abc", 50))
    path, seeds = make_study(tmp_path / "repo")
    root = tmp_path / "repo"
    assert cli_main(["study", "seeds", str(path), "--root", str(root)]) == 0
    assert capsys.readouterr().out.split() == [str(s) for s in seeds]
    assert cli_main(["study", "report", str(path), "--root", str(root)]) == 0
    assert "confirmatory" in capsys.readouterr().out
    # Not committed: no seeds, and `study run` refuses before running anything.
    loose = root / "loose.yaml"
    loose.write_text(path.read_text())
    assert cli_main(["study", "run", str(loose), "--root", str(root)]) == 2
    assert "not committed" in capsys.readouterr().err
    # A registration outside the --root checkout: one line naming both.
    (tmp_path / "other").mkdir()
    assert cli_main(["study", "status", str(path), "--root", str(tmp_path / "other")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith(f"{path}: not inside the checkout {tmp_path / 'other'} (--root); give the "
                        "registration of that checkout") and "\n" not in err  # fmt: skip


def test_a_withdrawn_registration_is_neither_run_nor_reported(tmp_path, capsys):
    path, _ = make_study(tmp_path / "repo")
    root = tmp_path / "repo"
    assert cli_main(["study", "report", str(path), "--root", str(root)]) == 0
    capsys.readouterr()
    written = (path.parent / "report.json").read_bytes()
    (path.parent / "WITHDRAWN.md").write_text("froze the wrong design\n")
    for verb in ("run", "report"):
        assert cli_main(["study", verb, str(path), "--root", str(root)]) == 2
        err = capsys.readouterr().err.strip()
        assert "withdrawn" in err and "WITHDRAWN.md" in err and len(err.splitlines()) == 1
    # Its seeds stay verifiable; the report it had is not touched.
    assert cli_main(["study", "seeds", str(path), "--root", str(root)]) == 0
    assert (path.parent / "report.json").read_bytes() == written


def test_register_refuses_a_design_it_cannot_digest(tmp_path, capsys):
    reg = registration()
    del reg["design"]["rules"]
    reg["design"]["configfiles"] = ["params.yaml", "config/missing.yaml"]
    path = tmp_path / "registration.yaml"
    before = yaml.safe_dump(reg)
    path.write_text(before)
    repo = Path(__file__).resolve().parents[2]
    assert cli_main(["study", "register", str(path), "--root", str(repo)]) == 2
    assert "missing.yaml" in capsys.readouterr().err
    assert path.read_text() == before  # nothing written


def test_register_writes_per_rule_digests_that_a_refactor_elsewhere_keeps(tmp_path):
    repo = Path(__file__).resolve().parents[2]
    design = registration()["design"]
    config = regfile.merged_config(repo, design)
    digests = regfile.rule_digests(repo, config, ["eval", "sft", "report"], protocol=1)
    assert set(digests) == {"eval", "sft", "report"}
    assert digests["eval"]["code"] != digests["sft"]["code"]
    specs = regfile.rule_specs(repo)
    assert specs["eval"]["script"] == "eval" and specs["eval"]["sections"] == ["lean", "policy"]
    # the seeds reach the rules through seed_of (rules/common.smk), never a lookup: no digest
    assert not {"seed", "seeds"} & set(specs["eval"]["lookups"])
    assert "split" in specs["sft"]["lookups"]
    # Protocol 1: another seed, the threads and the cache change no digest; an eval knob changes
    # eval's only.
    other = {**config, "seed": 7, "threads": {"search": 2, "eval": 2}, "cache": None}
    assert regfile.rule_digests(repo, other, ["eval", "sft", "report"], protocol=1) == digests
    hotter = {**config, "eval": {**config["eval"], "temperature": 1.3}}
    changed = regfile.rule_digests(repo, hotter, ["eval", "sft", "report"], protocol=1)
    assert changed["eval"]["config"] != digests["eval"]["config"]
    assert changed["sft"] == digests["sft"] and changed["report"] == digests["report"]
    # The Snakemake dry run finds the rules the targets need.
    rules = regfile.rules_for_targets(repo, {**design, "targets": ["results/iter_0/eval.json"]})
    assert {"eval", "sft", "merge", "base_model"} <= set(rules) and "report" not in rules


def test_power_from_development_runs(tmp_path, capsys):
    path, seeds = make_study(tmp_path / "repo")
    dirs = [path.parent / "seeds" / f"seed_{s}" for s in seeds]
    p = power(path, dirs)
    learning = p["comparisons"][0]
    assert learning["mean"] == pytest.approx((6 + 8 + 7) / 40 / 3)
    assert learning["seeds_needed"] >= 2 and p["seeds"] >= learning["seeds_needed"]
    assert cli_main(["study", "power", str(path), *map(str, dirs)]) == 0
    out = capsys.readouterr().out
    assert f"seeds={p['seeds']}" in out and "seeds_needed=" in out
    # At the study's count: power and the chance every seed is positive; a mean at or below 0 (the
    # value comparison's third seed collapsed, so its mean is lower) can need no number of seeds.
    at = learning["at_seeds"]
    assert at["seeds"] == p["seeds"] and at["power"] >= 0.8 and 0 < at["every_seed_positive"] <= 1
    assert cli_main(["study", "power", str(path), *map(str, dirs), "--seeds", "7"]) == 0
    assert "power_at_7=" in capsys.readouterr().out
    assert power(path, dirs, at_seeds=7)["comparisons"][0]["at_seeds"]["seeds"] == 7
    assert cli_main(["study", "power", str(path), *map(str, dirs), "--seeds", "1"]) == 2
    assert "--seeds 1" in capsys.readouterr().err


def test_power_gives_no_count_for_an_effect_development_puts_below_zero(tmp_path):
    """A primary confirms only with a positive pooled estimate: a negative development mean needs no
    number of seeds (None), has power 0 at any count and a small chance of every seed positive."""
    path, seeds = make_study(tmp_path / "repo")
    dirs = [path.parent / "seeds" / f"seed_{s}" for s in seeds]
    reg = regfile.load(path)
    learning = reg["comparisons"]["primary"][0]
    learning["treatment"], learning["control"] = learning["control"], learning["treatment"]
    flipped = tmp_path / "flipped.yaml"
    flipped.write_text(regfile.dump(reg), encoding="utf-8")
    p = power(flipped, dirs, at_seeds=5)
    first = p["comparisons"][0]
    assert first["mean"] < 0 and first["seeds_needed"] is None and p["seeds"] is None
    assert first["at_seeds"]["power"] == 0.0 and first["at_seeds"]["every_seed_positive"] < 0.01


def test_a_seed_the_registration_did_not_choose_makes_it_exploratory(tmp_path):
    path, seeds = make_study(tmp_path / "repo")
    seeds_dir = path.parent / "seeds"
    (seeds_dir / f"seed_{seeds[0]}").rename(seeds_dir / "seed_1")  # a seed picked by hand
    r = report(path, root=tmp_path / "repo", unblind=True)
    bad = {c["check"]: c["detail"] for c in r["checks"] if not c["ok"]}
    assert r["label"] == "exploratory" and set(bad) == {"seeds"}
    assert "seed_1/results/iter_0/eval.json was made with seed" in bad["seeds"]


def test_a_study_with_some_registered_seeds_is_partial_and_decides_nothing(tmp_path):
    """Two of three seeds finished, the third still running (its directory lacks an eval): the
    report is labelled partial, shows the two, names the third, and decides no primary."""
    path, seeds = make_study(tmp_path / "repo")
    (path.parent / "seeds" / f"seed_{seeds[2]}" / "results/iter_1/eval.json").unlink()
    r = report(path, root=tmp_path / "repo", unblind=True)
    assert r["label"] == "partial" and all(c["ok"] for c in r["checks"]), r["checks"]
    assert r["seeds"] == sorted(seeds[:2])
    assert r["partial"] == {"seeds": 2, "registered": 3, "unfinished": [seeds[2]]}
    assert r["decision"]["primaries_confirmed"] is None
    assert r["decision"]["verdict"] == "undecided (partial: 2 of 3 registered seeds)"
    assert all(c["confirmed"] is None for c in r["comparisons"] if c["kind"] == "primary")
    md = (path.parent / "report.md").read_text()
    assert "PARTIAL" in md and f"(unfinished: [{seeds[2]}])" in md
    assert md.count("**undecided (partial)**") == 2
    # A failed check still makes it exploratory, and the verdict says partial too.
    (path.parent / "seeds" / f"seed_{seeds[0]}").rename(path.parent / "seeds" / "seed_1")
    r = report(path, root=tmp_path / "repo", unblind=True)
    assert r["label"] == "exploratory"
    assert r["decision"]["verdict"] == "undecided (partial: 1 of 3 registered seeds, exploratory)"
    # No seed finished: one line, nothing written over.
    (path.parent / "seeds" / f"seed_{seeds[1]}" / "results/iter_0/eval.json").unlink()
    shutil.rmtree(path.parent / "seeds" / "seed_1")
    before = (path.parent / "report.json").read_bytes()
    with pytest.raises(InputError, match="no seed has finished yet"):
        report(path, root=tmp_path / "repo", unblind=True)
    assert (path.parent / "report.json").read_bytes() == before


def test_a_committed_report_is_the_readmes_headline_block(tmp_path):
    """``burnqed report docs`` renders studies/<name>/report.json into the block study:<name>:
    label, registration, decision, each primary pooled, one row a seed — and none for a withdrawn
    registration."""
    path, seeds = make_study(tmp_path / "repo")
    root = tmp_path / "repo"
    r = report(path, root=root)
    text = study_headline(r, "synthetic")
    assert text.startswith("**CONFIRMATORY** — study `synthetic` ([report](studies/synthetic/")
    assert f"Decision: **{r['decision']['verdict']}**" in text
    learning = r["comparisons"][0]
    first = {x["seed"]: x for x in learning["per_seed"]}[seeds[0]]
    assert f"| {seeds[0]} | +{first['gained']}/−{first['lost']}, d +15.00 |" in text
    assert f"| {learning['name']} | {100 * learning['pooled']['estimate']:+.2f} [" in text
    assert all(f"\n| {s} |" in text for s in seeds)
    assert "secondary (decides nothing)" not in text  # none registered
    # A secondary is one row of its own table: pooled, its interval, p, the seeds positive.
    two = copy.deepcopy(r)
    value = two["comparisons"][1]
    value["kind"] = "secondary"
    t = value["pooled"]["t_test"]
    row = (f"| {value['name']} | {100 * t['estimate']:+.2f} [{100 * t['low']:+.2f}, "
           f"{100 * t['high']:+.2f}] | {format_p(value['pooled']['p_value'])} | "
           f"{value['pooled']['positive']} of {len(seeds)} |")  # fmt: skip
    secondaries = study_headline(two, "synthetic").split("| secondary (decides nothing) |")[1]
    assert row in secondaries
    # Once a later study holds the headline: the same lead, no seed rows, a link to the report.
    brief = study_brief(r, "synthetic")
    lead = text.split("\n\nPer seed")[0]
    assert brief.startswith(lead + "\n\n") and "| seed |" not in brief
    assert brief.endswith("[studies/synthetic/report.md](studies/synthetic/report.md).\n")
    assert study_reports(root) == {
        "synthetic": json.loads((path.parent / "report.json").read_text())
    }
    (path.parent / "WITHDRAWN.md").write_text("wrong design\n")
    assert study_reports(root) == {}
    # Interim: says so, decides nothing.
    (path.parent / "WITHDRAWN.md").unlink()
    shutil.rmtree(path.parent / "seeds" / f"seed_{seeds[2]}")
    text = study_headline(report(path, root=root, unblind=True), "synthetic")
    assert text.startswith("**PARTIAL**") and "2 of 3 registered seeds finished, interim" in text
    assert text.count("| undecided |") == len(r["comparisons"]) - len(
        [c for c in r["comparisons"] if c["kind"] == "secondary"]
    )


def test_a_list_of_controls_takes_the_stronger_on_each_seed(tmp_path):
    """control: [log-prob twin, depth twin] — per seed the twin that solves more at the control's
    budget is the control, the last listed on a tie; the report and power name the one taken."""
    reg = registration()
    reg["design"]["targets"].append("results/iter_1/eval_depth_twin.json")
    value = reg["comparisons"]["primary"][1]
    value["control"] = ["results/iter_1/eval_no_ebm.json", "results/iter_1/eval_depth_twin.json"]
    value["budget"] = 4
    path, seeds = make_study(tmp_path / "repo", reg)
    # The depth twins: stronger than the log-prob twin on seed 0 (14 > 12), weaker on seed 1 (10 <
    # 15), tied on seed 2 (19 = 19, so the depth twin, listed last).
    depth = [set(THEOREMS[:14]), set(THEOREMS[:10]), {f"t{i}" for i in range(1, 20)}]
    for s, solved in zip(seeds, depth, strict=True):
        f = path.parent / "seeds" / f"seed_{s}" / "results/iter_1/eval_depth_twin.json"
        f.write_text(json.dumps(eval_json("iter_1 depth twin", "m1", "d1", solved, seed=s)))
    r = report(path, root=tmp_path / "repo")
    rows = {x["seed"]: x for x in r["comparisons"][1]["per_seed"]}
    taken = [rows[s]["control"].rsplit("/", 1)[1] for s in seeds]
    assert taken == ["eval_depth_twin.json", "eval_no_ebm.json", "eval_depth_twin.json"]
    # seed 0: iter_1 solves t0–t15 against the depth twin's t0–t13
    assert (rows[seeds[0]]["gained"], rows[seeds[0]]["lost"]) == (2, 0)
    # seed 1: t2–t17 against the log-prob twin's t0–t14
    assert (rows[seeds[1]]["gained"], rows[seeds[1]]["lost"]) == (3, 2)
    assert r["label"] == "confirmatory", [c for c in r["checks"] if not c["ok"]]
    md = (path.parent / "report.md").read_text()
    assert "the stronger of results/iter_1/eval_no_ebm.json and" in md
    dirs = [path.parent / "seeds" / f"seed_{s}" for s in seeds]
    per = {x["seed"]: x for x in power(path, dirs)["comparisons"][1]["per_seed"]}
    assert [per[s]["difference"] for s in seeds] == [rows[s]["difference"] for s in seeds]


@pytest.mark.parametrize(
    ("control", "message"),
    [
        (["results/iter_1/eval_no_ebm.json"], "two or more"),
        (["results/iter_1/eval_no_ebm.json"] * 2, "listed twice"),
        (["results/iter_1/eval_no_ebm.json", "x.json"], "x.json is not in design.targets"),
        ([], "two or more"),
    ],
)
def test_a_bad_list_of_controls_is_refused_naming_the_key(tmp_path, control, message):
    reg = registration()
    reg["comparisons"]["primary"][1]["control"] = control
    path = tmp_path / "registration.yaml"
    path.write_text(yaml.safe_dump(reg), encoding="utf-8")
    with pytest.raises(InputError, match=message) as e:
        regfile.load(path)
    assert str(path) in str(e.value) and "comparisons.primary[1]" in str(e.value)


def test_power_plans_on_no_less_spread_than_a_seeds_benchmark_gives(tmp_path):
    """Seeds that agree more closely than their benchmarks' sampling allows (here: the same d on
    every seed, sd 0) are planned with the McNemar standard deviation, not with 0."""
    from burnqed.study import stats

    path, seeds = make_study(tmp_path / "repo")
    dirs = [path.parent / "seeds" / f"seed_{s}" for s in seeds]
    for d in dirs:  # every seed: iter_1 solves t0-t15, iter_0 t0-t9 (+6/-0)
        for f, solved in (("results/iter_0/eval.json", THEOREMS[:10]),
                          ("results/iter_1/eval.json", THEOREMS[:16])):  # fmt: skip
            e = json.loads((d / f).read_text())
            e["per_theorem"] = [{"theorem": t, "evaluated": True,
                                 "budget_at_proof": 1 if t in solved else None} for t in THEOREMS]  # fmt: skip
            (d / f).write_text(json.dumps(e))
    learning = power(path, dirs)["comparisons"][0]
    assert learning["sd"] == 0.0
    within = float(stats.within_variance(6, 0, 40)) ** 0.5
    assert learning["within_sd"] == pytest.approx(within) and learning[
        "sd_planned"
    ] == pytest.approx(within)
    assert learning["seeds_needed"] == stats.seeds_needed(6 / 40, within, alpha=0.05, comparisons=2)


def test_a_seed_run_over_sessions_keeps_each_sessions_digests_and_cost(tmp_path):
    """study_run.json across `burnqed study run` sessions: the first start stays, every session's
    digests and wall time are kept, a session with other digests makes the run exploratory, and the
    report states the median cost of a seed."""
    from burnqed.study.analysis import seed_cost
    from burnqed.study.stage import _run_record

    path, seeds = make_study(tmp_path / "repo")
    work = path.parent / "seeds" / f"seed_{seeds[0]}"
    (work / RUN_RECORD).unlink()
    rc = {"commit": "c" * 40}
    first = _run_record(work, seeds[0], path, rc, RULES)
    first["sessions"][-1].update(finished_at=LOOKED, wall_s=600.0, returncode=1)
    (work / RUN_RECORD).write_text(json.dumps(first))
    second = _run_record(work, seeds[0], path, rc, RULES)
    assert second["started_at"] == first["started_at"] and len(second["sessions"]) == 2
    second["sessions"][-1].update(finished_at=LOOKED, wall_s=360.0, returncode=0)
    (work / RUN_RECORD).write_text(json.dumps({**second, "started_at": LOOKED}))
    for s in seeds[1:]:
        rec = path.parent / "seeds" / f"seed_{s}" / RUN_RECORD
        r = json.loads(rec.read_text())
        rec.write_text(json.dumps({**r, "sessions": [{"rules": RULES, "wall_s": 900.0}]}))
    r = report(path, root=tmp_path / "repo")
    assert r["label"] == "confirmatory", [c for c in r["checks"] if not c["ok"]]
    assert r["cost"]["per_seed_wall_s"][seeds[0]] == 960.0 and r["cost"]["median_wall_s"] == 900.0
    assert (
        "Median wall time of a seed: 15.0 min over the 3 seeds"
        in (path.parent / "report.md").read_text()
    )
    # a record from before sessions: that run is a session without a wall time (untimed)
    legacy = {k: first[k] for k in ("seed", "rules", "git", "started_at")}
    (work / RUN_RECORD).write_text(json.dumps(legacy))
    resumed = _run_record(work, seeds[0], path, rc, RULES)
    assert set(resumed["sessions"][0]) == {"rules", "git", "started_at"}
    resumed["sessions"][-1]["wall_s"] = 2.0
    assert seed_cost(resumed) is None and seed_cost(second) == 960.0
    # a session that ran other code is found even when the last one ran the registered code
    second["sessions"][0]["rules"] = {**RULES, "eval": {"code": "other", "config": "c0f1"}}
    (work / RUN_RECORD).write_text(json.dumps({**second, "started_at": LOOKED}))
    bad = [c for c in report(path, root=tmp_path / "repo")["checks"] if not c["ok"]]
    assert [c["check"] for c in bad] == ["digests"] and "eval" in bad[0]["detail"]


FAKE_SNAKEMAKE = """#!{python}
# A stand-in for snakemake in `burnqed study run`'s tests: builds a seed's evals from a stash,
# notes when it ran and its OpenMP wait policy, fails for the seed named in FAIL_SEED and stops
# on a training guard, as a joint-training job prints it, for the seed named in ABORT_SEED.
import json, os, shutil, sys, time
argv = sys.argv[1:]
work = argv[argv.index("--directory") + 1]
seed = argv[argv.index("--config") + 1].removeprefix("seed=")
if "--unlock" in argv:
    shutil.rmtree(os.path.join(work, ".snakemake", "locks"))
    open(os.path.join(work, "unlocked"), "w").close()
    sys.exit(0)
start = time.time()
time.sleep(0.5)
with open(os.path.join(work, "fake.json"), "w") as f:
    json.dump({{"start": start, "end": time.time(),
               "omp": os.environ.get("OMP_WAIT_POLICY")}}, f)
if seed == os.environ.get("FAIL_SEED"):
    sys.exit(3)
if seed == os.environ.get("ABORT_SEED"):
    print("Traceback (most recent call last):")
    print("burnqed.train.joint.JointTrainingError: joint step 50: held-out probe_accuracy fell")
    sys.exit(1)
shutil.copytree(os.path.join(work, "stash"), os.path.join(work, "results"), dirs_exist_ok=True)
"""


def fake_snakemake(tmp_path, monkeypatch, path, seeds):
    """``burnqed study run`` over the synthetic study with :data:`FAKE_SNAKEMAKE`: each seed's
    results moved to a stash the fake restores."""
    import sys

    from burnqed.study import stage

    exe = tmp_path / "snakemake"
    exe.write_text(FAKE_SNAKEMAKE.format(python=sys.executable))
    exe.chmod(0o755)
    monkeypatch.setattr(regfile, "snakemake_command", lambda: str(exe))
    monkeypatch.setattr(regfile, "design_digests", lambda root, design, rules, **kw: RULES)
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    for s in seeds:
        work = path.parent / "seeds" / f"seed_{s}"
        (work / "results").rename(work / "stash")
        (work / RUN_RECORD).unlink()
    return stage


def test_a_study_runs_its_seeds_k_at_a_time_and_charges_each_its_share(tmp_path, monkeypatch):
    """--parallel 2: two seeds' runs overlap, each with OMP_WAIT_POLICY=PASSIVE; each session
    records it, the report charges a seed half its wall time and stays confirmatory."""
    path, seeds = make_study(tmp_path / "repo")
    stage = fake_snakemake(tmp_path, monkeypatch, path, seeds)
    r = stage.run(path, root=tmp_path / "repo", parallel=2)
    assert r["label"] == "confirmatory", [c for c in r["checks"] if not c["ok"]]
    ran = {s: json.loads((path.parent / "seeds" / f"seed_{s}" / "fake.json").read_text())
           for s in seeds}  # fmt: skip
    assert all(x["omp"] == "PASSIVE" for x in ran.values())
    first, second = ran[seeds[0]], ran[seeds[1]]
    assert second["start"] < first["end"]  # the first two at once
    for s in seeds:
        (session,) = json.loads((path.parent / "seeds" / f"seed_{s}" / RUN_RECORD).read_text())[
            "sessions"
        ]
        assert session["parallel"] == 2 and session["returncode"] == 0
        assert r["cost"]["per_seed_wall_s"][s] == pytest.approx(session["wall_s"] / 2)
    assert r["cost"]["parallel"] == 2
    assert "up to 2 seeds ran at once" in (path.parent / "report.md").read_text()


def test_after_a_failed_seed_no_new_seed_starts_and_the_failure_is_named(tmp_path, monkeypatch):
    path, seeds = make_study(tmp_path / "repo")
    stage = fake_snakemake(tmp_path, monkeypatch, path, seeds)
    monkeypatch.setenv("FAIL_SEED", str(seeds[0]))
    with pytest.raises(InputError, match=rf"seed {seeds[0]}: snakemake exited 3 \(log: "):
        stage.run(path, root=tmp_path / "repo")
    assert not (path.parent / "seeds" / f"seed_{seeds[1]}" / "fake.json").exists()
    # One at a time, the default: the policy is left as the environment has it.
    monkeypatch.delenv("FAIL_SEED")
    stage.run(path, root=tmp_path / "repo")
    omp = [json.loads((path.parent / "seeds" / f"seed_{s}" / "fake.json").read_text())["omp"]
           for s in seeds]  # fmt: skip
    assert omp == [None, None, None]


def test_a_checkout_with_other_digests_runs_no_seed_and_names_the_rules(tmp_path, monkeypatch):
    """A checkout whose code or config differs from the registered design's would make the
    report exploratory: the study stops before its first seed, naming the rules and the commit
    to run it from."""
    path, seeds = make_study(tmp_path / "repo")
    stage = fake_snakemake(tmp_path, monkeypatch, path, seeds)
    other = {**RULES, "sft": {"code": "0the", "config": "5f71"}}
    monkeypatch.setattr(regfile, "design_digests", lambda root, design, rules, **kw: other)
    rc = regfile.first_commit(path, tmp_path / "repo")
    with pytest.raises(
        InputError,
        match=rf"differs from the registered design's for sft: .*git checkout {rc['commit'][:12]}",
    ):
        stage.run(path, root=tmp_path / "repo")
    for s in seeds:
        work = path.parent / "seeds" / f"seed_{s}"
        assert not (work / "fake.json").exists() and not (work / RUN_RECORD).exists()


def test_a_seed_the_design_stops_is_aborted_and_the_others_go_on(tmp_path, monkeypatch, capsys):
    """A training guard's error in a seed's log makes it *aborted*: recorded with its reason,
    never rerun, the other seeds run on; an infrastructure failure still stops the study.  A seed
    whose failed session predates abort records is recognised from its log."""
    path, seeds = make_study(tmp_path / "repo")
    stage = fake_snakemake(tmp_path, monkeypatch, path, seeds)
    monkeypatch.setenv("ABORT_SEED", str(seeds[0]))
    stage.run(path, root=tmp_path / "repo")
    work = path.parent / "seeds" / f"seed_{seeds[0]}"
    rec = json.loads((work / RUN_RECORD).read_text())
    assert rec["aborted"]["error"] == "burnqed.train.joint.JointTrainingError"
    assert rec["aborted"]["reason"].startswith("joint step 50: held-out probe_accuracy")
    assert rec["sessions"][-1]["returncode"] == 1
    for s in seeds[1:]:  # the others ran
        assert (path.parent / "seeds" / f"seed_{s}" / "fake.json").exists()
    (work / "fake.json").unlink()
    monkeypatch.delenv("ABORT_SEED")
    stage.run(path, root=tmp_path / "repo")
    assert not (work / "fake.json").exists()  # not run again
    assert len(json.loads((work / RUN_RECORD).read_text())["sessions"]) == 1
    st = stage.status(path, root=tmp_path / "repo")
    assert [r["state"] for r in st["seeds"]] == ["aborted", "finished", "finished"]
    assert st["aborted"] == 1 and st["left_s"] == 0
    assert cli_main(["study", "status", str(path), "--root", str(tmp_path / "repo")]) == 0
    out = capsys.readouterr().out
    assert f"seed {seeds[0]}: aborted (sessions: 1, " in out and "probe_accuracy fell" in out
    assert "2 of 3 seeds finished, 1 aborted by the design;" in out
    # A record written before aborts were recorded: the failed session's log says it.
    del rec["aborted"]
    del rec["sessions"][-1]["log_offset"]
    (work / RUN_RECORD).write_text(json.dumps(rec))
    stage.run(path, root=tmp_path / "repo")
    assert not (work / "fake.json").exists()
    assert (
        json.loads((work / RUN_RECORD).read_text())["aborted"]["at"]
        == rec["sessions"][-1]["finished_at"]
    )
    # An error that is not a design stop is infrastructure: the study stops, naming it.  (A
    # finished seed is not run again: this one lost a compared eval, so it runs.)
    (path.parent / "seeds" / f"seed_{seeds[1]}" / "results/iter_1/eval.json").unlink()
    (path.parent / "kept" / f"seed_{seeds[1]}.tar.gz").unlink()
    monkeypatch.setenv("FAIL_SEED", str(seeds[1]))
    with pytest.raises(InputError, match=rf"seed {seeds[1]}: snakemake exited 3"):
        stage.run(path, root=tmp_path / "repo")


def test_a_study_outlives_its_machine_through_its_kept_seeds(tmp_path, monkeypatch):
    """Each seed that ends is kept in ``kept/seed_<s>.tar.gz`` (its record and the files its report
    reads, not its models); a fresh clone without ``seeds/`` gets them back: status says finished,
    a run starts no seed again, the report is the same.  Keeping twice writes the same bytes."""
    path, seeds = make_study(tmp_path / "repo")
    stage = fake_snakemake(tmp_path, monkeypatch, path, seeds)
    shutil.copytree(path.parent / "seeds" / f"seed_{seeds[2]}" / "stash", tmp_path / "stash")
    first = stage.run(path, root=tmp_path / "repo")
    kept = path.parent / "kept"
    archives = {s: (kept / f"seed_{s}.tar.gz").read_bytes() for s in seeds}
    work = path.parent / "seeds" / f"seed_{seeds[0]}"
    with tarfile.open(kept / f"seed_{seeds[0]}.tar.gz") as tar:
        names = set(tar.getnames())
    evals = {p.relative_to(work).as_posix() for p in work.glob("results/*/eval*.json")}
    assert names == {RUN_RECORD, "study_overrides.yaml", *evals}
    assert "fake.json" not in names and "stash" not in str(names)
    shutil.rmtree(path.parent / "seeds")  # the machine is gone; the clone has kept/ only
    st = stage.status(path, root=tmp_path / "repo")
    assert [r["state"] for r in st["seeds"]] == ["finished"] * 3
    again = stage.run(path, root=tmp_path / "repo")
    for s in seeds:
        assert not (path.parent / "seeds" / f"seed_{s}" / "fake.json").exists()  # not run again
        assert (kept / f"seed_{s}.tar.gz").read_bytes() == archives[s]
        sessions = json.loads((path.parent / "seeds" / f"seed_{s}" / RUN_RECORD).read_text())
        assert len(sessions["sessions"]) == 1
    assert again["label"] == first["label"] == "confirmatory"
    assert again["seeds"] == first["seeds"]
    assert [(c["pooled"], c["per_seed"]) for c in again["comparisons"]] == [
        (c["pooled"], c["per_seed"]) for c in first["comparisons"]
    ]
    # A seed left unfinished is not kept: a new machine starts it over.
    (kept / f"seed_{seeds[2]}.tar.gz").unlink()
    shutil.rmtree(path.parent / "seeds")
    assert [r["state"] for r in stage.status(path, root=tmp_path / "repo")["seeds"]] == [
        "finished", "finished", "not started"]  # fmt: skip
    shutil.copytree(tmp_path / "stash", path.parent / "seeds" / f"seed_{seeds[2]}" / "stash")
    stage.run(path, root=tmp_path / "repo")
    assert (path.parent / "seeds" / f"seed_{seeds[2]}" / "fake.json").exists()
    assert (kept / f"seed_{seeds[2]}.tar.gz").is_file()
    # A damaged archive is named before anything runs.
    (path.parent / "seeds").rename(tmp_path / "gone")
    (kept / f"seed_{seeds[1]}.tar.gz").write_bytes(b"not a tarball")
    with pytest.raises(InputError, match=rf"kept/seed_{seeds[1]}.tar.gz: not a readable kept seed"):
        stage.run(path, root=tmp_path / "repo")


def test_a_seed_left_locked_by_a_killed_session_is_unlocked_unless_its_process_lives(
    tmp_path, monkeypatch
):
    """A session killed mid-run leaves Snakemake's lock: the next session releases it with
    ``snakemake --unlock`` when that session's process is gone, and refuses, naming it, when the
    process still runs here or ran on another host."""
    import socket

    path, seeds = make_study(tmp_path / "repo")
    stage = fake_snakemake(tmp_path, monkeypatch, path, seeds)
    work = path.parent / "seeds" / f"seed_{seeds[0]}"
    dead = subprocess.Popen(["true"])
    dead.wait()
    for pid, host, refused in [
        (os.getppid(), socket.gethostname(), "is still running it"),
        (dead.pid, "another-host", "ran on another-host and did not finish"),
        (dead.pid, socket.gethostname(), None),
    ]:
        (work / ".snakemake/locks").mkdir(parents=True, exist_ok=True)
        (work / ".snakemake/locks/0.input.lock").write_text("")
        (work / RUN_RECORD).write_text(json.dumps({"seed": seeds[0], "sessions": [
            {"rules": RULES, "started_at": LOOKED, "pid": pid, "host": host}]}))  # fmt: skip
        if refused:
            with pytest.raises(InputError, match=f"seed {seeds[0]}: .*{refused}"):
                stage.run(path, root=tmp_path / "repo")
            assert not (work / "unlocked").exists()
            assert not (path.parent / "seeds" / f"seed_{seeds[1]}" / "fake.json").exists()
        else:
            assert stage.run(path, root=tmp_path / "repo")["label"] == "confirmatory"
            assert (work / "unlocked").exists() and not (work / ".snakemake/locks").exists()
            sessions = json.loads((work / RUN_RECORD).read_text())["sessions"]
            assert sessions[-1]["pid"] == os.getpid() and sessions[-1]["returncode"] == 0


def test_status_says_where_each_seed_stands_without_reading_an_eval(tmp_path, monkeypatch, capsys):
    """`burnqed study status`: finished / running / stopped / failed / not started, from each
    seed's study_run.json and which evals exist — an eval it cannot parse is never opened."""
    import socket

    path, seeds = make_study(tmp_path / "repo")
    stage = fake_snakemake(tmp_path, monkeypatch, path, seeds)
    stage.run(path, root=tmp_path / "repo")
    seeds_dir = path.parent / "seeds"
    for s in seeds:  # unreadable evals: status must not open them
        for f in (seeds_dir / f"seed_{s}" / "results").rglob("*.json"):
            f.write_text("not json")
    dead = subprocess.Popen(["true"])
    dead.wait()

    def session(s, **kw):
        rec = seeds_dir / f"seed_{s}" / RUN_RECORD
        r = json.loads(rec.read_text())
        r["sessions"].append({"rules": RULES, "host": socket.gethostname(), **kw})
        rec.write_text(json.dumps(r))

    st = stage.status(path, root=tmp_path / "repo")
    assert [r["state"] for r in st["seeds"]] == ["finished"] * 3 and st["left_s"] == 0
    session(seeds[0], pid=os.getpid())
    session(seeds[1], pid=dead.pid)
    st = stage.status(path, root=tmp_path / "repo")
    assert [r["state"] for r in st["seeds"]] == ["running", "stopped", "finished"]
    session(seeds[1], pid=dead.pid, finished_at=LOOKED, wall_s=5.0, returncode=1)
    shutil.rmtree(seeds_dir / f"seed_{seeds[2]}")  # and not kept: never run
    (path.parent / "kept" / f"seed_{seeds[2]}.tar.gz").unlink()
    st = stage.status(path, root=tmp_path / "repo")
    assert [r["state"] for r in st["seeds"]] == ["running", "failed", "not started"]
    # A session on another host cannot be checked from here: neither running nor stopped.
    rec = seeds_dir / f"seed_{seeds[0]}" / RUN_RECORD
    r0 = json.loads(rec.read_text())
    r0["sessions"][-1]["host"] = "another-host"
    rec.write_text(json.dumps(r0))
    assert stage.status(path, root=tmp_path / "repo")["seeds"][0]["state"] == "unfinished"
    assert st["finished"] == 0 and st["median_seed_s"] is None
    assert cli_main(["study", "status", str(path), "--root", str(tmp_path / "repo")]) == 0
    out = capsys.readouterr().out
    assert f"seed {seeds[2]}: not started (sessions: 0)" in out
    assert "study synthetic: 0 of 3 seeds finished" in out
