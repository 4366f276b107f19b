"""Exceptions of the Lean layer.

:class:`ReplError` is a failure of the REPL *process or protocol* (EOF, a line that is not JSON, a read
that timed out, an ``{"error": …}`` reply): the worker is restarted and the search's states are replayed.
It is kept apart from a tactic that Lean rejects, which is an ordinary result (``TacticFailure``) that
prunes one search node.  ``StartError`` is the one ``ReplError`` a caller should expect for valid
input: the theorem statement itself does not elaborate.

Example::

    >>> try:
    ...     raise ReplProtocolError("goal.tactic", "index", "Invalid state index 99")
    ... except ReplError as e:
    ...     print(e)
    goal.tactic: REPL error 'index': Invalid state index 99
"""

from __future__ import annotations


class ReplError(RuntimeError):
    """A process or protocol failure of a REPL (the message says which and quotes the cause)."""


class ReplVersionError(ReplError):
    """``repl --version`` names a Pantograph version burnqed does not speak."""


class ReplTimeoutError(ReplError):
    """A request outran its time: the REPL answered ``interrupt`` or the client's read timed out.

    ``killed`` is True when the client killed the process (read timeout); either way the REPL must be
    restarted before it is used again, because a timed-out state poisons later tactics.
    """

    def __init__(self, message: str, *, killed: bool) -> None:
        super().__init__(message)
        self.killed = killed


class ReplProtocolError(ReplError):
    """The REPL answered ``{"error": kind, "desc": desc}`` to ``command``; the process is still usable."""

    def __init__(self, command: str, kind: str, desc: str) -> None:
        super().__init__(f"{command}: REPL error {kind!r}: {desc}")
        self.command = command
        self.kind = kind
        self.desc = desc


class StartError(ReplError):
    """A theorem statement does not elaborate; the message quotes Lean's errors."""


__all__ = ["ReplError", "ReplProtocolError", "ReplTimeoutError", "ReplVersionError", "StartError"]
