"""The eval stage through the expansion cache: the eval JSON is the same with the cache off, on and
empty, and on and full, except its ``cache`` block (and clock fields); the EBM ablation's twin is
answered from the cache its partner filled; ``compare.md`` states each eval's hit rates and the
time saved."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from burnqed.eval.compare import run as compare_run
from burnqed.eval.stage import run, without_run_specific
from tests.eval.conftest import LEAN, POLICY, SEARCH
from tests.search.fakes import ToyEnv, ToyValue
from tests.search.test_cache import SeededToyPolicy

EVAL = {"budgets": [2, 6], "num_candidates": 4, "benchmark": "toy_test"}


def evaluate(tmp_path, benchmark, fake_backends, name, *, cache=None, ebm=None) -> dict:
    shutil.rmtree(tmp_path / name, ignore_errors=True)
    with fake_backends(SeededToyPolicy(seed=3), ToyEnv()):
        return run(model=tmp_path / "model", benchmark=benchmark, trajectories=tmp_path / name,
                   out=tmp_path / f"{name}.json", cfg=EVAL, search=SEARCH, lean=LEAN,
                   policy=POLICY, ebm=ebm, label=name, cache=cache)  # fmt: skip


def test_the_eval_json_is_the_same_with_the_cache_off_empty_and_full(
    tmp_path, benchmark, fake_backends
):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "model.safetensors").write_bytes(b"w")
    off = evaluate(tmp_path, benchmark, fake_backends, "off")
    empty = evaluate(tmp_path, benchmark, fake_backends, "empty", cache=tmp_path / "cache")
    full = evaluate(tmp_path, benchmark, fake_backends, "full", cache=tmp_path / "cache")
    assert off["cache"] is None and off["provenance"]["search_manifest"]["cache"] is None
    assert empty["cache"]["policy"]["hit_rate"] == 0.0 and full["cache"]["policy"]["hit_rate"] == 1
    assert full["cache"]["lean"]["hit_rate"] == 1.0
    assert full["cache"] == full["provenance"]["search_manifest"]["cache"]
    assert 0 < len(off["solved_theorems"]) < 10  # the test can tell

    def comparable(e: dict) -> dict:
        e = without_run_specific(e)
        for k in ("label", "provenance"):  # where each one's own files are named
            e.pop(k)
        return e

    assert comparable(off) == comparable(empty) == comparable(full)
    manifests = [without_run_specific(e["provenance"]["search_manifest"]) for e in (off, full)]
    assert manifests[0] == manifests[1]
    assert '"cache"' not in json.dumps(without_run_specific(full))


def test_the_ablation_twin_is_answered_from_the_cache_and_compare_states_it(
    tmp_path, benchmark, fake_backends, monkeypatch
):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "model.safetensors").write_bytes(b"w")
    monkeypatch.setattr("burnqed.search.value.load_value_model", lambda path, gen: ToyValue())
    (tmp_path / "ebm").mkdir()
    cache = tmp_path / "cache"
    with_ebm = evaluate(
        tmp_path, benchmark, fake_backends, "eval", cache=cache, ebm=tmp_path / "ebm"
    )
    twin = evaluate(tmp_path, benchmark, fake_backends, "eval_no_ebm", cache=cache)
    assert with_ebm["cache"]["policy"]["candidates"]["hits"] == 0
    # The same model, theorems, seeds and temperature: the root and every state both searches
    # expand get the same candidates, and the same tactics on the same states the same outcomes.
    assert twin["cache"]["policy"]["candidates"]["hits"] > 0
    assert twin["cache"]["lean"]["hits"] > 0 and twin["cache"]["starts"]["hits"] == 10
    c = compare_run(evals=[tmp_path / "eval.json", tmp_path / "eval_no_ebm.json"],
                    out_md=tmp_path / "compare.md")  # fmt: skip
    md = (tmp_path / "compare.md").read_text()
    assert "## Expansion cache" in md
    rows = {r["file"]: r for r in c["cache"]}
    row = rows[str(tmp_path / "eval_no_ebm.json")]
    assert row["policy_hit_rate"] == twin["cache"]["policy"]["hit_rate"]
    assert row["lean_hits"] == twin["cache"]["lean"]["hits"]
    rate = twin["cache"]["policy"]["hit_rate"]
    assert f"| {tmp_path / 'eval_no_ebm.json'} | {100 * rate:.1f}% (" in md
    assert "s of generation and" in md


def cache_block(*, evicted=None, conflicts=0, stale=0, redone=0, asked=4, disagreed=0) -> dict:
    """An eval JSON's ``cache`` block (burnqed.search.cache.CachedSource.stats), as far as
    compare.md reads it: 100 Lean questions, 90 answered from the cache."""
    return {
        "policy": {"candidates": {"hits": 30, "misses": 10}, "hit_rate": 0.75,
                   "expansions": {"hits": 5}, "saved_s": 2.0},
        "lean": {"hits": 90, "misses": 10, "hit_rate": 0.9, "net_saved_s": 1.0},
        "states": {"rebuilds": 3, "disagreements": 0, "redone_attempts": redone},
        "rechecks": {"asked": asked, "agreed": asked - disagreed, "disagreed": disagreed},
        "evicted": evicted or {}, "conflicts": conflicts, "stale_attempts": stale,
    }  # fmt: skip


def test_compare_reports_what_lean_refuted_and_says_the_same_results_only_when_true():
    """Issue 63: compare.md's cache section counts re-check disagreements, evictions, conflicts,
    redone and stale attempts, flags an eval past ``report.cache_refuted_max``, and says the
    results are those without the cache only when nothing it served was refuted (cb4cd23 said
    "the same results with or without it" whatever the block held)."""
    from burnqed.eval.compare import cache_markdown, cache_rows

    clean = (Path("clean.json"), {"label": "clean", "cache": cache_block()})
    refuted = (Path("refuted.json"), {"label": "refuted", "cache": cache_block(
        evicted={"recheck": 1, "rejected_proof": 1}, disagreed=1, redone=2)})  # fmt: skip
    stale = (Path("stale.json"), {"label": "stale", "cache": cache_block(stale=1, conflicts=1)})

    rows = cache_rows([clean, refuted, stale])
    md = "\n".join(cache_markdown(rows))
    assert "the same results" not in md, "compare.md claims the same results after refutations"
    assert "Lean refuted 3 answer(s)" in md and "1 attempt(s) were written before" in md
    assert "> **Flagged**" in md and "refuted.json, stale.json" in md
    by = {r["label"]: r for r in rows}
    assert by["refuted"]["evicted"] == {"recheck": 1, "rejected_proof": 1}
    assert by["refuted"]["rechecks_disagreed"] == 1 and by["refuted"]["redone_attempts"] == 2
    assert "| refuted.json |" in md and "recheck 1, rejected_proof 1" in md
    # Above the threshold only: 2 of 100 questions refuted flags at 1 %, not at 5 %; stale always.
    assert [r["flagged"] for r in cache_rows([clean, refuted, stale], 0.05)] == [False, False, True]
    assert [r["flagged"] for r in cache_rows([clean, refuted, stale], 0.01)] == [False, True, True]
    md = "\n".join(cache_markdown(cache_rows([clean])))
    assert "these are the results without it" in md and "Flagged" not in md
