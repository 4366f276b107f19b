"""``burnqed replay`` over recordings made with the toy logic and fake policies: the recording's own
priority reproduces it theorem by theorem; another priority without ``--live`` counts the states the
recording never expanded and marks their attempts inexact (the other attempts equal a live search
with that priority); a recording sampled otherwise than the priority's eval is refused."""

from __future__ import annotations

import asyncio
import json

import pytest
import yaml

from burnqed.cli import main as cli_main
from burnqed.config import SearchConfig
from burnqed.eval.compare import load_evals
from burnqed.eval.paired import paired_test
from burnqed.eval.stage import run as eval_run
from burnqed.eval.stage import without_run_specific
from burnqed.policy import SamplingParams
from burnqed.replay.stage import ReplayRefused, check_sampling, replay_search
from burnqed.replay.stage import run as replay_run
from burnqed.search.recorded import RecordedSource, Recording
from burnqed.search.stage import search_to_dir
from burnqed.trajectory import read_nodes, read_summary
from tests.eval.conftest import LEAN, POLICY, SEARCH, toy_search
from tests.search.fakes import RandomToyPolicy, ToyEnv, ToyValue, toy_theorems

EVAL = {"budgets": [3, 8, 20], "pass_n": 2, "num_candidates": 4, "benchmark": "toy_test"}
CLOCK = {"created_s", "lean_s", "expand_wall_s", "expand_lean_s", "wall_s", "gen_wait_s"}


def rows(directory, *, summary: bool = False) -> list[dict]:
    """Node (or summary) rows without the clock fields, in a fixed order."""
    table = (read_summary if summary else read_nodes)(directory).table.to_pylist()
    key = ("theorem", "attempt") if summary else ("theorem", "attempt", "node_id")
    return sorted(({k: v for k, v in r.items() if k not in CLOCK} for r in table),
                  key=lambda r: tuple(r[k] for k in key))  # fmt: skip


@pytest.mark.parametrize("with_value", [False, True], ids=["logprob", "ebm, k=2"])
def test_replaying_a_recorded_eval_with_its_own_priority_reproduces_it(
    tmp_path, benchmark, fake_backends, monkeypatch, with_value
):
    search, ebm = SEARCH, None
    if with_value:  # energies in the priority, two pops a step, length-normalised log-probs
        search = {**SEARCH, "expansions_per_step": 2, "depth_normalisation": 1.0}
        monkeypatch.setattr("burnqed.search.value.load_value_model", lambda path, gen: ToyValue())
        ebm = tmp_path / "ebm"
        ebm.mkdir()
    with fake_backends(RandomToyPolicy(seed=3), ToyEnv()):
        rec = eval_run(model="m", benchmark=benchmark, trajectories=tmp_path / "eval",
                       out=tmp_path / "eval.json", cfg=EVAL, search=search, lean=LEAN,
                       policy=POLICY, ebm=ebm, seed=5)  # fmt: skip
    # No backends from here on: a replay with the recording's own priority asks no model, no Lean.
    result = replay_run(recording=tmp_path / "eval.json", out=tmp_path / "replay.json", cfg=EVAL,
                        search=search, lean=LEAN, policy=POLICY)  # fmt: skip
    assert 0 < len(rec["solved_theorems"]) < 10  # some proved, some not: the test can tell
    assert without_run_specific(result["per_theorem"]) == without_run_specific(rec["per_theorem"])
    assert [b["solved"] for b in result["by_budget"]] == [b["solved"] for b in rec["by_budget"]]
    assert rows(tmp_path / "replay") == rows(tmp_path / "eval")  # trees: node by node
    assert rows(tmp_path / "replay", summary=True) == rows(tmp_path / "eval", summary=True)
    block = result["replay"]
    expansions = sum(r["expansion_index"] is not None for r in rows(tmp_path / "eval"))
    assert block["source"]["expansions"] == {"recorded": expansions}
    assert block["source"]["inexact_attempts"] == 0 and "live" not in block["source"]["lean"]
    for b in block["by_budget"]:
        assert b["solved"] == b["recorded_solved"] and b["unexpanded"] == b["inexact_attempts"] == 0
        assert b["oracle_ceiling"] >= b["solved"]
    if with_value:
        assert block["value"]["recorded"] > 0 and "missing" not in block["value"]
        assert set(block["priorities"]) == {"logprob", "value", "sum"}
    # It pairs with the recording: nothing differs but the value model (here not even that).
    test = paired_test(rec, result, varies="value model")
    assert test["reasons"] == [] and test["gained"] == test["lost"] == 0
    assert test["theorems"] == 10
    assert [e["kind"] for _, e in load_evals([tmp_path / "eval.json", tmp_path / "replay.json"])] \
        == ["burnqed eval", "burnqed replay"]  # fmt: skip
    prov = result["provenance"]["recording"]
    assert prov["eval_json"]["sha256"] and prov["trajectories"]["sha256"]


