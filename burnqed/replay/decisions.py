"""Decision metrics: how often a priority would have popped a node on the proof path.

A **decision** is a recorded pop with at least two open nodes of which at least one lies on the
attempt's accepted proof path (issue 30 §2); other pops are left out (nothing to choose, or no
right answer known).  Its *outcome* is the on-path node.  A priority's **frontier top-1** is the
fraction of decisions where it ranks an on-path node first among the open nodes — ties broken by
node id, as the search breaks them — reported with a standard error bootstrapped by theorem (the
theorem is the unit that varies; its decisions are correlated).

The open nodes at a pop are rebuilt from the recorded tree the way the search kept them: a state
node enters the frontier when the step that created it ends (unless solved, a duplicate, an error
edge or at ``max_depth``) and leaves it when popped; the pops of one step leave in expansion order.

Example (rows of one tree: the root expanded into an on-path node 1 and an off-path node 2, then
node 1 popped)::

    >>> rows = [
    ...     dict(theorem="t", attempt=0, node_id=0, parent_id=None, state="a", solved=False,
    ...          duplicate_of=None, depth=0, expansion_index=0, step=0, on_proof_path=True,
    ...          cum_logprob=0.0),
    ...     dict(theorem="t", attempt=0, node_id=1, parent_id=0, state="b", solved=False,
    ...          duplicate_of=None, depth=1, expansion_index=1, step=1, on_proof_path=True,
    ...          cum_logprob=-2.0),
    ...     dict(theorem="t", attempt=0, node_id=2, parent_id=0, state="c", solved=False,
    ...          duplicate_of=None, depth=1, expansion_index=None, step=None,
    ...          on_proof_path=False, cum_logprob=-1.0)]
    >>> d = find_decisions(rows, max_depth=50, priorities={"logprob": lambda r: r["cum_logprob"]})
    >>> [(x.expansion, x.open_nodes, x.top1) for x in d]
    [(1, 2, {'logprob': False})]
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from burnqed.value.frontier import BOOTSTRAP_SAMPLES, Row, choice_sets
from burnqed.value.frontier import top1_rate as frontier_top1


@dataclass(frozen=True)
class Decision:
    """One recorded pop that is a decision."""

    theorem: str
    attempt: int
    expansion: int  # the pop's expansion index (a run with budget b makes it iff expansion < b)
    open_nodes: int  # nodes in the frontier at the pop
    on_path: int  # of which on the accepted proof path
    top1: dict[str, bool]  # priority name → it ranks an on-path node first


def find_decisions(
    rows: Sequence[Row], *, max_depth: int, priorities: Mapping[str, Callable[[Row], float]]
) -> list[Decision]:
    """The decisions of every attempt in ``rows`` (:func:`burnqed.value.frontier.choice_sets`),
    each judged by every named priority (a function of a node row, higher popped first; ties to
    the lower node id, as the search breaks them)."""
    out = []
    for c in choice_sets(rows, max_depth=max_depth):
        top1 = {}
        for name, score in priorities.items():
            best = max(c.open, key=lambda r: (score(r), -r["node_id"]))
            top1[name] = bool(best["on_proof_path"])
        out.append(Decision(c.theorem, c.attempt, c.expansion, len(c.open), sum(c.on_path), top1))
    return out


def top1_rate(
    decisions: Sequence[Decision], name: str, *, budget: int | None = None
) -> dict[str, float | int | None]:
    """Frontier top-1 of priority ``name`` over the decisions a run with ``budget`` makes (all
    without one): ``rate``, its bootstrap ``se`` (:func:`burnqed.value.frontier.top1_rate`) and
    the number of ``decisions``."""
    chosen = [d for d in decisions if budget is None or d.expansion < budget]
    return frontier_top1([d.top1[name] for d in chosen], [d.theorem for d in chosen])


__all__ = ["BOOTSTRAP_SAMPLES", "Decision", "find_decisions", "top1_rate"]
