r"""The tactic guard: reject tactics that would prove nothing, before they reach Lean.

``sorry``/``admit`` close goals without proof; ``native_decide`` trusts compiled code
(``Lean.ofReduceBool``); ``set_option``, ``#exit``, ``import``, ``open … in``, ``axiom``, ``unsafe``,
``implemented_by``, ``extern``… change the checker or escape the proof; ``trace``/``#print`` could
print a forged axiom report; ``decide +native``/``Lean.ofReduceBool`` trust compiled code;
``run_cmd``, ``macro``/``elab``/``syntax`` and command keywords (``theorem``, ``def``, a newline then
``end``/``open``/``#…``) would run code or start a new command after the proof.  The guard applies to
the model's text only: the dataset's header and preamble are trusted (:mod:`burnqed.lean.verify`).  The patterns are regular
expressions from ``lean.banned_tactics``, matched anywhere in the tactic text (comments included: a
false positive costs one candidate, a false negative a wrong proof).  ``.`` also matches a newline,
so ``open Foo`` and ``in`` on separate lines are caught like ``open Foo in …``.  Whole-proof
verification checks the axioms as well, so the guard is the first line of defence, not the only one.

Example::

    >>> from burnqed.config import LeanConfig
    >>> guard = TacticGuard.from_config(LeanConfig())
    >>> guard.check("intro h") is None
    True
    >>> print(guard.check("exact sorry"))
    banned by pattern \bsorry\b
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from burnqed.config import LeanConfig


class TacticGuard:
    """Compiled ``lean.banned_tactics``; :meth:`check` returns why a tactic is refused, or None."""

    def __init__(self, patterns: Iterable[str]) -> None:
        self.patterns = tuple(patterns)
        self._compiled = tuple(re.compile(p, re.DOTALL) for p in self.patterns)
        # One alternation answers the common case (nothing banned) in one scan.  Patterns with
        # numbered back-references would change meaning inside it: those go without the fast path.
        self._any = None
        if self.patterns and not any(re.search(r"\\\d", p) for p in self.patterns):
            self._any = re.compile("|".join(f"(?:{p})" for p in self.patterns), re.DOTALL)

    @classmethod
    def from_config(cls, cfg: LeanConfig) -> TacticGuard:
        return cls(cfg.banned_tactics)

    def check(self, tactic: str) -> str | None:
        """None if ``tactic`` may be sent to Lean, else the reason it may not."""
        if not tactic.strip():
            return "empty tactic"
        if "\x00" in tactic:  # Lean source cannot contain NUL; nothing legitimate does
            return "tactic contains a NUL character"
        if self._any is not None and self._any.search(tactic) is None:
            return None
        for pattern, regex in zip(self.patterns, self._compiled, strict=True):
            if regex.search(tactic):
                return f"banned by pattern {pattern}"
        return None


__all__ = ["TacticGuard"]
