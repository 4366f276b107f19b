"""Decontamination: no evaluation-benchmark statement may reach training data (SPEC §4.2).

A benchmark theorem is identified by the **normalised statement hash** of what it states, in two
textual forms that must meet:

- a *statement* (``theorem name (p q : Prop) (h : p) : q := by``) is parsed into its binders and its
  type and rendered the way Lean prints the initial goal — one ``name : type`` line per hypothesis,
  then ``⊢ type`` — so it matches a proof state;
- a *state* (``p q : Prop\\nh : p\\n⊢ q``; Lean groups hypotheses of one type) is split back into one
  line per hypothesis, its first goal only.

Both are whitespace-collapsed before hashing, and the name-free statement text is hashed too (two
statement files that differ only in the theorem's name).  What is compared:

=====================  =================================================================
data                   its "statements"
=====================  =================================================================
tactic pairs           each theorem's root state (its lowest-depth ``state_before``)
search pool            each theorem's statement, and its printed ``goal`` when present
trajectory steps       each proved theorem's root state (the first step's ``state_before``)
=====================  =================================================================

A match is either refused (:class:`ContaminationError`, naming the theorems and the switch) or
dropped (the whole theorem, counted and named), per ``data.decontamination`` (``refuse`` | ``drop``).
Every check returns a :class:`DecontaminationCheck` that the stage writes into its summary.

It is an exact-match test of normalised text: it catches verbatim copies of a benchmark problem
(the common way benchmarks leak into scraped training sets), not paraphrases or re-formalisations.

Example::

    >>> from burnqed.theorems import Theorem
    >>> index = BenchmarkIndex.from_theorems(
    ...     [Theorem(name="b1", formal_statement="theorem b1 (p q : Prop) (h : p ∧ q) : q := by\\n")],
    ...     source="bench.jsonl")
    >>> index.match_state("p q : Prop\\nh : p ∧ q\\n⊢ q")
    'b1'
    >>> index.match_state("p : Prop\\n⊢ p → p") is None
    True
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from burnqed.data.benchmarks import sha256_file
from burnqed.theorems import Theorem, TheoremFileError, read_theorems

log = logging.getLogger(__name__)

MODES = ("refuse", "drop")
# Names listed in an error message or a log line; the summary JSON lists all of them.
SHOWN = 10

_DECL = re.compile(r"^\s*(?:theorem|lemma)\s+\S+|^\s*example\b")
_WS = re.compile(r"\s+")


class ContaminationError(ValueError):
    """Training data states a benchmark theorem and ``data.decontamination`` is ``refuse``."""


def _collapse(text: str) -> str:
    return _WS.sub(" ", text).strip()


def statement_hash(canonical: str) -> str:
    """The hash of a canonical form (sha256, 16 hex digits: collisions are not a concern here)."""
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


# --------------------------------------------------------------------------------------------
# Canonical forms


def _goal_text(hyps: Iterable[tuple[str, str]], target: str) -> str:
    lines = [f"{n} : {_collapse(t)}" for n, t in hyps]
    return "\n".join([*lines, f"⊢ {_collapse(target)}"])


def canonical_state(state: str) -> str | None:
    """The first goal of a Lean-printed state, one line per hypothesis; None without a goal."""
    goal = state.strip().split("\n\n", 1)[0]
    lines = goal.split("\n")
    if lines and lines[0].startswith("case "):
        lines = lines[1:]
    hyps: list[list[str]] = []  # [names, type] — continuation lines extend the last entry
    target: list[str] | None = None
    for line in lines:
        if target is not None:
            target.append(line)
        elif line.startswith("⊢"):
            target = [line[1:]]
        elif hyps and (line[:1].isspace() or " : " not in line):
            hyps[-1][1] += " " + line
        elif " : " in line:
            names, typ = line.split(" : ", 1)
            hyps.append([names, typ])
    if target is None:
        return None
    expanded = [(n, t) for names, t in hyps for n in names.split()]
    return _goal_text(expanded, " ".join(target))


def _closing(text: str, i: int) -> int:
    """Index just past the bracket group opening at ``text[i]`` (nesting counted); -1 if unbalanced."""
    pairs = {"(": ")", "{": "}", "[": "]", "⦃": "⦄"}
    stack: list[str] = []
    for j in range(i, len(text)):
        c = text[j]
        if c in pairs:
            stack.append(pairs[c])
        elif stack and c == stack[-1]:
            stack.pop()
            if not stack:
                return j + 1
    return -1


def _split_top(text: str, sep: str) -> int:
    """Index of the first ``sep`` outside brackets in ``text``; -1 if none."""
    depth = 0
    for j, c in enumerate(text):
        if c in "([{⦃":
            depth += 1
        elif c in ")]}⦄":
            depth -= 1
        elif depth == 0 and text.startswith(sep, j):
            return j
    return -1


def canonical_statement(formal_statement: str) -> str | None:
    """A ``theorem``/``lemma``/``example`` statement rendered as Lean prints its initial goal.

    ``theorem t (p q : Prop) [inst : Foo p] (h : p) : q := by`` → ``p : Prop\\nq : Prop\\ninst : Foo
    p\\nh : p\\n⊢ q``.  An anonymous instance binder ``[Foo p]`` becomes ``inst✝ : Foo p``, as Lean
    prints it.  None when the text does not parse as a declaration.
    """
    m = _DECL.match(formal_statement)
    if m is None:
        return None
    rest = formal_statement[m.end() :].strip()
    end = rest.rfind(":=")
    if end >= 0:
        rest = rest[:end].strip()
    hyps: list[tuple[str, str]] = []
    while rest[:1] in ("(", "{", "[", "⦃"):
        close = _closing(rest, 0)
        if close < 0:
            return None
        inner = rest[1 : close - 1].strip()
        colon = _split_top(inner, " : ") if " : " in inner else _split_top(inner, ":")
        if colon < 0:
            if rest[0] != "[":
                return None
            hyps.append(("inst✝", inner))
        else:
            names = inner[:colon].split()
            typ = inner[colon:].lstrip(" :")
            hyps += [(n, typ) for n in names]
        rest = rest[close:].strip()
    if not rest.startswith(":"):
        return None
    return _goal_text(hyps, rest[1:])


def _body(formal_statement: str) -> str:
    """The statement without its declaration keyword and name, whitespace-collapsed."""
    return "stmt:" + _collapse(_DECL.sub("", formal_statement, count=1))


def theorem_keys(t: Theorem) -> set[str]:
    """Every hash under which ``t`` is known: its canonical goal, name-free statement, printed goal."""
    keys = {statement_hash(_body(t.formal_statement))}
    canonical = canonical_statement(t.formal_statement)
    if canonical is not None:
        keys.add(statement_hash(canonical))
    if t.goal:
        goal = canonical_state(t.goal)
        if goal is not None:
            keys.add(statement_hash(goal))
    return keys


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
        """The benchmark theorem whose statement is ``state``'s first goal, or None."""
        canonical = canonical_state(state)
        return None if canonical is None else self.hashes.get(statement_hash(canonical))

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
        }


