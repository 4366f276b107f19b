"""Training data for the EBM: labelled states from search trajectories, and InfoNCE groups.

A *positive* is a state on a verified proof path (``on_proof_path``), other than the root (the goal
itself, which search never scores) and the final "no goals" state.  A group is what the search
decided between when it popped the positive — one group per on-path node of each attempt, so a
state on the proof paths of two searches gives two groups, each against its own frontier: the positive against ``K = ebm.negatives`` states of the
**same theorem**, taken in this order (a kind is used up before the next one is drawn from):

- ``sibling``: another state produced by expanding the positive's parent, still open when the
  positive was popped (the search's closest real choice);
- ``frontier``: any other state open in that search when the positive was popped (created by an
  earlier expansion, not yet expanded itself) — the rest of the queue the search chose from;
- ``dead_end``: a state of the theorem with no surviving child (status ``failed``, any attempt);
- ``off_path``: any other state of the theorem not on a proof path;
- ``other_theorem``: one state of another theorem of the same split, **at most one** per group, and
  only when the theorem's own states run out one short.

The group size is fixed (``1 + K``): a positive whose theorem cannot fill its group that way is
**dropped and counted** (``Groups.dropped``), not padded or masked — every group's chance is
``1/(1+K)`` and a batch is one tensor.  The search only ever compares states of one theorem, so
groups built mostly from other theorems (the old rule: 61 % of the demo's negatives) taught "which
theorem is this" instead of "which of these states is closer to a proof".  A state that is on a
proof path of its theorem in any attempt is never a negative for that theorem.  The train/held-out
split is **by theorem** and is the run's one split (:mod:`burnqed.split`): a group is held out when
its theorem is one of SFT's validation or test theorems, so no head trains on a theorem whose proof
steps the policy that embeds it did not train on either, and no held-out theorem was in that
policy's SFT training data.  :meth:`Groups.counts` (groups, train/held-out, dropped, negatives by kind) goes into the
EBM artifact's meta.

Each group also carries its positive's **remaining steps** (``Groups.remaining``): the length of
its attempt's proof (the deepest on-path state's depth + 1, the tactic that closes it) minus its
depth — the last state before "no goals" has 1.  With ``ebm.remaining_steps_weight`` the head
learns it beside InfoNCE, one unit of energy per step (:func:`burnqed.ebm.train.value_loss`).

Eval trajectories are never training data: :func:`trajectory_dirs` refuses a search that an eval
wrote (:func:`eval_output`), and :func:`decontaminate_states` drops (or refuses) every theorem one
of whose states is an evaluation-benchmark goal (:mod:`burnqed.data.decontam`).

Example::

    >>> # trajectory_dirs(Path("results/iter_0/search"))  → [.../shard_0, .../shard_1]
    >>> # data = load_states([...]); groups = build_groups(data, negatives=7, split=TheoremSplit(0.1, 0.1, seed=0))
"""

from __future__ import annotations

import json
import logging
import math
import random
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from burnqed.config import InputError
from burnqed.data.decontam import BenchmarkIndex, DecontaminationCheck, check_mode, verdict
from burnqed.split import TheoremSplit
from burnqed.trajectory import MANIFEST, read_nodes, search_part_dirs

log = logging.getLogger(__name__)

# Negative kinds in the order a group is filled (module docstring).
KINDS = ("sibling", "frontier", "dead_end", "off_path", "other_theorem")
MAX_OTHER_THEOREM = 1  # other theorems' states per group: the search never compares across them
DEPTH_BUCKETS = ("0", "1", "2", "3-4", "5+")


def depth_bucket(depth: int) -> str:
    if depth <= 2:
        return str(depth)
    return "3-4" if depth <= 4 else "5+"


class EvalTrajectoriesError(InputError):
    """A search output given as EBM training data is an eval's (benchmark) trajectories."""


def eval_output(path: Path) -> str | None:
    """Why the search output ``path`` is an eval's, or None: its ``manifest.json`` says ``"kind":
    "eval"`` (the eval stage's search), or the eval JSON beside it (``eval.json`` for ``eval/``)
    says ``"kind": "burnqed eval"`` and names ``path`` as its trajectories."""
    manifest = path / MANIFEST
    if manifest.is_file():
        try:
            kind = json.loads(manifest.read_text(encoding="utf-8")).get("kind")
        except (ValueError, AttributeError):
            kind = None
        if kind == "eval":
            return f"{manifest} says kind: eval"
    beside = path.parent / f"{path.name}.json"
    if beside.is_file():
        try:
            result = json.loads(beside.read_text(encoding="utf-8"))
        except ValueError:
            return None
        if isinstance(result, dict) and result.get("kind") == "burnqed eval":
            return f"{beside} is its eval result"
    return None


