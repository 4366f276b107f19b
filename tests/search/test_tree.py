"""SearchTree: merging, status propagation, proof extraction and the invariant checker itself."""

from __future__ import annotations

import pytest

from burnqed.search.tree import FAILED, OPEN, PROVED, InvariantError, SearchTree


def _expand(tree, node, children, step=0):
    """children: list of (tactic, text | None for an error, solved)."""
    tree.begin_expansion(node, step=step)
    out = []
    for tactic, text, solved in children:
        if text is None:
            out.append(tree.add_error(node, tactic, -1.0, error="error: nope", lean_s=0.0))
        else:
            out.append(
                tree.add_state(
                    node,
                    tactic,
                    -1.0,
                    state=None,
                    text=text,
                    solved=solved,
                    lean_s=0.0,
                    priority=-1.0,
                )
            )
    tree.finish_expansion(node, wall_s=0.0, lean_s=0.0, tokens=1, num_candidates=len(children))
    return out


def test_duplicates_merge_and_mirror_status():
    tree = SearchTree(root_state=None, root_text="⊢ A")
    a, b = _expand(tree, tree.root, [("t1", "⊢ B", False), ("t2", "⊢ C", False)])
    (dup, _err) = _expand(tree, a, [("t3", "⊢ C", False), ("t4", None, False)], step=1)
    assert dup.duplicate_of == b.node_id and dup.state is None and dup.text is None
    assert tree.has_state("⊢ C") and not tree.has_state("⊢ D")
    assert a.status == OPEN  # its duplicate edge leads to an open state
    _expand(tree, b, [("t5", None, False)], step=2)
    # b failed → the duplicate edge mirrors it → a's edges all failed → a fails → root fails.
    assert b.status == FAILED and dup.status == FAILED and a.status == FAILED
    assert tree.root.status == FAILED
    tree.check_invariants()


def test_proof_propagates_and_path_is_extracted():
    tree = SearchTree(root_state=None, root_text="⊢ A")
    (a,) = _expand(tree, tree.root, [("intro h", "h : A\n⊢ B", False)])
    s1, s2 = _expand(tree, a, [("exact h", "no goals", True), ("trivial", "no goals", True)], 1)
    assert s2.duplicate_of == -1, "solved states are never merged"
    tree.mark_rejected(s1, "uses sorryAx")
    assert a.status == OPEN
    tree.mark_proved(s2)
    assert tree.set_proof_path(s2) == ["intro h", "trivial"]
    assert tree.root.status == PROVED and a.status == PROVED
    assert s1.status == FAILED and s1.error.startswith("verification")
    tree.check_invariants(max_nodes=2, max_depth=2)
    with pytest.raises(InvariantError, match="max_nodes"):
        tree.check_invariants(max_nodes=1)


def test_abort_expansions_undoes_an_interrupted_step():
    tree = SearchTree(root_state=None, root_text="⊢ A")
    a, b = _expand(tree, tree.root, [("t1", "⊢ B", False), ("t2", "⊢ C", False)])
    tree.begin_expansion(a, step=1)
    tree.begin_expansion(b, step=1)
    tree.abort_expansions([a, b])
    assert tree.expansions == 1 and not a.expanded and not b.expanded
    tree.check_invariants()


@pytest.mark.parametrize(
    "corrupt, message",
    [
        (lambda t: setattr(t.nodes[1], "depth", 5), "depth"),
        (lambda t: setattr(t.nodes[1], "status", PROVED), "status"),
        (lambda t: setattr(t.nodes[2], "state_hash", t.nodes[1].state_hash), "not merged"),
        (lambda t: setattr(t.nodes[0], "expansion_index", 3), "expansion indices"),
        (lambda t: setattr(t.nodes[1], "on_proof_path", True), "proof path"),
    ],
)
def test_check_invariants_catches_corruption(corrupt, message):
    tree = SearchTree(root_state=None, root_text="⊢ A")
    _expand(tree, tree.root, [("t1", "⊢ B", False), ("t2", "⊢ C", False)])
    tree.check_invariants()
    corrupt(tree)
    with pytest.raises(InvariantError, match=message):
        tree.check_invariants()
