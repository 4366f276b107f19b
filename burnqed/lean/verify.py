"""Whole-proof verification: a proof counts only after its assembled file passes in a fresh REPL.

Tactic-by-tactic acceptance is not enough (Pantograph issue #1: a ``simpa`` leaving a placeholder was
accepted step by step; DeepSeek-Prover-V2 found an ``apply?`` that emitted no ``sorry`` warning).  So
the file ``header + statement + tactics + #print axioms <name>`` is elaborated with
``frontend.process`` in a new REPL process that no search has touched, and the proof is accepted only
if: no tactic is banned by the guard, Lean reports no error (an unfinished proof is an
``unsolved goals`` error), no ``declaration uses 'sorry'`` warning, every axiom the theorem depends on
is in ``lean.allowed_axioms``, and the file's statement is the dataset's statement, byte for byte
modulo whitespace (a hash comparison).  ``import`` lines of the header are not in the file: the REPL
imports ``lean.imports`` on its command line (importing later is not allowed).

Example::

    >>> import asyncio, sys
    >>> from burnqed.config import LeanConfig
    >>> from burnqed.theorems import Theorem
    >>> cfg = LeanConfig(repl_command=(sys.executable, "-m", "burnqed.proplogic"), imports=())
    >>> t = Theorem(name="t", formal_statement="theorem t (p : Prop) : p → p := by\\n")
    >>> v = asyncio.run(verify_proof(cfg, t, ["intro h", "exact h"]))   # doctest: +SKIP
    >>> v.ok, v.axioms                                                    # doctest: +SKIP
    (True, ())
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from burnqed.config import LeanConfig
from burnqed.lean.client import CompilationUnit, ReplClient
from burnqed.lean.errors import ReplError, ReplProtocolError, ReplTimeoutError
from burnqed.lean.guard import TacticGuard
from burnqed.theorems import Theorem

log = logging.getLogger(__name__)

_IMPORT_LINE = re.compile(r"^[ \t]*import[ \t][^\n]*\n?", re.MULTILINE)
_AXIOMS = re.compile(r"'(?P<name>[^']+)' depends on axioms: \[(?P<axioms>[^\]]*)\]")
_NO_AXIOMS = re.compile(r"'(?P<name>[^']+)' does not depend on any axioms")


@dataclass(frozen=True)
class Verdict:
    """The outcome of checking one whole proof."""

    ok: bool
    reasons: tuple[str, ...]  # why it was rejected (empty when ok)
    file: str  # the Lean file that was checked
    axioms: tuple[str, ...]  # what the theorem depends on, as `#print axioms` reported it


def strip_imports(header: str) -> str:
    """The header without its ``import`` lines (those modules are imported on the command line)."""
    return _IMPORT_LINE.sub("", header)


def theorem_file(theorem: Theorem, tactics: Sequence[str]) -> str:
    """``header`` (imports removed) + docstring + statement + indented tactics."""
    return dataclasses.replace(theorem, header=strip_imports(theorem.header)).lean_file(tactics)


def proof_file(theorem: Theorem, tactics: Sequence[str]) -> str:
    """The file verification checks: :func:`theorem_file` + ``#print axioms <name>``."""
    return theorem_file(theorem, tactics) + f"\n#print axioms {theorem.name}\n"


def _normalise(text: str) -> str:
    return " ".join(text.split())


def statement_hash(statement: str) -> str:
    """sha256 of the statement with whitespace runs collapsed (indentation is not meaning)."""
    return hashlib.sha256(_normalise(statement).encode()).hexdigest()


def statement_in_file(theorem: Theorem, file: str) -> str | None:
    """None if ``file`` declares ``theorem.name`` with the dataset's statement, else why not."""
    keyword = re.escape(theorem.formal_statement.split(maxsplit=1)[0])  # theorem / lemma / example
    decl = re.compile(rf"(?m)^[ \t]*{keyword}[ \t]+{re.escape(theorem.name)}(?![\w'.!?])")
    starts = [m.start() for m in decl.finditer(file)]
    if len(starts) != 1:
        return f"the file declares {theorem.name!r} {len(starts)} times (expected once)"
    expected = _normalise(theorem.formal_statement)
    found = _normalise(file[starts[0] :])[: len(expected)]
    if statement_hash(found) != statement_hash(expected):
        return f"statement changed: expected {expected!r}, the file has {found!r}"
    return None


