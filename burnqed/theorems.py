"""Theorem statements to prove: the records of ``data/theorems/*.jsonl`` and ``data/benchmarks/*.jsonl``.

One JSON object per line with the DeepSeek miniF2F keys (``reference/datasets.md`` §2.2):
``name``, ``split``, ``header``, ``informal_prefix``, ``formal_statement`` (``theorem <name> … := by\\n``,
no ``sorry``), ``goal`` (the printed initial state, optional), plus an optional ``proof`` (a known
tactic list, used by the propositional generator and for tests).  The Lean file of a proof is
``header + informal_prefix + formal_statement + proof``.

Example::

    >>> t = Theorem(name="t", formal_statement="theorem t : ∀ (p : Prop), p → p := by\\n")
    >>> t.lean_file(["intro p h", "exact h"]).splitlines()[-1]
    '  exact h'
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True)
class Theorem:
    name: str
    formal_statement: str  # "theorem <name> <binders> : <type> := by\n"
    header: str = ""  # imports, options and `open`s that precede the statement
    informal_prefix: str = ""  # natural-language docstring, "/-- … -/\n"
    split: str = ""  # "valid" / "test" / "train" / ""
    goal: str = ""  # Lean's printed initial state, when the source provides it
    proof: tuple[str, ...] | None = None  # a known proof, when the source provides one

    def lean_file(self, tactics: Iterable[str], *, indent: str = "  ") -> str:
        """The whole Lean file proving this theorem with ``tactics`` (one per line, indented)."""
        body = "".join(indent + tac.replace("\n", "\n" + indent) + "\n" for tac in tactics)
        statement = (
            self.formal_statement
            if self.formal_statement.endswith("\n")
            else self.formal_statement + "\n"
        )
        return self.header + self.informal_prefix + statement + body

    def to_json(self) -> dict:
        d = asdict(self)
        if self.proof is None:
            del d["proof"]
        else:
            d["proof"] = list(self.proof)
        return d


class TheoremFileError(ValueError):
    """A theorem file line is not a valid record; the message names the file and line."""


_REQUIRED = ("name", "formal_statement")
_KNOWN = {f for f in Theorem.__dataclass_fields__}


def read_theorems(path: str | Path) -> Iterator[Theorem]:
    """Yield the theorems of a JSONL file; a bad line raises :class:`TheoremFileError` naming it."""
    path = Path(path)
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise TheoremFileError(f"{path}:{lineno}: not JSON ({e.msg})") from None
            if not isinstance(rec, dict):
                raise TheoremFileError(f"{path}:{lineno}: expected a JSON object")
            missing = [k for k in _REQUIRED if not isinstance(rec.get(k), str) or not rec.get(k)]
            if missing:
                raise TheoremFileError(f"{path}:{lineno}: missing or empty key(s) {missing}")
            kwargs = {k: v for k, v in rec.items() if k in _KNOWN}
            if kwargs.get("proof") is not None:
                kwargs["proof"] = tuple(kwargs["proof"])
            yield Theorem(**kwargs)


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


__all__ = ["Theorem", "TheoremFileError", "read_theorems", "write_theorems"]
