"""What a replay without ``--live`` can say: its coverage, and its effect where it covers.

A replay answers every question from the recording.  An attempt is **covered** at budget ``b`` when
each of its first ``b`` pops was a state the recording expanded (and every proof it found had a
recorded verdict): then it is exactly what a live search with the replayed priority gets
(``tests/replay``).  An attempt that popped a state the recording never expanded got no candidates
there, so its outcome is unknown: it is **uncovered** — counted apart, never scored as a failure.
A theorem is covered when all its attempts are, or when a covered attempt proved it (pass@n: then
it is solved whatever the others would have done).

**Coverage** is covered attempts / all attempts, per budget.  The **prediction** is the replay's
effect on the covered theorems only: solved by the recording vs by the replay, gained and lost,
with the exact McNemar p (:func:`burnqed.eval.paired.mcnemar_p`).

**The bound.**  A covered attempt pops only states the recording expanded within its own budget
``N``, and every child of those is recorded, proofs included; so it can only solve a theorem the
recording solved within ``N`` nodes.  At the recording's own budget a recording-only replay over a
twin's trees therefore cannot gain a theorem (``max_gain`` 0): it can only show where the other
priority would lose what the twin found.  At a smaller budget ``b`` it can gain at most the covered
theorems the recording proved between ``b`` and ``N`` (``max_gain``).  A ``--live`` replay has no
such bound and predicts nothing: it is an equality check against the live eval.

Example::

    >>> proofs = {("t0", 0): None, ("t1", 0): None, ("t2", 0): 3, ("t2", 1): None}
    >>> inexact = {("t1", 0): 2, ("t2", 1): 1}        # t1's third pop was never recorded, …
    >>> rows = coverage_rows(proofs, inexact, budgets=[2, 4])
    >>> [(r["budget"], r["covered"], r["attempts"], r["uncovered_theorems"]) for r in rows]
    [(2, 3, 4, ['t2']), (4, 2, 4, ['t1'])]

(t2's second attempt is uncovered from its second pop, but its first proved it at 3 < 4.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from burnqed.eval.paired import mcnemar_p, solved_at

BOUND = (
    "a replay without --live answers only from the recording's trees, so it can solve only a "
    "theorem the recording solved within its own budget: at that budget it cannot gain one, and at "
    "a smaller budget at most max_gain (the covered theorems the recording proved between the two)"
)
LIVE = (
    "a --live replay expands live what the recording never did, with the recording's model and "
    "seeds: it equals the live eval with this priority, theorem by theorem (an equality check of "
    "replay, not a prediction)"
)


def coverage_rows(
    attempts: Mapping[tuple[str, int], int | None],
    inexact_from: Mapping[tuple[str, int], int],
    *,
    budgets: Sequence[int],
) -> list[dict]:
    """Per budget: attempts, covered attempts, coverage, and the uncovered theorems (sorted).
    ``attempts``: (theorem, attempt) → the expansion that proved it (None: unproved);
    ``inexact_from``: → the first pop whose answer the recording lacked (an attempt is covered at
    ``b`` iff ``b`` <= it)."""
    rows = []
    for b in budgets:
        uncovered = [k for k in attempts if inexact_from.get(k, b) < b]
        proved = {
            t for (t, a), pe in attempts.items()
            if pe is not None and pe < b and inexact_from.get((t, a), b) >= b
        }  # fmt: skip
        rows.append(
            {
                "budget": b,
                "attempts": len(attempts),
                "covered": len(attempts) - len(uncovered),
                "coverage": (len(attempts) - len(uncovered)) / len(attempts) if attempts else None,
                "uncovered_theorems": sorted({t for t, _ in uncovered} - proved),
            }
        )
    return rows


def covered_effect(
    recorded: Mapping[str, Any],
    replayed: Mapping[str, Any],
    uncovered: Sequence[str],
    *,
    budget: int,
    recording_budget: int,
) -> dict[str, Any]:
    """The replay's effect on the theorems it covers at ``budget`` (both arguments eval-shaped:
    ``per_theorem`` rows with ``budget_at_proof``), the uncovered counted apart, and
    ``max_gain``: how many covered theorems it could gain at most (module docstring)."""
    before, after = solved_at(recorded, budget), solved_at(replayed, budget)
    ceiling = solved_at(recorded, recording_budget)
    if before is None or after is None or ceiling is None:
        raise ValueError("covered_effect needs per-theorem rows on both sides")
    apart = set(uncovered)
    paired = sorted(t for t in before.keys() & after.keys() if t not in apart)
    gained = [t for t in paired if after[t] and not before[t]]
    lost = [t for t in paired if before[t] and not after[t]]
    out_of = [t for t in before if t in apart]
    return {
        "theorems": len(paired),
        "recorded_solved": sum(before[t] for t in paired),
        "solved": sum(after[t] for t in paired),
        "gained": len(gained),
        "lost": len(lost),
        "p_value": mcnemar_p(len(gained), len(lost)),
        "max_gain": sum(ceiling.get(t, False) and not before[t] for t in paired),
        "gained_theorems": gained[:20],
        "lost_theorems": lost[:20],
        "uncovered": {"theorems": len(out_of), "recorded_solved": sum(before[t] for t in out_of)},
    }


__all__ = ["BOUND", "LIVE", "coverage_rows", "covered_effect"]
