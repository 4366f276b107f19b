"""Lean-like text for the policy tests' tiny model: proof states, tactics, prompts."""

from __future__ import annotations

from burnqed.data.prompt import format_example, format_prompt

STATES = (
    "p q : Prop\nh : p ∧ q\n⊢ q ∧ p",
    "p : Prop\n⊢ p → p",
    "p q r : Prop\nhpq : p → q\nhqr : q → r\n⊢ p → r",
    "p q : Prop\nh : p ∨ q\n⊢ q ∨ p",
    "case left\np q : Prop\nhp : p\n⊢ p",
)
TACTICS = (
    "intro h",
    "exact h",
    "constructor",
    "cases h",
    "apply hqr",
    "left",
    "right",
    "assumption",
)


def corpus() -> list[str]:
    """Lean-like prompt + tactic text, enough for BPE to learn a few hundred merges."""
    texts = []
    for s in STATES:
        for t in TACTICS:
            ex = format_example(s, t)
            texts.append(ex["prompt"] + ex["completion"])
    return texts * 4


def prompts() -> list[str]:
    return [format_prompt(s) for s in STATES]
