"""Expert iteration vs search only at the same search attempts (burnqed.eval.compute), on synthetic
searches — summary parts in the trajectory format, manifests as the search stage and its gather
write them — and on searches the search stage itself wrote: each arm searches the pool theorems it
has not proved itself, iteration 0's searches are both arms' first step, the curves, the arms'
eval-shaped pool curves and their paired test, training compute beside."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from burnqed.config import InputError
from burnqed.eval import compute
from burnqed.eval.paired import mcnemar_p, paired_test
from burnqed.study.analysis import measure_problems
from burnqed.study.registration import EVAL, POOL_CURVE
from burnqed.trajectory import (
    read_nodes,
    read_summary,
    search_part_dirs,
    write_parquet_atomic,
)
from tests.eval.conftest import toy_search
from tests.eval.searches import CONFIG, write_pool, write_search
from tests.search.fakes import RandomToyPolicy, toy_theorems


@pytest.fixture
def loop(tmp_path: Path) -> dict[str, Path]:
    """A pool of 6.  Iteration 0's pool search proves a, b (f: an infrastructure error only), its
    noise search c.  Expert iteration searches what neither proved: iteration 1 {d, e, f} proves
    d, e; iteration 2 {f} proves nothing.  Search only searches its own leftovers, the same at
    iteration 1 ({d, e, f}: proves f), then {d, e} at iteration 2: proves d."""
    e1 = {"model": "models/iter_1/merged", "ebm": "models/iter_1/ebm"}
    e2 = {"model": "models/iter_2/merged", "ebm": "models/iter_2/ebm"}
    return {
        "pool": write_pool(tmp_path / "pool.jsonl"),
        "iter_0": write_search(tmp_path / "iter_0" / "search", [
            ("a", "proved", 3, 30), ("b", "proved", 5, 50), ("c", "failed", 10, 100),
            ("d", "failed", 10, 100), ("e", "failed", 10, 100), ("f", "error", 1, 7),
        ], shards=2),
        "noise": write_search(tmp_path / "iter_0" / "search_noise", [
            ("a", "failed", 10, 100), ("b", "failed", 10, 100), ("c", "proved", 2, 20),
            ("d", "failed", 10, 100), ("e", "failed", 10, 100), ("f", "error", 1, 7),
        ], salt="search_noise/iter_0"),
        "iter_1": write_search(tmp_path / "iter_1" / "search", [
            ("d", "proved", 6, 60), ("e", "proved", 9, 90), ("f", "failed", 10, 100),
        ], salt="search/iter_1", **e1),
        "only_1": write_search(tmp_path / "iter_1" / "search_only", [
            ("d", "failed", 10, 100), ("e", "failed", 10, 100), ("f", "proved", 4, 40),
        ], salt="search_only/iter_1"),
        "iter_2": write_search(tmp_path / "iter_2" / "search", [("f", "failed", 10, 100)],
                               salt="search/iter_2", **e2),
        "only_2": write_search(tmp_path / "iter_2" / "search_only", [
            ("d", "proved", 8, 80), ("e", "failed", 10, 100),
        ], salt="search_only/iter_2"),
    }  # fmt: skip


def report(loop, **kw):
    return compute.compute_report(
        pool=loop["pool"], shared=[loop["iter_0"], loop["noise"]],
        expert=[loop["iter_1"], loop["iter_2"]], search_only=[loop["only_1"], loop["only_2"]],
        **kw,
    )  # fmt: skip


def test_one_search_counts_theorems_proofs_nodes_and_tokens_over_every_shard(loop):
    s = compute.search_compute(loop["iter_0"], "iter_0 search")
    # f's only attempt was an infrastructure error: not attempted, but its compute was spent
    assert (s["theorems"], s["proved"], s["attempts"], s["errors"]) == (5, 2, 6, 1)
    assert (s["nodes_expanded"], s["tokens"], s["value_scorings"]) == (39, 387, 0)
    assert s["proved_theorems"] == ["a", "b"] and s["max_nodes"] == 100


def test_the_curves_share_iteration_0s_searches_and_count_a_theorem_once(loop):
    r = report(loop)
    assert r["pool_theorems"] == 6  # the data stage's pool
    ei, so = r["curves"][compute.EXPERT], r["curves"][compute.SEARCH_ONLY]
    # step 1 is iteration 0's pool and noise searches, both arms': their compute and proofs
    assert ei[0] == so[0] and ei[0]["searches"] == ["iter_0 search", "iter_0 search_noise"]
    assert ei[0]["proved"] == 3 and ei[0]["nodes_expanded"] == 39 + 43
    # expert iteration: {a, b, c}, + {d, e}, + nothing
    assert [c["proved"] for c in ei] == [3, 5, 5]
    assert [c["nodes_expanded"] for c in ei] == [82, 82 + 25, 82 + 25 + 10]
    assert [c["tokens"] for c in ei] == [814, 814 + 250, 814 + 250 + 100]
    # search only: {a, b, c}, + {f}, + {d}
    assert [c["proved"] for c in so] == [3, 4, 5]
    assert [c["nodes_expanded"] for c in so] == [82, 82 + 24, 82 + 24 + 18]
    assert ei[-1]["pass_rate"] == pytest.approx(5 / 6) == so[-1]["pass_rate"]


def test_the_arms_are_paired_per_theorem_on_the_cumulative_solved_indicator(loop):
    r = report(loop)
    t1, t2 = r["paired"]  # after iterations 1 and 2; after iteration 0 the arms are one
    assert (t1["iteration"], t1["after"], t1["before"]) == (1, "expert iteration", "search only")
    # after iteration 1: expert {a..e}, search only {a, b, c, f}: d, e gained, f lost
    assert (t1["gained"], t1["lost"], t1["both"], t1["neither"], t1["theorems"]) == (2, 1, 3, 0, 6)
    assert t1["gained_theorems"] == ["d", "e"] and t1["lost_theorems"] == ["f"]
    assert t1["p_value"] == mcnemar_p(2, 1) and t1["verdict"] == "no measurable effect"
    # after iteration 2: expert {a..e}, search only {a, b, c, d, f}: e gained, f lost
    assert (t2["gained"], t2["lost"], t2["gained_theorems"]) == (1, 1, ["e"])
    # the study reads the arms' files with the same test
    arms = r["arms"]
    again = paired_test(arms[compute.SEARCH_ONLY], arms[compute.EXPERT], varies="training",
                        budget=3)  # fmt: skip
    assert (again["gained"], again["lost"], again["reasons"]) == (1, 1, [])


def test_search_only_on_expert_iterations_leftovers_is_refused(loop, tmp_path):
    """Today's bias, refused: search only searching iteration 2's pool of expert iteration ({f}),
    which holds f — a theorem search only had already proved at iteration 1."""
    leftovers = write_search(tmp_path / "iter_2" / "leftovers", [("f", "proved", 3, 30)])
    with pytest.raises(InputError) as e:
        compute.compute_report(pool=loop["pool"], shared=[loop["iter_0"], loop["noise"]],
                               expert=[loop["iter_1"], loop["iter_2"]],
                               search_only=[loop["only_1"], leftovers])  # fmt: skip
    msg = str(e.value)
    assert "\n" not in msg and str(leftovers) in msg and "search only had already proved" in msg


def test_each_arm_is_an_eval_shaped_pool_curve_the_study_accepts_as_one(loop):
    r = report(loop, seed=7)
    e = r["arms"][compute.EXPERT]
    assert e["kind"] == compute.CURVE_KIND and e["budgets"] == [1, 2, 3]
    rows = {x["theorem"]: x for x in e["per_theorem"]}
    assert {t: x["budget_at_proof"] for t, x in rows.items()} == {
        "a": 1,
        "b": 1,
        "c": 1,
        "d": 2,
        "e": 2,
        "f": None,
    }
    assert all(x["evaluated"] for x in rows.values())  # f: attempted by iteration 1's search
    assert e["status"]["complete"] and e["status"]["label"] == "complete 6/6"
    assert e["benchmark"]["role"] == "pool" and e["benchmark"]["name"] == "search_pool"
    assert e["benchmark"]["sha256"] == r["arms"][compute.SEARCH_ONLY]["benchmark"]["sha256"]
    assert e["provenance"]["seeds"]["seed"] == 7
    assert e["provenance"]["model"]["path"] == "models/iter_2/merged"
    assert r["arms"][compute.SEARCH_ONLY]["provenance"]["ebm"] is None
    assert [b["solved"] for b in e["by_budget"]] == [3, 5, 5]
    # a pool curve passes as one, never as an eval on a confirmation benchmark
    assert measure_problems("x", e, POOL_CURVE) == []
    assert measure_problems("x", e, EVAL) == ["x is on search_pool (pool)"]


def test_searches_with_different_budgets_are_refused(loop, tmp_path):
    rows = [("d", "failed", 1, 1), ("e", "failed", 1, 1), ("f", "failed", 1, 1)]
    longer = write_search(tmp_path / "longer", rows, config={**CONFIG, "max_nodes": 200})
    with pytest.raises(InputError, match="max_nodes"):
        compute.compute_report(pool=loop["pool"], shared=[loop["iter_0"], loop["noise"]],
                               expert=[loop["iter_1"]], search_only=[longer])  # fmt: skip


def test_one_search_of_each_arm_per_later_iteration(loop):
    with pytest.raises(InputError, match="one of each per iteration"):
        compute.compute_report(pool=loop["pool"], shared=[loop["iter_0"]],
                               expert=[loop["iter_1"]], search_only=[])  # fmt: skip


def _tokens(total: int) -> dict:
    return {"total": total, "prompt": total - 10, "completion": 10, "value": 0, "steps": 4}


def test_training_is_stated_beside_with_its_tokens_and_never_added(loop, tmp_path):
    base = tmp_path / "base"
    base.mkdir()
    (base / "burnqed_model.json").write_text(json.dumps(
        {"training": {"steps": 50, "examples": 900, "tokens": _tokens(5000)}}))  # fmt: skip
    adapters = []
    for i, steps in ((0, 6), (1, 4), (2, 4)):
        a = tmp_path / f"adapter_{i}"
        a.mkdir()
        summary = {"steps": steps, "data": {"train_examples": 100 + i}, "tokens": _tokens(600 + i)}
        (a / "training_summary.json").write_text(json.dumps(summary))
        adapters.append(a)
    out = tmp_path / "r"
    arms = {compute.EXPERT: out / "compute" / "ei.json", compute.SEARCH_ONLY: out / "so.json"}
    r = compute.run(pool=loop["pool"], shared=[loop["iter_0"], loop["noise"]],
                    expert=[loop["iter_1"], loop["iter_2"]],
                    search_only=[loop["only_1"], loop["only_2"]], base=base, adapters=adapters,
                    out_json=out / "compute.json", out_md=out / "compute.md", out_arms=arms,
                    seed=3)  # fmt: skip
    t = r["training"]["iterations"]
    assert list(t) == ["base", "iter_0", "iter_1", "iter_2"]
    assert t["base"]["tokens"]["total"] == 5000 and t["iter_1"]["tokens"]["total"] == 601
    assert t["iter_1"]["steps"] == 4 and t["iter_1"]["stopped"] is None
    # search compute is the searches' own sums, nothing of training in it
    assert r["curves"][compute.EXPERT][-1]["nodes_expanded"] == 117
    written = json.loads((out / "compute.json").read_text())
    assert written["arm_files"] == {k: str(v) for k, v in arms.items()} and "arms" not in written
    assert json.loads(arms[compute.EXPERT].read_text()) == json.loads(
        json.dumps(r["arms"][compute.EXPERT])
    )
    md = (out / "compute.md").read_text()
    assert md.startswith("## Search only at the same compute")
    assert "| 1 | 107 | 1064 | 0 | 5/6 | 83.3% | 106 | 1054 | 4/6 | 66.7% |" in md
    assert "| 1 | 2 | 2 | 1 | 3 | 0 | 6 | 1.000 | no measurable effect |" in md
    assert "| iter_1 | 4 | 101 | 601 | 591 | 10 | 0 | – |" in md
    assert "| base | 50 | 900 | 5000 | 4990 | 10 | 0 | – |" in md


def test_an_iteration_whose_training_stopped_is_named_in_the_comparison(loop, tmp_path):
    adapters = []
    for i in range(3):
        a = tmp_path / f"adapter_{i}"
        a.mkdir()
        stopped = {"step": 50, "reason": "joint step 50: held-out probe_accuracy fell",
                   "previous_adapter": "models/iter_0/adapter"} if i == 1 else None  # fmt: skip
        (a / "training_summary.json").write_text(json.dumps({"steps": 4, "stopped": stopped}))
        adapters.append(a)
    r = report(loop, adapters=adapters)
    assert list(r["stopped"]) == ["iter_1"]
    prov = r["arms"][compute.EXPERT]["provenance"]["training_stopped"]
    assert prov == {"iter_1": r["stopped"]["iter_1"]}
    assert r["arms"][compute.SEARCH_ONLY]["provenance"]["training_stopped"] == {}
    md = compute.compute_markdown(r)
    assert "iter_1's model is the previous iteration's (models/iter_0/adapter)" in md
    assert "stopped at step 50" in md and "| iter_1 | 4 | None |" in md


def test_the_summary_keeps_each_arms_curve_the_paired_tests_and_the_training_tokens(loop, tmp_path):
    """burnqed.report.summary.compute_figures: what the docs quote of the comparison (the demo's
    summary.json, ``compute``): each arm's cumulative curve, the paired test after each iteration
    with its verdict, each training's token total, the iterations a guard stopped."""
    from burnqed.report.summary import CURVE_KEYS, build, compute_figures

    adapters = []
    for i in range(3):
        a = tmp_path / f"adapter_{i}"
        a.mkdir()
        stopped = {"step": 50, "reason": "joint step 50: held-out probe_accuracy fell",
                   "previous_adapter": "models/iter_0/adapter"} if i == 2 else None  # fmt: skip
        summary = {"steps": 4, "tokens": _tokens(700 + i), "stopped": stopped}
        (a / "training_summary.json").write_text(json.dumps(summary))
        adapters.append(a)
    r = report(loop, adapters=adapters)
    f = compute_figures(r)
    assert f["pool_theorems"] == 6 and f["stopped"] == ["iter_2"]
    assert f["training_tokens"] == {"iter_0": 700, "iter_1": 701, "iter_2": 702}
    for arm, steps in r["curves"].items():
        assert f["curves"][arm] == [{k: s[k] for k in CURVE_KEYS} for s in steps]
    # expert iteration: a, b, c, then d, e; search only: a, b, c, then f, then d
    assert [s["proved"] for s in f["curves"][compute.EXPERT]] == [3, 5, 5]
    assert [s["proved"] for s in f["curves"][compute.SEARCH_ONLY]] == [3, 4, 5]
    assert [(t["iteration"], t["gained"], t["lost"]) for t in f["paired"]] == [(1, 2, 1), (2, 1, 1)]
    assert all(t["p_value"] == mcnemar_p(t["gained"], t["lost"]) for t in f["paired"])
    assert [t["verdict"] for t in f["paired"]] == [t["verdict"] for t in r["paired"]]
    compare = {"budgets": [1], "rows": [], "learning": {}}
    assert build(compare, compute=r)["compute"] == f
    assert build(compare)["compute"] is None and compute_figures(None) is None


