"""Whole-proof verification: a proof counts only after its assembled file passes in a fresh REPL.

Tactic-by-tactic acceptance is not enough (Pantograph issue #1: a ``simpa`` leaving a placeholder was
accepted step by step; DeepSeek-Prover-V2 found an ``apply?`` that emitted no ``sorry`` warning).  So
the file ``statement + tactics + #print axioms <name>`` is elaborated with ``frontend.process`` in a
new REPL process that no search has touched, and the proof is accepted only if:

- the file begins with the dataset's statement byte for byte (:meth:`Theorem.statement`: header,
  docstring, preamble and ``theorem … := by``; trusted text, never guarded), so nothing can precede,
  change or redefine it;
- the model's part — everything after the statement but the ``#print axioms`` line burnqed appends —
  passes the tactic guard (a dataset's ``def`` is trusted; a ``def`` in a proof is not);
- Lean reports no error (an unfinished proof is an ``unsolved goals`` error) and no ``declaration uses
  'sorry'`` warning;
- the axiom report is read **only from the unit of the appended** ``#print axioms`` command, and no
  other message anywhere in the file has the report's shape (a ``trace "'t' does not depend on any
  axioms"`` in the proof would otherwise forge it); every axiom reported is in
  ``lean.allowed_axioms``.

Names are parsed anchored on ``' depends on axioms:`` / ``' does not depend on any axioms``, so Lean
names containing ``'`` (``or_swap'``) verify.  ``import`` lines of the header are not in the file: the
REPL imports ``lean.imports`` on its command line (importing later is not allowed).

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
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from burnqed.config import LeanConfig
from burnqed.lean.client import CompilationUnit, ReplClient, read_timeout_for
from burnqed.lean.errors import ReplError, ReplProtocolError, ReplTimeoutError
from burnqed.lean.guard import TacticGuard
from burnqed.theorems import Theorem

log = logging.getLogger(__name__)

_IMPORT_LINE = re.compile(r"^[ \t]*import[ \t][^\n]*\n?", re.MULTILINE)
_LEADING_IMPORTS = re.compile(r"\A(?:[ \t]*import[ \t][^\n]*\n|[ \t]*\n)*")
# A `#print axioms` report, whole message: the name is everything between the first quote and the
# quote before ` depends on` / ` does not depend` (names may contain `'`).
_REPORT = re.compile(
    r"\A\s*'(?P<name>.+)' (?:depends on axioms: \[(?P<axioms>[^\]]*)\]"
    r"|(?P<none>does not depend on any axioms))\s*\Z",
    re.DOTALL,
)
# What any message that looks like a report contains (used to reject look-alikes elsewhere).
_REPORT_SHAPE = re.compile(r"depends? on (?:any )?axioms")


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
    """The statement (header without imports + docstring + statement) + indented tactics."""
    return dataclasses.replace(theorem, header=strip_imports(theorem.header)).lean_file(tactics)


def _report_command(theorem: Theorem) -> str:
    return f"#print axioms {theorem.name}"


def proof_file(theorem: Theorem, tactics: Sequence[str]) -> str:
    """The file verification checks: :func:`theorem_file` + ``#print axioms <name>``."""
    return theorem_file(theorem, tactics) + f"\n{_report_command(theorem)}\n"


def _normalise(text: str) -> str:
    return " ".join(text.split())


def statement_hash(statement: str) -> str:
    """sha256 of the statement with whitespace runs collapsed (for display and provenance; the
    check itself is byte for byte)."""
    return hashlib.sha256(_normalise(statement).encode()).hexdigest()


def split_proof_file(theorem: Theorem, file: str) -> tuple[str, str] | str:
    """``(trusted statement, model's part)`` of ``file``, or why the file does not begin with the
    dataset's statement.  Leading ``import`` lines are dropped first (the REPL imports on its command
    line); the ``#print axioms`` line that :func:`proof_file` appends is not part of the proof."""
    trusted = theorem_file(theorem, [])
    file = file[_LEADING_IMPORTS.match(file).end() :]
    trusted = trusted[_LEADING_IMPORTS.match(trusted).end() :]
    if not file.startswith(trusted):
        at = next(
            (i for i, (a, b) in enumerate(zip(trusted, file, strict=False)) if a != b),
            min(len(trusted), len(file)),
        )
        return (
            f"statement changed: the file does not begin with the dataset's statement of "
            f"{theorem.key!r} (sha256 {statement_hash(trusted)[:12]}); first difference at "
            f"character {at}: expected {trusted[at : at + 40]!r}, the file has "
            f"{file[at : at + 40]!r}"
        )
    proof = file[len(trusted) :]
    report = _report_command(theorem)
    stripped = proof.rstrip()
    if stripped.endswith(report) and stripped[: -len(report)].endswith("\n"):
        proof = stripped[: -len(report)]
    return trusted, proof


def statement_in_file(theorem: Theorem, file: str) -> str | None:
    """None if ``file`` begins with the dataset's statement of ``theorem``, else why not."""
    parts = split_proof_file(theorem, file)
    return parts if isinstance(parts, str) else None


