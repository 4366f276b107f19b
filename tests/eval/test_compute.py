"""Expert iteration vs search only at the same compute (burnqed.eval.compute), on synthetic searches:
summary parts in the trajectory format, manifests as the search stage and its gather write them."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from burnqed.config import InputError
from burnqed.eval import compute
from burnqed.eval.paired import mcnemar_p
from burnqed.trajectory import NODE_SCHEMA, SUMMARY_SCHEMA, read_summary, write_parquet_atomic
from tests.eval.conftest import toy_search
from tests.search.fakes import RandomToyPolicy, toy_theorems

CONFIG = {"max_nodes": 100, "attempts": 1, "temperature": 0.8}


def _row(theorem: str, status: str, nodes: int, tokens: int, attempt: int = 0) -> dict:
    return {
        "theorem": theorem, "attempt": attempt, "status": status,
        "ended_by": "proof" if status == "proved" else "budget", "proof": None,
        "verified": status == "proved", "proof_expansion": None, "nodes_expanded": nodes,
        "nodes_total": 0, "rejected_proofs": 0, "rejections": [], "wall_s": 0.1, "lean_s": 0.0,
        "gen_wait_s": 0.0, "tokens": tokens, "wall_timeouts": 0, "reasons": [],
    }  # fmt: skip


def write_search(
    directory: Path, rows: list[tuple], *, config: dict | None = None, shards: int = 1
) -> Path:
    """A gathered search: ``shards`` shard directories (rows dealt round-robin), each with one
    summary part, its (empty: no node rows announced) nodes part and a manifest; the gathered
    manifest lists them."""
    cfg = config or CONFIG
    per_shard = {}
    for k in range(shards):
        d = directory / f"shard_{k}"
        (d / "summary").mkdir(parents=True)
        (d / "nodes").mkdir()
        part = [_row(*r) for r in rows[k::shards]]
        write_parquet_atomic(pa.Table.from_pylist(part, schema=SUMMARY_SCHEMA),
                             d / "summary" / "part-000000.parquet")  # fmt: skip
        write_parquet_atomic(NODE_SCHEMA.empty_table(), d / "nodes" / "part-000000.parquet")
        m = {"config": cfg, "model": "models/iter_0/merged", "ebm": None,
             "seed_salt": None, "sampling": {"temperature": cfg["temperature"]}}  # fmt: skip
        (d / "manifest.json").write_text(json.dumps(m))
        per_shard[str(d)] = m
    gathered = {"shards": sorted(per_shard), "per_shard": per_shard}
    (directory / "manifest.json").write_text(json.dumps(gathered))
    return directory


@pytest.fixture
def loop(tmp_path: Path) -> dict[str, Path]:
    """Iteration 0 on a pool of 6; iteration 1's pool is the 4 it failed, searched by expert
    iteration (proves c, d, e) and by search only (proves c, and a theorem iteration 0 proved
    is not in the pool); iteration 2's pool the 2 left."""
    return {
        "iter_0": write_search(tmp_path / "iter_0", [
            ("a", "proved", 3, 30), ("b", "proved", 5, 50), ("c", "failed", 10, 100),
            ("d", "failed", 10, 100), ("e", "failed", 10, 100), ("f", "error", 1, 7),
        ], shards=2),
        "iter_1": write_search(tmp_path / "iter_1", [
            ("c", "proved", 4, 40), ("d", "proved", 6, 60), ("e", "proved", 9, 90),
            ("f", "failed", 10, 100),
        ]),
        "only_1": write_search(tmp_path / "only_1", [
            ("c", "proved", 2, 20), ("d", "failed", 10, 100), ("e", "failed", 10, 100),
            ("f", "failed", 10, 100),
        ]),
        "iter_2": write_search(tmp_path / "iter_2", [("c", "proved", 1, 10), ("f", "failed", 10, 100)]),
        "only_2": write_search(tmp_path / "only_2", [("c", "failed", 10, 100), ("f", "proved", 8, 80)]),
    }  # fmt: skip