def trajectory_dirs(path: str | Path) -> list[Path]:
    """The trajectory directories of a search output (:func:`burnqed.trajectory.search_part_dirs`;
    a ``manifest.json`` path stands for its directory); none at all raises, and so does an eval's
    output (:class:`EvalTrajectoriesError`: the benchmark's proofs are not training data)."""
    path = Path(path)
    if path.name == MANIFEST:
        path = path.parent
    why = eval_output(path)
    if why is not None:
        raise EvalTrajectoriesError(
            f"{path}: eval trajectories ({why}); the EBM learns only from training searches "
            f"(results/iter_<j>/search, results/iter_0/search_noise), never from a benchmark's"
        )
    shards = search_part_dirs(path)
    if not shards:
        raise FileNotFoundError(f"{path}: no trajectories (no nodes/ and no shard_*/nodes/)")
    return shards


@dataclass
class StateData:
    """Every state node of the trajectories, deduplicated per theorem where it matters."""

    texts: dict[str, str]  # state_hash → state text (every state, roots included)
    goal: dict[str, str]  # theorem → state_hash of its root goal
    # Per node (state nodes only; error and duplicate edges have no state):
    theorem: list[str]
    state_hash: list[str]
    depth: list[int]
    on_path: list[bool]
    failed: list[bool]
    parent_key: list[tuple | None]  # (source, theorem, attempt, parent_id); None for roots
    node_key: list[tuple]  # (source, theorem, attempt, node_id)
    # 0-based expansion order within its attempt; None if never expanded (what was open when)
    expansion: list[int | None] = field(default_factory=list)
    skipped_parts: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)

    def positives(self) -> dict[str, set[str]]:
        pos: dict[str, set[str]] = defaultdict(set)
        for t, h, p in zip(self.theorem, self.state_hash, self.on_path, strict=True):
            if p:
                pos[t].add(h)
        return pos


def load_states(dirs: Sequence[str | Path]) -> StateData:
    """Read the node rows of trajectory directories (unreadable parts skipped and reported)."""
    data = StateData({}, {}, [], [], [], [], [], [], [])
    for src, d in enumerate(dirs):
        read = read_nodes(d)
        data.skipped_parts.extend(read.skipped)
        data.sources.append(str(d))
        # In tree order, not file order: parts hold attempts in the order they finished, which
        # depends on timing; the groups (and so the EBM) must not.
        t = read.table.select(
            ["theorem", "attempt", "node_id", "parent_id", "depth", "state", "state_hash",
             "on_proof_path", "status", "solved", "expansion_index"]
        ).sort_by([("theorem", "ascending"), ("attempt", "ascending"),
                   ("node_id", "ascending")]).to_pydict()  # fmt: skip
        for i in range(len(t["theorem"])):
            state = t["state"][i]
            if state is None or t["solved"][i]:
                continue  # error / duplicate edges carry no state; solved states need no value
            th, sh = t["theorem"][i], t["state_hash"][i]
            data.texts.setdefault(sh, state)
            key = (src, th, t["attempt"][i])
            if t["parent_id"][i] is None:
                data.goal.setdefault(th, sh)
            data.theorem.append(th)
            data.state_hash.append(sh)
            data.depth.append(t["depth"][i])
            data.on_path.append(bool(t["on_proof_path"][i]))
            data.failed.append(t["status"][i] == "failed")
            pid = t["parent_id"][i]
            data.parent_key.append(None if pid is None else (*key, pid))
            data.node_key.append((*key, t["node_id"][i]))
            data.expansion.append(t["expansion_index"][i])
    log.info(
        "trajectories: %d state nodes, %d unique states, %d theorems from %d director%s",
        len(data.theorem),
        len(data.texts),
        len(data.goal),
        len(dirs),
        "y" if len(dirs) == 1 else "ies",
    )
    return data


