"""How an attempt ended, and what every layer counts about it: one schema, written and read everywhere.

Search writes these values (``burnqed.search.engine`` into the summary rows of
``burnqed.trajectory``), the Lean pool counts its events under these names, and the eval, the
reports and ``burnqed summary`` read them from here — so a status or counter means one thing in a
manifest, an eval JSON and a report.

**Status** (summary column ``status``): what an attempt counts as.

| status              | meaning                                              | denominator      | ``--resume`` |
|---------------------|------------------------------------------------------|------------------|--------------|
| ``proved``          | a proof that whole-file verification accepted        | solved           | kept         |
| ``failed``          | ran to its end without one (budget or frontier)      | unsolved         | kept         |
| ``timeout``         | the per-attempt wall-clock cap ended it              | unsolved         | kept         |
| ``statement_error`` | Lean rejected the statement itself: a defect of the  | unsolved, listed | kept         |
|                     | benchmark row, not of the prover                     |                  |              |
| ``error``           | an infrastructure failure (a REPL that kept dying, a | no: listed apart | retried      |
|                     | server that stayed down, a start that timed out)     |                  |              |

A statement that does not elaborate fails the same way on every run, so it is a result (the theorem
stays in the denominator, unsolved, and is listed); an infrastructure error says nothing about the
prover and is retried.

**Ended by** (summary column ``ended_by``): why the search stopped — ``proof``, ``budget`` (the
``max_nodes`` expansions were spent), ``frontier`` (no open state left: every branch failed or hit
``max_depth``), ``timeout``, ``statement`` or ``fault``.  An eval scores one run at its largest
budget at every smaller one; :func:`ended_by_at` says why a run at budget ``b`` would have stopped.
When most unsolved attempts end by ``frontier``, the budget does not bind and no ordering of the
frontier (no value model) can change a result.

**Non-deterministic events**: anything the clock decided.  Tactic limits are deterministic
(heartbeats); the wall-clock limits behind them are backstops, and each firing is counted:
``tactic_wall_timeouts`` (a tactic failed because the REPL's in-process timeout or the client's read
timeout fired: summary column ``wall_timeouts``, node error kind ``timeout``) and
``attempt_timeouts`` (status ``timeout``); a whole-file check stopped by its timeout counts as a
``wall_timeouts`` event too.  A reproducible run shows 0 of both.

**Tactic failure kinds** (node ``error`` column, ``"kind: message"``): :data:`TACTIC_FAILURE_KINDS`.

**Lean pool counters** (``LeanPool.stats()``, the search manifest's ``lean_pool``, the reports):
:data:`POOL_COUNTERS`.

Example::

    >>> ended_by_at("frontier", proof_expansion=None, nodes_expanded=9, budget=16)
    'frontier'
    >>> ended_by_at("proof", proof_expansion=20, nodes_expanded=21, budget=16)
    'budget'
    >>> in_denominator("statement_error"), in_denominator("error")
    (True, False)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

STATUSES = ("proved", "failed", "timeout", "statement_error", "error")
SOLVED = "proved"
UNSOLVED = ("failed", "timeout", "statement_error")  # results: in the denominator, unsolved
INFRASTRUCTURE = "error"  # not a result: listed apart, retried by --resume

END_REASONS = ("proof", "budget", "frontier", "timeout", "statement", "fault")
# The status each end reason gives the attempt.
STATUS_OF_END = {
    "proof": "proved",
    "budget": "failed",
    "frontier": "failed",
    "timeout": "timeout",
    "statement": "statement_error",
    "fault": "error",
}

TACTIC_FAILURE_KINDS = {
    "error": "Lean rejected the tactic (an elaboration error)",
    "parse": "the tactic does not parse",
    "guard": "burnqed's tactic guard refused it before it reached Lean",
    "sorry": "its result uses sorry or unsafe code",
    "heartbeats": "it hit the deterministic per-tactic heartbeat limit (lean.tactic_heartbeats)",
    "timeout": "a wall-clock backstop fired (a non-deterministic event)",
    "protocol": "the REPL answered an error reply of its protocol's (no verdict of Lean's)",
}

NONDETERMINISTIC_EVENTS = {
    "tactic_wall_timeouts": "tactics (and whole-file checks) a wall-clock backstop failed instead of "
    "the heartbeat limit or Lean's verdict",
    "attempt_timeouts": "attempts ended by the per-attempt wall-clock cap (search.timeout_s)",
}

POOL_COUNTERS = {
    "sessions": "proof sessions opened (one per attempt)",
    "restarts": "REPL processes replaced (crash, hard hang, repeated timeout, recycle)",
    "crashes": "processes that died or broke the protocol",
    "interrupts": "cooperative interrupts answered by the REPL's own timeout; the REPL is kept",
    "protocol_errors": "tactics the REPL answered with an error reply of its protocol's, not Lean's",
    "hard_hangs": "no reply within the grace period after the REPL's timeout: killed",
    "recycles": "workers replaced after lean.recycle_after_requests / recycle_after_s",
    "spare_takeovers": "a pre-started spare took a killed worker's place",
    "saves": "states saved with goal.save",
    "loads": "states restored with goal.load after a restart",
    "load_failures": "goal.load calls that failed (the state was replayed instead)",
    "reopens": "statements started again in a new process, to replay a path from its root",
    "replays": "tactic calls re-run to rebuild states after a restart or adoption",
    "adopted": "states added from answers given elsewhere (a recording, a cache), without Lean",
    "rebuilds": "adopted states rebuilt in a REPL on their first live use",
    "disagreements": "rebuilt adopted states whose printed form differed (the live one stands)",
    "moves": "sessions moved to a less loaded worker",
    "verifications": "whole-file proof checks in fresh processes",
}


def in_denominator(status: str) -> bool:
    """Whether an attempt with ``status`` is a result (solved or not), not an infrastructure error."""
    if status not in STATUSES:
        raise ValueError(f"unknown attempt status {status!r}; expected one of {STATUSES}")
    return status != INFRASTRUCTURE


def ended_by_at(
    ended_by: str, *, proof_expansion: int | None, nodes_expanded: int, budget: int
) -> str:
    """Why a run of the same search with ``max_nodes = budget`` would have stopped.

    Exact for the deterministic search (``burnqed.search.engine``): that run performs the first
    ``budget`` expansions of this one, so it finds this proof when ``proof_expansion < budget``,
    spends its budget when this one expanded at least ``budget`` nodes, and otherwise stopped for
    the same reason as this one.
    """
    if ended_by not in END_REASONS:
        raise ValueError(f"unknown end reason {ended_by!r}; expected one of {END_REASONS}")
    if proof_expansion is not None and proof_expansion < budget:
        return "proof"
    if nodes_expanded >= budget:
        return "budget"
    return ended_by


def nondeterministic_events(rows: Iterable[Mapping]) -> dict[str, int]:
    """The :data:`NONDETERMINISTIC_EVENTS` counts over summary rows (``status``, ``wall_timeouts``)."""
    counts = dict.fromkeys(NONDETERMINISTIC_EVENTS, 0)
    for r in rows:
        counts["tactic_wall_timeouts"] += int(r.get("wall_timeouts") or 0)
        counts["attempt_timeouts"] += r.get("status") == "timeout"
    return counts


__all__ = [
    "END_REASONS",
    "INFRASTRUCTURE",
    "NONDETERMINISTIC_EVENTS",
    "POOL_COUNTERS",
    "SOLVED",
    "STATUSES",
    "STATUS_OF_END",
    "TACTIC_FAILURE_KINDS",
    "UNSOLVED",
    "ended_by_at",
    "in_denominator",
    "nondeterministic_events",
]
