"""``python tests/search/dying_repl.py N [REPL args…]``: burnqed's propositional REPL, except that each
process exits (status 1, no answer) on every request after its first ``N`` — the "REPL that keeps
dying" of the infrastructure-error tests.  ``--version`` answers as the real one does.

Example::

    $ printf 'stat\\nstat\\n' | python tests/search/dying_repl.py 1
    ready.
    {"nGoals":0}
"""

from __future__ import annotations

import os
import sys

from burnqed.proplogic.repl import VERSION, Repl


def main() -> int:
    limit, args = int(sys.argv[1]), sys.argv[2:]
    if "--version" in args:
        print(VERSION, flush=True)
        return 0
    repl = Repl(imports=[a for a in args if not a.startswith("--")])
    stdin = open(sys.stdin.fileno(), encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.stdout.reconfigure(encoding="utf-8")  # type: ignore[union-attr]
    print("ready.", flush=True)
    served = 0
    while line := stdin.readline():
        if not line.strip():
            return 0
        if served == limit:
            os._exit(1)  # dies mid-session, like a REPL killed by the OOM killer
        served += 1
        print(repl.handle_line(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