def test_without_live_unexpanded_nodes_are_counted_and_their_attempts_marked_inexact(tmp_path):
    theorems = toy_theorems(12, seed=8, low=5, high=20)
    policy = RandomToyPolicy(seed=11)
    toy_search(tmp_path / "rec", theorems, policy, max_nodes=12, temperature=1.0)
    cfg = SearchConfig.from_dict(
        {**SEARCH, "max_nodes": 12, "max_error_fraction": 1.0, "expansions_per_step": 1}
    )
    sampling = SamplingParams(n=cfg.num_candidates, temperature=1.0)
    source = RecordedSource(Recording.read(tmp_path / "rec"))
    replay = asyncio.run(replay_search(theorems, source, cfg, sampling=sampling, seed=0,
                                       value_model=ToyValue(), out=tmp_path / "replay"))  # fmt: skip
    asyncio.run(search_to_dir(theorems, policy, ToyEnv(), cfg, tmp_path / "live",
                              sampling=sampling, value_model=ToyValue()))  # fmt: skip

    recorded = {(r["theorem"], r["attempt"], r["state_hash"])
                for r in rows(tmp_path / "rec") if r["expansion_index"] is not None}  # fmt: skip
    replayed = [r for r in rows(tmp_path / "replay") if r["expansion_index"] is not None]
    new = [r for r in replayed if (r["theorem"], r["attempt"], r["state_hash"]) not in recorded]
    assert new  # the value reorders the search: it pops states the recording never expanded
    assert sorted((t, a, h) for (t, a), hs in source.unexpanded.items() for h in hs) == sorted(
        (r["theorem"], r["attempt"], r["state_hash"]) for r in new
    )
    # An unexpanded pop spends its budget and gets nothing.
    assert all(r["num_candidates"] == 0 and r["unique_candidates"] == 0 for r in new)
    assert source.stats()["expansions"]["unexpanded"] == len(new)
    assert sorted(replay.unexpanded_at) == sorted(r["expansion_index"] for r in new)
    inexact = {(r["theorem"], r["attempt"]) for r in new} | set(source.assumed)
    assert source.inexact == inexact and set(replay.inexact_from) == inexact
    for r in new:
        assert replay.inexact_from[r["theorem"], r["attempt"]] <= r["expansion_index"]
    # Every other attempt got only recorded answers: it is exactly the live search's.
    exact = {(t.key, 0) for t in theorems} - inexact
    assert exact and len(exact) < len(theorems)
    for d in (tmp_path / "replay", tmp_path / "live"):
        assert {(r["theorem"], r["attempt"]) for r in rows(d, summary=True)} >= exact
    pick = lambda rs: [r for r in rs if (r["theorem"], r["attempt"]) in exact]  # noqa: E731
    assert pick(rows(tmp_path / "replay")) == pick(rows(tmp_path / "live"))
    assert pick(rows(tmp_path / "replay", summary=True)) == pick(
        rows(tmp_path / "live", summary=True)
    )


def test_a_recording_sampled_otherwise_is_refused_in_one_line_naming_the_field(
    tmp_path, benchmark, fake_backends, repo_root, capsys
):
    params = yaml.safe_load((repo_root / "params.yaml").read_text())
    small = {"budgets": [2, 6], "num_candidates": 4}
    with fake_backends(RandomToyPolicy(seed=3), ToyEnv()):
        eval_run(model="m", benchmark=benchmark, trajectories=tmp_path / "eval",
                 out=tmp_path / "eval.json", cfg={**params["eval"], **small}, search=SEARCH,
                 lean=LEAN, policy=params["policy"], temperature=0.8)  # fmt: skip
    overlay = tmp_path / "small.yaml"
    overlay.write_text(yaml.safe_dump({"eval": small}))
    out = tmp_path / "replay.json"
    rc = cli_main(["replay", str(tmp_path / "eval.json"), "--params", str(repo_root / "params.yaml"),
                   "--configfile", str(overlay), "--out", str(out)])  # fmt: skip
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1, err
    assert "temperature 0.8" in err and "temperature 1.0 (eval.temperature)" in err
    assert not out.exists() and not (tmp_path / "replay").exists()  # refused before anything


