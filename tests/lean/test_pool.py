"""LeanPool and ProofSession against burnqed's propositional REPL: sessions, the heartbeat limit,
cooperative interrupts that keep the REPL, hard hangs and crashes that a warm spare repairs, states
restored by goal.load or replay, recycling, verification, and no orphan REPL processes after
shutdown, SIGTERM or SIGKILL of the parent."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import psutil
import pytest

from burnqed.config import LeanConfig
from burnqed.lean.pool import (
    LeanPool,
    ProofState,
    ReplError,
    StartError,
    TacticFailure,
    TacticSuccess,
)
from burnqed.outcomes import POOL_COUNTERS
from burnqed.theorems import Theorem
from tests.lean.repl_config import proplogic_config

AND_COMM = Theorem(
    name="and_swap", formal_statement="theorem and_swap (p q : Prop) : p ∧ q → q ∧ p := by\n"
)
AND_COMM_PROOF = ("intro h", "constructor", "exact h.2", "exact h.1")


def make_cfg(**kw) -> LeanConfig:
    return proplogic_config(**{"tactic_timeout_s": 0.3, "hang_grace_s": 0.5, **kw})


@pytest.fixture(autouse=True)
def tag(monkeypatch: pytest.MonkeyPatch) -> str:
    """Debug tactics on, and a tag in the REPLs' environment to find this test's processes."""
    monkeypatch.setenv("BURNQED_PROPLOGIC_DEBUG", "1")
    value = uuid.uuid4().hex
    monkeypatch.setenv("BURNQED_TEST_TAG", value)
    return value


def repl_processes(tag: str) -> list[int]:
    """Running (not zombie) propositional REPLs started with this test's tag."""
    found = []
    for p in psutil.process_iter(["cmdline", "status"]):
        try:
            if p.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if "burnqed.proplogic" not in " ".join(p.info["cmdline"] or ()):
                continue
            if p.environ().get("BURNQED_TEST_TAG") != tag:
                continue
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        found.append(p.pid)
    return found


async def only_the_pools(pool: LeanPool, tag: str, timeout: float = 20.0) -> None:
    """The REPLs of this test are exactly the pool's (workers, spares, verifiers): none leaked."""
    deadline = time.monotonic() + timeout
    while sorted(repl_processes(tag)) != pool.pids() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert sorted(repl_processes(tag)) == pool.pids()


