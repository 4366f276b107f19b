"""The one step-prompt format, used by training and inference alike (SPEC §4.2).

DeepSeek-native: the proof state is a Lean comment inside a ``lean4`` code fence — the way
DeepSeek-Prover-V1.5 writes ``/- tactic state: … -/`` comments — and the tactic is the completion
after the closing fence.  The prompt ends with ``"\\n"`` so it ends at a token boundary (trl tokenizes
prompt and prompt+completion separately; ``reference/training-stack.md`` §2.2).

Example::

    >>> print(format_prompt("p q : Prop\\nh : p ∧ q\\n⊢ q ∧ p"), end="")
    ```lean4
    /- tactic state:
      p q : Prop
      h : p ∧ q
      ⊢ q ∧ p
    -/
    ```
    >>> format_example("p : Prop\\n⊢ p → p", "intro h")["completion"]
    'intro h'
"""

from __future__ import annotations

OPEN_FENCE = "```lean4\n"
CLOSE_FENCE = "```\n"
# Sent to servers as stop strings: a completion is one tactic, never a new fence.
STOP = ("```",)


def format_prompt(state: str) -> str:
    """The prompt for proposing the next tactic in ``state`` (Lean-printed, see lean.goals)."""
    body = "\n".join("  " + line if line else "" for line in state.split("\n"))
    return f"{OPEN_FENCE}/- tactic state:\n{body}\n-/\n{CLOSE_FENCE}"


def format_example(state: str, tactic: str) -> dict[str, str]:
    """A prompt/completion training example (loss on the completion only)."""
    return {"prompt": format_prompt(state), "completion": tactic.strip()}


def parse_completion(text: str) -> str:
    """The tactic in a raw completion: cut at a fence a server did not trim, strip whitespace."""
    cut = text.find("```")
    return (text[:cut] if cut >= 0 else text).strip()