def _report_unit(file: str, theorem: Theorem, units: Sequence[CompilationUnit]) -> int | None:
    """Index of the unit of the last ``#print axioms <name>`` line of ``file`` (by byte offset)."""
    at = file.rfind(f"\n{_report_command(theorem)}")
    if at < 0:
        return None
    byte = len(file[: at + 1].encode("utf-8"))
    for i, unit in enumerate(units):
        b0, b1 = unit.boundary
        if b0 <= byte < b1:
            return i
    return None


def _parse_report(text: str) -> tuple[str, tuple[str, ...]] | None:
    if (m := _REPORT.match(text)) is None:
        return None
    axioms = () if m["none"] else tuple(a.strip() for a in m["axioms"].split(",") if a.strip())
    return m["name"], axioms


def judge(
    cfg: LeanConfig, theorem: Theorem, file: str, units: Sequence[CompilationUnit]
) -> Verdict:
    """The verdict on ``file`` from Lean's ``frontend.process`` units (no REPL needed: testable)."""
    reasons = []
    report_at = _report_unit(file, theorem, units)
    axioms: tuple[str, ...] | None = None
    for i, unit in enumerate(units):
        for m in unit.messages:
            if m.severity == "error":
                reasons.append(f"Lean error: {m}")
            elif "declaration uses 'sorry'" in m.text:
                reasons.append(f"uses sorry: {m}")
            if not _REPORT_SHAPE.search(m.text):
                continue
            parsed = _parse_report(m.text) if i == report_at else None
            if parsed is None or parsed[0] != theorem.name or axioms is not None:
                reasons.append(
                    f"a message other than the `#print axioms` report looks like one: {m}"
                )
            else:
                axioms = parsed[1]
    if axioms is None:
        reasons.append(f"no `{_report_command(theorem)}` report (did the theorem elaborate?)")
        axioms = ()
    bad = [a for a in axioms if a not in cfg.allowed_axioms]
    if bad:
        reasons.append(f"axioms outside lean.allowed_axioms: {', '.join(bad)}")
    return Verdict(not reasons, tuple(reasons), file, axioms)


async def verify_file(
    cfg: LeanConfig,
    theorem: Theorem,
    file: str,
    *,
    stderr_log: Path | None = None,
    repl: Callable[[], Awaitable[ReplClient]] | None = None,
) -> Verdict:
    """Check a whole Lean ``file`` claimed to prove ``theorem`` in a fresh REPL process.

    ``repl``: where the fresh process comes from — an async function returning a started client
    that no search has used (the pool's warm verifiers), which this function closes after the one
    check; None starts one here.  It is called only when Lean is needed.
    """
    parts = split_proof_file(theorem, file)
    if isinstance(parts, str):  # refused before Lean: no process needed
        return Verdict(False, (parts,), file, ())
    trusted, body = parts
    if problem := TacticGuard.from_config(cfg).check(body):
        return Verdict(False, (f"proof {problem}",), file, ())
    # What Lean checks: the trusted statement, the proof, and our own report command last.
    file = f"{trusted}{body.rstrip()}\n\n{_report_command(theorem)}\n"
    # The REPL's timeout applies to the whole file: allow one tactic timeout per proof line.
    lines = max(1, sum(1 for line in body.splitlines() if line.strip()))
    timeout_s = cfg.tactic_timeout_s * lines
    try:
        if repl is None:
            client = ReplClient(
                dataclasses.replace(cfg, tactic_timeout_s=timeout_s),
                name=f"verify[{theorem.key}]",
                stderr_log=stderr_log,
            )
            await client.start()
        else:
            client = await repl()
    except ReplError as e:  # no process to check it in: not a proof
        return Verdict(False, (f"REPL failure: {e}",), file, ())
    try:
        if repl is not None:  # a warm process runs with the per-tactic timeout: set the file's
            await client.request("options.set", {"timeout": int(timeout_s * 1000)})
        units = await client.frontend_process(
            file, sorrys=False, timeout=read_timeout_for(timeout_s, cfg.hang_grace_s)
        )
    except ReplTimeoutError as e:
        return Verdict(False, (f"timeout: {e}",), file, ())
    except ReplProtocolError as e:
        return Verdict(False, (f"REPL refused the file: {e}",), file, ())
    except ReplError as e:  # a crash while checking is not a proof
        return Verdict(False, (f"REPL failure: {e}",), file, ())
    finally:
        await client.close()
    verdict = judge(cfg, theorem, file, units)
    log.debug("verified %s: ok=%s %s", theorem.key, verdict.ok, verdict.reasons)
    return verdict


async def verify_proof(
    cfg: LeanConfig,
    theorem: Theorem,
    tactics: Sequence[str],
    *,
    stderr_log: Path | None = None,
    repl: Callable[[], Awaitable[ReplClient]] | None = None,
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
    return await verify_file(cfg, theorem, file, stderr_log=stderr_log, repl=repl)


__all__ = [
    "Verdict",
    "judge",
    "proof_file",
    "split_proof_file",
    "statement_hash",
    "statement_in_file",
    "strip_imports",
    "theorem_file",
    "verify_file",
    "verify_proof",
]