def decontaminate_states(
    data: StateData, index: BenchmarkIndex, *, mode: str, where: str = ""
) -> tuple[StateData, DecontaminationCheck]:
    """``data`` without the theorems one of whose states (any node, the root included) is an
    evaluation-benchmark goal up to renaming; ``refuse`` raises
    :class:`~burnqed.data.decontam.ContaminationError` naming them."""
    check_mode(mode)
    states, theorems = len(data.texts), len(set(data.theorem))
    hits = {h: b for h, text in data.texts.items() if (b := index.match_state(text)) is not None}
    found: dict[str, str] = {}
    for th, h in zip(data.theorem, data.state_hash, strict=True):
        if h in hits:
            found.setdefault(th, hits[h])
    verdict(found, what="EBM training states", mode=mode, where=where or "EBM training states")
    keep = [th not in found for th in data.theorem]
    rows = sum(not k for k in keep)
    if found:

        def pick(xs: list) -> list:
            return [x for x, k in zip(xs, keep, strict=True) if k]

        kept_hashes = set(pick(data.state_hash))
        data = StateData(
            texts={h: t for h, t in data.texts.items() if h in kept_hashes},
            goal={t: h for t, h in data.goal.items() if t not in found},
            theorem=pick(data.theorem),
            state_hash=pick(data.state_hash),
            depth=pick(data.depth),
            on_path=pick(data.on_path),
            failed=pick(data.failed),
            parent_key=pick(data.parent_key),
            node_key=pick(data.node_key),
            expansion=pick(data.expansion) if data.expansion else [],
            skipped_parts=data.skipped_parts,
            sources=data.sources,
        )
    check = DecontaminationCheck(
        what="EBM training states",
        mode=mode,
        benchmarks=dict(index.files),
        benchmark_statements=index.statements,
        theorems_checked=theorems,
        contaminated=dict(sorted(found.items())),
        rows_dropped=rows,
        states_checked=states,
    )
    return data, check


@dataclass(frozen=True)
class Groups:
    """InfoNCE groups over state hashes: column 0 is the positive, columns 1..K the negatives."""

    states: list[list[str]]  # (G, 1 + K) state hashes
    goals: list[str]  # (G,) root-goal state hash of the group's theorem
    depth: np.ndarray  # (G,) depth of the positive
    theorem: list[str]  # (G,)
    heldout: np.ndarray  # (G,) bool: the theorem is held out
    kind_counts: dict[str, int]  # negatives per kind over all groups
    # (G, K) kind of each negative (KINDS), in the group's column order
    kinds: list[list[str]] = field(default_factory=list)
    dropped: int = 0  # positives whose theorem could not fill a group (module docstring)
    # (G,) the positive's remaining proof steps in its attempt (module docstring); empty if unknown
    remaining: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float32))

    def counts(self) -> dict[str, object]:
        """What the EBM artifact's meta records of the groups.

        >>> g = Groups([["p", "n"]], ["g"], np.array([1]), ["t"], np.array([False]),
        ...            {"sibling": 1}, [["sibling"]], dropped=2)
        >>> g.counts()["dropped"], g.counts()["train_groups"]
        (2, 1)
        """
        return {
            "groups": len(self),
            "train_groups": int((~self.heldout).sum()),
            "heldout_groups": int(self.heldout.sum()),
            "dropped": self.dropped,
            "negatives_by_kind": dict(self.kind_counts),
        }

    def __len__(self) -> int:
        return len(self.goals)

    def subset(self, mask: np.ndarray) -> Groups:
        idx = np.flatnonzero(mask)
        return Groups(
            states=[self.states[i] for i in idx],
            goals=[self.goals[i] for i in idx],
            depth=self.depth[idx],
            theorem=[self.theorem[i] for i in idx],
            heldout=self.heldout[idx],
            kind_counts=self.kind_counts,
            kinds=[self.kinds[i] for i in idx] if self.kinds else [],
            dropped=self.dropped,
            remaining=self.remaining[idx] if len(self.remaining) else self.remaining,
        )


def chance_bound(chance: float, groups: int) -> float:
    """Chance rank-1 (``1 / group size``) plus two binomial standard errors over ``groups``
    groups: a rank-1 at or below it cannot be told from chance.  The EBM's training watch and the
    report's rank-1 gate both draw this line.

    >>> round(chance_bound(0.25, 12), 3)
    0.5
    """
    return chance + 2 * math.sqrt(chance * (1 - chance) / groups)


