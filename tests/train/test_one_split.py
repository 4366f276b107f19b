"""The one theorem split (burnqed.split, issue 44 §4): a theorem the value model holds out — no head
and no fitted weight trains on it, its held-out checks are measured on it — was also outside the
SFT training data of every policy upstream of the head that scores it."""

from __future__ import annotations

import pyarrow as pa

from burnqed.ebm.fit import pool_decisions
from burnqed.ebm.groups import build_groups, load_states, trajectory_dirs
from burnqed.split import TheoremSplit
from burnqed.train.positives import read_positive_steps, split_steps_by_theorem
from burnqed.value.fit import heldout_decisions
from tests.ebm.conftest import toy_search

SPLIT = TheoremSplit(val_fraction=0.15, test_fraction=0.15, seed=3)


def _theorems(table: pa.Table) -> set[str]:
    return set(table.column("theorem").to_pylist())


def test_no_held_out_theorems_proof_step_reaches_a_training_set_upstream_of_its_head(tmp_path):
    """Two iterations of searches (iteration 0's pool and noise searches, iteration 1's search of
    partly the same theorems): SFT of iterations 1 and 2 trains on the steps of the split's training
    theorems; the EBM's groups, the joint head's and the energy weight's held-out figures are the
    split's held-out theorems; none of those theorems' proof steps is in either SFT training set,
    and none of the heads trains on a group of theirs."""
    results = tmp_path / "results"
    iter0, noise, iter1 = (results / "iter_0" / "search", results / "iter_0" / "search_noise",
                           results / "iter_1" / "search")  # fmt: skip
    for k, d in enumerate((iter0, noise, iter1)):  # real searches of the same toy theorems
        toy_search(d / "shard_0", theorems=40, seed=k)
        (d / "manifest.json").write_text("{}")
    # SFT of iteration 1 (iteration 0's searches) and 2 (all three): the steps each trains on.
    sft_train = {}
    for i, searches in ((1, [iter0, noise]), (2, [iter0, noise, iter1])):
        steps = read_positive_steps(searches).table
        split = split_steps_by_theorem(steps, SPLIT)
        sft_train[i] = split.train
        assert _theorems(split.val) | _theorems(split.test), "something is held out"
    trained_on = set().union(*(_theorems(t) for t in sft_train.values()))
    trained_steps = {(s, a) for t in sft_train.values()
                     for s, a in zip(t.column("state_before").to_pylist(),
                                     t.column("tactic").to_pylist(), strict=True)}  # fmt: skip

    # The value model of iteration 2 (its heads, decoupled or joint, learn from all three).
    dirs = [d for s in (iter0, noise, iter1) for d in trajectory_dirs(s)]
    data = load_states(dirs)
    groups = build_groups(data, negatives=3, split=SPLIT, seed=0)
    held = {t for t, h in zip(groups.theorem, groups.heldout, strict=True) if h}
    head_trains_on = {t for t, h in zip(groups.theorem, groups.heldout, strict=True) if not h}
    assert held and head_trains_on and not held & head_trains_on
    assert held <= SPLIT.held_out(data.goal)
    # No held-out theorem is trained on by SFT upstream, step by step too.
    assert not held & trained_on
    for steps in read_positive_steps([iter0, noise, iter1]).table.to_pylist():
        if steps["theorem"] in held:
            assert (steps["state_before"], steps["tactic"]) not in trained_steps
    # The energy weight's held-out figures: decisions of held-out theorems only.
    sets, _ = pool_decisions(dirs, set(data.goal))
    names = [c.theorem for c in sets]
    keep = heldout_decisions(names, SPLIT.held_out(names))
    measured = {t for t, k in zip(names, keep, strict=True) if k}
    assert measured and not measured & trained_on and not measured & head_trains_on
    # Every consumer sees one split: the folds are dealt by the same key, whatever the order.
    assert SPLIT.folds(names, 5) == SPLIT.folds(list(reversed(names)), 5)
