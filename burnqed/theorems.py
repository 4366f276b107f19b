"""Theorem statements to prove: the records of ``data/theorems/*.jsonl`` and ``data/benchmarks/*.jsonl``.

One JSON object per line with the DeepSeek miniF2F keys (``reference/datasets.md`` §2.2):
``name``, ``split``, ``header``, ``informal_prefix``, ``formal_statement`` (``theorem <name> … := by\\n``,
no ``sorry``), ``goal`` (the printed initial state, optional), plus an optional ``proof`` (a known
tactic list, used by the propositional generator and for tests).  The Lean file of a proof is
``header + informal_prefix + formal_statement + proof``.

**Keys.**  A theorem's ``key`` identifies it everywhere burnqed names a theorem (trajectories'
``theorem`` column, manifests, eval rows, reports, ``--resume``, the search pool): it is unique within
its benchmark and deterministic from the file.  It is the dataset's ``name`` when that name occurs
once in the file, and ``<name>@<split>:<line>`` (``<name>@<line>`` without a split; ``line`` is the
1-based line of the row in the source file) when the name repeats — DeepSeek's ProofNet has 19 names
used by two or three different exercises (``exercise_3_3@valid:52``, ``exercise_3_3@test:239``).
Records that already carry a ``key`` (files burnqed wrote) keep it.  Two rows with one key are an
error naming both lines.  ``name`` is the Lean declaration's own name: it stays in the statement and
is what ``#print axioms`` reports on.

**The statement is trusted dataset text.**  ``header + informal_prefix + formal_statement`` is
everything the dataset gives before the proof — imports, ``open``s, the per-row definitions of a
ProofNet header, the preamble (``def``, ``abbrev``, docstrings) of a Goedel-Prover-V2 or PutnamBench
statement.  It is hashed and checked byte for byte in the verified file; the tactic guard applies to
the model's proof only.  A trailing ``sorry`` is stripped when read (:func:`strip_sorry`); a statement
ending in ``:=`` gets `` by`` when a tactic proof is appended (:meth:`Theorem.lean_file`).

Example::

    >>> t = Theorem(name="t", formal_statement="theorem t : ∀ (p : Prop), p → p := by\\n")
    >>> t.lean_file(["intro p h", "exact h"]).splitlines()[-1]
    '  exact h'
    >>> t.key
    't'
    >>> Theorem(name="u", formal_statement="theorem u : True :=").lean_file(["trivial"])
    'theorem u : True := by\\n  trivial\\n'
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path


@dataclass(frozen=True)
class Theorem:
    name: str  # the Lean declaration's name (what `#print axioms` reports on)
    formal_statement: str  # "[preamble]theorem <name> <binders> : <type> := by\n" (or ":=\n")
    header: str = ""  # imports, options, `open`s and definitions that precede the statement
    informal_prefix: str = ""  # natural-language docstring, "/-- … -/\n"
    split: str = ""  # "valid" / "test" / "train" / ""
    goal: str = ""  # Lean's printed initial state, when the source provides it
    proof: tuple[str, ...] | None = None  # a known proof, when the source provides one
    key: str = ""  # unique within the benchmark (module docstring); "" means `name`

    def __post_init__(self) -> None:
        if not self.key:
            object.__setattr__(self, "key", self.name)

    def statement(self) -> str:
        """The trusted text before the proof: header + docstring + statement ending ``:= by\\n``."""
        statement = self.formal_statement
        if statement.rstrip().endswith(":="):
            statement = statement.rstrip() + " by\n"
        elif not statement.endswith("\n"):
            statement += "\n"
        return self.header + self.informal_prefix + statement

    def lean_file(self, tactics: Iterable[str], *, indent: str = "  ") -> str:
        """The whole Lean file proving this theorem with ``tactics`` (one per line, indented)."""
        body = "".join(indent + tac.replace("\n", "\n" + indent) + "\n" for tac in tactics)
        return self.statement() + body

    def to_json(self) -> dict:
        """The record as written to JSONL; ``key`` only when it is not the name (so a miniF2F row
        is written back exactly as DeepSeek's file has it)."""
        d = asdict(self)
        if self.key == self.name:
            del d["key"]
        if self.proof is None:
            del d["proof"]
        else:
            d["proof"] = list(self.proof)
        return d


_TRAILING_SORRY = re.compile(r"(:=\s*(?:by\s+)?)sorry\s*$")


def strip_sorry(statement: str) -> str:
    """``… := by sorry`` → ``… := by\\n``; ``… := sorry`` → ``… :=\\n``; anything else unchanged."""
    m = _TRAILING_SORRY.search(statement)
    if m is None:
        return statement
    return statement[: m.start()] + m.group(1).rstrip() + "\n"


def assign_keys(
    rows: Sequence[tuple[int, Theorem]],
    *,
    where: str | Path,
    fixed: Collection[int] = (),
) -> list[Theorem]:
    """Key each ``(line, theorem)`` of one file (module docstring): its base key (the dataset's
    name: ``key`` if the reader set one, else ``name``), qualified by ``@<split>:<line>`` when that
    base key repeats in the file; rows on the ``fixed`` lines carry a key of their own (a file
    burnqed wrote) and keep it.  Two rows with one final key raise :class:`TheoremFileError`
    naming both lines."""
    counts = Counter(t.key for line, t in rows if line not in fixed)
    seen: dict[str, int] = {}
    out = []
    for line, t in rows:
        key = t.key
        if line not in fixed and counts[key] > 1:
            key = f"{key}@{t.split}:{line}" if t.split else f"{key}@{line}"
        if key in seen:
            raise TheoremFileError(
                f"{where}:{line}: duplicate theorem key {key!r} (also at line {seen[key]})"
            )
        seen[key] = line
        out.append(t if key == t.key else replace(t, key=key))
    return out


class TheoremFileError(ValueError):
    """A theorem file line is not a valid record; the message names the file and line."""


_REQUIRED = ("name", "formal_statement")
_KNOWN = {f for f in Theorem.__dataclass_fields__}


def jsonl_objects(
    path: Path, *, error: type[ValueError] = TheoremFileError
) -> Iterator[tuple[int, dict]]:
    """``(line, record)`` of each non-blank line of a JSONL file of objects; a line that is not a
    JSON object raises ``error`` naming the file and line."""
    with Path(path).open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise error(f"{path}:{lineno}: not JSON ({e.msg})") from None
            if not isinstance(rec, dict):
                raise error(f"{path}:{lineno}: expected a JSON object")
            yield lineno, rec


def read_theorems(path: str | Path) -> Iterator[Theorem]:
    """Yield the theorems of a JSONL file; a bad line or a repeated key raises
    :class:`TheoremFileError` naming it (keys are assigned as :func:`assign_keys` does)."""
    path = Path(path)
    rows: list[tuple[int, Theorem]] = []
    fixed: set[int] = set()  # lines whose record carries its own key
    for lineno, rec in jsonl_objects(path):
        missing = [k for k in _REQUIRED if not isinstance(rec.get(k), str) or not rec.get(k)]
        if missing:
            raise TheoremFileError(f"{path}:{lineno}: missing or empty key(s) {missing}")
        kwargs = {k: v for k, v in rec.items() if k in _KNOWN}
        if kwargs.get("proof") is not None:
            kwargs["proof"] = tuple(kwargs["proof"])
        if isinstance(rec.get("key"), str) and rec["key"]:
            fixed.add(lineno)
        rows.append((lineno, Theorem(**kwargs)))
    yield from assign_keys(rows, where=path, fixed=fixed)


def write_theorems(path: str | Path, theorems: Iterable[Theorem]) -> int:
    """Write theorems as JSONL (atomically: a temporary file renamed into place); return the count."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    n = 0
    with tmp.open("w", encoding="utf-8") as f:
        for t in theorems:
            f.write(json.dumps(t.to_json(), ensure_ascii=False) + "\n")
            n += 1
    tmp.replace(path)
    return n


__all__ = [
    "Theorem",
    "TheoremFileError",
    "assign_keys",
    "read_theorems",
    "strip_sorry",
    "write_theorems",
]