@pytest.mark.parametrize(
    ("field", "recorded", "setting"),
    [
        ("temperature", {"temperature": 0.8}, "eval.temperature"),
        ("candidates", {"n": 8}, "eval.num_candidates"),
        ("top_p", {"top_p": 1.0}, "policy.top_p"),
        ("max_new_tokens", {"max_new_tokens": 64}, "policy.max_new_tokens"),
    ],
)
def test_each_sampling_field_is_checked_and_named(field, recorded, setting):
    intended = {"temperature": (1.0, "eval.temperature"), "candidates": (4, "eval.num_candidates"),
                "top_p": (0.95, "policy.top_p"), "max_new_tokens": (128, "policy.max_new_tokens")}  # fmt: skip
    same = {"temperature": 1.0, "n": 4, "top_p": 0.95, "max_new_tokens": 128}
    check_sampling(same, intended, what="r")  # the same sampling passes
    with pytest.raises(ReplayRefused, match=rf"with {field} .*\({setting}\)"):
        check_sampling({**same, **recorded}, intended, what="r")


def test_a_json_that_is_not_an_eval_is_refused(tmp_path):
    (tmp_path / "x.json").write_text(json.dumps({"kind": "burnqed compare"}))
    with pytest.raises(Exception, match="not a burnqed eval JSON"):
        replay_run(recording=tmp_path / "x.json", out=tmp_path / "r.json", cfg=EVAL,
                   search=SEARCH, lean=LEAN, policy=POLICY)  # fmt: skip


def test_live_replay_with_a_value_model_equals_the_live_eval_with_it(
    tmp_path, benchmark, fake_backends, monkeypatch
):
    """The stage end to end: a log-prob eval replayed ``--live`` with a value model (``--ebm``)
    equals the live eval with that value model — through an environment without ``adopt``, whose
    recorded chains the source rebuilds by applying them."""
    monkeypatch.setattr("burnqed.search.value.load_value_model", lambda path, gen: ToyValue())
    ebm = tmp_path / "ebm"
    ebm.mkdir()
    common = dict(benchmark=benchmark, cfg=EVAL, search=SEARCH, lean=LEAN, policy=POLICY, seed=5)
    with fake_backends(RandomToyPolicy(seed=3), ToyEnv()):
        eval_run(model="m", trajectories=tmp_path / "eval", out=tmp_path / "eval.json", **common)
        live = eval_run(model="m", trajectories=tmp_path / "ebm_eval", ebm=ebm,
                        out=tmp_path / "ebm_eval.json", **common)  # fmt: skip
    with fake_backends(RandomToyPolicy(seed=3), ToyEnv()) as opened:
        result = replay_run(recording=tmp_path / "eval.json", out=tmp_path / "replay.json",
                            cfg=EVAL, search=SEARCH, lean=LEAN, policy=POLICY, ebm=ebm,
                            live=True)  # fmt: skip
    assert opened["model"] == "m"  # the recording's model
    assert rows(tmp_path / "replay") == rows(tmp_path / "ebm_eval")
    assert rows(tmp_path / "replay", summary=True) == rows(tmp_path / "ebm_eval", summary=True)
    assert without_run_specific(result["per_theorem"]) == without_run_specific(live["per_theorem"])
    st = result["replay"]["source"]
    assert st["expansions"]["recorded"] > 0 and st["expansions"]["live"] > 0, st
    assert st["states"]["rebuilds"] > 0 and st["states"]["adopted"] == 0, st
    assert st["states"]["disagreements"] == 0 and st["inexact_attempts"] == 0, st
    assert all(b["unexpanded"] == 0 for b in result["replay"]["by_budget"])
    # The replay is the live eval's twin: the paired test finds nothing that differs.
    test = paired_test(live, result, varies="value model")
    assert test["reasons"] == [] and test["gained"] == test["lost"] == 0


