"""The search tree of one (theorem, attempt): nodes, merged duplicate states, status propagation.

A node is one outcome of applying a tactic to an expanded parent: a new proof state, a tactic Lean
rejected (an *error edge*, status ``failed``), or a state already in the tree (a *duplicate edge*,
which points at the first node with that state and mirrors its status — transpositions are merged,
never searched twice).  The tree is an OR-tree over whole proof states (Pantograph states carry all
open goals), so a node is

- ``proved`` when its state has no goals (and whole-proof verification did not reject it) or any
  outgoing edge leads to a proved node;
- ``failed`` when it is an error edge, a solved state that verification rejected, or it was expanded
  and every outgoing edge failed;
- ``open`` otherwise (unexpanded, or some child still open).  Statuses only ever move open → proved
  or open → failed.

:meth:`SearchTree.check_invariants` recomputes all of this from scratch; tests call it on every tree.

Example::

    >>> tree = SearchTree(root_state=None, root_text="p : Prop\\n⊢ p → p")
    >>> root = tree.root
    >>> tree.begin_expansion(root, step=0)
    >>> child = tree.add_state(root, "intro h", -0.1, state=None, text="no goals", solved=True,
    ...                        lean_s=0.01, priority=-0.1)
    >>> tree.finish_expansion(root, wall_s=0.02, lean_s=0.01, tokens=3, num_candidates=1)
    >>> tree.mark_proved(child)
    >>> [n.tactic for n in tree.proof_path(child)][1:], root.status
    (['intro h'], 'proved')
    >>> tree.check_invariants()
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

OPEN = "open"
PROVED = "proved"
FAILED = "failed"


def state_hash(text: str) -> str:
    """Stable 16-hex-digit key of a rendered state (duplicates are merged on it)."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=8).hexdigest()


class InvariantError(AssertionError):
    """A search tree broke one of its documented invariants; the message names the node."""


@dataclass(slots=True, eq=False)
class Node:
    """One node; ``node_id`` is its index in :attr:`SearchTree.nodes` (creation order)."""

    node_id: int
    parent_id: int  # -1 for the root; otherwise a node expanded before this one was created
    depth: int  # tactic steps from the root along parent links (root 0)
    tactic: str | None  # the tactic applied to the parent; None for the root
    state: Any  # the environment's proof-state handle; None for error and duplicate edges
    text: str | None  # Lean-printed state; None for error and duplicate edges
    state_hash: str | None  # state_hash(text); unique among state nodes of a tree
    llm_logprob: float  # the policy's summed logprob of `tactic` (0 for the root)
    cum_logprob: float  # sum of llm_logprob along the parent chain
    priority: float  # frontier key (higher first); see engine.priority
    created_s: float  # seconds since the attempt started when this node was created
    lean_s: float = 0.0  # Lean time of the tactic application that produced this node
    ebm_energy: float | None = None  # value-model energy (lower = more provable); None without one
    solved: bool = False  # the state has no goals
    error: str | None = None  # "kind: message" for an error edge (or a rejected proof)
    duplicate_of: int = -1  # for a duplicate edge: the node that first reached this state
    status: str = OPEN
    on_proof_path: bool = False  # on the root → proof path of the attempt's verified proof
    # Set when the node is expanded (popped from the frontier); -1 / 0 otherwise.
    expansion_index: int = -1  # 0-based order of expansion within the attempt
    step: int = -1  # scheduler step that popped it (several nodes share a step when k > 1)
    expand_wall_s: float = 0.0  # pop → children inserted
    expand_lean_s: float = 0.0  # summed Lean time of this expansion's tactic applications
    expand_tokens: int = 0  # tokens generated for this expansion (all raw candidates)
    num_candidates: int = 0  # raw candidates the policy returned (before de-duplication)
    unique_candidates: int = 0  # candidates applied after de-duplication
    children: list[int] = field(default_factory=list)  # every edge out of this node, in order

    @property
    def is_state(self) -> bool:
        return self.error is None and self.duplicate_of < 0

    @property
    def expanded(self) -> bool:
        return self.expansion_index >= 0


