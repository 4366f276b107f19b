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
