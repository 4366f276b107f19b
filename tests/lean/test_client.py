"""ReplClient against burnqed's propositional REPL, through the real subprocess path.

The REPL speaks Pantograph v0.3.4's protocol; with ``BURNQED_PROPLOGIC_DEBUG=1`` it also knows the
failure-injection tactics ``sleep N`` (ms, honours the REPL timeout), ``debug_hang`` (ignores it),
``debug_garbage`` (prints a line that is not JSON) and ``debug_crash`` (exits).
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import time
from pathlib import Path

import psutil
import pytest

import burnqed.lean.client as client_module
from burnqed.config import LeanConfig
from burnqed.lean.client import (
    GoalState,
    Message,
    ReplClient,
    ReplVersion,
    TacticRejected,
    read_version,
    repl_argv,
)
from burnqed.lean.errors import (
    ReplError,
    ReplProtocolError,
    ReplTimeoutError,
    ReplVersionError,
)
from tests.lean.repl_config import proplogic_config

AND_COMM = "∀ (p q : Prop), p ∧ q → q ∧ p"


def make_cfg(**kw) -> LeanConfig:
    return proplogic_config(**{"tactic_timeout_s": 0.5, **kw})


@pytest.fixture(autouse=True)
def _debug_tactics(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BURNQED_PROPLOGIC_DEBUG", "1")


def run(coro):
    return asyncio.run(coro)


def test_start_tactics_and_proof_completion(tmp_path: Path) -> None:
    async def main():
        log = tmp_path / "repl.stderr.log"
        async with ReplClient(make_cfg(), stderr_log=log) as repl:
            assert repl.alive and psutil.pid_exists(repl.pid)
            root = await repl.goal_start(AND_COMM)
            assert root.text == f"⊢ {AND_COMM}"
            s1 = await repl.goal_tactic(root.state_id, "intro p q h")
            assert isinstance(s1, GoalState)
            assert s1.text == "p q : Prop\nh : p ∧ q\n⊢ q ∧ p"
            s2 = await repl.goal_tactic(s1.state_id, "constructor")
            assert isinstance(s2, GoalState) and len(s2.goals) == 2
            s3 = await repl.goal_tactic(s2.state_id, "exact h.2")
            assert isinstance(s3, GoalState) and s3.text == "case right\np q : Prop\nh : p ∧ q\n⊢ p"
            s4 = await repl.goal_tactic(s3.state_id, "exact h.1")
            assert isinstance(s4, GoalState) and s4.goals == () and s4.text == "no goals"
            assert len({root.state_id, s1.state_id, s2.state_id, s3.state_id, s4.state_id}) == 5
            pid = repl.pid
        assert not repl.alive
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        assert log.read_text().startswith(f"=== repl: pid {pid} started ===")

    run(main())


def test_tactic_failure_and_parse_error_keep_the_process() -> None:
    async def main():
        async with ReplClient(make_cfg()) as repl:
            root = await repl.goal_start(AND_COMM)
            bad = await repl.goal_tactic(root.state_id, "exact foo")
            assert isinstance(bad, TacticRejected) and bad.kind == "error"
            assert bad.message and bad.messages and bad.messages[0].severity == "error"
            parse = await repl.goal_tactic(root.state_id, "intro (")
            assert isinstance(parse, TacticRejected) and parse.kind == "parse"
            assert parse.message
            # the process survived both and the state is still usable
            ok = await repl.goal_tactic(root.state_id, "intro p q h")
            assert isinstance(ok, GoalState)

    run(main())


def test_sorry_result_is_rejected_and_its_state_deleted() -> None:
    async def main():
        async with ReplClient(make_cfg()) as repl:
            root = await repl.goal_start(AND_COMM)
            before = await repl.stat()
            r = await repl.goal_tactic(root.state_id, "sorry")
            assert isinstance(r, TacticRejected) and r.kind == "sorry"
            assert await repl.stat() == before  # the hasSorry state was deleted

    run(main())


def test_unknown_command_and_bad_state_index_are_protocol_errors() -> None:
    async def main():
        async with ReplClient(make_cfg()) as repl:
            with pytest.raises(ReplProtocolError) as unknown:
                await repl.request("no.such.command", {})
            assert unknown.value.kind == "command"
            assert "Unknown command no.such.command" in unknown.value.desc
            with pytest.raises(ReplProtocolError) as index:
                await repl.goal_tactic(999, "intro h")
            assert index.value.kind == "index" and "999" in index.value.desc
            assert repl.alive  # protocol errors leave the REPL usable
            assert isinstance(await repl.goal_start(AND_COMM), GoalState)

    run(main())


def test_repl_side_timeout_reports_interrupt() -> None:
    async def main():
        async with ReplClient(make_cfg(tactic_timeout_s=0.3)) as repl:
            root = await repl.goal_start(AND_COMM)
            fast = await repl.goal_tactic(root.state_id, "sleep 10")
            assert isinstance(fast, GoalState)
            t0 = asyncio.get_running_loop().time()
            with pytest.raises(ReplTimeoutError) as e:
                await repl.goal_tactic(root.state_id, "sleep 5000")
            assert not e.value.killed and "interrupt" in str(e.value)
            assert asyncio.get_running_loop().time() - t0 < 3.0  # the REPL's timeout, not 5 s
            assert repl.alive  # the REPL answered: a failed tactic, the process is fine
            # Pantograph's own test: the next tactic on the same state runs (§8)
            after = await repl.goal_tactic(root.state_id, "intro p q h")
            assert isinstance(after, GoalState) and after.text == "p q : Prop\nh : p ∧ q\n⊢ q ∧ p"

    run(main())


def test_tactics_go_under_the_heartbeat_limit_and_hitting_it_is_its_own_kind() -> None:
    async def main():
        async with ReplClient(make_cfg(tactic_heartbeats=2)) as repl:
            root = await repl.goal_start(AND_COMM)
            ok = await repl.goal_tactic(root.state_id, "debug_heartbeats 2000")
            assert isinstance(ok, GoalState)
            over = await repl.goal_tactic(root.state_id, "debug_heartbeats 2001")
            assert isinstance(over, TacticRejected) and over.kind == "heartbeats", over
            assert "maximum number of heartbeats (2)" in over.message
            # two lines: the wrapper's scope is the whole sequence
            two = await repl.goal_tactic(root.state_id, "intro p q h\nconstructor")
            assert isinstance(two, GoalState) and len(two.goals) == 2
            three = await repl.goal_tactic(root.state_id, "intro p q h\nconstructor\nexact h.2")
            assert isinstance(three, TacticRejected) and three.kind == "heartbeats"
        async with ReplClient(make_cfg(tactic_heartbeats=None)) as repl:  # the REPL's own limit
            root = await repl.goal_start(AND_COMM)
            assert isinstance(
                await repl.goal_tactic(root.state_id, "debug_heartbeats 2001"), GoalState
            )

    run(main())


def test_goal_save_and_load_across_processes(tmp_path: Path) -> None:
    async def main():
        path = tmp_path / "state"
        async with ReplClient(make_cfg()) as a:
            root = await a.goal_start(AND_COMM)
            s1 = await a.goal_tactic(root.state_id, "intro p q h")
            # submit writes the line before it returns; the reply comes later, in order
            reply = await a.submit("goal.save", {"id": s1.state_id, "path": str(path)})
            s2 = await a.goal_tactic(s1.state_id, "constructor")
            assert reply.done() and (await reply)[0] == {} and (await reply)[1] > 0
            assert isinstance(s2, GoalState)
        async with ReplClient(make_cfg()) as b:
            sid = await b.goal_load(path)
            s3 = await b.goal_tactic(sid, "exact ⟨h.2, h.1⟩")
            assert isinstance(s3, GoalState) and s3.goals == ()
            with pytest.raises(ReplProtocolError) as e:
                await b.goal_load(tmp_path / "missing")
            assert e.value.kind == "main" and "no such file" in e.value.desc
            assert b.alive
            await b.goal_save(s3.state_id, tmp_path / "done")
            assert (tmp_path / "done").stat().st_size > 0

    run(main())


def test_hanging_read_kills_the_process_and_a_new_client_works() -> None:
    async def main():
        cfg = make_cfg(tactic_timeout_s=0.3)
        async with ReplClient(cfg, read_timeout_s=1.0) as repl:
            root = await repl.goal_start(AND_COMM)
            pid = repl.pid
            with pytest.raises(ReplTimeoutError) as e:
                await repl.goal_tactic(root.state_id, "debug_hang")
            assert e.value.killed and "no reply to goal.tactic within 1.0 s" in str(e.value)
            assert not repl.alive
            with pytest.raises(ReplError, match="not running"):
                await repl.stat()
        await asyncio.sleep(0.2)
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        async with ReplClient(cfg) as fresh:
            assert isinstance(await fresh.goal_start(AND_COMM), GoalState)

    run(main())


def test_garbage_on_stdout_quotes_the_line_and_kills() -> None:
    async def main():
        async with ReplClient(make_cfg()) as repl:
            root = await repl.goal_start(AND_COMM)
            with pytest.raises(ReplError, match="not a JSON object: '") as e:
                await repl.goal_tactic(root.state_id, "debug_garbage")
            assert not isinstance(e.value, ReplProtocolError)
            assert not repl.alive

    run(main())


def test_crash_is_eof_with_exit_code() -> None:
    async def main():
        async with ReplClient(make_cfg()) as repl:
            root = await repl.goal_start(AND_COMM)
            with pytest.raises(ReplError, match=r"exited \(code") as e:
                await repl.goal_tactic(root.state_id, "debug_crash")
            assert "during goal.tactic" in str(e.value)
            assert not repl.alive

    run(main())


def test_exit_before_ready_quotes_stderr() -> None:
    cfg = make_cfg(
        repl_command=(
            sys.executable,
            "-c",
            "import sys; sys.stderr.write('olean mismatch'); sys.exit(3)",
        )
    )

    async def main():
        with pytest.raises(ReplError, match=r"before printing `ready\.`") as e:
            await ReplClient(cfg).start()
        assert "olean mismatch" in str(e.value) and "code 3" in str(e.value)

    run(main())


def test_ready_timeout_kills_the_process() -> None:
    cfg = make_cfg(
        repl_command=(
            sys.executable,
            "-c",
            "import time; print('loading', flush=True); time.sleep(60)",
        ),
        ready_timeout_s=0.5,
    )

    async def main():
        repl = ReplClient(cfg)
        with pytest.raises(ReplError, match=r"no `ready\.`.*lean\.ready_timeout_s"):
            await repl.start()
        await asyncio.sleep(0.2)
        pid = repl.pid
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE

    run(main())


def test_missing_program_is_a_clear_error() -> None:
    async def main():
        with pytest.raises(ReplError, match=r"lean\.repl_command: cannot run"):
            await ReplClient(make_cfg(repl_command=("/nonexistent/repl",))).start()

    run(main())


@pytest.mark.parametrize("launch", ["setpriv", "preexec"])
def test_resource_limits_are_applied(launch: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Both ways of spawning: util-linux's launchers (vfork, no Python in the child) and the
    # forked child's own setup where they are missing.
    if launch == "preexec":
        monkeypatch.setattr(client_module, "_launchers", lambda: None)
    else:
        assert client_module._launchers() is not None, "setpriv/prlimit missing (util-linux)"

    async def main():
        async with ReplClient(make_cfg(memory_limit_mb=1500, cpu_limit_s=100)) as repl:
            proc = psutil.Process(repl.pid)
            assert proc.rlimit(psutil.RLIMIT_AS) == (1500 * 2**20, 1500 * 2**20)
            assert proc.rlimit(psutil.RLIMIT_CPU) == (100, 105)
            assert os.getpgid(repl.pid) == repl.pid  # its own process group, killable as one

    run(main())


def test_version_and_start_route() -> None:
    version = run(read_version(make_cfg()))
    assert (version.major, version.minor, version.patch) == (0, 3, 4)
    assert version.start_route == "process"
    newer = ReplVersion.parse("0.3.7/v4.21.0")
    assert newer > version and newer.start_route == "distil"
    old = make_cfg(repl_command=(sys.executable, "-c", "print('0.3.1')"))
    with pytest.raises(
        ReplVersionError, match=r"Pantograph 0\.3\.1; burnqed speaks Pantograph 0\.3\.4"
    ):
        run(read_version(old))
    with pytest.raises(ReplVersionError, match="cannot read a version"):
        run(read_version(make_cfg(repl_command=(sys.executable, "-c", "print('hello')"))))


def test_frontend_process_with_sorrys_gives_the_goal() -> None:
    async def main():
        async with ReplClient(make_cfg()) as repl:
            units = await repl.frontend_process(
                "theorem t (p q : Prop) : p ∧ q → q ∧ p := by\n  sorry\n", sorrys=True
            )
            with_goal = [u for u in units if u.goal_state_id is not None]
            assert len(with_goal) == 1
            unit = with_goal[0]
            assert [g.render() for g in unit.goals] == ["p q : Prop\n⊢ p ∧ q → q ∧ p"]
            assert any("declaration uses 'sorry'" in m.text for m in unit.messages)
            r = await repl.goal_tactic(unit.goal_state_id, "intro h")
            assert isinstance(r, GoalState) and r.text == "p q : Prop\nh : p ∧ q\n⊢ q ∧ p"

    run(main())


def test_argv_and_messages() -> None:
    cfg = LeanConfig(
        repl_command=("lake", "exe", "repl"),
        imports=("Mathlib",),
        options={"maxHeartbeats": 400000, "pp.raw": True},
    )
    assert repl_argv(cfg) == [
        "lake",
        "exe",
        "repl",
        "Mathlib",
        "--maxHeartbeats=400000",
        "--pp.raw=true",
    ]
    m = Message.from_json(
        {
            "severity": "error",
            "data": "unsolved goals",
            "pos": {"line": 3, "column": 2},
            "endPos": None,
        }
    )
    assert str(m) == "3:2: error: unsolved goals"
    assert Message.from_json("old-style error") == Message("error", "old-style error")


# -- pipelining ---------------------------------------------------------------------------------


def _props(k: int) -> str:
    return " ".join(f"p{j}" for j in range(k))


def _conj(k: int) -> str:
    return " ∧ ".join(f"p{j}" for j in range(k))


THEOREMS = [f"∀ ({_props(k)} : Prop), {_conj(k)} → p0" for k in range(1, 9)]


def test_concurrent_requests_get_their_own_replies() -> None:
    async def main():
        async with ReplClient(make_cfg(tactic_timeout_s=5.0), depth=3) as repl:
            roots = await asyncio.gather(*(repl.goal_start(t) for t in THEOREMS))
            assert [r.text for r in roots] == [f"⊢ {t}" for t in THEOREMS]
            # Each state gets a tactic naming its own variables: a reply matched to the wrong
            # request would show another theorem's hypotheses (or an error).
            tactics = [f"intro {_props(k)} h" for k in range(1, 9)]
            steps = await asyncio.gather(
                *(repl.goal_tactic(r.state_id, t) for r, t in zip(roots, tactics, strict=True))
            )
            for k, s in enumerate(steps, start=1):
                assert isinstance(s, GoalState)
                assert s.text == f"{_props(k)} : Prop\nh : {_conj(k)}\n⊢ p0"
            # Really pipelined: slow requests fill the pipe to `depth`, no further.
            slow = [asyncio.create_task(repl.goal_tactic(s.state_id, "sleep 300")) for s in steps]
            await asyncio.sleep(0.15)
            assert repl.in_flight == 3
            done = await asyncio.gather(*slow)
            assert [d.text for d in done] == [s.text for s in steps]
            assert repl.in_flight == 0 and repl.alive

    run(main())


def test_queued_request_timeout_starts_when_the_repl_reaches_it() -> None:
    async def main():
        async with ReplClient(make_cfg(tactic_timeout_s=10.0)) as repl:
            root = await repl.goal_start(AND_COMM)
            lean0, t0 = repl.lean_time_s, time.perf_counter()
            slow = repl.request(
                "goal.tactic", {"stateId": root.state_id, "tactic": "sleep 1500"}, timeout=8.0
            )
            # Queued 1.5 s behind `slow`, with a 1 s timeout of its own: it must still succeed.
            quick = repl.request(
                "goal.tactic", {"stateId": root.state_id, "tactic": "intro p q h"}, timeout=1.0
            )
            a, b = await asyncio.gather(slow, quick)
            elapsed = time.perf_counter() - t0
            assert "nextStateId" in a and "nextStateId" in b and elapsed >= 1.5
            # REPL time counts each request from the moment the REPL reached it, so the two
            # add up to at most the wall time (the queued wait is not counted twice).
            assert 1.5 <= repl.lean_time_s - lean0 <= elapsed + 0.05
            assert repl.alive

    run(main())


@pytest.mark.parametrize(
    ("tactic", "head_error", "match"),
    [
        ("debug_hang", ReplTimeoutError, "no reply to goal.tactic within 1.0 s; killed pid"),
        ("debug_garbage", ReplError, "not a JSON object: '"),
        ("debug_crash", ReplError, r"exited \(code 3\) during goal.tactic"),
    ],
)
def test_a_broken_head_fails_the_queued_requests_as_never_run(
    tactic: str, head_error: type[ReplError], match: str
) -> None:
    async def main():
        cfg = make_cfg(tactic_timeout_s=0.3)
        async with ReplClient(cfg, read_timeout_s=1.0) as repl:
            root = await repl.goal_start(AND_COMM)
            pid = repl.pid
            calls = [repl.goal_tactic(root.state_id, tactic)]
            calls += [repl.goal_tactic(root.state_id, "intro p q h") for _ in range(6)]
            results = await asyncio.gather(*calls, return_exceptions=True)
            head, queued = results[0], results[1:]
            assert isinstance(head, head_error), head
            assert re.search(match, str(head))
            if head_error is ReplTimeoutError:
                assert head.killed
            for r in queued:  # behind the head in the pipe, or waiting for a slot
                assert isinstance(r, ReplError) and not isinstance(r, ReplTimeoutError), r
                assert re.search(r"never ran: it was queued behind goal.tactic|not running", str(r))
            assert any("never ran" in str(r) for r in queued)
            assert not repl.alive and repl.in_flight == 0
            with pytest.raises(ReplError, match="not running"):
                await repl.stat()
        await asyncio.sleep(0.2)
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        async with ReplClient(cfg) as fresh:  # a restarted client works
            again = await fresh.goal_start(AND_COMM)
            assert isinstance(await fresh.goal_tactic(again.state_id, "intro p q h"), GoalState)

    run(main())


def test_repl_side_interrupt_fails_only_its_own_request() -> None:
    async def main():
        async with ReplClient(make_cfg(tactic_timeout_s=0.3)) as repl:
            root = await repl.goal_start(AND_COMM)
            results = await asyncio.gather(
                repl.goal_tactic(root.state_id, "sleep 5000"),
                repl.goal_tactic(root.state_id, "intro p q h"),
                repl.goal_tactic(root.state_id, "constructor"),
                return_exceptions=True,
            )
            timeout, intro, ctor = results
            assert isinstance(timeout, ReplTimeoutError) and not timeout.killed
            assert isinstance(intro, GoalState) and intro.text == "p q : Prop\nh : p ∧ q\n⊢ q ∧ p"
            assert isinstance(ctor, TacticRejected) and ctor.kind == "error"
            assert repl.alive

    run(main())


def test_a_cancelled_caller_does_not_put_the_replies_out_of_step() -> None:
    async def main():
        async with ReplClient(make_cfg(tactic_timeout_s=5.0)) as repl:
            root = await repl.goal_start(AND_COMM)
            slow = asyncio.create_task(repl.goal_tactic(root.state_id, "sleep 300"))
            await asyncio.sleep(0.05)
            slow.cancel()  # its line is in the pipe: the REPL still answers it
            nxt = await repl.goal_tactic(root.state_id, "intro p q h")
            assert isinstance(nxt, GoalState) and nxt.text == "p q : Prop\nh : p ∧ q\n⊢ q ∧ p"
            assert await repl.stat() >= 2 and repl.alive
            with pytest.raises(asyncio.CancelledError):
                await slow

    run(main())


def test_drain_and_close_finishes_in_flight_requests_and_refuses_new_ones() -> None:
    async def main():
        repl = ReplClient(make_cfg(tactic_timeout_s=5.0))
        await repl.start()
        root = await repl.goal_start(AND_COMM)
        in_flight = [
            asyncio.create_task(repl.goal_tactic(root.state_id, "sleep 200")) for _ in range(3)
        ]
        await asyncio.sleep(0.05)
        draining = asyncio.create_task(repl.drain_and_close())
        await asyncio.sleep(0)
        with pytest.raises(ReplError, match="being recycled"):
            await repl.stat()
        await draining
        assert all(isinstance(t.result(), GoalState) for t in in_flight)
        assert not repl.alive

    run(main())


def test_a_lease_holder_finishes_its_sequence_while_the_repl_drains() -> None:
    """A recycle between the requests of one restore-and-run sequence waits for its holder: the
    holder's later requests still go out, others' are refused, and no new lease is given."""

    async def main():
        repl = ReplClient(make_cfg(tactic_timeout_s=5.0))
        await repl.start()
        with repl.lease():
            root = await repl.goal_start(AND_COMM)
            draining = asyncio.create_task(repl.drain_and_close())
            await asyncio.sleep(0.05)
            assert not draining.done() and repl.alive  # it waits for the holder
            with pytest.raises(ReplError, match=r"being recycled \(cannot lease"), repl.lease():
                pass
            step = await repl.goal_tactic(root.state_id, "intro p q h")  # the sequence goes on
            assert isinstance(step, GoalState) and step.text.endswith("⊢ q ∧ p")
        await draining  # let go: the drain ends
        assert not repl.alive
        with pytest.raises(ReplError, match="not running"):
            await repl.stat()

    run(main())


def test_close_fails_requests_in_flight() -> None:
    async def main():
        repl = ReplClient(make_cfg(tactic_timeout_s=60.0))
        await repl.start()
        root = await repl.goal_start(AND_COMM)
        hung = [asyncio.create_task(repl.goal_tactic(root.state_id, "debug_hang"))]
        hung += [asyncio.create_task(repl.goal_tactic(root.state_id, "intro h")) for _ in range(2)]
        await asyncio.sleep(0.1)
        t0 = time.perf_counter()
        await repl.close()
        assert time.perf_counter() - t0 < 5
        results = await asyncio.gather(*hung, return_exceptions=True)
        assert "closed before the reply to goal.tactic" in str(results[0])
        assert all("never ran" in str(r) for r in results[1:])

    run(main())
