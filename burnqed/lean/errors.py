"""Exceptions of the Lean layer.

:class:`ReplError` is a failure of the REPL *process or protocol* (EOF, a line that is not JSON, a read
that timed out, an ``{"error": …}`` reply).  It is kept apart from a tactic that Lean rejects, which is
an ordinary result (``TacticFailure``) that prunes one search node.  :class:`ReplTimeoutError` is the
one that says which: the REPL answered its own ``interrupt`` (``killed`` False: a failed tactic, the
process and its states are fine) or the client gave up waiting and killed it (``killed`` True: a hard
hang).  ``StartError`` is the one ``ReplError`` a caller should expect for valid input: Lean's own
verdict that the theorem statement does not elaborate — deterministic, a defect of the statement; a
start that timed out or crashed is a plain ``ReplError`` (infrastructure, retried).

Example::

    >>> try:
    ...     raise ReplProtocolError("goal.tactic", "index", "Invalid state index 99")
    ... except ReplError as e:
    ...     print(e)
    goal.tactic: REPL error 'index': Invalid state index 99
"""

from __future__ import annotations

import re


class ReplError(RuntimeError):
    """A process or protocol failure of a REPL (the message says which and quotes the cause)."""


class ReplVersionError(ReplError):
    """``repl --version`` names a Pantograph version burnqed does not speak."""


class ReplTimeoutError(ReplError):
    """A request outran a wall-clock backstop: the REPL answered ``interrupt`` or the read timed out.

    ``killed`` False: the REPL's own ``timeout`` fired and it answered ``{"error": "internal", "desc":
    "interrupt"}`` — cancellation is cooperative and the process is healthy (Pantograph's own test runs
    the next tactic on the same state; ``reference/pantograph.md`` §8).  ``killed`` True: no reply
    within the grace period after it (a hard hang), and the client killed the process.
    """

    def __init__(self, message: str, *, killed: bool) -> None:
        super().__init__(message)
        self.killed = killed


# The kinds of an ``{"error": kind, "desc": …}`` reply that are a Lean exception raised while the
# tactic ran (``reference/pantograph.md`` §5: "Lean exception inside CoreM"): Lean's verdict on the
# tactic — some tactics a file accepts fail so in ``goal.tactic`` (PyPantograph #82) — kept as a
# failed tactic.  Every other kind is the protocol's (a malformed request, an unknown state, an IO
# error): no verdict on the tactic.
LEAN_EXCEPTION_KINDS = frozenset({"core", "exception"})


def is_interrupt(kind: str, desc: str) -> bool:
    """Whether an error reply is the REPL's own timeout firing: Pantograph answers ``{"error":
    "internal", "desc": "interrupt"}`` (``reference/pantograph.md`` §8), but the text of Lean's
    interrupt exception has changed between versions ("interrupt", "interrupted", "(interrupt)",
    "internal exception: interrupt") and may reach a client under ``core`` or ``exception``, so any
    ``internal``, ``core`` or ``exception`` reply whose description names an interrupt is one.

    >>> is_interrupt("internal", "interrupt"), is_interrupt("core", "Interrupted")
    (True, True)
    >>> is_interrupt("internal", "unknown free variable"), is_interrupt("index", "interrupt")
    (False, False)
    """
    words = re.findall(r"[a-z]+", desc.lower())
    return kind in ("internal", "core", "exception") and any(
        w in ("interrupt", "interrupted", "interruption") for w in words
    )


class ReplProtocolError(ReplError):
    """The REPL answered ``{"error": kind, "desc": desc}`` to ``command``; the process is still usable."""

    def __init__(self, command: str, kind: str, desc: str) -> None:
        super().__init__(f"{command}: REPL error {kind!r}: {desc}")
        self.command = command
        self.kind = kind
        self.desc = desc


class StartError(ReplError):
    """Lean's own verdict: the theorem statement does not elaborate; the message quotes its errors.

    Never raised for a timeout, an interrupt or a crash while the statement elaborates: those are
    infrastructure (:class:`ReplError`), retried.
    """


__all__ = [
    "LEAN_EXCEPTION_KINDS",
    "ReplError",
    "ReplProtocolError",
    "ReplTimeoutError",
    "ReplVersionError",
    "StartError",
    "is_interrupt",
]
