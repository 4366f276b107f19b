"""InfoNCE groups from real (toy) search trajectories: labels, negative kinds, split by theorem."""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest

from burnqed.ebm.groups import KINDS, build_groups, load_states, trajectory_dirs
from burnqed.split import TheoremSplit


@pytest.fixture(scope="module")
def data(searches):
    return load_states([d for s in searches for d in trajectory_dirs(s)])


SPLIT = TheoremSplit(0.125, 0.125, seed=0)  # a quarter of the theorems held out


def test_trajectory_dirs_accepts_a_search_dir_a_manifest_or_a_shard(searches, tmp_path):
    shard = searches[0] / "shard_0"
    assert trajectory_dirs(searches[0]) == [shard]
    assert trajectory_dirs(searches[0] / "manifest.json") == [shard]
    assert trajectory_dirs(shard) == [shard]
    with pytest.raises(FileNotFoundError, match="no trajectories"):
        trajectory_dirs(tmp_path)


def test_groups_hold_one_positive_and_k_true_negatives(data):
    g = build_groups(data, negatives=3, split=SPLIT, seed=0)
    pos = data.positives()
    # One group per on-path node of each attempt, roots (the goals themselves) excepted, or a
    # dropped one.
    decisions = sum(p and k is not None for p, k in zip(data.on_path, data.parent_key, strict=True))
    assert len(g) + g.dropped == decisions > sum(len(v - {data.goal[t]}) for t, v in pos.items())
    assert len(g) > g.dropped
    assert all(row[0] != data.goal[t] for row, t in zip(g.states, g.theorem, strict=True))
    assert min(g.depth) >= 1
    assert all(len(row) == 4 for row in g.states)
    for row, t, goal in zip(g.states, g.theorem, g.goals, strict=True):
        assert row[0] in pos[t]
        assert not set(row[1:]) & pos[t]  # never a state on this theorem's proof path
        assert len(set(row)) == 4
        assert goal == data.goal[t]
    assert sum(g.kind_counts.values()) == 3 * len(g) and set(g.kind_counts) == set(KINDS)
    assert g.kind_counts["sibling"] > 0 and g.kind_counts["frontier"] > 0
    assert g.counts() == {"groups": len(g), "train_groups": int((~g.heldout).sum()),
                          "heldout_groups": int(g.heldout.sum()), "dropped": g.dropped,
                          "negatives_by_kind": g.kind_counts}  # fmt: skip


def _theorems_of(data):
    out = defaultdict(set)
    for t, h in zip(data.theorem, data.state_hash, strict=True):
        out[h].add(t)
    return out


@pytest.mark.parametrize("negatives", [3, 7])
def test_no_group_holds_more_than_one_other_theorem_state(data, negatives):
    """The search compares states of one theorem: a group is its theorem's states, with at most
    one state of another theorem (only when its own run out one short)."""
    g = build_groups(data, negatives=negatives, split=SPLIT, seed=0)
    theorems_of = _theorems_of(data)
    for row, t, kinds in zip(g.states, g.theorem, g.kinds, strict=True):
        foreign = [s for s in row[1:] if t not in theorems_of[s]]
        assert len(foreign) <= 1, (t, row, kinds)
        assert kinds.count("other_theorem") == len(foreign)
        assert len(row) == 1 + negatives
    assert g.kind_counts["other_theorem"] <= len(g)


def test_negative_kinds_come_in_order_siblings_frontier_dead_ends_off_path(data):
    """Each group takes the open siblings first, then the rest of the search's frontier at the
    positive's pop, then dead ends, then other off-path states: a kind appears only once every
    state of the kinds before it is in the group."""
    g = build_groups(data, negatives=7, split=SPLIT, seed=0)
    rank = {k: i for i, k in enumerate(KINDS)}
    pos = data.positives()
    node = {k: i for i, k in enumerate(data.node_key)}
    # Every kind's own candidates, recomputed from the trees, for each group's decision.
    decisions = [i for i, p in enumerate(data.on_path) if p and data.parent_key[i] is not None]
    assert len(g) + g.dropped == len(decisions)
    kept = iter(decisions)

    def opened(j, i):  # node j was in the queue when node i was popped
        parent = data.parent_key[j]
        made = -1 if parent is None else data.expansion[node[parent]]
        e = data.expansion[j]
        return (
            made is not None and made < data.expansion[i] and (e is None or e > data.expansion[i])
        )

    seen = Counter()
    for row, t, kinds in zip(g.states, g.theorem, g.kinds, strict=True):
        assert [rank[k] for k in kinds] == sorted(rank[k] for k in kinds), kinds
        occ = [next(i for i in kept if data.state_hash[i] == row[0] and data.theorem[i] == t)]
        same = [j for j in range(len(data.theorem)) if data.theorem[j] == t]
        cands = {
            "sibling": {data.state_hash[j] for i in occ for j in same
                        if data.parent_key[j] == data.parent_key[i] and opened(j, i)},
            "frontier": {data.state_hash[j] for i in occ for j in same
                         if data.node_key[j][:3] == data.node_key[i][:3] and opened(j, i)},
            "dead_end": {data.state_hash[j] for j in same if data.failed[j]},
            "off_path": {data.state_hash[j] for j in same},
        }  # fmt: skip
        used: set[str] = {row[0]}
        for kind, state in zip(kinds, row[1:], strict=True):
            seen[kind] += 1
            if kind != "other_theorem":
                assert state in cands[kind] and state not in pos[t], (kind, state)
            for earlier in KINDS[: rank[kind]]:
                if earlier != "other_theorem":  # every state of an earlier kind is already in
                    assert cands[earlier] - pos[t] - used == set(), (kind, earlier)
            used.add(state)
    assert all(seen[k] > 0 for k in ("sibling", "frontier", "off_path")), seen


