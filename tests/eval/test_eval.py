"""The eval stage: budgets from one run equal separate runs, the JSON describes itself, partial and
errored evals are labelled and kept out of the denominator, a benchmark not the pinned one is refused."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import os
import shutil

import pytest

from burnqed.cli import main as cli_main
from burnqed.data.benchmarks import HashMismatchError
from burnqed.eval.compare import compare, compare_markdown
from burnqed.eval.metrics import score_trajectories
from burnqed.eval.stage import check_benchmark, run
from burnqed.eval.table import eval_markdown, render_rich
from burnqed.policy import candidate_seeds, salted_seed
from burnqed.theorems import read_theorems
from burnqed.trajectory import read_nodes, read_summary
from tests.eval.conftest import LEAN, POLICY, SEARCH, toy_search, write_benchmark
from tests.search.fakes import RandomToyPolicy, ToyEnv, toy_theorem, toy_theorems

BUDGETS = [1, 3, 6, 12, 25, 40]


@pytest.mark.parametrize("k", [1, 3])
def test_budget_curve_from_one_run_equals_separate_runs_per_budget(tmp_path, k):
    """Solve rate, nodes, Lean seconds and tokens at every budget equal what a separate run with
    that budget spends — also when a step expands k > 1 nodes (the proof's whole step is spent)."""
    theorems = toy_theorems(14, seed=8, low=5, high=20)
    names = [t.name for t in theorems]
    # Length-normalised priorities: the proof does not always come from a step's last node.
    search = functools.partial(toy_search, k=k, depth_normalisation=1.0)
    search(tmp_path / "full", theorems, RandomToyPolicy(seed=11), max_nodes=BUDGETS[-1])
    if k > 1:  # the case this test is about: a proof found before the end of its step
        nodes = [
            r for r in read_nodes(tmp_path / "full").table.to_pylist() if r["step"] is not None
        ]
        step_of = {(r["theorem"], r["expansion_index"]): r["step"] for r in nodes}
        last = {}
        for (t, ix), st in step_of.items():
            last[t, st] = max(last.get((t, st), -1), ix)
        early = [
            r
            for r in read_summary(tmp_path / "full").table.to_pylist()
            if r["proof_expansion"] is not None
            and last[r["theorem"], step_of[r["theorem"], r["proof_expansion"]]]
            > r["proof_expansion"]
        ]
        assert early
    m = score_trajectories(tmp_path / "full", expected=names, budgets=BUDGETS, pass_n=1)
    solved_by_budget = {}
    for row in m["by_budget"]:
        b = row["budget"]
        out = tmp_path / f"b{b}"
        search(out, theorems, RandomToyPolicy(seed=11), max_nodes=b)
        sep = read_summary(out).table.to_pylist()
        proved = {r["theorem"] for r in sep if r["status"] == "proved" and r["verified"]}
        assert row["solved"] == len(proved), b
        assert row["theorems"] == 14
        mean = {
            key: sum(r[key] for r in sep) / 14 for key in ("nodes_expanded", "lean_s", "tokens")
        }
        assert row["avg_nodes"] == pytest.approx(mean["nodes_expanded"]), b
        assert row["avg_lean_s"] == pytest.approx(mean["lean_s"]), b
        assert row["avg_tokens"] == pytest.approx(mean["tokens"]), b
        ended = {}
        for r in sep:
            ended[r["ended_by"]] = ended.get(r["ended_by"], 0) + 1
        assert row["ended_by"] == ended, b
        solved_by_budget[b] = proved
    assert set(m["solved_theorems"]) == solved_by_budget[BUDGETS[-1]]
    rates = [solved_by_budget[b] for b in BUDGETS]
    assert all(a <= b for a, b in itertools.pairwise(rates))  # nested sets
    assert len(rates[0]) < len(rates[-1])  # the budgets matter in this test
    per = {r["theorem"]: r for r in m["per_theorem"]}
    for b in BUDGETS:  # the smallest budget at proof agrees with the separate runs too
        for name in solved_by_budget[b]:
            assert per[name]["budget_at_proof"] <= b
    # The anytime node curve ends at the cumulative rate.
    assert m["anytime"]["nodes"][-1][1] == pytest.approx(m["cumulative"]["rate"])


def test_the_anytime_node_axis_charges_the_proofs_whole_step(tmp_path):
    """k = 2 nodes per step: a search finishes its step before it looks for a proof, so a proof from
    a step's first node costs both — on the anytime node axis as in the per-budget node counts and
    on the anytime curve's other axes.  The report's budget curve still counts a theorem from the
    budget whose run performs the proof's expansion (the per-budget rates' rule)."""
    from burnqed.report.stage import _curve

    theorems = toy_theorems(14, seed=8, low=5, high=20)
    toy_search(tmp_path / "full", theorems, RandomToyPolicy(seed=11), max_nodes=BUDGETS[-1], k=2,
               depth_normalisation=1.0)  # fmt: skip
    proved = [r for r in read_summary(tmp_path / "full").table.to_pylist()
              if r["status"] == "proved" and r["verified"]]  # fmt: skip
    # What a run that stops at each proof spends: every expansion it made, its last step whole.
    spent = [r["nodes_expanded"] for r in proved]
    assert any(r["nodes_expanded"] > r["proof_expansion"] + 1 for r in proved)  # mid-step proofs
    m = score_trajectories(tmp_path / "full", expected=[t.name for t in theorems], budgets=BUDGETS,
                           pass_n=1)  # fmt: skip
    assert m["anytime"]["nodes"] == [[float(x), sum(s <= x for s in spent) / 14]
                                     for x in sorted(set(spent))]  # fmt: skip
    top = m["by_budget"][-1]  # the same accounting as the per-budget figures at that budget
    unsolved = [r["nodes_expanded"] for r in read_summary(tmp_path / "full").table.to_pylist()
                if r not in proved]  # fmt: skip
    assert top["avg_nodes"] == pytest.approx((sum(spent) + sum(unsolved)) / 14)
    curve = _curve(m)
    for b in m["by_budget"]:
        at = [y for x, y in zip(curve["x"], curve["y"], strict=True) if x <= b["budget"]]
        assert (at[-1] if at else 0.0) == pytest.approx(b["rate"]), b["budget"]


def test_run_writes_a_self_describing_eval_with_every_budget(tmp_path, benchmark, fake_backends):
    policy = RandomToyPolicy(seed=3)
    before = {"toy0000", "toy0001", "toy0002"}
    prev = {"solved_theorems": [*before, "not-any-more"], "label": "baseline", "status": {}}
    (tmp_path / "prev.json").write_text(json.dumps(prev))
    with fake_backends(policy, ToyEnv()) as opened:
        result = run(
            model=tmp_path / "model",
            benchmark=benchmark,
            trajectories=tmp_path / "iter_0" / "eval",
            out=tmp_path / "iter_0" / "eval.json",
            cfg={"budgets": [2, 6, 12], "pass_n": 3, "num_candidates": 4, "benchmark": "toy_test"},
            search=SEARCH,
            lean=LEAN,
            policy=POLICY,
            previous=tmp_path / "prev.json",
            seed=5,
        )
    assert opened["model"] == str(tmp_path / "model")
    on_disk = json.loads((tmp_path / "iter_0" / "eval.json").read_text())
    assert on_disk == json.loads(json.dumps(result))
    assert result["label"] == "iter_0" and result["status"]["label"] == "complete 10/10"
    summary = read_summary(tmp_path / "iter_0" / "eval").table
    assert summary.num_rows == 30 and max(summary.column("nodes_expanded").to_pylist()) <= 12
    assert {p.n for p in policy.calls} == {4}  # eval.num_candidates, not search's
    assert [b["budget"] for b in result["by_budget"]] == [2, 6, 12]
    assert [p["k"] for p in result["pass_at_k"]] == [1, 2, 3]
    solved = [b["solved"] for b in result["by_budget"]]
    assert solved == sorted(solved) and result["cumulative"]["solved"] == solved[-1]
    now = set(result["solved_theorems"])
    assert 0 < len(now) < 10 and now != before
    assert result["previous"]["newly_solved"] == sorted(now - before)
    assert result["previous"]["no_longer_solved"] == sorted(before - now)
    assert result["previous"]["previously_solved_not_evaluated_now"] == ["not-any-more"]
    prov = result["provenance"]
    assert prov["config"]["search"]["max_nodes"] == 12 and prov["config"]["search"]["attempts"] == 3
    assert prov["seeds"]["seed"] == 5 and prov["sampling"]["seed"] == 5
    assert prov["model"]["sha256"] is None  # not a local directory here
    assert result["benchmark"]["sha256"] == check_benchmark(benchmark)["sha256"]
    assert prov["versions"]["duckdb"] and prov["search_manifest"]["attempts"] == 30
    rows = {r["theorem"]: r for r in result["per_theorem"]}
    assert set(rows) == {t.name for t in read_theorems(benchmark)}
    for name in result["solved_theorems"]:
        r = rows[name]
        assert r["proof"] and r["budget_at_proof"] in (2, 6, 12)
        assert r["budget_at_proof"] > r["first_proof_expansion"]


def test_eval_seeds_are_the_run_seed_itself_and_do_not_change(tmp_path, benchmark, fake_backends):
    """Evals pair theorem by theorem because they draw the same numbers: an eval samples with
    candidate_seeds(run seed, theorem, attempt, state hash, j) — no salt, unlike the noise search
    and later iterations' searches — and those seeds are pinned to the values they had when
    searches got salts of their own (issue 29)."""
    assert candidate_seeds(5, "toy0000", 0, "root", 3) == (
        8475160955526646367, 6149249404262048362, 799417072008215574,
    )  # fmt: skip
    assert candidate_seeds(0, "t", 1, "0123456789abcdef", 2) == (
        3269755125513986620, 7728193301497069944,
    )  # fmt: skip
    policy = RandomToyPolicy(seed=3)
    with fake_backends(policy, ToyEnv()):
        result = run(model="m", benchmark=benchmark, trajectories=tmp_path / "eval",
                     out=tmp_path / "eval.json", search=SEARCH, lean=LEAN, policy=POLICY, seed=5,
                     cfg={"budgets": [3, 6], "pass_n": 2, "num_candidates": 4,
                          "benchmark": "toy_test"})  # fmt: skip
    nodes = read_nodes(tmp_path / "eval").table.to_pylist()
    drawn = {candidate_seeds(5, r["theorem"], r["attempt"], r["state_hash"], 4)
             for r in nodes if r["expansion_index"] is not None}  # fmt: skip
    assert {tuple(s) for s in policy.seeds_seen} == drawn
    prov = result["provenance"]
    assert prov["seeds"]["seed"] == prov["sampling"]["seed"] == 5
    assert prov["search_manifest"]["seed_salt"] is None


def test_a_salted_eval_draws_fresh_samples_and_says_so(tmp_path, benchmark, fake_backends):
    """Search only's eval of a later iteration (rule eval_search_only) is iteration 0's model
    searched again: with a seed salt it draws candidate_seeds(salted_seed(run seed, salt), …),
    none of the unsalted eval's, and its provenance names the salt."""
    policy = RandomToyPolicy(seed=3)
    salt = "eval_search_only/iter_1"
    with fake_backends(policy, ToyEnv()):
        result = run(model="m", benchmark=benchmark, trajectories=tmp_path / "eval",
                     out=tmp_path / "eval.json", search=SEARCH, lean=LEAN, policy=POLICY, seed=5,
                     seed_salt=salt, cfg={"budgets": [3, 6], "pass_n": 2, "num_candidates": 4,
                                          "benchmark": "toy_test"})  # fmt: skip
    nodes = [r for r in read_nodes(tmp_path / "eval").table.to_pylist()
             if r["expansion_index"] is not None]  # fmt: skip
    fresh = {candidate_seeds(salted_seed(5, salt), r["theorem"], r["attempt"], r["state_hash"], 4)
             for r in nodes}  # fmt: skip
    shared = {candidate_seeds(5, r["theorem"], r["attempt"], r["state_hash"], 4) for r in nodes}
    assert {tuple(s) for s in policy.seeds_seen} == fresh and not fresh & shared
    prov = result["provenance"]
    assert prov["seeds"] == {**prov["seeds"], "seed": 5, "seed_salt": salt}
    assert prov["search_manifest"]["seed_salt"] == salt
    assert prov["sampling"]["seed"] == salted_seed(5, salt)


def test_partial_eval_is_labelled_partial_everywhere(tmp_path, benchmark):
    theorems = list(read_theorems(benchmark))
    toy_search(tmp_path / "eval", theorems[:6], RandomToyPolicy(seed=3), max_nodes=20)
    m = score_trajectories(
        tmp_path / "eval", expected=[t.name for t in theorems], budgets=[5, 20], pass_n=1
    )
    assert m["status"]["label"] == "partial 6/10" and not m["status"]["complete"]
    assert m["status"]["attempts_missing"] == 4
    assert all(b["theorems"] == 6 for b in m["by_budget"])  # missing ones are not failures
    e = {"kind": "burnqed eval", "label": "iter_0", **m, "benchmark": {"sha256": "x"}}
    assert "partial 6/10" in eval_markdown(e)
    assert "partial 6/10" in render_rich(e)
    assert "iter_0 (partial 6/10)" in compare_markdown(compare([(tmp_path / "eval.json", e)]))


def test_errored_attempts_are_reported_apart_from_the_denominator(tmp_path):
    """Infrastructure errors are not results; a statement Lean rejects is (unsolved, listed); a
    theorem keeps the attempts that finished beside an errored one."""
    broken = dataclasses.replace(
        toy_theorem("broken", 3), formal_statement="theorem broken : ? := by\n"
    )
    theorems = [
        *toy_theorems(5, seed=2, low=3, high=8),
        toy_theorem("flaky", 3),
        toy_theorem("down", 3),
        broken,
    ]
    env = ToyEnv(crash_starts={"flaky": 1, "down": 2})
    toy_search(tmp_path / "eval", theorems, RandomToyPolicy(seed=1), max_nodes=30, attempts=2,
               env=env)  # fmt: skip
    m = score_trajectories(
        tmp_path / "eval", expected=[t.name for t in theorems], budgets=[30], pass_n=2
    )
    st = m["status"]
    # 6 theorems finished both attempts (broken among them), flaky one of two, down none.
    assert st["label"] == "partial 6/8 (+1 with some attempts)" and not st["complete"]
    assert st["attempts_errored"] == 3 and st["attempts_finished"] == 13
    assert st["evaluated_theorems"] == 7 and m["by_budget"][0]["theorems"] == 7
    assert {e["theorem"] for e in m["errors"]} == {"flaky", "down"} and len(m["errors"]) == 3
    per = {r["theorem"]: r for r in m["per_theorem"]}
    assert per["flaky"]["evaluated"] and per["flaky"]["attempts"] == 1
    assert not per["down"]["evaluated"]
    # The defective statement counts, unsolved, and is listed as the benchmark's defect.
    assert per["broken"]["evaluated"] and per["broken"]["statement_defect"]
    assert [d["theorem"] for d in m["statement_defects"]] == ["broken"]
    assert "broken" not in m["solved_theorems"]
    assert m["ended_by"]["statement"] == 2
    # pass@k over theorems with at least k finished attempts.
    assert [p["theorems"] for p in m["pass_at_k"]] == [7, 6]


def test_a_benchmark_that_is_not_the_pinned_one_is_refused(tmp_path, benchmark, fake_backends):
    with benchmark.open("a", encoding="utf-8") as f:  # one extra theorem: a different file
        f.write(json.dumps(toy_theorem("extra", 3).to_json()) + "\n")
    policy = RandomToyPolicy()
    with fake_backends(policy, ToyEnv()), pytest.raises(HashMismatchError, match="sha256 mismatch"):
        run(model="m", benchmark=benchmark, trajectories=tmp_path / "t", out=tmp_path / "e.json",
            cfg={"budgets": [4], "pass_n": 1, "num_candidates": 2, "benchmark": "toy_test"},
            search=SEARCH, lean=LEAN, policy=POLICY)  # fmt: skip
    assert policy.calls == [] and not (tmp_path / "e.json").exists()  # refused before searching


def test_a_benchmark_built_from_another_source_than_the_registry_pin_is_refused(tmp_path):
    jsonl = write_benchmark(tmp_path, toy_theorems(2), name="minif2f_test")
    meta = json.loads((tmp_path / "minif2f_test.meta.json").read_text())
    meta.update(benchmark="minif2f", source_sha256="0" * 64)  # hash of the jsonl still matches
    (tmp_path / "minif2f_test.meta.json").write_text(json.dumps(meta))
    with pytest.raises(HashMismatchError, match="registry pins benchmark 'minif2f'"):
        check_benchmark(jsonl)


def test_cli_eval_refuses_a_tampered_benchmark_naming_it(tmp_path, benchmark, repo_root, capsys):
    benchmark.write_text(benchmark.read_text().replace("reach", "reach 1 +"))
    rc = cli_main(["eval", "--params", str(repo_root / "params.yaml"), "--model", "m",
                   "--benchmark", str(benchmark), "--out", str(tmp_path / "e.json")])  # fmt: skip
    assert rc == 2
    err = capsys.readouterr().err
    assert str(benchmark) in err and "sha256 mismatch" in err


def test_cli_eval_without_search_scores_an_interrupted_run_as_partial(
    tmp_path, benchmark, repo_root
):
    theorems = list(read_theorems(benchmark))
    toy_search(tmp_path / "iter_0" / "eval", theorems[:4], RandomToyPolicy(seed=3), max_nodes=9)
    out = tmp_path / "iter_0" / "eval.json"
    rc = cli_main(["eval", "--params", str(repo_root / "params.yaml"), "--model", "m",
                   "--benchmark", str(benchmark), "--out", str(out), "--no-search"])  # fmt: skip
    assert rc == 0
    e = json.loads(out.read_text())
    assert e["status"]["label"] == "partial 4/10" and e["label"] == "iter_0"
    assert [b["budget"] for b in e["by_budget"]] == [100, 300, 600]  # params.yaml eval.budgets
    assert all(b["theorems"] == 4 for b in e["by_budget"])


def test_model_digests_ignore_what_every_run_writes_anew(tmp_path):
    """A retrained model with the same weights has the same digest in the eval JSON and the EBM's
    records, although its run_info.json (dates, wall times) and metrics.jsonl differ."""
    from burnqed.ebm.embeddings import model_digest
    from burnqed.eval.stage import path_digest

    m = tmp_path / "merged"
    m.mkdir()
    (m / "model.safetensors").write_bytes(b"weights")
    (m / "run_info.json").write_text('{"started": "2026-11-24T01:00:00"}')
    (m / "metrics.jsonl").write_text('{"wall_s": 1.0}\n')
    before = path_digest(m), model_digest(m, "last")
    (m / "run_info.json").write_text('{"started": "2026-11-24T02:00:00"}')
    (m / "metrics.jsonl").write_text('{"wall_s": 2.5}\n')
    assert (path_digest(m), model_digest(m, "last")) == before
    (m / "model.safetensors").write_bytes(b"other weights")
    after = path_digest(m), model_digest(m, "last")
    assert after[0] != before[0] and after[1] != before[1]


def test_the_eval_json_says_what_machine_made_it_and_reruns_compare_without_it(
    tmp_path, benchmark, fake_backends, monkeypatch
):
    """``machine`` (CPU, kernel level, threads, the pin with the caller's own variables) at the top
    and in the search manifest; two runs whose callers exported different variables differ there
    only, which :func:`without_run_specific` leaves out."""
    from burnqed import isa
    from burnqed.eval.stage import without_run_specific

    def evaluate() -> dict:
        shutil.rmtree(tmp_path / "iter_0", ignore_errors=True)  # a clean rerun in the same place
        with fake_backends(RandomToyPolicy(seed=3), ToyEnv()):
            return run(model=tmp_path / "model", benchmark=benchmark,
                       trajectories=tmp_path / "iter_0/eval", out=tmp_path / "iter_0/eval.json",
                       cfg={"budgets": [2, 6], "num_candidates": 4, "benchmark": "toy_test"},
                       search=SEARCH, lean=LEAN, policy=POLICY)  # fmt: skip

    a = evaluate()
    caller = json.loads(os.environ[isa.CALLER_VARIABLE])
    monkeypatch.setenv(isa.CALLER_VARIABLE, json.dumps({**caller, "MKL_CBWR": "COMPATIBLE"}))
    b = evaluate()
    for e in (a, b):
        for block in (e["machine"], e["provenance"]["search_manifest"]["machine"]):
            assert set(block) == {
                "cpu",
                "cpu_capability",
                "torch_threads",
                "isa_pin",
                "accelerator",
            }
            assert block["isa_pin"]["setting"] == os.environ[isa.SETTING_VARIABLE]
            assert block["torch_threads"] >= 1 and block["cpu_capability"]
    assert (
        b["machine"]["isa_pin"]["caller"]["MKL_CBWR"]
        == "COMPATIBLE"
        != (a["machine"]["isa_pin"]["caller"]["MKL_CBWR"])
    )
    assert a != b and without_run_specific(a) == without_run_specific(b)
    assert '"machine"' not in json.dumps(without_run_specific(a))


def test_the_proof_shown_for_a_theorem_does_not_depend_on_which_attempt_finished_first(tmp_path):
    """Two attempts proving a theorem at the same expansion: ``per_theorem`` shows the lowest
    attempt's proof whatever order the attempts were written in (a concurrent run finishes them in
    any order; the tie used to go to the first row)."""
    import pyarrow.parquet as pq

    theorems = toy_theorems(12, seed=0, low=2, high=5)
    toy_search(tmp_path / "a", theorems, RandomToyPolicy(seed=0), max_nodes=20, attempts=2)
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    for p in sorted((tmp_path / "b" / "summary").glob("part-*.parquet")):
        t = pq.read_table(p)  # each part's rows in the other order
        pq.write_table(t.take(list(range(t.num_rows))[::-1]), p)
    scored = [score_trajectories(tmp_path / d, expected=[t.name for t in theorems], budgets=[20],
                                 pass_n=2)["per_theorem"] for d in "ab"]  # fmt: skip
    assert scored[0] == scored[1]
    rows = pq.read_table(tmp_path / "a" / "summary").to_pylist()
    by = {}
    for r in rows:
        if r["status"] == "proved":
            by.setdefault(r["theorem"], []).append((r["proof_expansion"], r["attempt"], r["proof"]))
    ties = {
        t: sorted(v)
        for t, v in by.items()
        if len(v) == 2 and v[0][0] == v[1][0] and v[0][2] != v[1][2]
    }
    assert ties, "no theorem with two different proofs at the same expansion: the test needs one"
    per = {r["theorem"]: r for r in scored[0]}
    for t, v in ties.items():
        assert per[t]["proof"] == list(v[0][2])  # attempt 0's
