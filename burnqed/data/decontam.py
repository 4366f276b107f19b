"""Decontamination: no evaluation-benchmark statement may reach training data (SPEC §4.2).

A benchmark theorem is identified by the hash of its **canonical goal**
(:mod:`burnqed.data.canonical`): the statement and the proof state Lean prints for it have one
form, the same up to renaming of bound names and hypotheses, binder order and grouping, comments,
attributes and modifiers, whitespace, redundant parentheses, and leading ``∀``/``→`` versus
hypotheses.  The name-free token text of the statement is hashed too (it is what matches a
statement that does not parse into a goal).  What is compared, before any filter:

=====================  =================================================================
data                   its states
=====================  =================================================================
tactic pairs           **every** ``state_before`` (each of its goals) of every theorem
search pool            each theorem's statement, and its printed ``goal`` when present
trajectory steps       every ``state_before`` of the proof steps of proved theorems
EBM training states    every state of the searches it learns from (:mod:`burnqed.ebm.groups`)
=====================  =================================================================

A theorem is keyed by ``(source, theorem)`` (two sources may share a name); one matching state
condemns the whole theorem.  A match is either refused (:class:`ContaminationError`, naming the
theorems and the switch) or dropped (the whole theorem, counted and named), per
``data.decontamination`` (``refuse`` | ``drop``).  Every check returns a
:class:`DecontaminationCheck` that the stage writes into its summary.

It catches copies of a benchmark problem that differ in presentation (the common way benchmarks
leak into scraped training sets), and intermediate states of a training proof that *are* a
benchmark problem; not paraphrases, re-formalisations or definitional unfolding (the list is in
:mod:`burnqed.data.canonical`).

Example::

    >>> from burnqed.theorems import Theorem
    >>> index = BenchmarkIndex.from_theorems(
    ...     [Theorem(name="b1", formal_statement="theorem b1 (p q : Prop) (h : p ∧ q) : q := by\\n")],
    ...     source="bench.jsonl")
    >>> index.match_state("a b : Prop\\nhab : a ∧ b\\n⊢ b")
    'b1'
    >>> index.match_state("x : Prop\\ny : Prop\\n⊢ x ∧ y → y")
    'b1'
    >>> index.match_state("p : Prop\\n⊢ p → p") is None
    True
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from burnqed.data.benchmarks import sha256_file
from burnqed.data.canonical import (
    canonical_goals,
    canonical_statement,
    statement_hash,
    theorem_keys,
)
from burnqed.theorems import Theorem, TheoremFileError, read_theorems

log = logging.getLogger(__name__)

MODES = ("refuse", "drop")
# Names listed in an error message or a log line; the summary JSON lists all of them.
SHOWN = 10


class ContaminationError(ValueError):
    """Training data states a benchmark theorem and ``data.decontamination`` is ``refuse``."""


def canonical_state(state: str) -> str | None:
    """The canonical form of the first goal of a Lean-printed state; None without a goal."""
    goals = canonical_goals(state)
    return goals[0] if goals else None


# --------------------------------------------------------------------------------------------
# The benchmark index and the checks


@dataclass(frozen=True)
class BenchmarkIndex:
    """Statement hashes of the evaluation benchmark(s) → the benchmark theorem's name."""

    hashes: dict[str, str]
    files: dict[str, str] = field(default_factory=dict)  # path → sha256
    statements: int = 0
    unparsed: int = 0  # statements matched only by their name-free text

    @classmethod
    def from_theorems(cls, theorems: Iterable[Theorem], *, source: str) -> BenchmarkIndex:
        hashes: dict[str, str] = {}
        n = unparsed = 0
        for t in theorems:
            n += 1
            unparsed += canonical_statement(t.formal_statement) is None
            for k in theorem_keys(t):
                hashes.setdefault(k, f"{t.name}")
        return cls(hashes=hashes, files={}, statements=n, unparsed=unparsed)

    @classmethod
    def load(cls, paths: Sequence[str | Path]) -> BenchmarkIndex:
        """The statements of the benchmark files ``paths`` (JSONL theorem records).

        A missing or malformed file raises ``FileNotFoundError`` or
        :class:`~burnqed.theorems.TheoremFileError` naming it, before any other work.
        """
        hashes: dict[str, str] = {}
        files: dict[str, str] = {}
        n = unparsed = 0
        for p in map(Path, paths):
            if not p.is_file():
                raise FileNotFoundError(
                    f"{p}: evaluation benchmark not found (decontamination compares training data "
                    f"against it; build it first: `burnqed data benchmarks`)"
                )
            one = cls.from_theorems(read_theorems(p), source=str(p))
            for k, name in one.hashes.items():
                hashes.setdefault(k, f"{p.stem}:{name}")
            files[str(p)] = sha256_file(p)
            n += one.statements
            unparsed += one.unparsed
        if unparsed:
            log.warning(
                "decontamination: %d of %d benchmark statements did not parse into a goal; "
                "they are matched by their statement text only",
                unparsed,
                n,
            )
        return cls(hashes=hashes, files=files, statements=n, unparsed=unparsed)

    def match_state(self, state: str) -> str | None:
        """The benchmark theorem one of ``state``'s goals states, or None."""
        for goal in canonical_goals(state):
            hit = self.hashes.get(statement_hash(goal))
            if hit is not None:
                return hit
        return None

    def match_theorem(self, t: Theorem) -> str | None:
        """The benchmark theorem ``t`` states, or None."""
        return next((self.hashes[k] for k in sorted(theorem_keys(t)) if k in self.hashes), None)