def test_one_search_counts_theorems_proofs_nodes_and_tokens_over_every_shard(loop):
    s = compute.search_compute(loop["iter_0"], "iter_0 search")
    # f's only attempt was an infrastructure error: not attempted, but its compute was spent
    assert (s["theorems"], s["proved"], s["attempts"], s["errors"]) == (5, 2, 6, 1)
    assert (s["nodes_expanded"], s["tokens"]) == (39, 387)
    assert s["proved_theorems"] == ["a", "b"] and s["max_nodes"] == 100


def test_cumulative_curves_count_a_theorem_proved_twice_once(loop):
    r = compute.compute_report(
        [loop["iter_0"], loop["iter_1"], loop["iter_2"]], [loop["only_1"], loop["only_2"]]
    )
    assert r["pool_theorems"] == 6  # a–f: every theorem either arm attempted
    ei = r["curves"][compute.EXPERT]
    so = r["curves"][compute.SEARCH_ONLY]
    assert [c["search"] for c in ei] == ["iter_0 search", "iter_1 search", "iter_2 search"]
    assert [c["search"] for c in so] == [
        "iter_0 search",
        "iter_1 search only",
        "iter_2 search only",
    ]
    # expert iteration: {a, b}, + {c, d, e}, + {c} again (counted once)
    assert [c["proved"] for c in ei] == [2, 5, 5]
    assert [c["nodes_expanded"] for c in ei] == [39, 39 + 29, 39 + 29 + 11]
    assert [c["tokens"] for c in ei] == [387, 387 + 290, 387 + 290 + 110]
    # search only: {a, b}, + {c}, + {f}
    assert [c["proved"] for c in so] == [2, 3, 4]
    assert [c["nodes_expanded"] for c in so] == [39, 39 + 32, 39 + 32 + 18]
    assert ei[-1]["pass_rate"] == pytest.approx(5 / 6) and so[-1]["pass_rate"] == pytest.approx(
        4 / 6
    )


def test_mcnemar_pairs_each_iteration_with_its_control_on_the_same_theorems(loop):
    r = compute.compute_report(
        [loop["iter_0"], loop["iter_1"], loop["iter_2"]], [loop["only_1"], loop["only_2"]]
    )
    t1, t2 = r["paired"]
    assert (t1["iteration"], t1["after"], t1["before"]) == (
        1,
        "iter_1 search",
        "iter_1 search only",
    )
    assert (t1["gained"], t1["lost"], t1["both"], t1["neither"], t1["theorems"]) == (2, 0, 1, 1, 4)
    assert t1["gained_theorems"] == ["d", "e"] and t1["p_value"] == mcnemar_p(2, 0) == 0.5
    assert t1["verdict"] == "no measurable effect" and t1["budget_before"] == 100
    assert (t2["gained"], t2["lost"], t2["lost_theorems"]) == (1, 1, ["f"])


def test_a_clear_effect_is_called_better(tmp_path):
    pool = [f"t{k}" for k in range(8)]
    base = write_search(tmp_path / "i0", [(t, "failed", 5, 5) for t in pool])
    ei = write_search(tmp_path / "i1", [(t, "proved", 5, 5) for t in pool])
    so = write_search(tmp_path / "s1", [(t, "failed", 5, 5) for t in pool])
    (t,) = compute.compute_report([base, ei], [so])["paired"]
    assert (t["gained"], t["lost"], t["verdict"]) == (8, 0, "better") and t["p_value"] < 0.01


def test_searches_of_different_pools_are_refused_in_one_line(loop, tmp_path):
    other = write_search(tmp_path / "other", [("c", "proved", 1, 1), ("z", "failed", 1, 1)])
    with pytest.raises(InputError) as e:
        compute.compute_report([loop["iter_0"], loop["iter_1"]], [other])
    msg = str(e.value)
    assert "\n" not in msg and "pools differ" in msg
    assert str(loop["iter_1"]) in msg and str(other) in msg