def test_a_positive_whose_theorem_cannot_fill_a_group_is_dropped_and_counted(data):
    g = build_groups(data, negatives=12, split=SPLIT, seed=0)
    positives = sum(p and k is not None for p, k in zip(data.on_path, data.parent_key, strict=True))
    assert 0 < g.dropped < positives and len(g) + g.dropped == positives
    assert all(len(row) == 13 for row in g.states)
    with pytest.raises(ValueError, match="dropped"):
        build_groups(data, negatives=500, split=SPLIT, seed=0)


def test_siblings_share_the_positives_parent(data):
    g = build_groups(data, negatives=3, split=SPLIT, seed=0)
    parents = defaultdict(set)  # (theorem, state) → parent keys
    for t, h, pk in zip(data.theorem, data.state_hash, data.parent_key, strict=True):
        parents[(t, h)].add(pk)
    # A group's first negative is a sibling whenever the positive has one off the path.
    checked = 0
    for row, t in zip(g.states, g.theorem, strict=True):
        shared = parents[(t, row[0])] & parents[(t, row[1])] - {None}
        checked += bool(shared)
    assert checked >= g.kind_counts["sibling"] // 2 > 0


def test_each_group_carries_its_positives_remaining_proof_steps(data):
    """``remaining`` = the attempt's proof length (its on-path states, root to the last before "no
    goals") minus the positive's depth: the last on-path state has 1, none has 0."""
    g = build_groups(data, negatives=3, split=SPLIT, seed=0)
    on_path = defaultdict(list)  # attempt → its on-path (depth, state)
    for key, h, d, p in zip(data.node_key, data.state_hash, data.depth, data.on_path, strict=True):
        if p:
            on_path[key[:3]].append((d, h))
    possible = defaultdict(set)  # (theorem, state, depth) → remaining steps in some attempt
    for (_, t, _), path in on_path.items():
        assert sorted(d for d, _ in path) == list(range(len(path)))  # one state per depth
        for d, h in path:
            possible[(t, h, d)].add(len(path) - d)
    assert len(g.remaining) == len(g) > 0 and g.remaining.min() >= 1
    for row, t, d, r in zip(g.states, g.theorem, g.depth, g.remaining, strict=True):
        assert r in possible[(t, row[0], int(d))], (t, d, r)
    assert g.subset(g.heldout).remaining.tolist() == g.remaining[g.heldout].tolist()


def test_split_is_by_theorem(data):
    g = build_groups(data, negatives=3, split=SPLIT, seed=0)
    held = {t for t, h in zip(g.theorem, g.heldout, strict=True) if h}
    train = {t for t, h in zip(g.theorem, g.heldout, strict=True) if not h}
    assert held and train and not held & train
    # Other-theorem negatives come from the group's own split.
    theorem_of = defaultdict(set)
    for t, h in zip(data.theorem, data.state_hash, strict=True):
        theorem_of[h].add(t)
    all_held = SPLIT.held_out(data.goal)
    for row, h in zip(g.states, g.heldout, strict=True):
        for s in row[1:]:
            assert any((o in all_held) == h for o in theorem_of[s])


def test_no_proof_is_an_error_naming_the_trajectories(tmp_path):
    from tests.ebm.conftest import toy_search

    d = toy_search(tmp_path / "s", theorems=2, seed=0)
    data = load_states([d])
    data.on_path = [False] * len(data.on_path)
    with pytest.raises(ValueError, match="no proved theorem"):
        build_groups(data, negatives=3, split=SPLIT)


def test_groups_do_not_depend_on_the_order_attempts_were_written_in(searches, tmp_path):
    """Parts hold attempts in the order they finished, which depends on timing: the same trees
    written in another order give the same groups, the same EBM data digest and search digest."""
    import shutil

    import pyarrow.parquet as pq

    from burnqed.ebm.stage import _search_hashes
    from burnqed.ebm.train import groups_digest
    from burnqed.trajectory import read_nodes

    shard = searches[0] / "shard_0"
    shuffled = tmp_path / "shard_0"
    shutil.copytree(shard, shuffled)
    for sub in ("nodes", "summary"):  # the first and last checkpoints trade places ...
        parts = sorted((shuffled / sub).glob("part-*.parquet"))
        assert len(parts) >= 2
        parts[0].rename(parts[0].with_name("swap"))
        parts[-1].rename(parts[0])
        parts[0].with_name("swap").rename(parts[-1])
    for p in (shuffled / "nodes").glob("part-*.parquet"):  # ... and each one's rows run backwards
        t = pq.read_table(p)
        pq.write_table(t.take(list(range(t.num_rows - 1, -1, -1))), p)
    order = [("theorem", "attempt", "node_id")]
    raw = [read_nodes(d).table.select(list(order[0])).to_pylist() for d in (shard, shuffled)]
    assert raw[0] != raw[1] and sorted(map(str, raw[0])) == sorted(map(str, raw[1]))
    a, b = load_states([shard]), load_states([shuffled])
    ga = build_groups(a, negatives=3, split=SPLIT, seed=0)
    gb = build_groups(b, negatives=3, split=SPLIT, seed=0)
    assert groups_digest(ga) == groups_digest(gb)
    assert list(_search_hashes([shard]).values()) == list(_search_hashes([shuffled]).values())