@dataclass(frozen=True)
class DecontaminationCheck:
    """What one check saw and did; written into the stage's summary JSON."""

    what: str  # "tactic pairs", "search pool", "trajectory steps"
    mode: str  # refuse | drop
    benchmarks: dict[str, str]  # benchmark file → sha256
    benchmark_statements: int
    theorems_checked: int
    contaminated: dict[str, str]  # our theorem → the benchmark theorem it states
    rows_dropped: int
    states_checked: int = 0  # distinct states (statements for the search pool) compared
    # our theorem → the depth of its first state that is a benchmark goal (0: its root)
    matched_depth: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "what": self.what,
            "mode": self.mode,
            "benchmarks": self.benchmarks,
            "benchmark_statements": self.benchmark_statements,
            "theorems_checked": self.theorems_checked,
            "contaminated_theorems": len(self.contaminated),
            "contaminated": self.contaminated,
            "rows_dropped": self.rows_dropped,
            "states_checked": self.states_checked,
            "matched_depth": self.matched_depth,
            "compared": "every state, canonical up to renaming (burnqed.data.canonical)",
        }


def check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"data.decontamination: expected one of {MODES}, got {mode!r}")


def verdict(found: Mapping[str, str], *, what: str, mode: str, where: str) -> None:
    """Refuse (raise) or log the drop of ``found``; nothing to say when it is empty."""
    if not found:
        log.info("decontamination (%s): no benchmark statement found", what)
        return
    shown = ", ".join(f"{k} (= {v})" for k, v in list(found.items())[:SHOWN])
    more = f" and {len(found) - SHOWN} more" if len(found) > SHOWN else ""
    if mode == "refuse":
        raise ContaminationError(
            f"{where}: {len(found)} theorem(s) of the {what} state an evaluation-benchmark "
            f"theorem: {shown}{more}. Remove them from the source, or set "
            f"data.decontamination: drop to drop them (counted and named in the summary)"
        )
    log.warning(
        "decontamination (%s): dropped %d theorem(s) stating a benchmark theorem: %s%s",
        what,
        len(found),
        shown,
        more,
    )


def theorem_labels(table: pa.Table, *, by_source: bool = True) -> list[str]:
    """Each row's theorem as decontamination keys it: ``source:theorem`` (two sources may share a
    name; a theorem already prefixed with its source keeps its name), or the bare theorem name."""
    theorems = table.column("theorem").to_pylist()
    if not by_source:
        return theorems
    sources = table.column("source").to_pylist()
    return [
        t if t.startswith(f"{s}:") else f"{s}:{t}" for s, t in zip(sources, theorems, strict=True)
    ]


def check_pairs(
    table: pa.Table,
    index: BenchmarkIndex,
    *,
    mode: str,
    what: str,
    where: str = "",
    by_source: bool = True,
) -> tuple[pa.Table, DecontaminationCheck]:
    """Tactic pairs (or positive trajectory steps) with every benchmark-stating theorem refused or
    dropped.  Every ``state_before`` (each of its goals) is compared with the benchmark's goals; a
    theorem (keyed by :func:`theorem_labels`) one of whose states is a benchmark goal goes whole.

    Run it before any filter: a filter that drops a theorem's root row would hide the theorem."""
    check_mode(mode)
    labels = theorem_labels(table, by_source=by_source)
    states = table.column("state_before").to_pylist()
    depths = table.column("depth").to_pylist()
    seen: dict[str, str | None] = {}
    found: dict[str, str] = {}
    depth_of: dict[str, int] = {}
    for label, state, depth in zip(labels, states, depths, strict=True):
        if state not in seen:
            seen[state] = index.match_state(state)
        hit = seen[state]
        if hit is not None and (label not in found or depth < depth_of[label]):
            found[label], depth_of[label] = hit, depth
    verdict(found, what=what, mode=mode, where=where or what)
    kept = table
    if found:
        kept = table.filter(pa.array([lab not in found for lab in labels], type=pa.bool_()))
    check = DecontaminationCheck(
        what=what,
        mode=mode,
        benchmarks=dict(index.files),
        benchmark_statements=index.statements,
        theorems_checked=len(set(labels)),
        contaminated=dict(sorted(found.items())),
        rows_dropped=table.num_rows - kept.num_rows,
        states_checked=len(seen),
        matched_depth=dict(sorted(depth_of.items())),
    )
    return kept, check


def check_theorems(
    theorems: Sequence[Theorem], index: BenchmarkIndex, *, mode: str, what: str, where: str = ""
) -> tuple[list[Theorem], DecontaminationCheck]:
    """Theorem statements (the search pool) with every benchmark theorem refused or dropped."""
    check_mode(mode)
    found = {}
    for t in theorems:
        hit = index.match_theorem(t)
        if hit is not None:
            found[t.name] = hit
    verdict(found, what=what, mode=mode, where=where or what)
    kept = [t for t in theorems if t.name not in found]
    check = DecontaminationCheck(
        what=what,
        mode=mode,
        benchmarks=dict(index.files),
        benchmark_statements=index.statements,
        theorems_checked=len(theorems),
        contaminated=dict(sorted(found.items())),
        rows_dropped=len(theorems) - len(kept),
        states_checked=len(theorems),
    )
    return kept, check


__all__ = [
    "MODES",
    "BenchmarkIndex",
    "ContaminationError",
    "DecontaminationCheck",
    "TheoremFileError",
    "canonical_goals",
    "canonical_state",
    "canonical_statement",
    "check_mode",
    "check_pairs",
    "check_theorems",
    "statement_hash",
    "theorem_keys",
    "theorem_labels",
    "verdict",
]