def test_searches_with_different_budgets_are_refused(loop, tmp_path):
    rows = [
        ("c", "proved", 1, 1),
        ("d", "failed", 1, 1),
        ("e", "failed", 1, 1),
        ("f", "failed", 1, 1),
    ]
    longer = write_search(tmp_path / "longer", rows, config={**CONFIG, "max_nodes": 200})
    with pytest.raises(InputError, match="max_nodes"):
        compute.compute_report([loop["iter_0"], loop["iter_1"]], [longer])


def test_one_control_per_later_iteration(loop):
    with pytest.raises(InputError, match="one control per later iteration"):
        compute.compute_report([loop["iter_0"], loop["iter_1"]], [])


def test_training_is_stated_apart_and_never_added(loop, tmp_path):
    adapters = {}
    for i, steps in ((0, 6), (1, 4)):
        a = tmp_path / f"adapter_{i}"
        a.mkdir()
        summary = {"steps": steps, "data": {"train_examples": 100 + i}}
        (a / "training_summary.json").write_text(json.dumps(summary))
        adapters[i] = a
    out_json, out_md = tmp_path / "r" / "compute.json", tmp_path / "r" / "compute.md"
    r = compute.run(expert=[loop["iter_0"], loop["iter_1"]], search_only=[loop["only_1"]],
                    training=adapters, out_json=out_json, out_md=out_md)  # fmt: skip
    t = r["training"]["iterations"]
    assert t == {
        "iter_0": {"summary": str(adapters[0] / "training_summary.json"), "steps": 6,
                   "train_examples": 100, "tokens": None},
        "iter_1": {"summary": str(adapters[1] / "training_summary.json"), "steps": 4,
                   "train_examples": 101, "tokens": None},
    }  # fmt: skip
    # search compute is the searches' own sums, nothing of training in it
    assert r["curves"][compute.EXPERT][-1]["nodes_expanded"] == 39 + 29
    assert json.loads(out_json.read_text()) == json.loads(json.dumps(r))
    md = out_md.read_text()
    assert md.startswith("## Search only at the same compute")
    assert (
        "| iter_1 search | 68 | 677 | 5/6 | 83.3% | iter_1 search only | 71 | 707 | 3/6 | 50.0% |"
        in md
    )
    assert "| 1 | 100 | 2 | 0 | 1 | 1 | 4 | 0.500 | no measurable effect |" in md
    assert "| iter_1 | 4 | 101 | not recorded |" in md


def test_a_missing_training_summary_is_named(loop, tmp_path):
    with pytest.raises(InputError, match=r"training_summary\.json"):
        compute.compute_report([loop["iter_0"], loop["iter_1"]], [loop["only_1"]],
                               {1: tmp_path / "nothing"})  # fmt: skip


def test_real_search_directories_are_counted_from_their_own_rows(tmp_path):
    """Searches written by the search stage itself (toy policy and prover): the counts are the
    summary rows' sums, tokens included, and each search is paired with its control."""
    theorems = toy_theorems(10, seed=8, low=5, high=20)
    dirs = {}
    for name, seed in (("iter_0", 1), ("iter_1", 2), ("only_1", 3)):
        toy_search(tmp_path / name, theorems, RandomToyPolicy(seed=seed), max_nodes=12)
        dirs[name] = tmp_path / name
    r = compute.compute_report([dirs["iter_0"], dirs["iter_1"]], [dirs["only_1"]])
    for label, name in (("iter_0 search", "iter_0"), ("iter_1 search only", "only_1")):
        rows = read_summary(dirs[name]).table.to_pylist()
        s = r["searches"][label]
        assert s["tokens"] == sum(x["tokens"] for x in rows) > 0
        assert s["nodes_expanded"] == sum(x["nodes_expanded"] for x in rows) > 0
        assert s["proved"] == len({x["theorem"] for x in rows if x["status"] == "proved"})
    (t,) = r["paired"]
    assert t["theorems"] == 10 == t["gained"] + t["lost"] + t["both"] + t["neither"]
