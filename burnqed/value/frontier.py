"""The choice sets of a recorded search: at each pop that is a *decision*, the open nodes and which
of them lie on the accepted proof path (issue 30 §2).

A **decision** is a recorded pop with at least two open nodes of which at least one lies on the
attempt's accepted proof path; other pops are left out (nothing to choose, or no right answer
known).  The open nodes at a pop are rebuilt from the recorded tree the way the search kept them: a
state node enters the frontier when the step that created it ends (unless solved, a duplicate, an
error edge or at ``max_depth``) and leaves it when popped; the pops of one step leave in expansion
order.  :mod:`burnqed.replay.decisions` judges priorities on these sets; :mod:`burnqed.value.fit`
fits weights to them.

Example (the root expanded into an on-path node 1 and an off-path node 2, then node 1 popped)::

    >>> rows = [
    ...     dict(theorem="t", attempt=0, node_id=0, parent_id=None, state="a", solved=False,
    ...          duplicate_of=None, depth=0, expansion_index=0, step=0, on_proof_path=True),
    ...     dict(theorem="t", attempt=0, node_id=1, parent_id=0, state="b", solved=False,
    ...          duplicate_of=None, depth=1, expansion_index=1, step=1, on_proof_path=True),
    ...     dict(theorem="t", attempt=0, node_id=2, parent_id=0, state="c", solved=False,
    ...          duplicate_of=None, depth=1, expansion_index=None, step=None,
    ...          on_proof_path=False)]
    >>> [(c.expansion, [r["node_id"] for r in c.open], c.popped) for c in choice_sets(rows, max_depth=50)]
    [(1, [1, 2], 1)]
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Row = Mapping[str, Any]  # one node row (burnqed.trajectory.NODE_SCHEMA's columns)


@dataclass(frozen=True)
class ChoiceSet:
    """The open nodes (by node id) at one recorded pop that is a decision."""

    theorem: str
    attempt: int
    expansion: int  # the pop's expansion index (a run with budget b makes it iff expansion < b)
    open: tuple[Row, ...]  # sorted by node id (the search's tie-break)
    popped: int  # the node id the recorded search popped

    @property
    def on_path(self) -> list[bool]:
        return [bool(r["on_proof_path"]) for r in self.open]


def choice_sets(
    rows: Sequence[Row], *, max_depth: int, on_path_only: bool = True
) -> list[ChoiceSet]:
    """The decisions of every attempt in ``rows``, in (theorem, attempt, expansion) order (with
    ``on_path_only=False``: every pop with at least two open nodes)."""
    by_attempt: dict[tuple[str, int], list[Row]] = {}
    for r in rows:
        by_attempt.setdefault((r["theorem"], r["attempt"]), []).append(r)
    out: list[ChoiceSet] = []
    for (theorem, attempt), nodes in sorted(by_attempt.items()):
        out.extend(_attempt_sets(theorem, attempt, nodes, max_depth, on_path_only))
    return out


def _attempt_sets(
    theorem: str, attempt: int, nodes: list[Row], max_depth: int, on_path_only: bool
) -> Iterator[ChoiceSet]:
    by_id = {r["node_id"]: r for r in nodes}
    # The step whose end brings a node into the frontier: its parent's (the root's: before all).
    entering: dict[int, list[Row]] = {}
    for r in nodes:
        if (
            r["state"] is None
            or r["duplicate_of"] is not None
            or r["solved"]
            or r["depth"] >= max_depth
        ):
            continue
        step = -1 if r["parent_id"] is None else by_id[r["parent_id"]]["step"]
        entering.setdefault(step, []).append(r)
    pops = sorted((r for r in nodes if r["expansion_index"] is not None),
                  key=lambda r: r["expansion_index"])  # fmt: skip
    open_nodes: dict[int, Row] = {}
    steps = sorted(entering)
    next_step = 0  # index into `steps` of the next group to enter
    for pop in pops:
        while next_step < len(steps) and steps[next_step] < pop["step"]:
            open_nodes.update((r["node_id"], r) for r in entering[steps[next_step]])
            next_step += 1
        nid = pop["node_id"]
        if nid not in open_nodes:
            raise ValueError(f"{theorem}#{attempt}: popped node {nid} was not in the frontier")
        if len(open_nodes) >= 2 and (
            not on_path_only or any(r["on_proof_path"] for r in open_nodes.values())
        ):
            yield ChoiceSet(theorem, attempt, pop["expansion_index"],
                            tuple(open_nodes[i] for i in sorted(open_nodes)), nid)  # fmt: skip
        del open_nodes[nid]


BOOTSTRAP_SAMPLES = 1000
BOOTSTRAP_SEED = 0  # fixed: the reported standard error is a function of the data


def _per_decision_mean(
    values: Sequence[float], theorems: Sequence[str]
) -> tuple[float, float | None]:
    """The mean of per-decision ``values`` and its standard error bootstrapped by theorem
    (theorems resampled with replacement, :data:`BOOTSTRAP_SAMPLES` times, fixed seed): the
    theorem is the unit that varies, its decisions are correlated.  ``values`` is not empty."""
    import numpy as np

    per: dict[str, list[float]] = {}
    for v, t in zip(values, theorems, strict=True):
        row = per.setdefault(t, [0, 0])
        row[0] += 1
        row[1] += v
    counts = np.array(list(per.values()), dtype=np.float64)  # (theorems, 2): decisions, sum
    mean = float(counts[:, 1].sum() / counts[:, 0].sum())
    se = None
    if len(counts) > 1:
        rng = np.random.default_rng(BOOTSTRAP_SEED)
        idx = rng.integers(0, len(counts), size=(BOOTSTRAP_SAMPLES, len(counts)))
        sample = counts[idx]  # (B, theorems, 2)
        se = float((sample[..., 1].sum(axis=1) / sample[..., 0].sum(axis=1)).std(ddof=1))
    return mean, se


def top1_rate(hits: Sequence[bool], theorems: Sequence[str]) -> dict[str, float | int | None]:
    """The fraction of decisions a priority got right (``hits``), with a standard error
    bootstrapped by theorem (:func:`_per_decision_mean`).

    >>> top1_rate([True, False, True, True], ["a", "a", "b", "c"])["rate"]
    0.75
    """
    if not hits:
        return {"rate": None, "se": None, "decisions": 0}
    rate, se = _per_decision_mean([int(bool(h)) for h in hits], theorems)
    return {"rate": rate, "se": se, "decisions": len(hits)}


def logprob_term(cum_logprob: float, depth: int, depth_normalisation: float) -> float:
    """The priority's log-prob term, unweighted: ``cum_logprob / max(depth, 1)^k``
    (:func:`burnqed.search.value.priority`; the fits' and the effect metrics' feature).

    >>> logprob_term(-4.0, 2, 0.0), logprob_term(-4.0, 2, 1.0), logprob_term(-4.0, 0, 1.0)
    (-4.0, -2.0, -4.0)
    """
    if depth_normalisation:
        return cum_logprob / max(depth, 1) ** depth_normalisation
    return cum_logprob


def same_depth(choice: ChoiceSet) -> bool:
    """Whether every open node of a decision lies at one depth: a choice among siblings and
    cousins, what a best-first search of a few nodes mostly faces (a random order's frontier
    mixes depths, where the cumulative log-prob mostly measures depth)."""
    return len({n["depth"] for n in choice.open}) == 1


def top1_rates(
    hits: Mapping[str, Sequence[bool]], choices: Sequence[ChoiceSet], theorems: Sequence[str]
) -> dict[str, dict[str, dict[str, float | int | None]]]:
    """:func:`top1_rate` of each priority's ``hits`` on every decision (``all``) and on those
    whose open nodes share a depth (``same_depth``, :func:`same_depth`)."""
    keep = [same_depth(c) for c in choices]

    def only(xs: Sequence[Any]) -> list[Any]:
        return [x for x, k in zip(xs, keep, strict=True) if k]

    return {
        "all": {n: top1_rate(h, theorems) for n, h in hits.items()},
        "same_depth": {n: top1_rate(only(h), only(theorems)) for n, h in hits.items()},
    }


def top1_gain(
    hits: Sequence[bool], baseline: Sequence[bool], theorems: Sequence[str]
) -> dict[str, float | int | None]:
    """How much more often ``hits`` got a decision right than ``baseline`` on the same decisions:
    the difference of the two rates, its standard error bootstrapped by theorem (one resample for
    both: the pairing is what makes a small gain measurable), and the gain in those errors.

    >>> g = top1_gain([True, True, True, False], [False, True, False, False], ["a", "a", "b", "c"])
    >>> g["difference"], g["decisions"]
    (0.5, 4)
    """
    if not hits:
        return {"difference": None, "se": None, "in_se": None, "decisions": 0}
    diff, se = _per_decision_mean(
        [int(bool(h)) - int(bool(b)) for h, b in zip(hits, baseline, strict=True)], theorems
    )
    return {"difference": diff, "se": se,
            "in_se": None if not se else diff / se, "decisions": len(hits)}  # fmt: skip


def top1_hit(choice: ChoiceSet, scores: Sequence[float]) -> bool:
    """Whether the open node with the highest score (ties: the lowest node id, as the search
    breaks them) lies on the proof path."""
    best = max(range(len(choice.open)), key=lambda j: (scores[j], -choice.open[j]["node_id"]))
    return bool(choice.open[best]["on_proof_path"])


__all__ = [
    "ChoiceSet",
    "Row",
    "choice_sets",
    "same_depth",
    "top1_gain",
    "top1_hit",
    "top1_rate",
    "top1_rates",
]
