"""InfoNCE groups from real (toy) search trajectories: labels, negative kinds, split by theorem."""

from __future__ import annotations

from collections import defaultdict

import pytest

from burnqed.ebm.groups import KINDS, build_groups, load_states, split_theorems, trajectory_dirs


@pytest.fixture(scope="module")
def data(searches):
    return load_states([d for s in searches for d in trajectory_dirs(s)])


def test_trajectory_dirs_accepts_a_search_dir_a_manifest_or_a_shard(searches, tmp_path):
    shard = searches[0] / "shard_0"
    assert trajectory_dirs(searches[0]) == [shard]
    assert trajectory_dirs(searches[0] / "manifest.json") == [shard]
    assert trajectory_dirs(shard) == [shard]
    with pytest.raises(FileNotFoundError, match="no trajectories"):
        trajectory_dirs(tmp_path)


def test_groups_hold_one_positive_and_k_true_negatives(data):
    g = build_groups(data, negatives=3, heldout_fraction=0.25, seed=0)
    pos = data.positives()
    # One group per unique positive, roots (the goals themselves) excepted.
    assert len(g) == sum(len(v - {data.goal[t]}) for t, v in pos.items())
    assert all(row[0] != data.goal[t] for row, t in zip(g.states, g.theorem, strict=True))
    assert min(g.depth) >= 1
    assert all(len(row) == 4 for row in g.states)
    for row, t, goal in zip(g.states, g.theorem, g.goals, strict=True):
        assert row[0] in pos[t]
        assert not set(row[1:]) & pos[t]  # never a state on this theorem's proof path
        assert len(set(row)) == 4
        assert goal == data.goal[t]
    assert sum(g.kind_counts.values()) == 3 * len(g) and set(g.kind_counts) == set(KINDS)
    assert g.kind_counts["sibling"] > 0 and g.kind_counts["other_theorem"] > 0


def test_siblings_share_the_positives_parent(data):
    g = build_groups(data, negatives=3, heldout_fraction=0.25, seed=0)
    parents = defaultdict(set)  # (theorem, state) → parent keys
    for t, h, pk in zip(data.theorem, data.state_hash, data.parent_key, strict=True):
        parents[(t, h)].add(pk)
    # A group's first negative is a sibling whenever the positive has one off the path.
    checked = 0
    for row, t in zip(g.states, g.theorem, strict=True):
        shared = parents[(t, row[0])] & parents[(t, row[1])] - {None}
        checked += bool(shared)
    assert checked >= g.kind_counts["sibling"] // 2 > 0


def test_split_is_by_theorem(data):
    g = build_groups(data, negatives=3, heldout_fraction=0.25, seed=0)
    held = {t for t, h in zip(g.theorem, g.heldout, strict=True) if h}
    train = {t for t, h in zip(g.theorem, g.heldout, strict=True) if not h}
    assert held and train and not held & train
    # Other-theorem negatives come from the group's own split.
    theorem_of = defaultdict(set)
    for t, h in zip(data.theorem, data.state_hash, strict=True):
        theorem_of[h].add(t)
    all_held = split_theorems(list(data.goal), set(data.positives()), 0.25, 0)
    for row, h in zip(g.states, g.heldout, strict=True):
        for s in row[1:]:
            assert any((o in all_held) == h for o in theorem_of[s])


def test_no_proof_is_an_error_naming_the_trajectories(tmp_path):
    from tests.ebm.conftest import toy_search

    d = toy_search(tmp_path / "s", theorems=2, seed=0)
    data = load_states([d])
    data.on_path = [False] * len(data.on_path)
    with pytest.raises(ValueError, match="no proved theorem"):
        build_groups(data, negatives=3, heldout_fraction=0.25)


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
    ga = build_groups(a, negatives=3, heldout_fraction=0.25, seed=0)
    gb = build_groups(b, negatives=3, heldout_fraction=0.25, seed=0)
    assert groups_digest(ga) == groups_digest(gb)
    assert list(_search_hashes([shard]).values()) == list(_search_hashes([shuffled]).values())
