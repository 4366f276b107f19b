"""Trace known proofs through the propositional REPL into tactic pairs (the LeanDojo analogue).

Each theorem is started exactly as the Lean client starts a dataset theorem — ``frontend.process``
on its statement with ``sorry`` as the body and ``sorrys: true`` — and each recorded tactic is sent
with ``goal.tactic``.  The requests are protocol lines handled in-process by
:meth:`~burnqed.proplogic.repl.Repl.handle_line`, the same code the subprocess runs, so a pair
records exactly what a search would see: ``state_before``/``state_after`` are the goals rendered
by :func:`burnqed.lean.goals.render_goals` (``"no goals"`` after the last step).

Example::

    >>> from burnqed.data.proplogic import generate_theorems
    >>> table = trace_theorems(generate_theorems(3, seed=0, min_depth=2, max_depth=2))
    >>> table.num_rows, table.column("depth").to_pylist()
    (6, [0, 1, 0, 1, 0, 1])
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sized

import pyarrow as pa

from burnqed.data.schema import TACTIC_PAIR_SCHEMA
from burnqed.lean.goals import Goal, render_goals
from burnqed.progress import Progress
from burnqed.proplogic.repl import Repl  # in-process: the data stage's one allowed reach into it
from burnqed.theorems import Theorem

log = logging.getLogger(__name__)


class TraceError(ValueError):
    """A recorded proof does not replay; the message names the theorem and the step."""


def _call(repl: Repl, cmd: str, payload: dict) -> dict:
    return json.loads(repl.handle_line(f"{cmd} {json.dumps(payload, ensure_ascii=False)}"))


def _render(goals: list[dict]) -> str:
    return render_goals(Goal.from_json(g) for g in goals)


def start_theorem(repl: Repl, theorem: Theorem) -> tuple[int, list[dict]]:
    """The state id and goals of ``theorem`` started from source, as the Lean client does."""
    statement = theorem.formal_statement
    if not statement.endswith("\n"):
        statement += "\n"
    file = theorem.header + theorem.informal_prefix + statement + "  sorry"
    r = _call(
        repl,
        "frontend.process",
        {
            "file": file,
            "readHeader": False,
            "inheritEnv": False,
            "sorrys": True,
            "typeErrorsAsGoals": False,
            "newConstants": False,
        },
    )
    if "error" in r:
        raise TraceError(f"{theorem.name}: frontend.process failed: {r['desc']}")
    units = [u for u in r["units"] if "goalStateId" in u]
    errors = [m["data"] for u in r["units"] for m in u["messages"] if m["severity"] == "error"]
    if errors or not units:
        raise TraceError(
            f"{theorem.name}: statement does not elaborate: {errors or 'no sorry goal'}"
        )
    return units[-1]["goalStateId"], units[-1]["goals"]


def trace_theorem(repl: Repl, theorem: Theorem) -> list[tuple[str, str, str]]:
    """(state_before, tactic, state_after) for each step of ``theorem.proof``."""
    if not theorem.proof:
        raise TraceError(f"{theorem.name}: no recorded proof to trace")
    sid, goals = start_theorem(repl, theorem)
    steps: list[tuple[str, str, str]] = []
    before = _render(goals)
    for depth, tactic in enumerate(theorem.proof):
        r = _call(repl, "goal.tactic", {"stateId": sid, "tactic": tactic})
        if "nextStateId" not in r or r["hasSorry"]:
            why = (
                r.get("parseError")
                or r.get("desc")
                or "; ".join(m["data"] for m in r.get("messages", []))
                or "uses sorry"
            )
            raise TraceError(f"{theorem.name}: step {depth} `{tactic}` failed: {why}")
        sid, goals = r["nextStateId"], r["goals"]
        after = _render(goals)
        steps.append((before, tactic, after))
        before = after
    if goals:
        raise TraceError(f"{theorem.name}: the recorded proof leaves goals:\n{_render(goals)}")
    return steps


def trace_theorems(theorems: Iterable[Theorem], *, source: str = "proplogic") -> pa.Table:
    """A :data:`~burnqed.data.schema.TACTIC_PAIR_SCHEMA` table of every step of every proof;
    theorem names are ``"<source>:<name>"``.  Raises :class:`TraceError` on a proof that fails."""
    repl = Repl()
    cols: dict[str, list] = {name: [] for name in TACTIC_PAIR_SCHEMA.names}
    n = 0
    total = len(theorems) if isinstance(theorems, Sized) else None
    with Progress(log, "trace", total=total, unit="theorems") as progress:
        for theorem in progress.iter(theorems):
            _trace_into(cols, repl, theorem, source)
            n += 1
    log.info("traced %d theorems into %d tactic pairs", n, len(cols["tactic"]))
    # from_arrays, not pa.table(dict): the latter probes for pandas, a slow import.
    arrays = [pa.array(cols[f.name], type=f.type) for f in TACTIC_PAIR_SCHEMA]
    return pa.Table.from_arrays(arrays, schema=TACTIC_PAIR_SCHEMA)


def _trace_into(cols: dict[str, list], repl: Repl, theorem: Theorem, source: str) -> None:
    """Append the tactic pairs of ``theorem``'s recorded proof to ``cols``."""
    repl.handle_line("reset")  # keep the REPL's state table small; ids restart per theorem
    for depth, (before, tactic, after) in enumerate(trace_theorem(repl, theorem)):
        cols["source"].append(source)
        cols["theorem"].append(f"{source}:{theorem.name}")
        cols["state_before"].append(before)
        cols["tactic"].append(tactic)
        cols["state_after"].append(after)
        cols["depth"].append(depth)


__all__ = ["TraceError", "start_theorem", "trace_theorem", "trace_theorems"]