def _axioms_of(name: str, units: Sequence[CompilationUnit]) -> tuple[str, ...] | None:
    for unit in units:
        for m in unit.messages:
            if (hit := _AXIOMS.search(m.text)) and hit["name"] == name:
                return tuple(a.strip() for a in hit["axioms"].split(",") if a.strip())
            if (hit := _NO_AXIOMS.search(m.text)) and hit["name"] == name:
                return ()
    return None


def judge(
    cfg: LeanConfig, theorem: Theorem, file: str, units: Sequence[CompilationUnit]
) -> Verdict:
    """The verdict on ``file`` from Lean's ``frontend.process`` units (no REPL needed: testable)."""
    reasons = []
    for unit in units:
        for m in unit.messages:
            if m.severity == "error":
                reasons.append(f"Lean error: {m}")
            elif "declaration uses 'sorry'" in m.text:
                reasons.append(f"uses sorry: {m}")
    axioms = _axioms_of(theorem.name, units)
    if axioms is None:
        reasons.append(f"no `#print axioms {theorem.name}` report (did the theorem elaborate?)")
        axioms = ()
    bad = [a for a in axioms if a not in cfg.allowed_axioms]
    if bad:
        reasons.append(f"axioms outside lean.allowed_axioms: {', '.join(bad)}")
    return Verdict(not reasons, tuple(reasons), file, axioms)


async def verify_file(
    cfg: LeanConfig, theorem: Theorem, file: str, *, stderr_log: Path | None = None
) -> Verdict:
    """Check a whole Lean ``file`` claimed to prove ``theorem`` in a fresh REPL process."""
    reasons = []
    if problem := statement_in_file(theorem, file):
        reasons.append(problem)
    body_start = file.find(theorem.formal_statement.strip())
    body = file[body_start + len(theorem.formal_statement.strip()) :] if body_start >= 0 else file
    if problem := TacticGuard.from_config(cfg).check(
        body.replace(f"#print axioms {theorem.name}", "")
    ):
        reasons.append(f"proof {problem}")
    if reasons:  # refused before Lean: no process needed
        return Verdict(False, tuple(reasons), file, ())
    if f"#print axioms {theorem.name}" not in file:
        file += f"\n#print axioms {theorem.name}\n"
    # The REPL's timeout applies to the whole file: allow one tactic timeout per proof line.
    lines = max(1, sum(1 for line in body.splitlines() if line.strip()))
    vcfg = dataclasses.replace(cfg, tactic_timeout_s=cfg.tactic_timeout_s * lines)
    async with ReplClient(vcfg, name=f"verify[{theorem.name}]", stderr_log=stderr_log) as repl:
        try:
            units = await repl.frontend_process(file, sorrys=False)
        except ReplTimeoutError as e:
            return Verdict(False, (f"timeout: {e}",), file, ())
        except ReplProtocolError as e:
            return Verdict(False, (f"REPL refused the file: {e}",), file, ())
        except ReplError as e:  # a crash while checking is not a proof
            return Verdict(False, (f"REPL failure: {e}",), file, ())
    verdict = judge(cfg, theorem, file, units)
    log.debug("verified %s: ok=%s %s", theorem.name, verdict.ok, verdict.reasons)
    return verdict


async def verify_proof(
    cfg: LeanConfig,
    theorem: Theorem,
    tactics: Sequence[str],
    *,
    stderr_log: Path | None = None,
) -> Verdict:
    """Guard every tactic, assemble :func:`proof_file`, and check it with :func:`verify_file`."""
    guard = TacticGuard.from_config(cfg)
    file = proof_file(theorem, tactics)
    blocked = [
        f"tactic {i + 1} {tac!r}: {why}"
        for i, tac in enumerate(tactics)
        if (why := guard.check(tac)) is not None
    ]
    if blocked:
        return Verdict(False, tuple(blocked), file, ())
    if not tactics:
        return Verdict(False, ("no tactics",), file, ())
    return await verify_file(cfg, theorem, file, stderr_log=stderr_log)


__all__ = [
    "Verdict",
    "judge",
    "proof_file",
    "statement_hash",
    "statement_in_file",
    "strip_imports",
    "theorem_file",
    "verify_file",
    "verify_proof",
]
