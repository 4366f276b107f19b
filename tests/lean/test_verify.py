"""Whole-proof verification: a correct proof passes; sorry, an altered statement, open goals and
guard-blocked tactics are rejected with reasons."""

from __future__ import annotations

import asyncio

import pytest

from burnqed.config import LeanConfig
from burnqed.lean.client import CompilationUnit, Message
from burnqed.lean.guard import TacticGuard
from burnqed.lean.pool import LeanPool
from burnqed.lean.verify import (
    judge,
    proof_file,
    statement_hash,
    statement_in_file,
    strip_imports,
    verify_file,
    verify_proof,
)
from burnqed.theorems import Theorem
from tests.lean.repl_config import proplogic_config

THM = Theorem(
    name="or_swap",
    formal_statement="theorem or_swap (p q : Prop) : p ∨ q → q ∨ p := by\n",
)
PROOF = ("intro h", "cases h with\n| inl hp => exact Or.inr hp\n| inr hq => exact Or.inl hq")
SIMPLE_PROOF = ("intro h", "rcases h with hp | hq", "exact Or.inr hp", "exact Or.inl hq")


def make_cfg(**kw) -> LeanConfig:
    return proplogic_config(**{"tactic_timeout_s": 2.0, "memory_limit_mb": 16384, **kw})


def test_correct_proof_is_accepted() -> None:
    v = asyncio.run(verify_proof(make_cfg(), THM, SIMPLE_PROOF))
    assert v.ok, v.reasons
    assert v.reasons == () and v.axioms == ()
    assert v.file.startswith(THM.formal_statement) and v.file.endswith("#print axioms or_swap\n")


def test_pool_verify_uses_a_fresh_process() -> None:
    async def main():
        async with LeanPool(make_cfg()) as pool:
            pids = pool.worker_pids()
            v = await pool.verify(THM, SIMPLE_PROOF)
            assert v.ok, v.reasons
            assert pool.worker_pids() == pids and pool.stats()["verifications"] == 1
            bad = await pool.verify(THM, ("intro h", "exact h"))
            assert not bad.ok

    asyncio.run(main())


@pytest.mark.parametrize("verifiers", [1, 2])
def test_the_verification_pool_checks_in_warm_fresh_processes(verifiers: int) -> None:
    """``lean.verifiers`` processes are started ahead; each checks one proof and goes, the next
    starts meanwhile; at most ``verifiers`` checks run at once, beside the search's workers."""
    slow = ("sleep 500", *SIMPLE_PROOF)

    async def main():
        async with LeanPool(make_cfg(verifiers=verifiers)) as pool:
            warm = set(pool.pids()) - set(pool.worker_pids()) - set(pool.spare_pids())
            assert len(warm) == verifiers  # warm before any proof arrives
            used: list[int] = []
            active = most = 0
            take = pool._take_verifier  # white-box: watch the processes the checks get

            async def watched():
                nonlocal active, most
                client = await take()
                used.append(client.pid)
                assert client.requests == 1  # only its start's options.set: never used before
                active += 1
                most = max(most, active)
                close = client.close

                async def closed():
                    nonlocal active
                    active -= 1
                    await close()

                client.close = closed
                return client

            pool._take_verifier = watched
            verdicts = await asyncio.gather(*(pool.verify(THM, slow) for _ in range(3)))
            assert all(v.ok for v in verdicts), verdicts
            assert most == verifiers  # that many at once, never more
            assert len(set(used)) == 3 and set(used[:verifiers]) == warm  # one process per check
            assert not set(used) & set(pool.worker_pids())
            assert pool.stats()["verifications"] == 3
            for _ in range(400):  # the next ones warm up in the background (slow on a busy CI)
                now = set(pool.pids()) - set(pool.worker_pids()) - set(pool.spare_pids())
                if len(now) == verifiers:
                    break
                await asyncio.sleep(0.05)
            assert len(now) == verifiers and not now & set(used)

    asyncio.run(main())


def test_a_check_that_waits_for_its_verifier_still_starts_the_next() -> None:
    """A check that finds no verifier warm waits for the one starting; the moment that one is
    handed over, its successor starts (the start that published it no longer counts as starting:
    counted a loop turn longer, the pool believed one was on its way and started none, and the
    next check had to start its own: CI's "next verifiers warm within 20 s: saw 0")."""

    async def main():
        async with LeanPool(make_cfg(verifiers=1)) as pool:
            start = pool._start

            async def slow_start(client):  # white-box: every start slower than a check
                await asyncio.sleep(0.3)
                await start(client)

            pool._start = slow_start
            for _ in range(3):  # the first finds one warm, the others wait for theirs
                assert (await pool.verify(THM, SIMPLE_PROOF)).ok
                assert pool._verifiers.qsize() + len(pool._verifier_starts) == 1

    asyncio.run(main())


def test_sorry_is_rejected_by_lean_when_the_guard_lets_it_through() -> None:
    v = asyncio.run(verify_proof(make_cfg(banned_tactics=()), THM, ("intro h", "sorry")))
    assert not v.ok
    assert any(r.startswith("uses sorry") for r in v.reasons), v.reasons
    assert "sorryAx" in v.axioms
    assert any("axioms outside lean.allowed_axioms: sorryAx" in r for r in v.reasons)