def test_cli_prints_the_oracle_ceiling_per_budget(tmp_path, benchmark, fake_backends, repo_root,
                                                   capsys):  # fmt: skip
    with fake_backends(RandomToyPolicy(seed=3), ToyEnv()):
        rec = eval_run(model="m", benchmark=benchmark, trajectories=tmp_path / "eval",
                       out=tmp_path / "eval.json", cfg={**EVAL, "budgets": [5, 10, 20]},
                       search=SEARCH, lean=LEAN, policy=POLICY, seed=5)  # fmt: skip
    # The recording's depth limit (params.yaml's differs: a replay with it would be refused).
    overlay = tmp_path / "depth.yaml"
    overlay.write_text(yaml.safe_dump({"search": {"max_depth": SEARCH["max_depth"]}}))
    rc = cli_main(["replay", str(tmp_path / "eval.json"), "--priority", "oracle", "--params",
                   str(repo_root / "params.yaml"), "--configfile", str(overlay),
                   "--out", str(tmp_path / "oracle.json")])  # fmt: skip
    out = capsys.readouterr().out
    assert rc == 0 and "| budget | coverage (attempts) | covered theorems | recorded |" in out
    assert "| oracle ceiling |" in out
    result = json.loads((tmp_path / "oracle.json").read_text())
    assert result["kind"] == "burnqed replay" and result["replay"]["priority"]["name"] == "oracle"
    recorded = [b["solved"] for b in rec["by_budget"]]
    ceiling = [b["oracle_ceiling"] for b in result["replay"]["by_budget"]]
    assert ceiling == [b["solved"] for b in result["by_budget"]]  # the oracle's own replay
    assert all(c >= r for c, r in zip(ceiling, recorded, strict=True)) and ceiling != recorded
    assert ceiling[-1] == recorded[-1]  # it can only find the proofs the recording found
    for b in result["replay"]["by_budget"]:
        cov = b["coverage"]
        assert (
            f"| {b['budget']} | {cov['covered']}/{cov['attempts']} | {b['covered_theorems']} | "
            in out
        )


def test_statement_errors_and_rejected_proofs_replay_as_recorded(tmp_path):
    import dataclasses

    from tests.search.fakes import toy_theorem

    broken = dataclasses.replace(
        toy_theorem("broken", 3), formal_statement="theorem broken : ? := by\n"
    )
    theorems = [*toy_theorems(8, seed=4, low=6, high=14), broken]
    toy_search(tmp_path / "rec", theorems, RandomToyPolicy(seed=2), max_nodes=15, attempts=2)
    cfg = SearchConfig.from_dict({**SEARCH, "max_nodes": 15, "attempts": 2,
                                  "max_error_fraction": 1.0, "expansions_per_step": 1})  # fmt: skip
    source = RecordedSource(Recording.read(tmp_path / "rec"))
    asyncio.run(replay_search(theorems, source, cfg, sampling=SamplingParams(n=4, temperature=0.8),
                              seed=0, out=tmp_path / "replay"))  # fmt: skip
    summary = rows(tmp_path / "rec", summary=True)
    assert sum(r["rejected_proofs"] for r in summary) > 0  # the verifier's own reasons come back
    assert [r["status"] for r in summary if r["theorem"] == "broken"] == ["statement_error"] * 2
    assert rows(tmp_path / "replay", summary=True) == summary
    assert rows(tmp_path / "replay") == rows(tmp_path / "rec")
    assert source.stats()["verifications"].get("recorded", 0) > 0 and not source.assumed


def test_a_random_order_recording_is_refused_as_its_own_priority(tmp_path):
    """A noise search pops in a seeded random order (its manifest's ``order``): replay does not
    repeat that order, so ``recorded`` would silently be another search; it is refused."""
    theorems = toy_theorems(4, seed=8, low=5, high=20)
    cfg = SearchConfig.from_dict({**SEARCH, "max_nodes": 6})
    sampling = SamplingParams(n=cfg.num_candidates, temperature=cfg.temperature)
    asyncio.run(search_to_dir(theorems, RandomToyPolicy(seed=1), ToyEnv(), cfg, tmp_path / "rec",
                              sampling=sampling, order="random"))  # fmt: skip
    assert json.loads((tmp_path / "rec" / "manifest.json").read_text())["order"] == "random"
    with pytest.raises(ReplayRefused, match="popped its frontier in random order"):
        replay_run(recording=tmp_path / "rec", out=tmp_path / "replay.json", cfg=EVAL,
                   search=SEARCH, lean=LEAN, policy=POLICY)  # fmt: skip
    assert not (tmp_path / "replay.json").exists()