def test_a_missing_training_summary_is_named(loop, tmp_path):
    with pytest.raises(InputError, match=r"training_summary\.json"):
        report(loop, adapters=[tmp_path / "nothing"])


def test_real_search_directories_are_counted_from_their_own_rows(tmp_path):
    """Searches written by the search stage itself (toy policy and prover): the counts are the
    rows' sums, tokens and value scorings included (node rows with an energy), and the arms'
    own pools are what the shared step left."""
    theorems = toy_theorems(10, seed=8, low=5, high=20)
    pool = write_pool(tmp_path / "pool.jsonl", [t.key for t in theorems])
    toy_search(tmp_path / "iter_0", theorems, RandomToyPolicy(seed=1), max_nodes=12)
    proved = set(pc.filter(read_summary(tmp_path / "iter_0").table.column("theorem"),
                           pc.equal(read_summary(tmp_path / "iter_0").table.column("status"),
                                    "proved")).to_pylist())  # fmt: skip
    left = [t for t in theorems if t.key not in proved]
    assert proved and left
    for name, seed in (("iter_1", 2), ("only_1", 3)):
        toy_search(tmp_path / name, left, RandomToyPolicy(seed=seed), max_nodes=12)
    # the value model scored every other state of iteration 1's (planted: the toy search has none)
    (part,) = search_part_dirs(tmp_path / "iter_1")
    scored = 0
    for f in sorted((part / "nodes").glob("*.parquet")):
        t = pq.read_table(f)
        energies = [float(k) if k % 2 else None for k in range(t.num_rows)]
        scored += sum(x is not None for x in energies)
        k = t.schema.get_field_index("ebm_energy")
        write_parquet_atomic(t.set_column(k, t.schema.field(k), pa.array(energies, pa.float32())),
                             f)  # fmt: skip
    assert read_nodes(part).table.num_rows > scored > 0
    r = compute.compute_report(pool=pool, shared=[tmp_path / "iter_0"],
                               expert=[tmp_path / "iter_1"],
                               search_only=[tmp_path / "only_1"])  # fmt: skip
    for label, name in (("iter_0 iter_0", "iter_0"), ("iter_1 search only", "only_1")):
        rows = read_summary(tmp_path / name).table.to_pylist()
        s = r["searches"][label]
        assert s["tokens"] == sum(x["tokens"] for x in rows) > 0
        assert s["nodes_expanded"] == sum(x["nodes_expanded"] for x in rows) > 0
        assert s["proved"] == len({x["theorem"] for x in rows if x["status"] == "proved"})
    assert r["searches"]["iter_1 search"]["value_scorings"] == scored
    assert r["curves"][compute.EXPERT][-1]["value_scorings"] == scored
    (t,) = r["paired"]
    assert t["theorems"] == 10 == t["gained"] + t["lost"] + t["both"] + t["neither"]
