"""``python tests/lean/scripted_repl.py [REPL args…]``: burnqed's propositional REPL, except that a
``goal.tactic`` whose tactic names one of :data:`SCRIPTED` is answered with that error reply — what
a real Pantograph sends for a protocol error, a Lean exception inside the tactic (PyPantograph #82)
or its own timeout in another wording — so the client's handling of each can be tested without
Lean.  ``--version`` answers as the real one does.

Example::

    $ printf 'goal.tactic {"stateId": 0, "tactic": "protocol_error"}\\n' | python tests/lean/scripted_repl.py
    ready.
    {"desc":"Exactly one of {tactic, mode, expr, have, let, draft} must be supplied","error":"operation"}
"""

from __future__ import annotations

import json
import sys

from burnqed.proplogic import __main__ as proplogic
from burnqed.proplogic.repl import Repl

# tactic → the error reply it gets, in Pantograph's compact form (keys sorted)
SCRIPTED = {
    "protocol_error": {
        "desc": "Exactly one of {tactic, mode, expr, have, let, draft} must be supplied",
        "error": "operation",
    },
    "lean_exception": {"desc": "unknown free variable '_uniq.4711'", "error": "core"},
    "slow_interrupted": {"desc": "Interrupted", "error": "internal"},
}


def scripted(line: str) -> str | None:
    """The scripted reply to ``line``, or None (the propositional REPL answers it)."""
    cmd, _, payload = line.strip().partition(" ")
    if cmd != "goal.tactic":
        return None
    try:
        tactic = str(json.loads(payload).get("tactic") or "")
    except (ValueError, AttributeError):
        return None
    for name, reply in SCRIPTED.items():
        if name in tactic:  # also inside the client's `set_option maxHeartbeats N in …`
            return json.dumps(reply, separators=(",", ":"), sort_keys=True)
    return None


def main() -> int:
    """The propositional REPL's own ``main`` (``ready.``, one reply per line, ``--version``), with
    the scripted replies answered first."""
    answer = Repl.handle_line

    def handle_line(self: Repl, line: str) -> str:
        return scripted(line) or answer(self, line)

    Repl.handle_line = handle_line  # type: ignore[method-assign]
    return proplogic.main()


if __name__ == "__main__":
    sys.exit(main())