def test_open_goals_are_rejected() -> None:
    v = asyncio.run(verify_proof(make_cfg(), THM, ("intro h",)))
    assert not v.ok
    assert any("Lean error" in r and "unsolved goals" in r for r in v.reasons), v.reasons


def test_altered_statement_is_rejected() -> None:
    altered = proof_file(THM, SIMPLE_PROOF).replace("p ∨ q → q ∨ p", "p ∨ q → p ∨ q")
    v = asyncio.run(verify_file(make_cfg(), THM, altered))
    assert not v.ok
    assert v.reasons[0].startswith(
        "statement changed: the file does not begin with the dataset's statement of 'or_swap'"
    )
    assert "expected 'q ∨ p := by" in v.reasons[0]
    # a second declaration of the same name is refused too (the proof may not declare anything)
    twice = proof_file(THM, SIMPLE_PROOF) + proof_file(THM, SIMPLE_PROOF)
    reasons = asyncio.run(verify_file(make_cfg(), THM, twice)).reasons
    assert len(reasons) == 1 and reasons[0].startswith("proof banned by pattern"), reasons


def test_set_option_before_the_statement_is_rejected() -> None:
    """The whole file is checked, not only what follows the statement."""
    file = "set_option maxRecDepth 100000\n" + proof_file(THM, SIMPLE_PROOF)
    v = asyncio.run(verify_file(make_cfg(repl_command=("/nonexistent",)), THM, file))
    assert not v.ok and v.reasons[0].startswith("statement changed"), v.reasons
    assert "expected 'theorem or_swap" in v.reasons[0]
    # ... while the same option inside the dataset's own header is trusted text
    thm = Theorem(
        name="or_swap", formal_statement=THM.formal_statement, header="set_option maxRecDepth 1\n"
    )
    assert asyncio.run(verify_proof(make_cfg(), thm, SIMPLE_PROOF)).ok


def test_one_character_changed_in_the_statement_is_rejected() -> None:
    thm = Theorem(
        name="t",
        formal_statement="theorem t (p : Prop) : p → p := by sorry",
        header="import Mathlib\n\nopen Nat\n\n",
    )
    good = proof_file(thm, ["intro h", "exact h"])
    assert statement_in_file(thm, good) is None
    for i in (good.index("open"), good.index("(p"), good.index(":=")):
        changed = good[:i] + good[i].swapcase().replace("(", "[").replace(":", ";") + good[i + 1 :]
        assert statement_in_file(thm, changed).startswith("statement changed"), changed


def test_name_with_a_prime_verifies() -> None:
    thm = Theorem(
        name="or_swap'", formal_statement="theorem or_swap' (p q : Prop) : p ∨ q → q ∨ p := by\n"
    )
    v = asyncio.run(verify_proof(make_cfg(), thm, SIMPLE_PROOF))
    assert v.ok, v.reasons
    assert v.file.endswith("#print axioms or_swap'\n")


def test_forged_axiom_report_in_tactic_output_is_rejected() -> None:
    """`trace` prints a report-shaped message before the real one: the proof is refused even when
    the guard lets `trace` through, and by the guard by default."""
    forged = "trace \"'or_swap' does not depend on any axioms\""
    tactics = (SIMPLE_PROOF[0], forged, *SIMPLE_PROOF[1:])
    v = asyncio.run(verify_proof(make_cfg(banned_tactics=()), THM, tactics))
    assert not v.ok
    assert any(r.startswith("a message other than the `#print axioms` report") for r in v.reasons)
    assert (
        asyncio.run(verify_proof(make_cfg(), THM, tactics))
        .reasons[0]
        .startswith("tactic 2 " + repr(forged) + ": banned by pattern")
    )


def test_dataset_preamble_is_trusted_and_survives_into_the_file() -> None:
    """A preamble declaration in the statement is the dataset's (not guarded, elaborated by Lean);
    the same declaration in the model's proof is refused."""
    preamble = "/-- the dataset's helper -/\nlemma helper (p : Prop) : p → p := by\n  intro h\n  exact h\n\n"
    thm = Theorem(name="or_swap", formal_statement=preamble + THM.formal_statement)
    v = asyncio.run(verify_proof(make_cfg(), thm, SIMPLE_PROOF))
    assert v.ok, v.reasons
    assert v.file.startswith(preamble)
    assert TacticGuard.from_config(make_cfg()).check(preamble) is not None  # a proof may not
    in_proof = proof_file(THM, SIMPLE_PROOF).replace("\n\n#print", "\n" + preamble + "#print")
    reasons = asyncio.run(verify_file(make_cfg(repl_command=("/nonexistent",)), THM, in_proof))
    assert reasons.reasons[0].startswith("proof banned by pattern"), reasons.reasons