def build_groups(data: StateData, *, negatives: int, split: TheoremSplit, seed: int = 0) -> Groups:
    """One group per on-path node of each attempt (each decision that chose a proof-path state)
    that its theorem can fill; see the module docstring for the order of the negative kinds."""
    rng = random.Random(seed)
    pos = data.positives()
    if not pos:
        raise ValueError(
            f"no proved theorem in {len(data.sources)} trajectory director(ies) "
            f"{data.sources}: the EBM needs states on verified proof paths"
        )
    heldout = split.held_out(data.goal)
    expansion = data.expansion or [None] * len(data.theorem)
    children: dict[tuple, list[int]] = defaultdict(list)
    by_theorem: dict[str, list[int]] = defaultdict(list)
    by_attempt: dict[tuple, list[int]] = defaultdict(list)  # (source, theorem, attempt) → nodes
    expanded_at = {k: e for k, e in zip(data.node_key, expansion, strict=True)}
    proof_length: dict[tuple, int] = defaultdict(int)  # (source, theorem, attempt) → tactics
    for key, d, p in zip(data.node_key, data.depth, data.on_path, strict=True):
        if p:
            proof_length[key[:3]] = max(proof_length[key[:3]], d + 1)
    for i, pk in enumerate(data.parent_key):
        if pk is not None:
            children[pk].append(i)
        by_theorem[data.theorem[i]].append(i)
        by_attempt[data.node_key[i][:3]].append(i)
    # Per split, the unique (theorem, state) pairs other theorems' negatives are drawn from.
    split_states: dict[bool, list[tuple[str, str]]] = {True: [], False: []}
    seen: set[tuple[str, str]] = set()
    for t, h in zip(data.theorem, data.state_hash, strict=True):
        if (t, h) not in seen:
            seen.add((t, h))
            split_states[t in heldout].append((t, h))

    # One group per decision: each on-path node of each attempt (the pop that chose it), not per
    # unique state — the same state popped in two searches was chosen against two frontiers.
    # Roots are left out: a root *is* the goal (trivial to rank) and search never scores one.
    positive_nodes = [i for i, p in enumerate(data.on_path) if p and data.parent_key[i] is not None]

    def open_at(j: int, popped: int | None) -> bool:
        """Node ``j`` was in its search's queue when the expansion ``popped`` was chosen: created
        by an earlier expansion and not expanded before it."""
        if popped is None:
            return False
        parent = data.parent_key[j]
        made = -1 if parent is None else expanded_at.get(parent)
        mine = expansion[j]
        return made is not None and made < popped and (mine is None or mine > popped)

    states, goals, depths, theorems, held, group_kinds, remaining = [], [], [], [], [], [], []
    kinds: Counter[str] = Counter()
    dropped = 0
    for i in positive_nodes:
        t, h = data.theorem[i], data.state_hash[i]
        bad = pos[t]
        candidates: dict[str, list[str]] = {
            "sibling": [
                data.state_hash[j]
                for j in children[data.parent_key[i]]  # type: ignore[index]
                if open_at(j, expansion[i])
            ],
            "frontier": [
                data.state_hash[j]
                for j in by_attempt[data.node_key[i][:3]]
                if open_at(j, expansion[i])
            ],
            "dead_end": [data.state_hash[j] for j in by_theorem[t] if data.failed[j]],
            "off_path": [data.state_hash[j] for j in by_theorem[t]],
        }
        taken: set[str] = {h}
        chosen: list[tuple[str, str]] = []
        for kind, cands in candidates.items():
            pool = sorted({c for c in cands if c not in bad and c not in taken})
            rng.shuffle(pool)
            for c in pool[: negatives - len(chosen)]:
                taken.add(c)
                chosen.append((kind, c))
        others = split_states[t in heldout]
        room = min(MAX_OTHER_THEOREM, negatives - len(chosen))
        tries = 0
        while room > 0 and tries < 50:
            tries += 1
            ot, oh = others[rng.randrange(len(others))]
            if ot != t and oh not in taken and oh not in bad:
                taken.add(oh)
                chosen.append(("other_theorem", oh))
                room -= 1
        if len(chosen) < negatives:
            dropped += 1  # the theorem's own states cannot fill a group (module docstring)
            continue
        kinds.update(k for k, _ in chosen)
        states.append([h] + [c for _, c in chosen])
        group_kinds.append([k for k, _ in chosen])
        goals.append(data.goal[t])
        depths.append(data.depth[i])
        remaining.append(proof_length[data.node_key[i][:3]] - data.depth[i])
        theorems.append(t)
        held.append(t in heldout)
    groups = Groups(
        states=states,
        goals=goals,
        depth=np.asarray(depths, dtype=np.int64),
        theorem=theorems,
        heldout=np.asarray(held, dtype=bool),
        kind_counts={k: kinds.get(k, 0) for k in KINDS},
        kinds=group_kinds,
        dropped=dropped,
        remaining=np.asarray(remaining, dtype=np.float32),
    )
    log.info(
        "EBM groups: %d (%d train / %d held-out, %d held-out theorems) of 1 positive + %d "
        "negatives, %d positives dropped (their theorem could not fill a group); negatives by "
        "kind: %s",
        len(groups),
        int((~groups.heldout).sum()),
        int(groups.heldout.sum()),
        len(heldout),
        negatives,
        dropped,
        groups.kind_counts,
    )
    if not len(groups):
        raise ValueError(
            f"no InfoNCE group could be filled ({dropped} positives dropped): too few states of "
            f"each proved theorem for 1 + {negatives} (ebm.negatives)"
        )
    return groups
