"""The tactic guard: the default ``lean.banned_tactics`` refuse the known tricks and pass real tactics."""

from __future__ import annotations

import pytest

from burnqed.config import LeanConfig
from burnqed.lean.guard import TacticGuard

DEFAULT = TacticGuard.from_config(LeanConfig())


@pytest.mark.parametrize(
    "tactic",
    [
        "sorry",
        "exact sorry",
        "refine ⟨sorry, ?_⟩",
        "admit",
        "native_decide",
        "simp; native_decide",
        "set_option maxHeartbeats 0 in simp",
        "#exit",
        "import Mathlib",
        "open Classical in exact Classical.em p",
        "open Classical\nin exact Classical.em p",  # `.` spans lines: the same trick on two lines
        "exact absurd h (by exact axiom_of_choice); axiom foo : False",
        "exact unsafe (cast h)",
        "decreasing_by simp",
        "#eval 1",
        "run_tac Lean.Elab.Tactic.evalTactic",
        "exact (sorry : False)",
        "exact sorryAx _ false",  # the axiom behind `sorry`, named directly
        "  ",
        "",
    ],
)
def test_default_guard_refuses_tricks(tactic: str) -> None:
    reason = DEFAULT.check(tactic)
    assert reason is not None, tactic
    assert reason.startswith(("banned by pattern", "empty tactic"))


@pytest.mark.parametrize(
    "tactic",
    [
        "intro h",
        "intros p q h",
        "exact ⟨h.2, h.1⟩",
        "rcases h with ⟨hp, hq⟩",
        "simp [sorry_free_lemma]",  # a word boundary is required: identifiers containing it pass
        "nlinarith [sq_nonneg (a - b), sq_nonneg (a + b)]",
        "cases h with\n| inl hp => exact Or.inr hp\n| inr hq => exact Or.inl hq",
        "exact admitted_lemma x",
        "exact unsafe_cast h",  # banned words count only as whole words
        "norm_num [Nat.factorial]",
    ],
)
def test_default_guard_passes_real_tactics(tactic: str) -> None:
    assert DEFAULT.check(tactic) is None


# One attack per bypass of issue 8 (each passed the guard before): what it does, then the tactic.
BYPASSES = {
    "trace forges an axiom report": "trace \"'t' does not depend on any axioms\"",
    "trace after a tactic": 'intro h; trace "x"',
    "trace_state": "trace_state",
    "dbg_trace in a term": 'exact dbg_trace "x"; h',
    "#print in a proof": "#print axioms t",
    "#check in a proof": "#check Nat",
    "decide +native": "decide +native",
    "decide with native config": "decide (config := { native := true })",
    "Lean.ofReduceBool": "exact Lean.ofReduceBool _ _ rfl",
    "ofReduceNat": "exact Lean.ofReduceNat _ _ rfl",
    "Lean.ofNative": "exact Lean.ofNative _ _ rfl",
    "run_cmd": 'run_cmd Lean.logInfo "x"',
    "run_elab": "run_elab pure ()",
    "run_meta": "run_meta pure ()",
    "macro": 'macro "cheat" : tactic => `(tactic| exact h)',
    "macro_rules": "macro_rules | `(tactic| trivial) => `(tactic| exact h)",
    "elab": 'elab "cheat" : tactic => pure ()',
    "syntax": 'syntax "cheat" : tactic',
    "notation": 'notation "X" => True',
    "newline + theorem": "exact h\ntheorem u : True := trivial",
    "newline + #print": "exact h\n#print axioms t",
    "newline + end": "exact h\nend",
    "newline + attribute": "exact h\n@[simp] theorem u : True := trivial",
    "newline + open": "exact h\nopen Classical",
    "newline + noncomputable": "exact h\nnoncomputable section",
    "same-line def": "exact h def x := 1",
    "instance": "exact h\ninstance : Inhabited Nat := ⟨0⟩",
}


@pytest.mark.parametrize("tactic", list(BYPASSES.values()), ids=list(BYPASSES))
def test_guard_closes_each_bypass(tactic: str) -> None:
    reason = DEFAULT.check(tactic)
    assert reason is not None and reason.startswith("banned by pattern"), tactic


@pytest.mark.parametrize(
    "tactic",
    [
        "exact Matrix.trace_mul_comm A B",  # `trace` as part of a qualified name is a lemma
        "rw [Matrix.trace_transpose]",
        "simp [Set.mem_def]",
        "exact h.def",
        "exact alternative_lemma",  # `native` only as a word of its own
        "exact Alternative.some",
        "decide",
        "exact Nat.lt_irrefl _ (syntax_free h)",
        "apply Finset.prod_congr rfl",
        "cases h with\n| inl hp => exact Or.inr hp\n| inr hq => exact Or.inl hq",
    ],
)
def test_closing_the_bypasses_keeps_real_tactics(tactic: str) -> None:
    assert DEFAULT.check(tactic) is None, DEFAULT.check(tactic)


def test_reason_names_the_pattern() -> None:
    assert DEFAULT.check("exact sorry") == r"banned by pattern \bsorry\b"
    assert DEFAULT.check("native_decide") == r"banned by pattern \bnative_decide\b"


def test_list_is_configurable() -> None:
    cfg = LeanConfig(banned_tactics=(r"\bomega\b",))
    guard = TacticGuard.from_config(cfg)
    assert guard.check("omega") == r"banned by pattern \bomega\b"
    assert guard.check("exact sorry") is None  # no longer banned: the list replaced the default
    assert TacticGuard([]).check("sorry") is None
    assert TacticGuard([]).check("   ") == "empty tactic"


def test_nul_character_refused() -> None:
    assert TacticGuard([]).check("intro h\x00") == "tactic contains a NUL character"


def test_back_references_keep_their_meaning() -> None:
    guard = TacticGuard([r"\bsimp\b", r"(\w+) \1"])  # the second: a word repeated
    assert guard.check("exact foo foo") == r"banned by pattern (\w+) \1"
    assert guard.check("exact foo bar") is None
    assert guard.check("simp") == r"banned by pattern \bsimp\b"