def test_guard_blocked_tactic_is_rejected_before_lean() -> None:
    v = asyncio.run(
        verify_proof(make_cfg(repl_command=("/nonexistent",)), THM, ("intro h", "exact sorry"))
    )
    assert not v.ok  # no REPL was needed (the command does not exist)
    assert v.reasons == (r"tactic 2 'exact sorry': banned by pattern \bsorry\b",)
    nd = asyncio.run(verify_proof(make_cfg(), THM, ("native_decide",)))
    assert nd.reasons == (r"tactic 1 'native_decide': banned by pattern \bnative_decide\b",)
    whole = proof_file(THM, ("intro h", "admit"))
    assert (
        "proof banned by pattern \\badmit\\b"
        in asyncio.run(verify_file(make_cfg(), THM, whole)).reasons
    )


def test_file_assembly_strips_imports_keeps_opens() -> None:
    thm = Theorem(
        name="t",
        formal_statement="theorem t : True := by\n",
        header="import Mathlib\nimport Aesop\n\nset_option maxHeartbeats 400000\n\nopen Nat Real\n\n",
    )
    assert strip_imports(thm.header) == "\nset_option maxHeartbeats 400000\n\nopen Nat Real\n\n"
    file = proof_file(thm, ["trivial"])
    assert "import" not in file and "open Nat Real" in file
    assert file.endswith("theorem t : True := by\n  trivial\n\n#print axioms t\n")
    assert statement_in_file(thm, file) is None


def test_statement_hash_ignores_whitespace_only() -> None:
    assert statement_hash("theorem t (p : Prop) :\n    p → p := by\n") == statement_hash(
        "theorem t (p : Prop) : p → p := by"
    )
    assert statement_hash("theorem t (p : Prop) : p → p") != statement_hash(
        "theorem t (q : Prop) : q → q"
    )
    assert statement_in_file(
        Theorem(name="t", formal_statement="theorem t : True := by\n"), "theorem t2 : True := by\n"
    ).startswith("statement changed")


FILE = "theorem t : True := by\n  trivial\n\n#print axioms t\n"
REPORT_AT = FILE.index("#print")


def _units(*texts: tuple[int, str, str]) -> list[CompilationUnit]:
    """Two units, the theorem's and the `#print axioms` command's; (unit, severity, text)."""
    bounds = [(0, REPORT_AT), (REPORT_AT, len(FILE))]
    return [
        CompilationUnit(b, tuple(Message(sev, text, 1, 0) for u, sev, text in texts if u == i))
        for i, b in enumerate(bounds)
    ]


@pytest.mark.parametrize(
    ("messages", "ok", "axioms", "reason"),
    [
        (
            [(1, "information", "'t' depends on axioms: [propext, Quot.sound]")],
            True,
            ("propext", "Quot.sound"),
            None,
        ),
        ([(1, "information", "'t' does not depend on any axioms")], True, (), None),
        (
            [(1, "information", "'t' depends on axioms: [propext,\n Lean.ofReduceBool]")],
            False,
            ("propext", "Lean.ofReduceBool"),
            "axioms outside lean.allowed_axioms: Lean.ofReduceBool",
        ),
        ([], False, (), "no `#print axioms t` report"),
        (
            [
                (0, "error", "unknown tactic"),
                (1, "information", "'t' does not depend on any axioms"),
            ],
            False,
            (),
            "Lean error: 1:0: error: unknown tactic",
        ),
        (
            [(1, "information", "'other' does not depend on any axioms")],
            False,
            (),
            "a message other than the `#print axioms` report looks like one",
        ),
        (  # the forged report first, the real one after: the real one is read, and both refused
            [
                (0, "information", "'t' does not depend on any axioms"),
                (1, "information", "'t' depends on axioms: [Lean.ofReduceBool, sorryAx]"),
            ],
            False,
            ("Lean.ofReduceBool", "sorryAx"),
            "a message other than the `#print axioms` report looks like one: 1:0: information:",
        ),
        (  # two reports in the report's own unit
            [
                (1, "information", "'t' does not depend on any axioms"),
                (1, "information", "'t' does not depend on any axioms"),
            ],
            False,
            (),
            "a message other than the `#print axioms` report looks like one",
        ),
    ],
)
def test_judge(messages, ok, axioms, reason) -> None:
    thm = Theorem(name="t", formal_statement="theorem t : True := by\n")
    v = judge(LeanConfig(), thm, FILE, _units(*messages))
    assert v.ok is ok and v.axioms == axioms, v
    if reason:
        assert any(r.startswith(reason) for r in v.reasons), v.reasons


@pytest.mark.parametrize("name", ["or_swap'", "f''", "a'b", "Nat.foo'_bar", "x₁'"])
def test_report_names_with_primes_parse(name) -> None:
    thm = Theorem(name=name, formal_statement=f"theorem {name} : True := by\n")
    file = f"theorem {name} : True := by\n  trivial\n\n#print axioms {name}\n"
    at = len(file[: file.index("#print")].encode())
    units = [
        CompilationUnit((0, at), ()),
        CompilationUnit(
            (at, len(file.encode())),
            (Message("information", f"'{name}' depends on axioms: [propext]", 4, 0),),
        ),
    ]
    v = judge(LeanConfig(), thm, file, units)
    assert v.ok and v.axioms == ("propext",), v.reasons
