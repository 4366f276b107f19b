"""Whole-proof verification: a correct proof passes; sorry, an altered statement, open goals and
guard-blocked tactics are rejected with reasons."""

from __future__ import annotations

import asyncio

import pytest

from burnqed.config import LeanConfig
from burnqed.lean.client import CompilationUnit, Message
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
        "statement changed: expected 'theorem or_swap (p q : Prop) : p ∨ q"
    )
    # a second declaration of the same name is refused too
    twice = proof_file(THM, SIMPLE_PROOF) + proof_file(THM, SIMPLE_PROOF)
    assert (
        "declares 'or_swap' 2 times" in asyncio.run(verify_file(make_cfg(), THM, twice)).reasons[0]
    )


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
    assert "declares 't' 0 times" in statement_in_file(
        Theorem(name="t", formal_statement="theorem t : True := by\n"), "theorem t2 : True := by\n"
    )


def _units(*texts: tuple[str, str]) -> list[CompilationUnit]:
    return [CompilationUnit((0, 1), tuple(Message(sev, text, 1, 0) for sev, text in texts))]


@pytest.mark.parametrize(
    ("messages", "ok", "axioms", "reason"),
    [
        (
            [("information", "'t' depends on axioms: [propext, Quot.sound]")],
            True,
            ("propext", "Quot.sound"),
            None,
        ),
        ([("information", "'t' does not depend on any axioms")], True, (), None),
        (
            [("information", "'t' depends on axioms: [propext,\n Lean.ofReduceBool]")],
            False,
            ("propext", "Lean.ofReduceBool"),
            "axioms outside lean.allowed_axioms: Lean.ofReduceBool",
        ),
        ([], False, (), "no `#print axioms t` report"),
        (
            [("error", "unknown tactic"), ("information", "'t' does not depend on any axioms")],
            False,
            (),
            "Lean error: 1:0: error: unknown tactic",
        ),
        (
            [("information", "'other' does not depend on any axioms")],
            False,
            (),
            "no `#print axioms t` report",
        ),
    ],
)
def test_judge(messages, ok, axioms, reason) -> None:
    thm = Theorem(name="t", formal_statement="theorem t : True := by\n")
    v = judge(LeanConfig(), thm, "file", _units(*messages))
    assert v.ok is ok and v.axioms == axioms
    if reason:
        assert any(r.startswith(reason) for r in v.reasons), v.reasons
