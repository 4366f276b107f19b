"""``python -m burnqed.proplogic [MODULES…] [--key=value…]``: the propositional Pantograph REPL.

Behaves like Pantograph's ``repl`` binary (v0.3.4): positional arguments are modules to import
(recorded, no effect), ``--key=value`` are Lean options (accepted), ``--version`` prints the
version.  Prints ``ready.``, then answers one JSON line per request line until a blank line or EOF.

Test-only tactics, enabled by ``BURNQED_PROPLOGIC_DEBUG=1`` (for the client's failure tests):
``debug_hang`` sleeps forever, ignoring the REPL-side timeout (a hard hang); ``debug_garbage``
answers with a line that is not JSON; ``debug_crash`` exits the process (status 3) without
answering; ``debug_heartbeats N`` spends exactly N heartbeats.  ``sleep N`` (always available, as in
Lean) sleeps N ms and honours the ``timeout`` option cooperatively: it is interrupted, the REPL
answers ``{"desc":"interrupt","error":"internal"}`` and goes on serving, states intact.

Heartbeats: every atomic tactic step costs 1000 (one ``maxHeartbeats`` unit); the limit is Lean's —
``--maxHeartbeats=N`` on the command line (default 200000), a file's ``set_option maxHeartbeats N``
for its declarations, ``set_option maxHeartbeats N in <tactics>`` for a tactic — and hitting it fails
the tactic with Lean's "(deterministic) timeout … maximum number of heartbeats (N)" message.

Example::

    $ printf 'goal.start {"expr": "∀ (p : Prop), p → p"}\\n' | python -m burnqed.proplogic Init
    ready.
    {"root":"_uniq.1","stateId":0}
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Sequence

# Most of a REPL process's start is the import of the prover (~50 classes, the constants' formulas),
# which leaves no garbage for the cyclic collector: it is off meanwhile, and what the import built is
# then frozen out of the collector's later passes.  A search starts this process again and again.
if __name__ == "__main__":
    gc.disable()

from burnqed.proplogic.repl import VERSION, Repl

if __name__ == "__main__":
    gc.freeze()
    gc.enable()


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if "--version" in args:
        print(VERSION, flush=True)
        return 0
    imports = [a for a in args if not a.startswith("--")]
    options = dict(a[2:].partition("=")[::2] for a in args if a.startswith("--"))
    # The wire is UTF-8 whatever the locale says (Lean reads and writes UTF-8).
    stdin = open(sys.stdin.fileno(), encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
    stdout = sys.stdout
    stdout.reconfigure(encoding="utf-8")  # type: ignore[union-attr]
    repl = Repl(imports=imports, lean_options=options)
    stdout.write("ready.\n")
    stdout.flush()
    while True:
        line = stdin.readline()
        if not line.strip():  # EOF ("") or a blank line ends the session
            return 0
        stdout.write(repl.handle_line(line) + "\n")
        stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