def wait_until_gone(tag: str, timeout: float = 5.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while (left := repl_processes(tag)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


async def prove(session, tactics=AND_COMM_PROOF) -> ProofState:
    state = session.root
    for tac in tactics:
        r = await session.apply(state, tac)
        assert isinstance(r, TacticSuccess), (tac, r)
        state = r.state
    return state


def test_session_proves_and_records_paths(tag: str) -> None:
    async def main():
        async with LeanPool(make_cfg()) as pool:
            s = await pool.start(AND_COMM)
            assert s.root.sid == 0 and s.root.depth == 0
            assert s.root.text == "p q : Prop\n⊢ p ∧ q → q ∧ p"
            r = await s.apply(s.root, "intro h")
            assert isinstance(r, TacticSuccess) and r.lean_time_s > 0
            assert r.state.text == "p q : Prop\nh : p ∧ q\n⊢ q ∧ p" and r.state.depth == 1
            again = await s.apply(s.root, "intro h")  # same step: same state, no second id
            assert isinstance(again, TacticSuccess) and again.state == r.state
            final = await prove(s)
            assert final.solved and final.text == "no goals" and final.depth == 4
            assert s.path(final) == AND_COMM_PROOF
            # the worker, the warm spares and verifiers (2 and 2): all the pool's, none other
            assert len(pool.pids()) == 1 + 2 + 2 and sorted(repl_processes(tag)) == pool.pids()
            await s.close()
            assert pool.stats()["sessions_open"] == 0
            with pytest.raises(ReplError, match="closed"):
                await s.apply(s.root, "intro h")
        assert wait_until_gone(tag) == []  # shutdown leaves no REPL behind

    asyncio.run(main())


def test_stats_are_the_outcome_schemas_pool_counters() -> None:
    """The search manifest's ``lean_pool`` and the reports read these names from one schema."""

    async def main():
        async with LeanPool(make_cfg()) as pool:
            st = pool.stats()
            assert set(st) == set(POOL_COUNTERS) | {
                "workers",
                "requests",
                "sessions_open",
                "lean_seconds",
            }
            assert all(st[k] == 0 for k in POOL_COUNTERS)

    asyncio.run(main())


def test_failures_by_kind() -> None:
    async def main():
        async with LeanPool(make_cfg()) as pool:
            s = await pool.start(AND_COMM)
            requests = pool.stats()["requests"]
            guard = await s.apply(s.root, "exact sorry")
            assert guard == TacticFailure("guard", r"banned by pattern \bsorry\b", 0.0)
            assert pool.stats()["requests"] == requests  # the guard never reaches Lean
            err = await s.apply(s.root, "exact h")
            assert isinstance(err, TacticFailure) and err.kind == "error" and err.message
            parse = await s.apply(s.root, "intro (")
            assert isinstance(parse, TacticFailure) and parse.kind == "parse"
            with pytest.raises(ValueError, match="does not belong"):
                await s.apply(ProofState(7, (), "no goals", 3), "intro h")
        async with LeanPool(make_cfg(banned_tactics=())) as pool:  # let `sorry` reach Lean
            s = await pool.start(AND_COMM)
            sorry = await s.apply(s.root, "sorry")
            assert isinstance(sorry, TacticFailure) and sorry.kind == "sorry"

    asyncio.run(main())


def test_statement_that_does_not_elaborate_is_a_start_error() -> None:
    bad = Theorem(name="bad", formal_statement="theorem bad (p : Prop) : p ∧ := by\n")

    async def main():
        async with LeanPool(make_cfg()) as pool:
            with pytest.raises(StartError, match="bad: the statement does not elaborate"):
                await pool.start(bad)
            assert pool.stats()["sessions_open"] == 0
            s = await pool.start(AND_COMM)  # the worker is fine
            assert (await prove(s)).solved

    asyncio.run(main())


def test_cooperative_interrupt_keeps_the_repl_and_its_states() -> None:
    """An `interrupt` reply is a failed tactic: the same process proves the theorem from the same
    state, nothing restarted, nothing replayed."""

    async def main():
        async with LeanPool(make_cfg()) as pool:
            s = await pool.start(AND_COMM)
            r1 = await s.apply(s.root, "intro h")
            pid = pool.worker_pids()[0]
            requests = pool.stats()["requests"]
            t = await s.apply(r1.state, "sleep 5000")
            assert isinstance(t, TacticFailure) and t.kind == "timeout" and t.lean_time_s < 2.0
            assert "interrupted" in t.message
            r2 = await s.apply(r1.state, "constructor")  # the same state, in the same process
            assert isinstance(r2, TacticSuccess) and len(r2.state.goals) == 2
            final = await prove(s)
            assert final.solved and pool.worker_pids()[0] == pid
            # sleep, constructor, exact, exact: not one request more (no restore of any kind)
            assert pool.stats()["requests"] == requests + 4
            st = pool.stats()
            assert st["interrupts"] == 1 and st["hard_hangs"] == 0, st
            assert st["restarts"] == st["replays"] == st["reopens"] == st["loads"] == 0, st

    asyncio.run(main())


def test_the_same_states_second_timeout_restarts_the_worker() -> None:
    """LeanDojo's poisoned-state rule, guarded against: two interrupts in a row on one state (in
    one process) restart the worker; a tactic that answers in between clears the mark."""

    async def main():
        async with LeanPool(make_cfg()) as pool:
            s = await pool.start(AND_COMM)
            r1 = (await s.apply(s.root, "intro h")).state
            pid = pool.worker_pids()[0]
            assert (await s.apply(r1, "sleep 5000")).kind == "timeout"
            assert (await s.apply(r1, "exact nonsense")).kind == "error"  # answered: mark cleared
            assert (await s.apply(r1, "sleep 5001")).kind == "timeout"
            assert pool.worker_pids()[0] == pid and pool.stats()["restarts"] == 0
            assert (await s.apply(r1, "sleep 5002")).kind == "timeout"  # twice in a row
            st = pool.stats()
            assert st["interrupts"] == 3 and st["restarts"] == 1 and st["spare_takeovers"] == 1
            assert pool.worker_pids()[0] != pid
            assert (await prove(s)).solved

    asyncio.run(main())


def test_hard_hang_the_spare_takes_over_and_states_come_back_by_load(tag: str) -> None:
    """No reply within the grace period: the REPL is killed, the pre-started spare takes its place
    (no process starts on the critical path), the session's states come back by goal.load — not
    one tactic replayed — and the search still finds the proof."""

    async def main():
        async with LeanPool(make_cfg(save_factor=0)) as pool:  # save every state
            s = await pool.start(AND_COMM)
            r1 = (await s.apply(s.root, "intro h")).state
            r2 = (await s.apply(r1, "constructor")).state
            pid, spare = pool.worker_pids()[0], pool.spare_pids()[0]
            await asyncio.sleep(0.1)  # the saves' replies
            assert pool.stats()["saves"] == 3  # the root, `intro h` and `constructor`
            t0 = time.monotonic()
            hang = await s.apply(r2, "debug_hang")
            assert isinstance(hang, TacticFailure) and hang.kind == "timeout"
            assert "killed" in hang.message and time.monotonic() - t0 < 5
            assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie"
            assert pool.worker_pids()[0] == spare  # the warm spare, started before the hang
            r3 = await s.apply(r2, "exact h.2")  # r2 is void in the new process: loaded
            assert isinstance(r3, TacticSuccess)
            assert r3.state.text == "case right\np q : Prop\nh : p ∧ q\n⊢ p"
            final = await prove(s)  # the rest of the proof; r1 and the root are never needed
            assert final.solved and s.path(final) == AND_COMM_PROOF
            st = pool.stats()
            assert st["hard_hangs"] == 1 and st["restarts"] == 1 and st["spare_takeovers"] == 1, st
            assert st["crashes"] == st["interrupts"] == 0, st
            assert st["loads"] == 1 and st["replays"] == 0 and st["reopens"] == 0, st
            for _ in range(400):  # the next spare starts once the hung process is gone
                if len(pool.spare_pids()) == 2:
                    break
                await asyncio.sleep(0.05)
            assert len(pool.spare_pids()) == 2 and spare not in pool.spare_pids()
            assert sorted(repl_processes(tag)) == pool.pids()

    asyncio.run(main())


def test_without_a_spare_the_worker_restarts_in_the_background() -> None:
    async def main():
        async with LeanPool(make_cfg(spares=0)) as pool:
            s = await pool.start(AND_COMM)
            r1 = (await s.apply(s.root, "intro h")).state
            pid = pool.worker_pids()[0]
            assert (await s.apply(r1, "debug_hang")).kind == "timeout"
            final = await prove(s)
            assert final.solved and pool.worker_pids()[0] not in (None, pid)
            st = pool.stats()
            assert st["restarts"] == 1 and st["spare_takeovers"] == 0 and st["hard_hangs"] == 1
            # nothing saved: the root started again, `intro h` replayed
            assert st["reopens"] == 1 and st["replays"] == 1 and st["loads"] == 0, st

    asyncio.run(main())


def test_a_state_is_saved_when_its_replay_would_cost_more_than_saves() -> None:
    """``lean.save_factor``: insurance bought where a replay is dear.  The first state is saved
    (that measures a save); a cheap tactic's state is not; a state whose path took far longer
    than a save is, and after a crash it comes back with one load."""

    async def main():
        async with LeanPool(make_cfg(save_factor=200, tactic_timeout_s=5.0)) as pool:
            s = await pool.start(AND_COMM)
            while pool._save_cost_s is None:  # the root's save measures what a save costs
                await asyncio.sleep(0.01)
            assert set(s._saved) == {s.root.sid}
            pool._save_cost_s = 0.001  # white-box: 1 ms, whatever a loaded machine measured
            r1 = (await s.apply(s.root, "intro h")).state  # ~0.3 ms: far below 200 saves
            r2 = (await s.apply(r1, "sleep 1500; constructor")).state  # 1.5 s: far above
            while s._saving:
                await asyncio.sleep(0.01)
            assert set(s._saved) == {s.root.sid, r2.sid}, s._saved
            os.kill(pool.worker_pids()[0], signal.SIGKILL)
            assert isinstance(await s.apply(r2, "exact h.2"), TacticSuccess)
            st = pool.stats()
            assert st["crashes"] == 1 and st["spare_takeovers"] == 1, st
            assert st["loads"] == 1 and st["replays"] == 0 and st["reopens"] == 0, st

    asyncio.run(main())


def test_a_failed_load_falls_back_to_replay() -> None:
    async def main():
        async with LeanPool(make_cfg(save_factor=0)) as pool:
            s = await pool.start(AND_COMM)
            r1 = (await s.apply(s.root, "intro h")).state
            r2 = (await s.apply(r1, "constructor")).state
            await asyncio.sleep(0.1)
            assert pool.stats()["saves"] == 3
            for path in s._saved.values():  # white-box: spoil every saved file
                path.write_bytes(b"not a goal state")
            assert (await s.apply(r2, "debug_hang")).kind == "timeout"
            r3 = await s.apply(r2, "exact h.2")
            assert isinstance(r3, TacticSuccess) and len(r3.state.goals) == 1
            st = pool.stats()
            # r2's file, then r1's, then the root's; the root started again, both tactics replayed
            assert st["load_failures"] == 3 and st["loads"] == 0, st
            assert st["reopens"] == 1 and st["replays"] == 2, st
            assert (await prove(s)).solved

    asyncio.run(main())


HEADER_THEOREM = Theorem(
    name="main",
    header="theorem helper (p q : Prop) : p ∧ q → q ∧ p := by\n  intro h\n  exact ⟨h.2, h.1⟩\n\n",
    formal_statement="theorem main (a b c : Prop) : a ∧ b → c → b ∧ a := by\n",
)


@pytest.mark.parametrize(("save_factor", "restored_by"), [(0, "loads"), (None, "reopens")])
def test_a_theorem_with_header_declarations_restores_correctly(
    save_factor: float | None, restored_by: str
) -> None:
    """ProofNet-style: the statement's file declares what the proof uses.  A state restored in a
    new process — by goal.load, or by replay from the restarted statement — still sees it."""

    async def main():
        async with LeanPool(make_cfg(save_factor=save_factor)) as pool:
            s = await pool.start(HEADER_THEOREM)
            r1 = (await s.apply(s.root, "intro h")).state
            r2 = (await s.apply(r1, "intro _")).state
            await asyncio.sleep(0.1)
            assert (await s.apply(r2, "debug_hang")).kind == "timeout"
            done = await s.apply(r2, "exact helper h")  # `helper` is the header's
            assert isinstance(done, TacticSuccess) and done.state.solved, done
            st = pool.stats()
            assert st["spare_takeovers"] == 1 and st[restored_by] == 1, st
            missing = await s.apply(r2, "exact helper2 h")
            assert isinstance(missing, TacticFailure) and "helper2" in missing.message

    asyncio.run(main())


def test_heartbeat_limit_decides_and_a_header_cannot_lift_it() -> None:
    """Every tactic runs under `set_option maxHeartbeats N in`: past N·1000 it is a failure of kind
    `heartbeats` — the same on every run — and a dataset header's `set_option maxHeartbeats 0`
    (which governs whole-file checks) does not lift it.  The proof text stays the tactic alone."""
    lifted = Theorem(
        name="and_swap",
        header="set_option maxHeartbeats 0\n",
        formal_statement=AND_COMM.formal_statement,
    )

    async def main():
        async with LeanPool(make_cfg(tactic_heartbeats=3)) as pool:
            for thm in (AND_COMM, lifted):
                s = await pool.start(thm)
                ok = await s.apply(s.root, "debug_heartbeats 3000")  # exactly the limit
                assert isinstance(ok, TacticSuccess), ok
                over = await s.apply(s.root, "debug_heartbeats 3001")
                assert isinstance(over, TacticFailure) and over.kind == "heartbeats", over
                assert "maximum number of heartbeats (3)" in over.message
                chain = "intro h <;> constructor <;> exact h.2 <;> exact h.1"  # 4 steps: 4000
                assert (await s.apply(s.root, chain)).kind == "heartbeats"
                final = await prove(s)
                assert s.path(final) == AND_COMM_PROOF  # no wrapper in the recorded proof
                assert (await pool.verify(thm, s.path(final))).ok
            st = pool.stats()
            assert st["interrupts"] == st["hard_hangs"] == st["restarts"] == 0, st

    asyncio.run(main())


def test_a_start_that_times_out_is_an_infrastructure_error_not_the_statements() -> None:
    slow = Theorem(
        name="t",
        header="theorem slow (p : Prop) : p → p := by\n  sleep 5000\n  intro h\n  exact h\n\n",
        formal_statement="theorem t (p : Prop) : p → p := by\n",
    )
    hung = Theorem(
        name="t",
        header="theorem stuck (p : Prop) : p → p := by\n  debug_hang\n\n",
        formal_statement="theorem t (p : Prop) : p → p := by\n",
    )

    async def main():
        async with LeanPool(make_cfg()) as pool:
            with pytest.raises(ReplError, match="did not finish elaborating") as e:
                await pool.start(slow)
            assert not isinstance(e.value, StartError)
            assert pool.stats()["interrupts"] == 1 and pool.stats()["restarts"] == 0
            with pytest.raises(ReplError, match="did not finish elaborating") as e:
                await pool.start(hung)
            assert not isinstance(e.value, StartError)
            st = pool.stats()
            assert st["hard_hangs"] == 1 and st["spare_takeovers"] == 1, st
            assert st["sessions_open"] == 0
            assert (await prove(await pool.start(AND_COMM))).solved  # the pool is fine

    asyncio.run(main())


def test_kill_9_mid_request_is_repaired_by_replay(tag: str) -> None:
    async def main():
        async with LeanPool(make_cfg(tactic_timeout_s=5.0)) as pool:
            s = await pool.start(AND_COMM)
            r1 = await s.apply(s.root, "intro h")
            r2 = await s.apply(r1.state, "constructor")
            pid = pool.worker_pids()[0]

            async def kill_soon():
                await asyncio.sleep(0.3)
                os.kill(pid, signal.SIGKILL)

            killer = asyncio.create_task(kill_soon())
            r3 = await s.apply(r2.state, "sleep 1000")  # killed mid-request, retried once
            await killer
            assert isinstance(r3, TacticSuccess) and r3.state.text == r2.state.text
            assert pool.worker_pids()[0] != pid
            st = pool.stats()
            assert st["crashes"] == 1 and st["restarts"] == 1 and st["spare_takeovers"] == 1, st
            # nothing saved: the root started again, two tactics replayed
            assert st["reopens"] == 1 and st["replays"] == 2 and st["loads"] == 0, st
            # the rebuilt states go on to a proof
            r4 = await s.apply(r3.state, "exact h.2")
            r5 = await s.apply(r4.state, "exact h.1")
            assert r5.state.solved
            await only_the_pools(pool, tag)

    asyncio.run(main())


def test_garbage_and_crash_raise_after_one_retry_and_the_worker_recovers() -> None:
    async def main():
        async with LeanPool(make_cfg()) as pool:
            s = await pool.start(AND_COMM)
            r1 = await s.apply(s.root, "intro h")
            with pytest.raises(
                ReplError, match=r"failed again after restarting.*not a JSON object"
            ):
                await s.apply(r1.state, "debug_garbage")
            with pytest.raises(ReplError, match=r"failed again after restarting.*exited \(code"):
                await s.apply(r1.state, "debug_crash")
            assert pool.stats()["crashes"] == 4
            final = await prove(s)
            assert final.solved

    asyncio.run(main())


def test_recycling_after_n_requests() -> None:
    async def main():
        async with LeanPool(make_cfg(recycle_after_requests=6)) as pool:
            s = await pool.start(AND_COMM)
            pids = {pool.worker_pids()[0]}
            state = s.root
            for tac in AND_COMM_PROOF:
                for _ in range(3):  # failing tactics are requests too
                    assert (await s.apply(state, "exact nonsense")).kind == "error"
                    pids.add(pool.worker_pids()[0])
                r = await s.apply(state, tac)
                assert isinstance(r, TacticSuccess), r
                state = r.state
                pids.add(pool.worker_pids()[0])
            assert state.solved
            assert len(pids) >= 3  # observed new processes
            st = pool.stats()
            assert st["recycles"] >= 2 and st["crashes"] == 0 and st["replays"] > 0

    asyncio.run(main())


def test_recycling_after_seconds() -> None:
    async def main():
        async with LeanPool(make_cfg(recycle_after_s=0.5)) as pool:
            s = await pool.start(AND_COMM)
            r1 = await s.apply(s.root, "intro h")
            pid = pool.worker_pids()[0]
            await asyncio.sleep(0.7)
            r2 = await s.apply(r1.state, "constructor")
            assert isinstance(r2, TacticSuccess)
            assert pool.worker_pids()[0] != pid and pool.stats()["recycles"] >= 1

    asyncio.run(main())


def test_many_sessions_share_the_workers(tag: str) -> None:
    theorems = [
        Theorem(
            name=f"swap{i}",
            formal_statement=f"theorem swap{i} (p q : Prop) : p ∧ q → q ∧ p := by\n",
        )
        for i in range(8)
    ]

    async def one(pool: LeanPool, thm: Theorem) -> tuple[int, bool]:
        async with await pool.start(thm) as s:
            return s.worker_index, (await prove(s)).solved

    async def main():
        async with LeanPool(make_cfg(workers=2)) as pool:
            results = await asyncio.gather(*(one(pool, t) for t in theorems))
            assert all(solved for _, solved in results)
            assert sorted(w for w, _ in results) == [0] * 4 + [1] * 4  # least-loaded assignment
            assert len(pool.pids()) == 2 + 2 + 2  # workers, spares, verifiers
            await only_the_pools(pool, tag)
            assert pool.stats()["sessions"] == 8 and pool.stats()["sessions_open"] == 0
            assert pool.stats()["moves"] == 0  # no restart: no session ever leaves its states

    asyncio.run(main())


def test_a_new_session_goes_to_the_worker_with_fewest_sessions_then_fewest_requests() -> None:
    async def main():
        async with LeanPool(make_cfg(workers=2, tactic_timeout_s=5.0)) as pool:
            a = await pool.start(AND_COMM)
            b = await pool.start(AND_COMM)
            assert (a.worker_index, b.worker_index) == (0, 1)
            busy = asyncio.create_task(a.apply(a.root, "sleep 400"))  # worker0 has work queued
            await asyncio.sleep(0.1)
            c = await pool.start(AND_COMM)  # one session each: the idle worker wins the tie
            assert c.worker_index == 1
            assert isinstance(await busy, TacticSuccess)
            d = await pool.start(AND_COMM)  # worker0 has one session, worker1 two
            assert d.worker_index == 0

    asyncio.run(main())


def test_a_session_whose_worker_restarted_moves_where_it_evens_the_load() -> None:
    """Its states are void anyway: it replays them on a worker with fewer sessions.  A session
    whose move would not even the load stays, and replays on its own worker's new process."""

    async def main():
        async with LeanPool(make_cfg(workers=2)) as pool:
            a = await pool.start(AND_COMM)  # worker0
            b = await pool.start(AND_COMM)  # worker1
            c = await pool.start(AND_COMM)  # worker0
            assert [s.worker_index for s in (a, b, c)] == [0, 1, 0]
            a1 = (await a.apply(a.root, "intro h")).state
            c1 = (await c.apply(c.root, "intro h")).state
            await b.close()  # worker1 now has no session, worker0 two
            t = await a.apply(a1, "debug_hang")
            assert isinstance(t, TacticFailure) and t.kind == "timeout"  # worker0 restarts
            assert pool.stats()["moves"] == 0  # nobody moves before it needs its states
            replays = pool.stats()["replays"]
            a2 = await a.apply(a1, "constructor")
            assert a.worker_index == 1 and pool.stats()["moves"] == 1
            assert isinstance(a2, TacticSuccess) and len(a2.state.goals) == 2
            # the root started again and `intro h` replayed, on worker1
            assert pool.stats()["reopens"] == 1 and pool.stats()["replays"] == replays + 1
            c2 = await c.apply(c1, "constructor")  # one session per worker: c stays
            assert c.worker_index == 0 and pool.stats()["moves"] == 1
            assert isinstance(c2, TacticSuccess) and len(c2.state.goals) == 2
            assert (await prove(a)).solved and (await prove(c)).solved
            assert pool.stats()["sessions_open"] == 2

    asyncio.run(main())


def test_shutdown_kills_busy_workers_at_once(tag: str) -> None:
    async def main():
        async with LeanPool(make_cfg(workers=2, tactic_timeout_s=60)) as pool:
            s = await pool.start(AND_COMM)
            hung = asyncio.create_task(s.apply(s.root, "debug_hang"))
            await asyncio.sleep(0.3)
            assert len(pool.pids()) == 2 + 2 + 2
            await only_the_pools(pool, tag)
        assert repl_processes(tag) == []  # reaped by the time the pool is closed
        with pytest.raises(ReplError, match="pool is closed"):
            await hung

    asyncio.run(main())


def test_close_frees_repl_states() -> None:
    async def main():
        async with LeanPool(make_cfg()) as pool:
            client = pool._workers[0].client  # white-box: count the REPL's states
            base = await client.stat()
            s = await pool.start(AND_COMM)
            await prove(s)
            assert await client.stat() == base + 5
            await s.close()
            assert await client.stat() == base

    asyncio.run(main())


def swap_theorems(n: int) -> list[Theorem]:
    return [
        Theorem(
            name=f"swap{i}",
            formal_statement=f"theorem swap{i} (p q : Prop) : p ∧ q → q ∧ p := by\n",
        )
        for i in range(n)
    ]


async def max_in_flight(pool: LeanPool, stop: asyncio.Event) -> int:
    """The most requests seen in flight on worker 0's REPL at once, sampled until ``stop``."""
    most = 0
    while not stop.is_set():
        client = pool._workers[0].client  # white-box: the pipeline's depth
        if client is not None:
            most = max(most, client.in_flight)
        await asyncio.sleep(0)
    return most


def test_many_sessions_on_one_worker_are_pipelined(tag: str) -> None:
    async def main():
        async with LeanPool(make_cfg()) as pool:
            stop = asyncio.Event()
            monitor = asyncio.create_task(max_in_flight(pool, stop))
            sessions = [await pool.start(t) for t in swap_theorems(8)]
            finals = await asyncio.gather(*(prove(s) for s in sessions))
            stop.set()
            assert all(f.solved for f in finals)
            assert [s.path(f) for s, f in zip(sessions, finals, strict=True)] == [
                AND_COMM_PROOF
            ] * 8
            assert await monitor >= 2  # the REPL had work queued, not one request at a time
            st = pool.stats()
            assert st["restarts"] == st["crashes"] == st["replays"] == 0
            assert st["requests"] >= 8 * 5 and st["lean_seconds"] > 0
            await only_the_pools(pool, tag)

    asyncio.run(main())


def test_kill_9_with_many_sessions_in_flight_is_repaired_by_replay(tag: str) -> None:
    async def main():
        async with LeanPool(make_cfg(tactic_timeout_s=5.0)) as pool:
            sessions = [await pool.start(t) for t in swap_theorems(8)]
            mids = []
            for s in sessions:
                r1 = await s.apply(s.root, "intro h")
                r2 = await s.apply(r1.state, "constructor")
                mids.append(r2.state)
            pid = pool.worker_pids()[0]

            async def kill_soon():
                await asyncio.sleep(0.3)
                os.kill(pid, signal.SIGKILL)

            killer = asyncio.create_task(kill_soon())
            # Eight sleeps through a pipe of four: the kill lands with requests queued.
            results = await asyncio.gather(
                *(s.apply(m, "sleep 200") for s, m in zip(sessions, mids, strict=True))
            )
            await killer
            for r, m in zip(results, mids, strict=True):
                assert isinstance(r, TacticSuccess) and r.state.text == m.text, r
            assert pool.worker_pids()[0] not in (None, pid)
            st = pool.stats()
            # One restart, blamed on the request the REPL was running; the ones queued behind
            # it were retried without restarting the new worker again.
            assert st["crashes"] == 1 and st["restarts"] == 1, st
            finals = await asyncio.gather(*(prove(s) for s in sessions))  # the rebuilt states
            assert all(f.solved for f in finals)
            # Every session started its root again and replayed intro and constructor.
            st = pool.stats()
            assert st["reopens"] == 8 and st["replays"] == 8 * 2, st
            await only_the_pools(pool, tag)

    asyncio.run(main())


@pytest.mark.parametrize("tactic", ["sleep 5000", "debug_hang"])
def test_a_timeout_fails_only_its_own_session(tactic: str) -> None:
    async def main():
        async with LeanPool(make_cfg()) as pool:
            sessions = [await pool.start(t) for t in swap_theorems(6)]
            first = await sessions[0].apply(sessions[0].root, "intro h")
            # Session 0 times out (REPL-side interrupt, or a hang the client kills) while the
            # other sessions' requests are queued behind it on the same REPL.
            hang = asyncio.create_task(sessions[0].apply(first.state, tactic))
            await asyncio.sleep(0.05)
            finals = await asyncio.gather(*(prove(s) for s in sessions[1:]))
            t = await hang
            assert isinstance(t, TacticFailure) and t.kind == "timeout"
            assert all(f.solved for f in finals)
            st = pool.stats()
            assert st["crashes"] == 0, st
            if tactic == "debug_hang":  # killed: the spare took over, the others were retried
                assert st["hard_hangs"] == 1 and st["restarts"] == st["spare_takeovers"] == 1, st
            else:  # answered `interrupt`: a failed tactic, nothing else happened
                assert st["interrupts"] == 1 and st["restarts"] == st["replays"] == 0, st
            assert (await prove(sessions[0])).solved

    asyncio.run(main())


def test_recycling_under_load_drains_in_flight_requests(caplog) -> None:
    caplog.set_level(logging.DEBUG, logger="burnqed.lean.pool")

    async def main():
        async with LeanPool(make_cfg(recycle_after_requests=12)) as pool:
            sessions = [await pool.start(t) for t in swap_theorems(6)]
            pids = set()

            async def prove_watching(s):
                state = s.root
                for tac in AND_COMM_PROOF:
                    assert (await s.apply(state, "exact nonsense")).kind == "error"
                    r = await s.apply(state, tac)
                    assert isinstance(r, TacticSuccess), r
                    pids.add(pool.worker_pids()[0])
                    state = r.state
                return state

            finals = await asyncio.gather(*(prove_watching(s) for s in sessions))
            assert all(f.solved for f in finals)
            st = pool.stats()
            assert st["recycles"] >= 2 and len(pids - {None}) >= 2
            # A recycle lets requests in flight finish: nothing failed, nothing was blamed.
            assert st["crashes"] == st["interrupts"] == st["hard_hangs"] == 0, st
            assert st["spare_takeovers"] >= 1, st  # the first recycle's place went to the spare

    asyncio.run(main())
    # A recycle waits for a session's restore-and-run under way (ReplClient.lease): none was cut
    # short and retried.  (Cut short, every retry could land on a REPL recycled again before its
    # restore ended, under load until the session gave up: CI of stop 36.)
    cut = [r.getMessage() for r in caplog.records if "being recycled" in r.getMessage()]
    assert not cut, cut


def test_concurrent_applies_in_one_session() -> None:
    async def main():
        async with LeanPool(make_cfg()) as pool:
            s = await pool.start(AND_COMM)
            # A search applies every candidate of a step at once; duplicates name one state.
            cands = ["intro h", "exact nonsense", "intro h", "intro (", "intro h", "sleep 50"]
            results = await asyncio.gather(*(s.apply(s.root, c) for c in cands))
            kinds = [getattr(r, "kind", "ok") for r in results]
            assert kinds == ["ok", "error", "ok", "parse", "ok", "ok"]
            intro = {r.state.sid for r, c in zip(results, cands, strict=True) if c == "intro h"}
            assert len(intro) == 1
            assert results[0].state.text == "p q : Prop\nh : p ∧ q\n⊢ q ∧ p"
            final = await prove(s)
            assert final.solved and s.path(final) == AND_COMM_PROOF

    asyncio.run(main())


CHILD = textwrap.dedent(
    """
    import asyncio, signal, sys
    from burnqed.config import LeanConfig
    from burnqed.theorems import Theorem
    from burnqed.lean.pool import LeanPool

    if sys.argv[1] == "chained":
        def previous(signum, frame):
            print("PREVIOUS HANDLER", flush=True)
            sys.exit(0)
        signal.signal(signal.SIGTERM, previous)

    cfg = LeanConfig(repl_command=(sys.executable, "-m", "burnqed.proplogic"), imports=(),
                     workers=2, ready_timeout_s=20, tactic_timeout_s=60, memory_limit_mb=2048)
    thm = Theorem(name="t", formal_statement="theorem t (p : Prop) : p → p := by\\n")

    async def main():
        async with LeanPool(cfg) as pool:
            sessions = [await pool.start(thm) for _ in range(2)]  # one per worker
            print("PIDS", *pool.pids(), flush=True)  # 2 workers, 2 spares, 2 verifiers
            # Both REPLs busy: a busy REPL does not notice its stdin closing, so only an
            # active kill (SIGTERM handler, PR_SET_PDEATHSIG) takes it down.
            await asyncio.gather(*(s.apply(s.root, "debug_hang") for s in sessions))

    asyncio.run(main())
    """
)


@pytest.mark.parametrize(
    ("how", "expected_rc"),
    [("sigterm", -signal.SIGTERM), ("chained", 0), ("sigkill", -signal.SIGKILL)],
)
def test_no_orphans_when_the_parent_dies(
    tmp_path: Path, tag: str, how: str, expected_rc: int
) -> None:
    script = tmp_path / "parent.py"
    script.write_text(CHILD)
    parent = subprocess.Popen(
        [sys.executable, str(script), how],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )
    try:
        line = parent.stdout.readline()
        assert line.startswith("PIDS"), (line, parent.stderr.read() if parent.poll() else "")
        pids = [int(p) for p in line.split()[1:]]
        assert len(pids) == 6 and sorted(repl_processes(tag)) == sorted(pids)
        time.sleep(0.3)  # let the hanging requests reach the REPLs
        parent.send_signal(signal.SIGKILL if how == "sigkill" else signal.SIGTERM)
        rc = parent.wait(timeout=10)
        out, err = parent.stdout.read(), parent.stderr.read()
    finally:
        if parent.poll() is None:
            parent.kill()
    assert rc == expected_rc
    if how != "sigkill":  # the SIGTERM handler killed them (PR_SET_PDEATHSIG would have, too)
        assert "SIGTERM: killed 6 REPL process group(s)" in err
    if how == "chained":
        assert "PREVIOUS HANDLER" in out  # the earlier handler still ran
    assert wait_until_gone(tag) == []