def _check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"data.decontamination: expected one of {MODES}, got {mode!r}")


def _verdict(found: Mapping[str, str], *, what: str, mode: str, where: str) -> None:
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


def check_pairs(
    table: pa.Table, index: BenchmarkIndex, *, mode: str, what: str, where: str = ""
) -> tuple[pa.Table, DecontaminationCheck]:
    """Tactic pairs (or positive trajectory steps) with every benchmark-stating theorem refused or
    dropped.  A theorem's statement is its root state: its lowest-depth ``state_before``."""
    _check_mode(mode)
    theorems = table.column("theorem").to_pylist()
    states = table.column("state_before").to_pylist()
    depths = table.column("depth").to_pylist()
    root: dict[str, tuple[int, str]] = {}
    for name, state, depth in zip(theorems, states, depths, strict=True):
        if name not in root or depth < root[name][0]:
            root[name] = (depth, state)
    found: dict[str, str] = {}
    for name, (_, state) in root.items():
        hit = index.match_state(state)
        if hit is not None:
            found[name] = hit
    _verdict(found, what=what, mode=mode, where=where or what)
    kept = table
    if found:
        mask = pc.invert(pc.is_in(table.column("theorem"), value_set=pa.array(list(found))))
        kept = table.filter(mask)
    check = DecontaminationCheck(
        what=what,
        mode=mode,
        benchmarks=dict(index.files),
        benchmark_statements=index.statements,
        theorems_checked=len(root),
        contaminated=dict(sorted(found.items())),
        rows_dropped=table.num_rows - kept.num_rows,
    )
    return kept, check


def check_theorems(
    theorems: Sequence[Theorem], index: BenchmarkIndex, *, mode: str, what: str, where: str = ""
) -> tuple[list[Theorem], DecontaminationCheck]:
    """Theorem statements (the search pool) with every benchmark theorem refused or dropped."""
    _check_mode(mode)
    found = {}
    for t in theorems:
        hit = index.match_theorem(t)
        if hit is not None:
            found[t.name] = hit
    _verdict(found, what=what, mode=mode, where=where or what)
    kept = [t for t in theorems if t.name not in found]
    check = DecontaminationCheck(
        what=what,
        mode=mode,
        benchmarks=dict(index.files),
        benchmark_statements=index.statements,
        theorems_checked=len(theorems),
        contaminated=dict(sorted(found.items())),
        rows_dropped=len(theorems) - len(kept),
    )
    return kept, check


__all__ = [
    "MODES",
    "BenchmarkIndex",
    "ContaminationError",
    "DecontaminationCheck",
    "TheoremFileError",
    "canonical_state",
    "canonical_statement",
    "check_pairs",
    "check_theorems",
    "statement_hash",
]
