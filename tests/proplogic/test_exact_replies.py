"""The REPL's replies, byte for byte, as the REPL gave them before its caches (commit 085eda6).

``data/golden_replies.jsonl`` holds request lines and the reply lines the unchanged REPL gave them
(recorded in-process with two fresh :class:`Repl`\\ s, whose replies were identical): edge cases of
every command — parse errors (tokeniser and parser), elaboration errors, the same tactic text again
on the same and on other states, ``∀`` in ``have``/``show``/``exact`` types and in repeated
``goal.start``/``frontend.process`` statements (parses that draw binder uids), shadowed and
inaccessible hypotheses, manual mode, pretty JSON, ``goal.save``/``goal.load`` (``{tmp}`` stands for
a temporary directory) and protocol errors — then, after a ``reset``, the first three attempts of
the demo run's search as the search sent them (``bench/repl.py record``).

The REPL caches tokens, parses, printed goals and formulas, within a process and across
:class:`Repl` instances; replaying the file twice in one process, with a fresh :class:`Repl` each
time, checks that a warm cache answers exactly as a cold one.  ``bench/repl.py`` compares whole
command streams of a demo search against the unchanged code.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from burnqed.proplogic.repl import Repl

GOLDEN = Path(__file__).parent / "data" / "golden_replies.jsonl"


def _golden() -> list[tuple[str, str]]:
    rows = [json.loads(line) for line in GOLDEN.read_text(encoding="utf-8").splitlines()]
    return [(r["request"], r["reply"]) for r in rows]


def test_the_golden_file_covers_successes_failures_and_errors() -> None:
    replies = [reply for _, reply in _golden()]
    assert len(replies) > 150
    assert sum('"nextStateId"' in r for r in replies) > 20
    assert sum('"parseError"' in r for r in replies) >= 6
    assert sum('"messages":[{' in r for r in replies) > 40
    assert sum('"error":' in r for r in replies) > 15


def test_replies_are_byte_identical_to_the_unchanged_repl(tmp_path: Path) -> None:
    golden = _golden()
    for k in range(2):  # the second round meets the caches the first one filled
        workdir = tmp_path / str(k)
        workdir.mkdir()
        repl = Repl()
        for request, expected in golden:
            reply = repl.handle_line(request.replace("{tmp}", str(workdir)))
            assert reply.replace(str(workdir), "{tmp}") == expected, request


def test_the_process_replies_are_byte_identical(tmp_path: Path) -> None:
    """The same through ``python -m burnqed.proplogic`` (its stdin/stdout and start-up)."""
    golden = _golden()
    lines = "".join(q.replace("{tmp}", str(tmp_path)) + "\n" for q, _ in golden)
    out = subprocess.run(
        [sys.executable, "-m", "burnqed.proplogic"],
        input=lines.encode(),
        capture_output=True,
        check=True,
        timeout=120,
    ).stdout.decode()
    head, _, replies = out.partition("\n")
    assert head == "ready."
    # A pretty-printed reply spans several lines: compare the stream as a whole.
    expected = "".join(a + "\n" for _, a in golden)
    assert replies.replace(str(tmp_path), "{tmp}") == expected
