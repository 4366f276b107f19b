"""Error replies to ``goal.tactic`` through the real pool and the expansion cache (issue 63), from a
scripted stand-in REPL (``scripted_repl.py``: Pantograph's replies, without Lean): a protocol error
is a failure of a kind of its own that the cache never keeps (cb4cd23 stored it as an ``error``
failure, served on every later run); a Lean exception inside the tactic (PyPantograph #82) is a
failed tactic the cache keeps; the REPL's interrupt in another wording than ``"interrupt"`` is a
timeout that keeps the REPL (cb4cd23 made it a stored ``error`` failure)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from burnqed.lean.pool import LeanPool
from burnqed.search.cache import CachedSource, lean_settings
from burnqed.search.cache_store import LEAN_SCHEMA, read_shard, shard_files
from burnqed.search.sources import LiveSource
from burnqed.theorems import Theorem
from tests.lean.repl_config import proplogic_config

SCRIPTED = (sys.executable, str(Path(__file__).with_name("scripted_repl.py")))
THEOREM = Theorem(name="t", formal_statement="theorem t (p : Prop) : p → p := by\n")


def ask(cache: Path, tactic: str) -> tuple[object, dict, dict]:
    """``tactic`` on the root through a cache over a pool of the scripted REPL: the answer, the
    cache's block and the pool's counters."""
    lean = proplogic_config(repl_command=SCRIPTED)

    async def main():
        async with LeanPool(lean) as pool:
            source = CachedSource(LiveSource(None, pool), cache, policy=None,
                                  lean=lean_settings(lean, "scripted"))  # fmt: skip
            session = await source.start(THEOREM, 0)
            try:
                answer = await session.apply(session.root, tactic)
            finally:
                await session.close()
                source.close()
            return answer, source.stats(), pool.stats()

    return asyncio.run(main())


def stored_tactics(cache: Path) -> list[str | None]:
    return [r["tactic"] for p in shard_files(cache / "lean")
            for r in read_shard(p, [f.name for f in LEAN_SCHEMA], None).to_pylist()]  # fmt: skip


def test_a_protocol_error_is_a_failure_of_its_own_and_never_stored(tmp_path):
    cache = tmp_path / "cache"
    answer, block, pool = ask(cache, "protocol_error")
    assert answer.kind == "protocol", "a protocol error passed for Lean's verdict on the tactic"
    assert "operation" in answer.message
    assert block["not_stored"] == {"protocol": 1}
    assert stored_tactics(cache) == [None]  # the start is stored, the protocol error is not
    assert pool["protocol_errors"] == 1 and pool["crashes"] == 0 and pool["restarts"] == 0
    again, block, _ = ask(cache, "protocol_error")  # asked live again, never served
    assert again.kind == "protocol" and block["lean"]["hits"] == 0


def test_a_lean_exception_inside_a_tactic_is_a_failed_tactic_and_kept(tmp_path):
    cache = tmp_path / "cache"
    answer, block, pool = ask(cache, "lean_exception")
    assert answer.kind == "error" and "unknown free variable" in answer.message
    assert block["not_stored"] == {} and stored_tactics(cache).count("lean_exception") == 1
    assert pool.get("protocol_errors", 0) == 0
    again, block, _ = ask(cache, "lean_exception")
    assert again.kind == "error" and block["lean"]["hits"] == 1


def test_an_interrupt_in_another_wording_is_a_timeout_that_keeps_the_repl(tmp_path):
    cache = tmp_path / "cache"
    answer, block, pool = ask(cache, "slow_interrupted")
    assert answer.kind == "timeout", "an interrupt worded otherwise passed for a failed tactic"
    assert pool["interrupts"] == 1 and pool["crashes"] == 0 and pool["restarts"] == 0
    assert block["not_stored"] == {"timeout": 1} and stored_tactics(cache) == [None]