class SearchTree:
    """Nodes of one attempt plus the duplicate-state index and status propagation."""

    def __init__(self, *, root_state: Any, root_text: str, root_priority: float = 0.0) -> None:
        self.nodes: list[Node] = []
        self._by_hash: dict[str, int] = {}
        # target node id → duplicate edges pointing at it (their status mirrors the target's)
        self._referrers: dict[int, list[int]] = {}
        self.expansions = 0
        root = Node(
            node_id=0,
            parent_id=-1,
            depth=0,
            tactic=None,
            state=root_state,
            text=root_text,
            state_hash=state_hash(root_text),
            llm_logprob=0.0,
            cum_logprob=0.0,
            priority=root_priority,
            created_s=0.0,
        )
        self.nodes.append(root)
        self._by_hash[root.state_hash] = 0

    @property
    def root(self) -> Node:
        return self.nodes[0]

    # ---- building -------------------------------------------------------------------------

    def begin_expansion(self, node: Node, *, step: int) -> None:
        """Give ``node`` the next expansion index (callers pop in a deterministic order)."""
        if node.expanded or not node.is_state or node.solved:
            raise ValueError(f"node {node.node_id} cannot be expanded")
        node.expansion_index = self.expansions
        node.step = step
        self.expansions += 1

    def abort_expansions(self, nodes: list[Node]) -> None:
        """Undo :meth:`begin_expansion` of the last popped ``nodes`` (a step cut off by a timeout
        before any child was added), so the tree only records complete expansions."""
        for node in sorted(nodes, key=lambda n: -n.expansion_index):
            if node.children or node.expansion_index != self.expansions - 1:
                raise ValueError(f"node {node.node_id}: only the last, childless expansions undo")
            node.expansion_index = -1
            node.step = -1
            self.expansions -= 1

    def has_state(self, text: str) -> bool:
        """Whether an unsolved state with this text is already in the tree (it would be merged)."""
        return state_hash(text) in self._by_hash

    def _child(self, parent: Node, tactic: str, logprob: float, **kw: Any) -> Node:
        node = Node(
            node_id=len(self.nodes),
            parent_id=parent.node_id,
            depth=parent.depth + 1,
            tactic=tactic,
            llm_logprob=logprob,
            cum_logprob=parent.cum_logprob + logprob,
            **kw,
        )
        self.nodes.append(node)
        parent.children.append(node.node_id)
        return node

    def add_state(
        self,
        parent: Node,
        tactic: str,
        logprob: float,
        *,
        state: Any,
        text: str,
        solved: bool,
        lean_s: float,
        priority: float,
        created_s: float = 0.0,
        ebm_energy: float | None = None,
    ) -> Node:
        """A successful tactic: a new state node, or a duplicate edge when the state is known.

        Solved states are never merged: each path to "no goals" is its own proof candidate, and
        verification may reject one path (e.g. a statement-changing tactic) but accept another.
        """
        h = state_hash(text)
        target = None if solved else self._by_hash.get(h)
        if target is not None:
            dup = self._child(
                parent,
                tactic,
                logprob,
                state=None,
                text=None,
                state_hash=h,
                priority=priority,
                created_s=created_s,
                lean_s=lean_s,
                duplicate_of=target,
                status=self.nodes[target].status,
            )
            self._referrers.setdefault(target, []).append(dup.node_id)
            return dup
        node = self._child(
            parent,
            tactic,
            logprob,
            state=state,
            text=text,
            state_hash=h,
            priority=priority,
            created_s=created_s,
            lean_s=lean_s,
            solved=solved,
            ebm_energy=ebm_energy,
        )
        if not solved:
            self._by_hash[h] = node.node_id
        return node

    def add_error(
        self,
        parent: Node,
        tactic: str,
        logprob: float,
        *,
        error: str,
        lean_s: float,
        created_s: float = 0.0,
    ) -> Node:
        """A tactic Lean (or the guard) rejected: a failed leaf that is never expanded."""
        return self._child(
            parent,
            tactic,
            logprob,
            state=None,
            text=None,
            state_hash=None,
            priority=float("-inf"),
            created_s=created_s,
            lean_s=lean_s,
            error=error,
            status=FAILED,
        )

    def finish_expansion(
        self, node: Node, *, wall_s: float, lean_s: float, tokens: int, num_candidates: int
    ) -> None:
        """Record the expansion's costs and update statuses (an expansion with no live child fails)."""
        node.expand_wall_s = wall_s
        node.expand_lean_s = lean_s
        node.expand_tokens = tokens
        node.num_candidates = num_candidates
        node.unique_candidates = len(node.children)
        self._update(node)

    def mark_proved(self, node: Node) -> None:
        """A solved state whose whole proof verified: proved, propagated to every ancestor."""
        if not node.solved:
            raise ValueError(f"node {node.node_id} has goals left; only a solved state is proved")
        self._set(node, PROVED)

    def mark_rejected(self, node: Node, reason: str) -> None:
        """A solved state whose whole proof failed verification: failed, with the reason."""
        node.error = f"verification: {reason}"
        self._set(node, FAILED)

    def set_proof_path(self, node: Node) -> list[str]:
        """Flag the root → ``node`` path and return its tactics (the proof)."""
        path = self.proof_path(node)
        for n in path:
            n.on_proof_path = True
        return [n.tactic for n in path[1:]]

    def proof_path(self, node: Node) -> list[Node]:
        path = [node]
        while path[-1].parent_id >= 0:
            path.append(self.nodes[path[-1].parent_id])
        path.reverse()
        return path

    # ---- status propagation ---------------------------------------------------------------

    def _edge_status(self, n: Node) -> str:
        return self.nodes[n.duplicate_of].status if n.duplicate_of >= 0 else n.status

    def _derived_status(self, node: Node) -> str:
        """The status the children imply for an expanded (or terminal) node."""
        if node.error is not None:
            return FAILED
        if node.duplicate_of >= 0:
            return self.nodes[node.duplicate_of].status
        if node.solved or not node.expanded:
            return node.status  # set explicitly (mark_proved / mark_rejected) or still open
        statuses = [self._edge_status(self.nodes[c]) for c in node.children]
        if PROVED in statuses:
            return PROVED
        if all(s == FAILED for s in statuses):
            return FAILED
        return OPEN

    def _update(self, node: Node) -> None:
        new = self._derived_status(node)
        if new != node.status:
            self._set(node, new)

    def _set(self, node: Node, status: str) -> None:
        # Iterative: a proof found at depth 50 must not recurse 50 frames per referrer.
        work = [(node, status)]
        while work:
            n, s = work.pop()
            if n.status == s:
                continue
            if n.status != OPEN:
                raise InvariantError(f"node {n.node_id}: status {n.status} cannot become {s}")
            n.status = s
            for dup_id in self._referrers.get(n.node_id, ()):
                work.append((self.nodes[dup_id], s))
            if n.parent_id >= 0:
                parent = self.nodes[n.parent_id]
                if parent.status == OPEN:
                    derived = self._derived_status(parent)
                    if derived != OPEN:
                        work.append((parent, derived))

    # ---- invariants -------------------------------------------------------------------------

    def check_invariants(
        self, *, max_nodes: int | None = None, max_depth: int | None = None
    ) -> None:
        """Raise :class:`InvariantError` unless every documented invariant holds.

        1. ``node_id`` is the list index; the root is node 0 with depth 0 and no parent.
        2. A child was created after its parent, by its parent's expansion: ``parent_id < node_id``,
           the parent is expanded, ``depth == parent.depth + 1`` and the parent lists it as a child.
        3. Expansion indices are exactly 0 … E-1, each once; ``E <= max_nodes``; only state nodes
           that are not solved are expanded; steps never decrease with the expansion index.
        4. State hashes are unique among unsolved state nodes; a duplicate edge points at an earlier state
           node with the same hash and has the same status; error edges are failed leaves.
        5. Every status equals the one recomputed from the children (proved ⇒ some proved edge or a
           verified solved state; failed ⇒ error, rejected solution, or all edges failed).
        6. ``depth <= max_depth``; nodes flagged ``on_proof_path`` form one root → solved path.
        """

        def fail(n: Node, msg: str) -> None:
            raise InvariantError(f"node {n.node_id}: {msg}")

        expansions: list[tuple[int, int]] = []
        seen_hash: dict[str, int] = {}
        for i, n in enumerate(self.nodes):
            if n.node_id != i:
                fail(n, f"node_id {n.node_id} != index {i}")
            if i == 0:
                if n.parent_id != -1 or n.depth != 0 or n.tactic is not None:
                    fail(n, "root must have parent -1, depth 0 and no tactic")
            else:
                if not 0 <= n.parent_id < i:
                    fail(n, f"parent {n.parent_id} not created before it")
                p = self.nodes[n.parent_id]
                if not p.expanded:
                    fail(n, f"parent {p.node_id} was never expanded")
                if n.depth != p.depth + 1:
                    fail(n, f"depth {n.depth} != parent depth {p.depth} + 1")
                if i not in p.children:
                    fail(n, f"missing from parent {p.node_id}'s children")
            if max_depth is not None and n.depth > max_depth:
                fail(n, f"depth {n.depth} > max_depth {max_depth}")
            for c in n.children:
                if self.nodes[c].parent_id != i:
                    fail(n, f"child {c} names another parent")
            if n.expanded:
                if not n.is_state or n.solved:
                    fail(n, "only unsolved state nodes are expanded")
                expansions.append((n.expansion_index, n.step))
            elif n.children:
                fail(n, "has children but was never expanded")
            if n.error is not None and (n.status != FAILED or n.children):
                fail(n, "an error edge must be a failed leaf")
            if n.duplicate_of >= 0:
                t = self.nodes[n.duplicate_of]
                if n.duplicate_of >= i or not t.is_state or t.state_hash != n.state_hash:
                    fail(n, f"bad duplicate target {n.duplicate_of}")
                if n.status != t.status:
                    fail(n, f"duplicate status {n.status} != target status {t.status}")
            if n.is_state and not n.solved:
                if n.state_hash in seen_hash:
                    fail(n, f"state also in node {seen_hash[n.state_hash]} (duplicates not merged)")
                seen_hash[n.state_hash] = i
            if n.is_state and n.state_hash != state_hash(n.text):
                fail(n, "state_hash does not match text")
            if n.status not in (OPEN, PROVED, FAILED):
                fail(n, f"unknown status {n.status!r}")
            if n.solved and n.status == OPEN:
                fail(n, "a solved state must be proved or rejected")
            if n.solved and n.status == FAILED and not (n.error or "").startswith("verification"):
                fail(n, "a failed solved state must carry the verification reason")
            if n.is_state and not n.solved and self._derived_status(n) != n.status:
                fail(n, f"status {n.status} but children imply {self._derived_status(n)}")
        expansions.sort()
        if [e for e, _ in expansions] != list(range(len(expansions))):
            raise InvariantError(f"expansion indices are not 0..{len(expansions) - 1}")
        if len(expansions) != self.expansions:
            raise InvariantError(
                f"{len(expansions)} expanded nodes, counter says {self.expansions}"
            )
        steps = [s for _, s in expansions]
        if steps != sorted(steps):
            raise InvariantError("steps decrease along the expansion order")
        if max_nodes is not None and len(expansions) > max_nodes:
            raise InvariantError(f"{len(expansions)} expansions > max_nodes {max_nodes}")
        path = [n for n in self.nodes if n.on_proof_path]
        if path:
            end = max(path, key=lambda n: n.depth)
            if not end.solved or end.status != PROVED:
                fail(end, "proof path does not end in a proved solved state")
            if {n.node_id for n in self.proof_path(end)} != {n.node_id for n in path}:
                fail(end, "on_proof_path flags are not exactly one root → proof path")
